/*
 * A long cyclic sweep for the bursts' sampled sets (test_exact_bursts.py,
 * docs/model.md "Knife edges"): K "A" lines swept in order, one reference
 * each, every one followed by a reference to one of H hot lines in turn.
 * Every reuse of an A line has a stack distance of exactly K - 1 + H lines
 * (every other A line and every hot line), longer than a burst's set keeps
 * exactly, so its distance is estimated from hash-selected lines.
 *
 *   sweep K H ROUNDS
 */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	long k = argc > 1 ? atol(argv[1]) : 23400, h = argc > 2 ? atol(argv[2]) : 300;
	long rounds = argc > 3 ? atol(argv[3]) : 6;
	volatile long *a = calloc((size_t)k * 8, sizeof *a), *b = calloc((size_t)h * 8, sizeof *b);
	long sum = 0, j = 0;
	if (!a || !b || k < 1 || h < 1)
		return 1;
	for (long r = 0; r < rounds; r++)
		for (long i = 0; i < k; i++) {
			sum += a[i * 8];
			sum += b[(j++ % h) * 8];
		}
	printf("%ld\n", sum);
	return 0;
}

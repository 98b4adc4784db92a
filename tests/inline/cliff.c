/*
 * A knife edge for the exact-distance bursts (test_exact_bursts.py): a
 * sweep over N "A" lines, one reference each, every reference followed by
 * one to a "B" line. In even sweeps B is one fixed line, in odd sweeps the
 * next of M lines of its own. So every reuse of an A line has the same
 * reuse distance (2N - 1 references) but a stack distance of about N in
 * one sweep of two (an even sweep behind it) and N + M in the other: an
 * estimate that depends only on the reuse distance puts the whole class on
 * one side of a cache between them.
 *
 *   cliff N M SWEEPS
 */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 300, m = argc > 2 ? atol(argv[2]) : 400;
	long sweeps = argc > 3 ? atol(argv[3]) : 400;
	volatile long *a = calloc((size_t)n * 8, sizeof *a),
	              *b = calloc((size_t)(m + 1) * 8, sizeof *b);
	long sum = 0, k = 0;
	if (!a || !b)
		return 1;
	for (long s = 0; s < sweeps; s++)
		for (long i = 0; i < n; i++) {
			sum += a[i * 8];
			sum += (s & 1) ? b[(1 + k++ % m) * 8] : b[0];
		}
	printf("%ld\n", sum);
	return 0;
}

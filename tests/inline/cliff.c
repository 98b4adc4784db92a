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
 * TAIL > 0 adds a second phase with code of its own: TAIL sweeps over 500
 * other lines, after the first's (its reuses have stack distance 499).
 *
 *   cliff N M SWEEPS [TAIL]
 */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 300, m = argc > 2 ? atol(argv[2]) : 400;
	long sweeps = argc > 3 ? atol(argv[3]) : 400, tail = argc > 4 ? atol(argv[4]) : 0;
	volatile long *a = calloc((size_t)n * 8, sizeof *a),
	              *b = calloc((size_t)(m + 1) * 8, sizeof *b), *c = calloc(500 * 8, sizeof *c);
	long sum = 0, k = 0;
	if (!a || !b || !c)
		return 1;
	for (long s = 0; s < sweeps; s++)
		for (long i = 0; i < n; i++) {
			sum += a[i * 8];
			sum += (s & 1) ? b[(1 + k++ % m) * 8] : b[0];
		}
	for (long s = 0; s < tail; s++)
		for (long i = 0; i < 500; i++)
			sum += c[i * 8];
	printf("%ld\n", sum);
	return 0;
}

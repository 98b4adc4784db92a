/*
 * Initialise, then compute, then use the initial data again: a large array
 * is written once, a long compute phase works on a small matrix, then the
 * large array is swept once more. The large array's only reuses span the
 * whole compute phase.
 *   initcompute [big_bytes] [small_n] [iterations]
 * (defaults 8 MiB, a 48 x 48 matrix of doubles, 40 matrix-vector products)
 */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	long big = argc > 1 ? atol(argv[1]) : 8L << 20;
	int n = argc > 2 ? atoi(argv[2]) : 48;
	int it = argc > 3 ? atoi(argv[3]) : 40;
	long nb;
	double *a, *m, *x, *y, sum = 0;
	if (big < 64 || n < 1 || n > 4096 || it < 1) {
		fprintf(stderr, "usage: initcompute [big_bytes] [small_n] [iterations]\n");
		return 2;
	}
	nb = big / 8;
	a = malloc(sizeof *a * (size_t)nb);
	m = malloc(sizeof *m * (size_t)n * n);
	x = malloc(sizeof *x * (size_t)n);
	y = malloc(sizeof *y * (size_t)n);
	if (!a || !m || !x || !y)
		return 1;
	for (long i = 0; i < nb; i++)
		a[i] = (double)(i % 1000) * 0.25;
	for (int i = 0; i < n * n; i++)
		m[i] = (i % 13) * 0.001;
	for (int i = 0; i < n; i++)
		x[i] = 1.0;
	for (int t = 0; t < it; t++) {
		for (int k = 0; k < 50; k++) {
			for (int i = 0; i < n; i++) {
				double acc = 0;
				for (int j = 0; j < n; j++)
					acc += m[i * n + j] * x[j];
				y[i] = acc;
			}
			for (int i = 0; i < n; i++)
				x[i] = y[i] * 0.5 + 0.1;
		}
	}
	for (long i = 0; i < nb; i++)
		sum += a[i] * x[i % n];
	printf("initcompute big=%ld n=%d it=%d sum=%.6e\n", big, n, it, sum);
	free(a);
	free(m);
	free(x);
	free(y);
	return 0;
}

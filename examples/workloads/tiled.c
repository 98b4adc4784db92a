/* Tiled matrix multiply C = A x B of n x n doubles (default n = 96) in t x t tiles (default 16). */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 96;
	int t = argc > 2 ? atoi(argv[2]) : 16;
	double *a, *b, *c, sum = 0;
	if (n <= 0 || n > 4096 || t <= 0 || t > n) {
		fprintf(stderr, "usage: tiled [n (1..4096)] [tile (1..n)]\n");
		return 2;
	}
	a = malloc(sizeof(double) * n * n);
	b = malloc(sizeof(double) * n * n);
	c = calloc((size_t)n * n, sizeof(double));
	if (!a || !b || !c)
		return 1;
	for (int i = 0; i < n * n; i++) {
		a[i] = (double)(i % 7);
		b[i] = (double)(i % 5);
	}
	for (int ii = 0; ii < n; ii += t)
		for (int kk = 0; kk < n; kk += t)
			for (int jj = 0; jj < n; jj += t)
				for (int i = ii; i < ii + t && i < n; i++)
					for (int k = kk; k < kk + t && k < n; k++) {
						double aik = a[i * n + k];
						for (int j = jj; j < jj + t && j < n; j++)
							c[i * n + j] += aik * b[k * n + j];
					}
	for (int i = 0; i < n * n; i++)
		sum += c[i];
	printf("tiled n=%d tile=%d checksum=%.0f\n", n, t, sum);
	free(a);
	free(b);
	free(c);
	return 0;
}

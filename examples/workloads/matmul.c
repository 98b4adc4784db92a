/* Naive matrix multiply C = A x B of n x n doubles (default n = 96): column walks of B. */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 96;
	double *a, *b, *c, sum = 0;
	if (n <= 0 || n > 4096) {
		fprintf(stderr, "usage: matmul [n (1..4096)]\n");
		return 2;
	}
	a = malloc(sizeof(double) * n * n);
	b = malloc(sizeof(double) * n * n);
	c = malloc(sizeof(double) * n * n);
	if (!a || !b || !c)
		return 1;
	for (int i = 0; i < n * n; i++) {
		a[i] = (double)(i % 7);
		b[i] = (double)(i % 5);
	}
	for (int i = 0; i < n; i++)
		for (int j = 0; j < n; j++) {
			double s = 0;
			for (int k = 0; k < n; k++)
				s += a[i * n + k] * b[k * n + j];
			c[i * n + j] = s;
		}
	for (int i = 0; i < n * n; i++)
		sum += c[i];
	printf("matmul n=%d checksum=%.0f\n", n, sum);
	free(a);
	free(b);
	free(c);
	return 0;
}

/* 5-point Jacobi stencil on an n x n grid of doubles, swept it times (args: n it). */
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 1024, it = argc > 2 ? atoi(argv[2]) : 20;
	double *a = malloc(sizeof(double) * n * n), *b = malloc(sizeof(double) * n * n);
	for (int i = 0; i < n * n; i++)
		a[i] = b[i] = (i % 7) * 0.5;
	for (int t = 0; t < it; t++) {
		for (int i = 1; i < n - 1; i++)
			for (int j = 1; j < n - 1; j++)
				b[i * n + j] =
				    0.2 * (a[i * n + j] + a[(i - 1) * n + j] + a[(i + 1) * n + j] +
				           a[i * n + j - 1] + a[i * n + j + 1]);
		double *tmp = a;
		a = b;
		b = tmp;
	}
	double s = 0;
	for (int i = 0; i < n * n; i++)
		s += a[i];
	printf("%f\n", s);
	return 0;
}

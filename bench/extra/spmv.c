/* Sparse matrix-vector product, nnz per row near the diagonal, CSR-like, it times (args: n nnz it).
 */
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 200000, nnz = argc > 2 ? atoi(argv[2]) : 16,
	    it = argc > 3 ? atoi(argv[3]) : 10;
	int *col = malloc(sizeof(int) * n * nnz);
	double *val = malloc(sizeof(double) * n * nnz), *x = malloc(sizeof(double) * n),
	       *y = malloc(sizeof(double) * n);
	unsigned r = 5;
	for (long i = 0; i < (long)n * nnz; i++) {
		r = r * 1103515245u + 12345u;
		col[i] = (i / nnz + (int)((r >> 8) % 2048) - 1024 + n) % n;
		val[i] = 1.0 / (1 + i % 5);
	}
	for (int i = 0; i < n; i++)
		x[i] = 1;
	for (int t = 0; t < it; t++) {
		for (int i = 0; i < n; i++) {
			double s = 0;
			for (int k = 0; k < nnz; k++)
				s += val[(long)i * nnz + k] * x[col[(long)i * nnz + k]];
			y[i] = s;
		}
		double *tmp = x;
		x = y;
		y = tmp;
	}
	printf("%f\n", x[0] + x[n / 2]);
	return 0;
}

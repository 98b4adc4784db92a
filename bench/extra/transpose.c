/* Naive out-of-place transpose of an n x n float matrix, it times (args: n it). */
#include <stdio.h>
#include <stdlib.h>
int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 2048, it = argc > 2 ? atoi(argv[2]) : 5;
	float *a = malloc(sizeof(float) * n * n), *b = malloc(sizeof(float) * n * n);
	for (int i = 0; i < n * n; i++)
		a[i] = i;
	for (int t = 0; t < it; t++)
		for (int i = 0; i < n; i++)
			for (int j = 0; j < n; j++)
				b[j * n + i] = a[i * n + j] + t;
	double s = 0;
	for (int i = 0; i < n * n; i += 17)
		s += b[i];
	printf("%f\n", s);
	return 0;
}

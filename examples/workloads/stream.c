/* Stream: the triad a[i] = b[i] + s * c[i] over three arrays of n doubles (default 1M), repeated.
 */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1L << 20;
	long passes = argc > 2 ? atol(argv[2]) : 4;
	double *a, *b, *c, sum = 0;
	if (n < 1 || n > (1L << 28) || passes < 1) {
		fprintf(stderr, "usage: stream [doubles per array (1..256M)] [passes]\n");
		return 2;
	}
	a = malloc(sizeof *a * (size_t)n);
	b = malloc(sizeof *b * (size_t)n);
	c = malloc(sizeof *c * (size_t)n);
	if (!a || !b || !c)
		return 1;
	for (long i = 0; i < n; i++) {
		b[i] = (double)(i % 11);
		c[i] = (double)(i % 13);
	}
	for (long p = 0; p < passes; p++)
		for (long i = 0; i < n; i++)
			a[i] = b[i] + 0.5 * (double)(p + 1) * c[i];
	for (long i = 0; i < n; i++)
		sum += a[i];
	printf("stream n=%ld passes=%ld checksum=%.1f\n", n, passes, sum);
	free(a);
	free(b);
	free(c);
	return 0;
}

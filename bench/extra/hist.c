/* Byte-pair histogram of n random bytes into bins counters, three passes (args: n bins). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1 << 26;
	int bins = argc > 2 ? atoi(argv[2]) : 4096;
	unsigned char *d = malloc(n);
	unsigned *h = calloc(bins, sizeof *h);
	unsigned x = 1;
	for (long i = 0; i < n; i++) {
		x = x * 1664525u + 1013904223u;
		d[i] = x >> 24;
	}
	for (int r = 0; r < 3; r++)
		for (long i = 0; i + 1 < n; i++)
			h[((d[i] << 8) | d[i + 1]) % bins]++;
	unsigned long s = 0;
	for (int i = 0; i < bins; i++)
		s += (unsigned long)h[i] * i;
	printf("%lu\n", s);
	return 0;
}

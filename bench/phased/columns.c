/*
 * A knife edge: pairs of columns of a row-major matrix of doubles walked
 * together with an accumulator kept in memory (as PolyBench's correlation
 * does), so every reuse of a column line sees about 2 x rows other lines.
 * With rows 260 those reuses sit just above 512 lines (32 KiB of 64-byte
 * lines): exact LRU misses them all at 32 KiB and none at 40 KiB.
 *   columns [rows] [cols]   (defaults 260, 160)
 */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	int rows = argc > 1 ? atoi(argv[1]) : 260, cols = argc > 2 ? atoi(argv[2]) : 160;
	double *d, *c;
	if (rows < 1 || cols < 2 || rows > 100000 || cols > 100000) {
		fprintf(stderr, "usage: columns [rows] [cols]\n");
		return 2;
	}
	d = malloc(sizeof *d * (size_t)rows * cols);
	c = malloc(sizeof *c * (size_t)cols * cols);
	if (!d || !c)
		return 1;
	for (long i = 0; i < (long)rows * cols; i++)
		d[i] = (double)(i % 17) * 0.1;
	for (int i = 0; i < cols - 1; i++) {
		for (int j = i + 1; j < cols; j++) {
			volatile double *acc = &c[(long)i * cols + j];
			*acc = 0;
			for (int k = 0; k < rows; k++)
				*acc += d[(long)k * cols + i] * d[(long)k * cols + j];
			c[(long)j * cols + i] = *acc;
		}
	}
	double s = 0;
	for (long i = 0; i < (long)cols * cols; i += 7)
		s += c[i];
	printf("columns rows=%d cols=%d sum=%.6e\n", rows, cols, s);
	free(d);
	free(c);
	return 0;
}

/* Strided walk: touch one long every stride bytes of a buffer (default 16 MiB, 256 B), repeated. */
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	long bytes = argc > 1 ? atol(argv[1]) : 16L << 20;
	long stride = argc > 2 ? atol(argv[2]) : 256;
	long passes = argc > 3 ? atol(argv[3]) : 8;
	long *buf, sum = 0, step, n;
	if (bytes < 64 || bytes > (1L << 32) || stride < 8 || stride % 8 || passes < 1) {
		fprintf(stderr,
		        "usage: stride [bytes (64..4G)] [stride (multiple of 8)] [passes]\n");
		return 2;
	}
	n = bytes / (long)sizeof(long);
	step = stride / (long)sizeof(long);
	buf = calloc((size_t)n, sizeof *buf);
	if (!buf)
		return 1;
	for (long p = 0; p < passes; p++)
		for (long i = 0; i < n; i += step)
			buf[i] += p + i;
	for (long i = 0; i < n; i += step)
		sum += buf[i];
	printf("stride bytes=%ld stride=%ld passes=%ld checksum=%ld\n", bytes, stride, passes, sum);
	free(buf);
	return 0;
}

/*
 * Two alternating phases: a sweep over a large array (default 4 MiB) and
 * random reads of a small one (default 32 KiB), rounds times (default 8).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	long big = argc > 1 ? atol(argv[1]) : 4L << 20;
	long small = argc > 2 ? atol(argv[2]) : 32L << 10;
	long rounds = argc > 3 ? atol(argv[3]) : 8;
	long nb, ns;
	uint32_t *a, *s, x = 2463534242u;
	uint64_t sum = 0;
	if (big < 64 || big > (1L << 32) || small < 64 || small > (1L << 32) || rounds < 1) {
		fprintf(stderr, "usage: phases [big bytes] [small bytes] [rounds]\n");
		return 2;
	}
	nb = big / 4;
	ns = small / 4;
	a = malloc(sizeof *a * (size_t)nb);
	s = malloc(sizeof *s * (size_t)ns);
	if (!a || !s)
		return 1;
	for (long i = 0; i < nb; i++)
		a[i] = (uint32_t)i;
	for (long i = 0; i < ns; i++)
		s[i] = (uint32_t)(i * 7);
	for (long r = 0; r < rounds; r++) {
		for (long i = 0; i < nb; i += 4) /* phase 1: sweep, one word per 16 bytes */
			sum += a[i];
		for (long i = 0; i < nb / 4;
		     i++) { /* phase 2: as many random reads of the small array */
			x ^= x << 13, x ^= x >> 17, x ^= x << 5;
			sum += s[x % (uint32_t)ns];
		}
	}
	printf("phases big=%ld small=%ld rounds=%ld checksum=%llu\n", big, small, rounds,
	       (unsigned long long)sum);
	free(a);
	free(s);
	return 0;
}

/*
 * Two working sets alternating in rounds: a small hot array read over and
 * over, then one sweep of a large array reading a word every stride bytes,
 * rounds times. The large array's reuses span the small phase; a cache that
 * holds both arrays has no misses but the cold ones.
 *   alternate [small_bytes] [big_bytes] [rounds] [small_refs_per_round] [stride]
 * (defaults 16 KiB, 7.5 MiB, 6 rounds, 250000 references of the small
 * array, a stride of 64 bytes: one reference per line of the large array)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	long small = argc > 1 ? atol(argv[1]) : 16L << 10;
	long big = argc > 2 ? atol(argv[2]) : 15L << 19;
	long rounds = argc > 3 ? atol(argv[3]) : 6;
	long hot = argc > 4 ? atol(argv[4]) : 250000;
	long stride = argc > 5 ? atol(argv[5]) / 8 : 8;
	long ns, nb;
	uint64_t *s, *b, sum = 0;
	if (small < 64 || big < 64 || rounds < 1 || hot < 1 || stride < 1) {
		fprintf(stderr, "usage: alternate [small_bytes] [big_bytes] [rounds] [small_refs] "
		                "[stride]\n");
		return 2;
	}
	ns = small / 8;
	nb = big / 8;
	s = malloc(sizeof *s * (size_t)ns);
	b = malloc(sizeof *b * (size_t)nb);
	if (!s || !b)
		return 1;
	for (long i = 0; i < ns; i++)
		s[i] = (uint64_t)i * 3;
	for (long i = 0; i < nb; i++)
		b[i] = (uint64_t)i;
	for (long r = 0; r < rounds; r++) {
		for (long k = 0; k < hot; k++)
			sum += s[k % ns];
		for (long i = 0; i < nb; i += stride)
			sum += b[i];
	}
	printf("alternate small=%ld big=%ld rounds=%ld sum=%llu\n", small, big, rounds,
	       (unsigned long long)sum);
	free(s);
	free(b);
	return 0;
}

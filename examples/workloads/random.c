/* Random updates (GUPS-like): table[x % n] ^= x for a xorshift sequence x; n longs (default 1M). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1L << 20;
	long updates = argc > 2 ? atol(argv[2]) : 4L << 20;
	uint64_t *table, x = 0x2545f4914f6cdd1dull, sum = 0;
	if (n < 1 || n > (1L << 28) || updates < 1) {
		fprintf(stderr, "usage: random [table longs (1..256M)] [updates]\n");
		return 2;
	}
	table = malloc(sizeof *table * (size_t)n);
	if (!table)
		return 1;
	for (long i = 0; i < n; i++)
		table[i] = (uint64_t)i;
	for (long u = 0; u < updates; u++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		table[x % (uint64_t)n] ^= x;
	}
	for (long i = 0; i < n; i++)
		sum += table[i];
	printf("random n=%ld updates=%ld checksum=%llu\n", n, updates, (unsigned long long)sum);
	free(table);
	return 0;
}

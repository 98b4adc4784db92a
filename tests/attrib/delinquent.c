/*
 * One known delinquent load among many that hit: each step of a random
 * walk over a large array (the load on the line marked DELINQUENT) lands on
 * a line last touched long ago and misses in any cache smaller than the
 * array, while the loop over a small, hot array around it always hits. The
 * tests find the marked line by its comment.
 *
 *   delinquent [STEPS] [BIG_KIB]    (defaults 1000000 steps, 16384 KiB)
 *
 * BIG_KIB must be a power of two. The large array comes from calloc and is
 * never written: its first touches are all cold misses, and the cache
 * behaviour of the run is that of the walk alone.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define HOT 256 /* unsigned ints: 1 KiB, always cached */
#define HOT_PER_STEP 8

static unsigned hot[HOT];

static uint64_t walk(const uint32_t *big, uint64_t mask, uint64_t steps)
{
	uint64_t sum = 0, at = 1;
	for (uint64_t s = 0; s < steps; s++) {
		for (uint64_t k = 0; k < HOT_PER_STEP; k++)
			sum += hot[(s * HOT_PER_STEP + k) % HOT];
		at = at * 6364136223846793005ull + 1442695040888963407ull;
		sum += big[(at >> 24) & mask]; /* DELINQUENT */
	}
	return sum;
}

int main(int argc, char **argv)
{
	uint64_t steps = argc > 1 ? strtoull(argv[1], NULL, 0) : 1000000;
	uint64_t kib = argc > 2 ? strtoull(argv[2], NULL, 0) : 16384;
	uint64_t n = kib * 1024 / sizeof(uint32_t);
	uint32_t *big;
	if (n < 2 || (n & (n - 1)) != 0) {
		fprintf(stderr, "delinquent: BIG_KIB must be a power of two\n");
		return 2;
	}
	if (!(big = calloc(n, sizeof *big)))
		return 1;
	for (int i = 0; i < HOT; i++)
		hot[i] = (unsigned)(i ^ steps);
	/* Forget what was stored: the walk must load the hot array, not fold it. */
	__asm__ volatile("" : : "r"(hot) : "memory");
	printf("%llu\n", (unsigned long long)walk(big, n - 1, steps));
	free(big);
	return 0;
}

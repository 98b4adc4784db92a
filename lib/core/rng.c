/* xoshiro256** (Blackman & Vigna), seeded by splitmix64, and the sampling gap. */
#include <math.h>

#include "core.h"

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

void rng_seed(rng *r, uint64_t seed)
{
	uint64_t x = seed;
	for (int i = 0; i < 4; i++)
		r->s[i] = splitmix64(&x);
}

static inline uint64_t rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

uint64_t rng_next(rng *r)
{
	uint64_t *s = r->s;
	uint64_t result = rotl(s[1] * 5, 7) * 9;
	uint64_t t = s[1] << 17;
	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rotl(s[3], 45);
	return result;
}

double rng_uniform(rng *r)
{
	/* 53 random bits mapped to (0, 1]. */
	return ((double)(rng_next(r) >> 11) + 1.0) * 0x1.0p-53;
}

double rng_gap_log(double mean)
{
	return mean > 1.0 ? log1p(-1.0 / mean) : 0.0;
}

uint64_t rng_gap_with(rng *r, double gap_log)
{
	if (!(gap_log < 0.0))
		return 1;
	/* Inverse CDF of the geometric distribution with p = 1/mean, support >= 1:
	 * floor(q) + 1 with q = log(u) / log1p(-p) >= 0, so the conversion to an
	 * integer truncates exactly as floor would (and calls no libm). */
	double q = log(rng_uniform(r)) / gap_log;
	if (!(q < 1.8e19))
		return UINT64_MAX;
	return q < 0.0 ? 1 : (uint64_t)q + 1;
}

uint64_t rng_gap(rng *r, double mean)
{
	return rng_gap_with(r, rng_gap_log(mean));
}

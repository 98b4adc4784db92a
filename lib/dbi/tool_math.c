/*
 * log and log1p for the dbi tool, which links no libm: the sampler core's
 * gaps (lib/core/rng.c: floor(log(u) / log1p(-1/period)) + 1) need them.
 *
 * Both reduce their argument to 2^e (1 + f) with 1 + f in [sqrt(1/2),
 * sqrt(2)), where f is exact (Sterbenz), and sum log(1 + f) = 2 atanh(s),
 * s = f / (2 + f), as f - s (f - 2 P(z)) with P(z) = z/3 + z^2/5 + ... +
 * z^11/23, z = s^2 <= 0.0295: the series' tail is below 1e-18 of the
 * result, and only the small correction s (f - 2P) carries rounding error.
 * e ln 2 is added in two parts (ln2_hi has 32 significant bits, so e ln2_hi
 * is exact). The result is within about one unit in the last place of
 * glibc's, so a gap differs from the inline runtime's (which uses glibc)
 * only when log(u) / gap_log falls within ~1e-16 relative of an integer:
 * about once in 10^10 draws at the periods period auto reaches
 * (tests/dbi/test_tool_math.c measures both).
 *
 * The names are log and log1p so that rng.c, compiled into the tool as it
 * is, calls these; the test builds them under other names (TOOL_LOG,
 * TOOL_LOG1P).
 */
#include <stdint.h>
#include <string.h>

#ifndef TOOL_LOG
#define TOOL_LOG log
#define TOOL_LOG1P log1p
#endif

double TOOL_LOG(double x);
double TOOL_LOG1P(double x);

static const double ln2_hi = 0x1.62e42fee00000p-1;
static const double ln2_lo = 0x1.a39ef35793c76p-33;
static const double sqrt2 = 1.4142135623730951;

static uint64_t bits_of(double x)
{
	uint64_t b;
	memcpy(&b, &x, sizeof b);
	return b;
}

static double of_bits(uint64_t b)
{
	double x;
	memcpy(&x, &b, sizeof x);
	return x;
}

/* log(1 + f) - f, for 1 + f in [sqrt(1/2), sqrt(2)). */
static double log1p_reduced_tail(double f)
{
	double s = f / (2.0 + f), z = s * s, p;
	p = 1.0 / 23;
	p = p * z + 1.0 / 21;
	p = p * z + 1.0 / 19;
	p = p * z + 1.0 / 17;
	p = p * z + 1.0 / 15;
	p = p * z + 1.0 / 13;
	p = p * z + 1.0 / 11;
	p = p * z + 1.0 / 9;
	p = p * z + 1.0 / 7;
	p = p * z + 1.0 / 5;
	p = p * z + 1.0 / 3;
	p *= z;
	/* log(1 + f) = 2s + 2s P(z), and 2s = f - s f (from s (2 + f) = f). */
	return -s * (f - 2.0 * p);
}

/*
 * x (positive, finite, normal) as 2^*e m with m in [sqrt(1/2), sqrt(2)).
 */
static double split(double x, int *e)
{
	uint64_t b = bits_of(x);
	int ex = (int)((b >> 52) & 0x7ff) - 1023;
	double m = of_bits((b & 0x000fffffffffffffull) | 0x3ff0000000000000ull);
	if (m > sqrt2) {
		m *= 0.5;
		ex++;
	}
	*e = ex;
	return m;
}

double TOOL_LOG(double x)
{
	double m, f;
	int e, scale = 0;
	if (!(x > 0.0)) /* 0, negative or NaN */
		return x == 0.0 ? -1.0 / 0.0 : (x - x) / (x - x);
	if (x > 1.7976931348623157e308)
		return x;    /* +inf */
	if (x < 0x1p-1022) { /* subnormal: scale into the normal range */
		x *= 0x1p54;
		scale = -54;
	}
	m = split(x, &e);
	e += scale;
	f = m - 1.0; /* exact */
	return (e * ln2_hi + f) + (e * ln2_lo + log1p_reduced_tail(f));
}

double TOOL_LOG1P(double x)
{
	double u, m, f, c;
	int e;
	if (x != x || x > 1.7976931348623157e308)
		return x;
	if (x <= -1.0)
		return x == -1.0 ? -1.0 / 0.0 : (x - x) / (x - x);
	/* 1 + x in [sqrt(1/2), sqrt(2)): x itself is f, exactly (the period
	 * auto case: x = -1/period, period >= 4). */
	if (x >= -0.2928932188134524 && x < 0.41421356237309503)
		return x + log1p_reduced_tail(x);
	u = 1.0 + x;
	/* c: what rounding 1 + x lost; log(1 + x) = log(u) + c/u to first order. */
	c = u > 2.0 ? 1.0 - (u - x) : x - (u - 1.0);
	m = split(u, &e);
	f = m - 1.0;
	return (e * ln2_hi + f) + (e * ln2_lo + log1p_reduced_tail(f) + c / u);
}

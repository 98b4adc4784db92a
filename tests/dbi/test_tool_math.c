/*
 * The dbi tool's own log and log1p (lib/dbi/tool_math.c: the tool links no
 * libm) against glibc's: within 2 units in the last place over random
 * arguments of the kinds the sampler uses (uniform draws in (0, 1], and
 * -1/period), special values handled, and the sampling gaps they give
 * (lib/core/rng.c's floor(log(u) / log1p(-1/period)) + 1) equal to glibc's
 * for every draw tried, at periods from 2 to 2^24 (period auto reaches 2^20
 * after some 10^11 references). Two results a unit in the last place apart
 * give different gaps when log(u) / log1p(-1/period), about the gap, lies
 * within that unit of an integer: a chance of about gap x 2^-52 a draw
 * (at 2^40, 3 draws in 4 million differed).
 */
#define TOOL_LOG tool_log
#define TOOL_LOG1P tool_log1p
#include "../../lib/dbi/tool_math.c"

#include <math.h>
#include <stdio.h>

static double ulps(double got, double want)
{
	double step;
	if (got == want)
		return 0;
	step = nextafter(fabs(want), INFINITY) - fabs(want);
	return fabs(got - want) / step;
}

static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

int main(void)
{
	uint64_t s = 88172645463325252ull, gaps = 0, gap_diffs = 0;
	double worst_log = 0, worst_log1p = 0;
	int bad = 0;
	for (int i = 0; i < 4000000; i++) {
		uint64_t r = xorshift(&s);
		double u = ((double)(r >> 11) + 1.0) * 0x1.0p-53; /* rng_uniform's range */
		double x = -1.0 / (1.0 + (double)(r % 100000000u) / 7.0);
		double y = ldexp(u, (int)(r % 400) - 200);
		double e;
		if ((e = ulps(tool_log(u), log(u))) > worst_log)
			worst_log = e;
		if ((e = ulps(tool_log(y), log(y))) > worst_log)
			worst_log = e;
		if ((e = ulps(tool_log1p(x), log1p(x))) > worst_log1p)
			worst_log1p = e;
		if ((e = ulps(tool_log1p(-x * 3.0), log1p(-x * 3.0))) > worst_log1p)
			worst_log1p = e;
		/* A gap as rng_gap_with draws it, at a period from 2 to 2^24. */
		{
			double period =
			    ldexp(1.0 + (double)(r & 0xff) / 256.0, 1 + (int)(r >> 58) % 24);
			double q0 = log(u) / log1p(-1.0 / period);
			double q1 = tool_log(u) / tool_log1p(-1.0 / period);
			gaps++;
			if ((uint64_t)q0 != (uint64_t)q1)
				gap_diffs++;
		}
	}
	printf("log: worst %.2f ulp; log1p: worst %.2f ulp; gaps: %llu of %llu differ\n", worst_log,
	       worst_log1p, (unsigned long long)gap_diffs, (unsigned long long)gaps);
	bad |= worst_log > 2.0 || worst_log1p > 2.0 || gap_diffs != 0;
	bad |= tool_log(1.0) != 0.0 || tool_log1p(0.0) != 0.0 || !isinf(tool_log(0.0)) ||
	       !isnan(tool_log(-1.0)) || !isinf(tool_log1p(-1.0)) || !isnan(tool_log1p(-2.0)) ||
	       tool_log(0x1p-1074) != log(0x1p-1074) || !isinf(tool_log(INFINITY));
	if (bad)
		printf("FAIL\n");
	return bad;
}

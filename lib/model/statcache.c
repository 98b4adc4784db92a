/*
 * StatCache (Berg & Hagersten): the miss ratio R of a fully associative
 * random-replacement cache of L lines solves, per group,
 *   g(R) = sum_inside w_s f_L((R + c) d_s) + extra - R S = 0,
 * where f_L(n) = 1 - (1 - 1/L)^n, S is the group's sample weight, the sum
 * runs over the reuses that start and end in the group, extra is what
 * misses regardless of R: the censored weight (a reuse too far to measure:
 * a miss in every cache) plus the expected misses of the reuses that end
 * here after crossing other groups (statcache_time.c), and c is the
 * group's rate of cold misses, which evict lines too (model_pressure). With
 * one group and c = 0 this is the stationary equation of docs/model.md; R
 * never counts cold misses (the curve adds them when asked).
 */
#include <math.h>
#include <stdlib.h>

#include <gsl/gsl_errno.h>
#include <gsl/gsl_roots.h>

#include "model.h"

typedef struct sc_fn {
	const model_data *m;
	const model_group *g;
	double lg;    /* log1p(-1/L) < 0 */
	double c;     /* cold-miss rate added to R in the survival */
	double extra; /* weight that misses whatever R is */
} sc_fn;

/*
 * sum_s wi_s (1 - exp(-x d_s)) over the group's inside samples, x = -(R +
 * c) lg. Entries with x d < 1e-5 use the series x d - (x d)^2 / 2
 * (relative error below 2e-11) from prefix sums; entries with x d > 40
 * contribute wi (exp(-40) is 4e-18); only those between need an exponential.
 */
static double sc_sum(const sc_fn *f, double x)
{
	const model_data *m = f->m;
	const model_group *g = f->g;
	size_t b = g->off, e = g->off + g->n;
	size_t lo, hi;
	double sum;
	if (!(x > 0.0))
		return 0.0;
	lo = model_lower_bound(m->d, b, e, 1e-5 / x);
	hi = model_lower_bound(m->d, lo, e, nextafter(40.0 / x, INFINITY));
	sum = x * m->pwdi[g->pre + (lo - b)] - 0.5 * x * x * m->pwd2i[g->pre + (lo - b)];
	sum += m->pwi[g->pre + g->n] - m->pwi[g->pre + (hi - b)];
	for (size_t i = lo; i < hi; i++)
		sum -= m->wi[i] * expm1(-x * m->d[i]);
	return sum;
}

static double sc_g(double R, void *params)
{
	const sc_fn *f = params;
	return sc_sum(f, -(R + f->c) * f->lg) + f->extra - R * f->g->S;
}

double statcache_group_ratio(const model_data *m, size_t gi, double L, double extra, double c,
                             double hi, void *solver)
{
	const model_group *g = &m->groups[gi];
	sc_fn fn;
	gsl_function F;
	gsl_root_fsolver *s = solver;
	double lo, up, glo, gup, r;

	if (!(g->S > 0.0))
		return 0.0;
	fn.m = m;
	fn.g = g;
	fn.extra = extra;
	fn.c = c;
	if (L < 2.0) {
		/* One line: every reuse with another reference between misses. */
		r = (g->Wi - g->W0i + extra) / g->S;
		return r < 1.0 ? r : 1.0;
	}
	fn.lg = log1p(-1.0 / L);
	if (!(hi > 0.0) || hi > 1.0)
		hi = 1.0;

	glo = sc_g(0.0, &fn);
	if (glo > 0.0) {
		/* g(0) > 0 (misses whatever R is, or cold misses evicting): bracket [0, hi]. */
		lo = 0.0;
		up = hi;
		gup = sc_g(up, &fn);
		if (gup > 0.0 && up < 1.0) {
			lo = up;
			glo = gup;
			up = 1.0;
			gup = sc_g(up, &fn);
		}
		if (gup >= 0.0)
			return up; /* everything misses (up to rounding) */
	} else {
		/* g(0) = 0 and g concave: a root in (0, 1] iff g'(0) > 0. */
		double slope = -fn.lg * g->Wdi - g->S;
		if (!(slope > 0.0))
			return 0.0;
		up = hi;
		gup = sc_g(up, &fn);
		if (gup > 0.0) {
			if (up >= 1.0)
				return 1.0;
			lo = up;
			glo = gup;
			up = 1.0;
			gup = sc_g(up, &fn);
			if (gup >= 0.0)
				return 1.0;
		} else {
			/* Halve until g > 0: the root lies in [r, 2r], never at 0. */
			lo = up;
			glo = gup;
			while (!(glo > 0.0)) {
				if (glo == 0.0 && lo == up)
					return up;
				up = lo;
				gup = glo;
				lo *= 0.5;
				if (lo < 1e-300)
					return 0.0;
				glo = sc_g(lo, &fn);
			}
		}
	}
	if (gup == 0.0)
		return up;
	F.function = sc_g;
	F.params = &fn;
	if (gsl_root_fsolver_set(s, &F, lo, up) != GSL_SUCCESS)
		return 0.5 * (lo + up);
	for (int it = 0; it < 200; it++) {
		if (gsl_root_fsolver_iterate(s) != GSL_SUCCESS)
			break;
		if (gsl_root_test_interval(gsl_root_fsolver_x_lower(s), gsl_root_fsolver_x_upper(s),
		                           1e-15, 1e-10) == GSL_SUCCESS)
			break;
	}
	r = gsl_root_fsolver_root(s);
	return r < 0.0 ? 0.0 : (r > 1.0 ? 1.0 : r);
}

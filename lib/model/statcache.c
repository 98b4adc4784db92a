/*
 * StatCache (Berg & Hagersten): the miss ratio R of a fully associative
 * random-replacement cache of L lines solves, per window,
 *   g(R) = sum_finite w_s f_L(R d_s) + extra - R S = 0,
 * where f_L(n) = 1 - (1 - 1/L)^n, S is the window's sample weight, and extra
 * is the censored weight (a reuse too far to measure: a miss in every cache)
 * plus, when cold misses are counted, the dangling weight.
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
	double extra; /* weight that misses in any cache */
} sc_fn;

/* First index in [lo, hi) of m->d with d >= v (or hi). */
static size_t lower_bound(const double *d, size_t lo, size_t hi, double v)
{
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (d[mid] < v)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/*
 * sum_s w_s (1 - exp(-x d_s)) over the group's finite samples, x = -R lg.
 * Entries with x d < 1e-5 use the series x d - (x d)^2 / 2 (relative error
 * below 2e-11) from prefix sums; entries with x d > 40 contribute w (exp(-40)
 * is 4e-18); only those between need an exponential.
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
	lo = lower_bound(m->d, b, e, 1e-5 / x);
	hi = lower_bound(m->d, lo, e, nextafter(40.0 / x, INFINITY));
	sum = x * m->pwd[g->pre + (lo - b)] - 0.5 * x * x * m->pwd2[g->pre + (lo - b)];
	sum += m->pw[g->pre + g->n] - m->pw[g->pre + (hi - b)];
	for (size_t i = lo; i < hi; i++)
		sum -= m->w[i] * expm1(-x * m->d[i]);
	return sum;
}

static double sc_g(double R, void *params)
{
	const sc_fn *f = params;
	return sc_sum(f, -R * f->lg) + f->extra - R * f->g->S;
}

double statcache_group_ratio(const model_data *m, size_t gi, double L, bool cold, double hi,
                             void *solver)
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
	fn.extra = g->C + (cold ? g->D : 0.0);
	if (L < 2.0) {
		/* One line: every reuse with another reference between misses. */
		r = (g->W - g->W0 + fn.extra) / g->S;
		return r < 1.0 ? r : 1.0;
	}
	fn.lg = log1p(-1.0 / L);
	if (!(hi > 0.0) || hi > 1.0)
		hi = 1.0;

	if (fn.extra > 0.0) {
		/* g(0) = extra > 0: bracket [0, hi]. */
		lo = 0.0;
		up = hi;
		gup = sc_g(up, &fn);
		if (gup > 0.0 && up < 1.0) {
			lo = up;
			up = 1.0;
			gup = sc_g(up, &fn);
		}
		if (gup >= 0.0)
			return up; /* everything misses (up to rounding) */
		glo = fn.extra;
	} else {
		/* g(0) = 0 and g concave: a root in (0, 1] iff g'(0) > 0. */
		double slope = -fn.lg * g->Wd - g->S;
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
	(void)glo;
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

lomas_status statcache_curve(const model_data *m, const double *lines, size_t n, bool cold,
                             double *ratios)
{
	gsl_root_fsolver *s = gsl_root_fsolver_alloc(gsl_root_fsolver_brent);
	model_mean mean;
	if (!s)
		return error_set(LOMAS_ENOMEM, "out of memory allocating the root solver");
	for (size_t j = 0; j < n; j++)
		ratios[j] = 0.0;
	mean = model_mean_of(m);
	for (size_t gi = 0; gi < m->ngroups; gi++) {
		const model_group *g = &m->groups[gi];
		/* Windows without a reference count fall back to sample weight. */
		double wt = model_mean_weight(&mean, g);
		double hi = 1.0;
		if (!(g->S > 0.0) || !(wt > 0.0))
			continue;
		for (size_t j = 0; j < n; j++) {
			/* R is non-increasing in L: the last root bounds the next. */
			double r = statcache_group_ratio(m, gi, lines[j], cold, hi, s);
			if (r <= 0.0)
				break;
			ratios[j] += wt * r;
			hi = r;
		}
	}
	for (size_t j = 0; j < n; j++)
		ratios[j] /= mean.total;
	gsl_root_fsolver_free(s);
	return LOMAS_OK;
}

/*
 * Confidence intervals for the curve: a Poisson bootstrap over samples.
 *
 * Each reference was sampled independently (Poisson sampling, docs/architecture.md), so the
 * sampling variance is reproduced by giving every sample an independent Poisson(1) multiplier on
 * its weight (Hanley & MacGibbon's Poisson bootstrap, the analogue of resampling for that design)
 * and running the model again; the interval at a size is the percentile interval of the replicates.
 * The groups (segments) of the original profile are kept in every replicate: the interval is
 * conditional on them, and re-segmenting each replicate would cost the
 * most. Deterministic for a seed: the multipliers come from the library's
 * seeded generator in sample order.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

#define CI_DEFAULT_LEVEL 0.95
#define CI_DEFAULT_RESAMPLES 200u
#define CI_MAX_RESAMPLES 100000u

/* Poisson(1) by multiplying uniforms until the product drops below 1/e (2 draws on average). */
static unsigned poisson1(rng *r)
{
	double prod = rng_uniform(r);
	unsigned k = 0;
	while (prod > 0.36787944117144233) {
		prod *= rng_uniform(r);
		k++;
	}
	return k;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* The q-quantile of v[0..n), sorted (linear interpolation between order statistics). */
static double quantile(const double *v, size_t n, double q)
{
	double pos = q * (double)(n - 1);
	size_t i = (size_t)floor(pos);
	double f = pos - (double)i;
	if (i + 1 >= n)
		return v[n - 1];
	return v[i] + f * (v[i + 1] - v[i]);
}

/* One replicate: p's samples with Poisson(1) multipliers, groups as in m0, into out. */
static lomas_status replicate(const lomas_profile *p, const model_data *m0, lomas_policy policy,
                              const double *lines, size_t n, unsigned flags, rng *r,
                              lomas_sample *buf, double *out)
{
	struct lomas_profile q = *p;
	model_opts o = model_default_opts(policy);
	model_data m;
	size_t k = 0;
	lomas_status st;
	for (size_t i = 0; i < p->samples.n; i++) {
		unsigned c = poisson1(r);
		if (c == 0)
			continue;
		buf[k] = p->samples.items[i];
		buf[k++].weight *= (double)c;
	}
	q.samples.items = buf;
	q.samples.n = k;
	q.samples.cap = k;
	o.base = m0;
	o.moments = policy == LOMAS_POLICY_RANDOM && n < MODEL_GRID_MIN;
	o.lru = policy == LOMAS_POLICY_LRU;
	if ((st = model_data_build(&q, &o, &m)))
		return st;
	st = model_run(&m, policy, lines, n, flags, o.footprint, out);
	model_data_free(&m);
	return st;
}

lomas_status lomas_model_curve_ci(const lomas_profile *p, lomas_policy policy,
                                  const uint64_t *cache_bytes, size_t n, uint32_t line_bytes,
                                  unsigned flags, double level, unsigned resamples, uint64_t seed,
                                  double *ratios, double *lo, double *hi)
{
	error_clear();
	uint32_t line = 0;
	model_opts o;
	model_data m0;
	size_ix *ord = NULL;
	double *lines = NULL, *point = NULL, *reps = NULL, *col = NULL;
	lomas_sample *buf = NULL;
	size_t ok = 0;
	rng r;
	lomas_status st =
	    model_check_args(p, policy, cache_bytes, n, line_bytes, flags, ratios, &line);
	if (st)
		return st;
	if (n > 0 && (!lo || !hi))
		return error_set(LOMAS_EINVAL, "lomas_model_curve_ci: NULL argument");
	if (level == 0.0)
		level = CI_DEFAULT_LEVEL;
	if (!(level > 0.0 && level < 1.0))
		return error_set(LOMAS_EINVAL, "confidence level %g is not between 0 and 1", level);
	if (resamples == 0)
		resamples = CI_DEFAULT_RESAMPLES;
	if (resamples < 2 || resamples > CI_MAX_RESAMPLES)
		return error_set(LOMAS_EINVAL, "resamples %u is not between 2 and %u", resamples,
		                 CI_MAX_RESAMPLES);
	o = model_default_opts(policy);
	o.moments = policy == LOMAS_POLICY_RANDOM && n < MODEL_GRID_MIN;
	o.lru = policy == LOMAS_POLICY_LRU;
	if ((st = model_data_build(p, &o, &m0)))
		return st;
	if (n == 0) {
		model_data_free(&m0);
		return LOMAS_OK;
	}
	if ((st = model_sort_sizes(cache_bytes, n, line, &ord, &lines)))
		goto out;
	point = malloc(n * sizeof *point);
	reps = malloc((size_t)resamples * n * sizeof *reps);
	col = malloc((size_t)resamples * sizeof *col);
	buf = malloc((p->samples.n ? p->samples.n : 1) * sizeof *buf);
	if (!point || !reps || !col || !buf) {
		st = error_set(LOMAS_ENOMEM, "out of memory for %u resamples", resamples);
		goto out;
	}
	if ((st = model_run(&m0, policy, lines, n, flags, o.footprint, point)))
		goto out;
	rng_seed(&r, seed);
	for (unsigned b = 0; b < resamples; b++) {
		st = replicate(p, &m0, policy, lines, n, flags, &r, buf, reps + ok * n);
		if (st == LOMAS_ERANGE)
			continue; /* every multiplier 0: a replicate with no samples */
		if (st)
			goto out;
		ok++;
	}
	if (ok < 2) {
		st = error_set(LOMAS_ERANGE, "too few samples for a confidence interval");
		goto out;
	}
	for (size_t j = 0; j < n; j++) {
		for (size_t b = 0; b < ok; b++)
			col[b] = reps[b * n + j];
		qsort(col, ok, sizeof *col, cmp_double);
		ratios[ord[j].ix] = point[j];
		lo[ord[j].ix] = fmin(point[j], quantile(col, ok, 0.5 - level / 2.0));
		hi[ord[j].ix] = fmax(point[j], quantile(col, ok, 0.5 + level / 2.0));
	}
	error_clear();
out:
	free(ord);
	free(lines);
	free(point);
	free(reps);
	free(col);
	free(buf);
	model_data_free(&m0);
	return st;
}

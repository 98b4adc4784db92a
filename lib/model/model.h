/*
 * lib/model internal interface: the prepared sample data shared by the
 * StatCache (random replacement) and StatStack (LRU) models.
 */
#ifndef LOMAS_MODEL_H
#define LOMAS_MODEL_H

#include <math.h>

#include "../core/core.h"

/*
 * f_L(n) = 1 - (1 - 1/L)^n: the probability that a line is evicted from a
 * random-replacement cache of L lines after n misses. lg = log1p(-1/L).
 */
static inline double model_f(double n, double lg)
{
	if (!(n > 0.0))
		return 0.0;
	return -expm1(n * lg);
}

/* One group of samples (a window, or the whole profile). */
typedef struct model_group {
	size_t off, n; /* entries [off, off + n): distinct distances, ascending */
	size_t pre;    /* prefix sums at [pre, pre + n]: pre = off + group index */
	double S;      /* total sample weight (every state) */
	double W;      /* weight of finite (reused) samples */
	double D;      /* dangling weight */
	double C;      /* censored weight */
	double refs;   /* weight of the group in the mean (its reference count) */
} model_group;

/* Samples grouped and sorted once per curve call. */
typedef struct model_data {
	size_t ngroups;
	model_group *groups;
	size_t n;
	uint64_t *dist; /* distinct distances per group, ascending */
	double *d;      /* the same as double */
	double *w;      /* summed weight of the samples with that distance */
	double *pw;     /* exclusive prefix sums of w within the group */
	double *pwd;    /* ... of w * d */
	double *pwd2;   /* ... of w * d * d */
} model_data;

/*
 * Build model data from p: one group per window (per_window) or one group for
 * the whole profile. LOMAS_EFORMAT for samples naming unknown windows or
 * states; LOMAS_ERANGE when no sample has weight.
 */
lomas_status model_data_build(const struct lomas_profile *p, bool per_window, model_data *m);
void model_data_free(model_data *m);

/*
 * Miss ratios of the random-replacement model (StatCache) for n sizes in
 * lines (ascending order required), into ratios. cold: count cold misses.
 */
lomas_status statcache_curve(const model_data *m, const double *lines, size_t n, bool cold,
			     double *ratios);
/* StatCache root R of one group for a cache of L lines (0 <= R <= 1). */
double statcache_group_ratio(const model_data *m, size_t gi, double L, bool cold, double hi,
			     void *solver);

/* Miss ratios of the LRU model (StatStack), any order of sizes in lines. */
lomas_status statstack_curve(const model_data *m, const double *lines, size_t n, bool cold,
			     double *ratios);

/*
 * StatStack over the whole profile instead of per window (the public API
 * uses per-window groups; this is kept for comparison in the tests).
 */
lomas_status model_curve_lru_global(const lomas_profile *p, const uint64_t *cache_bytes,
				    size_t n, unsigned flags, double *ratios);

#endif

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

/* One group of samples (a window, a block of windows, or the whole profile). */
typedef struct model_group {
	size_t off, n; /* entries [off, off + n): distinct distances, ascending */
	size_t pre;    /* prefix sums at [pre, pre + n]: pre = off + group index */
	double S;      /* total sample weight (every state) */
	double W;      /* weight of finite (reused) samples */
	double D;      /* dangling weight */
	double C;      /* censored weight */
	double W0;     /* weight of reuses at distance 0 (never a miss) */
	double Wd;     /* sum of w d over finite samples */
	double Wd2;    /* sum of w d^2 */
	double refs;   /* weight of the group in the mean (its windows' references) */
} model_group;

/* Samples grouped and sorted once per curve call. */
typedef struct model_data {
	size_t ngroups;
	model_group *groups;
	size_t n;
	double *d;    /* distinct distances per group, ascending */
	double *w;    /* summed weight of the samples with that distance */
	double *pw;   /* exclusive prefix sums of w within the group */
	double *pwd;  /* ... of w * d (only when built with moments) */
	double *pwd2; /* ... of w * d * d (only when built with moments) */
} model_data;

/*
 * Build model data from p, grouping samples by window: blocks of `block`
 * consecutive windows of each thread (1 = one group per window), or one
 * group for the whole profile when block is 0. moments: also the prefix
 * sums pwd and pwd2. LOMAS_EFORMAT for samples naming unknown windows or
 * states; LOMAS_ERANGE when no sample has weight.
 */
lomas_status model_data_build(const struct lomas_profile *p, size_t block, bool moments,
                              model_data *m);
void model_data_free(model_data *m);

/*
 * How the curves average their per-window miss ratios: weighted by the
 * windows' reference counts when the profile has them, else by sample weight.
 * total is the denominator, summed over the groups that have samples.
 */
typedef struct model_mean {
	bool by_refs;
	double total;
} model_mean;

model_mean model_mean_of(const model_data *m);

/* A group's weight in that mean. */
static inline double model_mean_weight(const model_mean *w, const model_group *g)
{
	return w->by_refs ? g->refs : g->S;
}

/*
 * Miss ratios of the random-replacement model (StatCache) for n sizes in
 * lines (ascending order required), into ratios. cold: count cold misses.
 */
lomas_status statcache_curve(const model_data *m, const double *lines, size_t n, bool cold,
                             double *ratios);
/*
 * The same from F(x) tabulated per window on a geometric grid (see
 * statcache_grid.c): much faster for many sizes, within ~1.2e-5 of the exact
 * roots. Sizes ascending. lomas_model_curve uses it from MODEL_GRID_MIN sizes.
 */
lomas_status statcache_curve_grid(const model_data *m, const double *lines, size_t n, bool cold,
                                  double *ratios);
#define MODEL_GRID_MIN 8

/*
 * StatCache root R of group gi for a cache of L lines (0 <= R <= 1) with
 * GSL's Brent solver (tolerance 1e-10); hi: a known upper bound on R (the
 * root for a smaller cache, or 1); solver: a gsl_root_fsolver (Brent).
 */
double statcache_group_ratio(const model_data *m, size_t gi, double L, bool cold, double hi,
                             void *solver);

/* Miss ratios of the LRU model (StatStack), any order of sizes in lines. */
lomas_status statstack_curve(const model_data *m, const double *lines, size_t n, bool cold,
                             double *ratios);

/*
 * StatStack over the whole profile instead of per window (the public API
 * uses per-window groups; this is kept for comparison in the tests).
 */
lomas_status model_curve_lru_global(const lomas_profile *p, const uint64_t *cache_bytes, size_t n,
                                    unsigned flags, double *ratios);

/* ------------------------------------------ per-instruction attribution */

/*
 * Each sample's probability that its reuse misses in a fully associative
 * cache of `lines` lines (>= 1) under policy, into prob[i] for sample i of
 * p (attribution.c): random f_L(R_w d) with the window's StatCache root,
 * LRU [SD_w(d) >= L]; censored samples 1, dangling ones 1 with
 * LOMAS_MODEL_COLD, else 0. Per window, sum w_s prob_s = R_w S_w: the
 * curve's misses. flags: LOMAS_MODEL_COLD only.
 */
lomas_status model_sample_miss_probs(const lomas_profile *p, lomas_policy policy, double lines,
                                     unsigned flags, double *prob);
/*
 * The factor turning a window's sample weights into its references, as the
 * curves weigh windows (model_mean_of): refs_w / S_w, or 1 when the profile
 * has no window references; 0 for windows without samples. scale has one
 * entry per window; *total gets the curves' denominator (references of the
 * windows with samples, or their sample weight).
 */
lomas_status model_window_scales(const lomas_profile *p, double *scale, double *total);

/* One instruction's share of the misses (hot.c). */
typedef struct model_hot_pc {
	uint64_t pc;
	double misses; /* estimated misses: sum of weight x probability x scale */
	double unseen; /* the part of misses from dangling (cold) or censored samples */
	double refs;   /* estimated references: weight x scale of the samples it started */
	double reuses; /* estimated reuses it made: weight x scale of samples it ended */
	uint64_t started, ended; /* samples started and ended here */
} model_hot_pc;

typedef struct model_hot {
	model_hot_pc *pcs; /* by misses, largest first (then by pc) */
	size_t n;
	size_t delinquent; /* the first `delinquent` pcs: >= 90 % of the misses */
	double misses;     /* all estimated misses */
	double refs;       /* the curves' denominator: misses / refs = the miss ratio */
} model_hot;

/*
 * Attribute the misses of a cache of `lines` lines to instructions: a
 * reused sample's miss to its end pc (the instruction that touched the line
 * again and missed); a dangling (with LOMAS_MODEL_COLD) or censored
 * sample's to its start pc (the last instruction seen to touch the line:
 * the one that reuses it is not known). Per window the probabilities are
 * scaled by model_window_scales, so out->misses / out->refs is the curve's
 * miss ratio.
 */
lomas_status model_hot_build(const lomas_profile *p, lomas_policy policy, double lines,
                             unsigned flags, model_hot *out);
void model_hot_free(model_hot *h);

#define MODEL_DELINQUENT_COVER 0.9  /* the delinquent set's share of the misses */
#define MODEL_DELINQUENT_SHARE 0.01 /* and the share that makes any pc delinquent */

#endif

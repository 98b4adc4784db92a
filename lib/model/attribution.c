/*
 * Per-sample miss probabilities (DESIGN.md section 5, "Per-instruction
 * attribution"): the model's curves, taken apart sample by sample. Each
 * sample is a reference r and its reuse r' (the next touch of the line,
 * made by the sample's end pc); the probability that r' misses in a cache
 * of L lines is
 *   random (StatCache)  f_L(R_w d) = 1 - (1 - 1/L)^(R_w d), with R_w the
 *                       root of the sample's window w (statcache.c): r'
 *                       misses when the line was evicted by one of the
 *                       R_w d misses between r and r';
 *   LRU (StatStack)     1 when SD_w(d) >= L, else 0, with SD_w the
 *                       window's expected stack distance (statstack.c).
 * Censored samples (reuse too far to measure) miss in every cache, and
 * dangling ones (never reused) are the cold misses: 1 with
 * LOMAS_MODEL_COLD, else 0 -- exactly what the curves count. So within a
 * window sum_s w_s p_s = R_w S_w: summed per window the probabilities give
 * the curve's misses (test_attribution checks this against the curve).
 *
 * This is the one place that turns the model into per-sample
 * probabilities; the per-window model here is the stationary form of the
 * equations, and a time-aware model replaces the body of
 * model_sample_miss_probs without changing its callers.
 */
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_roots.h>

#include "model.h"

/* First index in [lo, hi) of d with d[i] >= v (or hi). */
static size_t first_at_least(const double *d, size_t lo, size_t hi, double v)
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
 * The StatCache root R_w of every window (group) into root: censored
 * reuses miss whatever the size (the extra), and first touches evict lines
 * like any miss (the cold rate c_w, model_cold_rates), as in the curves.
 */
static lomas_status window_roots(const model_data *m, double lines, double *root)
{
	double *c = malloc((m->ngroups ? m->ngroups : 1) * sizeof *c);
	gsl_root_fsolver *s = gsl_root_fsolver_alloc(gsl_root_fsolver_brent);
	lomas_status st = LOMAS_OK;
	if (!s || !c) {
		st = error_set(LOMAS_ENOMEM, "out of memory allocating the root solver");
		goto out;
	}
	if ((st = model_cold_rates(m, c)))
		goto out;
	for (size_t g = 0; g < m->ngroups; g++) {
		/* root + c: the misses that evict, per reference */
		root[g] = statcache_group_ratio(m, g, lines, m->groups[g].C, c[g], 1.0, s) + c[g];
	}
out:
	if (s)
		gsl_root_fsolver_free(s);
	free(c);
	return st;
}

/* SD of each distinct distance of each group (statstack.c's recurrence) into sd. */
static void stack_distances(const model_data *m, double *sd)
{
	for (size_t gi = 0; gi < m->ngroups; gi++) {
		const model_group *g = &m->groups[gi];
		double acc = 0.0, prev = 0.0;
		if (!(g->S > 0.0))
			continue;
		/* P(RD > k) is constant between consecutive distinct distances. */
		for (size_t i = 0; i < g->n; i++) {
			double d = m->d[g->off + i];
			acc += (d - prev) * (g->S - m->pw[g->pre + i]) / g->S;
			sd[g->off + i] = acc;
			prev = d;
		}
	}
}

lomas_status model_sample_miss_probs(const lomas_profile *p, lomas_policy policy, double lines,
                                     unsigned flags, double *prob)
{
	model_data m;
	lomas_status st;
	bool cold = (flags & LOMAS_MODEL_COLD) != 0;
	double *aux = NULL;
	if (!p || !prob)
		return error_set(LOMAS_EINVAL, "model_sample_miss_probs: NULL argument");
	if (policy != LOMAS_POLICY_RANDOM && policy != LOMAS_POLICY_LRU)
		return error_set(LOMAS_EINVAL, "unknown replacement policy %d", (int)policy);
	if (!(lines >= 1.0))
		return error_set(LOMAS_EINVAL, "a cache of %g lines cannot be modelled", lines);
	/* One group per window: group g is window g, in window order. */
	model_opts o = {.grouping = MODEL_GROUP_WINDOW,
	                .lru = policy == LOMAS_POLICY_LRU,
	                .moments = policy == LOMAS_POLICY_RANDOM}; /* Brent needs the moments */
	if ((st = model_data_build(p, &o, &m)))
		return st;
	if (m.ngroups != p->windows.n) {
		model_data_free(&m);
		return error_set(LOMAS_EFORMAT, "windows and model groups disagree");
	}
	if (policy == LOMAS_POLICY_RANDOM)
		aux = malloc((m.ngroups ? m.ngroups : 1) * sizeof *aux);
	else
		aux = malloc((m.n ? m.n : 1) * sizeof *aux);
	if (!aux) {
		model_data_free(&m);
		return error_set(LOMAS_ENOMEM, "out of memory attributing misses");
	}
	if (policy == LOMAS_POLICY_RANDOM)
		st = window_roots(&m, lines, aux);
	else
		stack_distances(&m, aux);
	if (st)
		goto out;
	{
		const double lg = lines >= 2.0 ? log1p(-1.0 / lines) : 0.0;
		for (size_t i = 0; i < p->samples.n; i++) {
			const lomas_sample *s = &p->samples.items[i];
			const model_group *g = &m.groups[s->window];
			double d, pr;
			if (s->state == LOMAS_SAMPLE_CENSORED) {
				prob[i] = 1.0;
				continue;
			}
			if (s->state == LOMAS_SAMPLE_DANGLING) {
				prob[i] = cold ? 1.0 : 0.0;
				continue;
			}
			d = (double)sample_distance(s);
			if (policy == LOMAS_POLICY_RANDOM) {
				if (lines < 2.0) /* one line: any other reference between evicts */
					pr = d > 0.0 ? 1.0 : 0.0;
				else
					pr = model_f(aux[s->window] * d, lg);
			} else {
				size_t k = first_at_least(m.d, g->off, g->off + g->n, d);
				pr = k < g->off + g->n && aux[k] >= lines ? 1.0 : 0.0;
			}
			prob[i] = pr;
		}
	}
out:
	free(aux);
	model_data_free(&m);
	return st;
}

lomas_status model_window_scales(const lomas_profile *p, double *scale, double *total)
{
	double *S = calloc(p->windows.n ? p->windows.n : 1, sizeof *S);
	double refs = 0.0, sw = 0.0;
	bool by_refs;
	if (!S)
		return error_set(LOMAS_ENOMEM, "out of memory attributing misses");
	for (size_t i = 0; i < p->samples.n; i++) {
		const lomas_sample *s = &p->samples.items[i];
		if (s->window < p->windows.n)
			S[s->window] += s->weight;
	}
	/* The same mean as the curves' (model_mean_of): by the windows'
	 * references when any window with samples has some, else by weight. */
	for (size_t w = 0; w < p->windows.n; w++) {
		if (S[w] > 0.0) {
			refs += (double)p->windows.items[w].refs;
			sw += S[w];
		}
	}
	by_refs = refs > 0.0;
	for (size_t w = 0; w < p->windows.n; w++) {
		if (!(S[w] > 0.0))
			scale[w] = 0.0;
		else
			scale[w] = by_refs ? (double)p->windows.items[w].refs / S[w] : 1.0;
	}
	*total = by_refs ? refs : sw;
	free(S);
	return LOMAS_OK;
}

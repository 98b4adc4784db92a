/*
 * Exact stack distances in the LRU curve (docs/model.md "Knife edges").
 *
 * A clock that sees every reference (the trace clock) records, with each
 * reused sample, the number of distinct lines its thread touched between
 * the sampled reference and its reuse (LOMAS_SAMPLE_EXACT_SD): the stack
 * distance StatStack estimates. A fully associative LRU cache of L lines
 * misses that reuse exactly when the distance is >= L, so such a sample
 * needs no estimate: near a cliff, where many reuses share one distance, a
 * few percent of estimation error flips whole classes between hit and
 * miss; the exact distance leaves only the sampling noise.
 *
 * The samples still make every group's distribution (the samples without
 * an exact distance need it, and merged profiles can mix both): statstack_curve
 * places every reuse by its estimate first, then this moves each exact
 * one's weight from the sizes its estimate misses to those its distance
 * misses. The estimate is recomputed here exactly as statstack_curve made
 * it (the same function of the same data, on the path the sample took: a
 * reuse inside its group, a crossing one, or one of a corrected class), so
 * the move leaves nothing behind. Cold and censored samples keep their
 * handling: only reused samples carry a distance.
 */
#include <stdlib.h>

#include "model.h"

lomas_status model_exact_sd_adjust(const model_data *m, const model_mean *mean, const double *lines,
                                   size_t n, const double *top, double *bucket)
{
	const lomas_profile *p = m->profile;
	double *fix = NULL, dsd[MODEL_DONORS_MAX], dw[MODEL_DONORS_MAX];
	model_donors donors;
	size_t k = 0;
	if (!m->nexact)
		return LOMAS_OK;
	if (!m->sample_g0 || !m->sample_g1 || !m->sample_fixed)
		return error_set(LOMAS_EINVAL, "exact stack distances without the samples' groups");
	if (model_donors_build(p, &donors))
		return error_set(LOMAS_ENOMEM, "out of memory building stack distances");
	if (m->nfix) {
		fix = malloc(m->nfix * sizeof *fix);
		if (!fix || model_fix_sds(m, fix)) {
			free(fix);
			model_donors_free(&donors);
			return error_set(LOMAS_ENOMEM, "out of memory building stack distances");
		}
	}
	for (size_t i = 0; i < p->samples.n; i++) {
		const lomas_sample *s = &p->samples.items[i];
		bool fixed = m->sample_fixed[i] != 0;
		uint32_t g0 = m->sample_g0[i], g1 = m->sample_g1[i];
		const model_group *g = &m->groups[g0];
		double wt, c, est;
		size_t j = fixed ? k++ : 0, nd = 0;
		if (s->state != LOMAS_SAMPLE_REUSED)
			continue;
		/* Without its own distance: its donors' (donors.c), if enough. */
		if (!(s->flags & LOMAS_SAMPLE_EXACT_SD) &&
		    !(nd = model_donors_of(&donors, s, dsd, dw)))
			continue;
		wt = model_mean_weight(mean, g);
		if (!(g->S > 0.0) || !(wt > 0.0))
			continue;
		/* The estimate statstack_curve placed it by, on the sample's path. */
		if (fixed)
			est = fix[j];
		else if (g1 != g0)
			est = model_reuse_sd(m, s->start, s->end, g0, g1);
		else
			est = model_stack_sum(m, g, (double)sample_distance(s));
		est = fmin(est, top[g->thread]);
		c = s->weight * wt / g->S;
		bucket[g->thread * (n + 1) + model_sizes_missed(lines, n, est)] -= c;
		if (!nd) {
			/* Exact: a miss at every size of at most `reserved` lines. */
			bucket[g->thread * (n + 1) +
			       model_sizes_missed(lines, n, (double)s->reserved)] += c;
			continue;
		}
		for (size_t d = 0; d < nd; d++)
			bucket[g->thread * (n + 1) + model_sizes_missed(lines, n, dsd[d])] +=
			    c * dw[d];
	}
	free(fix);
	model_donors_free(&donors);
	return LOMAS_OK;
}

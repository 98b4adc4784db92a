/*
 * Per-sample miss probabilities (docs/model.md, "Per-instruction
 * attribution"): the curves of lomas_model_curve, taken apart sample by
 * sample with the same model and options (model_default_opts: segments,
 * time-aware, reuse classes, footprint bound). Each sample is a reference
 * r and its reuse r' (the next touch of the line, made by the sample's end
 * pc); the probability that r' misses in a cache of L lines is
 *   random (StatCache)  f_L(M), M the expected misses that may evict the
 *                       line between r and r': (R_g + c_g) d for a reuse
 *                       inside its group g, and for one that crosses
 *                       groups the misses of every group it crosses, each
 *                       for its share (statcache_time.c), with the solved
 *                       ratios R and cold rates c of the curve;
 *   LRU (StatStack)     1 when its expected stack distance, rounded
 *                       (MODEL_SD_ROUND), reaches L, else 0: the SD of its
 *                       group for a reuse inside one, the time-aware SD
 *                       (model_reuse_sd) for one that crosses, the class
 *                       estimate blended in where its reuse class is
 *                       corrected (model_fix_sds), capped at the footprint
 *                       bound as the curve caps it.
 * Censored samples (reuse too far to measure) miss in every cache, and
 * dangling ones (never reused) are the cold misses: 1 with
 * LOMAS_MODEL_COLD, else 0 -- exactly what the curves count.
 *
 * The curves weigh each miss by the references its group stands for
 * (model_mean: refs_g / S_g) and, under random replacement, keep a share of
 * a thread's capacity misses by the footprint bound (model_footprint_keep);
 * mscale carries both per sample, so that
 *   sum_i w_i prob_i mscale_i / total = the curve's miss ratio.
 * StatStack counts a reuse in its start group, StatCache in its end group
 * (the miss happens there: R_g S_g sums the reuses that end in g).
 *
 * Summed over the reuses that end in group g, the StatCache probabilities
 * are R_g S_g - C_g, the group's equation, and they are scaled per group
 * to make that exact: the fixed point is solved to a tolerance (1e-7 per
 * ratio, statcache_time.c: the residual, model_attr.resid, is of that
 * order), and a group whose equation asks for more misses than it has
 * references (more reuses end in it than samples start there: the end of
 * a sweep whose reuses span other phases) has its ratio capped at 1 by the
 * solver, and so its reuses' probabilities by the same factor
 * (model_attr.capped). So the list and the curve never disagree.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

/* The references one unit of sample weight in group g stands for in the curves' mean. */
static double group_scale(const model_data *m, const model_mean *mean, uint32_t g)
{
	const model_group *gr = &m->groups[g];
	double wt = model_mean_weight(mean, gr);
	return gr->S > 0.0 && wt > 0.0 ? wt / gr->S : 0.0;
}

/* StatCache: prob of the reused samples, and mscale of every sample but the dangling ones. */
static lomas_status random_probs(const lomas_profile *p, model_data *m, double lines, bool bound,
                                 const model_mean *mean, model_attr *at)
{
	double *prob = at->prob, *mscale = at->mscale;
	size_t ng = m->ngroups;
	double *R = malloc((ng ? ng : 1) * sizeof *R), *c = malloc((ng ? ng : 1) * sizeof *c);
	double *P = malloc((ng + 1) * sizeof *P), *A = calloc(ng + 1, sizeof *A);
	double *keep = malloc((m->nthreads + 1) * sizeof *keep);
	double *corr = malloc((ng ? ng : 1) * sizeof *corr);
	double *kap = malloc((ng ? ng : 1) * sizeof *kap);
	const double lg = lines >= 2.0 ? log1p(-1.0 / lines) : 0.0;
	lomas_status st;
	if (!R || !c || !P || !A || !keep || !corr || !kap) {
		st = error_set(LOMAS_ENOMEM, "out of memory attributing misses");
		goto out;
	}
	if ((st = statcache_solve_time(m, &lines, 1, false, R, c)) ||
	    (st = model_evicting_cold(m, &lines, 1, kap)))
		goto out;
	/* P[k]: the expected misses of k's thread before group k (statcache_time.c). */
	for (size_t t = 0; t < m->nthreads; t++) {
		for (size_t g = m->thread_first[t]; g < m->thread_first[t + 1]; g++) {
			const model_group *gr = &m->groups[g];
			P[g] = g == m->thread_first[t]
			           ? 0.0
			           : P[g - 1] + (R[g - 1] + c[g - 1] * kap[g - 1]) *
			                            (double)(gr[-1].b - gr[-1].a);
		}
		keep[t] = bound ? model_footprint_keep(m, t, lines) : 1.0;
	}
	for (size_t i = 0; i < p->samples.n; i++) {
		const lomas_sample *s = &p->samples.items[i];
		uint32_t g0 = m->sample_g0[i], g1 = m->sample_g1[i];
		const model_group *G0 = &m->groups[g0], *G1 = &m->groups[g1];
		double d, M, pr;
		if (s->state == LOMAS_SAMPLE_DANGLING)
			continue;
		mscale[i] = group_scale(m, mean, g1) * keep[G0->thread];
		if (s->state == LOMAS_SAMPLE_CENSORED) {
			prob[i] = 1.0;
			continue;
		}
		d = (double)sample_distance(s);
		if (g1 == g0) {
			M = (R[g0] + c[g0] * kap[g0]) * d;
		} else {
			double in0 = (double)(G0->b - s->start - 1), in1 = (double)(s->end - G1->a);
			M = P[g1] - P[g0 + 1] + (R[g0] + c[g0] * kap[g0]) * in0 +
			    (R[g1] + c[g1] * kap[g1]) * in1;
		}
		/* One line: every other reference in between evicts it (statcache.c). */
		pr = lines < 2.0 ? (d > 0.0 ? 1.0 : 0.0) : model_f(M, lg);
		prob[i] = pr;
		A[g1] += s->weight * pr;
	}
	/* Scale each end group's reuses to its solved ratio: R_g S_g = their sum + C_g. */
	for (size_t g = 0; g < ng; g++) {
		const model_group *gr = &m->groups[g];
		double want = R[g] * gr->S - gr->C;
		corr[g] = A[g] > 0.0 ? (want > 0.0 ? want / A[g] : 0.0) : 1.0;
		if (corr[g] < 1.0 && R[g] >= 1.0)
			at->capped++;
		else if (gr->S > 0.0)
			at->resid = fmax(at->resid, fabs(A[g] - want) / gr->S);
	}
	for (size_t i = 0; i < p->samples.n; i++)
		if (p->samples.items[i].state == LOMAS_SAMPLE_REUSED)
			prob[i] *= corr[m->sample_g1[i]];
out:
	free(R);
	free(c);
	free(P);
	free(A);
	free(keep);
	free(corr);
	free(kap);
	return st;
}

/* StatStack: prob[i] of the reused samples (0 or 1), and mscale[i] of every sample. */
static lomas_status lru_probs(const lomas_profile *p, model_data *m, double lines, bool bound,
                              const model_mean *mean, double *prob, double *mscale)
{
	double *sd = malloc((p->samples.n ? p->samples.n : 1) * sizeof *sd);
	double dsd[MODEL_DONORS_MAX], dw[MODEL_DONORS_MAX];
	model_donors donors = {0};
	size_t nd;
	lomas_status st = LOMAS_OK;
	if (!sd) {
		st = error_set(LOMAS_ENOMEM, "out of memory attributing misses");
		goto out;
	}
	if ((m->nexact && (st = model_donors_build(p, &donors))) ||
	    (st = model_sample_sds(m, bound, sd)))
		goto out;
	for (size_t i = 0; i < p->samples.n; i++) {
		const lomas_sample *s = &p->samples.items[i];
		mscale[i] = group_scale(m, mean, m->sample_g0[i]);
		if (s->state == LOMAS_SAMPLE_CENSORED)
			prob[i] = 1.0;
		if (s->state != LOMAS_SAMPLE_REUSED)
			continue;
		prob[i] = lines - MODEL_SD_ROUND <= sd[i] ? 1.0 : 0.0;
		/* Without its own exact distance: the donors' (donors.c), as in the curve. */
		if (!(s->flags & LOMAS_SAMPLE_EXACT_SD) && m->nexact &&
		    (nd = model_donors_of(&donors, s, dsd, dw))) {
			prob[i] = 0.0;
			for (size_t d = 0; d < nd; d++)
				prob[i] += lines - MODEL_SD_ROUND <= dsd[d] ? dw[d] : 0.0;
		}
	}
out:
	free(sd);
	model_donors_free(&donors);
	return st;
}

lomas_status model_sample_miss_probs(const lomas_profile *p, lomas_policy policy, double lines,
                                     unsigned flags, model_attr *out)
{
	model_data m;
	model_opts o;
	model_mean mean;
	lomas_status st;
	bool cold = (flags & LOMAS_MODEL_COLD) != 0;
	size_t ns;
	if (!p || !out || !out->prob || !out->mscale || !out->rscale)
		return error_set(LOMAS_EINVAL, "model_sample_miss_probs: NULL argument");
	if (policy != LOMAS_POLICY_RANDOM && policy != LOMAS_POLICY_LRU)
		return error_set(LOMAS_EINVAL, "unknown replacement policy %d", (int)policy);
	if (!(lines >= 1.0))
		return error_set(LOMAS_EINVAL, "a cache of %g lines cannot be modelled", lines);
	/* The curve's model (model_curve_opts for one size), keeping each sample's groups. */
	o = model_default_opts(policy);
	o.lru = policy == LOMAS_POLICY_LRU;
	o.moments = policy == LOMAS_POLICY_RANDOM;
	o.per_sample = true;
	if ((st = model_data_build(p, &o, &m)))
		return st;
	ns = p->samples.n;
	mean = model_mean_of(&m);
	out->total = mean.total;
	out->resid = 0.0;
	out->capped = 0;
	for (size_t i = 0; i < ns; i++) {
		const lomas_sample *s = &p->samples.items[i];
		out->rscale[i] = group_scale(&m, &mean, m.sample_g0[i]);
		/* Dangling: a cold miss, in its start group (model_group_misses, statstack_curve).
		 */
		out->prob[i] = s->state == LOMAS_SAMPLE_DANGLING && cold ? 1.0 : 0.0;
		out->mscale[i] = out->rscale[i];
	}
	if (policy == LOMAS_POLICY_RANDOM)
		st = random_probs(p, &m, lines, o.footprint, &mean, out);
	else
		st = lru_probs(p, &m, lines, o.footprint, &mean, out->prob, out->mscale);
	model_data_free(&m);
	return st;
}

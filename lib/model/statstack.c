/*
 * StatStack (Eklov & Hagersten): the expected stack distance of a reuse of
 * distance d is SD(d) = sum_{k=0}^{d-1} P(RD > k) over the sampled
 * forward-distance distribution (dangling and censored samples count as
 * infinite); an LRU cache of L lines misses the reuse when SD(d) >= L.
 *
 * The public model applies it per window, like StatCache: a window's
 * distribution describes the references of that window, so programs whose
 * working set changes between phases are not blurred into one distribution.
 * test_accuracy measures both (model_curve_lru_global keeps the
 * whole-profile variant): on a phased trace per window gives 0.19 pp mean
 * absolute error against exact LRU where the whole profile gives 3.7 pp; on
 * stationary traces the whole profile is up to 0.3 pp better, because a
 * window's 256 samples put a little noise on SD near a sharp cliff (pooling
 * 4 or 16 windows did not remove that and hurt the phased trace).
 */
#include <stdlib.h>

#include "model.h"

lomas_status statstack_curve(const model_data *m, const double *lines, size_t n, bool cold,
                             double *ratios)
{
	double *sd = malloc((m->n ? m->n : 1) * sizeof *sd);
	model_mean mean;
	if (!sd)
		return error_set(LOMAS_ENOMEM, "out of memory building stack distances");
	for (size_t j = 0; j < n; j++)
		ratios[j] = 0.0;
	mean = model_mean_of(m);
	for (size_t gi = 0; gi < m->ngroups; gi++) {
		const model_group *g = &m->groups[gi];
		double wt = model_mean_weight(&mean, g);
		double acc = 0.0, prev = 0.0, fixed;
		if (!(g->S > 0.0) || !(wt > 0.0))
			continue;
		/* P(RD > k) is constant between consecutive distinct distances. */
		for (size_t i = 0; i < g->n; i++) {
			double d = m->d[g->off + i];
			acc += (d - prev) * (g->S - m->pw[g->pre + i]) / g->S;
			sd[g->off + i] = acc;
			prev = d;
		}
		fixed = g->C + (cold ? g->D : 0.0);
		for (size_t j = 0; j < n; j++) {
			/* SD is non-decreasing: the first entry with SD >= L and all after miss. */
			size_t lo = 0, hi = g->n;
			while (lo < hi) {
				size_t mid = lo + (hi - lo) / 2;
				if (sd[g->off + mid] < lines[j])
					lo = mid + 1;
				else
					hi = mid;
			}
			double miss = g->W - m->pw[g->pre + lo] + fixed;
			double r = miss / g->S;
			ratios[j] += wt * (r < 0.0 ? 0.0 : (r > 1.0 ? 1.0 : r));
		}
	}
	for (size_t j = 0; j < n; j++)
		ratios[j] /= mean.total;
	free(sd);
	return LOMAS_OK;
}

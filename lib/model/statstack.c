/*
 * StatStack (Eklov & Hagersten), time-aware: the stack distance of a reuse
 * from reference s to reference e is the number of distinct lines touched
 * in between, which is the number of references t in (s, e) whose own next
 * reuse lies beyond e (each distinct line's last touch before e). Its
 * expectation, with P_t the distribution of the group holding t:
 *   SD(s, e) = sum_{t=s+1}^{e-1} P_t(RD > e - 1 - t).
 * Over the references of one group g this is G_g(e - a) - G_g(e - b) for
 * its share [a, b) of the interval, with G_g(x) = sum_{j<x} P_g(RD > j)
 * (model_stack_sum). A reuse inside one group gets G_g(d), d = e - s - 1:
 * the stationary SD(d) = sum_{k<d} P(RD > k) of docs/model.md. An LRU
 * cache of L lines misses the reuse when SD >= L.
 *
 * Beyond a group's largest finite distance, P_g(RD > j) is its dangling and
 * censored fraction: a group the interval crosses far from its end costs
 * one multiplication.
 */
#include <math.h>
#include <stdlib.h>

#include "model.h"

double model_stack_sum(const model_data *m, const model_group *g, double x)
{
	/* G(x) = x - (1/S) sum_{d_i < x} w_i (x - d_i) (docs/model.md). */
	size_t q;
	if (!(x > 0.0) || !(g->S > 0.0))
		return 0.0;
	q = g->pre + (model_lower_bound(m->d, g->off, g->off + g->n, x) - g->off);
	return x - (x * m->pw[q] - m->pwd[q]) / g->S;
}

/* Expected stack distance of the reuse (s, e) from group k0 to group k1 (time-aware). */
double model_reuse_sd(const model_data *m, uint64_t s, uint64_t e_, uint32_t k0, uint32_t k1)
{
	const model_group *g0 = &m->groups[k0], *g1 = &m->groups[k1];
	double e = (double)e_, sd;
	if (k0 == k1)
		return model_stack_sum(m, g0, (double)(e_ - s - 1));
	/* The start group's share: t in [s + 1, b0), lags [e - b0, d). */
	sd = model_stack_sum(m, g0, (double)(e_ - s - 1)) -
	     model_stack_sum(m, g0, e - (double)g0->b);
	/* The end group's share: t in [a1, e), lags [0, e - a1). */
	sd += model_stack_sum(m, g1, e - (double)g1->a);
	for (uint32_t k = k0 + 1; k < k1; k++) {
		const model_group *g = &m->groups[k];
		double lag = e - (double)g->b, len = (double)(g->b - g->a);
		if (!(g->S > 0.0))
			continue;
		if (lag >= g->dmax)
			sd += len * (g->D + g->C) / g->S;
		else
			sd += model_stack_sum(m, g, lag + len) - model_stack_sum(m, g, lag);
	}
	return sd;
}

/* Number of sizes (ascending) at most sd: the sizes a reuse with that SD misses. */
size_t model_sizes_missed(const double *lines, size_t n, double sd)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (lines[mid] - MODEL_SD_ROUND <= sd)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Per class sums for the ratio estimate. */
typedef struct cls_acc {
	double n, q, in, q2, in2, qin; /* members; sums of Q, N, Q^2, N^2, QN */
	double d;                      /* sum of d */
	double span, covered;          /* union length of the intervals so far; its end */
	double rho, var;               /* the ratio and its variance */
	double tau, lambda;            /* the model's bias variance; the ratio's weight */
} cls_acc;

/* Per (class, group) sums: the model's bias differs between groups. */
typedef struct cg_acc {
	uint32_t cls, group; /* cls UINT32_MAX: empty slot */
	double n, d, sd;
} cg_acc;

static size_t cg_slot(cg_acc *t, size_t mask, uint32_t cls, uint32_t group)
{
	size_t h = (size_t)(((uint64_t)cls << 32 | group) * 0x9e3779b97f4a7c15ull >> 20) & mask;
	while (t[h].cls != UINT32_MAX && (t[h].cls != cls || t[h].group != group))
		h = (h + 1) & mask;
	if (t[h].cls == UINT32_MAX) {
		t[h].cls = cls;
		t[h].group = group;
	}
	return h;
}

/*
 * The samples of the large reuse classes (classes.c). In one class, every
 * reuse's interval has some of its sampled references that are last touches
 * (Q, ht) out of all it has (N, in): rho = sum Q / sum N estimates the
 * fraction of the interval's references that are distinct lines, free of
 * the stationarity StatStack assumes, so rho d is another estimate of the
 * stack distance (exact for a cyclic walk, where every reference is a last
 * touch and rho = 1). Its variance is that of a ratio over clusters,
 * sum (Q - rho N)^2 / (sum N)^2, inflated by how much the intervals overlap
 * (samples counted in several), with a binomial floor. The model's SD and
 * rho d combine as SD + lambda (rho d - SD), lambda = b^2 / (b^2 + se^2) for
 * the mean difference b of the class's reuses in one group (the model's
 * bias differs between groups) and its standard error se: the ratio
 * estimate wins where it differs from the model by more than its noise.
 */
lomas_status model_fix_sds(const model_data *m, double *sd)
{
	size_t cap = 16;
	while (cap < 2 * m->nfix)
		cap *= 2;
	uint32_t *slot = big_alloc((m->nfix ? m->nfix : 1) * sizeof *slot);
	cls_acc *acc = calloc(m->nclass + 1, sizeof *acc);
	cg_acc *cg = big_alloc(cap * sizeof *cg);
	if (!slot || !acc || !cg) {
		big_free(slot);
		free(acc);
		big_free(cg);
		return error_set(LOMAS_ENOMEM, "out of memory building stack distances");
	}
	for (size_t i = 0; i < cap; i++)
		cg[i] = (cg_acc){.cls = UINT32_MAX};
	for (size_t i = 0; i < m->nfix; i++) {
		const model_fix *x = &m->fix[i];
		cls_acc *a = &acc[x->cls];
		double s = (double)x->s, e = (double)x->e;
		sd[i] = model_reuse_sd(m, x->s, x->e, x->g0, x->g1);
		a->n += 1.0;
		a->q += x->ht;
		a->in += x->in;
		a->q2 += x->ht * x->ht;
		a->in2 += x->in * x->in;
		a->qin += x->ht * x->in;
		a->d += x->d;
		/* Members come in start order: the union of their intervals. */
		if (s >= a->covered)
			a->span += e - s - 1.0;
		else if (e > a->covered)
			a->span += e - a->covered;
		if (e > a->covered)
			a->covered = e;
		slot[i] = (uint32_t)cg_slot(cg, cap - 1, x->cls, x->g0);
		cg[slot[i]].n += 1.0;
		cg[slot[i]].d += x->d;
		cg[slot[i]].sd += sd[i];
	}
	for (size_t c = 0; c < m->nclass; c++) {
		cls_acc *a = &acc[c];
		double var, rt, kappa;
		a->var = -1.0;
		if (!(a->in > 0.0) || !(a->n > 0.0))
			continue;
		a->rho = a->q / a->in;
		kappa = a->span > 0.0 ? fmax(1.0, a->d / a->span) : 1.0;
		var = (a->q2 - 2.0 * a->rho * a->qin + a->rho * a->rho * a->in2) / (a->in * a->in);
		rt = (a->q + 1.0) / (a->in + 2.0);
		a->var = fmax(var, rt * (1.0 - rt) / a->in) * kappa;
	}
	/* tau^2: the variance of the model's bias over the class's groups. */
	for (size_t k = 0; k < cap; k++) {
		cg_acc *g = &cg[k];
		cls_acc *a;
		double b, dbar;
		if (g->cls == UINT32_MAX)
			continue;
		a = &acc[g->cls];
		if (a->var < 0.0)
			continue;
		dbar = g->d / g->n;
		b = a->rho * dbar - g->sd / g->n;
		a->tau += g->n * (b * b - a->var * dbar * dbar);
	}
	for (size_t c = 0; c < m->nclass; c++) {
		cls_acc *a = &acc[c];
		double se2, dbar = a->d / a->n, tau2 = a->tau / a->n;
		a->lambda = 0.0;
		if (a->var < 0.0 || !(tau2 > 0.0))
			continue;
		se2 = a->var * dbar * dbar;
		a->lambda = tau2 / (tau2 + se2);
	}
	for (size_t i = 0; i < m->nfix; i++) {
		const model_fix *x = &m->fix[i];
		const cls_acc *a = &acc[x->cls];
		sd[i] = sd[i] + a->lambda * (a->rho * x->d - sd[i]);
	}
	big_free(slot);
	free(acc);
	big_free(cg);
	return LOMAS_OK;
}

lomas_status model_sample_sds(model_data *m, bool bound, double *sd)
{
	const lomas_profile *p = m->profile;
	double *gsd = malloc((m->n ? m->n : 1) * sizeof *gsd);
	double *fix = malloc((m->nfix ? m->nfix : 1) * sizeof *fix);
	double *top = malloc((m->nthreads + 1) * sizeof *top);
	lomas_status st = LOMAS_OK;
	size_t k = 0;
	if (!gsd || !fix || !top) {
		st = error_set(LOMAS_ENOMEM, "out of memory building stack distances");
		goto out;
	}
	if (!m->sample_g0 || !m->sample_g1 || !m->sample_fixed) {
		st = error_set(LOMAS_EINVAL, "the samples' stack distances without their groups");
		goto out;
	}
	if (m->nfix && (st = model_fix_sds(m, fix)))
		goto out;
	/* The footprint cap of statstack_curve. */
	for (size_t t = 0; t < m->nthreads; t++)
		top[t] = bound ? model_footprint_upper(m, t, 0.025) - 1.0 : INFINITY;
	/* Each group's SD at its distinct distances, as statstack_curve sums them. */
	for (size_t gi = 0; gi < m->ngroups; gi++) {
		const model_group *g = &m->groups[gi];
		double acc = 0.0, prev = 0.0;
		if (!(g->S > 0.0))
			continue;
		for (size_t i = 0; i < g->n; i++) {
			double d = m->d[g->off + i];
			acc += (d - prev) * (g->S - m->pw[g->pre + i]) / g->S;
			gsd[g->off + i] = acc;
			prev = d;
		}
	}
	for (size_t i = 0; i < p->samples.n; i++) {
		const lomas_sample *s = &p->samples.items[i];
		uint32_t g0 = m->sample_g0[i], g1 = m->sample_g1[i];
		const model_group *g = &m->groups[g0];
		double v;
		sd[i] = 0.0;
		if (s->state != LOMAS_SAMPLE_REUSED)
			continue;
		if (m->sample_fixed[i]) {
			v = fix[k++]; /* m->fix is in sample order */
		} else if (g1 != g0) {
			v = model_reuse_sd(m, s->start, s->end, g0, g1);
		} else {
			size_t j = model_lower_bound(m->d, g->off, g->off + g->n,
			                             (double)sample_distance(s));
			v = j < g->off + g->n ? gsd[j] : 0.0;
		}
		sd[i] = s->flags & LOMAS_SAMPLE_EXACT_SD ? (double)s->reserved
		                                         : fmin(v, top[g->thread]);
	}
	if (k != m->nfix)
		st = error_set(LOMAS_EFORMAT, "reuse classes and samples disagree");
out:
	free(gsd);
	free(fix);
	free(top);
	return st;
}

/* The corrected classes' reuses into bucket, their SD capped at top; -1 when out of memory. */
static int fix_classes(const model_data *m, const model_mean *mean, const double *lines, size_t n,
                       const double *top, double *bucket)
{
	double *sd = malloc(m->nfix * sizeof *sd);
	if (!sd || model_fix_sds(m, sd)) {
		free(sd);
		return -1;
	}
	for (size_t i = 0; i < m->nfix; i++) {
		const model_fix *x = &m->fix[i];
		const model_group *g = &m->groups[x->g0];
		double wt = model_mean_weight(mean, g), v;
		if (!(g->S > 0.0) || !(wt > 0.0))
			continue;
		v = fmin(sd[i], top[g->thread]);
		bucket[g->thread * (n + 1) + model_sizes_missed(lines, n, v)] += x->w * wt / g->S;
	}
	free(sd);
	return 0;
}

lomas_status statstack_curve(model_data *m, const double *lines, size_t n, bool bound, double *cap,
                             double *cold)
{
	/* bucket[t (n + 1) + k]: weight of thread t's reuses that miss exactly the k smallest
	 * sizes. */
	double *bucket = calloc(m->nthreads * (n + 1) + 1, sizeof *bucket);
	model_mean mean;
	double *top = malloc((m->nthreads + 1) * sizeof *top);
	if (!bucket || !top) {
		free(bucket);
		free(top);
		return error_set(LOMAS_ENOMEM, "out of memory building stack distances");
	}
	mean = model_mean_of(m);
	/*
	 * The footprint bound: no stack distance reaches a thread's line count.
	 * Its estimate is noisy, so SD is capped at an upper credible bound of
	 * it (97.5 %), not at the estimate: an LRU cliff sits at the footprint
	 * for a sweep over all the data, where the model's own SD places it
	 * better than a cut at the estimate would.
	 */
	for (size_t t = 0; t < m->nthreads; t++)
		top[t] = bound ? model_footprint_upper(m, t, 0.025) - 1.0 : INFINITY;
	for (size_t gi = 0; gi < m->ngroups; gi++) {
		const model_group *g = &m->groups[gi];
		double wt = model_mean_weight(&mean, g), *b = bucket + g->thread * (n + 1);
		double acc = 0.0, prev = 0.0, c;
		size_t k = 0;
		if (!(g->S > 0.0) || !(wt > 0.0))
			continue;
		c = wt / g->S;
		/* P(RD > k) is constant between consecutive distinct distances. */
		for (size_t i = 0; i < g->n; i++) {
			double d = m->d[g->off + i];
			acc += (d - prev) * (g->S - m->pw[g->pre + i]) / g->S;
			prev = d;
			/* SD is non-decreasing in d: the count of sizes missed only grows. */
			while (k < n && lines[k] - MODEL_SD_ROUND <= fmin(acc, top[g->thread]))
				k++;
			b[k] += c * m->wl[g->off + i];
		}
		/* Censored reuses miss in every cache; dangling samples are cold misses. */
		b[n] += c * g->C;
		for (size_t j = 0; j < n; j++)
			cold[j] += c * g->D;
	}
	for (size_t i = 0; i < m->ncross; i++) {
		const model_cross *x = &m->cross[i];
		const model_group *g = &m->groups[x->g0];
		double wt = model_mean_weight(&mean, g);
		if (x->fixed || !(g->S > 0.0) || !(wt > 0.0))
			continue;
		double sd = fmin(model_reuse_sd(m, x->s, x->e, x->g0, x->g1), top[g->thread]);
		bucket[g->thread * (n + 1) + model_sizes_missed(lines, n, sd)] += x->w * wt / g->S;
	}
	if (m->nfix && fix_classes(m, &mean, lines, n, top, bucket)) {
		free(bucket);
		free(top);
		return error_set(LOMAS_ENOMEM, "out of memory building stack distances");
	}
	/* Where a sample knows its exact stack distance, that and not the estimate. */
	if (m->nexact) {
		lomas_status st = model_exact_sd_adjust(m, &mean, lines, n, top, bucket);
		if (st) {
			free(bucket);
			free(top);
			return st;
		}
	}
	for (size_t t = 0; t < m->nthreads; t++) {
		const double *b = bucket + t * (n + 1);
		double acc = 0.0;
		for (size_t j = n; j-- > 0;) {
			acc += b[j + 1];
			cap[t * n + j] += acc;
		}
	}
	free(bucket);
	free(top);
	return LOMAS_OK;
}

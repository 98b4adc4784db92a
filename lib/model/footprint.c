/*
 * The footprint bound, and the assembly of a curve from the policies'
 * per-thread misses.
 *
 * A cache that holds every line a thread touches has no capacity misses
 * for it (LRU: no stack distance reaches the line count; random: nothing is
 * ever evicted). The dangling samples are the last touches of lines: each
 * line has exactly one, so with their weights they count the thread's
 * distinct lines, F = sum_dangling w (Horvitz-Thompson, unbiased). That
 * count is noisy (a few dangling samples for a small footprint), so the
 * bound is not a step at F: each size keeps its capacity misses in
 * proportion to the probability that the footprint exceeds it. With k
 * dangling samples at period P, k is Poisson(F / P); with a flat prior,
 * F / P given k is Gamma(k + 1), so
 *   P(F > L) = Q(k + 1, L / P)   (the regularized upper incomplete gamma),
 * which is 1 well below kP, 0 well above, and still 0.74 at L = kP for
 * k = 1 (one dangling sample says little). Weights differ between samples
 * (auto period): k and P are the effective values with the same mean and
 * variance, k = F^2 / sum w (w - 1), P = F / k. The lines the samples
 * themselves name are a floor that needs no estimate: F >= distinct, so
 * the posterior is truncated there, P(F > L | F >= distinct). (Without the
 * floor, syr2k's 37 dangling samples under the inline clock put F at +-20 %
 * and the taper cut LRU's correct misses below the footprint by a third.)
 * At period 1 (every reference sampled: no variance) the bound is the
 * exact step at F. A thread without dangling samples gets no bound.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

/* Samples per distinct line before the samples are taken to cover the footprint. */
#define MODEL_COVER_MIN 10.0

void model_group_misses(const model_data *m, const double *R, size_t n, double *cap, double *cold)
{
	model_mean mean = model_mean_of(m);
	for (size_t gi = 0; gi < m->ngroups; gi++) {
		const model_group *g = &m->groups[gi];
		double wt = model_mean_weight(&mean, g);
		if (!(g->S > 0.0) || !(wt > 0.0))
			continue;
		for (size_t j = 0; j < n; j++) {
			cap[g->thread * n + j] += wt * R[gi * n + j];
			cold[j] += wt * g->D / g->S;
		}
	}
}

/*
 * The regularized upper incomplete gamma function Q(a, x), a > 0, x >= 0:
 * the series of P for x < a + 1, Lentz's continued fraction for Q above
 * (Numerical Recipes, 6.2), to 1e-12. Written here rather than taken from
 * GSL, whose error handler aborts the process on underflow.
 */
static double gamma_q(double a, double x)
{
	double lead, sum, del, b, c, d, h;
	if (!(x > 0.0))
		return 1.0;
	lead = a * log(x) - x - lgamma(a);
	if (x < a + 1.0) {
		del = sum = 1.0 / a;
		for (int n = 1; n < 100000 && fabs(del) > 1e-12 * fabs(sum); n++) {
			del *= x / (a + n);
			sum += del;
		}
		return 1.0 - sum * exp(lead);
	}
	b = x + 1.0 - a;
	c = 1.0 / 1e-300;
	d = 1.0 / b;
	h = d;
	for (int i = 1; i < 100000; i++) {
		double an = -i * (i - a);
		b += 2.0;
		d = an * d + b;
		d = fabs(d) < 1e-300 ? 1e-300 : d;
		c = b + an / c;
		c = fabs(c) < 1e-300 ? 1e-300 : c;
		d = 1.0 / d;
		del = d * c;
		h *= del;
		if (fabs(del - 1.0) < 1e-12)
			break;
	}
	return exp(lead) * h;
}

/* Q(k + 1, x), 1 or 0 without computing far from the mean (12 standard deviations). */
static double posterior_above(double k, double x)
{
	double q;
	if (x < k + 1.0 - 12.0 * sqrt(k + 1.0))
		return 1.0;
	if (x > k + 1.0 + 12.0 * sqrt(k + 1.0) + 30.0)
		return 0.0;
	q = gamma_q(k + 1.0, x);
	return q < 0.0 ? 0.0 : (q > 1.0 ? 1.0 : q);
}

/* The model's thread of sample s (one for the whole profile when grouped globally). */
static size_t sample_thread(const model_data *m, const lomas_sample *s)
{
	return m->nthreads == 1 ? 0 : m->pieces.wthread[s->window];
}

/*
 * The distinct lines among each thread's samples, all threads at once: the
 * samples are bucketed by thread (a counting sort of their indices), then each
 * thread's lines go through one open-addressing set sized for that thread, so
 * the work is linear in the samples however many threads there are (a scan
 * of every sample per thread took minutes for 19200 threads of 2M samples).
 * On an allocation failure every thread gets 0: no floor (0 lines is a true
 * one) rather than no curve.
 */
static void distinct_all(model_data *m)
{
	const lomas_profile *p = m->profile;
	size_t nt = m->nthreads, ns = p->samples.n, maxn = 0, cap = 64;
	size_t *first = calloc(nt + 3, sizeof *first);
	size_t *order = malloc((ns ? ns : 1) * sizeof *order);
	uint64_t *set = NULL;
	uint8_t *hits = NULL;
	unsigned shift = 0;
	while ((1u << shift) < p->line_size)
		shift++;
	for (size_t t = 0; t <= nt; t++)
		m->distinct[t] = m->once[t] = 0.0;
	if (!first || !order)
		goto out;
	for (size_t i = 0; i < ns; i++)
		first[sample_thread(m, &p->samples.items[i]) + 2]++;
	for (size_t t = 0; t <= nt + 1; t++)
		first[t + 1] += first[t];
	for (size_t i = 0; i < ns; i++)
		order[first[sample_thread(m, &p->samples.items[i]) + 1]++] = i;
	/* first[t] .. first[t + 1]: thread t's samples. */
	for (size_t t = 0; t <= nt; t++)
		if (first[t + 1] - first[t] > maxn)
			maxn = first[t + 1] - first[t];
	while (cap < 2 * maxn)
		cap *= 2;
	if (!(set = malloc(cap * sizeof *set)) || !(hits = malloc(cap)))
		goto out;
	for (size_t t = 0; t <= nt; t++) {
		size_t n = first[t + 1] - first[t], c = 64, used = 0, once = 0;
		while (c < 2 * n)
			c *= 2;
		for (size_t i = 0; i < c; i++)
			set[i] = UINT64_MAX;
		memset(hits, 0, c);
		for (size_t j = first[t]; j < first[t + 1]; j++) {
			uint64_t line = p->samples.items[order[j]].addr >> shift, h;
			h = (line * 0x9e3779b97f4a7c15ull) >> 20 & (c - 1);
			while (set[h] != UINT64_MAX && set[h] != line)
				h = (h + 1) & (c - 1);
			if (set[h] == UINT64_MAX) {
				set[h] = line;
				used++;
			}
			/* Lines seen once: 1 -> once + 1, 2 -> once - 1, then saturated. */
			if (hits[h] < 2)
				once += hits[h] == 0 ? 1 : (size_t)-1;
			hits[h] += hits[h] < 2;
		}
		m->distinct[t] = (double)used;
		m->once[t] = (double)once;
	}
out:
	free(hits);
	free(set);
	free(order);
	free(first);
}

/* Thread t's distinct sampled lines, counted for every thread on first use. */
static double distinct_lines(model_data *m, size_t t)
{
	if (m->distinct[t] < 0.0)
		distinct_all(m);
	return m->distinct[t];
}

/*
 * A second floor, from the reuses: a window of d references of group g
 * holds, in expectation, SD_r(d) = sum_{j<d} P_g(reused RD > j) lines whose
 * next touch lies beyond it (StatStack's count without the lines never
 * touched again), every one a distinct line of the thread. A repeated
 * sweep of 5120 lines at period 64 had 62 dangling samples (80 expected):
 * F = 3968 +- 500, and the random curve at 4096 lines kept 40 % of its
 * misses (7.0 % for the exact 17.5 %), while 1527 reuses each saw 5119.
 * Only reuses that end inside their group (the group's distances describe
 * the window), each SD_r shrunk by 2 / sqrt(n) for the group's n reuses,
 * and the SD_RANK-th largest of the thread, so that no one reuse sets it.
 */
#define SD_RANK 5

/* v into the descending top[0 .. SD_RANK) if it belongs there. */
static void top_put(double *top, double v)
{
	size_t r = SD_RANK - 1;
	if (!(v > top[r]))
		return;
	for (; r > 0 && v > top[r - 1]; r--)
		top[r] = top[r - 1];
	top[r] = v;
}

/* The group of reused sample s, and whether its reuse ends inside it. */
static uint32_t reuse_group(const model_data *m, const lomas_sample *s, bool *inside)
{
	const lomas_profile *p = m->profile;
	size_t pc = model_piece_of(&m->pieces, &p->windows.items[s->window], s->window, s->start);
	uint32_t g = m->piece_group[pc];
	*inside = s->end < m->groups[g].b;
	return g;
}

/*
 * SD_r is increasing in d within a group, so only each group's SD_RANK
 * longest inside reuses can count: two passes over the samples, no sort
 * (a 100-size LRU curve of a million samples is 50 ms).
 */
static void sd_floor_all(model_data *m)
{
	const lomas_profile *p = m->profile;
	size_t ns = p->samples.n, ng = m->ngroups, nt = m->nthreads;
	double *cand = calloc((ng + 1) * SD_RANK, sizeof *cand);
	double *acc = calloc((ng + 1) * SD_RANK, sizeof *acc);
	double *cnt = calloc(ng + 1, sizeof *cnt);
	double *top = calloc((nt + 1) * SD_RANK, sizeof *top);
	for (size_t t = 0; t <= nt; t++)
		m->sdfloor[t] = 0.0;
	if (!cand || !acc || !cnt || !top)
		goto out; /* no floor (0 lines is a true one) rather than no curve */
	for (size_t i = 0; i < ns; i++) {
		const lomas_sample *s = &p->samples.items[i];
		bool inside;
		uint32_t g;
		if (s->state != LOMAS_SAMPLE_REUSED || !(s->weight > 0.0))
			continue;
		g = reuse_group(m, s, &inside);
		cnt[g] += 1.0;
		if (inside)
			top_put(cand + (size_t)g * SD_RANK, (double)sample_distance(s));
	}
	/* sum_j w_j min(d_j, d) over the group's reuses, for each candidate d. */
	for (size_t i = 0; i < ns; i++) {
		const lomas_sample *s = &p->samples.items[i];
		double *cg, *ag, d;
		bool inside;
		if (s->state != LOMAS_SAMPLE_REUSED || !(s->weight > 0.0))
			continue;
		cg = cand + (size_t)reuse_group(m, s, &inside) * SD_RANK;
		ag = acc + (cg - cand);
		d = (double)sample_distance(s);
		for (size_t r = 0; r < SD_RANK && cg[r] > 0.0; r++)
			ag[r] += s->weight * fmin(d, cg[r]);
	}
	for (size_t g = 0; g < ng; g++) {
		const model_group *gr = &m->groups[g];
		double shrink = cnt[g] > 0.0 ? 1.0 - 2.0 / sqrt(cnt[g]) : 0.0;
		if (!(gr->S > 0.0) || !(shrink > 0.0))
			continue;
		for (size_t r = 0; r < SD_RANK && cand[g * SD_RANK + r] > 0.0; r++)
			top_put(top + (size_t)gr->thread * SD_RANK,
			        acc[g * SD_RANK + r] / gr->S * shrink);
	}
	for (size_t t = 0; t < nt; t++)
		m->sdfloor[t] = top[t * SD_RANK + SD_RANK - 1] > 0.0
		                    ? top[t * SD_RANK + SD_RANK - 1] + 1.0
		                    : 0.0;
out:
	free(cand);
	free(acc);
	free(cnt);
	free(top);
}

/*
 * Whether the floor cannot matter for thread t: even as many lines as it
 * has samples lie where posterior_above is exactly 1, so the truncation
 * divides by 1 and every size it could cut is below the floor. Then the
 * distinct lines need not be counted (hashing a million lines: 20 ms).
 */
static bool floor_moot(const model_data *m, size_t t, double k, double P)
{
	return m->sampled[t] / P < k + 1.0 - 12.0 * sqrt(k + 1.0);
}

/*
 * Thread t's floor: the reuses' (sd_floor_all) and its distinct sampled
 * lines, each where it can matter: below k + 1 - 12 sqrt(k + 1) periods a
 * floor changes neither the truncation nor a size's keep (which is 1
 * there). SD_r(d) <= d: a thread whose groups' longest distances stay
 * below that needs no pass over the samples.
 */
static double floor_lines(model_data *m, size_t t, double k, double P)
{
	double fl = 0.0, dtop = 0.0;
	for (size_t g = m->thread_first[t]; g < m->thread_first[t + 1]; g++)
		dtop = fmax(dtop, m->groups[g].dmax + 1.0);
	if (dtop / P >= k + 1.0 - 12.0 * sqrt(k + 1.0)) {
		if (m->sdfloor[t] < 0.0)
			sd_floor_all(m);
		fl = m->sdfloor[t];
	}
	if (floor_moot(m, t, k, P))
		return fl;
	return fmax(fl, distinct_lines(m, t));
}

double model_footprint_keep(model_data *m, size_t t, double lines)
{
	double F = m->dangling[t], v = m->dangling_w2[t], k, P, above, fl, floor_above;
	if (!(F > 0.0))
		return 1.0;
	if (!(v > 1e-9 * F))
		return lines < F ? 1.0 : 0.0; /* every reference sampled: exact */
	k = F * F / v;
	P = F / k;
	above = posterior_above(k, lines / P);
	if (above >= 1.0)
		return 1.0;
	fl = floor_lines(m, t, k, P);
	if (lines < fl)
		return 1.0;
	/* Truncated at the floor: P(F > L | F >= floor). */
	floor_above = posterior_above(k, fl / P);
	if (!(floor_above > 1e-300))
		return 0.0;
	above /= floor_above;
	return above > 1.0 ? 1.0 : above;
}

double model_footprint_upper(model_data *m, size_t t, double prob)
{
	double F = m->dangling[t], v = m->dangling_w2[t], k, P, lo, hi, target, fl;
	if (!(F > 0.0))
		return INFINITY;
	if (!(v > 1e-9 * F))
		return F;
	k = F * F / v;
	P = F / k;
	/*
	 * Solve P(F > x | F >= floor) = prob for x by bisection on x / P. The
	 * floor is the distinct lines only: StatStack's stack distances are
	 * the reuses' own floor (capped here, not cut), and sd_floor_all's
	 * passes over every sample took a million-sample LRU curve from 49 to
	 * 126 ms.
	 */
	fl = floor_moot(m, t, k, P) ? 0.0 : distinct_lines(m, t);
	target = prob * posterior_above(k, fl / P);
	lo = (floor_moot(m, t, k, P) ? m->sampled[t] : fl) / P;
	hi = k + 1.0 + 14.0 * sqrt(k + 1.0) + 40.0;
	if (hi < lo)
		return lo * P;
	for (int it = 0; it < 100 && hi - lo > 1e-9 * hi; it++) {
		double mid = 0.5 * (lo + hi);
		if (posterior_above(k, mid) > target)
			lo = mid;
		else
			hi = mid;
	}
	/*
	 * Every sampled line sampled at least twice: the samples cover the
	 * footprint (Chao1's estimate of the unseen lines, f1^2 / 2 f2, is 0),
	 * and the distinct lines are the count itself, far tighter than the few
	 * dangling samples say. A cyclic sweep over 256 lines at period 100 has
	 * 2.5 dangling samples (footprint 256 +- 160) but 20000 samples naming
	 * each line ~78 times; its reuses' SD, 255, estimated as 258 from the
	 * sampled share of last touches (1/8 +- 1.9 %), is then capped at 255.
	 * Only with MODEL_COVER_MIN samples per line: a handful of samples that
	 * happen to repeat their lines say little.
	 */
	if (!floor_moot(m, t, k, P) && m->once[t] == 0.0 && m->distinct[t] > 0.0 &&
	    m->sampled[t] >= MODEL_COVER_MIN * m->distinct[t])
		return fmin(hi * P, m->distinct[t]);
	return hi * P;
}

lomas_status model_finish(model_data *m, const double *lines, size_t n, const double *cap,
                          const double *cold, bool with_cold, bool bound, double *ratios)
{
	model_mean mean = model_mean_of(m);
	for (size_t j = 0; j < n; j++) {
		double sum = with_cold ? cold[j] : 0.0;
		for (size_t t = 0; t < m->nthreads; t++) {
			double c = cap[t * n + j];
			if (c != 0.0 && bound)
				c *= model_footprint_keep(m, t, lines[j]);
			sum += c;
		}
		double r = mean.total > 0.0 ? sum / mean.total : 0.0;
		ratios[j] = r < 0.0 ? 0.0 : (r > 1.0 ? 1.0 : r);
	}
	return LOMAS_OK;
}

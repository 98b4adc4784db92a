/*
 * Miss-ratio bounds under time-sharing (the stochastic thrashing report,
 * docs/model.md): the cache of C lines is shared with other programs
 * that leave none of ours in it after each scheduling quantum of n of our
 * references.
 *
 * Lower bound: the warm cache, LRU: q(C), with q(s) = P(SD >= s) the LRU
 * miss ratio of s lines (cold misses counted: a line never touched is at
 * infinite stack distance).
 *
 * Upper bound: after the flush, let s be the active span, the distinct lines
 * touched since. A reference at stack distance D >= s touches a line not
 * seen since the flush: it misses and s grows by one (while s < C; then the
 * cache is full and it misses exactly when D >= C). So s is a pure-birth
 * Markov chain leaving s with probability q(s) per reference (Theorem 8),
 * every miss before s reaches C is a birth, and the expected misses of a
 * quantum are
 *   E[min(s_n, C)] + q(C) E[(n - T_C)^+],
 * with T_k = the time to reach span k, a sum of independent geometric
 * variables of means 1/q(s), s < k (phase-type): P(s_n >= k) = P(T_k <= n).
 * T_k's distribution is taken as the gamma with its mean and variance
 * (exact for one dominant exponential stage, the normal limit for many
 * similar ones), so a quantum costs incomplete gamma functions:
 *   E[min(s_n, C)] = sum_{k=1..C} P(T_k <= n),
 *   E[(n - T)^+] = n P(T <= n) - E[T; T <= n]
 *                = n G(n; a, b) - a b G(n; a + 1, b)  (G: gamma CDF, shape a, scale b).
 * q(s) is taken at every s up to 64 and 64 sizes per octave above,
 * constant in between (chain_misses sums each run of one q in three
 * evaluations), per group of the model (a phased program is stationary
 * only within its phases: below).
 */
#include <math.h>
#include <stdlib.h>

#include "model.h"

/* Regularized lower incomplete gamma P(a, x): series below a + 1, else 1 - continued fraction. */
static double gamma_p(double a, double x)
{
	double lead;
	if (!(x > 0.0))
		return 0.0;
	if (!isfinite(x))
		return 1.0;
	lead = a * log(x) - x - lgamma(a);
	if (x < a + 1.0) {
		double sum = 1.0 / a, del = sum, ap = a;
		for (int i = 0; i < 100000; i++) {
			ap += 1.0;
			del *= x / ap;
			sum += del;
			if (fabs(del) < fabs(sum) * 1e-13)
				break;
		}
		return fmin(1.0, sum * exp(lead));
	}
	/* Lentz's continued fraction for Q (Numerical Recipes 6.2). */
	const double tiny = 1e-300;
	double b = x + 1.0 - a, c = 1.0 / tiny, d = 1.0 / b, h = d;
	for (int i = 1; i < 100000; i++) {
		double an = -i * (i - a), del;
		b += 2.0;
		d = an * d + b;
		d = fabs(d) < tiny ? tiny : d;
		c = b + an / c;
		c = fabs(c) < tiny ? tiny : c;
		d = 1.0 / d;
		del = d * c;
		h *= del;
		if (fabs(del - 1.0) < 1e-13)
			break;
	}
	return fmax(0.0, 1.0 - exp(lead) * h);
}

/* P(T <= t) and E[T; T <= t] for T ~ gamma with mean m and variance v. */
static void gamma_parts(double m, double v, double t, double *cdf, double *partial)
{
	if (!(m > 0.0)) {
		*cdf = 1.0;
		*partial = 0.0;
		return;
	}
	if (!(v > 0.0)) { /* deterministic */
		*cdf = m <= t ? 1.0 : 0.0;
		*partial = m <= t ? m : 0.0;
		return;
	}
	double a = m * m / v, b = v / m;
	*cdf = gamma_p(a, t / b);
	*partial = m * gamma_p(a + 1.0, t / b);
}

/* The grid of spans where q is evaluated: 1..64, then 64 per octave, up to C. */
static size_t span_grid(uint64_t C, uint64_t *s, size_t cap)
{
	size_t n = 0;
	for (uint64_t k = 1; k <= C && k <= 64 && n < cap; k++)
		s[n++] = k;
	for (double x = 64.0; n < cap;) {
		x *= exp2(1.0 / 64.0);
		uint64_t k = (uint64_t)x;
		if (k >= C) {
			s[n++] = C;
			break;
		}
		if (k > s[n - 1])
			s[n++] = k;
	}
	return n;
}

#define GRID_CAP 4096

/*
 * The chain's expected misses in a quantum of t references, q[i] the
 * chance to leave span s in (span[i - 1], span[i]] (q(0) = 1):
 * E[min(s_t, C)] + q(C) E[(t - T_C)^+]. P(T_k <= t) is evaluated at both
 * ends and the middle of each run of stages with one q and summed over
 * the run by Simpson's rule (T_k's mean and variance grow linearly along
 * it): O(grid) incomplete gamma functions instead of O(C).
 */
static double chain_misses(const uint64_t *span, const double *q, size_t ng, uint64_t C, double t)
{
	double mean = 1.0, var = 0.0, births, cdf, part;
	/* Stage 0: the first touch after the flush misses (q = 1): T_1 = 1. */
	gamma_parts(mean, var, t, &births, &part);
	for (size_t i = 0; i < ng; i++) {
		uint64_t a = i ? span[i - 1] + 1 : 1, b = span[i] < C ? span[i] : C - 1;
		double qs = q[i], f0, fm, f1, L, mid;
		if (a > b)
			continue;
		if (!(qs > 0.0))
			return births; /* never leaves: the span stops here */
		L = (double)(b - a + 1);
		/* T_{k + 1} for stage k = a .. b: mean + (k - a + 1) / qs. */
		gamma_parts(mean + 1.0 / qs, var + (1.0 - qs) / (qs * qs), t, &f0, &part);
		if (L == 1.0) {
			fm = f1 = f0;
		} else {
			mid = (L + 1.0) / 2.0;
			gamma_parts(mean + mid / qs, var + mid * (1.0 - qs) / (qs * qs), t, &fm,
			            &part);
			gamma_parts(mean + L / qs, var + L * (1.0 - qs) / (qs * qs), t, &f1, &part);
		}
		births += L * (f0 + 4.0 * fm + f1) / 6.0;
		mean += L / qs;
		var += L * (1.0 - qs) / (qs * qs);
		if (f1 < 1e-12)
			return births; /* later spans are reached even less often */
	}
	/* Full: misses at the warm rate for the rest of the quantum. */
	gamma_parts(mean, var, t, &cdf, &part);
	return births + q[ng - 1] * (t * cdf - part);
}

lomas_status lomas_model_thrash_bounds(const lomas_profile *p, uint64_t cache_bytes,
                                       uint32_t line_bytes, const uint64_t *quantum_refs, size_t n,
                                       unsigned flags, double *lower, double *upper)
{
	error_clear();
	uint32_t line = 0;
	uint64_t *span = NULL, C;
	double *q = NULL, *sd = NULL, *cost = NULL, Cl;
	size_t ng, *first = NULL, *order = NULL;
	model_opts o = model_default_opts(LOMAS_POLICY_LRU);
	model_data m;
	model_mean mean;
	bool built = false;
	lomas_status st;
	if (!lower || (n > 0 && (!quantum_refs || !upper)))
		return error_set(LOMAS_EINVAL, "lomas_model_thrash_bounds: NULL argument");
	if ((st = model_check_args(p, LOMAS_POLICY_LRU, &cache_bytes, 1, line_bytes, flags, lower,
	                           &line)))
		return st;
	for (size_t i = 0; i < n; i++)
		if (quantum_refs[i] == 0)
			return error_set(LOMAS_EINVAL, "a quantum of 0 references");
	C = cache_bytes / line;
	Cl = (double)C;
	o.lru = true;
	o.per_sample = true; /* each sample's stack distance, for its group's chain */
	if ((st = model_data_build(p, &o, &m)))
		return st;
	built = true;
	mean = model_mean_of(&m);
	/* The lower bound is lomas_model_miss_ratio's warm LRU ratio (the same model run). */
	if ((st = model_run(&m, LOMAS_POLICY_LRU, &Cl, 1, flags, o.footprint, lower)))
		goto out;
	span = malloc(GRID_CAP * sizeof *span);
	q = malloc(GRID_CAP * sizeof *q);
	sd = malloc((p->samples.n ? p->samples.n : 1) * sizeof *sd);
	cost = calloc(n ? n : 1, sizeof *cost);
	if (!span || !q || !sd || !cost) {
		st = error_set(LOMAS_ENOMEM, "out of memory");
		goto out;
	}
	ng = span_grid(C, span, GRID_CAP);
	if ((st = model_sample_sds(&m, true, sd)))
		goto out;
	/*
	 * The chain is the report's for a stationary program: one q(s) for
	 * the run. A phased program is stationary only within its phases, and
	 * the flush costs what the phase it falls in takes to refill the
	 * cache: a mixture's q(s) refills a cache far faster than its slow
	 * phases do, and much slower than its streaming ones need (a four-phase
	 * program at 512 KiB, n = 10^4: exact flushed LRU 8.07 %, the chain
	 * over the run's exact q(s) 7.57 %, chains over each 156k references'
	 * own q(s) 8.07 %). So each group of the model (a segment of similar
	 * windows) has its chain, from the stack distances the curve places
	 * its samples by (cold and censored samples at infinity), and the
	 * upper bound is the warm ratio plus the groups' flush costs (a
	 * flushed quantum's misses less the warm cache's, q(C) t), weighted
	 * as the curve weights them. Cold misses happen with or without
	 * sharing: in both, so not in the cost.
	 */
	/* The samples by start group (a counting sort): first[g] .. first[g + 1]. */
	first = calloc(m.ngroups + 1, sizeof *first);
	order = malloc((p->samples.n ? p->samples.n : 1) * sizeof *order);
	if (!first || !order) {
		st = error_set(LOMAS_ENOMEM, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < p->samples.n; i++)
		first[m.sample_g0[i] + 1]++;
	for (size_t gi = 0; gi < m.ngroups; gi++)
		first[gi + 1] += first[gi];
	for (size_t i = 0; i < p->samples.n; i++)
		order[first[m.sample_g0[i]]++] = i;
	/* first[g] now holds group g's end: shift back. */
	for (size_t gi = m.ngroups; gi > 0; gi--)
		first[gi] = first[gi - 1];
	first[0] = 0;
	for (size_t gi = 0; gi < m.ngroups && n > 0; gi++) {
		const model_group *g = &m.groups[gi];
		double wt = model_mean_weight(&mean, g), inf = 0.0;
		if (!(g->S > 0.0) || !(wt > 0.0))
			continue;
		for (size_t i = 0; i < ng; i++)
			q[i] = 0.0;
		/* q[i] collects the weight at SD >= span[i] - MODEL_SD_ROUND. */
		for (size_t k = first[gi]; k < first[gi + 1]; k++) {
			const lomas_sample *s = &p->samples.items[order[k]];
			size_t lo = 0, hi = ng;
			if (!(s->weight > 0.0))
				continue;
			if (s->state != LOMAS_SAMPLE_REUSED) {
				inf += s->weight;
				continue;
			}
			/* The spans sd misses: span[j] - ROUND <= sd for j < lo. */
			while (lo < hi) {
				size_t mid = lo + (hi - lo) / 2;
				if ((double)span[mid] - MODEL_SD_ROUND <= sd[order[k]])
					lo = mid + 1;
				else
					hi = mid;
			}
			if (lo > 0)
				q[lo - 1] += s->weight;
		}
		q[ng - 1] += inf;
		for (size_t i = ng - 1; i-- > 0;)
			q[i] += q[i + 1];
		for (size_t i = 0; i < ng; i++)
			q[i] = fmin(1.0, q[i] / g->S);
		for (size_t j = 0; j < n; j++) {
			double t = (double)quantum_refs[j];
			cost[j] += wt / mean.total *
			           fmax(0.0, chain_misses(span, q, ng, C, t) / t - q[ng - 1]);
		}
	}
	for (size_t j = 0; j < n; j++)
		upper[j] = fmin(1.0, *lower + cost[j]);
out:
	free(span);
	free(q);
	free(sd);
	free(cost);
	free(first);
	free(order);
	if (built)
		model_data_free(&m);
	return st;
}

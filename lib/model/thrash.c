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
 * similar ones), so a quantum costs O(C) incomplete gamma functions:
 *   E[min(s_n, C)] = sum_{k=1..C} P(T_k <= n),
 *   E[(n - T)^+] = n P(T <= n) - E[T; T <= n]
 *                = n G(n; a, b) - a b G(n; a + 1, b)  (G: gamma CDF, shape a, scale b).
 * q(s) comes from lomas_model_curve (LRU, with cold misses) at every s up
 * to 64 and 64 sizes per octave above, constant in between.
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

lomas_status lomas_model_thrash_bounds(const lomas_profile *p, uint64_t cache_bytes,
                                       uint32_t line_bytes, const uint64_t *quantum_refs, size_t n,
                                       unsigned flags, double *lower, double *upper)
{
	error_clear();
	uint32_t line = 0;
	uint64_t *span = NULL, *bytes = NULL, C;
	double *q = NULL, cold_rate = 0.0, warm_nocold = 0.0;
	size_t ng;
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
	span = malloc(GRID_CAP * sizeof *span);
	bytes = malloc(GRID_CAP * sizeof *bytes);
	q = malloc((GRID_CAP + 1) * sizeof *q);
	if (!span || !bytes || !q) {
		st = error_set(LOMAS_ENOMEM, "out of memory");
		goto out;
	}
	ng = span_grid(C, span, GRID_CAP);
	for (size_t i = 0; i < ng; i++)
		bytes[i] = span[i] * line;
	/* q(s) for s = span[i], cold misses counted (they are births too). */
	if ((st = lomas_model_curve(p, LOMAS_POLICY_LRU, bytes, ng, 0, LOMAS_MODEL_COLD, q)) ||
	    (st = lomas_model_curve(p, LOMAS_POLICY_LRU, &cache_bytes, 1, 0, 0, &warm_nocold)))
		goto out;
	/* The cold misses happen with or without sharing: without LOMAS_MODEL_COLD, left out. */
	cold_rate = flags & LOMAS_MODEL_COLD ? 0.0 : fmax(0.0, q[ng - 1] - warm_nocold);
	*lower = flags & LOMAS_MODEL_COLD ? q[ng - 1] : warm_nocold;
	for (size_t j = 0; j < n; j++) {
		double t = (double)quantum_refs[j], mean = 0.0, var = 0.0, births = 0.0;
		double cdf, part, qc = q[ng - 1];
		/*
		 * Stage s (span s to s + 1) leaves with q(s): q(0) = 1 (the first
		 * touch after a flush misses); between grid points q takes the
		 * value at the next one (exact up to 64 lines, within 1/64 octave
		 * of the span above).
		 */
		bool full = true;
		for (size_t i = 0, s = 0; s < C; s++) {
			double qs = 1.0;
			if (s > 0) {
				while (span[i] < s && i + 1 < ng)
					i++;
				qs = q[i];
			}
			if (!(qs > 0.0)) {
				full = false; /* never leaves: the span stops here */
				break;
			}
			mean += 1.0 / qs;
			var += (1.0 - qs) / (qs * qs);
			gamma_parts(mean, var, t, &cdf, &part);
			births += cdf;
			if (cdf < 1e-12) {
				full = false; /* later spans are reached even less often */
				break;
			}
		}
		double tail = 0.0;
		if (full) {
			gamma_parts(mean, var, t, &cdf, &part);
			/* Once full: misses at the warm rate for the rest of the quantum. */
			tail = qc * (t * cdf - part);
		}
		double r = (births + tail) / t - cold_rate;
		upper[j] = fmin(1.0, fmax(r, *lower));
	}
out:
	free(span);
	free(bytes);
	free(q);
	return st;
}

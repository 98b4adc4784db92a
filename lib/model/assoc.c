/*
 * Set-associative caches (docs/model.md): an A-way cache of S sets
 * (L = A S lines; a line's set is its line number modulo S).
 *
 * LRU is per set, in assoc_lru.c (each line's chance to be touched in a
 * window of d references in assoc_touch.c); random replacement is per
 * set, in assoc_random.c. This file holds what they share: the entry
 * point, the shrinkage of a sampled share towards its prior, and a set's
 * expected load (and assoc_pairs.c the walk both take over the sampled
 * references inside sampled reuses).
 *
 * Both models are stationary per segment. The fully associative model
 * (lomas_model_curve) is better than that (crossing reuses, reuse classes,
 * footprint bound), so the result is that curve plus the difference the
 * set-associative model makes between A ways and full associativity,
 * computed on the same stack distances and roots: the associativity
 * effect, not a second model of the whole (as a share of the curve's hits
 * or misses: with_delta).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

/*
 * Is an excess of k events where lam were expected (k > lam) within the
 * Poisson noise of lam at the one-sided level of z standard deviations?
 * Where lam is small a normal test is no test: with 27 pairs' worth of
 * weight and a share of 0.0002 expected (lam 0.006), one pair in the set
 * stood 13 "standard deviations" out, though one such pair comes by chance
 * once in 185, and there are a thousand cells (deriche at 256 KiB 8-way:
 * a locality factor of 173 from that one pair, LRU +20 points).
 */
static bool poisson_within(double k, double lam, double z)
{
	double tail = 0.0, term;
	unsigned kk = (unsigned)floor(k);
	if (lam > 30.0 || kk > 200)
		return false; /* the normal test holds */
	/* P(X >= kk) = 1 - sum_{i < kk} e^-lam lam^i / i! */
	term = exp(-lam);
	for (unsigned i = 0; i < kk; i++) {
		tail += term;
		term *= lam / (double)(i + 1);
	}
	return 1.0 - tail > 0.5 * erfc(z / sqrt(2.0));
}

/*
 * Shrink the estimate same/tot towards prior by how far it stands out of
 * z standard deviations of its noise: the deviation's square less z^2
 * times the variance is kept. An excess that a Poisson count of the
 * expected events reaches as often as z sigmas allow is no excess.
 */
double assoc_shrink(double same, double tot, double tot2, double prior, double z)
{
	double rho, neff, var0, dev2;
	if (!(tot > 0.0))
		return prior;
	rho = same / tot;
	neff = tot * tot / tot2;
	if (rho > prior && poisson_within(rho * neff, prior * neff, z))
		return prior;
	var0 = z * z * prior * (1.0 - prior) / neff;
	dev2 = (rho - prior) * (rho - prior);
	return dev2 > var0 ? prior + (rho - prior) * (dev2 - var0) / dev2 : prior;
}

/* Whether a set's K sampled lines stand out of an even spread of n over S sets. */
bool assoc_crowded(double K, double n, uint64_t S)
{
	double lam = n / (double)S;
	return K > lam + 2.0 * sqrt(lam);
}

/*
 * A set's lines: its K distinct sampled lines plus its share of the unseen
 * lines. Where K is within twice its Poisson noise of the n / S sampled
 * lines an even spread gives each set, it says nothing of this set, and
 * the even spread is taken if larger: sampled every 128 references, a
 * column walk's 16384 lines show 1 to 4 a set at 2048 sets, and K +
 * unseen / S made sets of 8 lines (exactly the ways) look like 10 or 11,
 * 44 points of false conflict misses at 1 MiB 8-way. The even spread is
 * that of the sets that do not stand out (cs sets holding ck sampled
 * lines do): a strided sweep's 2 crowded sets of 96 lines raised 62 sets
 * of 16 hot lines to 18.5 otherwise (random replacement 1.8 points high on
 * hot2+swp at 64 KiB 16-way, test_assoc).
 */
double assoc_set_load(double K, double n, double unseen, uint64_t S, double ck, double cs)
{
	double even;
	if (assoc_crowded(K, n, S))
		return K + unseen / (double)S;
	even = (n - ck + unseen) / fmax((double)S - cs, 1.0);
	return fmax(K, even);
}

/*
 * The footprint's estimate (the dangling samples' weight: each a line's last
 * touch) rests on few samples where few lines are touched last in the
 * profile, and on none in a phase's profile whose lines are all touched
 * again in a later phase (lomas_profile_phase_select: those reuses are
 * censored); the set models' fit rule then allows twice its noise. But the
 * lines between a reuse's ends and the reused line are all in the
 * footprint: it holds at least the reuses' stack distances + 1 (their 99th
 * percentile, not one reuse's estimate). A linked list of 20000 lines
 * walked over and over, its phase's profile: 6 dangling samples (footprint
 * 23000 +- 41 %, every set taken to fit within that noise at 512 KiB and 1
 * MiB 8-way: LRU 0 % for the exact 42 %), 0 in another draw.
 */
static int dw_cmp(const void *a, const void *b)
{
	const double *x = a, *y = b;
	return x[0] < y[0] ? -1 : x[0] > y[0];
}

lomas_status assoc_unseen_floor(const lomas_profile *p, const double *sd, double distinct,
                                double *floor)
{
	size_t n = 0;
	double tot = 0.0, acc = 0.0, top = 0.0;
	double *v = malloc((p->samples.n ? p->samples.n : 1) * 2 * sizeof *v);
	*floor = 0.0;
	if (!v)
		return error_set(LOMAS_ENOMEM, "out of memory");
	for (size_t i = 0; i < p->samples.n; i++) {
		const lomas_sample *s = &p->samples.items[i];
		if (s->state != LOMAS_SAMPLE_REUSED || !(s->weight > 0.0))
			continue;
		v[2 * n] = sd[i] + 1.0;
		v[2 * n + 1] = s->weight;
		tot += s->weight;
		n++;
	}
	qsort(v, n, 2 * sizeof *v, dw_cmp);
	for (size_t i = 0; i < n; i++) {
		acc += v[2 * i + 1];
		top = v[2 * i];
		if (acc >= 0.99 * tot)
			break;
	}
	free(v);
	*floor = top > distinct ? top - distinct : 0.0;
	return LOMAS_OK;
}

/*
 * The curve's ratio r with the associativity's effect: the set model adds
 * delta to its own fully associative ratio fa on the same reuses. Added as
 * is, a set model near saturation carried the gap between the curve and
 * its root on top: a column walk whose lines crowd into 2 of 128 sets
 * misses every time (65.0 %), the set model said 64.8 over a root of 18.7,
 * and the curve (27.8, the fully associative truth 22.8) came to 73.9.
 * The conflicts are misses among the fully associative hits, a share
 * delta / (1 - fa) of them (where fewer misses, a share -delta / fa of the
 * misses is saved), taken of the curve's hits (misses): 68.7 there.
 */
static double with_delta(double r, double delta, double fa)
{
	if (delta > 0.0 && fa < 1.0)
		return r + (1.0 - r) * delta / (1.0 - fa);
	if (delta < 0.0 && fa > 0.0)
		return r * (1.0 + delta / fa);
	return r + delta;
}

lomas_status lomas_model_curve_assoc(const lomas_profile *p, lomas_policy policy,
                                     const uint64_t *cache_bytes, size_t n, uint32_t line_bytes,
                                     unsigned ways, unsigned flags, double *ratios)
{
	error_clear();
	uint32_t line = 0;
	size_ix *ord = NULL;
	double *lines = NULL, *delta = NULL, *fa = NULL;
	lomas_status st =
	    model_check_args(p, policy, cache_bytes, n, line_bytes, flags, ratios, &line);
	if (st)
		return st;
	if (ways == 0)
		return lomas_model_curve(p, policy, cache_bytes, n, line_bytes, flags, ratios);
	for (size_t i = 0; i < n; i++)
		if (cache_bytes[i] % ((uint64_t)line * ways) != 0)
			return error_set(
			    LOMAS_EINVAL,
			    "cache size %llu bytes is not a whole number of sets of %u "
			    "ways of %u-byte lines",
			    (unsigned long long)cache_bytes[i], ways, line);
	if ((st = lomas_model_curve(p, policy, cache_bytes, n, line_bytes, flags, ratios)) ||
	    n == 0)
		return st;
	if ((st = model_sort_sizes(cache_bytes, n, line, &ord, &lines)))
		return st;
	if (!(delta = malloc(n * sizeof *delta)) || !(fa = malloc(n * sizeof *fa))) {
		st = error_set(LOMAS_ENOMEM, "out of memory");
		goto done;
	}
	if ((st = policy == LOMAS_POLICY_LRU ? assoc_lru_delta(p, lines, n, ways, delta, fa)
	                                     : assoc_random_delta(p, lines, n, ways, delta, fa)))
		goto done;
	for (size_t j = 0; j < n; j++) {
		double r = ratios[ord[j].ix];
		/* One set is a fully associative cache: no difference to add. */
		if ((uint64_t)lines[j] / ways > 1)
			r = with_delta(r, delta[j], fa[j]);
		ratios[ord[j].ix] = r < 0.0 ? 0.0 : (r > 1.0 ? 1.0 : r);
	}
	error_clear();
done:
	free(ord);
	free(lines);
	free(delta);
	free(fa);
	return st;
}

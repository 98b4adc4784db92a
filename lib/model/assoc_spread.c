/*
 * How evenly a window's sparsely sampled and unnamed lines spread over the
 * sets (docs/model.md, "Set-associative caches"). assoc_lru.c counts them
 * in a reuse's set as a Poisson term, the count of lines placed at random.
 * A strided sweep places them evenly: a column of 200 lines 125 apart
 * falls 3 or 4 to each of 64 sets every time, where Poisson(3.3) with a
 * hashed table's lines reaches 8 ways 6-26 % of the time (7.6 points of
 * false misses at 32 KiB 8-way on a recorded column-sum program).
 *
 * The share of a window's pairs of lines in one set says how evenly they
 * spread, but a window of d references holds d / period samples: a band's
 * few thousand pairs put that share within 1.6e-3 of its mean, where a
 * column's even spread lowers it from 1/64 by 4.7e-3, and the model needs
 * the variance to within a few percent (a variance of 0.25 times
 * Poisson's still left 5 points of the 7.6). The pairs' line distances
 * tell far more: on a strided sweep they are multiples of its step sigma,
 * which lines placed at random are one time in sigma. So per band: sigma
 * is the commonest greatest common divisor of two pairs' distances, p the
 * weighted share of pairs whose distance is a multiple of it, and R the
 * span of a window's lines on the progression, in steps: 3 times the mean
 * distance of its pairs (D points spread evenly over a span of R are
 * |a - b| = R / 3 apart on average; the distances taken cyclically, k or
 * C - k over a cycle of C = the largest k + 1 steps, as a window that
 * wraps past the last row of a column and on to the first of the next is
 * still one run). If a window's lines lie on the progression at random
 * with probability q, its pairs do with q^2 = p: its qD lines on it are
 * then a random qD of the R / S (gcd(sigma, S) = 1) lines of the span in
 * each set, a binomial thinning of a fixed count, variance
 * (qD / S)(1 - qD / R); the others are placed at random. Hence
 *   phi = 1 - q min(1, qD / R), q = sqrt(p),
 * summed over up to 3 progressions, the commonest first, each from the
 * pairs the ones before left (a program's initialising row sweep, 13 % of
 * the recorded column-sum program's pairs, is a second; clamped at 0).
 * A column's lines fill their span (phi near 0); a sequential sweep's too
 * (sigma 1); random reads of a table of N lines, D of them a window, give
 * 1 - D / N (the hypergeometric count); random lines over a large range,
 * 1. Where sigma shares a factor c with S, the progression crowds into S / c
 * sets (a column of 128-line rows: one set), which the locality factor of
 * assoc_lru.c counts, and is spread over those as evenly: the same phi (a
 * transposition's column, 32 lines apart, 8 lines in each of 64 of 2048
 * sets, was a Poisson count of mean 7: +5.3 points at 1 MiB 8-way). A pair
 * weighs w_i w_j times the windows of d references that hold both as their
 * lines' last touches: each line of a window once, however often it is
 * touched there (the transposition's 32 lines of a row, read 16 times each,
 * were half the pairs and hid the column); the gcd draws take pairs by
 * weight.
 *
 * A band's windows are every window of its length, whatever runs there: in
 * a phased program the other phases' windows of the same length mix in (a
 * pointer chase over 4096 contiguous nodes in random order, a table of
 * 16384 lines read at random in another phase: the band's span 10330 lines
 * for the chase's 4096, +16.3 points at 256 KiB 8-way
 * LRU, where its reuses have exactly 7 set-mates). So the same statistic is
 * also taken per group of reuses, one kind (start pc) and band, from pairs
 * inside the group's own windows (a partner after the reuse's start and
 * before its end, its line's last touch there), and a reuse takes its
 * group's where the group shows a progression, with D its own stack
 * distance. The same windows say how many of their lines are well
 * sampled (wshare: the weighted share of such partners, all the samples
 * drawn), which assoc_lru.c sets against the whole run's touch
 * probabilities of those lines.
 */
#include <math.h>
#include <stdlib.h>

#include "assoc_spread.h"
#include "assoc_pairs.h"

/* Partners drawn per reference and band, and all the pairs at most. */
#define PARTNERS 8
#define PAIRS_MAX 1000000u /* 24 MB of pairs at most */
/* Partners drawn per reuse inside its own window. */
#define OWN_PARTNERS 32
/* Draws of two pairs for the step's greatest common divisor, per band. */
#define GCD_DRAWS 1024
/* A band with fewer pairs (effectively) has no progression. */
#define NEFF_MIN 64.0
/* Progressions looked for per band, commonest first. */
#define PROGRESSIONS 3

typedef struct sp_pair {
	uint64_t dl; /* line distance */
	double w;
	uint32_t band;
} sp_pair;

static int pair_cmp(const void *a, const void *b)
{
	const sp_pair *x = a, *y = b;
	return x->band < y->band ? -1 : x->band > y->band;
}

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static uint64_t gcd64(uint64_t a, uint64_t b)
{
	while (b) {
		uint64_t t = a % b;
		a = b;
		b = t;
	}
	return a;
}

void assoc_spread_free(assoc_spread *sp)
{
	free(sp->stride);
	free(sp->share);
	free(sp->span);
	free(sp->wshare);
	*sp = (assoc_spread){0};
}

/* The pairs of every band (see the header), unordered. */
static lomas_status collect(const lomas_profile *p, const al_lines *L, const double *dh, size_t nb,
                            rng *g, sp_pair **out, size_t *nout)
{
	size_t nk = 0, nbu = 0, per, step = 1, cap, n = 0;
	assoc_ts_key *keys = malloc((p->samples.n ? p->samples.n : 1) * sizeof *keys);
	sp_pair *pr;
	if (!keys)
		return error_set(LOMAS_ENOMEM, "out of memory");
	for (size_t i = 0; i < p->samples.n; i++) {
		const lomas_sample *s = &p->samples.items[i];
		if (!(s->weight > 0.0) ||
		    L->cnt[al_find(L->u, L->n, s->addr / p->line_size)] >= WELL_SAMPLED)
			continue;
		keys[nk++] = (assoc_ts_key){s->thread, s->start, (uint32_t)i};
	}
	for (size_t h = 0; h < nb; h++)
		nbu += dh[h] > 0.0;
	/* PARTNERS a reference and band; past PAIRS_MAX fewer, then every step-th reference. */
	per = nk * nbu > 0 ? PAIRS_MAX / (nk * nbu) : PARTNERS;
	per = per > PARTNERS ? PARTNERS : per < 1 ? 1 : per;
	if (nk * nbu * per > PAIRS_MAX)
		step = (nk * nbu * per + PAIRS_MAX - 1) / PAIRS_MAX;
	cap = (nk + step - 1) / step * nbu * per + 1;
	if (!(pr = malloc(cap * sizeof *pr))) {
		free(keys);
		return error_set(LOMAS_ENOMEM, "out of memory");
	}
	qsort(keys, nk, sizeof *keys, assoc_ts_cmp);
	for (size_t q = 0; q < nk; q += step) {
		const lomas_sample *si = &p->samples.items[keys[q].ix];
		uint64_t li = si->addr / p->line_size;
		for (size_t h = 0; h < nb; h++) {
			size_t lo = q + 1, hi, take;
			if (!(dh[h] > 0.0))
				continue;
			hi = assoc_ts_lower(keys, lo, nk, si->thread,
			                    si->start + (uint64_t)ceil(dh[h]));
			if (hi <= lo)
				continue;
			take = hi - lo < per ? hi - lo : per;
			for (size_t t = 0; t < take; t++) {
				size_t at = take == hi - lo
				                ? lo + t
				                : lo + (size_t)(rng_next(g) % (hi - lo));
				const lomas_sample *sj = &p->samples.items[keys[at].ix];
				uint64_t lj = sj->addr / p->line_size;
				double dt = (double)(sj->start - si->start);
				double top = (double)si->start, bot = (double)sj->start - dh[h];
				/*
				 * The windows of dh references holding both as their
				 * lines' last touches in them: from after sj - dh to
				 * si and before either line's next touch - dh.
				 */
				if (si->state == LOMAS_SAMPLE_REUSED)
					top = fmin(top, (double)si->end - dh[h]);
				if (sj->state == LOMAS_SAMPLE_REUSED)
					top = fmin(top, (double)sj->end - dh[h]);
				if (lj == li || dt >= dh[h] || !(top > bot))
					continue;
				pr[n++] = (sp_pair){li > lj ? li - lj : lj - li,
				                    si->weight * sj->weight * (top - bot) *
				                        (double)(hi - lo) / (double)take,
				                    (uint32_t)h};
			}
		}
	}
	free(keys);
	*out = pr;
	*nout = n;
	return LOMAS_OK;
}

/*
 * The mean cyclic distance min(k, C - k) of two points of a run of R
 * consecutive steps of a cycle of C (R <= C): R / 3 up to C / 2, C / 4 at C.
 */
static double cyclic_mean(double R, double C)
{
	double h = C / 2.0, i1, i2;
	if (R <= h)
		return R / 3.0;
	i1 = R * h * h / 2.0 - h * h * h / 3.0;
	i2 = (C - R) * (R - h) * (R - h) / 2.0 + (R - h) * (R - h) * (R - h) / 3.0;
	return 2.0 * (i1 + i2) / (R * R);
}

/* The run R whose pairs' mean cyclic distance is m (C at C / 4 and past it). */
static double span_of(double m, double C)
{
	double lo = 0.0, hi = C;
	if (m >= C / 4.0)
		return C;
	for (int it = 0; it < 60; it++) {
		double mid = 0.5 * (lo + hi);
		if (cyclic_mean(mid, C) < m)
			lo = mid;
		else
			hi = mid;
	}
	return 0.5 * (lo + hi);
}

/*
 * A progression's steps smaller than this take in the lines one line off it:
 * consecutive columns of a row-major matrix cross from one line to the next
 * every few columns (8 doubles a line), and a window then holds two copies
 * of the column, one line apart, each spread as evenly as the column.
 */
#define NEAR_MIN 8

/* Is a line distance dl on the progression of step sigma, and how many steps is it? */
static bool on_progression(uint64_t dl, uint64_t sigma)
{
	uint64_t r = dl % sigma;
	return r == 0 || (sigma >= NEAR_MIN && (r == 1 || r == sigma - 1));
}

static uint64_t steps_of(uint64_t dl, uint64_t sigma)
{
	return dl / sigma + (sigma >= NEAR_MIN && dl % sigma == sigma - 1);
}

/* A pair drawn by weight (cum: the running sums of the n weights, acc in all). */
static size_t draw(const double *cum, size_t n, double acc, rng *g)
{
	double u = rng_uniform(g) * acc;
	size_t lo = 0, hi = n - 1;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (cum[mid] <= u)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/*
 * One progression of a band from its n pairs (sw of weight in the band): the pairs on it are moved
 * to the front; returns their count, 0 for none. cum: room for n sums.
 */
static size_t progression(sp_pair *pr, size_t n, double sw, rng *g, uint64_t *tmp, double *cum,
                          assoc_spread *sp, size_t at)
{
	double on = 0.0, dist = 0.0, acc = 0.0, C;
	uint64_t sigma = 0, kmax = 0;
	size_t best = 0, m = 0;
	/* Pairs drawn by weight: a line's many touches in a window are one line. */
	for (size_t i = 0; i < n; i++)
		cum[i] = acc += pr[i].w;
	for (size_t k = 0; k < GCD_DRAWS; k++)
		tmp[k] = gcd64(pr[draw(cum, n, acc, g)].dl, pr[draw(cum, n, acc, g)].dl);
	qsort(tmp, GCD_DRAWS, sizeof *tmp, u64_cmp);
	for (size_t k0 = 0, k1; k0 < GCD_DRAWS; k0 = k1) {
		for (k1 = k0; k1 < GCD_DRAWS && tmp[k1] == tmp[k0]; k1++)
			;
		if (k1 - k0 > best) {
			best = k1 - k0;
			sigma = tmp[k0];
		}
	}
	for (size_t i = 0; i < n; i++)
		if (on_progression(pr[i].dl, sigma)) {
			sp_pair t = pr[m];
			pr[m++] = pr[i];
			pr[i] = t;
		}
	for (size_t i = 0; i < m; i++)
		if (steps_of(pr[i].dl, sigma) > kmax)
			kmax = steps_of(pr[i].dl, sigma);
	C = (double)kmax + 1.0;
	for (size_t i = 0; i < m; i++) {
		double k = (double)steps_of(pr[i].dl, sigma);
		on += pr[i].w;
		dist += pr[i].w * (k < C - k ? k : C - k);
	}
	if (!(on > 0.0))
		return 0;
	sp->stride[at] = sigma;
	sp->share[at] = on / sw;
	sp->span[at] = span_of(dist / on, C);
	return m;
}

/* Band h's progressions from its n pairs (reordered); tmp: GCD_DRAWS; cum: n. */
static void band_stats(sp_pair *pr, size_t n, rng *g, uint64_t *tmp, double *cum, assoc_spread *sp,
                       size_t h)
{
	double sw = 0.0;
	for (size_t i = 0; i < n; i++)
		sw += pr[i].w;
	for (size_t j = 0; j < PROGRESSIONS; j++) {
		double rw = 0.0, rw2 = 0.0;
		size_t m;
		for (size_t i = 0; i < n; i++) {
			rw += pr[i].w;
			rw2 += pr[i].w * pr[i].w;
		}
		/* Too few pairs left (effectively) to say anything. */
		if (n < 2 || !(rw * rw >= NEFF_MIN * rw2))
			return;
		if (!(m = progression(pr, n, sw, g, tmp, cum, sp, h * PROGRESSIONS + j)) ||
		    sp->stride[h * PROGRESSIONS + j] == 1)
			return;
		pr += m;
		n -= m;
	}
}

/*
 * Per group, the share of its windows' lines that are well sampled: each
 * reuse's partners among all the samples inside its window that are their
 * lines' last touches there, counted by weight (their own stream of draws).
 */
static void well_shares(const lomas_profile *p, const uint32_t *group, const uint8_t *well,
                        assoc_ts_key *keys, size_t nk, size_t per, size_t step, double *ws,
                        assoc_spread *sp)
{
	rng h;
	rng_seed(&h, 0x3e11c0de);
	for (size_t q = 0, seen = 0; q < nk; q++) {
		const lomas_sample *si = &p->samples.items[keys[q].ix];
		uint32_t gi = group[keys[q].ix];
		size_t lo = q + 1, hi, take;
		if (gi == UINT32_MAX || well[keys[q].ix] || seen++ % step)
			continue;
		hi = assoc_ts_lower(keys, lo, nk, si->thread, si->end);
		if (hi <= lo)
			continue;
		take = hi - lo < per ? hi - lo : per;
		for (size_t t = 0; t < take; t++) {
			size_t at =
			    take == hi - lo ? lo + t : lo + (size_t)(rng_next(&h) % (hi - lo));
			const lomas_sample *sj = &p->samples.items[keys[at].ix];
			if (sj->addr / p->line_size == si->addr / p->line_size ||
			    (sj->state == LOMAS_SAMPLE_REUSED && sj->end < si->end))
				continue;
			ws[2 * gi + well[keys[at].ix]] +=
			    si->weight * sj->weight * (double)(hi - lo) / (double)take;
		}
	}
	for (size_t j = 0; j < sp->ng; j++)
		sp->wshare[j] = ws[2 * j] + ws[2 * j + 1] > 0.0
		                    ? ws[2 * j + 1] / (ws[2 * j] + ws[2 * j + 1])
		                    : -1.0;
}

/*
 * The pairs inside the reuses' own windows, per group (band nb + g): each
 * reuse of a group with a partner of a sparsely sampled line that starts
 * after it and before its end, and is that line's last touch there (not
 * reused before the window ends). A band's windows are all of the band's
 * length; a group's are those its reuses span, so the other phases' and
 * kinds' lines in the band's windows do not dilute them (a pointer chase
 * over 4096 nodes in a program that also reads a 1 MiB table at random:
 * the band's span 10330 lines, the chase's own 4096).
 */
static lomas_status collect_own(const lomas_profile *p, const al_lines *L, const uint32_t *group,
                                size_t nb, rng *g, assoc_spread *sp, sp_pair **out, size_t *nout)
{
	size_t nk = 0, na = 0, nr = 0, per, step = 1, cap, n = 0;
	assoc_ts_key *keys = malloc((p->samples.n ? p->samples.n : 1) * sizeof *keys),
	             *all = malloc((p->samples.n ? p->samples.n : 1) * sizeof *all);
	uint8_t *well = malloc(p->samples.n ? p->samples.n : 1);
	double *ws = calloc(2 * sp->ng + 1, sizeof *ws);
	sp_pair *pr = NULL;
	if (!keys || !all || !well || !ws)
		goto oom;
	for (size_t i = 0; i < p->samples.n; i++) {
		const lomas_sample *s = &p->samples.items[i];
		if (!(s->weight > 0.0))
			continue;
		well[i] = L->cnt[al_find(L->u, L->n, s->addr / p->line_size)] >= WELL_SAMPLED;
		all[na++] = (assoc_ts_key){s->thread, s->start, (uint32_t)i};
		if (well[i])
			continue;
		keys[nk++] = (assoc_ts_key){s->thread, s->start, (uint32_t)i};
		nr += group[i] != UINT32_MAX;
	}
	/* OWN_PARTNERS a reuse; past PAIRS_MAX fewer, then every step-th reuse. */
	per = nr > 0 ? PAIRS_MAX / nr : OWN_PARTNERS;
	per = per > OWN_PARTNERS ? OWN_PARTNERS : per < 1 ? 1 : per;
	if (nr * per > PAIRS_MAX)
		step = (nr * per + PAIRS_MAX - 1) / PAIRS_MAX;
	cap = (nr + step - 1) / step * per + 1;
	if (!(pr = malloc(cap * sizeof *pr)))
		goto oom;
	qsort(keys, nk, sizeof *keys, assoc_ts_cmp);
	for (size_t q = 0, seen = 0; q < nk; q++) {
		const lomas_sample *si = &p->samples.items[keys[q].ix];
		uint64_t li = si->addr / p->line_size;
		size_t lo = q + 1, hi, take;
		if (group[keys[q].ix] == UINT32_MAX || seen++ % step)
			continue;
		hi = assoc_ts_lower(keys, lo, nk, si->thread, si->end);
		if (hi <= lo)
			continue;
		take = hi - lo < per ? hi - lo : per;
		for (size_t t = 0; t < take && n < cap; t++) {
			size_t at =
			    take == hi - lo ? lo + t : lo + (size_t)(rng_next(g) % (hi - lo));
			const lomas_sample *sj = &p->samples.items[keys[at].ix];
			uint64_t lj = sj->addr / p->line_size;
			if (lj == li || (sj->state == LOMAS_SAMPLE_REUSED && sj->end < si->end))
				continue;
			pr[n++] =
			    (sp_pair){li > lj ? li - lj : lj - li,
			              si->weight * sj->weight * (double)(hi - lo) / (double)take,
			              (uint32_t)(nb + group[keys[q].ix])};
		}
	}
	qsort(all, na, sizeof *all, assoc_ts_cmp);
	well_shares(p, group, well, all, na, per, step, ws, sp);
	free(keys);
	free(all);
	free(well);
	free(ws);
	*out = pr;
	*nout = n;
	return LOMAS_OK;
oom:
	free(keys);
	free(all);
	free(well);
	free(ws);
	free(pr);
	return error_set(LOMAS_ENOMEM, "out of memory");
}

/* The progressions of every band (or group) the n pairs show, into sp (pairs reordered). */
static lomas_status stats_of(sp_pair *pr, size_t n, rng *g, uint64_t *tmp, assoc_spread *sp)
{
	double *cum = malloc((n ? n : 1) * sizeof *cum);
	if (!cum)
		return error_set(LOMAS_ENOMEM, "out of memory");
	qsort(pr, n, sizeof *pr, pair_cmp);
	for (size_t a = 0, b; a < n; a = b) {
		for (b = a; b < n && pr[b].band == pr[a].band; b++)
			;
		band_stats(pr + a, b - a, g, tmp, cum, sp, pr[a].band);
	}
	free(cum);
	return LOMAS_OK;
}

lomas_status assoc_spread_build(const lomas_profile *p, const al_lines *L, const double *dh,
                                size_t nb, const uint32_t *group, size_t ng, uint64_t seed,
                                assoc_spread *out)
{
	sp_pair *pr = NULL;
	size_t n = 0, nj = (nb + ng) * PROGRESSIONS + 1;
	uint64_t *tmp = malloc(GCD_DRAWS * sizeof *tmp);
	lomas_status st = LOMAS_OK;
	rng g;
	rng_seed(&g, seed);
	*out = (assoc_spread){0};
	out->nb = nb;
	out->ng = ng;
	out->stride = calloc(nj, sizeof *out->stride);
	out->share = calloc(nj, sizeof *out->share);
	out->span = calloc(nj, sizeof *out->span);
	out->wshare = calloc(ng + 1, sizeof *out->wshare);
	if (!tmp || !out->stride || !out->share || !out->span || !out->wshare) {
		st = error_set(LOMAS_ENOMEM, "out of memory");
		goto out;
	}
	if ((st = collect(p, L, dh, nb, &g, &pr, &n)) || (st = stats_of(pr, n, &g, tmp, out)))
		goto out;
	free(pr);
	pr = NULL;
	if (ng > 0 && ((st = collect_own(p, L, group, nb, &g, out, &pr, &n)) ||
	               (st = stats_of(pr, n, &g, tmp, out))))
		goto out;
out:
	free(pr);
	free(tmp);
	if (st)
		assoc_spread_free(out);
	return st;
}

static double phi_at(const assoc_spread *sp, size_t j, double D)
{
	double phi = 1.0;
	for (size_t at = j * PROGRESSIONS; at < (j + 1) * PROGRESSIONS; at++) {
		double q, f;
		if (sp->stride[at] == 0)
			break;
		q = sqrt(sp->share[at]);
		f = q * D / sp->span[at];
		phi -= q * (f < 1.0 ? f : 1.0);
	}
	return phi > 0.0 ? phi : 0.0;
}

double assoc_spread_phi(const assoc_spread *sp, uint32_t g, double Dg, size_t h, double Dh,
                        uint64_t S)
{
	if (S < 2)
		return 1.0;
	if (g < sp->ng && sp->stride[(sp->nb + g) * PROGRESSIONS] != 0)
		return Dg > 1.0 ? phi_at(sp, sp->nb + g, Dg) : 1.0;
	return h < sp->nb && Dh > 1.0 ? phi_at(sp, h, Dh) : 1.0;
}

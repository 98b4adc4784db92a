/*
 * Set-associative LRU, per set (docs/model.md): an A-way cache of S sets,
 * a line's set its line number modulo S.
 *
 * A reuse of line x with reuse distance d misses exactly when at least A
 * other lines of x's set are touched in between. Each line y of the set is
 * touched in a window of d references with probability p_y(d), the share
 * of the run's window positions that hold a touch of y (assoc_touch.c: a
 * swept line of period g gives min(1, d / g), a line touched at random
 * 1 - e^{-lambda d}). The count X of set-mates in between is the sum of
 * those Bernoullis over the set's well sampled lines (a Poisson binomial),
 * plus a Poisson term for its sparsely sampled lines and its share of the
 * lines no sample names (the part of it that their even spread over the
 * sets fixes taken as a fixed count, assoc_spread.c, the reused line itself
 * not among its set-mates, and at most what an even spread of the reuse's
 * own stack distance leaves in its set), and the reuse misses with
 * probability P(X >= A). A crowded set and a quiet one are thus never averaged: a
 * strided sweep's set holds its 9 other sweep lines for sure, not a
 * hypergeometric draw of mean 9.
 *
 * Sets are not busy evenly in time: a column walk spends a whole column in
 * one set, so a reuse within the column has all its set's lines in
 * between, though each is touched in only 1/64 of the run's windows. The
 * sampled references inside sampled reuses that are last touches (each
 * intervening line once) show the share of set-mates among the lines in
 * between; per half octave of d and class of set load, its ratio f to the
 * model's share sum_y p_y(d) / D scales the p_y (shrunk to 1 where it does
 * not stand out of its sampling noise: uniform addresses keep the
 * independent model), the part f adds taken as a fixed count.
 *
 * Like assoc_random.c the result is the difference between this model and
 * the fully associative one on the same reuses and stack distances, added
 * to lomas_model_curve's curve (assoc.c).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "assoc_pairs.h"
#include "assoc_spread.h"
#include "assoc_touch.h"
#include "model.h"

#define FB_PER_OCTAVE 8  /* cells of reuse distance: 1/8 octave */
#define NFB 640          /* 1/8 octaves of d + 1, up to 2^80 */
#define NBANDS (NFB / 4) /* half octaves: the locality factor's resolution */
#define NCLASS 40        /* half octaves of 1 + a set's load */
#define TINY 1e-13       /* P(X < A) below this: the reuse misses */
/*
 * The locality factor keeps what stands out of 3 standard deviations of
 * its noise: 16 pairs a reuse are not independent, and the 1120 cells of
 * bands and classes give false factors of 0.4 to 2 at 1 and 2 sigma
 * (hot2+swp 32 KiB 16-way: -1.41 pp at 1 sigma, -1.07 at 2, -0.50 at 3).
 */
#define SHRINK_Z 3.0

static unsigned fband_of(double d)
{
	unsigned b = (unsigned)(FB_PER_OCTAVE * log2(d + 1.0));
	return b < NFB ? b : NFB - 1;
}

static unsigned class_of(double load)
{
	unsigned c = (unsigned)(2.0 * log2(1.0 + load));
	return c < NCLASS ? c : NCLASS - 1;
}

/* One reused sample, prepared. */
typedef struct al_reuse {
	uint32_t k;   /* its line, as an index into al_lines.u */
	uint16_t fb;  /* fband_of(d) */
	double d;     /* reuse distance */
	double sd;    /* expected stack distance (time-aware, footprint-capped) */
	double wt;    /* its weight in the curve's mean (w x group weight / S) */
	uint32_t grp; /* its group, half octave of d and start pc (assoc_spread.c) */
} al_reuse;

/*
 * The reused samples with their weights and stack distances; rmap: sample ->
 * reuse. The stack distance is the one the curve places the sample by
 * (model_sample_sds: a corrected class's, the exact one where the sample
 * has it): near an LRU cliff the plain estimate's few percent put whole
 * classes on the other side of the comparison with the fully associative
 * cache than the curve, and their misses, which the curve has already,
 * were counted again as conflicts (a column walk's reuses at 521 lines,
 * estimated at 510 to 519 by seed: +42 points at 32 KiB 8-way with 2 of 3
 * seeds of the sampling).
 */
static lomas_status prepare_reuses(const lomas_profile *p, model_data *m, const al_lines *L,
                                   al_reuse **out, size_t *nout, uint32_t *rmap, double *floor)
{
	model_mean mean = model_mean_of(m);
	size_t nr = 0;
	double *sd = malloc((p->samples.n ? p->samples.n : 1) * sizeof *sd);
	al_reuse *r = malloc((p->samples.n ? p->samples.n : 1) * sizeof *r);
	lomas_status st;
	if (!sd || !r) {
		free(sd);
		free(r);
		return error_set(LOMAS_ENOMEM, "out of memory");
	}
	if ((st = model_sample_sds(m, true, sd))) {
		free(sd);
		free(r);
		return st;
	}
	if ((st = assoc_unseen_floor(p, sd, (double)L->n, floor))) {
		free(sd);
		free(r);
		return st;
	}
	for (size_t i = 0; i < p->samples.n; i++) {
		const lomas_sample *s = &p->samples.items[i];
		const model_group *g = &m->groups[m->sample_g0[i]];
		double wt = model_mean_weight(&mean, g);
		rmap[i] = UINT32_MAX;
		if (s->state != LOMAS_SAMPLE_REUSED || !(s->weight > 0.0) || !(g->S > 0.0) ||
		    !(wt > 0.0))
			continue;
		r[nr].k = (uint32_t)al_find(L->u, L->n, s->addr / p->line_size);
		r[nr].d = (double)sample_distance(s);
		r[nr].fb = (uint16_t)fband_of(r[nr].d);
		r[nr].sd = sd[i] > 0.0 ? sd[i] : 0.0;
		r[nr].wt = s->weight * wt / g->S;
		rmap[i] = (uint32_t)nr++;
	}
	free(sd);
	*out = r;
	*nout = nr;
	return LOMAS_OK;
}

/* Reuses looked into: those prepare_reuses kept. */
static bool kept(const void *rmap, size_t i)
{
	return ((const uint32_t *)rmap)[i] != UINT32_MAX;
}

/* A line's set, for sorting the lines by set. */
typedef struct al_sl {
	uint64_t set;
	uint32_t k;
} al_sl;

static int sl_cmp(const void *a, const void *b)
{
	const al_sl *x = a, *y = b;
	if (x->set != y->set)
		return x->set < y->set ? -1 : 1;
	return x->k < y->k ? -1 : x->k > y->k;
}

/* A reuse's cell: its set, distance band and line. */
typedef struct al_ord {
	uint64_t set;
	uint32_t fb, rb, k, i; /* rb: quarter octave of the line's references */
} al_ord;

static int ord_cmp(const void *a, const void *b)
{
	const al_ord *x = a, *y = b;
	if (x->set != y->set)
		return x->set < y->set ? -1 : 1;
	if (x->fb != y->fb)
		return x->fb < y->fb ? -1 : 1;
	if (x->rb != y->rb)
		return x->rb < y->rb ? -1 : 1;
	return x->k < y->k ? -1 : x->k > y->k;
}

/*
 * dp[0..A): the distribution below A of the sum of Bernoulli(q[j]), j < K,
 * j != skip ((size_t)-1 for none). Returns the count of lines it took in:
 * fewer than K when the mass below A had already vanished.
 */
static size_t pb_below(const double *q, size_t K, size_t skip, unsigned A, double *dp)
{
	size_t j;
	memset(dp, 0, A * sizeof *dp);
	dp[0] = 1.0;
	for (j = 0; j < K; j++) {
		double below = 0.0;
		if (j == skip)
			continue;
		for (unsigned c = A - 1; c > 0; c--) {
			dp[c] = dp[c] * (1.0 - q[j]) + dp[c - 1] * q[j];
			below += dp[c];
		}
		dp[0] *= 1.0 - q[j];
		if (below + dp[0] < TINY) {
			j++;
			break;
		}
	}
	return j;
}

/* P(B + Poisson(mu) < m), m <= A, for B's distribution below A in dp. */
static double below_with(const double *dp, unsigned m, double mu)
{
	double below = 0.0, pk = exp(-mu), cum = 0.0;
	/* sum_k P(Poisson = k) P(B <= m - 1 - k): cum runs down from P(B < m). */
	for (unsigned c = 0; c < m; c++)
		cum += dp[c];
	for (unsigned k = 0; k < m; k++) {
		below += pk * cum;
		cum -= dp[m - 1 - k];
		pk *= mu / (double)(k + 1);
	}
	return below;
}

/*
 * P(B + Poisson(mu) + Z >= A), Z the count loc taken as fixed (floor(loc)
 * or the next, its fraction the chance of the next).
 */
static double tail_with(const double *dp, unsigned A, double mu, double loc)
{
	double fl = floor(loc), fr = loc - fl, below = 0.0;
	if (fl < (double)A)
		below += (1.0 - fr) * below_with(dp, A - (unsigned)fl, mu);
	if (fl + 1.0 < (double)A)
		below += fr * below_with(dp, A - (unsigned)fl - 1, mu);
	return below < 1.0 ? 1.0 - below : 0.0;
}

/* Work space of one call. */
typedef struct al_work {
	al_sl *sl;              /* n lines */
	al_ord *ord;            /* nr reuses */
	double *q;              /* n: the set's lines' touch probabilities (well sampled) */
	double *pm;             /* n: the set's lines' Poisson mass (sparsely sampled) */
	double *lc;             /* n: the set's lines' part of the fixed count (locality) */
	double *E;              /* nr: expected set-mates in between */
	uint8_t *cls;           /* nr: the class of the reuse's set's load */
	double *dp, *dx, *dy;   /* A each */
	double *qs;             /* n: the set's q scaled to one reuse's window */
	double *acc;            /* NBANDS x NCLASS x 4 */
	double *factor;         /* NBANDS x NCLASS */
	double *left;           /* NFB: lines no sample names, in a window of the band's d */
	double *D;              /* NFB: all the lines in such a window */
	double *sparse;         /* NFB: of them, those of the sparsely sampled lines */
	double *well;           /* NFB: ... of the well sampled ones */
	double *tfit;           /* NFB: the p's scale to the reuses' stack distance (<= 1) */
	double *dh;             /* NBANDS: the mean d of the band's reuses (0: none) */
	double *du;             /* NBANDS: the sparsely sampled and unnamed lines in its window */
	const assoc_spread *sp; /* the progressions they lie on (assoc_spread.c) */
	double ck, cs;          /* the crowded sets' sampled lines and count (assoc_set_load) */
} al_work;

/* Line k's index in W->sl[a, b) (present). */
static size_t sl_find(const al_sl *sl, size_t a, size_t b, uint32_t k)
{
	while (a < b) {
		size_t mid = a + (b - a) / 2;
		if (sl[mid].k < k)
			a = mid + 1;
		else
			b = mid;
	}
	return a;
}

/*
 * The reused line x's own share of the sparsely sampled lines' count mx of
 * its set, where that still counts it: an even spread of a window's lines
 * puts x among them (pm: x's own Poisson mass, already out of an uneven
 * set's count).
 */
static double self_share(const al_lines *L, size_t k, bool even, double mx, double pm)
{
	if (L->cnt[k] >= WELL_SAMPLED)
		return 0.0;
	return even ? fmin(1.0, mx) : fmax(0.0, fmin(1.0, mx) - pm);
}

/*
 * One pass over the reuses' cells (set, 1/8 octave of d) for S sets, the
 * lines' touch probabilities taken at the cell's mean distance. Pass 0:
 * E[i], the expected set-mates between reuse i's ends, and its set's load
 * class. Pass 1: sum of wt P(X >= A), the p scaled by the locality factor.
 */
static double cells(const al_lines *L, const al_reuse *r, size_t nr, uint64_t S, unsigned A,
                    al_work *W, int pass)
{
	double sa = 0.0, lines_s = ((double)L->n + L->unseen) / (double)S;
	size_t a = 0;
	for (size_t c0 = 0, c1; c0 < nr; c0 = c1) {
		const al_ord *o = &W->ord[c0];
		size_t b, K, took;
		double sw = 0.0, swd = 0.0, swn = 0.0, dc, load, f = 1.0, sum = 0.0, mu, Tx, g,
		       loc = 0.0, lam = (double)L->n / (double)S;
		bool even;
		unsigned cls;
		for (c1 = c0; c1 < nr && W->ord[c1].set == o->set && W->ord[c1].fb == o->fb &&
		              W->ord[c1].rb == o->rb;
		     c1++) {
			const al_reuse *x = &r[W->ord[c1].i];
			sw += x->wt;
			swd += x->wt * x->d;
			swn += x->wt * L->nw[x->k];
		}
		while (W->sl[a].set < o->set)
			a++;
		for (b = a; b < L->n && W->sl[b].set == o->set; b++)
			;
		K = b - a;
		load = assoc_set_load((double)K, (double)L->n, L->unseen, S, W->ck, W->cs);
		cls = class_of(load);
		/*
		 * A set whose lines all fit in its ways never misses; so too one
		 * that overflows them by less than twice the noise of the
		 * footprint's share a set (the footprint is the dangling samples'
		 * weight: a matrix walk's 4096 lines, 8 to a set at 256 KiB
		 * 8-way, came to 5504 from 43 dangling samples, 10.75 a set: 57
		 * points of false conflict misses). The noise is the estimate's
		 * only: a set whose distinct sampled lines alone pass its ways
		 * does not fit (cholesky at 32 KiB 8-way: 56 to 63 sampled lines
		 * a set, taken to fit within a noise of 56, every LRU miss lost),
		 * nor one that the reuses' stack distances alone fill past its
		 * ways (assoc_unseen_floor: no noise is allowed above a floor).
		 */
		if (pass && (double)K < A + 0.5 && load < A + 0.5 + 2.0 * lines_s * L->unseen_rel &&
		    assoc_set_load((double)K, (double)L->n, L->unseen_floor, S, W->ck, W->cs) <
		        A + 0.5)
			continue;
		dc = sw > 0.0 ? swd / sw : r[o->i].d;
		Tx = fmax(L->T - (sw > 0.0 ? swn / sw : L->nw[o->k]), 1.0);
		/* The locality factor (the share of set-mates), times the count's scale. */
		if (pass)
			f = W->factor[(o->fb / 4) * NCLASS + cls] * W->tfit[o->fb];
		/*
		 * Where set-mates crowd into the reuses' intervals (f > 1), the
		 * part of the count that f adds is taken as fixed, not as more
		 * independent touches: those are the lines the program's pattern
		 * puts in between every time (a stencil's 4 neighbouring rows in
		 * one set: 4, not Poisson(4), which reaches 8 ways 5 % of the
		 * time: 4 points of false misses). g scales the independent part.
		 */
		g = f < 1.0 ? f : 1.0;
		mu = g * W->left[o->fb] / (double)S;
		loc = (f - g) * W->left[o->fb] / (double)S;
		/*
		 * Where the set's sampled lines are within their noise of an even
		 * spread (assoc_set_load), its sparsely sampled lines' mass is
		 * that of the average set too: with 1 to 4 sampled lines a set,
		 * a transposition's column sets, 15 set-mates each, got from 0 to
		 * 40 (16 % of them hits, 8.8 points low at 256 KiB 8-way).
		 */
		even = (double)K <= lam + 2.0 * sqrt(lam);
		if (even) {
			mu += g * W->sparse[o->fb] / (double)S;
			loc += (f - g) * W->sparse[o->fb] / (double)S;
			sum += f * W->sparse[o->fb] / (double)S;
		}
		/*
		 * A line of few samples stands for the unsampled lines too (its
		 * estimated references are its samples' weights): its p, often
		 * past 1 once scaled, goes into the Poisson term, uncapped (a
		 * column walk sampled every 128 references has 6 sampled lines
		 * per set for its 32; 6 Bernoullis capped at 1 never reach 8).
		 */
		for (size_t j = 0; j < K; j++) {
			size_t k = W->sl[a + j].k;
			double p0 = al_touch(L, k, dc, Tx), pj = f * p0;
			bool well = L->cnt[k] >= WELL_SAMPLED;
			W->q[j] = well ? fmin(1.0, g * p0) : 0.0;
			W->pm[j] = well || even ? 0.0 : g * p0;
			W->lc[j] = well ? fmin(1.0, pj) - W->q[j] : even ? 0.0 : pj - W->pm[j];
			sum += W->q[j] + W->pm[j] + W->lc[j];
			mu += W->pm[j];
			loc += W->lc[j];
		}
		if (!pass) {
			/*
			 * The lines no sample names count among the set-mates as
			 * in pass 1 (mu and loc scale them by f too): the factor
			 * is the pairs' share over the whole of the model's.
			 */
			sum += W->left[o->fb] / (double)S;
			for (size_t c = c0; c < c1; c++) {
				size_t pos = sl_find(W->sl, a, b, W->ord[c].k) - a;
				W->E[W->ord[c].i] =
				    fmax(0.0, sum - W->q[pos] - W->pm[pos] - W->lc[pos]);
				W->cls[W->ord[c].i] = (uint8_t)cls;
			}
			continue;
		}
		/*
		 * The sparsely sampled and unnamed lines are placed in the set
		 * as evenly as their pairs say (assoc_spread.c; those of the
		 * reuse's own windows where they show a progression, else the
		 * band's): the part of their count that an even spread fixes is
		 * taken as fixed, a Poisson count of phi times the mean for the
		 * rest.
		 */
		took = pb_below(W->q, K, (size_t)-1, A, W->dp);
		for (size_t x0 = c0, x1; x0 < c1; x0 = x1) {
			uint32_t k = W->ord[x0].k;
			size_t pos = sl_find(W->sl, a, b, k) - a;
			double wsum = 0.0, qx = W->q[pos], mx = fmax(0.0, mu - W->pm[pos]),
			       lb = fmax(0.0, loc - W->lc[pos]);
			/* x's own share of the evenly spread lines, where mx still counts it. */
			double self = self_share(L, k, even, mx, W->pm[pos]);
			for (x1 = x0; x1 < c1 && W->ord[x1].k == k; x1++)
				if (r[W->ord[x1].i].sd >= A - 0.5)
					wsum += r[W->ord[x1].i].wt;
			if (!(wsum > 0.0))
				continue;
			if (took < K && pos >= took) {
				/* The mass below A vanished before x's own term. */
				sa += wsum;
				continue;
			}
			if (took == K && qx < 0.5) {
				/* x is never touched between its own ends: divide its term out. */
				W->dx[0] = W->dp[0] / (1.0 - qx);
				for (unsigned c = 1; c < A; c++)
					W->dx[c] =
					    fmax(0.0, (W->dp[c] - qx * W->dx[c - 1]) / (1.0 - qx));
			} else {
				pb_below(W->q, K, pos, A, W->dx);
			}
			for (size_t y = x0; y < x1; y++) {
				const al_reuse *x = &r[W->ord[y].i];
				double phi, fx, over;
				if (!(x->sd >= A - 0.5))
					continue;
				/*
				 * Its own kind's spread over the lines of its own window
				 * (its stack distance: the band's touch probabilities
				 * are the whole run's and count a phased program's other
				 * arrays in every window), else its band's.
				 */
				phi = assoc_spread_phi(W->sp, x->grp, x->sd, o->fb / 4,
				                       W->du[o->fb / 4], S);
				fx = fmax(0.0, (1.0 - phi) * (mx - self));
				double wl = W->well[o->fb] * W->tfit[o->fb], rho = 1.0;
				const double *dxx = W->dx;
				/*
				 * The set's well sampled lines count as many as the
				 * reuse's own kind says its windows hold (wshare of its
				 * sd lines, assoc_spread.c) where that is fewer than
				 * their touch probabilities, the whole run's, say: a
				 * phased program's hot lines of another phase are in
				 * every window by those (a swept array's lines, touched
				 * in a fifth of the run's windows, 0.2 to 0.4 a set in a
				 * pointer chase's, where they never are: +2.7 / +4.4
				 * points at 256 KiB 8 / 16-way). Their q are scaled to
				 * it for this reuse.
				 */
				if (x->grp < W->sp->ng && W->sp->wshare[x->grp] >= 0.0 &&
				    wl > 0.0) {
					double wx = W->sp->wshare[x->grp] * x->sd;
					if (wx < wl) {
						rho = wx / wl;
						wl = wx;
					}
				}
				/*
				 * No more of them than an even spread of its own window
				 * leaves in its set: the window's sd lines less the wl
				 * well sampled ones, and x, (sd - wl + 1) / S a set, x
				 * among them. The touch probabilities' count of a window
				 * of the cell's mean length runs a line or so over it (a
				 * stencil's row reuses at 507 lines of 512: 8.9 at 32
				 * KiB 8-way, 6.9 by the stack distance), and in a phased
				 * program counts the other phases' lines in every window
				 * (a pointer chase over 4096 nodes, exactly 7 set-mates
				 * at 256 KiB 8-way: 7.82). Not where
				 * the set's lines crowd (lb > 0: the locality factor's
				 * fixed count): those are not spread over all S sets.
				 */
				if (!(lb > 0.0)) {
					over = phi * mx + fx -
					       ((x->sd - wl) / (double)S -
					        (1.0 - phi) * (1.0 - 1.0 / (double)S));
					if (over > 0.0)
						fx = fmax(0.0, fx - over);
				}
				if (rho < 1.0) {
					for (size_t j = 0; j < K; j++)
						W->qs[j] = W->q[j] * rho;
					if (pb_below(W->qs, K, pos, A, W->dy) < K) {
						sa += x->wt;
						continue;
					}
					dxx = W->dy;
				}
				sa += x->wt * tail_with(dxx, A, phi * mx, lb + fx);
			}
		}
	}
	return sa;
}

/*
 * The locality factor per (half octave of d, class of set load): the
 * pairs' share of set-mates among the last touches in between, over the
 * model's E / D for the same reuses, shrunk to 1 within its noise.
 */
static void factors(const lomas_profile *p, const assoc_pair *pr, size_t np, const al_lines *L,
                    const al_reuse *r, uint64_t S, al_work *W)
{
	memset(W->acc, 0, (size_t)NBANDS * NCLASS * 4 * sizeof *W->acc);
	for (size_t i = 0; i < np; i++) {
		const al_reuse *x = &r[pr[i].ri];
		uint64_t lj = p->samples.items[pr[i].rj].addr / p->line_size;
		double *a = W->acc + ((size_t)(x->fb / 4) * NCLASS + W->cls[pr[i].ri]) * 4;
		double om = pr[i].om;
		a[0] += om;
		a[1] += om * om;
		a[2] += lj % S == L->u[x->k] % S ? om : 0.0;
		a[3] += om * fmin(1.0, W->E[pr[i].ri] / W->D[x->fb]);
	}
	for (size_t k = 0; k < (size_t)NBANDS * NCLASS; k++) {
		const double *a = W->acc + k * 4;
		double prior = a[0] > 0.0 ? a[3] / a[0] : 0.0;
		W->factor[k] =
		    prior > 0.0 ? assoc_shrink(a[2], a[0], a[1], prior, SHRINK_Z) / prior : 1.0;
	}
}

static void work_free(al_work *W)
{
	free(W->sl);
	free(W->ord);
	free(W->q);
	free(W->pm);
	free(W->lc);
	free(W->E);
	free(W->cls);
	free(W->dp);
	free(W->dx);
	free(W->dy);
	free(W->qs);
	free(W->acc);
	free(W->factor);
	free(W->left);
	free(W->sparse);
	free(W->tfit);
	free(W->well);
	free(W->D);
	free(W->dh);
	free(W->du);
}

static lomas_status work_alloc(al_work *W, size_t n, size_t nr, unsigned A)
{
	W->sl = malloc((n ? n : 1) * sizeof *W->sl);
	W->ord = malloc((nr ? nr : 1) * sizeof *W->ord);
	W->q = malloc((n ? n : 1) * sizeof *W->q);
	W->pm = malloc((n ? n : 1) * sizeof *W->pm);
	W->lc = malloc((n ? n : 1) * sizeof *W->lc);
	W->E = malloc((nr ? nr : 1) * sizeof *W->E);
	W->cls = malloc((nr ? nr : 1) * sizeof *W->cls);
	W->dp = malloc(A * sizeof *W->dp);
	W->dx = malloc(A * sizeof *W->dx);
	W->dy = malloc(A * sizeof *W->dy);
	W->qs = malloc((n ? n : 1) * sizeof *W->qs);
	W->acc = malloc((size_t)NBANDS * NCLASS * 4 * sizeof *W->acc);
	W->factor = malloc((size_t)NBANDS * NCLASS * sizeof *W->factor);
	W->left = calloc(NFB, sizeof *W->left);
	W->D = calloc(NFB, sizeof *W->D);
	W->sparse = calloc(NFB, sizeof *W->sparse);
	W->tfit = calloc(NFB, sizeof *W->tfit);
	W->well = calloc(NFB, sizeof *W->well);
	W->dh = calloc(NBANDS, sizeof *W->dh);
	W->du = calloc(NBANDS, sizeof *W->du);
	if (!W->sl || !W->ord || !W->q || !W->pm || !W->lc || !W->E || !W->cls || !W->dp ||
	    !W->dx || !W->dy || !W->qs || !W->acc || !W->factor || !W->left || !W->D ||
	    !W->sparse || !W->tfit || !W->well || !W->dh || !W->du)
		return error_set(LOMAS_ENOMEM, "out of memory");
	return LOMAS_OK;
}

/*
 * Per band of d: the distinct lines in a window of the band's mean d (the
 * reuses' mean stack distance, or the sampled lines' sum of p if larger)
 * and the part of them no sampled line accounts for (spread over the sets
 * as a Poisson count).
 */
static lomas_status band_totals(const al_lines *L, const al_reuse *r, size_t nr, al_work *W)
{
	double *acc = calloc((size_t)NFB * 3, sizeof *acc);
	if (!acc)
		return error_set(LOMAS_ENOMEM, "out of memory");
	for (size_t i = 0; i < nr; i++) {
		double *a = acc + (size_t)r[i].fb * 3;
		a[0] += r[i].wt;
		a[1] += r[i].wt * r[i].d;
		a[2] += r[i].wt * r[i].sd;
	}
	for (size_t h = 0; h < NBANDS; h++) {
		double sw = 0.0, swd = 0.0;
		for (size_t b = 4 * h; b < 4 * h + 4; b++) {
			sw += acc[b * 3];
			swd += acc[b * 3 + 1];
		}
		W->dh[h] = sw > 0.0 ? swd / sw : 0.0;
	}
	for (size_t b = 0; b < NFB; b++) {
		const double *a = acc + b * 3;
		double d, sp = 0.0, sd, ss = 0.0;
		W->tfit[b] = 1.0;
		if (!(a[0] > 0.0))
			continue;
		d = a[1] / a[0];
		sd = a[2] / a[0];
		for (size_t k = 0; k < L->n; k++) {
			double pk = al_touch(L, k, d, L->T);
			sp += pk;
			ss += L->cnt[k] >= WELL_SAMPLED ? 0.0 : pk;
		}
		W->sparse[b] = ss;
		W->well[b] = sp - ss;
		/*
		 * The touch probabilities are shares of the whole run: a line
		 * touched only in another phase still counts a little in every
		 * window, and a reuse inside a small phase got set-mates it never
		 * has (bench/phased/alternate: a 256-line array read over and
		 * over between sweeps of 122880 lines, the sweep's lines 8 more a
		 * set in each window of 2048 references, where the stack distance
		 * says 255 lines in all: +4.4 points at 32 KiB 8-way). Where the
		 * reuses' stack distance (time-aware, the curve's) is well below
		 * that sum, the lines in between are scaled to it; within 10 % of
		 * it (the two estimates' noise on stationary traces) they are
		 * not: a 0.5 % scaling moved a hot set's P(X >= 16) by 1.7 points.
		 */
		W->tfit[b] = fmin(1.0, fmax(sd, 1.0) / (0.9 * sp));
		W->D[b] = fmax(fmax(sp, sd), 1.0);
		W->left[b] = fmax(0.0, sd - sp);
	}
	for (size_t h = 0; h < NBANDS; h++) {
		double sw = 0.0, swu = 0.0;
		for (size_t b = 4 * h; b < 4 * h + 4; b++) {
			sw += acc[b * 3];
			swu += acc[b * 3] * (W->left[b] + W->sparse[b]);
		}
		W->du[h] = sw > 0.0 ? swu / sw : 0.0;
	}
	free(acc);
	return LOMAS_OK;
}

typedef struct al_gkey {
	uint64_t band, pc;
	uint32_t i; /* the sample */
} al_gkey;

static int gkey_cmp(const void *a, const void *b)
{
	const al_gkey *x = a, *y = b;
	if (x->band != y->band)
		return x->band < y->band ? -1 : 1;
	return x->pc < y->pc ? -1 : x->pc > y->pc;
}

/*
 * The reuses' groups (half octave of d, start pc): r[].grp, and per sample
 * its reuse's group or UINT32_MAX (*group, for assoc_spread_build).
 */
static lomas_status group_reuses(const lomas_profile *p, const uint32_t *rmap, al_reuse *r,
                                 uint32_t **group, size_t *ng)
{
	size_t n = 0;
	al_gkey *key = malloc((p->samples.n ? p->samples.n : 1) * sizeof *key);
	uint32_t *gr = malloc((p->samples.n ? p->samples.n : 1) * sizeof *gr);
	if (!key || !gr) {
		free(key);
		free(gr);
		return error_set(LOMAS_ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < p->samples.n; i++) {
		gr[i] = UINT32_MAX;
		if (rmap[i] != UINT32_MAX)
			key[n++] = (al_gkey){r[rmap[i]].fb / 4u, p->samples.items[i].start_pc,
			                     (uint32_t)i};
	}
	qsort(key, n, sizeof *key, gkey_cmp);
	*ng = 0;
	for (size_t j = 0; j < n; j++) {
		if (j > 0 && gkey_cmp(&key[j - 1], &key[j]) != 0)
			++*ng;
		gr[key[j].i] = (uint32_t)*ng;
		r[rmap[key[j].i]].grp = (uint32_t)*ng;
	}
	*ng += n > 0;
	free(key);
	*group = gr;
	return LOMAS_OK;
}

/* delta[j]: the A-way LRU model less the fully associative one, sizes ascending in lines. */
lomas_status assoc_lru_delta(const lomas_profile *p, const double *lines, size_t n, unsigned ways,
                             double *delta, double *fa_out)
{
	model_opts o = model_default_opts(LOMAS_POLICY_LRU);
	model_data m;
	model_mean mean;
	al_lines L = {0};
	al_work W = {0};
	al_reuse *r = NULL;
	assoc_pair *pr = NULL;
	assoc_spread sp = {0};
	size_t nr = 0, np = 0, ng = 0;
	uint32_t *rmap = NULL, *group = NULL;
	lomas_status st;
	o.lru = true;
	o.per_sample = true; /* the samples' groups, for the curve's stack distances */
	memset(delta, 0, n * sizeof *delta);
	memset(fa_out, 0, n * sizeof *fa_out);
	if ((st = model_data_build(p, &o, &m)))
		return st;
	mean = model_mean_of(&m);
	if (!(rmap = malloc((p->samples.n ? p->samples.n : 1) * sizeof *rmap))) {
		st = error_set(LOMAS_ENOMEM, "out of memory");
		goto out;
	}
	if ((st = al_lines_build(p, &L)) ||
	    (st = prepare_reuses(p, &m, &L, &r, &nr, rmap, &L.unseen_floor)) ||
	    (st = assoc_pairs(p, kept, rmap, 0x5e7a55, true, &pr, &np)) ||
	    (st = work_alloc(&W, L.n, nr, ways)) || (st = band_totals(&L, r, nr, &W)) ||
	    (st = group_reuses(p, rmap, r, &group, &ng)) ||
	    (st = assoc_spread_build(p, &L, W.dh, NBANDS, group, ng, 0x5b7ead, &sp)))
		goto out;
	W.sp = &sp;
	/* The pairs' reuses as indices into r. */
	for (size_t i = 0; i < np; i++)
		pr[i].ri = rmap[pr[i].ri];
	if (!(mean.total > 0.0))
		goto out;
	/* The sizes of one set count at a time: the cells are per set count. */
	for (size_t j0 = 0, j1; j0 < n; j0 = j1) {
		uint64_t S = (uint64_t)lines[j0] / ways;
		double sa;
		for (j1 = j0; j1 < n && (uint64_t)lines[j1] / ways == S; j1++)
			;
		/* One set is the fully associative cache: no difference. */
		if (S <= 1)
			continue;
		for (size_t k = 0; k < L.n; k++)
			W.sl[k] = (al_sl){L.u[k] % S, (uint32_t)k};
		qsort(W.sl, L.n, sizeof *W.sl, sl_cmp);
		W.ck = W.cs = 0.0;
		for (size_t k0 = 0, k1; k0 < L.n; k0 = k1) {
			for (k1 = k0; k1 < L.n && W.sl[k1].set == W.sl[k0].set; k1++)
				;
			if (assoc_crowded((double)(k1 - k0), (double)L.n, S)) {
				W.ck += (double)(k1 - k0);
				W.cs += 1.0;
			}
		}
		for (size_t i = 0; i < nr; i++)
			W.ord[i] = (al_ord){L.u[r[i].k] % S, r[i].fb,
			                    (uint32_t)(4.0 * log2(1.0 + L.nw[r[i].k])), r[i].k,
			                    (uint32_t)i};
		qsort(W.ord, nr, sizeof *W.ord, ord_cmp);
		cells(&L, r, nr, S, ways, &W, 0);
		factors(p, pr, np, &L, r, S, &W);
		sa = cells(&L, r, nr, S, ways, &W, 1);
		for (size_t j = j0; j < j1; j++) {
			double fa = 0.0;
			/* StatStack's rounding: a whole line (statstack.c). */
			for (size_t i = 0; i < nr; i++)
				if (r[i].sd >= lines[j] - 0.5)
					fa += r[i].wt;
			delta[j] = (sa - fa) / mean.total;
			fa_out[j] = fa / mean.total;
		}
	}
out:
	free(rmap);
	free(group);
	free(r);
	free(pr);
	assoc_spread_free(&sp);
	al_lines_free(&L);
	work_free(&W);
	model_data_free(&m);
	return st;
}

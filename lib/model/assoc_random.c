/*
 * Set-associative random replacement, per set (docs/model.md): an A-way
 * cache of S sets, a line's set its line number modulo S.
 *
 * A line of set s is evicted only by misses to set s, each with
 * probability 1/A. Each of the d references between a reuse's ends goes to
 * its set with probability q (the set's share of the references, less the
 * line's own, times how much busier the set is inside such intervals than
 * over the run: see locality()) and evicts the line with probability
 * R' / A, R' the miss ratio of the set's other lines while the line is
 * cached: with K lines in the set, R' = R K / (K - 1) (the other K - 1
 * share the A - 1 remaining ways: the occupancy correction that makes
 * the fully associative StatCache exact on uniform addresses, and takes a
 * cyclic sweep of 10 lines in 8 ways from 34.4 % to 38.0 % for the exact
 * 38.4 %). So the line survives with probability (1 - q R' / A)^d (each
 * reference one trial: a binomial thinning of d), and the set's ratio
 * R_s solves its own StatCache fixed point over the reuses that start in
 * it,
 *   sum_{i in s} w_i (1 - (1 - q_i (R_s + c) K / ((K - 1) A))^d_i) + C_s
 *     = R_s S_s,
 * S_s its sampled weight, C_s its censored weight, c the segment's
 * cold-miss rate (cold misses evict too; assumed spread like the
 * references). The segment's ratio is sum_s S_s R_s / sum_s S_s: the sets
 * weighted by their share of the references. The first pass takes R_s
 * from all the sets of s's class (of share) at once: one set's own
 * samples, where there are about as many sets as samples, make its root
 * all or nothing. One global ratio (the fully
 * associative fixed point, or a share of lines taken for a share of the
 * misses) averages a crowded set's many misses with a quiet set's few: 13
 * points low on a strided sweep mixed with hot random reads, where the
 * sweep's few sets take most of the misses.
 *
 * r_s is the sampled weight of set s over all the weight, shrunk towards
 * uniform placement (1/S) by how far it stands out of its sampling noise
 * (uniform addresses then keep r_s = 1/S, and the model is the fully
 * associative one with L = A S). A set whose lines all fit in its ways
 * (its distinct sampled lines plus its share of the unsampled footprint)
 * never misses. Like assoc.c, the result is the difference to the fully
 * associative StatCache root of the same segment, added to
 * lomas_model_curve's curve.
 *
 * Neither q nor the set's misses are even in time: a reuse's own sampled
 * references inside it say how far its interval differs from the cell's
 * mean, in two passes (dispersion(), miss_dispersion()).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "assoc_pairs.h"
#include "model.h"

#define NBANDS 128 /* half octaves of d + 1 */
#define NCLASS 48  /* half octaves of 1 + r_s S */
/*
 * Shares and locality factors keep what stands out of 2 standard
 * deviations of their noise: at 1, two sweeps at 64 KiB were 1.4 to 2.9
 * points low with three of four seeds of the sampling; at 3, up to 1.5
 * high (the sweeps' real crowding shrunk away).
 */
#define SHRINK_Z 2.0

static unsigned band_of(double d)
{
	unsigned b = (unsigned)(2.0 * log2(d + 1.0));
	return b < NBANDS ? b : NBANDS - 1;
}

static unsigned class_of(double share, uint64_t S)
{
	unsigned c = (unsigned)(2.0 * log2(1.0 + share * (double)S));
	return c < NCLASS ? c : NCLASS - 1;
}

/* A weighted sample: where it starts, its line and set, its reuse. */
typedef struct ar_ref {
	uint64_t line;
	uint64_t set; /* line % S for the set count at hand */
	double w;
	double own; /* its line's share of all the weight */
	double d;   /* reuse distance (reused samples) */
	uint32_t group;
	uint32_t ix;   /* the sample's index */
	uint16_t band; /* band_of(d) */
	uint8_t state;
	uint8_t cls; /* its set's class (class_of) for the set count at hand */
} ar_ref;

/* One set's totals over the whole profile. */
typedef struct ar_set {
	uint64_t set;
	double share; /* r_s, shrunk */
	double raw;   /* r_s as sampled */
	unsigned cls; /* class_of(share) */
	double load;  /* distinct lines mapping to it (expected) */
	double lfl;   /* the same with the unseen lines' floor alone */
} ar_set;

static int by_set_line(const void *a, const void *b)
{
	const ar_ref *x = a, *y = b;
	if (x->set != y->set)
		return x->set < y->set ? -1 : 1;
	return x->line < y->line ? -1 : x->line > y->line;
}

static int by_group_class_set(const void *a, const void *b)
{
	const ar_ref *x = a, *y = b;
	if (x->group != y->group)
		return x->group < y->group ? -1 : 1;
	if (x->cls != y->cls)
		return x->cls < y->cls ? -1 : 1;
	return x->set < y->set ? -1 : x->set > y->set;
}

/*
 * The set table: the sets the samples touch, ascending, and for set
 * counts up to DENSE_MAX each set's index (a lookup per pair and size:
 * a binary search there doubled the model's time).
 */
#define DENSE_MAX (1u << 22)

typedef struct ar_sets {
	ar_set *t;
	size_t n;
	uint32_t *ix; /* S entries when S <= DENSE_MAX */
	double slack; /* lines a set may seem to hold over its ways and still fit */
	double floor; /* unseen lines the reuses' stack distances imply (assoc_unseen_floor) */
	double tot;   /* the samples' weight */
} ar_sets;

/*
 * The share q of the references between a reuse of weight w of a line of
 * share own (all its samples' weight over all) that go to its set e: the
 * set's share less the line's, over 1 - the line's (none of the
 * references between is to the line). The line's share is its other
 * samples' and, for the sample that selected the reuse, its set's mean
 * line's (the set's share over its load), not that sample's own weight:
 * with that, a line sampled once outweighs 1/S wherever the sets outnumber
 * the samples, its set has nothing left for its other lines, and random
 * replacement never evicts (a 48 MiB random walk sampled 25000 times, 16
 * MiB 8-way, 32768 sets: 0.95 % for the exact 53.5 %, now 52.7 %). Its
 * other samples alone (leave-one-out) count one sample's worth too little
 * for a line sampled often: +2.0 pp on row sums with a hot table at 256
 * KiB 8-way (test_assoc), PolyBench +0.03 pp on the mean.
 */
static double other_share(const ar_sets *T, const ar_set *e, double own, double w)
{
	double o = fmax(0.0, own - w / T->tot) + fmin(w / T->tot, e->share / fmax(e->load, 1.0));
	return fmax(0.0, e->share - o) / (1.0 - fmin(o, 0.5));
}

/* The table's entry for set s (present). */
static ar_set *set_find(const ar_sets *T, uint64_t s)
{
	size_t lo = 0, hi = T->n;
	if (T->ix)
		return &T->t[T->ix[s]];
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (T->t[mid].set < s)
			lo = mid + 1;
		else
			hi = mid;
	}
	return &T->t[lo];
}

/* The occupancy factor K / (K - 1) of a set of K lines (the header comment). */
static double set_occ(const ar_set *e)
{
	return e->load / fmax(e->load - 1.0, 1.0);
}

/* Whether a set's lines all fit in its A ways: it never misses (sets_build). */
static bool set_fits(const ar_sets *T, const ar_set *e, double A)
{
	return e->load < A + T->slack && e->lfl < A + 0.5;
}

/*
 * StatCache's root for one set or group: sum_i w_i (1 - e^{-(R + c) x_i}) +
 * C = R S with x_i = d_i lam_i, by Newton from R = 1 (the left side less
 * R S is concave and not positive at 1, so the iterates fall monotonically
 * to the largest root, never to R = 0 by accident).
 */
static double root(const double *x, const double *w, size_t k, double C, double S, double c)
{
	double R = 1.0;
	for (int it = 0; it < 100; it++) {
		double h = C - R * S, dh = -S, step;
		for (size_t i = 0; i < k; i++) {
			double e = exp(-(R + c) * x[i]);
			h += w[i] * (1.0 - e);
			dh += w[i] * x[i] * e;
		}
		if (h >= 0.0 || !(dh < 0.0))
			break;
		step = h / dh;
		R -= step;
		if (R <= 0.0)
			return 0.0;
		if (fabs(step) < 1e-10)
			break;
	}
	return R < 0.0 ? 0.0 : (R > 1.0 ? 1.0 : R);
}

/*
 * A set's root: sum_i w_i (1 - (1 - a_i (R + c))^d_i) + C = R S, where
 * a_i (R + c) is the chance that one reference between evicts the line
 * (a_i = q_i K / ((K - 1) A), above).
 * Each of the d references between is one trial (a binomial thinning of
 * the distance): StatCache's (1 - 1/A)^(R q d) would take the set's
 * expected misses for its count, which at 8 ways is 2.5 points high on
 * uniform addresses (a set of 16 lines in 8 ways: 52 % for the exact 50 %).
 * Where the reuse's share q is uncertain (al, be finite: see
 * dispersion()), the survival e^{-L}, L = -d log(1 - a (R + c)), is its
 * mean over q's gamma posterior, (1 + L / be)^{-al}.
 * Concave in R as above: Newton from R = 1.
 */
static double set_root(const double *a, const double *d, const double *w, const double *al,
                       const double *be, size_t k, double C, double S, double c)
{
	double R = 1.0;
	for (int it = 0; it < 100; it++) {
		double h = C - R * S, dh = -S, step;
		for (size_t i = 0; i < k; i++) {
			double y = fmin(a[i] * (R + c), 1.0 - 1e-12), l = log1p(-y);
			if (isfinite(al[i])) {
				double L = -d[i] * l, sv = exp(-al[i] * log1p(L / be[i]));
				h += w[i] * (1.0 - sv);
				dh += w[i] * sv * al[i] / (be[i] + L) * d[i] * a[i] / (1.0 - y);
				continue;
			}
			h += w[i] * -expm1(d[i] * l);
			dh += w[i] * d[i] * a[i] * exp((d[i] - 1.0) * l);
		}
		if (h >= 0.0 || !(dh < 0.0))
			break;
		step = h / dh;
		R -= step;
		if (R <= 0.0)
			return 0.0;
		if (fabs(step) < 1e-10)
			break;
	}
	return R < 0.0 ? 0.0 : (R > 1.0 ? 1.0 : R);
}

/*
 * One reuse's miss probability at eviction rate a y per reference between
 * (al, be as set_root's).
 */
static double reuse_miss(double a, double d, double al, double be, double y)
{
	double l = log1p(-fmin(a * y, 1.0 - 1e-12));
	if (isfinite(al))
		return 1.0 - exp(-al * log1p(-d * l / be));
	return -expm1(d * l);
}

/* The weighted samples with their start groups; *unseen the unsampled footprint. */
/* A sampled line and its share of the sampled weight. */
typedef struct ar_line {
	uint64_t line;
	double share;
} ar_line;

static lomas_status refs_build(const lomas_profile *p, model_data *m, ar_ref **out, size_t *nout,
                               double *unseen, double *unseen_sd, ar_line *lw, size_t *nl,
                               double *wsum, double *w2sum)
{
	size_t n = 0, distinct = 0;
	double dang = 0.0, dang2 = 0.0, tot = 0.0;
	ar_ref *r = malloc((p->samples.n ? p->samples.n : 1) * sizeof *r);
	if (!r)
		return error_set(LOMAS_ENOMEM, "out of memory");
	for (size_t i = 0; i < p->samples.n; i++) {
		const lomas_sample *s = &p->samples.items[i];
		const lomas_window *win;
		if (!(s->weight > 0.0))
			continue;
		win = &p->windows.items[s->window];
		r[n].group = m->piece_group[model_piece_of(&m->pieces, win, s->window, s->start)];
		r[n].ix = (uint32_t)i;
		r[n].line = s->addr / p->line_size;
		r[n].set = r[n].line;
		r[n].w = s->weight;
		r[n].state = (uint8_t)s->state;
		r[n].d = s->state == LOMAS_SAMPLE_REUSED ? (double)sample_distance(s) : 0.0;
		r[n].band = (uint16_t)band_of(r[n].d);
		if (s->state == LOMAS_SAMPLE_DANGLING) {
			dang += s->weight;
			dang2 += s->weight * s->weight;
		}
		n++;
	}
	/* Distinct sampled lines (set = line here): the load's known part. */
	qsort(r, n, sizeof *r, by_set_line);
	for (size_t i = 0; i < n; i++) {
		if (i == 0 || r[i].line != r[i - 1].line)
			lw[distinct++] = (ar_line){r[i].line, 0.0};
		lw[distinct - 1].share += r[i].w;
		tot += r[i].w;
	}
	for (size_t i = 0; i < distinct; i++)
		lw[i].share /= tot;
	*wsum = tot;
	*w2sum = 0.0;
	for (size_t i = 0; i < n; i++)
		*w2sum += r[i].w * r[i].w;
	for (size_t i = 0, k = 0; i < n; i++) {
		k += i > 0 && r[i].line != r[i - 1].line;
		r[i].own = lw[k].share;
	}
	*nl = distinct;
	*unseen = dang > (double)distinct ? dang - (double)distinct : 0.0;
	/* The footprint's sampling noise (a sum of dangling weights). */
	*unseen_sd = sqrt(dang2);
	*out = r;
	*nout = n;
	return LOMAS_OK;
}

/*
 * Sets are not busy evenly in time: a column walk spends a whole column in
 * one set, so a line reused within the column sees only its own set's
 * references in between, though every set has 1/S of the run's. What a
 * reuse's survival needs is the share q of the references inside its
 * interval that go to its set: the sampled references inside sampled
 * reuses show it (assoc_pairs.c).
 */
typedef struct ar_pair {
	uint64_t lx, lj; /* the reuse's line; the reference's */
	double om;
	double own;  /* the reuse line's share of all the weight */
	double wr;   /* the reuse's weight */
	uint32_t ri; /* the reuse's sample (a reuse's pairs are consecutive) */
	uint32_t rj; /* the reference's */
	uint16_t band;
} ar_pair;

/* The share of line l (present in lw[n], sorted). */
static double line_share(const ar_line *lw, size_t n, uint64_t l)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (lw[mid].line < l)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && lw[lo].line == l ? lw[lo].share : 0.0;
}

static bool is_reused(const void *p, size_t i)
{
	return ((const lomas_profile *)p)->samples.items[i].state == LOMAS_SAMPLE_REUSED;
}

static lomas_status pairs_build(const lomas_profile *p, const ar_line *lw, size_t nl, ar_pair **out,
                                size_t *nout)
{
	assoc_pair *ap = NULL;
	ar_pair *pr;
	size_t np = 0;
	lomas_status st = assoc_pairs(p, is_reused, p, 0x4a2d0, false, &ap, &np);
	if (st)
		return st;
	if (!(pr = malloc((np ? np : 1) * sizeof *pr))) {
		free(ap);
		return error_set(LOMAS_ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < np; i++) {
		const lomas_sample *si = &p->samples.items[ap[i].ri];
		uint64_t lx = si->addr / p->line_size;
		pr[i] = (ar_pair){lx,         p->samples.items[ap[i].rj].addr / p->line_size,
		                  ap[i].om,   line_share(lw, nl, lx),
		                  si->weight, ap[i].ri,
		                  ap[i].rj,   (uint16_t)band_of((double)sample_distance(si))};
	}
	free(ap);
	*out = pr;
	*nout = np;
	return LOMAS_OK;
}

/*
 * factor[band * NCLASS + class]: the share q of the references inside the
 * reuses of one band of distance whose set is of one class of share, over
 * the mean share r_s of those reuses' sets (1 where nothing is known, or
 * where q does not stand out of its sampling noise: then the set's share
 * over the run is its share in between).
 */
static lomas_status locality(const ar_pair *pr, size_t np, const ar_sets *T, uint64_t S,
                             double *factor)
{
	double *acc = calloc((size_t)NBANDS * NCLASS * 4, sizeof *acc);
	if (!acc)
		return error_set(LOMAS_ENOMEM, "out of memory");
	for (size_t i = 0; i < np; i++) {
		const ar_set *e = set_find(T, pr[i].lx % S);
		double *a = acc + ((size_t)pr[i].band * NCLASS + e->cls) * 4;
		a[0] += pr[i].om;
		a[1] += pr[i].om * pr[i].om;
		a[2] += pr[i].lj % S == pr[i].lx % S ? pr[i].om : 0.0;
		/*
		 * Spread like the run, the references between would go to the
		 * set at its share less the line's own (none of them is to the
		 * line): (r_s - r_x) / (1 - r_x).
		 */
		a[3] += pr[i].om * fmax(0.0, e->raw - pr[i].own) / (1.0 - fmin(pr[i].own, 0.5));
	}
	for (size_t k = 0; k < (size_t)NBANDS * NCLASS; k++) {
		const double *a = acc + k * 4;
		double prior = a[0] > 0.0 ? a[3] / a[0] : 0.0;
		factor[k] =
		    prior > 0.0 ? assoc_shrink(a[2], a[0], a[1], prior, SHRINK_Z) / prior : 1.0;
	}
	free(acc);
	return LOMAS_OK;
}

/*
 * How uneven q is among the reuses of one cell (band of d, class of set):
 * a column walk's table line reused while the walk is in another set sees
 * almost none of its set's references in between, and one reused while
 * the column is in its own set sees hundreds. The mean q of the cell gives
 * every reuse the same expected evictions, and (1 - q R' / A)^d of the
 * mean is far below the mean survival of such a mixture (17 points of
 * false misses at 32 KiB on a 128-line-row column sum). With k of a
 * reuse's n distinct sampled references inside falling in its set, the
 * spread of rho = q / q_i (q_i the reuse's share-based q: sets of other
 * loads are not spread) is its second factorial moment less the square of
 * its mean: E[rho^2] = sum w k (k - 1) / q_i^2 / sum w n (n - 1)
 * (binomial counts), kept only past 3 standard deviations of its noise
 * under an even rho (uniform addresses keep the mean). Taken as a gamma of
 * shape kap[cell] = mean^2 / variance (INFINITY: no spread), and for each
 * reuse updated by its own k of n (kk, nn): q's posterior is a gamma of
 * shape kap + k and rate (kap + n q) / q, whose mean survival set_root
 * takes (al = kap + k, be = kap + n q).
 */
#define DISP_Z 3.0
#define NMOM 10 /* a cell's sums, spread_add() */

/*
 * The distinct sampled references inside the reuse of pr[i0] (assoc_pairs
 * draws with replacement): *n of them, of which those in its set count by
 * pm into *k, their squares into *k2. Where pm is NULL (q's spread: the
 * set's traffic, not its misses) each line in the set counts once: a line
 * referenced again and again in between (an accumulator kept in memory,
 * twice a row of a column walk) evicts as one line, and counting its
 * references made the set's traffic look 7 times as uneven as it is, the
 * gamma then letting most reuses survive (columns at 32 KiB 8-way: -21
 * points). Returns the end of the reuse's pairs.
 */
static size_t reuse_refs(const ar_pair *pr, size_t i0, size_t np, uint64_t S, const double *pm,
                         double *n, double *k, double *k2)
{
	size_t i1;
	*n = *k = *k2 = 0.0;
	for (i1 = i0; i1 < np && pr[i1].ri == pr[i0].ri; i1++) {
		size_t j = i0;
		double p;
		while (j < i1 && pr[j].rj != pr[i1].rj)
			j++;
		if (j < i1)
			continue;
		*n += 1.0;
		if (pr[i1].lj % S != pr[i1].lx % S)
			continue;
		if (!pm) {
			for (j = i0; j < i1 && pr[j].lj != pr[i1].lj; j++)
				;
			if (j < i1)
				continue;
		}
		p = pm ? pm[pr[i1].rj] : 1.0;
		*k += p;
		*k2 += p * p;
	}
	return i1;
}

/*
 * A reuse of weight w into its cell's sums, in units of e (what one
 * reference between was expected to give): k of its n references, k2 the
 * sum of their squares (k (k - 1) for counts); a[9] keeps the largest
 * reuse's pairs.
 */
static void spread_add(double *a, double w, double n, double k, double k2, double e)
{
	a[0] += w * n;
	a[1] += w * k / e;
	a[2] += w * n * (n - 1.0);
	a[3] += w * (k * k - k2) / (e * e);
	a[4] += w * w * n * (n - 1.0) / (e * e);
	a[5] += w * w * n * (n - 1.0) * (n - 2.0) / e;
	a[6] += w * w * n * (n - 1.0) * (n - 2.0) * (n - 3.0);
	a[7] += w * w * n * n * (n - 1.0) * (n - 1.0);
	a[8] += n * e;
	a[9] = fmax(a[9], w * (k * k - k2) / (e * e));
}

/*
 * The gamma shape of a cell's spread (INFINITY: none): the ratio's second
 * factorial moment less its squared mean m, kept past DISP_Z standard
 * deviations of its noise under an even ratio (q_i m for each reuse:
 * k (k - 1) / e^2's mean n (n - 1) m^2 and its variance), and past them
 * still without its largest reuse's pairs: the noise is that of a rare
 * count, far from normal. A copy's long reuses, 16 sampled references
 * between each and 0.05 of them expected in the reuse's set: one reuse with
 * 2 there stood 3.6 deviations out and made a spread of shape 0.26, whose
 * mean survival kept 45 % of the reuses where every one misses (a
 * recorded program's memcpy phase, 1 MiB 16-way: -19.2 pp; now -1.6).
 * One reuse is a spread no other confirms.
 */
static double spread_kap(const double *a)
{
	double m = a[0] > 0.0 ? a[1] / a[0] : 0.0, z, var;
	if (!(m > 0.0) || !(a[2] > 0.0))
		return INFINITY;
	z = a[3] - m * m * a[2];
	var = m * m * m * m * (a[6] - a[7]) + 4.0 * m * m * m * a[5] + 2.0 * m * m * a[4];
	if (var > 0.0 && z - a[9] > DISP_Z * sqrt(var))
		return m * m * a[2] / (z - DISP_Z * sqrt(var));
	return INFINITY;
}

static lomas_status dispersion(const ar_pair *pr, size_t np, const ar_sets *T, uint64_t S,
                               double *kap, uint8_t *kk, uint8_t *nn)
{
	double *acc = calloc((size_t)NBANDS * NCLASS * NMOM, sizeof *acc);
	if (!acc)
		return error_set(LOMAS_ENOMEM, "out of memory");
	for (size_t i0 = 0, i1; i0 < np; i0 = i1) {
		const ar_set *e = set_find(T, pr[i0].lx % S);
		/* The reuse's own q before the cell's factor (as the solve takes it). */
		double q = other_share(T, e, pr[i0].own, pr[i0].wr), n, k, k2;
		i1 = reuse_refs(pr, i0, np, S, NULL, &n, &k, &k2);
		kk[pr[i0].ri] = (uint8_t)k;
		nn[pr[i0].ri] = (uint8_t)n;
		/* In units of q: the spread of the ratio, not the sets' own shares. */
		if (q > 0.0)
			spread_add(acc + ((size_t)pr[i0].band * NCLASS + e->cls) * NMOM, pr[i0].wr,
			           n, k, k2, q);
	}
	for (size_t c = 0; c < (size_t)NBANDS * NCLASS; c++)
		kap[c] = spread_kap(acc + c * NMOM);
	free(acc);
	return LOMAS_OK;
}

/*
 * The same for the misses that evict (the second pass): what a reuse's
 * line survives is the misses to its set in between, and the set's ratio
 * R_s is their mean over the run, while a column walk's misses crowd into
 * the intervals it spends in the set. Each sampled reference inside a
 * reuse and in its set counts by its miss probability pm (its own reuse's,
 * from the first pass: a line's references miss much as its reuses do);
 * e[i] is what the first pass expected of one reference between, q (R_s +
 * c). Per cell: fac, the observed over the expected (past 2 standard
 * deviations of its Poisson noise), and kap, the spread, as dispersion()
 * (pairs of distinct references both in the set: sum p_j p_l, j != l);
 * ko[i] the reuse's own evidence, sum p.
 */
static lomas_status miss_dispersion(const ar_pair *pr, size_t np, uint64_t S, const double *pm,
                                    const double *e, const ar_sets *T, double *fac, double *kap,
                                    double *ko)
{
	double *acc = calloc((size_t)NBANDS * NCLASS * NMOM, sizeof *acc);
	if (!acc)
		return error_set(LOMAS_ENOMEM, "out of memory");
	for (size_t i0 = 0, i1; i0 < np; i0 = i1) {
		const ar_set *st = set_find(T, pr[i0].lx % S);
		double ei = e[pr[i0].ri], n, k, k2;
		i1 = reuse_refs(pr, i0, np, S, pm, &n, &k, &k2);
		ko[pr[i0].ri] = k;
		if (ei > 0.0)
			spread_add(acc + ((size_t)pr[i0].band * NCLASS + st->cls) * NMOM, pr[i0].wr,
			           n, k, k2, ei);
	}
	for (size_t c = 0; c < (size_t)NBANDS * NCLASS; c++) {
		const double *a = acc + c * NMOM;
		double m = a[0] > 0.0 ? a[1] / a[0] : 0.0, dev2 = (m - 1.0) * (m - 1.0), var0;
		fac[c] = 1.0;
		kap[c] = INFINITY;
		if (!(m > 0.0) || !(a[8] > 0.0))
			continue;
		var0 = 4.0 / a[8]; /* Poisson noise of the count under m = 1 */
		if (dev2 > var0)
			fac[c] = 1.0 + (m - 1.0) * (dev2 - var0) / dev2;
		kap[c] = spread_kap(a);
	}
	free(acc);
	return LOMAS_OK;
}

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/*
 * Per set of S: its shrunk share of the weight and its load, from the
 * distinct lines lw[nl] (tot, tot2: the samples' weight and squared
 * weight); tmp holds nl. T->t holds nl.
 */
static lomas_status sets_build(const ar_line *lw, size_t nl, double tot, double tot2, uint64_t S,
                               double unseen, double unseen_sd, uint64_t *tmp, ar_sets *T)
{
	double u = 1.0 / (double)S, ck = 0.0, cs = 0.0;
	ar_set *t = T->t;
	size_t k = 0;
	for (size_t i = 0; i < nl; i++)
		tmp[i] = lw[i].line % S;
	qsort(tmp, nl, sizeof *tmp, u64_cmp);
	for (size_t i0 = 0, i1; i0 < nl; i0 = i1) {
		for (i1 = i0; i1 < nl && tmp[i1] == tmp[i0]; i1++)
			;
		if (assoc_crowded((double)(i1 - i0), (double)nl, S)) {
			ck += (double)(i1 - i0);
			cs += 1.0;
		}
	}
	for (size_t i0 = 0, i1; i0 < nl; i0 = i1) {
		for (i1 = i0; i1 < nl && tmp[i1] == tmp[i0]; i1++)
			;
		t[k].set = tmp[i0];
		t[k].raw = 0.0;
		t[k].load = assoc_set_load((double)(i1 - i0), (double)nl, unseen, S, ck, cs);
		t[k].lfl = assoc_set_load((double)(i1 - i0), (double)nl, T->floor, S, ck, cs);
		k++;
	}
	T->n = k;
	/*
	 * A set fits if its load is within twice the noise of the unseen
	 * lines' share a set of its ways (the footprint's noise, at most all
	 * the unseen lines), as in assoc_lru.c: a column walk sampled every
	 * 128 references has sets of exactly 8 lines that came to 9.3 from a
	 * footprint 12 % high (14.8 points of false misses at 256 KiB 16-way
	 * with one seed of the sampling), and hot2+swp's 62 sets of exactly
	 * 16 hot lines at 64 KiB 16-way came to 16.6 (1.7 to 2.4 points high
	 * with three seeds; test_assoc). Not one that the reuses' stack
	 * distances alone fill past its ways (lfl: no noise above a floor).
	 */
	T->slack = 0.5 + 2.0 * fmin(unseen, unseen_sd) / (double)S;
	free(T->ix);
	T->ix = NULL;
	if (S <= DENSE_MAX) {
		if (!(T->ix = malloc(S * sizeof *T->ix)))
			return error_set(LOMAS_ENOMEM, "out of memory");
		/* Only the sets in t are ever looked up. */
		for (size_t i = 0; i < k; i++)
			T->ix[t[i].set] = (uint32_t)i;
	}
	for (size_t i = 0; i < nl; i++)
		set_find(T, lw[i].line % S)->raw += lw[i].share;
	T->tot = tot;
	for (size_t i = 0; i < k; i++) {
		t[i].share = assoc_shrink(t[i].raw * tot, tot, tot2, u, SHRINK_Z);
		t[i].cls = class_of(t[i].share, S);
	}
	return LOMAS_OK;
}

/* What the per-set solves of one size share. */
typedef struct ar_work {
	/* The reuses of one set: eviction rate, distance, weight, posterior (set_root). */
	double *x, *dd, *w, *al, *be;
	/* Per sample: dispersion()'s k of n; the first pass's miss probability,
	 * q (then q (R_s + c)), R_s + c; miss_dispersion()'s evidence. */
	uint8_t *kk, *nn;
	double *pm, *es, *r0, *ko;
	/* Per cell: locality(), dispersion(), miss_dispersion(). */
	double *factor, *kap, *mfac, *mkap;
	/* Per set of the table: sampled weight and misses over the run (first pass). */
	double *setR, *setS;
} ar_work;

/*
 * The reuses of the set of r[s0] within r[s0, g1) into wk's x, dd, w, al,
 * be from k0 on; the end of them. *s1 the end of the set's samples, *Ss
 * their weight, *Cs the censored weight.
 */
static size_t set_reuses(ar_work *wk, const ar_ref *r, size_t s0, size_t g1, size_t k0,
                         const ar_sets *T, const ar_set *e, bool fit, double occ, double A,
                         size_t *s1, double *Ss, double *Cs)
{
	const double *fc = wk->factor + e->cls;
	size_t k = k0, i;
	*Ss = *Cs = 0.0;
	for (i = s0; i < g1 && r[i].set == r[s0].set; i++) {
		double q, kp;
		*Ss += r[i].w;
		if (r[i].state == LOMAS_SAMPLE_CENSORED)
			*Cs += r[i].w;
		if (r[i].state != LOMAS_SAMPLE_REUSED)
			continue;
		q = other_share(T, e, r[i].own, r[i].w) * fc[r[i].band * NCLASS];
		q = fmin(q, 1.0);
		kp = wk->kap[r[i].band * NCLASS + e->cls];
		wk->x[k] = fit ? 0.0 : q * occ / A;
		wk->al[k] = kp + wk->kk[r[i].ix];
		wk->be[k] = kp + wk->nn[r[i].ix] * q;
		wk->dd[k] = r[i].d;
		wk->w[k++] = r[i].w;
	}
	*s1 = i;
	return k;
}

/*
 * First pass: every sample of the set r[s0, s1), its reuses at wk's t0 on,
 * its miss probability (pm) at the set's ratio Rs.
 */
static void set_first(ar_work *wk, const ar_ref *r, size_t s0, size_t s1, size_t t0, double Rs,
                      double cg, double occ, double A)
{
	for (size_t i = s0, t = t0; i < s1; i++) {
		size_t ix = r[i].ix;
		if (r[i].state != LOMAS_SAMPLE_REUSED) {
			wk->pm[ix] = r[i].state == LOMAS_SAMPLE_CENSORED ? 1.0 : Rs;
			continue;
		}
		wk->pm[ix] = reuse_miss(wk->x[t], wk->dd[t], wk->al[t], wk->be[t], Rs + cg);
		wk->r0[ix] = Rs + cg;
		wk->es[ix] = wk->x[t] * A / occ;
		t++;
	}
}

/*
 * Second pass: each reuse's miss probability from the misses' spread
 * (where there is none, the first pass's scaled by fac); the set's ratio.
 */
static double set_second(const ar_work *wk, const ar_ref *r, size_t s0, size_t s1, unsigned cls,
                         double Ss, double Cs, double occ, double A)
{
	double miss = Cs;
	for (size_t i = s0, t = 0; i < s1; i++) {
		size_t ix = r[i].ix, cc = r[i].band * NCLASS + cls;
		double mu = fmin(wk->es[ix] * wk->mfac[cc], 1.0), kp = wk->mkap[cc];
		if (r[i].state != LOMAS_SAMPLE_REUSED)
			continue;
		if (!isfinite(kp))
			miss += wk->w[t] * reuse_miss(wk->x[t] * wk->mfac[cc], wk->dd[t], wk->al[t],
			                              wk->be[t], wk->r0[ix]);
		else
			miss +=
			    wk->w[t] * reuse_miss(wk->x[t] > 0.0 ? mu * occ / A : 0.0, wk->dd[t],
			                          kp + wk->ko[ix], kp + wk->nn[ix] * mu, 1.0);
		t++;
	}
	return Ss > 0.0 ? fmin(miss / Ss, 1.0) : 0.0;
}

static void work_free(ar_work *wk)
{
	double *d[] = {wk->x,  wk->dd,     wk->w,   wk->al,   wk->be,   wk->pm,   wk->es,  wk->r0,
	               wk->ko, wk->factor, wk->kap, wk->mfac, wk->mkap, wk->setR, wk->setS};
	for (size_t i = 0; i < sizeof d / sizeof *d; i++)
		free(d[i]);
	free(wk->kk);
	free(wk->nn);
}

static lomas_status work_alloc(ar_work *wk, size_t nr, size_t ns)
{
	size_t cells = (size_t)NBANDS * NCLASS;
	nr = nr ? nr : 1;
	ns = ns ? ns : 1;
	*wk = (ar_work){0};
	wk->x = malloc(nr * sizeof *wk->x);
	wk->dd = malloc(nr * sizeof *wk->dd);
	wk->w = malloc(nr * sizeof *wk->w);
	wk->al = malloc(nr * sizeof *wk->al);
	wk->be = malloc(nr * sizeof *wk->be);
	wk->setR = malloc(nr * sizeof *wk->setR);
	wk->setS = malloc(nr * sizeof *wk->setS);
	wk->kk = malloc(ns);
	wk->nn = malloc(ns);
	wk->pm = calloc(ns, sizeof *wk->pm);
	wk->es = calloc(ns, sizeof *wk->es);
	wk->r0 = calloc(ns, sizeof *wk->r0);
	wk->ko = calloc(ns, sizeof *wk->ko);
	wk->factor = malloc(cells * sizeof *wk->factor);
	wk->kap = malloc(cells * sizeof *wk->kap);
	wk->mfac = malloc(cells * sizeof *wk->mfac);
	wk->mkap = malloc(cells * sizeof *wk->mkap);
	if (!wk->x || !wk->dd || !wk->w || !wk->al || !wk->be || !wk->setR || !wk->setS ||
	    !wk->kk || !wk->nn || !wk->pm || !wk->es || !wk->r0 || !wk->ko || !wk->factor ||
	    !wk->kap || !wk->mfac || !wk->mkap)
		return error_set(LOMAS_ENOMEM, "out of memory");
	return LOMAS_OK;
}

lomas_status assoc_random_delta(const lomas_profile *p, const double *lines, size_t n,
                                unsigned ways, double *delta, double *fa)
{
	model_opts o = model_default_opts(LOMAS_POLICY_LRU);
	model_data m;
	model_mean mean;
	ar_ref *r = NULL;
	ar_sets T = {0};
	ar_pair *pr = NULL;
	ar_line *lw = NULL;
	ar_work wk = {0};
	size_t nr = 0, np = 0, nl = 0, ns = p->samples.n;
	double unseen = 0.0, unseen_sd = 0.0, tot = 0.0, tot2 = 0.0, A = (double)ways;
	uint64_t *tmp = NULL;
	double *c = NULL, *sd = NULL;
	lomas_status st;
	o.classes = false;
	o.lru = true;
	o.per_sample = true; /* the samples' stack distances: the footprint's floor */
	memset(delta, 0, n * sizeof *delta);
	memset(fa, 0, n * sizeof *fa);
	if ((st = model_data_build(p, &o, &m)))
		return st;
	mean = model_mean_of(&m);
	if (!(lw = malloc((ns ? ns : 1) * sizeof *lw))) {
		st = error_set(LOMAS_ENOMEM, "out of memory");
		goto out;
	}
	if ((st = refs_build(p, &m, &r, &nr, &unseen, &unseen_sd, lw, &nl, &tot, &tot2)) ||
	    (st = pairs_build(p, lw, nl, &pr, &np)) || (st = work_alloc(&wk, nr, ns)))
		goto out;
	/* The unseen lines the reuses' stack distances imply (the fit rule's floor). */
	if (!(sd = malloc((ns ? ns : 1) * sizeof *sd))) {
		st = error_set(LOMAS_ENOMEM, "out of memory");
		goto out;
	}
	if ((st = model_sample_sds(&m, true, sd)))
		goto out;
	if ((st = assoc_unseen_floor(p, sd, (double)nl, &T.floor)))
		goto out;
	T.t = malloc((nr ? nr : 1) * sizeof *T.t);
	tmp = malloc((nr ? nr : 1) * sizeof *tmp);
	c = malloc((m.ngroups + 1) * sizeof *c);
	if (!T.t || !tmp || !c) {
		st = error_set(LOMAS_ENOMEM, "out of memory");
		goto out;
	}
	if ((st = model_cold_rates(&m, c)) || !(mean.total > 0.0))
		goto out;
	for (size_t j = 0; j < n; j++) {
		uint64_t S = (uint64_t)lines[j] / ways;
		double Lj = lines[j], lfa = -log1p(-1.0 / Lj), sum = 0.0, fsum = 0.0;
		/* One set is the fully associative cache: no difference. */
		if (S <= 1)
			continue;
		memset(wk.kk, 0, ns);
		memset(wk.nn, 0, ns);
		if ((st = sets_build(lw, nl, tot, tot2, S, unseen, unseen_sd, tmp, &T)) ||
		    (st = locality(pr, np, &T, S, wk.factor)) ||
		    (st = dispersion(pr, np, &T, S, wk.kap, wk.kk, wk.nn)))
			goto out;
		for (size_t i = 0; i < nr; i++) {
			r[i].set = r[i].line % S;
			r[i].cls = (uint8_t)set_find(&T, r[i].set)->cls;
		}
		qsort(r, nr, sizeof *r, by_group_class_set);
		memset(wk.setR, 0, T.n * sizeof *wk.setR);
		memset(wk.setS, 0, T.n * sizeof *wk.setS);
		/*
		 * First pass: each set's root with q's spread (dispersion()) and
		 * every sample's miss probability at it; between the passes, the
		 * misses' own spread (miss_dispersion()); second pass: each
		 * reuse's miss probability from that, the set's ratio their mean.
		 */
		for (int pass = 0; pass < 2; pass++) {
			if (pass == 1) {
				/* What one reference between should evict: q (R_s + c), R_s over
				 * the run. */
				for (size_t i = 0; i < nr; i++)
					if (r[i].state == LOMAS_SAMPLE_REUSED) {
						size_t si = (size_t)(set_find(&T, r[i].set) - T.t);
						wk.es[r[i].ix] *=
						    wk.setR[si] / fmax(wk.setS[si], 1e-300) +
						    c[r[i].group];
					}
				if ((st = miss_dispersion(pr, np, S, wk.pm, wk.es, &T, wk.mfac,
				                          wk.mkap, wk.ko)))
					goto out;
			}
			for (size_t g0 = 0, g1; g0 < nr; g0 = g1) {
				const model_group *g = &m.groups[r[g0].group];
				double wt = model_mean_weight(&mean, g), miss = 0.0, refs = 0.0;
				double cg = c[r[g0].group];
				size_t k = 0;
				for (g1 = g0; g1 < nr && r[g1].group == r[g0].group; g1++)
					if (r[g1].state == LOMAS_SAMPLE_REUSED) {
						wk.x[k] = r[g1].d * lfa;
						wk.w[k++] = r[g1].w;
					}
				/* A group without reuses has the same root either way. */
				if (k == 0 || !(g->S > 0.0) || !(wt > 0.0)) {
					for (size_t i = g0; i < g1; i++)
						wk.pm[r[i].ix] =
						    r[i].state == LOMAS_SAMPLE_CENSORED;
					continue;
				}
				/* The fully associative side keeps lomas_model_curve's footprint
				 * bound. */
				if (pass == 1) {
					double x = wt * root(wk.x, wk.w, k, g->C, g->S, cg) *
					           model_footprint_keep(&m, g->thread, Lj);
					sum -= x;
					fsum += x;
				}
				/*
				 * First pass: one root per class of sets (sets of one share
				 * are busy alike): a set holds a sample or two where there
				 * are about as many sets as samples, and its own root from
				 * them is all or nothing.
				 */
				for (size_t c0 = g0, c1; pass == 0 && c0 < g1; c0 = c1) {
					double Sc = 0.0, Cc = 0.0, Rc;
					size_t kc = 0;
					for (c1 = c0; c1 < g1 && r[c1].cls == r[c0].cls;) {
						const ar_set *e = set_find(&T, r[c1].set);
						double Ss, Cs, occ = set_occ(e);
						bool fit = set_fits(&T, e, A);
						kc = set_reuses(&wk, r, c1, g1, kc, &T, e, fit, occ,
						                A, &c1, &Ss, &Cs);
						Sc += Ss;
						Cc += Cs;
					}
					Rc = set_root(wk.x, wk.dd, wk.w, wk.al, wk.be, kc, Cc, Sc,
					              cg);
					for (size_t s0 = c0, s1, t0 = 0; s0 < c1; s0 = s1) {
						const ar_set *e = set_find(&T, r[s0].set);
						double Ss = 0.0, occ = set_occ(e);
						size_t nre = 0;
						for (s1 = s0; s1 < c1 && r[s1].set == r[s0].set;
						     s1++) {
							Ss += r[s1].w;
							nre += r[s1].state == LOMAS_SAMPLE_REUSED;
						}
						set_first(&wk, r, s0, s1, t0, Rc, cg, occ, A);
						t0 += nre;
						wk.setR[e - T.t] += Ss * Rc;
						wk.setS[e - T.t] += Ss;
					}
				}
				for (size_t s0 = g0, s1; pass == 1 && s0 < g1; s0 = s1) {
					const ar_set *e = set_find(&T, r[s0].set);
					double Ss, Cs, occ = set_occ(e);
					bool fit = set_fits(&T, e, A);
					k = set_reuses(&wk, r, s0, g1, 0, &T, e, fit, occ, A, &s1,
					               &Ss, &Cs);
					miss +=
					    Ss * set_second(&wk, r, s0, s1, e->cls, Ss, Cs, occ, A);
					refs += Ss;
				}
				if (pass == 1)
					sum += wt * miss / refs;
			}
		}
		delta[j] = sum / mean.total;
		fa[j] = fsum / mean.total;
	}
out:
	free(sd);
	free(r);
	free(T.t);
	free(T.ix);
	free(tmp);
	free(c);
	free(pr);
	free(lw);
	work_free(&wk);
	model_data_free(&m);
	return st;
}

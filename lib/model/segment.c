/*
 * Segments: runs of a thread's consecutive windows whose samples could come
 * from one distribution of reuse distances.
 *
 * A window of 256 samples estimates its survival function P(RD > k) to a
 * few percent, and StatStack turns that into noise on every stack distance:
 * SD(d) = sum_{k<d} P(RD > k) of a reuse of 781 references in PolyBench's
 * correlation, whose exact stack distance is 521 lines, comes out 521 +- 23
 * lines from one window, so a third of the windows put it below a 512-line
 * cache and the model misses the cliff there (exact 63 % at 32 KiB, model
 * 39 %). Pooling the windows of a phase divides that noise by the square
 * root of their number; pooling windows of different phases blurs the
 * phases. So windows are pooled only where their distance histograms are
 * statistically indistinguishable: bottom-up, the adjacent pair of segments
 * with the smallest chi-square statistic (one multinomial against two, df =
 * occupied cells - 1) relative to its quantile of level 1 - alpha is merged
 * while it stays below it. The histograms have two bins
 * per octave of d + 1, one for dangling and one for censored samples, and
 * count samples (not weights: the test is about the shape, and a count is
 * the information each sample carries).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

#define BIN_DANGLING MODEL_BIN_DANGLING
#define BIN_CENSORED MODEL_BIN_CENSORED
#define SEG_MIN_EXPECTED 5.0
#define SEG_MIN_SAMPLES 64.0 /* a piece's samples before it is tested */
#define SEG_SPLIT_MIN 16.0   /* samples on each side of a split of small pieces */

/*
 * The normal quantile of 1 - alpha for alpha < 0.02425: the lower-tail
 * branch of Acklam's rational approximation (relative error < 1.2e-9).
 */
static double normal_upper_quantile(double alpha)
{
	static const double c[6] = {-7.784894002430293e-03, -3.223964580411365e-01,
	                            -2.400758277161838e+00, -2.549732539343734e+00,
	                            4.374614510845590e+00,  2.938163982698783e+00};
	static const double d[4] = {7.784695709041462e-03, 3.224671290700398e-01,
	                            2.445134137142996e+00, 3.754408661907416e+00};
	double q = sqrt(-2.0 * log(alpha));
	return -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
	       ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1.0);
}

/* The chi-square quantile with df degrees of freedom (Wilson-Hilferty). */
static double chi2_quantile(double df, double z)
{
	double h = 2.0 / (9.0 * df);
	double t = 1.0 - h + z * sqrt(h);
	return df * t * t * t;
}

typedef struct seg {
	uint32_t *h; /* nb counts */
	double n;    /* samples */
	size_t prev, next;
	unsigned version;
	bool alive;
} seg;

typedef struct cand {
	double score; /* G / quantile: merge while <= 1 */
	size_t left;
	unsigned vl, vr;
} cand;

/*
 * Pearson's chi-square statistic and degrees of freedom of "x and y have
 * one distribution": sum over cells of (a n_y - c n_x)^2 / (n_x n_y (a + c)).
 * Adjacent bins are pooled until the smaller side expects at least
 * SEG_MIN_EXPECTED samples in each (the chi-square approximation fails on
 * sparse tables: a piece of 64 samples against a long segment would be
 * split off by bins it expects 0.1 samples in). Pearson rather than the
 * likelihood-ratio G: the same test asymptotically, no logarithms (the
 * segmentation of a million samples spent 90 ms in them).
 */
static double seg_g(const seg *x, const seg *y, int nb, double *df)
{
	double chi = 0.0, n = x->n + y->n, nmin = fmin(x->n, y->n), a = 0.0, c = 0.0;
	int cells = 0;
	if (!(x->n > 0.0) || !(y->n > 0.0)) {
		*df = 0.0;
		return 0.0;
	}
	for (int b = 0; b < nb; b++) {
		a += (double)x->h[b];
		c += (double)y->h[b];
		if (nmin * (a + c) / n < SEG_MIN_EXPECTED && b + 1 < nb)
			continue;
		if (a + c > 0.0) {
			double dev = a * y->n - c * x->n;
			chi += dev * dev / (a + c);
			cells++;
		}
		a = c = 0.0;
	}
	*df = cells - 1;
	return chi / (x->n * y->n);
}

static double seg_score(const seg *x, const seg *y, int nb, double z)
{
	double df, g = seg_g(x, y, nb, &df);
	if (df < 1.0)
		return 0.0;
	return g / chi2_quantile(df, z);
}

/* Binary min-heap of candidate merges. */
static void heap_push(cand *h, size_t *n, cand c)
{
	size_t i = (*n)++;
	while (i > 0) {
		size_t p = (i - 1) / 2;
		if (h[p].score <= c.score)
			break;
		h[i] = h[p];
		i = p;
	}
	h[i] = c;
}

static cand heap_pop(cand *h, size_t *n)
{
	cand top = h[0], last = h[--(*n)];
	size_t i = 0;
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;
		double ms = last.score;
		if (l < *n && h[l].score < ms) {
			m = l;
			ms = h[l].score;
		}
		if (r < *n && h[r].score < ms)
			m = r;
		if (m == i)
			break;
		h[i] = h[m];
		i = m;
	}
	if (*n > 0)
		h[i] = last;
	return top;
}

/* Absorb r into l (r follows l). */
static void seg_merge(seg *sg, size_t li, int nb)
{
	seg *l = &sg[li], *r = &sg[l->next];
	for (int b = 0; b < nb; b++)
		l->h[b] += r->h[b];
	l->n += r->n;
	r->alive = false;
	l->next = r->next;
	if (r->next != SIZE_MAX)
		sg[r->next].prev = li;
	l->version++;
}

/* Piece p's counts move from segment from (if any) to segment to. */
static void seg_move(seg *to, seg *from, const seg *p, int nb)
{
	for (int b = 0; b < nb; b++) {
		to->h[b] += p->h[b];
		if (from)
			from->h[b] -= p->h[b];
	}
	to->n += p->n;
	if (from)
		from->n -= p->n;
}

/*
 * Binary segmentation of a stretch [a, b) of consecutive small pieces: the
 * cut that makes the two sides' histograms differ most (the largest score,
 * each side holding SEG_SPLIT_MIN samples) is kept where it is significant
 * (score > 1), and each side is searched again. cut[k] marks a cut before
 * piece k. lt, rt: scratch segments of nb counts; stack: 2 (b - a) entries.
 */
static void split_small(seg *sg, size_t a, size_t b, int nb, double z, seg *lt, seg *rt,
                        size_t *stack, uint8_t *cut)
{
	size_t top = 0;
	stack[top++] = a;
	stack[top++] = b;
	while (top > 0) {
		size_t hi = stack[--top], lo = stack[--top], best = 0;
		double bs = 1.0;
		memset(lt->h, 0, (size_t)nb * sizeof *lt->h);
		memset(rt->h, 0, (size_t)nb * sizeof *rt->h);
		lt->n = rt->n = 0.0;
		for (size_t i = lo; i < hi; i++)
			seg_move(rt, NULL, &sg[i], nb);
		if (rt->n < 2.0 * SEG_SPLIT_MIN)
			continue;
		for (size_t k = lo + 1; k < hi; k++) {
			double sc;
			seg_move(lt, rt, &sg[k - 1], nb);
			if (lt->n < SEG_SPLIT_MIN || rt->n < SEG_SPLIT_MIN)
				continue;
			if ((sc = seg_score(lt, rt, nb, z)) > bs) {
				bs = sc;
				best = k;
			}
		}
		if (!best)
			continue;
		cut[best] = 1;
		stack[top++] = lo;
		stack[top++] = best;
		stack[top++] = best;
		stack[top++] = hi;
	}
}

lomas_status model_segment(const uint32_t *sample_piece, const uint8_t *sample_bin, size_t n,
                           const model_pieces *pc, double alpha, uint32_t *piece_group,
                           size_t *ngroups)
{
	size_t nw = pc->n, nh = 0, ng = 0, nthreads = pc->nthreads;
	const size_t *toff = pc->toff;
	int top = 0, nb;
	uint8_t top8 = 0, map[256];
	seg *sg = big_calloc(nw ? nw : 1, sizeof *sg);
	uint32_t *hist = NULL;
	uint8_t *cut = NULL;
	size_t *stack = NULL;
	seg lt = {0}, rt = {0};
	cand *heap = big_alloc((3 * nw + 1) * sizeof *heap);
	double z = normal_upper_quantile(alpha);
	/*
	 * Only the bins some sample uses (a program's distances span ~30
	 * octaves, not 64). The loop has no branch (it vectorises).
	 */
	for (size_t k = 0; k < n; k++) {
		uint8_t b = sample_bin[k] < 128 ? sample_bin[k] : 0;
		top8 = b > top8 ? b : top8;
	}
	top = top8;
	nb = top + 3;
	/* Each bin's column: dangling and censored after the finite ones. */
	for (int b = 0; b < 256; b++)
		map[b] = (uint8_t)(b == BIN_DANGLING ? top + 1 : b == BIN_CENSORED ? top + 2 : b);
	hist = big_calloc((nw ? nw : 1) * (size_t)nb + 2 * (size_t)nb, sizeof *hist);
	cut = big_calloc(nw ? nw : 1, 1);
	stack = big_alloc(2 * (nw ? nw : 1) * sizeof *stack);
	if (!sg || !hist || !heap || !cut || !stack) {
		big_free(sg);
		big_free(hist);
		big_free(heap);
		big_free(cut);
		big_free(stack);
		return error_set(LOMAS_ENOMEM, "out of memory segmenting the profile");
	}
	lt.h = hist + nw * (size_t)nb;
	rt.h = lt.h + nb;
	for (size_t i = 0; i < nw; i++) {
		sg[i].h = hist + i * (size_t)nb;
		sg[i].alive = true;
		sg[i].prev = SIZE_MAX;
		sg[i].next = SIZE_MAX;
	}
	for (size_t t = 0; t < nthreads; t++) {
		for (size_t i = toff[t]; i < toff[t + 1]; i++) {
			sg[i].prev = i > toff[t] ? i - 1 : SIZE_MAX;
			sg[i].next = i + 1 < toff[t + 1] ? i + 1 : SIZE_MAX;
		}
	}
	/* The counts, then each piece's total from them (not a sum through memory per sample). */
	for (size_t k = 0; k < n; k++)
		sg[sample_piece[k]].h[map[sample_bin[k]]]++;
	for (size_t i = 0; i < nw; i++) {
		uint32_t c = 0;
		for (int b = 0; b < nb; b++)
			c += sg[i].h[b];
		sg[i].n = (double)c;
	}
	/*
	 * Pieces too small to test are joined to the next until they hold
	 * SEG_MIN_SAMPLES. Period auto doubles the period as samples
	 * accumulate while the windows keep one length (256 x the mean
	 * period), so a long run's first windows hold ~1000 samples and its
	 * last ~60, ~20 a piece: too few for any one piece to differ
	 * significantly from the long run before it, so the pass below let the
	 * run absorb them one by one however different they were together.
	 * PolyBench's cholesky (work per row growing as its square) kept its
	 * whole run as one segment and its last fifth, with a tenth of the
	 * miss ratio at 19 KiB, judged by the mixture: random replacement 5.5
	 * points low there. Fixed periods (~85 samples a piece) are left as
	 * they were but for the rare piece of few samples.
	 *
	 * A stretch of small pieces is first cut where its samples change
	 * (split_small), and each part joined into one: phase-guided sampling
	 * leaves ~5 samples a piece at its lower rate, and blocks of 64 from
	 * wherever the stretch began straddled the phases' boundaries (the
	 * alternating phases workload, 16 rounds, 3 seeds: random replacement
	 * 3.6 to 6.8 points high at its 32 KiB cliff, the full rate 2.2). A
	 * part of fewer than SEG_MIN_SAMPLES is left as it is where a cut made
	 * it; a stretch without a cut is one part, joined to the next as before
	 * while it is small.
	 */
	for (size_t i = 0; i < nw;) {
		size_t j = i + 1;
		if (!sg[i].alive || sg[i].n >= SEG_MIN_SAMPLES) {
			i++;
			continue;
		}
		while (j < nw && sg[j].alive && sg[j].prev == j - 1 && sg[j].n < SEG_MIN_SAMPLES)
			j++;
		split_small(sg, i, j, nb, z, &lt, &rt, stack, cut);
		for (size_t p = i; p < j;) {
			size_t q = p + 1;
			while (q < j && !cut[q])
				q++;
			for (size_t r = p + 1; r < q; r++)
				seg_merge(sg, p, nb);
			if (p == i && q == j)
				while (sg[p].n < SEG_MIN_SAMPLES && sg[p].next != SIZE_MAX)
					seg_merge(sg, p, nb);
			p = q;
		}
		i = j;
	}
	/*
	 * Then, left to right, each piece joins the run before it if the two
	 * agree: one comparison per piece, and a stationary stretch of
	 * thousands of pieces becomes one run before the heap sees it.
	 */
	for (size_t i = 0; i < nw; i++) {
		if (!sg[i].alive)
			continue;
		while (sg[i].next != SIZE_MAX && seg_score(&sg[i], &sg[sg[i].next], nb, z) <= 1.0)
			seg_merge(sg, i, nb);
	}
	/* Then bottom-up over the runs: the most similar adjacent pair first. */
	for (size_t i = 0; i < nw; i++) {
		if (sg[i].alive && sg[i].next != SIZE_MAX)
			heap_push(heap, &nh,
			          (cand){seg_score(&sg[i], &sg[sg[i].next], nb, z), i,
			                 sg[i].version, sg[sg[i].next].version});
	}
	while (nh > 0) {
		cand c = heap_pop(heap, &nh);
		seg *l = &sg[c.left];
		if (!l->alive || l->next == SIZE_MAX || l->version != c.vl ||
		    sg[l->next].version != c.vr)
			continue;
		if (c.score > 1.0)
			break; /* the most similar pair differs: so do all the others */
		seg_merge(sg, c.left, nb);
		if (l->prev != SIZE_MAX) {
			seg *q = &sg[l->prev];
			heap_push(heap, &nh,
			          (cand){seg_score(q, l, nb, z), l->prev, q->version, l->version});
		}
		if (l->next != SIZE_MAX) {
			seg *q = &sg[l->next];
			heap_push(heap, &nh,
			          (cand){seg_score(l, q, nb, z), c.left, l->version, q->version});
		}
	}
	/* Number the segments in time order; each piece takes its segment's number. */
	for (size_t i = 0; i < nw; i++) {
		if (!sg[i].alive)
			continue;
		for (size_t j = i; j < nw && (j == i || !sg[j].alive); j++)
			piece_group[j] = (uint32_t)ng;
		ng++;
	}
	*ngroups = ng;
	big_free(sg);
	big_free(hist);
	big_free(heap);
	big_free(cut);
	big_free(stack);
	return LOMAS_OK;
}

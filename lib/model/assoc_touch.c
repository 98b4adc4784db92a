/*
 * The touch probabilities of set-associative LRU (docs/model.md, assoc_lru.c):
 * line y is in a window of d references with probability
 *   p_y(d) = min(1, (sum_i w_i min(g_i, d) + e_y d) / Tx),
 * the share of the window positions that hold a touch of y: each gap of
 * period g between two touches holds min(g, d) of them, the last touch d
 * (g_i: y's sampled periods, reuse distance + 1; w_i their weights; e_y
 * the weight of its dangling and censored samples; Tx the run's
 * references less the reused line's own, which no window between its
 * ends holds).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "assoc_touch.h"

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

size_t al_find(const uint64_t *u, size_t n, uint64_t v)
{
	return model_lower_bound_u64(u, 0, n, v);
}

/* A reused sample's gap, by line. */
typedef struct al_gap {
	uint64_t line;
	double g, w;
} al_gap;

static int gap_cmp(const void *a, const void *b)
{
	const al_gap *x = a, *y = b;
	if (x->line != y->line)
		return x->line < y->line ? -1 : 1;
	return x->g < y->g ? -1 : x->g > y->g;
}

void al_lines_free(al_lines *L)
{
	free(L->u);
	free(L->off);
	free(L->g);
	free(L->cw);
	free(L->cwg);
	free(L->edge);
	free(L->nw);
	free(L->cnt);
	free(L->s2);
	free(L->span);
}

lomas_status al_lines_build(const lomas_profile *p, al_lines *L)
{
	size_t ns = p->samples.n ? p->samples.n : 1, n = 0, ng = 0;
	double dang = 0.0, dang2 = 0.0;
	uint64_t *first, *last;
	al_gap *gl = malloc(ns * sizeof *gl);
	L->u = malloc(ns * sizeof *L->u);
	L->off = malloc((ns + 1) * sizeof *L->off);
	L->g = malloc(ns * sizeof *L->g);
	L->cw = malloc((ns + 1) * sizeof *L->cw);
	L->cwg = malloc((ns + 1) * sizeof *L->cwg);
	L->edge = calloc(ns, sizeof *L->edge);
	L->nw = calloc(ns, sizeof *L->nw);
	L->cnt = calloc(ns, sizeof *L->cnt);
	L->s2 = calloc(ns, sizeof *L->s2);
	L->span = calloc(ns, sizeof *L->span);
	first = malloc(ns * sizeof *first);
	last = calloc(ns, sizeof *last);
	if (!gl || !L->u || !L->off || !L->g || !L->cw || !L->cwg || !L->edge || !L->nw || !L->s2 ||
	    !L->cnt || !L->span || !first || !last) {
		free(first);
		free(last);
		free(gl);
		return error_set(LOMAS_ENOMEM, "out of memory");
	}
	L->T = 0.0;
	for (size_t i = 0; i < p->samples.n; i++) {
		const lomas_sample *s = &p->samples.items[i];
		if (!(s->weight > 0.0))
			continue;
		L->u[n++] = s->addr / p->line_size;
		L->T += s->weight;
		if (s->state == LOMAS_SAMPLE_DANGLING) {
			dang += s->weight;
			dang2 += s->weight * s->weight;
		}
		if (s->state == LOMAS_SAMPLE_REUSED)
			gl[ng++] = (al_gap){s->addr / p->line_size,
			                    (double)sample_distance(s) + 1.0, s->weight};
	}
	qsort(L->u, n, sizeof *L->u, u64_cmp);
	L->n = 0;
	for (size_t i = 0; i < n; i++)
		if (L->n == 0 || L->u[L->n - 1] != L->u[i])
			L->u[L->n++] = L->u[i];
	L->unseen = dang > (double)L->n ? dang - (double)L->n : 0.0;
	L->unseen_rel = dang > 0.0 ? sqrt(dang2) / dang : 0.0;
	for (size_t i = 0; i < p->samples.n; i++) {
		const lomas_sample *s = &p->samples.items[i];
		size_t k;
		if (!(s->weight > 0.0))
			continue;
		k = al_find(L->u, L->n, s->addr / p->line_size);
		if (L->cnt[k] == 0 || s->start < first[k])
			first[k] = s->start;
		if ((s->state == LOMAS_SAMPLE_REUSED ? s->end : s->start) > last[k])
			last[k] = s->state == LOMAS_SAMPLE_REUSED ? s->end : s->start;
		L->nw[k] += s->weight;
		L->cnt[k]++;
		if (s->state != LOMAS_SAMPLE_REUSED)
			L->edge[k] += s->weight;
	}
	for (size_t k = 0; k < L->n; k++)
		L->span[k] = last[k] > first[k] ? (double)(last[k] - first[k]) : 0.0;
	free(first);
	free(last);
	qsort(gl, ng, sizeof *gl, gap_cmp);
	L->cw[0] = L->cwg[0] = 0.0;
	for (size_t i = 0, k = 0; k <= L->n; k++) {
		L->off[k] = i;
		while (k < L->n && i < ng && gl[i].line == L->u[k]) {
			L->g[i] = gl[i].g;
			L->cw[i + 1] = L->cw[i] + gl[i].w;
			L->cwg[i + 1] = L->cwg[i] + gl[i].w * gl[i].g;
			L->s2[k] += gl[i].w * gl[i].g * gl[i].w * gl[i].g;
			i++;
		}
	}
	free(gl);
	return LOMAS_OK;
}

/*
 * p_k(d): the chance that line k is touched in a window of d references,
 * Tx of the run's references not to the reused line (the window holds
 * none of those: a sweep's other lines are all in a window of its
 * period less one, not in 127 of 128).
 */
double al_touch(const al_lines *L, size_t k, double d, double Tx)
{
	size_t lo = L->off[k], hi = L->off[k + 1], a = lo, b = hi;
	double cov, tot, frac;
	while (a < b) {
		size_t mid = a + (b - a) / 2;
		if (L->g[mid] < d)
			a = mid + 1;
		else
			b = mid;
	}
	cov = L->cwg[a] - L->cwg[lo] + d * (L->cw[hi] - L->cw[a] + L->edge[k]);
	tot = L->cwg[hi] - L->cwg[lo] + d * L->edge[k];
	if (!(tot > 0.0))
		return 0.0;
	/*
	 * cov / Tx, unbiased, its noise in proportion to cov. But a well
	 * sampled line whose every sampled period is within d + 1 (a swept
	 * line: d is the count of references between a reuse's ends, its
	 * period less one) is in every window of its lifetime, and where that
	 * lifetime, tot, is within three times its sampling noise of the run,
	 * in every window: its estimated references are a few percent off,
	 * and 0.97^15 lost 3 points of a sweep set's misses. (The ratio cov /
	 * tot is biased up by tot's squared coefficient of variation: 2 points
	 * on random lines; counting the windows without a touch where they
	 * are the fewer was 6 points high there. With 2 or 3 samples the noise
	 * test always passes: a stencil's lines, touched in 4 % of the windows,
	 * came to 1, 4 points of false misses. With 8 to 20 it passes for
	 * lines that live in a twentieth of the run: 2mm's (PolyBench SMALL)
	 * first loop nest's lines in every window of the second, 19 points of
	 * false misses at 16 KiB 8-way.) So the span the line's samples cover,
	 * first start to last touch seen, must say so too: n samples over the
	 * whole run leave out 2 / (n + 1) of it on average; the test allows
	 * three times that. And it takes 3 x WELL_SAMPLED samples: with 8 to 13,
	 * lu's rows, alive for 50 to 70 % of the run, passed both tests (22
	 * points of false misses at 32 KiB); below that cov / Tx stands.
	 */
	frac = tot / Tx;
	if (L->cnt[k] >= 3 * WELL_SAMPLED && L->g[hi - 1] < d + 1.5 &&
	    frac > 1.0 - 3.0 * sqrt(L->s2[k] + L->edge[k] * L->edge[k] * d * d) / tot &&
	    L->span[k] > Tx * (1.0 - 6.0 / (L->cnt[k] + 1.0)))
		return 1.0;
	cov /= Tx;
	return cov < 0.0 ? 0.0 : (cov < 1.0 ? cov : 1.0);
}

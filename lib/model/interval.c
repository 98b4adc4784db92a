/*
 * Each reuse's own interval, counted from the samples inside it.
 *
 * The stack distance of a reuse (s, e) is the number of references t in
 * (s, e) whose next reuse lies beyond e. Every reference is sampled with
 * probability 1/w, so
 *   HT(s, e) = sum of w_j over samples j with s < s_j < e and e_j > e
 * (dangling and censored samples end beyond any e) is an unbiased
 * (Horvitz-Thompson) estimate of it that assumes nothing about the
 * references in between; its variance, about SD x w, is far too large for
 * one reuse but averages out over many reuses of one kind (statstack.c).
 * StatStack's distribution-based estimate has the opposite character: small
 * variance, but it assumes the references in the interval are a random draw
 * from their group, and in a loop they are not quite: in PolyBench's
 * covariance a reuse of 782 references sees 521 distinct lines, while the
 * group's distribution (loop overheads included) gives 512.
 *
 * All the wanted counts in O(N log N): per thread, samples by start; the
 * queries in decreasing order of their end, inserting into a Fenwick tree
 * over start ranks the samples that end beyond the current query's end.
 */
#include <stdlib.h>
#include <string.h>

#include "model.h"

typedef struct ekey {
	uint64_t e;
	uint32_t rank; /* position in the thread's start order */
	uint32_t pad;
} ekey;

/* LSD radix sort of k[0..n) by e, ascending (tmp holds n), on the bytes that vary. */
static void sort_by_end(ekey *k, size_t n, ekey *tmp)
{
	uint64_t all_or = 0, all_and = UINT64_MAX;
	ekey *src = k, *dst = tmp;
	for (size_t i = 0; i < n; i++) {
		all_or |= k[i].e;
		all_and &= k[i].e;
	}
	for (int shift = 0; shift < 64; shift += 8) {
		size_t count[256] = {0}, sum = 0;
		if (((all_or ^ all_and) >> shift & 0xff) == 0)
			continue; /* every key has the same byte here */
		for (size_t i = 0; i < n; i++)
			count[(src[i].e >> shift) & 0xff]++;
		for (int b = 0; b < 256; b++) {
			size_t c = count[b];
			count[b] = sum;
			sum += c;
		}
		for (size_t i = 0; i < n; i++)
			dst[count[(src[i].e >> shift) & 0xff]++] = src[i];
		ekey *t = src;
		src = dst;
		dst = t;
	}
	if (src != k)
		memcpy(k, src, n * sizeof *k);
}

static double fen_sum(const double *f, size_t i) /* sum of [0, i) */
{
	double s = 0.0;
	for (; i > 0; i -= i & -i)
		s += f[i];
	return s;
}

static void fen_add(double *f, size_t n, size_t i, double v)
{
	for (i++; i <= n; i += i & -i)
		f[i] += v;
}

/* One thread's samples, in start order: x[0..n) index the profile's samples (NULL: 0..n). */
typedef struct thread_view {
	const lomas_sample *items;
	const uint32_t *x;
	size_t n;
} thread_view;

static inline size_t tv_ix(const thread_view *t, size_t r)
{
	return t->x ? t->x[r] : r;
}

static inline uint64_t tv_start(const thread_view *t, size_t r)
{
	return t->items[tv_ix(t, r)].start;
}

static inline uint64_t tv_end(const thread_view *t, size_t r)
{
	const lomas_sample *s = &t->items[tv_ix(t, r)];
	return s->state == LOMAS_SAMPLE_REUSED ? s->end : UINT64_MAX;
}

/*
 * First rank in [lo, hi) whose start is greater than v: galloping from lo
 * (a reuse's interval holds few samples, and a binary search over the
 * whole thread costs a cache miss per probe). An interval with no sample
 * in it (most short reuses) is answered by its first probe: it used to go
 * on to a binary search of [lo, hi), twenty misses for a million samples.
 */
static size_t upper_start(const thread_view *t, size_t lo, size_t hi, uint64_t v)
{
	size_t step = 1;
	while (lo < hi) {
		if (tv_start(t, lo) > v)
			return lo; /* the ranks probed before it start at or before v */
		size_t next = lo + step;
		if (next >= hi || tv_start(t, next) > v) {
			hi = next < hi ? next : hi;
			lo++;
			break;
		}
		lo = next + 1;
		step *= 2;
	}
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (tv_start(t, mid) <= v)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

#define DIRECT_MAX 1024 /* an interval with fewer samples is counted by scanning them */

/*
 * The counts for one thread. A query whose interval holds at most
 * DIRECT_MAX samples scans them (they are consecutive in start order):
 * cheap for the short reuses that make up nearly every class. The others,
 * if any, are answered together in decreasing order of their ends, with a
 * Fenwick tree over start ranks of the samples ending beyond the current
 * query's end. want[r]: 1 + the slot in ht and in of the sample of rank r,
 * or 0; or, with want NULL, the ranks list[0..nlist) ascending have slots
 * 1..nlist (then the thread's samples are not all visited).
 */
static lomas_status thread_counts(const thread_view *t, const uint32_t *want, const uint32_t *list,
                                  size_t nlist, double *ht, double *in)
{
	size_t n = t->n, nlong = 0, nq = want ? n : nlist;
	ekey *k = NULL, *tmp = NULL;
	double *fen = NULL, *pre = NULL;
	uint32_t *own = NULL;
	for (size_t i = 0; i < nq; i++) {
		size_t r = want ? i : list[i];
		uint32_t slot = want ? want[tv_ix(t, r)] : (uint32_t)(i + 1);
		uint64_t e;
		size_t hi;
		double q = 0.0, all = 0.0;
		/* Only the wanted samples are read: most are not, and each is a cache line. */
		if (!slot || (e = tv_end(t, r)) == UINT64_MAX)
			continue;
		hi = upper_start(t, r + 1, n, e - 1);
		if (hi - r - 1 > DIRECT_MAX) {
			nlong++;
			continue;
		}
		for (size_t j = r + 1; j < hi; j++) {
			const lomas_sample *s = &t->items[tv_ix(t, j)];
			all += s->weight;
			q += tv_end(t, j) > e ? s->weight : 0.0;
		}
		ht[slot - 1] = q;
		in[slot - 1] = all;
	}
	if (nlong == 0)
		return LOMAS_OK;
	if (!want) {
		/* A long query at last: the slots by rank (t->x is NULL here). */
		if (!(own = calloc(n ? n : 1, sizeof *own)))
			return error_set(LOMAS_ENOMEM, "out of memory counting reuse intervals");
		for (size_t i = 0; i < nlist; i++)
			own[list[i]] = (uint32_t)(i + 1);
		want = own;
	}
	if (nlong == 0)
		return LOMAS_OK;
	k = malloc(n * sizeof *k);
	tmp = malloc(n * sizeof *tmp);
	fen = calloc(n + 1, sizeof *fen);
	pre = malloc((n + 1) * sizeof *pre);
	if (!k || !tmp || !fen || !pre) {
		free(k);
		free(tmp);
		free(fen);
		free(pre);
		free(own);
		return error_set(LOMAS_ENOMEM, "out of memory counting reuse intervals");
	}
	pre[0] = 0.0;
	for (size_t i = 0; i < n; i++)
		pre[i + 1] = pre[i] + t->items[tv_ix(t, i)].weight;
	for (size_t i = 0; i < n; i++)
		k[i] = (ekey){tv_end(t, i), (uint32_t)i, 0};
	sort_by_end(k, n, tmp);
	/*
	 * Decreasing end: a sample is asked (if wanted) before it is inserted,
	 * so only those ending strictly later are in the tree (two reuses of
	 * one thread cannot end at one reference unless they are one reuse).
	 */
	for (size_t q = n; q-- > 0;) {
		size_t r = k[q].rank;
		uint32_t slot = want[tv_ix(t, r)];
		uint64_t e = k[q].e;
		if (slot && e != UINT64_MAX) {
			size_t hi = upper_start(t, r + 1, n, e - 1);
			if (hi - r - 1 > DIRECT_MAX) {
				ht[slot - 1] = fen_sum(fen, hi) - fen_sum(fen, r + 1);
				in[slot - 1] = pre[hi] - pre[r + 1];
			}
		}
		fen_add(fen, n, r, t->items[tv_ix(t, r)].weight);
	}
	free(k);
	free(tmp);
	free(fen);
	free(pre);
	free(own);
	return LOMAS_OK;
}

/* Radix sort of x[0..n) (sample indices) by their samples' starts; tmp holds n. */
static void sort_by_start(const lomas_sample *items, uint32_t *x, size_t n, uint32_t *tmp)
{
	uint64_t all_or = 0, all_and = UINT64_MAX;
	uint32_t *src = x, *dst = tmp;
	for (size_t i = 0; i < n; i++) {
		all_or |= items[x[i]].start;
		all_and &= items[x[i]].start;
	}
	for (int shift = 0; shift < 64; shift += 8) {
		size_t count[256] = {0}, sum = 0;
		if (((all_or ^ all_and) >> shift & 0xff) == 0)
			continue;
		for (size_t i = 0; i < n; i++)
			count[(items[src[i]].start >> shift) & 0xff]++;
		for (int b = 0; b < 256; b++) {
			size_t c = count[b];
			count[b] = sum;
			sum += c;
		}
		for (size_t i = 0; i < n; i++)
			dst[count[(items[src[i]].start >> shift) & 0xff]++] = src[i];
		uint32_t *t = src;
		src = dst;
		dst = t;
	}
	if (src != x)
		memcpy(x, src, n * sizeof *x);
}

lomas_status model_interval_counts(const lomas_profile *p, const uint32_t *thread,
                                   const uint32_t *list, size_t nlist, double *ht, double *in)
{
	size_t n = p->samples.n, nt = 0;
	uint32_t *x = NULL, *want = NULL;
	size_t *off = NULL;
	lomas_status st = LOMAS_OK;
	/* One thread whose samples are in start order (a clock's usual output): no index. */
	if (!thread) {
		thread_view tv = {p->samples.items, NULL, n};
		return thread_counts(&tv, NULL, list, nlist, ht, in);
	}
	for (size_t i = 0; i < n; i++)
		nt = thread[i] + 1u > nt ? thread[i] + 1u : nt;
	x = malloc((n ? n : 1) * sizeof *x);
	want = calloc(n ? n : 1, sizeof *want);
	off = calloc(nt + 2, sizeof *off);
	if (!x || !off || !want) {
		st = error_set(LOMAS_ENOMEM, "out of memory counting reuse intervals");
		goto out;
	}
	for (size_t i = 0; i < nlist; i++)
		want[list[i]] = (uint32_t)(i + 1);
	/* A stable counting sort by thread keeps each thread's samples in their order. */
	for (size_t i = 0; i < n; i++)
		off[thread[i] + 2]++;
	for (size_t t = 0; t < nt; t++)
		off[t + 2] += off[t + 1];
	for (size_t i = 0; i < n; i++)
		x[off[thread[i] + 1]++] = (uint32_t)i;
	for (size_t t = 0; t < nt; t++) {
		thread_view tv = {p->samples.items, x + off[t], off[t + 1] - off[t]};
		bool sorted = true;
		for (size_t i = 1; i < tv.n && sorted; i++)
			sorted = tv_start(&tv, i - 1) <= tv_start(&tv, i);
		/* Clocks record samples in start order; merged or edited profiles may not. */
		if (!sorted) {
			uint32_t *buf = malloc(tv.n * sizeof *buf);
			if (!buf) {
				st = error_set(LOMAS_ENOMEM,
				               "out of memory counting reuse intervals");
				goto out;
			}
			sort_by_start(p->samples.items, x + off[t], tv.n, buf);
			free(buf);
		}
		if ((st = thread_counts(&tv, want, NULL, 0, ht, in)))
			goto out;
	}
out:
	free(x);
	free(want);
	free(off);
	return st;
}

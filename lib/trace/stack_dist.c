/*
 * Exact stack distances for the trace clock (docs/model.md "Knife edges"):
 * the number of distinct lines a thread touched strictly between two of its
 * references to one line.
 *
 * Bennett & Kruskal's method (as Olken's): every line's last touch holds a
 * mark at its position in time, so the lines touched after position p are
 * the marks after p. A touch moves its line's mark to a fresh position at
 * the end. The marks are bits with counts per block and superblock
 * (trace.h): moving a mark is O(1), and a query, made only when a sampled
 * reuse ends (one reference in `period`), sums the superblocks', blocks' and
 * bits' counts before p. (A Fenwick tree, O(log L) for both, made every
 * reference pay two tree walks: +108 ns a reference on 2mm's lackey trace,
 * +54 % of the replay; docs/model.md.)
 *
 * Positions only grow, so when they run out the live marks (one per line,
 * in time order) are renumbered 1..L and the counts rebuilt, in O(cap / 64
 * + L); cap >= 4 L + SD_MIN_CAP keeps that to one renumbering every 3 L
 * touches: O(1) amortized, memory O(L).
 */
#include <stdlib.h>
#include <string.h>

#include "trace.h"

#define SD_MIN_BITS 10
#define SD_MIN_CAP 1024u
#define SD_MAX_CAP ((size_t)UINT32_MAX) /* positions are uint32_t, 0 = none */

static size_t slot_home(const sd_tracker *tr, uint64_t line)
{
	return (size_t)((line * SD_HASH_K) >> tr->shift);
}

void sd_tracker_free(sd_tracker *tr)
{
	free(tr->slots);
	free(tr->bits);
	free(tr->blk);
	free(tr->sup);
	free(tr->at);
	memset(tr, 0, sizeof *tr);
}

static lomas_status no_memory(const sd_tracker *tr)
{
	return error_set(LOMAS_ENOMEM, "trace: out of memory for the stack distances of %zu lines",
	                 tr->used);
}

/* Double the line table (or make it), moving every line and its mark's back-pointer. */
static lomas_status table_grow(sd_tracker *tr)
{
	unsigned bits = tr->slots ? 64 - tr->shift + 1 : SD_MIN_BITS;
	size_t n = (size_t)1 << bits, oldn = tr->slots ? tr->mask + 1 : 0;
	sd_slot *old = tr->slots, *s = malloc(n * sizeof *s);
	if (!s)
		return no_memory(tr);
	for (size_t i = 0; i < n; i++)
		s[i].line = SD_EMPTY;
	tr->slots = s;
	tr->mask = n - 1;
	tr->shift = 64 - bits;
	for (size_t i = 0; i < oldn; i++) {
		size_t j;
		if (old[i].line == SD_EMPTY)
			continue;
		j = slot_home(tr, old[i].line);
		while (s[j].line != SD_EMPTY)
			j = (j + 1) & tr->mask;
		s[j] = old[i];
		tr->at[s[j].pos] = j;
	}
	free(old);
	return LOMAS_OK;
}

/* realloc that leaves *p as it was on failure. */
static bool grow_array(void **p, size_t n, size_t size)
{
	void *q = realloc(*p, n * size);
	if (!q)
		return false;
	*p = q;
	return true;
}

/*
 * Renumber the live marks 1..k in time order and rebuild the counts, first
 * growing the arrays to cap >= 4 (k + 1) + SD_MIN_CAP positions.
 */
static lomas_status renumber(sd_tracker *tr)
{
	size_t k = tr->marks, cap = tr->cap, oldwords = (tr->next + 63) / 64;
	/* Memory first: a failure leaves the tracker as it was (arrays may be larger). */
	if (cap < 4 * (k + 1) + SD_MIN_CAP) {
		size_t ncap = 4 * (k + 1) + SD_MIN_CAP;
		if (ncap > SD_MAX_CAP)
			ncap = SD_MAX_CAP;
		if (ncap <= k + 1)
			return error_set(LOMAS_ERANGE,
			                 "trace: more than 2^32 distinct lines in one thread");
		if (!grow_array((void **)&tr->bits, (ncap >> 6) + 1, sizeof *tr->bits) ||
		    !grow_array((void **)&tr->blk, (ncap >> SD_BLOCK_SHIFT) + 1, sizeof *tr->blk) ||
		    !grow_array((void **)&tr->sup, (ncap >> SD_SUPER_SHIFT) + 1, sizeof *tr->sup) ||
		    !grow_array((void **)&tr->at, ncap, sizeof *tr->at))
			return no_memory(tr);
		cap = tr->cap = ncap;
	}
	/* Compact in place (the k-th mark moves to k <= its position), in time order. */
	k = 0;
	for (size_t w = 0; w < oldwords; w++) {
		for (uint64_t b = tr->bits[w]; b; b &= b - 1) {
			size_t p = w * 64 + (size_t)__builtin_ctzll(b);
			tr->at[++k] = tr->at[p];
			tr->slots[tr->at[k]].pos = (uint32_t)k;
		}
	}
	memset(tr->bits, 0, ((cap >> 6) + 1) * sizeof *tr->bits);
	memset(tr->blk, 0, ((cap >> SD_BLOCK_SHIFT) + 1) * sizeof *tr->blk);
	memset(tr->sup, 0, ((cap >> SD_SUPER_SHIFT) + 1) * sizeof *tr->sup);
	for (size_t p = 1; p <= k; p++) {
		tr->bits[p >> 6] |= UINT64_C(1) << (p & 63);
		tr->blk[p >> SD_BLOCK_SHIFT]++;
		tr->sup[p >> SD_SUPER_SHIFT]++;
	}
	tr->next = k + 1;
	return LOMAS_OK;
}

lomas_status sd_tracker_grow(sd_tracker *tr)
{
	lomas_status st;
	if ((!tr->at || tr->next == 0 || tr->next >= tr->cap) && (st = renumber(tr)))
		return st;
	if ((!tr->slots || (tr->used + 1) * 2 > tr->mask + 1) && (st = table_grow(tr)))
		return st;
	return LOMAS_OK;
}

uint64_t sd_tracker_after(const sd_tracker *tr, uint32_t pos)
{
	size_t s = pos >> SD_SUPER_SHIFT, b = pos >> SD_BLOCK_SHIFT, w = pos >> 6;
	unsigned r = pos & 63;
	uint64_t before = 0;
	for (size_t i = 0; i < s; i++)
		before += tr->sup[i];
	for (size_t i = s << (SD_SUPER_SHIFT - SD_BLOCK_SHIFT); i < b; i++)
		before += tr->blk[i];
	for (size_t i = b << (SD_BLOCK_SHIFT - 6); i < w; i++)
		before += (uint64_t)__builtin_popcountll(tr->bits[i]);
	/* Bits 0..r of word w: the marks up to pos, its own included. */
	before += (uint64_t)__builtin_popcountll(tr->bits[w] &
	                                         (r == 63 ? UINT64_MAX : (UINT64_C(2) << r) - 1));
	/* Each line touched so far holds one mark, at its last touch. */
	return (uint64_t)tr->marks - before;
}

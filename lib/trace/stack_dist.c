/*
 * Exact stack distances for the trace clock (docs/model.md "Knife edges"):
 * the number of distinct lines a thread touched strictly between two of its
 * references to one line, at O(log L) a reference for L distinct lines.
 *
 * Bennett & Kruskal's method (as Olken's): every line's last touch holds a
 * mark at its position in time, so the lines touched after position p are
 * the marks after p, a Fenwick tree's suffix count. A touch moves the line's
 * mark to a fresh position at the end. Positions only grow, so when they run
 * out the live marks (one per line, in time order) are renumbered 1..L and
 * the tree rebuilt in O(cap); the tree keeps cap >= 2L + SD_MIN_CAP, so a
 * renumbering comes at most every cap / 2 touches: O(1) amortized.
 */
#include <stdlib.h>
#include <string.h>

#include "trace.h"

#define SD_MIN_BITS 10
#define SD_MIN_CAP 1024u
#define SD_MAX_CAP (UINT32_MAX - 1u) /* positions are uint32_t, 0 = none */

static size_t slot_home(const sd_tracker *tr, uint64_t line)
{
	return (size_t)((line * SD_HASH_K) >> tr->shift);
}

void sd_tracker_free(sd_tracker *tr)
{
	free(tr->slots);
	free(tr->tree);
	free(tr->at);
	memset(tr, 0, sizeof *tr);
}

/* Double the line table (or make it), moving every line and its mark's back-pointer. */
static lomas_status table_grow(sd_tracker *tr)
{
	unsigned bits = tr->slots ? 64 - tr->shift + 1 : SD_MIN_BITS;
	size_t n = (size_t)1 << bits, oldn = tr->slots ? tr->mask + 1 : 0;
	sd_slot *old = tr->slots, *s = malloc(n * sizeof *s);
	if (!s)
		return error_set(LOMAS_ENOMEM,
		                 "trace: out of memory for the stack distances of %zu lines",
		                 tr->used);
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

/*
 * Renumber the live marks 1..k in time order and rebuild the tree, first
 * growing it to cap >= 2 (k + 1) + SD_MIN_CAP (room for the next touches).
 */
static lomas_status renumber(sd_tracker *tr)
{
	size_t k = tr->marks, cap = tr->cap;
	/* Memory first: a failure leaves the tracker as it was. */
	if (cap < 2 * (k + 1) + SD_MIN_CAP) {
		size_t ncap = 2 * (k + 1) + SD_MIN_CAP;
		uint32_t *tree;
		uint64_t *at;
		ncap = ncap < 2 * cap ? 2 * cap : ncap;
		if (ncap > SD_MAX_CAP)
			ncap = SD_MAX_CAP;
		if (ncap <= k + 1)
			return error_set(LOMAS_ERANGE,
			                 "trace: more than 2^31 distinct lines in one thread");
		tree = realloc(tr->tree, (ncap + 1) * sizeof *tree);
		if (!tree)
			return error_set(
			    LOMAS_ENOMEM,
			    "trace: out of memory for the stack distances of %zu lines", tr->used);
		tr->tree = tree; /* larger, its contents rebuilt below */
		at = realloc(tr->at, (ncap + 1) * sizeof *at);
		if (!at)
			return error_set(
			    LOMAS_ENOMEM,
			    "trace: out of memory for the stack distances of %zu lines", tr->used);
		tr->at = at;
		cap = tr->cap = ncap;
	}
	k = 0;
	for (size_t p = 1; p < tr->next; p++) {
		if (tr->at[p] == SD_EMPTY)
			continue;
		tr->at[++k] = tr->at[p];
		tr->slots[tr->at[k]].pos = (uint32_t)k;
	}
	for (size_t p = k + 1; p <= cap; p++)
		tr->at[p] = SD_EMPTY;
	/* A Fenwick tree of k ones, built in place in O(cap). */
	memset(tr->tree, 0, (cap + 1) * sizeof *tr->tree);
	for (size_t i = 1; i <= cap; i++) {
		size_t j = i + (i & (~i + 1));
		tr->tree[i] += i <= k;
		if (j <= cap)
			tr->tree[j] += tr->tree[i];
	}
	tr->next = k + 1;
	return LOMAS_OK;
}

lomas_status sd_tracker_grow(sd_tracker *tr)
{
	lomas_status st;
	if ((!tr->at || tr->next == 0 || tr->next > tr->cap) && (st = renumber(tr)))
		return st;
	if ((!tr->slots || (tr->used + 1) * 2 > tr->mask + 1) && (st = table_grow(tr)))
		return st;
	return LOMAS_OK;
}

uint64_t sd_tracker_after(const sd_tracker *tr, uint32_t pos)
{
	uint64_t before = 0;
	for (size_t p = pos; p > 0; p &= p - 1)
		before += tr->tree[p];
	/* Each line touched so far holds one mark, at its last touch. */
	return (uint64_t)tr->marks - before;
}

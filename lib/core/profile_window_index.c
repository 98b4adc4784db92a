/*
 * The profile codec's window index (profile_codec.h): a packed sample does not
 * record its window, so the encoder checks and the decoder finds it from its
 * thread and start clock. The windows of each thread in (start, index)
 * order, searched from where the last sample's search ended.
 */
#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "profile_codec.h"

typedef struct start_idx {
	uint64_t start;
	uint32_t idx;
} start_idx;

static int start_idx_cmp(const void *a, const void *b)
{
	const start_idx *x = a, *y = b;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return (x->idx > y->idx) - (x->idx < y->idx);
}

void window_index_free(window_index *wi)
{
	free(wi->starts);
	free(wi->idx);
	free(wi->first);
	memset(wi, 0, sizeof *wi);
}

/* Build the index of p's windows; every window must name one of p's threads. */
lomas_status window_index_build(const lomas_profile *p, window_index *wi)
{
	const size_t nt = p->threads.n, nw = p->windows.n;
	start_idx *tmp = NULL;
	size_t *at = NULL;
	memset(wi, 0, sizeof *wi);
	wi->first = calloc(nt + 2, sizeof *wi->first);
	wi->starts = malloc(sizeof *wi->starts * (nw ? nw : 1));
	wi->idx = malloc(sizeof *wi->idx * (nw ? nw : 1));
	tmp = malloc(sizeof *tmp * (nw ? nw : 1));
	at = malloc(sizeof *at * (nt + 1));
	if (!wi->first || !wi->starts || !wi->idx || !tmp || !at) {
		free(tmp);
		free(at);
		window_index_free(wi);
		return error_set(LOMAS_ENOMEM, "out of memory");
	}
	/* Counting sort by thread (stable: index order within a thread). */
	for (size_t i = 0; i < nw; i++)
		wi->first[p->windows.items[i].thread + 1]++;
	for (size_t t = 0; t < nt; t++)
		wi->first[t + 1] += wi->first[t];
	memcpy(at, wi->first, sizeof *at * (nt + 1));
	for (size_t i = 0; i < nw; i++) {
		size_t k = at[p->windows.items[i].thread]++;
		tmp[k].start = p->windows.items[i].start;
		tmp[k].idx = (uint32_t)i;
	}
	/* Then by start within each thread (most producers write them in order). */
	for (size_t t = 0; t < nt; t++) {
		start_idx *seg = tmp + wi->first[t];
		size_t n = wi->first[t + 1] - wi->first[t];
		for (size_t i = 1; i < n; i++)
			if (start_idx_cmp(&seg[i - 1], &seg[i]) > 0) {
				qsort(seg, n, sizeof *seg, start_idx_cmp);
				break;
			}
	}
	for (size_t i = 0; i < nw; i++) {
		wi->starts[i] = tmp[i].start;
		wi->idx[i] = tmp[i].idx;
	}
	free(tmp);
	free(at);
	return LOMAS_OK;
}

/*
 * The window of thread t that a sample starting at clock falls in (see
 * window_index), or UINT32_MAX when none of t's windows starts at or before
 * it. *hint: the position found last for the same thread (0 at first); the
 * next sample's is usually the same or the next one.
 */
uint32_t window_index_find(const window_index *wi, uint32_t t, uint64_t clock, size_t *hint)
{
	size_t lo = wi->first[t], hi = wi->first[t + 1], h = *hint;
	if (h >= lo && h < hi && wi->starts[h] <= clock) {
		while (h + 1 < hi && wi->starts[h + 1] <= clock && h + 1 - *hint < 4)
			h++;
		if (h + 1 == hi || wi->starts[h + 1] > clock) {
			*hint = h;
			return wi->idx[h];
		}
	}
	/* The last position in [lo, hi) whose start is <= clock. */
	if (lo == hi || wi->starts[lo] > clock)
		return UINT32_MAX;
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;
		if (wi->starts[mid] <= clock)
			lo = mid;
		else
			hi = mid;
	}
	*hint = lo;
	return wi->idx[lo];
}

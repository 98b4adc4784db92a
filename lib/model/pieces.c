/*
 * The model's time bins: each thread's windows in clock order, each cut
 * into MODEL_PIECES_PER_WINDOW equal pieces (about 64 samples each: a
 * window is 256 x period references).
 *
 * A window is 256 x period references, a unit of bookkeeping for the
 * clocks; a program's phases need not be that long. A window that holds
 * the end of one phase and the start of the next gives both one
 * distribution, and a reuse in the short phase is judged by the mixture:
 * two arrays alternating with a 30000-reference sweep between 150000 hot
 * references, sampled at period 200 (51200-reference windows), came out
 * 11 points high under random replacement and 9 under LRU at period 200,
 * fine at period 50. Pieces resolve phases 4 times shorter than windows;
 * segment.c pools them again where they agree. (Equal cuts, not cuts by
 * sample count, so that a sample's piece is known in the same pass that
 * checks it.)
 */
#include <stdlib.h>
#include <string.h>

#include "model.h"

typedef struct win_key {
	uint64_t thread, start;
	uint32_t ix;
} win_key;

static int win_key_cmp(const void *a, const void *b)
{
	const win_key *x = a, *y = b;
	if (x->thread != y->thread)
		return x->thread < y->thread ? -1 : 1;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->ix < y->ix ? -1 : x->ix > y->ix;
}

void model_pieces_free(model_pieces *pc)
{
	free(pc->items);
	free(pc->wfirst);
	free(pc->wcount);
	free(pc->toff);
	free(pc->wthread);
}

lomas_status model_pieces_build(const lomas_profile *p, model_pieces *pc)
{
	size_t nw = p->windows.n, np = 0, nt = 0;
	win_key *keys = malloc((nw ? nw : 1) * sizeof *keys);
	lomas_status st = LOMAS_OK;
	pc->items = NULL;
	pc->wfirst = malloc((nw + 1) * sizeof *pc->wfirst);
	pc->wcount = malloc((nw + 1) * sizeof *pc->wcount);
	pc->wthread = malloc((nw + 1) * sizeof *pc->wthread);
	pc->toff = malloc((nw + 2) * sizeof *pc->toff);
	if (!keys || !pc->wfirst || !pc->wcount || !pc->wthread || !pc->toff) {
		st = error_set(LOMAS_ENOMEM, "out of memory preparing the model");
		goto out;
	}
	/* A window of an unknown thread is a thread of its own. */
	for (size_t w = 0; w < nw; w++) {
		uint32_t t = p->windows.items[w].thread;
		keys[w].thread = t < p->threads.n ? t : (uint64_t)p->threads.n + w;
		keys[w].start = p->windows.items[w].start;
		keys[w].ix = (uint32_t)w;
	}
	qsort(keys, nw, sizeof *keys, win_key_cmp);
	for (size_t i = 0; i < nw; i++) {
		size_t w = keys[i].ix, k = MODEL_PIECES_PER_WINDOW;
		uint64_t refs = p->windows.items[w].refs;
		k = refs > 0 && k > refs ? (size_t)refs : k;
		pc->wcount[w] = k;
		np += k;
	}
	pc->items = malloc((np ? np : 1) * sizeof *pc->items);
	if (!pc->items) {
		st = error_set(LOMAS_ENOMEM, "out of memory preparing the model");
		goto out;
	}
	np = 0;
	for (size_t i = 0; i < nw; i++) {
		size_t w = keys[i].ix, k = pc->wcount[w];
		const lomas_window *win = &p->windows.items[w];
		if (i == 0 || keys[i].thread != keys[i - 1].thread)
			pc->toff[nt++] = np;
		pc->wfirst[w] = np;
		pc->wthread[w] = (uint32_t)(nt - 1);
		for (size_t j = 0; j < k; j++) {
			uint64_t a = win->start + (uint64_t)((unsigned __int128)win->refs * j / k);
			uint64_t b =
			    win->start + (uint64_t)((unsigned __int128)win->refs * (j + 1) / k);
			pc->items[np++] = (model_piece){a, b - a, (uint32_t)(nt - 1), (uint32_t)w};
		}
	}
	pc->toff[nt] = np;
	pc->n = np;
	pc->nthreads = nt;
out:
	free(keys);
	if (st)
		model_pieces_free(pc);
	return st;
}

size_t model_piece_of(const model_pieces *pc, const lomas_window *w, uint32_t window,
                      uint64_t start)
{
	size_t k = pc->wcount[window], j = 0;
	uint64_t off = start > w->start ? start - w->start : 0;
	/*
	 * floor(off k / refs), clamped to k - 1, as the count of cuts i < k
	 * with off k >= i refs: products, not a 64-bit division per sample.
	 */
	while (w->refs > 0 && j + 1 < k &&
	       (unsigned __int128)off * k >= (unsigned __int128)(j + 1) * w->refs)
		j++;
	return pc->wfirst[window] + j;
}

/* A copy of base's pieces (a bootstrap replicate's profile has the same windows). */
lomas_status model_pieces_copy(const model_pieces *b, size_t nw, model_pieces *pc)
{
	pc->n = b->n;
	pc->nthreads = b->nthreads;
	pc->items = malloc((b->n ? b->n : 1) * sizeof *pc->items);
	pc->wfirst = malloc((nw + 1) * sizeof *pc->wfirst);
	pc->wcount = malloc((nw + 1) * sizeof *pc->wcount);
	pc->wthread = malloc((nw + 1) * sizeof *pc->wthread);
	pc->toff = malloc((b->nthreads + 1) * sizeof *pc->toff);
	if (!pc->items || !pc->wfirst || !pc->wcount || !pc->wthread || !pc->toff) {
		model_pieces_free(pc);
		return error_set(LOMAS_ENOMEM, "out of memory preparing the model");
	}
	memcpy(pc->items, b->items, b->n * sizeof *pc->items);
	memcpy(pc->wfirst, b->wfirst, nw * sizeof *pc->wfirst);
	memcpy(pc->wcount, b->wcount, nw * sizeof *pc->wcount);
	memcpy(pc->wthread, b->wthread, nw * sizeof *pc->wthread);
	memcpy(pc->toff, b->toff, (b->nthreads + 1) * sizeof *pc->toff);
	return LOMAS_OK;
}

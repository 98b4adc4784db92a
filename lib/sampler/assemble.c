/*
 * The sampler core's host side: profile assembly from a thread's store and
 * watch table (lomas_profile objects, malloc), and the malloc allocator the
 * tests use. Not compiled into the dbi tool, which has no libc: the host
 * process assembles its profile (lib/dbi/dump_read.c).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sampler.h"

static void *calloc_bytes(size_t bytes)
{
	return calloc(1, bytes);
}

static void free_bytes(void *mem, size_t bytes)
{
	(void)bytes;
	free(mem);
}

static void *realloc_bytes(void *mem, size_t old, size_t bytes)
{
	(void)old;
	return realloc(mem, bytes);
}

const inline_alloc inline_malloc_alloc = {calloc_bytes, free_bytes, realloc_bytes};

/* ----------------------------------------------------- profile assembly */

void inline_sample_to_profile(const isample *is, const inline_sample_place *pl, lomas_sample *out)
{
	uint64_t w = pl->window_refs ? is->start / pl->window_refs : 0;
	memset(out, 0, sizeof *out);
	if (w >= pl->nwindows)
		w = pl->nwindows - 1;
	out->start = is->start;
	out->end = is->end;
	out->addr = is->addr;
	out->start_pc = is->start_pc;
	out->end_pc = is->end_pc;
	out->weight = ldexp(pl->base_period, is->level);
	out->thread = pl->thread;
	out->window = (uint32_t)(pl->first_window + w);
	out->kind = is->kind;
	out->state = is->state;
}

lomas_status inline_profile_add_thread_head(lomas_profile *p, const inline_thread_data *td,
                                            uint64_t window_refs, inline_sample_place *pl)
{
	lomas_thread th = {.tid = td->tid, .refs = td->refs};
	lomas_status st;
	pl->base_period = td->base_period;
	pl->window_refs = window_refs;
	pl->thread = (uint32_t)p->threads.n;
	pl->first_window = p->windows.n;
	pl->nwindows = windows_count(td->refs, window_refs);
	if (pl->first_window + pl->nwindows > UINT32_MAX)
		return error_set(LOMAS_ERANGE, "too many windows (%llu)",
		                 (unsigned long long)(pl->first_window + pl->nwindows));
	if ((st = profile_add_thread(p, &th)))
		return st;
	if ((st = vec_reserve(&p->windows, p->windows.n + pl->nwindows)))
		return st;
	for (uint64_t k = 0; k < pl->nwindows; k++) {
		lomas_window w = window_at(td->refs, window_refs, k, pl->thread);
		if ((st = profile_add_window(p, &w)))
			return st;
	}
	return LOMAS_OK;
}

lomas_status inline_profile_add_thread(lomas_profile *p, const inline_thread_data *td,
                                       uint64_t window_refs)
{
	inline_sample_place pl;
	lomas_sample out;
	lomas_status st;
	if ((st = inline_profile_add_thread_head(p, td, window_refs, &pl)))
		return st;
	/* All the thread's samples at once: no growing (copying, faulting) on the way. */
	if ((st = vec_reserve(&p->samples, p->samples.n + (td->done ? td->done->n : 0) +
	                                       (td->open ? td->open->live : 0))))
		return st;
	if (td->done) {
		store_iter it;
		isample s;
		store_iter_init(&it, td->done);
		while (store_iter_next(&it, &s)) {
			inline_sample_to_profile(&s, &pl, &out);
			if ((st = profile_add_sample(p, &out)))
				return st;
		}
	}
	if (td->open) {
		const watch_table *wt = td->open;
		for (uint32_t i = wt->oldest; i != WT_NONE; i = wt->slots[i].newer) {
			isample s;
			wt_slot_to_dangling(&wt->slots[i], &s);
			inline_sample_to_profile(&s, &pl, &out);
			if ((st = profile_add_sample(p, &out)))
				return st;
		}
	}
	return LOMAS_OK;
}

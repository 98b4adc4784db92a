/*
 * The inline clock's pure parts: the per-thread watch table with its filter,
 * the chunked sample store, window accounting and profile assembly. No system
 * calls here; the runtime passes an allocator (mmap) and the tests drive it
 * with synthetic references.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "inline.h"

static void *calloc_bytes(size_t bytes)
{
	return calloc(1, bytes);
}

static void free_bytes(void *mem, size_t bytes)
{
	(void)bytes;
	free(mem);
}

const inline_alloc inline_malloc_alloc = {calloc_bytes, free_bytes};

/* ----------------------------------------------------------------- store */

bool store_push(sample_store *st, const inline_alloc *a, const isample *s)
{
	store_chunk *c = st->tail;
	if (!c || c->n == STORE_CHUNK) {
		store_chunk *n = st->spare;
		if (n) {
			st->spare = n->next;
			n->next = NULL;
			n->n = 0;
		} else if (!(n = a->alloc(sizeof *n))) {
			return false;
		}
		if (c)
			c->next = n;
		else
			st->head = n;
		st->tail = c = n;
	}
	c->items[c->n++] = *s;
	st->n++;
	return true;
}

void store_free(sample_store *st, const inline_alloc *a)
{
	for (int list = 0; list < 2; list++) {
		store_chunk *c = list ? st->spare : st->head;
		while (c) {
			store_chunk *next = c->next;
			a->release(c, sizeof *c);
			c = next;
		}
	}
	memset(st, 0, sizeof *st);
}

void store_thin(sample_store *st, const inline_alloc *a, rng *r)
{
	/* Compact in place: a write cursor (wc, wi) trails the read cursor. */
	store_chunk *wc = st->head;
	size_t wi = 0;
	uint64_t kept = 0, bits = 0;
	unsigned nbits = 0;
	for (store_chunk *c = st->head; c; c = c->next)
		for (size_t i = 0; i < c->n; i++) {
			if (nbits == 0) {
				bits = rng_next(r);
				nbits = 64;
			}
			bool keep = bits & 1;
			bits >>= 1, nbits--;
			if (!keep)
				continue;
			if (wi == STORE_CHUNK) {
				wc = wc->next;
				wi = 0;
			}
			wc->items[wi] = c->items[i];
			wc->items[wi].level++;
			wi++;
			kept++;
		}
	if (!wc)
		return;
	/* Keep the chunks after the write cursor for the next pushes. */
	store_chunk *rest = wc->next;
	(void)a;
	wc->n = wi;
	wc->next = NULL;
	while (rest) {
		store_chunk *next = rest->next;
		rest->next = st->spare;
		st->spare = rest;
		rest = next;
	}
	st->tail = wc;
	st->n = kept;
	if (kept == 0) {
		wc->next = st->spare;
		st->spare = wc;
		st->head = st->tail = NULL;
	}
}

/* ----------------------------------------------------------- watch table */

static uint32_t pow2_at_least(uint32_t n)
{
	uint32_t p = 1;
	while (p < n)
		p <<= 1;
	return p;
}

size_t wt_bytes(uint32_t capacity)
{
	uint32_t nb = pow2_at_least(capacity ? capacity : 1);
	return (size_t)capacity * sizeof(wt_slot) + (size_t)nb * sizeof(uint32_t);
}

void wt_init(watch_table *wt, void *mem, uint32_t capacity, unsigned line_shift, uint8_t *filter)
{
	memset(wt, 0, sizeof *wt);
	wt->capacity = capacity;
	wt->nbuckets = pow2_at_least(capacity ? capacity : 1);
	wt->line_shift = line_shift;
	wt->slots = mem;
	wt->buckets = (uint32_t *)(wt->slots + capacity);
	wt->filter = filter;
	wt->oldest = wt->newest = WT_NONE;
	wt_clear(wt);
}

static inline uint32_t bucket_of(const watch_table *wt, uint64_t line)
{
	return (uint32_t)((line * 0x9e3779b97f4a7c15ull) >> 32) & (wt->nbuckets - 1);
}

/* The filter blocks a line covers: [*first, *last] (in 64-byte blocks). */
static inline void line_blocks(const watch_table *wt, uint64_t line, uint64_t *first,
                               uint64_t *last)
{
	*first = (line << wt->line_shift) >> FILTER_SHIFT;
	*last = (((line + 1) << wt->line_shift) - 1) >> FILTER_SHIFT;
}

static void filter_add(watch_table *wt, uint64_t line)
{
	uint64_t first, last;
	if (!wt->filter)
		return;
	line_blocks(wt, line, &first, &last);
	for (uint64_t b = first; b <= last; b++) {
		uint8_t *f = &wt->filter[b & FILTER_MASK];
		if (*f != 255)
			(*f)++;
	}
}

static void filter_remove(watch_table *wt, uint64_t line)
{
	uint64_t first, last;
	if (!wt->filter)
		return;
	line_blocks(wt, line, &first, &last);
	for (uint64_t b = first; b <= last; b++) {
		uint8_t *f = &wt->filter[b & FILTER_MASK];
		if (*f != 255 && *f != 0) /* a saturated count stays (a harmless false positive) */
			(*f)--;
	}
}

void wt_clear(watch_table *wt)
{
	/* Clear only the filter bytes in use, so untouched pages stay unmapped. */
	for (uint32_t i = wt->oldest; wt->filter && i != WT_NONE; i = wt->slots[i].newer) {
		uint64_t first, last;
		line_blocks(wt, wt->slots[i].line, &first, &last);
		for (uint64_t b = first; b <= last; b++)
			wt->filter[b & FILTER_MASK] = 0;
	}
	/* Empty only the buckets in use (0 is empty: heads are stored as ~index). */
	for (uint32_t i = wt->oldest; i != WT_NONE; i = wt->slots[i].newer)
		wt->buckets[bucket_of(wt, wt->slots[i].line)] = 0;
	wt->live = 0;
	wt->bump = 0;
	wt->free_head = WT_NONE;
	wt->oldest = wt->newest = WT_NONE;
}

/* Unlink slot i from its bucket chain, the age list and the filter; free it. */
static void slot_remove(watch_table *wt, uint32_t i)
{
	wt_slot *s = &wt->slots[i];
	uint32_t b = bucket_of(wt, s->line);
	if (~wt->buckets[b] == i) {
		wt->buckets[b] = ~s->next;
	} else {
		uint32_t j = ~wt->buckets[b];
		while (wt->slots[j].next != i)
			j = wt->slots[j].next;
		wt->slots[j].next = s->next;
	}
	if (s->older != WT_NONE)
		wt->slots[s->older].newer = s->newer;
	else
		wt->oldest = s->newer;
	if (s->newer != WT_NONE)
		wt->slots[s->newer].older = s->older;
	else
		wt->newest = s->older;
	filter_remove(wt, s->line);
	s->next = wt->free_head;
	wt->free_head = i;
	wt->live--;
}

static void slot_to_sample(const wt_slot *s, isample *out)
{
	memset(out, 0, sizeof *out);
	out->start = s->start;
	out->addr = s->addr;
	out->start_pc = s->start_pc;
	out->kind = s->kind;
	out->level = s->level;
}

bool wt_watched(const watch_table *wt, uint64_t addr)
{
	uint64_t line = addr >> wt->line_shift;
	for (uint32_t i = ~wt->buckets[bucket_of(wt, line)]; i != WT_NONE; i = wt->slots[i].next)
		if (wt->slots[i].line == line)
			return true;
	return false;
}

bool wt_touch(watch_table *wt, uint64_t addr, uint64_t clock, uint64_t pc, isample *out)
{
	uint64_t line = addr >> wt->line_shift;
	if (wt->filter && !wt->filter[filter_index(addr)])
		return false;
	for (uint32_t i = ~wt->buckets[bucket_of(wt, line)]; i != WT_NONE; i = wt->slots[i].next) {
		if (wt->slots[i].line != line)
			continue;
		slot_to_sample(&wt->slots[i], out);
		out->end = clock;
		out->end_pc = pc;
		out->state = LOMAS_SAMPLE_REUSED;
		slot_remove(wt, i);
		return true;
	}
	return false;
}

bool wt_start(watch_table *wt, uint64_t addr, uint64_t clock, uint64_t pc, lomas_ref_kind kind,
              uint8_t level, isample *censored)
{
	bool dropped = false;
	uint32_t i;
	wt_slot *s;
	if (wt->capacity == 0) {
		/* No slots at all: the sample is censored at once (age 0). */
		memset(censored, 0, sizeof *censored);
		censored->start = censored->end = clock;
		censored->addr = addr;
		censored->start_pc = pc;
		censored->kind = (uint8_t)kind;
		censored->level = level;
		censored->state = LOMAS_SAMPLE_CENSORED;
		return true;
	}
	if (wt->live == wt->capacity) {
		slot_to_sample(&wt->slots[wt->oldest], censored);
		censored->end = clock;
		censored->state = LOMAS_SAMPLE_CENSORED;
		slot_remove(wt, wt->oldest);
		dropped = true;
	}
	if (wt->free_head != WT_NONE) {
		i = wt->free_head;
		wt->free_head = wt->slots[i].next;
	} else {
		i = wt->bump++;
	}
	s = &wt->slots[i];
	s->line = addr >> wt->line_shift;
	s->start = clock;
	s->addr = addr;
	s->start_pc = pc;
	s->kind = (uint8_t)kind;
	s->level = level;
	s->next = ~wt->buckets[bucket_of(wt, s->line)];
	wt->buckets[bucket_of(wt, s->line)] = ~i;
	s->older = wt->newest;
	s->newer = WT_NONE;
	if (wt->newest != WT_NONE)
		wt->slots[wt->newest].newer = i;
	else
		wt->oldest = i;
	wt->newest = i;
	filter_add(wt, s->line);
	wt->live++;
	return dropped;
}

bool wt_collect(const watch_table *wt, sample_store *st, const inline_alloc *a)
{
	for (uint32_t i = wt->oldest; i != WT_NONE; i = wt->slots[i].newer) {
		isample s;
		slot_to_sample(&wt->slots[i], &s);
		s.end = LOMAS_CLOCK_NONE;
		s.state = LOMAS_SAMPLE_DANGLING;
		if (!store_push(st, a, &s))
			return false;
	}
	return true;
}

void wt_thin(watch_table *wt, rng *r)
{
	uint64_t bits = 0;
	unsigned nbits = 0;
	uint32_t i = wt->oldest;
	while (i != WT_NONE) {
		uint32_t next = wt->slots[i].newer;
		if (nbits == 0) {
			bits = rng_next(r);
			nbits = 64;
		}
		if (bits & 1)
			wt->slots[i].level++;
		else
			slot_remove(wt, i);
		bits >>= 1, nbits--;
		i = next;
	}
}

/* ------------------------------------------------------------- windows */

uint64_t windows_count(uint64_t refs, uint64_t window_refs)
{
	if (window_refs == 0 || refs == 0)
		return 1;
	return refs / window_refs + (refs % window_refs != 0);
}

lomas_window window_at(uint64_t refs, uint64_t window_refs, uint64_t k, uint32_t thread)
{
	lomas_window w;
	memset(&w, 0, sizeof w);
	w.thread = thread;
	if (window_refs == 0) {
		w.refs = refs;
		return w;
	}
	w.start = k * window_refs;
	w.refs =
	    w.start >= refs ? 0 : (refs - w.start < window_refs ? refs - w.start : window_refs);
	return w;
}

/* ----------------------------------------------------- profile assembly */

static lomas_status add_sample(lomas_profile *p, const isample *is, double base_period,
                               uint64_t window_refs, uint32_t thread, uint64_t first_window,
                               uint64_t nwindows)
{
	lomas_sample s;
	uint64_t w = window_refs ? is->start / window_refs : 0;
	memset(&s, 0, sizeof s);
	if (w >= nwindows)
		w = nwindows - 1;
	s.start = is->start;
	s.end = is->end;
	s.addr = is->addr;
	s.start_pc = is->start_pc;
	s.end_pc = is->end_pc;
	s.weight = ldexp(base_period, is->level);
	s.thread = thread;
	s.window = (uint32_t)(first_window + w);
	s.kind = is->kind;
	s.state = is->state;
	return profile_add_sample(p, &s);
}

lomas_status inline_profile_add_thread(lomas_profile *p, const inline_thread_data *td,
                                       uint64_t window_refs)
{
	lomas_thread th = {.tid = td->tid, .refs = td->refs};
	uint32_t thread = (uint32_t)p->threads.n;
	uint64_t first_window = p->windows.n;
	uint64_t nw = windows_count(td->refs, window_refs);
	lomas_status st;
	if (first_window + nw > UINT32_MAX)
		return error_set(LOMAS_ERANGE, "too many windows (%llu)",
		                 (unsigned long long)(first_window + nw));
	if ((st = profile_add_thread(p, &th)))
		return st;
	if ((st = vec_reserve(&p->windows, p->windows.n + nw)))
		return st;
	/* All the thread's samples at once: no growing (copying, faulting) on the way. */
	if ((st = vec_reserve(&p->samples, p->samples.n + (td->done ? td->done->n : 0) +
	                                       (td->open ? td->open->live : 0))))
		return st;
	for (uint64_t k = 0; k < nw; k++) {
		lomas_window w = window_at(td->refs, window_refs, k, thread);
		if ((st = profile_add_window(p, &w)))
			return st;
	}
	if (td->done)
		for (const store_chunk *c = td->done->head; c; c = c->next)
			for (size_t i = 0; i < c->n; i++)
				if ((st = add_sample(p, &c->items[i], td->base_period, window_refs,
				                     thread, first_window, nw)))
					return st;
	if (td->open) {
		const watch_table *wt = td->open;
		for (uint32_t i = wt->oldest; i != WT_NONE; i = wt->slots[i].newer) {
			isample s;
			slot_to_sample(&wt->slots[i], &s);
			s.end = LOMAS_CLOCK_NONE;
			s.state = LOMAS_SAMPLE_DANGLING;
			if ((st = add_sample(p, &s, td->base_period, window_refs, thread,
			                     first_window, nw)))
				return st;
		}
	}
	return LOMAS_OK;
}

/*
 * The inline clock's pure parts: the per-thread watch table with its filter,
 * the sample store, window accounting and profile assembly. No system
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

static void *realloc_bytes(void *mem, size_t old, size_t bytes)
{
	(void)old;
	return realloc(mem, bytes);
}

const inline_alloc inline_malloc_alloc = {calloc_bytes, free_bytes, realloc_bytes, NULL};

/* ----------------------------------------------------------------- store */

/*
 * A sample is five varints and two bytes: the start, the addr and the
 * start_pc as zigzag deltas from the previous sample's (zero before the
 * first), the end (0 for LOMAS_CLOCK_NONE, else 1 + the zigzag delta from
 * start) and the end_pc (zigzag delta from start_pc), then kind | state << 4
 * and the level. The level is a plain byte so that raising it never makes a
 * sample longer: store_thin relies on that to re-encode the kept samples
 * over the ones it has read.
 */
#define PACKED_MAX_SAMPLE 52u
/* The first allocation (untouched past what is used) and the growth step (x2). */
#define STORE_FIRST_BYTES (256u * 1024u)
/* The runtime's page size (x86-64), for discarding what thinning empties. */
#define STORE_PAGE 4096u

static inline uint64_t zigzag(uint64_t delta)
{
	return (delta << 1) ^ (uint64_t)((int64_t)delta >> 63);
}

static inline uint64_t unzigzag(uint64_t v)
{
	return (v >> 1) ^ (0 - (v & 1));
}

/*
 * LEB128, low 7 bits first. (Reading and writing the varints as whole 8-byte
 * words, the groups gathered with shifts and masks, was slower: 21 ns a push
 * instead of 14 on stream's samples, whose varints are mostly 1-3 bytes.)
 */
static inline uint8_t *put_varint(uint8_t *q, uint64_t v)
{
	while (v >= 0x80) {
		*q++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*q++ = (uint8_t)v;
	return q;
}

static inline const uint8_t *get_varint(const uint8_t *p, uint64_t *v)
{
	uint64_t x = 0;
	for (unsigned shift = 0;; shift += 7) {
		uint8_t b = *p++;
		x |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80))
			break;
	}
	*v = x;
	return p;
}

/* s relative to the previous sample's start, addr and start_pc. */
static inline uint8_t *encode_sample(uint8_t *q, const isample *s, uint64_t start, uint64_t addr,
                                     uint64_t pc)
{
	q = put_varint(q, zigzag(s->start - start));
	q = put_varint(q, s->end == LOMAS_CLOCK_NONE ? 0 : zigzag(s->end - s->start) + 1);
	q = put_varint(q, zigzag(s->addr - addr));
	q = put_varint(q, zigzag(s->start_pc - pc));
	q = put_varint(q, zigzag(s->end_pc - s->start_pc));
	q[0] = (uint8_t)((s->kind & 0xfu) | (s->state & 0xfu) << 4);
	q[1] = s->level;
	return q + 2;
}

static inline const uint8_t *decode_sample(const uint8_t *p, isample *s, const isample *prev)
{
	uint64_t v;
	memset(s, 0, sizeof *s);
	p = get_varint(p, &v);
	s->start = prev->start + unzigzag(v);
	p = get_varint(p, &v);
	s->end = v == 0 ? LOMAS_CLOCK_NONE : s->start + unzigzag(v - 1);
	p = get_varint(p, &v);
	s->addr = prev->addr + unzigzag(v);
	p = get_varint(p, &v);
	s->start_pc = prev->start_pc + unzigzag(v);
	p = get_varint(p, &v);
	s->end_pc = s->start_pc + unzigzag(v);
	s->kind = p[0] & 0xfu;
	s->state = p[0] >> 4;
	s->level = p[1];
	return p + 2;
}

/* Room for one more sample: the first allocation, or twice the last. */
static bool store_room(sample_store *st, const inline_alloc *a)
{
	size_t cap;
	uint8_t *mem;
	if (st->cap - st->len >= PACKED_MAX_SAMPLE)
		return true;
	if (!st->data) {
		if (!(st->data = a->alloc(STORE_FIRST_BYTES)))
			return false;
		st->cap = STORE_FIRST_BYTES;
		return true;
	}
	cap = st->cap * 2;
	if (!(mem = a->grow(st->data, st->cap, cap)))
		return false;
	st->data = mem;
	st->cap = cap;
	return true;
}

bool store_push(sample_store *st, const inline_alloc *a, const isample *s)
{
	if (!store_room(st, a))
		return false;
	st->len =
	    (size_t)(encode_sample(st->data + st->len, s, st->start, st->addr, st->pc) - st->data);
	st->start = s->start;
	st->addr = s->addr;
	st->pc = s->start_pc;
	st->n++;
	return true;
}

void store_free(sample_store *st, const inline_alloc *a)
{
	if (st->data)
		a->release(st->data, st->cap);
	memset(st, 0, sizeof *st);
}

void store_iter_init(store_iter *it, const sample_store *st)
{
	memset(it, 0, sizeof *it);
	it->p = st->data;
	it->left = st->n;
}

bool store_iter_next(store_iter *it, isample *out)
{
	if (!it->left)
		return false;
	it->p = decode_sample(it->p, out, &it->prev);
	it->prev = *out;
	it->left--;
	return true;
}

uint64_t store_thin(sample_store *st, const inline_alloc *a, rng *r)
{
	/*
	 * In place: each kept sample is re-encoded (relative to the kept one
	 * before it) over the bytes already read. It never needs more bytes
	 * than it and the dropped samples since the last kept one took: a
	 * varint of a sum of deltas is at most one byte longer than the longest
	 * of them (zigzag(x + y) <= 2 max + 2), so no longer than their
	 * varints together; the other fields keep their lengths (the level is a
	 * plain byte). So the writer never passes the reader.
	 */
	uint64_t bits = 0, kept = 0, start = 0, addr = 0, pc = 0;
	size_t used, top = st->len;
	unsigned nbits = 0;
	const uint8_t *p = st->data;
	uint8_t *q = st->data;
	isample s, prev = {0};
	if (!st->n)
		return 0;
	for (uint64_t i = 0; i < st->n; i++) {
		p = decode_sample(p, &s, &prev);
		prev = s;
		if (nbits == 0) {
			bits = rng_next(r);
			nbits = 64;
		}
		bool keep = bits & 1;
		bits >>= 1, nbits--;
		if (!keep)
			continue;
		s.level++;
		q = encode_sample(q, &s, start, addr, pc);
		start = s.start;
		addr = s.addr;
		pc = s.start_pc;
		kept++;
	}
	st->len = (size_t)(q - st->data);
	st->n = kept;
	/* Give back the pages emptied: kept, they would hold the store's high
	 * mark resident after every thinning, and a program whose own peak
	 * comes after it (matmul's, at the end of its loops) would peak higher. */
	used = (st->len + STORE_PAGE - 1) / STORE_PAGE * STORE_PAGE;
	top = (top + STORE_PAGE - 1) / STORE_PAGE * STORE_PAGE;
	if (a->discard && top > used)
		a->discard(st->data + used, top - used);
	st->start = start;
	st->addr = addr;
	st->pc = pc;
	return 0;
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
	return (size_t)capacity * sizeof(wt_slot) + (size_t)nb * sizeof(uint32_t) + FILTER_SIZE;
}

void wt_init(watch_table *wt, void *mem, uint32_t capacity, unsigned line_shift, uint8_t *filter)
{
	memset(wt, 0, sizeof *wt);
	wt->capacity = capacity;
	wt->nbuckets = pow2_at_least(capacity ? capacity : 1);
	wt->line_shift = line_shift;
	wt->slots = mem;
	wt->buckets = (uint32_t *)(wt->slots + capacity);
	wt->fcount = (uint8_t *)(wt->buckets + wt->nbuckets);
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
		uint32_t i = (uint32_t)b & FILTER_MASK;
		uint8_t tag = filter_tag(b << FILTER_SHIFT);
		if (!wt->fcount[i])
			wt->filter[i] = tag;
		else if (wt->filter[i] != tag)
			wt->filter[i] = FILTER_ANY;
		if (wt->fcount[i] != 255)
			wt->fcount[i]++;
	}
}

static void filter_remove(watch_table *wt, uint64_t line)
{
	uint64_t first, last;
	if (!wt->filter)
		return;
	line_blocks(wt, line, &first, &last);
	for (uint64_t b = first; b <= last; b++) {
		uint32_t i = (uint32_t)b & FILTER_MASK;
		/* A saturated count stays (a harmless false positive); a byte that
		 * became FILTER_ANY stays so until no watched block maps there. */
		if (wt->fcount[i] == 255 || wt->fcount[i] == 0)
			continue;
		if (!--wt->fcount[i])
			wt->filter[i] = 0;
	}
}

void wt_clear(watch_table *wt)
{
	/* Clear only the filter bytes in use, so untouched pages stay unmapped. */
	for (uint32_t i = wt->oldest; wt->filter && i != WT_NONE; i = wt->slots[i].newer) {
		uint64_t first, last;
		line_blocks(wt, wt->slots[i].line, &first, &last);
		for (uint64_t b = first; b <= last; b++)
			wt->filter[b & FILTER_MASK] = wt->fcount[b & FILTER_MASK] = 0;
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

/* An open sample as it stands when the run ends: no end yet. */
static void slot_to_dangling(const wt_slot *s, isample *out)
{
	slot_to_sample(s, out);
	out->end = LOMAS_CLOCK_NONE;
	out->state = LOMAS_SAMPLE_DANGLING;
}

bool wt_watched(const watch_table *wt, uint64_t addr)
{
	uint64_t line = addr >> wt->line_shift;
	if (wt->filter && !filter_may_watch(wt->filter[filter_index(addr)], addr))
		return false;
	for (uint32_t i = ~wt->buckets[bucket_of(wt, line)]; i != WT_NONE; i = wt->slots[i].next)
		if (wt->slots[i].line == line)
			return true;
	return false;
}

bool wt_touch(watch_table *wt, uint64_t addr, uint64_t clock, uint64_t pc, isample *out)
{
	uint64_t line = addr >> wt->line_shift;
	if (wt->filter && !filter_may_watch(wt->filter[filter_index(addr)], addr))
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
		slot_to_dangling(&wt->slots[i], &s);
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
			slot_to_dangling(&wt->slots[i], &s);
			inline_sample_to_profile(&s, &pl, &out);
			if ((st = profile_add_sample(p, &out)))
				return st;
		}
	}
	return LOMAS_OK;
}

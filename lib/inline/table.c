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

/* Worst case of one encoded sample: five 10-byte varints and a 3-byte one. */
#define PACKED_MAX_SAMPLE 53u

static inline uint64_t zigzag(uint64_t delta)
{
	return (delta << 1) ^ (uint64_t)((int64_t)delta >> 63);
}

static inline uint64_t unzigzag(uint64_t v)
{
	return (v >> 1) ^ (0 - (v & 1));
}

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

/* s relative to prev (the previous sample of the block, zero at its start). */
static uint8_t *encode_sample(uint8_t *q, const isample *s, const isample *prev)
{
	q = put_varint(q, zigzag(s->start - prev->start));
	q = put_varint(q, s->end == LOMAS_CLOCK_NONE ? 0 : zigzag(s->end - s->start) + 1);
	q = put_varint(q, zigzag(s->addr - prev->addr));
	q = put_varint(q, zigzag(s->start_pc - prev->start_pc));
	q = put_varint(q, zigzag(s->end_pc - s->start_pc));
	return put_varint(q, (uint64_t)s->kind | (uint64_t)s->state << 4 | (uint64_t)s->level << 8);
}

static const uint8_t *decode_sample(const uint8_t *p, isample *s, const isample *prev)
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
	p = get_varint(p, &v);
	s->kind = (uint8_t)(v & 0xf);
	s->state = (uint8_t)((v >> 4) & 0xf);
	s->level = (uint8_t)(v >> 8);
	return p;
}

/* Encode the n samples at items into a new block at the end of st->packed. */
static bool pack(sample_store *st, const inline_alloc *a, const isample *items, size_t n)
{
	size_t bytes = sizeof(packed_block) + n * PACKED_MAX_SAMPLE;
	packed_block *b = a->alloc(bytes); /* zeroed pages past len are never touched */
	isample prev = {0};
	uint8_t *q;
	if (!b)
		return false;
	b->bytes = bytes;
	q = b->data;
	for (size_t i = 0; i < n; i++) {
		q = encode_sample(q, &items[i], &prev);
		prev = items[i];
	}
	b->n = (uint32_t)n;
	b->len = (uint32_t)(q - b->data);
	if (st->packed_tail)
		st->packed_tail->next = b;
	else
		st->packed = b;
	st->packed_tail = b;
	return true;
}

bool store_push(sample_store *st, const inline_alloc *a, const isample *s)
{
	store_chunk *c = st->head;
	if (!c) {
		if (!(c = a->alloc(sizeof *c)))
			return false;
		st->head = st->tail = c;
	} else if (c->n == STORE_CHUNK) {
		if (!pack(st, a, c->items, c->n))
			return false;
		c->n = 0;
	}
	c->items[c->n++] = *s;
	st->n++;
	return true;
}

void store_free(sample_store *st, const inline_alloc *a)
{
	packed_block *b = st->packed;
	while (b) {
		packed_block *next = b->next;
		a->release(b, b->bytes);
		b = next;
	}
	if (st->head)
		a->release(st->head, sizeof *st->head);
	memset(st, 0, sizeof *st);
}

void store_iter_init(store_iter *it, const sample_store *st)
{
	memset(it, 0, sizeof *it);
	it->st = st;
	it->b = st->packed;
	if (it->b) {
		it->p = it->b->data;
		it->left = it->b->n;
	}
	it->c = st->head;
}

bool store_iter_next(store_iter *it, isample *out)
{
	while (it->b) {
		if (it->left) {
			it->p = decode_sample(it->p, out, &it->prev);
			it->prev = *out;
			it->left--;
			return true;
		}
		it->b = it->b->next;
		memset(&it->prev, 0, sizeof it->prev);
		if (it->b) {
			it->p = it->b->data;
			it->left = it->b->n;
		}
	}
	if (it->c && it->i < it->c->n) {
		*out = it->c->items[it->i++];
		return true;
	}
	return false;
}

/* Keep s with probability 1/2 (one bit of *bits), raised a level, in *kept. */
static void thin_one(sample_store *kept, const inline_alloc *a, isample *s, rng *r, uint64_t *bits,
                     unsigned *nbits, uint64_t *lost)
{
	if (*nbits == 0) {
		*bits = rng_next(r);
		*nbits = 64;
	}
	bool keep = *bits & 1;
	*bits >>= 1, (*nbits)--;
	if (!keep)
		return;
	s->level++;
	if (!store_push(kept, a, s))
		(*lost)++;
}

uint64_t store_thin(sample_store *st, const inline_alloc *a, rng *r)
{
	/* Re-push the kept samples, in order, into a fresh store, giving each old
	 * block back as soon as it is read (the peak stays near the old size). */
	sample_store kept = {0};
	uint64_t bits = 0, lost = 0;
	unsigned nbits = 0;
	isample s, prev;
	packed_block *b = st->packed;
	while (b) {
		packed_block *next = b->next;
		const uint8_t *p = b->data;
		memset(&prev, 0, sizeof prev);
		for (uint32_t i = 0; i < b->n; i++) {
			p = decode_sample(p, &s, &prev);
			prev = s;
			thin_one(&kept, a, &s, r, &bits, &nbits, &lost);
		}
		a->release(b, b->bytes);
		b = next;
	}
	st->packed = st->packed_tail = NULL;
	if (st->head) {
		for (size_t i = 0; i < st->head->n; i++) {
			s = st->head->items[i];
			thin_one(&kept, a, &s, r, &bits, &nbits, &lost);
		}
	}
	store_free(st, a);
	*st = kept;
	return lost;
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
	if (td->done) {
		store_iter it;
		isample s;
		store_iter_init(&it, td->done);
		while (store_iter_next(&it, &s))
			if ((st = add_sample(p, &s, td->base_period, window_refs, thread,
			                     first_window, nw)))
				return st;
	}
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

/*
 * The sampler core's pure parts: the per-thread watch table with its filter,
 * the sample store and window accounting. No system calls and no libc but
 * memset and memcpy: the inline runtime passes an allocator (mmap), the dbi
 * tool Valgrind's, and the tests drive it with synthetic references.
 */
#include <string.h>

#include "sampler.h"

/* ----------------------------------------------------------------- store */

/*
 * A sample is one packed record (core.h, packed_sample: the profile file's
 * PSAMPLES records): the start, the addr and the start_pc as deltas from the
 * previous sample's in its stream, the end and end_pc from the start and
 * start_pc, the kind and state, and the level the sample was pushed with (a
 * byte: the level it is read back with is the greater of it and the store's,
 * see store_level_of). Each stream is a PSAMPLES block as it is.
 */

/*
 * The level of a sample pushed with level pushed, in a store now at level:
 * the greater of the two (a sample below the store's level has outlived
 * each thinning since, each doubling its weight). Bytes, compared as a
 * signed difference: a live sample is never more than STORE_FATES levels
 * from the store's.
 */
static inline uint8_t store_level_of(uint8_t pushed, uint8_t level)
{
	return (int8_t)(uint8_t)(pushed - level) < 0 ? level : pushed;
}

static inline const uint8_t *decode_sample(const uint8_t *p, const uint8_t *end, isample *s,
                                           const isample *prev, uint8_t level)
{
	p = packed_get(p, end, s, prev);
	s->level = store_level_of(s->level, level);
	return p;
}

/* Room for one more sample: the first allocation, or twice the last. */
static bool stream_room(sample_store *st, unsigned k, const inline_alloc *a)
{
	store_stream *ss = &st->s[k];
	size_t cap;
	uint8_t *mem;
	if (ss->cap - ss->len >= PACKED_MAX_RECORD)
		return true;
	if (!ss->data) {
		/* The reserve's slice k if never handed out, else fresh memory. The
		 * first allocation (untouched past what is used), then x2. */
		if (st->reserve && !(st->reserve_used & (1u << k))) {
			st->reserve_used |= 1u << k;
			ss->data = st->reserve + (size_t)k * STORE_FIRST_BYTES;
		} else if (!(ss->data = a->alloc(STORE_FIRST_BYTES))) {
			return false;
		}
		ss->cap = STORE_FIRST_BYTES;
		return true;
	}
	cap = ss->cap * 2;
	if (!(mem = a->grow(ss->data, ss->cap, cap)))
		return false;
	ss->data = mem;
	ss->cap = cap;
	return true;
}

/*
 * The stream of a new sample of level pushed: the level whose thinning drops
 * it. Its first thinning is the one that raises the store past its level;
 * it outlives F of them, F the run of 1 bits from the low end, and the
 * stream is at most STORE_FATES - 1 levels above the store's.
 */
static unsigned store_death(sample_store *st, uint8_t pushed)
{
	uint32_t ahead = (uint8_t)(pushed - (uint8_t)st->level), last = STORE_FATES - 1;
	unsigned f = 0;
	if (ahead > last)
		ahead = (int8_t)ahead < 0 ? 0 : last;
	if (!st->fates)
		return st->level + last;
	for (;;) {
		if (!st->nbits) {
			st->bits = rng_next(st->fates);
			st->nbits = 64;
		}
		bool survives = st->bits & 1;
		st->bits >>= 1, st->nbits--;
		if (!survives || ahead + f == last)
			return st->level + ahead + f;
		f++;
	}
}

bool store_push(sample_store *st, const inline_alloc *a, const isample *s)
{
	unsigned k = store_death(st, s->level) % STORE_FATES;
	store_stream *ss = &st->s[k];
	if (!stream_room(st, k, a))
		return false;
	ss->len = (size_t)(packed_put(ss->data + ss->len, s, &ss->prev) - ss->data);
	ss->prev = *s;
	ss->n++;
	st->n++;
	return true;
}

static void stream_free(store_stream *ss, const inline_alloc *a)
{
	if (ss->data)
		a->release(ss->data, ss->cap);
	memset(ss, 0, sizeof *ss);
}

void store_reserve(sample_store *st, void *mem)
{
	st->reserve = mem;
	st->reserve_used = 0;
}

/* Give back the reserve's slices never handed out (each handed-out slice
 * went with its stream), a run of them at a time. */
static void reserve_free(sample_store *st, const inline_alloc *a)
{
	for (unsigned k = 0; st->reserve && k < STORE_FATES;) {
		unsigned j = k;
		while (j < STORE_FATES && !(st->reserve_used & (1u << j)))
			j++;
		if (j > k)
			a->release(st->reserve + (size_t)k * STORE_FIRST_BYTES,
			           (size_t)(j - k) * STORE_FIRST_BYTES);
		k = j + 1;
	}
	st->reserve = NULL;
	st->reserve_used = 0;
}

void store_free(sample_store *st, const inline_alloc *a)
{
	rng *fates = st->fates;
	reserve_free(st, a);
	for (unsigned k = 0; k < STORE_FATES; k++)
		stream_free(&st->s[k], a);
	memset(st, 0, sizeof *st);
	st->fates = fates;
}

void store_take(sample_store *to, sample_store *from)
{
	*to = *from;
	memset(from, 0, sizeof *from);
	from->fates = to->fates;
}

void store_iter_init(store_iter *it, const sample_store *st)
{
	memset(it, 0, sizeof *it);
	it->st = st;
	it->p = st->s[st->level % STORE_FATES].data;
	it->end = it->p + st->s[st->level % STORE_FATES].len;
	it->left = st->s[st->level % STORE_FATES].n;
}

bool store_iter_next(store_iter *it, isample *out)
{
	const sample_store *st = it->st;
	while (!it->left) {
		const store_stream *ss;
		if (++it->k >= STORE_FATES)
			return false;
		ss = &st->s[(st->level + it->k) % STORE_FATES];
		it->p = ss->data;
		it->end = ss->data + ss->len;
		it->left = ss->n;
		memset(&it->prev, 0, sizeof it->prev);
	}
	it->p = decode_sample(it->p, it->end, out, &it->prev, (uint8_t)st->level);
	it->prev = *out;
	it->left--;
	return true;
}

bool store_next_block(const sample_store *st, unsigned *k, uint32_t thread, double base_period,
                      profile_sample_block *out)
{
	while (*k < STORE_FATES) {
		const store_stream *ss = &st->s[(st->level + (*k)++) % STORE_FATES];
		if (!ss->n)
			continue;
		out->thread = thread;
		out->level_floor = (uint8_t)st->level;
		out->base_weight = base_period;
		out->n = ss->n;
		out->data = ss->data;
		out->len = ss->len;
		return true;
	}
	return false;
}

void store_add_totals(const sample_store *st, profile_sample_source *src)
{
	for (unsigned k = 0; k < STORE_FATES; k++) {
		const store_stream *ss = &st->s[k];
		if (!ss->n)
			continue;
		src->n += ss->n;
		src->nblocks++;
		src->bytes += ss->len;
	}
}

void store_thin(sample_store *st, const inline_alloc *a)
{
	store_stream *ss = &st->s[st->level % STORE_FATES];
	st->n -= ss->n;
	stream_free(ss, a);
	st->level++;
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
	return (size_t)capacity * sizeof(wt_slot) + (size_t)nb * sizeof(uint32_t) +
	       FILTER_SIZE * sizeof(wt_fstate);
}

void wt_init(watch_table *wt, void *mem, uint32_t capacity, unsigned line_shift, uint8_t *filter)
{
	memset(wt, 0, sizeof *wt);
	wt->capacity = capacity;
	wt->nbuckets = pow2_at_least(capacity ? capacity : 1);
	wt->line_shift = line_shift;
	wt->slots = mem;
	wt->buckets = (uint32_t *)(wt->slots + capacity);
	wt->fst = (wt_fstate *)(wt->buckets + wt->nbuckets);
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

/* Set filter byte i; byte 0 is also kept in the first pad byte past the
 * filter's end, so that a 16-bit load of the last byte (the pass plugin's
 * test of a group's two blocks) sees its neighbour, byte 0, after it. */
static inline void filter_set(watch_table *wt, uint32_t i, uint8_t v)
{
	wt->filter[i] = v;
	if (i == 0)
		wt->filter[FILTER_SIZE] = v;
}

static void filter_add(watch_table *wt, uint64_t line)
{
	uint64_t first, last;
	if (!wt->filter)
		return;
	line_blocks(wt, line, &first, &last);
	for (uint64_t b = first; b <= last; b++) {
		uint32_t i = (uint32_t)b & FILTER_MASK;
		wt_fstate *f = &wt->fst[i];
		uint8_t tag = filter_tag(b << FILTER_SHIFT);
		if (!f->count)
			filter_set(wt, i, tag);
		else if (wt->filter[i] != tag)
			filter_set(wt, i, FILTER_ANY);
		if (f->count != 255)
			f->count++;
		f->tags ^= tag;
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
		wt_fstate *f = &wt->fst[i];
		/* A saturated count stays (a harmless false positive); a byte that
		 * became FILTER_ANY stays so while two or more watched blocks map
		 * there, and takes the tag of the last one left. */
		if (f->count == 255 || f->count == 0)
			continue;
		f->tags ^= filter_tag(b << FILTER_SHIFT);
		if (!--f->count)
			filter_set(wt, i, 0);
		else if (f->count == 1)
			filter_set(wt, i, f->tags); /* the one block left's tag */
	}
}

void wt_clear(watch_table *wt)
{
	/* Clear only the filter bytes in use, so untouched pages stay unmapped. */
	for (uint32_t i = wt->oldest; wt->filter && i != WT_NONE; i = wt->slots[i].newer) {
		uint64_t first, last;
		line_blocks(wt, wt->slots[i].line, &first, &last);
		for (uint64_t b = first; b <= last; b++) {
			filter_set(wt, (uint32_t)b & FILTER_MASK, 0);
			wt->fst[b & FILTER_MASK] = (wt_fstate){0, 0};
		}
	}
	/* Empty only the buckets in use (0 is empty: heads are stored as ~index). */
	for (uint32_t i = wt->oldest; i != WT_NONE; i = wt->slots[i].newer)
		wt->buckets[bucket_of(wt, wt->slots[i].line)] = 0;
	wt->live = 0;
	wt->bump = 0;
	wt->free_head = WT_NONE;
	wt->oldest = wt->newest = WT_NONE;
}

/*
 * Unlink slot i, whose bucket-chain predecessor is prev (WT_NONE: it heads
 * bucket b), from its chain, the age list and the filter; free it.
 */
static void slot_unlink(watch_table *wt, uint32_t i, uint32_t prev, uint32_t b)
{
	wt_slot *s = &wt->slots[i];
	if (prev == WT_NONE)
		wt->buckets[b] = ~s->next;
	else
		wt->slots[prev].next = s->next;
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

/* slot_unlink, finding the predecessor (censoring and thinning). */
static void slot_remove(watch_table *wt, uint32_t i)
{
	uint32_t b = bucket_of(wt, wt->slots[i].line), prev = WT_NONE;
	for (uint32_t j = ~wt->buckets[b]; j != i; j = wt->slots[j].next)
		prev = j;
	slot_unlink(wt, i, prev, b);
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

void wt_slot_to_dangling(const wt_slot *s, isample *out)
{
	slot_to_sample(s, out);
	out->end = LOMAS_CLOCK_NONE;
	out->state = LOMAS_SAMPLE_DANGLING;
}

bool wt_lookup(const watch_table *wt, uint64_t addr, wt_pos *pos)
{
	uint64_t line = addr >> wt->line_shift;
	uint32_t prev = WT_NONE, b;
	if (wt->filter && !filter_may_watch(wt->filter[filter_index(addr)], addr))
		return false;
	b = bucket_of(wt, line);
	for (uint32_t i = ~wt->buckets[b]; i != WT_NONE; prev = i, i = wt->slots[i].next)
		if (wt->slots[i].line == line) {
			pos->slot = i;
			pos->prev = prev;
			pos->bucket = b;
			return true;
		}
	return false;
}

bool wt_pos_valid(const watch_table *wt, uint64_t addr, const wt_pos *pos)
{
	if (pos->slot >= wt->capacity || pos->bucket >= wt->nbuckets ||
	    (pos->prev != WT_NONE && pos->prev >= wt->capacity))
		return false;
	const wt_slot *s = &wt->slots[pos->slot];
	uint32_t link =
	    pos->prev == WT_NONE ? ~wt->buckets[pos->bucket] : wt->slots[pos->prev].next;
	return link == pos->slot && s->line == addr >> wt->line_shift;
}

bool wt_watched(const watch_table *wt, uint64_t addr)
{
	wt_pos pos;
	return wt_lookup(wt, addr, &pos);
}

void wt_end(watch_table *wt, const wt_pos *pos, uint64_t clock, uint64_t pc, isample *out)
{
	slot_to_sample(&wt->slots[pos->slot], out);
	out->end = clock;
	out->end_pc = pc;
	out->state = LOMAS_SAMPLE_REUSED;
	slot_unlink(wt, pos->slot, pos->prev, pos->bucket);
}

bool wt_touch(watch_table *wt, uint64_t addr, uint64_t clock, uint64_t pc, isample *out)
{
	wt_pos pos;
	if (!wt_lookup(wt, addr, &pos))
		return false;
	wt_end(wt, &pos, clock, pc, out);
	return true;
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
		wt_slot_to_dangling(&wt->slots[i], &s);
		if (!store_push(st, a, &s))
			return false;
	}
	return true;
}

void wt_thin(watch_table *wt, rng *r, uint8_t level)
{
	uint64_t bits = 0;
	unsigned nbits = 0;
	uint32_t i = wt->oldest;
	while (i != WT_NONE) {
		uint32_t next = wt->slots[i].newer;
		if (wt->slots[i].level < level) {
			if (nbits == 0) {
				bits = rng_next(r);
				nbits = 64;
			}
			if (bits & 1)
				wt->slots[i].level = level;
			else
				slot_remove(wt, i);
			bits >>= 1, nbits--;
		}
		i = next;
	}
}

/* ----------------------------------------------------- period auto */

void sampler_thin_to(sample_store *done, watch_table *wt, rng *thin, uint32_t level,
                     const inline_alloc *a)
{
	while (done->level < auto_floor(level)) {
		wt_thin(wt, thin, (uint8_t)(done->level + 1));
		store_thin(done, a);
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

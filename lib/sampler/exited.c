/*
 * The samples of threads that have exited, kept compactly until the profile
 * is written: one record per thread in one growing allocation (the arena),
 * its store's non-empty streams copied in as they are (packed records, the
 * profile file's own encoding). A clock that keeps its exited threads here
 * gives back a thread's sampler itself (its state, watch table, store and
 * the store's reserve) when the thread exits, so a program that runs
 * threads one after another holds its live threads' samplers plus the
 * exited threads' samples, about 60 bytes of header and 16 a stream besides
 * the samples (the inline runtime held ~20 KiB a thread: the state's page
 * and the pages of each stream's first allocation; 20k short threads
 * reached 430 MB).
 *
 * Period auto thins an exited thread's samples as it would the thread's
 * own store: a record's streams are its store's, each the samples one
 * thinning drops, so bringing it to a higher level drops whole streams and
 * reads no sample. The arena thins every record to the process's level
 * before it grows, so it holds the budget, not every sample each thread
 * ever took.
 *
 * Part of the sampler core: no libc but memset, memcpy and memmove, memory
 * from the allocator the caller passes (mmap in the inline runtime).
 */
#include <string.h>

#include "sampler.h"

#define ALIGN8(x) (((x) + 7u) & ~(size_t)7u)
#define ARENA_FIRST (64u * 1024u)

static exited_stream *rec_streams(exited_rec *r)
{
	return (exited_stream *)(void *)(r + 1);
}

static const exited_stream *rec_streams_c(const exited_rec *r)
{
	return (const exited_stream *)(const void *)(r + 1);
}

static uint8_t *rec_data(exited_rec *r)
{
	return (uint8_t *)(rec_streams(r) + r->nstreams);
}

static const uint8_t *rec_data_c(const exited_rec *r)
{
	return (const uint8_t *)(rec_streams_c(r) + r->nstreams);
}

/* Room for need more bytes: thin first (drop what the level no longer keeps), then grow. */
static bool arena_room(exited_arena *a, const inline_alloc *al, size_t need, uint32_t level,
                       uint32_t floor)
{
	size_t cap;
	uint8_t *mem;
	if (a->cap - a->len >= need)
		return true;
	/* Thin when the level has risen since the last time (not at every
	 * record: a pass over the arena each would be quadratic). */
	if (level > a->thinned_level) {
		exited_thin(a, level, floor);
		if (a->cap - a->len >= need)
			return true;
	}
	cap = a->cap ? a->cap : ARENA_FIRST;
	while (cap - a->len < need)
		cap *= 2;
	if (!a->mem)
		mem = al->alloc(cap);
	else
		mem = al->grow(a->mem, a->cap, cap);
	if (!mem)
		return false;
	a->mem = mem;
	a->cap = cap;
	return true;
}

bool exited_add(exited_arena *a, const inline_alloc *al, const exited_info *info,
                const sample_store *st, uint32_t level, uint32_t floor)
{
	unsigned ns = 0;
	size_t bytes = 0, size;
	exited_rec *r;
	exited_stream *s;
	uint8_t *d;
	for (unsigned k = 0; st && k < STORE_FATES; k++) {
		const store_stream *ss = &st->s[(st->level + k) % STORE_FATES];
		if (ss->n) {
			ns++;
			bytes += ss->len;
		}
	}
	size = ALIGN8(sizeof *r + ns * sizeof *s + bytes);
	if (!arena_room(a, al, size, level, floor))
		return false;
	r = (exited_rec *)(void *)(a->mem + a->len);
	memset(r, 0, sizeof *r);
	r->size = (uint32_t)size;
	r->index = info->index;
	r->tid = info->tid;
	r->refs = info->refs;
	r->lost = info->lost;
	r->base_period = info->base_period;
	r->level = info->level;
	r->adaptive = info->adaptive;
	r->store_level = st ? st->level : 0;
	r->nstreams = (uint8_t)ns;
	s = rec_streams(r);
	d = rec_data(r);
	for (unsigned k = 0; st && k < STORE_FATES; k++) {
		const store_stream *ss = &st->s[(st->level + k) % STORE_FATES];
		if (!ss->n)
			continue;
		s->k = (uint8_t)k;
		s->len = ss->len;
		s->n = ss->n;
		memcpy(d, ss->data, ss->len);
		d += ss->len;
		r->n += ss->n;
		s++;
	}
	a->len += size;
	a->count++;
	return true;
}

const exited_rec *exited_next(const exited_arena *a, const exited_rec *prev)
{
	size_t at = prev ? (size_t)((const uint8_t *)prev - a->mem) + prev->size : 0;
	return at < a->len ? (const exited_rec *)(const void *)(a->mem + at) : NULL;
}

/* Drop r's streams below floor (their thinnings have come), in place. */
static void rec_thin(exited_rec *r, uint32_t floor)
{
	exited_stream old[STORE_FATES], *s = rec_streams(r);
	unsigned n = r->nstreams, kept = 0, total = 0;
	uint32_t drop = floor - r->store_level;
	const uint8_t *src = rec_data(r);
	uint8_t *dst;
	memcpy(old, s, n * sizeof *old);
	for (unsigned i = 0; i < n; i++)
		total += old[i].k >= drop;
	/* Headers shrink and dropped bytes go: every kept stream's bytes move
	 * down (or stay), never over bytes still to be moved. */
	dst = (uint8_t *)(s + total);
	for (unsigned i = 0; i < n; i++) {
		if (old[i].k >= drop) {
			memmove(dst, src, old[i].len);
			dst += old[i].len;
			s[kept] = old[i];
			s[kept++].k = (uint8_t)(old[i].k - drop);
		} else {
			r->n -= old[i].n;
		}
		src += old[i].len;
	}
	r->nstreams = (uint8_t)kept;
	r->store_level = floor;
	r->size = ALIGN8((size_t)(dst - (uint8_t *)r));
}

void exited_thin(exited_arena *a, uint32_t level, uint32_t floor)
{
	size_t in = 0, out = 0;
	if (level > a->thinned_level)
		a->thinned_level = level;
	while (in < a->len) {
		exited_rec *r = (exited_rec *)(void *)(a->mem + in);
		uint64_t old_size = r->size;
		if (r->adaptive) {
			if (r->level < level)
				r->level = (uint8_t)level;
			if (r->store_level < floor)
				rec_thin(r, floor);
		}
		if (out != in)
			memmove(a->mem + out, r, r->size);
		out += ((exited_rec *)(void *)(a->mem + out))->size;
		in += old_size;
	}
	a->len = out;
}

void exited_view(const exited_rec *r, sample_store *view)
{
	const exited_stream *s = rec_streams_c(r);
	const uint8_t *d = rec_data_c(r);
	memset(view, 0, sizeof *view);
	view->level = r->store_level;
	for (unsigned i = 0; i < r->nstreams; i++) {
		store_stream *ss = &view->s[(r->store_level + s[i].k) % STORE_FATES];
		ss->data = (uint8_t *)d;
		ss->len = ss->cap = s[i].len;
		ss->n = s[i].n;
		view->n += s[i].n;
		d += s[i].len;
	}
}

void exited_free(exited_arena *a, const inline_alloc *al)
{
	if (a->mem)
		al->release(a->mem, a->cap);
	memset(a, 0, sizeof *a);
}

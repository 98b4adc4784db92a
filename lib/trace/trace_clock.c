/*
 * The trace clock: sample a recorded reference stream with geometric gaps
 * (each reference sampled independently with probability 1/period) and
 * measure each sampled reference's forward reuse distance exactly, per
 * thread (docs/architecture.md).
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "trace.h"

#define HASH_K 0x9e3779b97f4a7c15ull /* Fibonacci hashing: use the high bits */
#define LINE_EMPTY UINT64_MAX
#define TABLE_MIN_BITS 12
#define FILTER_EXTRA_BITS 2 /* filter has 4 buckets per table slot */
#define TMAP_MIN 16

#if defined(__GNUC__)
#define LIKELY(x) __builtin_expect(!!(x), 1)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)
#else
#define LIKELY(x) (x)
#define UNLIKELY(x) (x)
#endif

static unsigned log2_u64(uint64_t v)
{
	unsigned b = 0;
	while (v >>= 1)
		b++;
	return b;
}

/* ------------------------------------------------------- watched-line table */

/* Allocate an empty table of 2^bits slots and its filter (old ones kept on failure). */
static lomas_status table_alloc(struct lomas_trace *t, unsigned bits)
{
	size_t n = (size_t)1 << bits;
	size_t nf = n << FILTER_EXTRA_BITS;
	trace_slot *tab = malloc(n * sizeof *tab);
	uint8_t *filter = calloc(nf, 1);
	if (!tab || !filter) {
		free(tab);
		free(filter);
		return error_set(LOMAS_ENOMEM, "trace: out of memory for a %zu-line watch table",
		                 n);
	}
	for (size_t i = 0; i < n; i++)
		tab[i].line = LINE_EMPTY;
	free(t->table);
	free(t->filter);
	t->table = tab;
	t->filter = filter;
	t->table_mask = n - 1;
	t->table_shift = 64 - bits;
	t->filter_shift = 64 - bits - FILTER_EXTRA_BITS;
	t->table_used = 0;
	return LOMAS_OK;
}

static inline void filter_inc(struct lomas_trace *t, uint64_t h)
{
	uint8_t *c = &t->filter[h >> t->filter_shift];
	if (*c < 255)
		(*c)++;
}

/* A count that reached 255 sticks (a false positive only) until the next rebuild. */
static inline void filter_dec(struct lomas_trace *t, uint64_t h)
{
	uint8_t *c = &t->filter[h >> t->filter_shift];
	if (*c < 255)
		(*c)--;
}

/* Index of the slot holding line, or SIZE_MAX. */
static inline size_t table_find(const struct lomas_trace *t, uint64_t line, uint64_t h)
{
	size_t i = (size_t)(h >> t->table_shift);
	for (;;) {
		uint64_t l = t->table[i].line;
		if (l == line)
			return i;
		if (l == LINE_EMPTY)
			return SIZE_MAX;
		i = (i + 1) & t->table_mask;
	}
}

/* Put line (absent, room guaranteed) in the table with an empty chain. */
static size_t table_insert(struct lomas_trace *t, uint64_t line, uint64_t h)
{
	size_t i = (size_t)(h >> t->table_shift);
	while (t->table[i].line != LINE_EMPTY)
		i = (i + 1) & t->table_mask;
	t->table[i].line = line;
	t->table[i].head = TRACE_NONE;
	t->table_used++;
	filter_inc(t, h);
	return i;
}

/* Remove slot i (backward-shift deletion keeps linear probing tombstone-free). */
static void table_delete(struct lomas_trace *t, size_t i)
{
	size_t mask = t->table_mask;
	size_t j = i;
	filter_dec(t, t->table[i].line * HASH_K);
	for (;;) {
		size_t home;
		j = (j + 1) & mask;
		if (t->table[j].line == LINE_EMPTY)
			break;
		home = (size_t)((t->table[j].line * HASH_K) >> t->table_shift);
		/* The entry at j may move to i only if i lies on its probe path home..j. */
		if (((j - home) & mask) >= ((j - i) & mask)) {
			t->table[i] = t->table[j];
			i = j;
		}
	}
	t->table[i].line = LINE_EMPTY;
	t->table_used--;
}

/* Double the table (and the filter), rehashing every watched line. */
static lomas_status table_grow(struct lomas_trace *t)
{
	trace_slot *old = t->table;
	size_t n = t->table_mask + 1;
	unsigned bits = 64 - t->table_shift + 1;
	lomas_status st;
	t->table = NULL; /* keep the old table alive through table_alloc */
	st = table_alloc(t, bits);
	if (st) {
		t->table = old;
		return st;
	}
	for (size_t i = 0; i < n; i++) {
		if (old[i].line != LINE_EMPTY) {
			size_t k = table_insert(t, old[i].line, old[i].line * HASH_K);
			t->table[k].head = old[i].head;
		}
	}
	free(old);
	return LOMAS_OK;
}

/* ----------------------------------------------------------------- watches */

static lomas_status watches_grow(struct lomas_trace *t)
{
	size_t ncap = t->watches_cap ? t->watches_cap * 2 : 1024;
	trace_watch *w;
	if (ncap >= TRACE_NONE)
		return error_set(LOMAS_ENOMEM, "trace: too many open samples");
	w = realloc(t->watches, ncap * sizeof *w);
	if (!w)
		return error_set(LOMAS_ENOMEM, "trace: out of memory for %zu open samples", ncap);
	for (size_t i = t->watches_cap; i < ncap; i++)
		w[i].next = i + 1 < ncap ? (uint32_t)(i + 1) : t->free_watch;
	t->free_watch = (uint32_t)t->watches_cap;
	t->watches = w;
	t->watches_cap = ncap;
	return LOMAS_OK;
}

/* Unlink watch w from its line's chain and free it (the line must be watched). */
static void watch_remove(struct lomas_trace *t, uint32_t w)
{
	uint64_t line = t->watches[w].line;
	size_t i = table_find(t, line, line * HASH_K);
	uint32_t *link = &t->table[i].head;
	while (*link != w)
		link = &t->watches[*link].next;
	*link = t->watches[w].next;
	if (t->table[i].head == TRACE_NONE)
		table_delete(t, i);
	t->watches[w].next = t->free_watch;
	t->free_watch = w;
	t->open--;
}

/*
 * A reference by thread ti at clock touches a watched line: it ends the open
 * samples of ti on the line (REUSED, with their exact stack distance: the
 * lines ti touched after the line's last touch at position pos of its
 * tracker, which is the sampled reference) and flags those of other threads.
 */
static void watched_touch(struct lomas_trace *t, uint64_t line, uint64_t h, uint32_t ti,
                          uint64_t clock, uint64_t pc, uint32_t pos)
{
	size_t i = table_find(t, line, h);
	uint32_t *link, w;
	if (i == SIZE_MAX)
		return; /* filter false positive */
	link = &t->table[i].head;
	while ((w = *link) != TRACE_NONE) {
		trace_watch *tw = &t->watches[w];
		lomas_sample *s = &t->samples.items[tw->sample];
		if (tw->thread == ti) {
			uint64_t sd = pos ? sd_tracker_after(&t->threads.items[ti].sd, pos) : 0;
			s->end = clock;
			s->end_pc = pc;
			s->state = LOMAS_SAMPLE_REUSED;
			s->reserved = 0;
			if (pos) {
				s->flags |= LOMAS_SAMPLE_EXACT_SD;
				s->reserved = sd < UINT32_MAX ? (uint32_t)sd : UINT32_MAX;
			}
			*link = tw->next;
			tw->next = t->free_watch;
			t->free_watch = w;
			t->open--;
		} else {
			s->flags |= LOMAS_SAMPLE_CROSS_THREAD;
			link = &tw->next;
		}
	}
	if (t->table[i].head == TRACE_NONE)
		table_delete(t, i);
}

/* Close the oldest open sample as CENSORED at its thread's current clock. */
static void censor_oldest(struct lomas_trace *t)
{
	lomas_sample *s;
	while (t->samples.items[t->oldest].state != LOMAS_SAMPLE_DANGLING)
		t->oldest++;
	s = &t->samples.items[t->oldest];
	/* Its thread has made refs references; none since start touched the line. */
	s->end = t->threads.items[s->thread].refs;
	s->state = LOMAS_SAMPLE_CENSORED;
	watch_remove(t, s->reserved - 1);
	s->reserved = 0;
}

/*
 * Auto period: double the period and keep each sample (open or closed)
 * with probability 1/2. Thinning a Bernoulli(1/P) sample this way gives a
 * Bernoulli(1/2P) sample, so the estimate stays unbiased.
 */
static void thin(struct lomas_trace *t)
{
	size_t j = 0;
	if (t->period > UINT64_MAX / 2)
		return;
	t->period *= 2;
	t->gap_log = rng_gap_log((double)t->period);
	for (size_t i = 0; i < t->samples.n; i++) {
		lomas_sample s = t->samples.items[i];
		if (rng_next(&t->rng) >> 63) {
			if (s.state == LOMAS_SAMPLE_DANGLING)
				watch_remove(t, s.reserved - 1);
			continue;
		}
		s.weight = (double)t->period;
		if (s.state == LOMAS_SAMPLE_DANGLING)
			t->watches[s.reserved - 1].sample = j;
		t->samples.items[j++] = s;
	}
	t->samples.n = j;
	t->oldest = 0;
	/* Geometric gaps are memoryless: redraw the pending one at the new mean. */
	t->countdown = rng_gap_with(&t->rng, t->gap_log);
}

/* Start a sample at the reference (thread ti, clock). */
static lomas_status start_sample(struct lomas_trace *t, uint32_t ti, uint64_t clock, uint64_t addr,
                                 uint64_t pc, unsigned kind)
{
	uint64_t line = addr >> t->line_shift;
	uint64_t h = line * HASH_K;
	lomas_status st;
	size_t i;
	uint32_t w;
	lomas_sample *s;

	t->countdown = rng_gap_with(&t->rng, t->gap_log);
	/* Take every resource first so a failure changes nothing. */
	if ((st = vec_reserve(&t->samples, t->samples.n + 1)))
		return st;
	if (t->free_watch == TRACE_NONE && (st = watches_grow(t)))
		return st;
	if ((t->table_used + 1) * 2 > t->table_mask + 1 && (st = table_grow(t)))
		return st;

	if (t->cfg.max_samples_live && t->open >= t->cfg.max_samples_live)
		censor_oldest(t);

	w = t->free_watch;
	t->free_watch = t->watches[w].next;
	i = table_find(t, line, h);
	if (i == SIZE_MAX)
		i = table_insert(t, line, h);
	t->watches[w].line = line;
	t->watches[w].sample = t->samples.n;
	t->watches[w].thread = ti;
	t->watches[w].next = t->table[i].head;
	t->table[i].head = w;
	t->open++;

	s = &t->samples.items[t->samples.n++];
	memset(s, 0, sizeof *s);
	s->start = clock;
	s->end = LOMAS_CLOCK_NONE;
	s->addr = addr;
	s->start_pc = pc;
	s->weight = (double)t->period;
	s->thread = ti;
	s->kind = (uint8_t)kind;
	s->state = LOMAS_SAMPLE_DANGLING;
	s->reserved = w + 1;

	if (t->auto_period && t->samples.n >= TRACE_AUTO_MAX_SAMPLES)
		thin(t);
	return LOMAS_OK;
}

/* ----------------------------------------------------------------- threads */

static lomas_status tmap_grow(struct lomas_trace *t)
{
	size_t n = t->tmap ? (t->tmap_mask + 1) * 2 : TMAP_MIN;
	trace_tslot *m = malloc(n * sizeof *m);
	if (!m)
		return error_set(LOMAS_ENOMEM, "trace: out of memory for %zu threads", n);
	for (size_t i = 0; i < n; i++)
		m[i].idx = TRACE_NONE;
	for (size_t k = 0; k < t->threads.n; k++) {
		size_t i = (size_t)((t->threads.items[k].tid * HASH_K) >> 32) & (n - 1);
		while (m[i].idx != TRACE_NONE)
			i = (i + 1) & (n - 1);
		m[i].tid = t->threads.items[k].tid;
		m[i].idx = (uint32_t)k;
	}
	free(t->tmap);
	t->tmap = m;
	t->tmap_mask = n - 1;
	return LOMAS_OK;
}

/* The profile thread index of tid, adding the thread on its first reference. */
static lomas_status thread_get(struct lomas_trace *t, uint64_t tid, uint32_t *idx)
{
	size_t i = (size_t)((tid * HASH_K) >> 32) & t->tmap_mask;
	lomas_status st;
	while (t->tmap[i].idx != TRACE_NONE) {
		if (t->tmap[i].tid == tid)
			goto found;
		i = (i + 1) & t->tmap_mask;
	}
	if (t->threads.n >= UINT32_MAX - 1)
		return error_set(LOMAS_ERANGE, "trace: too many threads");
	if ((st = vec_reserve(&t->threads, t->threads.n + 1)))
		return st;
	if ((t->threads.n + 1) * 2 > t->tmap_mask + 1) {
		if ((st = tmap_grow(t)))
			return st;
		i = (size_t)((tid * HASH_K) >> 32) & t->tmap_mask;
		while (t->tmap[i].idx != TRACE_NONE)
			i = (i + 1) & t->tmap_mask;
	}
	memset(&t->threads.items[t->threads.n], 0, sizeof t->threads.items[t->threads.n]);
	t->threads.items[t->threads.n].tid = tid;
	t->tmap[i].tid = tid;
	t->tmap[i].idx = (uint32_t)t->threads.n++;
found:
	t->last_tid = tid;
	t->last_idx = t->tmap[i].idx;
	*idx = t->tmap[i].idx;
	return LOMAS_OK;
}

/* ---------------------------------------------------------------- public */

lomas_status lomas_trace_new(const lomas_config *cfg, lomas_trace **out)
{
	error_clear();
	struct lomas_trace *t;
	lomas_status st;
	if (!out)
		return error_set(LOMAS_EINVAL, "lomas_trace_new: out is NULL");
	*out = NULL;
	t = calloc(1, sizeof *t);
	if (!t)
		return error_set(LOMAS_ENOMEM, "lomas_trace_new: out of memory");
	if (cfg)
		t->cfg = *cfg;
	else
		config_defaults(&t->cfg);
	if (!line_size_valid(t->cfg.line_size)) {
		uint32_t ls = t->cfg.line_size;
		free(t);
		return error_set(
		    LOMAS_EINVAL,
		    "lomas_trace_new: line size %u is not a power of two from 8 to 65536", ls);
	}
	t->line_shift = log2_u64(t->cfg.line_size);
	t->auto_period = t->cfg.period_refs == CONFIG_AUTO;
	t->period = t->auto_period ? 1 : t->cfg.period_refs;
	t->gap_log = rng_gap_log((double)t->period);
	t->last_idx = TRACE_NONE;
	t->free_watch = TRACE_NONE;
	rng_seed(&t->rng, t->cfg.seed);
	t->countdown = rng_gap_with(&t->rng, t->gap_log);
	if ((st = table_alloc(t, TABLE_MIN_BITS)) || (st = tmap_grow(t)) ||
	    (st = watches_grow(t))) {
		lomas_trace_free(t);
		return st;
	}
	*out = t;
	return LOMAS_OK;
}

lomas_status trace_ref_fast(struct lomas_trace *t, uint64_t thread, uint64_t addr, uint64_t pc,
                            unsigned kind)
{
	uint32_t ti = t->last_idx, pos;
	uint64_t clock, line, h;
	sd_tracker *sd;
	size_t slot;
	lomas_status st;
	if (UNLIKELY(thread != t->last_tid || ti == TRACE_NONE)) {
		if ((st = thread_get(t, thread, &ti)))
			return st;
	}
	/* The tracker's memory first: a failure changes nothing. */
	sd = &t->threads.items[ti].sd;
	if ((st = sd_tracker_reserve(sd)))
		return st;
	clock = t->threads.items[ti].refs++;
	line = addr >> t->line_shift;
	h = line * HASH_K;
	pos = sd_tracker_find(sd, line, &slot);
	/* End earlier samples on the line first: a sampled reference does both. */
	if (UNLIKELY(t->filter[h >> t->filter_shift]))
		watched_touch(t, line, h, ti, clock, pc, pos);
	sd_tracker_mark(sd, slot, pos);
	if (LIKELY(--t->countdown))
		return LOMAS_OK;
	return start_sample(t, ti, clock, addr, pc, kind);
}

lomas_status lomas_trace_ref(lomas_trace *t, uint64_t thread, uint64_t addr, uint64_t pc,
                             lomas_ref_kind kind)
{
	error_clear();
	if (!t)
		return error_set(LOMAS_EINVAL, "lomas_trace_ref: trace is NULL");
	if (t->finished)
		return error_set(LOMAS_ESTATE, "lomas_trace_ref: the trace is finished");
	if (kind != LOMAS_REF_LOAD && kind != LOMAS_REF_STORE)
		return error_set(LOMAS_EINVAL, "lomas_trace_ref: bad reference kind %d", (int)kind);
	return trace_ref_fast(t, thread, addr, pc, (unsigned)kind);
}

/* Threads, windows and metadata of the finished profile; base[k] = thread k's first window. */
static lomas_status build_profile(struct lomas_trace *t, uint64_t wlen, uint64_t *base,
                                  struct lomas_profile *p)
{
	uint64_t nwin = 0, refs = 0;
	lomas_status st;
	for (size_t k = 0; k < t->threads.n; k++) {
		uint64_t r = t->threads.items[k].refs;
		base[k] = nwin;
		nwin += r / wlen + (r % wlen != 0);
		if (r > UINT64_MAX - refs) /* as profile_validate requires */
			return error_set(
			    LOMAS_ERANGE,
			    "trace: the threads' references add up to more than 2^64-1");
		refs += r;
		if (nwin > UINT32_MAX)
			return error_set(LOMAS_ERANGE,
			                 "trace: more than 2^32 windows (window %" PRIu64
			                 " references is too short)",
			                 wlen);
	}
	if ((st = vec_reserve(&p->threads, t->threads.n)) ||
	    (st = vec_reserve(&p->windows, (size_t)nwin)))
		return st;
	for (size_t k = 0; k < t->threads.n; k++) {
		uint64_t r = t->threads.items[k].refs;
		lomas_thread th = {.tid = t->threads.items[k].tid, .refs = r};
		p->threads.items[p->threads.n++] = th;
		for (uint64_t s = 0; s < r; s += wlen) {
			lomas_window w = {
			    .start = s, .refs = r - s < wlen ? r - s : wlen, .thread = (uint32_t)k};
			p->windows.items[p->windows.n++] = w;
			if (r - s <= wlen)
				break;
		}
	}
	if ((st = lomas_profile_meta_set(p, "clock", "trace")) ||
	    (st = profile_meta_setf(p, "period", "%" PRIu64, t->period)) ||
	    (st = lomas_profile_meta_set(p, "period_mode", t->auto_period ? "auto" : "fixed")) ||
	    (st = profile_meta_setf(p, "seed", "%" PRIu64, t->cfg.seed)) ||
	    (st = profile_meta_setf(p, "line_size", "%u", t->cfg.line_size)) ||
	    (st = profile_meta_setf(p, "window", "%" PRIu64, wlen)) ||
	    (st = profile_meta_setf(p, "refs", "%" PRIu64, refs)))
		return st;
	return LOMAS_OK;
}

/* Release the run-time structures (after finish, or on free). */
static void release_tables(struct lomas_trace *t)
{
	free(t->table);
	free(t->filter);
	free(t->watches);
	free(t->tmap);
	for (size_t k = 0; k < t->threads.n; k++)
		sd_tracker_free(&t->threads.items[k].sd);
	free(t->threads.items);
	free(t->samples.items);
	t->table = NULL;
	t->filter = NULL;
	t->watches = NULL;
	t->tmap = NULL;
	memset(&t->threads, 0, sizeof t->threads);
	memset(&t->samples, 0, sizeof t->samples);
}

lomas_status lomas_trace_finish(lomas_trace *t, lomas_profile **out)
{
	error_clear();
	struct lomas_profile *p = NULL;
	uint64_t wlen, *base;
	lomas_status st;
	if (!t || !out)
		return error_set(LOMAS_EINVAL, "lomas_trace_finish: NULL argument");
	*out = NULL;
	if (t->finished)
		return error_set(LOMAS_ESTATE, "lomas_trace_finish: the trace is already finished");
	if (t->cfg.window_refs != CONFIG_AUTO)
		wlen = t->cfg.window_refs;
	else
		wlen = t->period > UINT64_MAX / 256 ? UINT64_MAX : 256 * t->period;
	base = malloc((t->threads.n ? t->threads.n : 1) * sizeof *base);
	if (!base)
		return error_set(LOMAS_ENOMEM, "lomas_trace_finish: out of memory");
	if ((st = lomas_profile_new(t->cfg.line_size, &p)) ||
	    (st = build_profile(t, wlen, base, p))) {
		lomas_profile_free(p);
		free(base);
		return st;
	}
	/* Nothing can fail from here: hand the samples over. */
	for (size_t i = 0; i < t->samples.n; i++) {
		lomas_sample *s = &t->samples.items[i];
		if (s->state == LOMAS_SAMPLE_DANGLING) { /* still open */
			s->state = LOMAS_SAMPLE_DANGLING;
			s->end = LOMAS_CLOCK_NONE;
			s->end_pc = 0;
			s->reserved = 0;
		}
		s->window = (uint32_t)(base[s->thread] + s->start / wlen);
	}
	free(base);
	free(p->samples.items);
	p->samples.items = t->samples.items;
	p->samples.n = t->samples.n;
	p->samples.cap = t->samples.cap;
	memset(&t->samples, 0, sizeof t->samples);
	release_tables(t);
	t->finished = true;
	error_clear();
	*out = p;
	return LOMAS_OK;
}

void lomas_trace_free(lomas_trace *t)
{
	if (!t)
		return;
	release_tables(t);
	free(t);
}

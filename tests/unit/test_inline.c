/*
 * The sampler core (lib/sampler/table.c, assemble.c), driven with synthetic
 * references: the watch table and its filter, censoring when full, the
 * sample store and its thinning, window accounting and profile assembly.
 * Ground truth is a naive model written here (linear search over a list of
 * open samples in start order).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <cmocka.h>

#include "inline/inline.h"
#include "profile_asserts.h"

typedef struct table_fixture {
	watch_table wt;
	void *mem;
	uint8_t *filter;
	size_t bytes;
} table_fixture;

static void table_new(table_fixture *f, uint32_t capacity, unsigned line_shift)
{
	f->bytes = wt_bytes(capacity);
	f->mem = calloc(1, f->bytes);
	assert_non_null(f->mem);
	f->filter = calloc(1, FILTER_SIZE + FILTER_PAD);
	assert_non_null(f->filter);
	wt_init(&f->wt, f->mem, capacity, line_shift, f->filter);
}

static void table_free(table_fixture *f)
{
	free(f->mem);
	free(f->filter);
}

/* Every filter byte is zero. */
static bool filter_clear(const watch_table *wt)
{
	for (uint32_t i = 0; i < FILTER_SIZE; i++)
		if (wt->filter[i])
			return false;
	return true;
}

static void test_touch_ends_sample_with_distance(void **state)
{
	table_fixture f;
	isample s, c;
	(void)state;
	table_new(&f, 16, 6);
	assert_false(wt_start(&f.wt, 0x1008, 10, 0x400100, LOMAS_REF_LOAD, 0, &c));
	assert_int_equal(f.wt.live, 1);
	/* Same 64-byte line, other word: a reuse. Another line: nothing. */
	assert_false(wt_touch(&f.wt, 0x1040, 11, 0x400200, &s));
	assert_false(wt_touch(&f.wt, 0x0ff8, 12, 0x400200, &s));
	assert_true(wt_touch(&f.wt, 0x1030, 15, 0x400300, &s));
	assert_int_equal(s.start, 10);
	assert_int_equal(s.end, 15);
	assert_int_equal(s.addr, 0x1008);
	assert_int_equal(s.start_pc, 0x400100);
	assert_int_equal(s.end_pc, 0x400300);
	assert_int_equal(s.state, LOMAS_SAMPLE_REUSED);
	assert_int_equal(s.kind, LOMAS_REF_LOAD);
	/* Ended: the line is no longer watched and the filter is clear again. */
	assert_false(wt_touch(&f.wt, 0x1030, 16, 0, &s));
	assert_int_equal(f.wt.live, 0);
	assert_true(filter_clear(&f.wt));
	table_free(&f);
}

static void test_filter_aliases_are_not_reuses(void **state)
{
	table_fixture f;
	isample s, c;
	(void)state;
	table_new(&f, 4, 6);
	/* 4 MiB apart: the same filter byte, different lines. */
	wt_start(&f.wt, 0x10000000, 1, 0, LOMAS_REF_STORE, 0, &c);
	assert_int_not_equal(f.wt.filter[filter_index(0x10400000)], 0);
	assert_false(wt_touch(&f.wt, 0x10400000, 2, 0, &s));
	assert_true(wt_touch(&f.wt, 0x10000010, 3, 0, &s));
	assert_int_equal(s.kind, LOMAS_REF_STORE);
	table_free(&f);
}

static void test_filter_tags_screen_aliases(void **state)
{
	table_fixture f;
	isample s, c;
	const uint64_t a = 0x10000000, alias = a + (1u << 22), same_tag = a + (1u << 29);
	uint32_t i = filter_index(a);
	(void)state;
	table_new(&f, 512, 6);
	assert_int_equal(filter_index(alias), i);
	assert_int_equal(filter_index(same_tag), i);
	assert_int_not_equal(filter_tag(alias), filter_tag(a));
	assert_int_equal(filter_tag(same_tag), filter_tag(a));
	/* One watched line: its byte is its tag; an alias 4 MiB away is screened out
	 * by the tag alone, a line with the same tag is not (the table decides). */
	wt_start(&f.wt, a, 1, 0, LOMAS_REF_LOAD, 0, &c);
	assert_int_equal(f.wt.filter[i], filter_tag(a));
	assert_false(filter_may_watch(f.wt.filter[i], alias));
	assert_true(filter_may_watch(f.wt.filter[i], same_tag));
	assert_false(wt_watched(&f.wt, alias));
	assert_false(wt_watched(&f.wt, same_tag));
	/* A second line with the same tag keeps the tag; one with another tag makes it "any". */
	wt_start(&f.wt, same_tag, 2, 0, LOMAS_REF_LOAD, 0, &c);
	assert_int_equal(f.wt.filter[i], filter_tag(a));
	wt_start(&f.wt, alias, 3, 0, LOMAS_REF_LOAD, 0, &c);
	assert_int_equal(f.wt.filter[i], FILTER_ANY);
	assert_true(filter_may_watch(f.wt.filter[i], a + (2u << 22)));
	assert_false(wt_touch(&f.wt, a + (2u << 22), 4, 0, &s));
	/* Each line still ends its own sample. The byte stays "any" while two
	 * lines map there, takes the tag of the last one left (an alias is
	 * screened out by the tag again), and clears with it. */
	assert_true(wt_touch(&f.wt, a + 8, 5, 0, &s));
	assert_int_equal(s.start, 1);
	assert_int_equal(f.wt.filter[i], FILTER_ANY);
	assert_true(wt_touch(&f.wt, alias + 8, 6, 0, &s));
	assert_int_equal(s.start, 3);
	assert_int_equal(f.wt.filter[i], filter_tag(same_tag));
	assert_false(filter_may_watch(f.wt.filter[i], alias));
	assert_true(wt_touch(&f.wt, same_tag, 7, 0, &s));
	assert_int_equal(s.start, 2);
	assert_true(filter_clear(&f.wt));
	/* 300 lines on one byte: the count saturates, the byte stays "any" (never a
	 * missed reuse, at worst a harmless false positive). */
	for (uint64_t k = 0; k < 300; k++)
		wt_start(&f.wt, a + (k << 22), 10 + k, 0, LOMAS_REF_LOAD, 0, &c);
	for (uint64_t k = 0; k < 300; k++) {
		assert_int_equal(f.wt.filter[i], FILTER_ANY);
		assert_true(wt_touch(&f.wt, a + (k << 22), 400 + k, 0, &s));
		assert_int_equal(s.start, 10 + k);
	}
	assert_int_equal(f.wt.live, 0);
	assert_int_equal(f.wt.filter[i], FILTER_ANY);
	table_free(&f);
}

static void test_large_lines_mark_every_block(void **state)
{
	table_fixture f;
	isample s, c;
	(void)state;
	table_new(&f, 4, 8); /* 256-byte lines: 4 filter blocks each */
	wt_start(&f.wt, 0x2010, 0, 0, LOMAS_REF_LOAD, 0, &c);
	for (uint64_t a = 0x2000; a < 0x2100; a += 64)
		assert_int_not_equal(f.wt.filter[filter_index(a)], 0);
	assert_int_equal(f.wt.filter[filter_index(0x2100)], 0);
	assert_true(wt_touch(&f.wt, 0x20f8, 9, 0, &s));
	assert_true(filter_clear(&f.wt));
	table_free(&f);
}

/* ---- against a naive model: random streams, small capacity ---- */

typedef struct naive_open {
	uint64_t line, start, addr;
} naive_open;

/* wt's open samples through wt_collect into out: exactly n of them, in the store's order. */
static void collect_open(const watch_table *wt, isample *out, size_t n)
{
	sample_store st = {0};
	store_iter sit;
	isample extra;
	assert_true(wt_collect(wt, &st, &inline_malloc_alloc));
	assert_int_equal(st.n, n);
	store_iter_init(&sit, &st);
	for (size_t k = 0; k < n; k++)
		assert_true(store_iter_next(&sit, &out[k]));
	assert_false(store_iter_next(&sit, &extra));
	store_free(&st, &inline_malloc_alloc);
}

static void test_random_streams_match_naive_model(void **state)
{
	(void)state;
	for (int trial = 0; trial < 20; trial++) {
		const uint32_t cap = 1 + (uint32_t)trial % 7;
		table_fixture f;
		naive_open open[64];
		size_t nopen = 0;
		rng r;
		uint64_t reused = 0, censored = 0;
		rng_seed(&r, (uint64_t)trial + 100);
		table_new(&f, cap, 6);
		for (uint64_t clock = 0; clock < 20000; clock++) {
			/* Addresses in 40 lines, some 4 MiB apart (filter aliases). */
			uint64_t line = rng_next(&r) % 40;
			uint64_t addr = 0x100000 + (line % 20) * 64 + (line / 20) * (4u << 20) +
			                rng_next(&r) % 64;
			uint64_t aline = addr >> 6;
			bool sample = rng_next(&r) % 5 == 0;
			isample s, c;
			bool hit = wt_touch(&f.wt, addr, clock, clock, &s);
			size_t k;
			for (k = 0; k < nopen && open[k].line != aline; k++)
				;
			assert_int_equal(hit, k < nopen);
			if (hit) {
				assert_int_equal(s.start, open[k].start);
				assert_int_equal(s.addr, open[k].addr);
				assert_int_equal(s.end, clock);
				memmove(&open[k], &open[k + 1], (nopen - k - 1) * sizeof *open);
				nopen--;
				reused++;
			}
			if (!sample)
				continue;
			bool dropped = wt_start(&f.wt, addr, clock, clock, LOMAS_REF_LOAD, 0, &c);
			assert_int_equal(dropped, nopen == cap);
			if (dropped) {
				/* The oldest open sample is censored at the current clock. */
				assert_int_equal(c.state, LOMAS_SAMPLE_CENSORED);
				assert_int_equal(c.start, open[0].start);
				assert_int_equal(c.end, clock);
				memmove(&open[0], &open[1], (nopen - 1) * sizeof *open);
				nopen--;
				censored++;
			}
			open[nopen++] = (naive_open){aline, clock, addr};
			assert_int_equal(f.wt.live, nopen);
			/* Each byte of the lines' blocks: 0 with no open line on it, the
			 * line's tag with one, the shared tag or "any" with more. */
			for (uint64_t l = 0; l < 40; l++) {
				uint64_t x = 0x100000 + (l % 20) * 64 + (l / 20) * (4u << 20);
				uint8_t tag = 0, byte = f.wt.filter[filter_index(x)];
				unsigned n = 0;
				for (size_t j = 0; j < nopen; j++)
					if (filter_index(open[j].addr) == filter_index(x)) {
						uint8_t t = filter_tag(open[j].addr);
						tag = n && tag != t ? FILTER_ANY : t;
						n++;
					}
				if (n == 2 && tag == FILTER_ANY)
					assert_true(byte == FILTER_ANY);
				else
					assert_int_equal(byte, tag);
			}
		}
		assert_true(reused > 100);
		if (cap < 3)
			assert_true(censored > 0);
		/* What is still open comes out oldest first, dangling. */
		isample got[64];
		collect_open(&f.wt, got, nopen);
		for (size_t k = 0; k < nopen; k++) {
			assert_int_equal(got[k].start, open[k].start);
			assert_int_equal(got[k].state, LOMAS_SAMPLE_DANGLING);
			assert_int_equal(got[k].end, LOMAS_CLOCK_NONE);
		}
		wt_clear(&f.wt);
		assert_int_equal(f.wt.live, 0);
		assert_true(filter_clear(&f.wt));
		/* Emptied, the buckets are zero bytes again: a fresh (zeroed) table is
		 * an empty one, so the runtime never writes the bucket pages it does
		 * not use. */
		for (uint32_t b = 0; b < f.wt.nbuckets; b++)
			assert_int_equal(f.wt.buckets[b], 0);
		table_free(&f);
	}
}

/*
 * Many starts and ends through a table a few times smaller than the lines in
 * use, with a thinning now and then: every end, every censored sample (the
 * oldest open one) and the open samples at the end (oldest first, levels
 * raised by the thinnings) match a naive model in start order. Half the
 * samples start a level above the table's, so a thinning leaves them be.
 * The model thins with its own generator seeded alike, one bit per open
 * sample below the thinning's level, oldest first (the documented rule).
 */
static void test_age_order_under_churn_matches_naive_model(void **state)
{
	enum { CAP = 64, LINES = 300 };
	typedef struct {
		uint64_t line, start;
		uint8_t level;
	} open_t;
	table_fixture f;
	open_t open[CAP];
	size_t nopen = 0;
	rng r, thin_t, thin_m;
	uint64_t censored = 0, reused = 0, thinned = 0, spared = 0;
	uint8_t level = 0;
	(void)state;
	rng_seed(&r, 7);
	table_new(&f, CAP, 6);
	for (uint64_t clock = 0; clock < 200000; clock++) {
		uint64_t line = rng_next(&r) % LINES, addr = 0x200000 + line * 64 + clock % 64;
		isample s, c;
		size_t k;
		bool hit = wt_touch(&f.wt, addr, clock, 0, &s);
		for (k = 0; k < nopen && open[k].line != line; k++)
			;
		assert_int_equal(hit, k < nopen);
		if (hit) {
			assert_int_equal(s.start, open[k].start);
			assert_int_equal(s.level, open[k].level);
			memmove(&open[k], &open[k + 1], (nopen - k - 1) * sizeof *open);
			nopen--;
			reused++;
		}
		if (rng_next(&r) % 3 == 0) {
			uint8_t lv = (uint8_t)(level + clock % 2);
			bool dropped = wt_start(&f.wt, addr, clock, 0, LOMAS_REF_LOAD, lv, &c);
			assert_int_equal(dropped, nopen == CAP);
			if (dropped) {
				assert_int_equal(c.start, open[0].start);
				assert_int_equal(c.level, open[0].level);
				assert_int_equal(c.end, clock);
				memmove(&open[0], &open[1], (nopen - 1) * sizeof *open);
				nopen--;
				censored++;
			}
			open[nopen++] = (open_t){line, clock, lv};
		}
		if (clock % 9973 == 9972) {
			uint64_t bits = 0, seed = clock;
			unsigned nbits = 0;
			size_t kept = 0;
			rng_seed(&thin_t, seed);
			rng_seed(&thin_m, seed);
			level++;
			wt_thin(&f.wt, &thin_t, level);
			for (size_t j = 0; j < nopen; j++) {
				if (open[j].level >= level) {
					open[kept++] = open[j];
					spared++;
					continue;
				}
				if (nbits == 0) {
					bits = rng_next(&thin_m);
					nbits = 64;
				}
				if (bits & 1) {
					open[kept] = open[j];
					open[kept++].level = level;
				}
				bits >>= 1, nbits--;
			}
			thinned += nopen - kept;
			nopen = kept;
		}
		assert_int_equal(f.wt.live, nopen);
	}
	assert_true(censored > 1000 && reused > 1000 && thinned > 100 && spared > 100);
	isample got[CAP];
	collect_open(&f.wt, got, nopen);
	for (size_t k = 0; k < nopen; k++) {
		assert_int_equal(got[k].start, open[k].start);
		assert_int_equal(got[k].level, open[k].level);
	}
	wt_clear(&f.wt);
	assert_true(filter_clear(&f.wt));
	table_free(&f);
}

static void test_zero_capacity_censors_at_once(void **state)
{
	table_fixture f;
	isample c;
	(void)state;
	table_new(&f, 0, 6);
	assert_true(wt_start(&f.wt, 0x40, 7, 0, LOMAS_REF_LOAD, 2, &c));
	assert_int_equal(c.state, LOMAS_SAMPLE_CENSORED);
	assert_int_equal(c.start, 7);
	assert_int_equal(c.end, 7);
	assert_int_equal(c.level, 2);
	table_free(&f);
}

/* ---- store and thinning ---- */

/* Bytes of samples in all of a store's streams. */
static size_t store_len(const sample_store *st)
{
	size_t len = 0;
	for (unsigned k = 0; k < STORE_FATES; k++)
		len += st->s[k].len;
	return len;
}

static void test_store_thin_keeps_half(void **state)
{
	sample_store st = {0};
	store_iter it;
	isample s;
	rng r;
	const uint64_t n = 5 * 1024 + 17, above = 200;
	uint8_t *seen = calloc(n + above, 1);
	(void)state;
	assert_non_null(seen);
	rng_seed(&r, 3);
	st.fates = &r;
	for (uint64_t i = 0; i < n + above; i++) {
		/* The last ones a level above the two thinnings: never touched. */
		isample x = {
		    .start = i, .end = i + 3, .state = LOMAS_SAMPLE_REUSED, .level = i < n ? 0 : 2};
		assert_true(store_push(&st, &inline_malloc_alloc, &x));
	}
	assert_int_equal(st.n, n + above);
	/* Two thinnings: Binomial(n, 1/2), then Binomial(n, 1/4), each within 5
	 * standard deviations; all of the samples above. */
	for (unsigned level = 1; level <= 2; level++) {
		uint64_t expect = n >> level, sd = level == 1 ? 36 : 32, count = 0, kept_above = 0;
		store_thin(&st, &inline_malloc_alloc);
		assert_true(st.n > above + expect - 5 * sd && st.n < above + expect + 5 * sd);
		memset(seen, 0, n + above);
		store_iter_init(&it, &st);
		while (store_iter_next(&it, &s)) {
			assert_int_equal(s.level, s.start < n ? level : 2);
			assert_int_equal(s.end, s.start + 3);
			assert_true(s.start < n + above);
			assert_false(seen[s.start]); /* no duplicates */
			seen[s.start] = 1;
			kept_above += s.start >= n;
			count++;
		}
		assert_int_equal(count, st.n);
		assert_int_equal(kept_above, above);
	}
	store_free(&st, &inline_malloc_alloc);
	assert_int_equal(st.n, 0);
	assert_int_equal(store_len(&st), 0);
	free(seen);
}

/* The encoded store gives back exactly what was pushed, whatever the values
 * (and in the order pushed: with no fates, one stream). */
static void test_store_packs_losslessly(void **state)
{
	sample_store st = {0};
	store_iter it;
	isample *want, got;
	rng r;
	const size_t n = 3 * 1024 + 500;
	(void)state;
	want = calloc(n, sizeof *want);
	assert_non_null(want);
	rng_seed(&r, 77);
	for (size_t i = 0; i < n; i++) {
		isample *w = &want[i];
		uint64_t x = rng_next(&r);
		/* Small deltas mostly, and every so often the extremes. */
		w->start = i % 97 == 0 ? x : (i ? want[i - 1].start : 0) + (x & 0xffff);
		w->end = i % 13 == 0   ? LOMAS_CLOCK_NONE
		         : i % 31 == 0 ? w->start
		                       : w->start + (x >> 40);
		w->addr = i % 7 == 0 ? rng_next(&r) : 0x7f0000000000ull + (x & 0xfffff) * 8;
		w->start_pc = i % 11 == 0 ? UINT64_MAX - (x & 0xff) : 0x401000 + (x & 0xfff);
		w->end_pc = i % 5 == 0 ? 0 : w->start_pc + (x >> 60);
		w->kind = (uint8_t)(x & 1);
		w->state = (uint8_t)(i % 3);
		w->level = (uint8_t)(i % 41);
		assert_true(store_push(&st, &inline_malloc_alloc, w));
	}
	assert_int_equal(st.n, n);
	size_t k = 0, packed_bytes = store_len(&st);
	store_iter_init(&it, &st);
	while (store_iter_next(&it, &got)) {
		assert_true(k < n);
		assert_true(got.start == want[k].start);
		assert_true(got.end == want[k].end);
		assert_true(got.addr == want[k].addr);
		assert_true(got.start_pc == want[k].start_pc);
		assert_true(got.end_pc == want[k].end_pc);
		assert_int_equal(got.kind, want[k].kind);
		assert_int_equal(got.state, want[k].state);
		assert_int_equal(got.level, want[k].level);
		k++;
	}
	assert_int_equal(k, n);
	/* Smaller than the plain records, even with these extremes mixed in. */
	assert_true(packed_bytes < n * sizeof(isample) / 2);
	store_free(&st, &inline_malloc_alloc);
	free(want);
}

/* A field value that makes the store's deltas and varints hit every length. */
static uint64_t edge_value(rng *r, uint64_t prev)
{
	uint64_t x = rng_next(r);
	unsigned k = (unsigned)(x % 64);
	switch ((x >> 8) % 6) {
	case 0: return prev + ((1ull << k) - 1); /* a delta of k one bits */
	case 1: return prev - (1ull << k);       /* a negative delta */
	case 2: return prev + (x >> 20 & 0xff);  /* small */
	case 3: return rng_next(r);              /* anything */
	case 4: return (x & 1) ? UINT64_MAX - (x >> 50) : (x >> 50);
	default: return prev;
	}
}

static void edge_sample(rng *r, const isample *prev, isample *w)
{
	memset(w, 0, sizeof *w);
	w->start = edge_value(r, prev->start);
	uint64_t e = rng_next(r);
	w->end = e % 9 == 0 ? LOMAS_CLOCK_NONE : edge_value(r, w->start);
	/* The one end the store cannot hold (nor could it before): 2^63 after start. */
	if (w->end - w->start == 1ull << 63)
		w->end++;
	w->addr = edge_value(r, prev->addr);
	w->start_pc = edge_value(r, prev->start_pc);
	w->end_pc = e % 7 == 0 ? 0 : edge_value(r, w->start_pc);
	w->kind = (uint8_t)(e >> 8 & 1);
	w->state = (uint8_t)(e >> 9 & 3);
	/* Levels from 0 to 40 (the runtime's highest), mostly near the store's. */
	w->level = (uint8_t)(e % 5 == 0 ? (e >> 12) % 41 : (e >> 12) % 8);
}

static void assert_same_sample(const isample *got, const isample *want)
{
	assert_true(got->start == want->start);
	assert_true(got->end == want->end);
	assert_true(got->addr == want->addr);
	assert_true(got->start_pc == want->start_pc);
	assert_true(got->end_pc == want->end_pc);
	assert_int_equal(got->kind, want->kind);
	assert_int_equal(got->state, want->state);
	assert_int_equal(got->level, want->level);
}

/* The test's allocator: malloc, counting what is out; released memory is
 * overwritten with garbage first. */
static size_t held;
static void *poison_alloc(size_t bytes)
{
	void *mem = inline_malloc_alloc.alloc(bytes);
	if (mem)
		held += bytes;
	return mem;
}
static void poison_release(void *mem, size_t bytes)
{
	memset(mem, 0x5a, bytes);
	held -= bytes;
	inline_malloc_alloc.release(mem, bytes);
}
static void *poison_grow(void *mem, size_t old, size_t bytes)
{
	void *m = inline_malloc_alloc.grow(mem, old, bytes);
	if (m)
		held += bytes - old;
	return m;
}
static const inline_alloc poison = {poison_alloc, poison_release, poison_grow};

/* A model sample: the sample, the level its fate ends at, its push number. */
typedef struct fated {
	isample s;
	uint32_t death;
	size_t seq;
} fated;

static int fated_order(const void *a, const void *b)
{
	const fated *x = a, *y = b;
	if (x->death != y->death)
		return x->death < y->death ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/*
 * Thinning against a plain array whose samples get their fates from the same
 * random bits (one a bit, low bit first, a fresh 64-bit draw per 64: the run
 * of ones before the first zero, the level it ends at at most STORE_FATES - 1
 * above the store's at the push): rounds of pushes (extreme deltas and
 * levels above the store's included, past a stream's first allocation) and
 * thinnings give back exactly the model's samples, the levels at or below
 * the store's raised with it, in the store's order (by the level their fate
 * ends at, then as pushed). A thinning gives the dropped samples' memory back.
 */
/*
 * The runtime's kind of memory for the store (mmap, munmap, mremap), with
 * the bytes mapped counted in held: a slice of a reserve that is given back
 * twice, or never, leaves held off at the end; one used after it was given
 * back faults.
 */
static void *map_alloc(size_t bytes)
{
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	held += bytes;
	return p;
}
static void map_release(void *mem, size_t bytes)
{
	held -= bytes;
	assert_int_equal(munmap(mem, bytes), 0);
}
static void *map_grow(void *mem, size_t old, size_t bytes)
{
	void *p = mremap(mem, old, bytes, MREMAP_MAYMOVE);
	if (p == MAP_FAILED)
		return NULL;
	held += bytes - old;
	return p;
}
static const inline_alloc mapped = {map_alloc, map_release, map_grow};

static void thin_matches_model(bool reserve);

static void test_store_thin_matches_model(void **state)
{
	(void)state;
	thin_matches_model(false);
}

/* The same with the streams' first allocations from one reserve (the runtime's way). */
static void test_store_thin_matches_model_reserved(void **state)
{
	(void)state;
	thin_matches_model(true);
}

/*
 * A reserve's slice grows past its first allocation (mremap of part of the
 * reserve) and the store keeps every sample: one stream (no fates) of 300k
 * samples, about 4 MB. Every byte mapped is given back by store_free.
 */
static void test_store_reserve_slice_grows(void **state)
{
	sample_store st = {0};
	store_iter it;
	isample last = {0}, got;
	rng gen;
	const size_t n = 300000;
	isample *model = calloc(n, sizeof *model);
	(void)state;
	assert_non_null(model);
	held = 0;
	rng_seed(&gen, 4242);
	store_reserve(&st, map_alloc(STORE_RESERVE_BYTES));
	assert_int_equal(held, STORE_RESERVE_BYTES);
	for (size_t i = 0; i < n; i++) {
		edge_sample(&gen, &last, &model[i]);
		last = model[i];
		model[i].level = 0;
		assert_true(store_push(&st, &mapped, &model[i]));
	}
	assert_true(store_len(&st) > 4 * STORE_FIRST_BYTES);
	store_iter_init(&it, &st);
	for (size_t i = 0; i < n; i++) {
		assert_true(store_iter_next(&it, &got));
		assert_same_sample(&got, &model[i]);
	}
	assert_false(store_iter_next(&it, &got));
	store_free(&st, &mapped);
	assert_int_equal(held, 0);
	free(model);
}

static void thin_matches_model(bool reserve)
{
	sample_store st = {0};
	const inline_alloc *alloc = reserve ? &mapped : &poison;
	store_iter it;
	isample got, last = {0};
	rng gen, fates, model_fates;
	size_t n = 0, seq = 0, cap = 40000;
	uint32_t level = 0;
	uint64_t bits = 0;
	unsigned nbits = 0;
	fated *model = calloc(cap, sizeof *model);
	assert_non_null(model);
	held = 0;
	if (reserve)
		store_reserve(&st, map_alloc(STORE_RESERVE_BYTES));
	rng_seed(&gen, 12345);
	rng_seed(&fates, 99);
	rng_seed(&model_fates, 99);
	st.fates = &fates;
	for (int round = 0; round < 6; round++) {
		size_t add = round == 0 ? 15000 : 4000 + 1000 * (size_t)round;
		for (size_t i = 0; i < add; i++) {
			fated *m = &model[n];
			unsigned f = 0, ahead;
			edge_sample(&gen, &last, &m->s);
			/* Runs of equal samples too: the shortest encodings. */
			if (i % 50 < 5 && n)
				m->s = model[n - 1].s;
			last = m->s;
			ahead = m->s.level > level ? m->s.level - level : 0;
			if (ahead > STORE_FATES - 1)
				ahead = STORE_FATES - 1;
			for (;;) {
				if (!nbits) {
					bits = rng_next(&model_fates);
					nbits = 64;
				}
				bool survives = bits & 1;
				bits >>= 1, nbits--;
				if (!survives || ahead + f == STORE_FATES - 1)
					break;
				f++;
			}
			m->death = level + ahead + f;
			if (m->s.level < level)
				m->s.level = (uint8_t)level;
			m->seq = seq++;
			assert_true(store_push(&st, alloc, &m->s));
			n++;
		}
		size_t before = store_len(&st), held_before = held, k = 0;
		store_thin(&st, alloc);
		for (size_t i = 0; i < n; i++) {
			if (model[i].death == level)
				continue;
			model[k] = model[i];
			if (model[k].s.level <= level)
				model[k].s.level = (uint8_t)(level + 1);
			k++;
		}
		level++;
		assert_true(n - k > 300); /* about half of those at or below the level */
		n = k;
		assert_int_equal(st.n, n);
		assert_true(store_len(&st) < before);
		assert_true(held < held_before);
		qsort(model, n, sizeof *model, fated_order);
		store_iter_init(&it, &st);
		for (size_t i = 0; i < n; i++) {
			assert_true(store_iter_next(&it, &got));
			assert_same_sample(&got, &model[i].s);
		}
		assert_false(store_iter_next(&it, &got));
	}
	store_free(&st, alloc);
	assert_int_equal(held, 0);
	free(model);
}

/* Thinning everything away, then pushing again, and an empty store's thinning. */
static void test_store_thin_to_empty(void **state)
{
	sample_store st = {0};
	store_iter it;
	isample s = {.start = 5, .end = 9, .addr = 0x1000, .start_pc = 7, .end_pc = 8}, got;
	rng r;
	(void)state;
	rng_seed(&r, 1);
	st.fates = &r;
	store_thin(&st, &inline_malloc_alloc);
	assert_int_equal(st.n, 0);
	for (int tries = 0; st.n == 0 && tries < 64; tries++) {
		assert_true(store_push(&st, &inline_malloc_alloc, &s));
		while (st.n)
			store_thin(&st, &inline_malloc_alloc);
		assert_int_equal(store_len(&st), 0);
		s.start += 3;
		s.end += 3;
		s.level = (uint8_t)st.level;
		assert_true(store_push(&st, &inline_malloc_alloc, &s));
	}
	store_iter_init(&it, &st);
	assert_true(store_iter_next(&it, &got));
	assert_same_sample(&got, &s);
	assert_false(store_iter_next(&it, &got));
	store_free(&st, &inline_malloc_alloc);
}

static void test_table_thin_drops_half(void **state)
{
	table_fixture f;
	isample c, s;
	rng r;
	uint32_t before, after;
	(void)state;
	table_new(&f, 4096, 6);
	/* 4000 samples at level 0, then 96 at level 1, which a thinning to 1 leaves be. */
	for (uint64_t i = 0; i < 4096; i++)
		wt_start(&f.wt, i * 64, i, 0, LOMAS_REF_LOAD, i < 4000 ? 0 : 1, &c);
	before = f.wt.live - 96;
	rng_seed(&r, 11);
	wt_thin(&f.wt, &r, 1);
	after = f.wt.live - 96;
	assert_true(after > before / 2 - 160 && after < before / 2 + 160);
	/* Survivors still end on reuse (with their level raised); the dropped do not. */
	uint32_t ended = 0;
	for (uint64_t i = 0; i < 4096; i++)
		if (wt_touch(&f.wt, i * 64 + 8, 5000 + i, 0, &s)) {
			assert_int_equal(s.level, 1);
			assert_int_equal(s.start, i);
			ended++;
		}
	assert_int_equal(ended, after + 96);
	assert_int_equal(f.wt.live, 0);
	assert_true(filter_clear(&f.wt));
	table_free(&f);
}

/* ---- windows and profile assembly ---- */

static void test_window_accounting(void **state)
{
	(void)state;
	assert_int_equal(windows_count(1000, 256), 4);
	assert_int_equal(windows_count(1024, 256), 4);
	assert_int_equal(windows_count(1025, 256), 5);
	assert_int_equal(windows_count(0, 256), 1);
	uint64_t total = 0;
	for (uint64_t k = 0; k < windows_count(1000, 256); k++) {
		lomas_window w = window_at(1000, 256, k, 3);
		assert_int_equal(w.start, k * 256);
		assert_int_equal(w.thread, 3);
		total += w.refs;
	}
	assert_int_equal(total, 1000);
	assert_int_equal(window_at(1000, 256, 3, 0).refs, 1000 - 768);
}

static void test_profile_assembly(void **state)
{
	lomas_profile *p;
	table_fixture f;
	sample_store done = {0};
	isample s = {
	    .start = 10, .end = 20, .addr = 0x1000, .state = LOMAS_SAMPLE_REUSED, .level = 0};
	isample t = {
	    .start = 700, .end = 900, .addr = 0x2000, .state = LOMAS_SAMPLE_CENSORED, .level = 3};
	isample c;
	inline_thread_data td;
	(void)state;
	assert_int_equal(lomas_profile_new(64, &p), LOMAS_OK);
	store_push(&done, &inline_malloc_alloc, &s);
	store_push(&done, &inline_malloc_alloc, &t);
	table_new(&f, 8, 6);
	wt_start(&f.wt, 0x3000, 950, 0x400, LOMAS_REF_STORE, 1, &c);
	/* Thread A: 1000 references in windows of 300; thread B: 10 references. */
	td = (inline_thread_data){
	    .tid = 42, .refs = 1000, .base_period = 5.0, .done = &done, .open = &f.wt};
	assert_int_equal(inline_profile_add_thread(p, &td, 300), LOMAS_OK);
	td = (inline_thread_data){.tid = 43, .refs = 10, .base_period = 5.0};
	assert_int_equal(inline_profile_add_thread(p, &td, 300), LOMAS_OK);
	assert_int_equal(profile_validate(p), LOMAS_OK);
	assert_int_equal(p->threads.n, 2);
	assert_int_equal(p->threads.items[0].tid, 42);
	assert_int_equal(p->threads.items[0].refs, 1000);
	assert_int_equal(p->windows.n, 4 + 1);
	assert_int_equal(p->windows.items[3].refs, 100);
	assert_int_equal(p->windows.items[4].thread, 1);
	assert_int_equal(p->samples.n, 3);
	/* Windows by start clock; weights = base period x 2^level. */
	assert_int_equal(p->samples.items[0].window, 0);
	assert_true(p->samples.items[0].weight == 5.0);
	assert_int_equal(p->samples.items[1].window, 2);
	assert_true(p->samples.items[1].weight == 40.0);
	assert_int_equal(p->samples.items[1].state, LOMAS_SAMPLE_CENSORED);
	assert_int_equal(p->samples.items[2].window, 3);
	assert_int_equal(p->samples.items[2].state, LOMAS_SAMPLE_DANGLING);
	assert_int_equal(p->samples.items[2].end, LOMAS_CLOCK_NONE);
	assert_int_equal(p->samples.items[2].kind, LOMAS_REF_STORE);
	assert_true(p->samples.items[2].weight == 10.0);
	lomas_profile_free(p);
	store_free(&done, &inline_malloc_alloc);
	table_free(&f);
}

/* A sample source over stores, as the runtime's exit path gives them. */
typedef struct test_source {
	const sample_store *st[2];
	inline_sample_place pl[2];
	size_t at;
	unsigned k;
	uint64_t fail_at; /* fail at this block (UINT64_MAX: never) */
	uint64_t given;
} test_source;

static lomas_status test_source_next(void *ctx, profile_sample_block *out)
{
	test_source *ts = ctx;
	if (ts->given++ == ts->fail_at)
		return LOMAS_EIO;
	while (ts->at < 2) {
		if (store_next_block(ts->st[ts->at], &ts->k, ts->pl[ts->at].thread,
		                     ts->pl[ts->at].base_period, out))
			return LOMAS_OK;
		ts->at++;
		ts->k = 0;
	}
	return LOMAS_EINVAL;
}

static void test_source_rewind(test_source *ts, uint64_t fail_at)
{
	ts->at = 0, ts->k = 0, ts->given = 0, ts->fail_at = fail_at;
}

static int sample_order(const void *pa, const void *pb)
{
	const lomas_sample *a = pa, *b = pb;
	if (a->thread != b->thread)
		return a->thread < b->thread ? -1 : 1;
	if (a->start != b->start)
		return a->start < b->start ? -1 : 1;
	return (a->addr > b->addr) - (a->addr < b->addr);
}

/*
 * The samples (in any order: the streams of a thinning store interleave the
 * open samples with the finished ones), threads and windows of a and b are
 * the same. Sorts both profiles' samples.
 */
static void assert_same_samples(lomas_profile *a, lomas_profile *b)
{
	qsort(a->samples.items, a->samples.n, sizeof *a->samples.items, sample_order);
	qsort(b->samples.items, b->samples.n, sizeof *b->samples.items, sample_order);
	assert_same_threads_windows_samples(a, b);
}

static void fill_store(sample_store *st, rng *r, size_t n, uint64_t refs)
{
	uint64_t clock = 0;
	for (size_t i = 0; i < n; i++) {
		uint64_t x = rng_next(r);
		isample s = {0};
		clock += 1 + x % (refs / n);
		s.start = clock;
		s.end = clock + 1 + (x >> 20) % 5000;
		s.addr = 0x7f0000000000ull + ((x >> 8) & 0xffffff) * 8;
		s.start_pc = 0x401000 + (x >> 40) % 4096;
		s.end_pc = i % 4 ? s.start_pc + (x >> 52) % 64 : 0;
		s.kind = (uint8_t)(x >> 33 & 1);
		s.state = i % 9 ? LOMAS_SAMPLE_REUSED : LOMAS_SAMPLE_CENSORED;
		s.level = (uint8_t)((x >> 36) % 6);
		assert_true(store_push(st, &inline_malloc_alloc, &s));
	}
}

/*
 * The exit path: the thread heads in the profile and the stores' streams
 * (open samples appended, dangling) copied as PSAMPLES blocks give a file
 * that loads as the profile that holds every sample in memory (the windows
 * come from the samples' starts, the weights from the blocks' base and
 * floor), in a buffer and in a file; a failing source fails the save, and
 * one that gives other totals than it declared too.
 */
static void test_streamed_samples_equal_in_memory_file(void **state)
{
	lomas_profile *mem, *head, *got_p;
	table_fixture f;
	sample_store a = {0}, b = {0};
	inline_thread_data ta, tb;
	test_source src = {.fail_at = UINT64_MAX};
	profile_sample_source ps = {.next = test_source_next, .ctx = &src};
	void *got;
	size_t got_len, want_len;
	rng r, fates;
	isample c;
	(void)state;
	rng_seed(&r, 5);
	rng_seed(&fates, 6);
	/* Thread a's store thins (its samples spread over many streams, the
	 * floor above some pushed levels); b's has one stream. */
	a.fates = &fates;
	fill_store(&a, &r, 3000, 4000000);
	store_thin(&a, &inline_malloc_alloc);
	store_thin(&a, &inline_malloc_alloc);
	fill_store(&b, &r, 700, 90000);
	table_new(&f, 64, 6);
	/* Open samples up to the thread's last reference (the last window). */
	for (uint64_t i = 0; i < 100; i++)
		wt_start(&f.wt, 0x10000 + i * 64 * 3, 4000100 + i, 0x500 + i, LOMAS_REF_LOAD, 2,
		         &c);
	ta = (inline_thread_data){
	    .tid = 7, .refs = 4000200, .base_period = 128.0, .done = &a, .open = &f.wt};
	tb = (inline_thread_data){.tid = 8, .refs = 90000, .base_period = 96.0, .done = &b};
	assert_int_equal(lomas_profile_new(64, &mem), LOMAS_OK);
	assert_int_equal(inline_profile_add_thread(mem, &ta, 32768), LOMAS_OK);
	assert_int_equal(inline_profile_add_thread(mem, &tb, 32768), LOMAS_OK);
	profile_meta_setf(mem, "clock", "inline");
	assert_int_equal(profile_validate(mem), LOMAS_OK);
	assert_int_equal(mem->samples.n, a.n + 64 + 700);

	assert_int_equal(lomas_profile_new(64, &head), LOMAS_OK);
	assert_int_equal(inline_profile_add_thread_head(head, &ta, 32768, &src.pl[0]), LOMAS_OK);
	assert_int_equal(inline_profile_add_thread_head(head, &tb, 32768, &src.pl[1]), LOMAS_OK);
	profile_meta_setf(head, "clock", "inline");
	assert_int_equal(head->samples.n, 0);
	assert_true(wt_collect(&f.wt, &a, &inline_malloc_alloc));
	src.st[0] = &a;
	src.st[1] = &b;
	store_add_totals(&a, &ps);
	store_add_totals(&b, &ps);
	assert_int_equal(ps.n, mem->samples.n);
	assert_true(ps.nblocks > 2);
	assert_int_equal(profile_save_buffer_src(head, &ps, &got, &got_len), LOMAS_OK);
	/* Packed: about 12-20 bytes a sample, not 64. */
	assert_true(got_len < 30 * ps.n);
	assert_int_equal(profile_load_buffer(got, got_len, "streamed", &got_p), LOMAS_OK);
	assert_same_samples(mem, got_p);
	lomas_profile_free(got_p);
	want_len = got_len;

	/* Through a file, 64 KiB at a time: the same bytes. */
	FILE *tf = tmpfile();
	assert_non_null(tf);
	test_source_rewind(&src, UINT64_MAX);
	assert_int_equal(profile_save_fd_src(head, &ps, fileno(tf)), LOMAS_OK);
	void *file = malloc(want_len + 1);
	assert_non_null(file);
	assert_int_equal(fseek(tf, 0, SEEK_END), 0);
	assert_int_equal(ftell(tf), (long)want_len);
	rewind(tf);
	assert_int_equal(fread(file, 1, want_len + 1, tf), want_len);
	assert_memory_equal(file, got, want_len);
	free(file);
	fclose(tf);
	free(got);

	/* A failing source, and one that gives fewer or more than it declared. */
	test_source_rewind(&src, 3);
	assert_int_equal(profile_save_buffer_src(head, &ps, &got, &got_len), LOMAS_EIO);
	assert_null(got);
	test_source_rewind(&src, UINT64_MAX);
	ps.bytes++;
	assert_int_equal(profile_save_buffer_src(head, &ps, &got, &got_len), LOMAS_EINVAL);
	assert_null(got);
	ps.bytes -= 2;
	test_source_rewind(&src, UINT64_MAX);
	assert_int_equal(profile_save_buffer_src(head, &ps, &got, &got_len), LOMAS_EINVAL);
	assert_null(got);

	lomas_profile_free(mem);
	lomas_profile_free(head);
	store_free(&a, &inline_malloc_alloc);
	store_free(&b, &inline_malloc_alloc);
	table_free(&f);
}

/*
 * A position from wt_lookup goes stale when the table changes before it is
 * used (a signal handler's visit between the runtime's look and its visit):
 * wt_pos_valid says so when the link to the slot or the slot's line changed,
 * and wt_end at a valid one ends the same sample wt_touch would. Lines that
 * share a bucket (found by lookup: capacity 4, so 4 buckets) make chains.
 */
/* Start a sample on the next line after *line that lands in bucket b
 * (others are started, looked at and ended again); its address. */
static uint64_t start_in_bucket(table_fixture *f, uint64_t *line, uint32_t b, uint64_t clock)
{
	isample s, c;
	wt_pos pos;
	for (;;) {
		uint64_t addr = ++*line << 6;
		assert_false(wt_start(&f->wt, addr, clock, 0, LOMAS_REF_LOAD, 0, &c));
		assert_true(wt_lookup(&f->wt, addr, &pos));
		if (pos.bucket == b)
			return addr;
		assert_true(wt_touch(&f->wt, addr, clock + 1, 0, &s));
	}
}

/*
 * A position from wt_lookup goes stale when the table changes before it is
 * used (a signal handler's visit between the runtime's look and its visit):
 * wt_pos_valid says so when the link to the slot or the slot's line changed,
 * and wt_end at a valid one ends the same sample wt_touch would. Lines that
 * share a bucket (capacity 4: 4 buckets) make a chain.
 */
static void test_stale_position_is_detected(void **state)
{
	table_fixture f;
	uint64_t a, b, c, d, line = 0;
	wt_pos p, q;
	isample s, cens;
	(void)state;
	table_new(&f, 4, 6);
	assert_false(wt_start(&f.wt, 1 << 6, 1, 0, LOMAS_REF_LOAD, 0, &cens));
	assert_true(wt_lookup(&f.wt, 1 << 6, &p));
	a = 1 << 6;
	line = 1;
	b = start_in_bucket(&f, &line, p.bucket, 10);
	c = start_in_bucket(&f, &line, p.bucket, 20);
	assert_int_equal(f.wt.live, 3);
	/* New lines head the chain: a is last, behind b. */
	assert_true(wt_lookup(&f.wt, a, &p));
	assert_int_not_equal(p.prev, WT_NONE);
	assert_true(wt_pos_valid(&f.wt, a, &p));
	assert_false(wt_pos_valid(&f.wt, b, &p)); /* another line */
	/* Its predecessor ends: the link to it moved, the position is stale. */
	assert_true(wt_touch(&f.wt, b, 100, 0, &s));
	assert_false(wt_pos_valid(&f.wt, a, &p));
	assert_true(wt_lookup(&f.wt, a, &q));
	assert_true(wt_pos_valid(&f.wt, a, &q));
	/* A valid position ends the sample as wt_touch does. */
	wt_end(&f.wt, &q, 200, 0x4242, &s);
	assert_int_equal(s.start, 1);
	assert_int_equal(s.end, 200);
	assert_int_equal(s.end_pc, 0x4242);
	assert_int_equal(s.state, LOMAS_SAMPLE_REUSED);
	assert_false(wt_watched(&f.wt, a));
	assert_false(wt_pos_valid(&f.wt, a, &q)); /* its slot is free */
	/* Its slot taken again by another line of the same bucket: still stale. */
	d = start_in_bucket(&f, &line, q.bucket, 300);
	assert_true(wt_lookup(&f.wt, d, &p));
	assert_int_equal(p.slot, q.slot);
	assert_false(wt_pos_valid(&f.wt, a, &q));
	/* The others are found as they were. */
	assert_true(wt_touch(&f.wt, c, 400, 0, &s));
	assert_int_equal(s.start, 20);
	assert_true(wt_touch(&f.wt, d, 500, 0, &s));
	assert_int_equal(s.start, 300);
	assert_int_equal(f.wt.live, 0);
	table_free(&f);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_touch_ends_sample_with_distance),
	    cmocka_unit_test(test_filter_aliases_are_not_reuses),
	    cmocka_unit_test(test_filter_tags_screen_aliases),
	    cmocka_unit_test(test_large_lines_mark_every_block),
	    cmocka_unit_test(test_random_streams_match_naive_model),
	    cmocka_unit_test(test_age_order_under_churn_matches_naive_model),
	    cmocka_unit_test(test_zero_capacity_censors_at_once),
	    cmocka_unit_test(test_store_thin_keeps_half),
	    cmocka_unit_test(test_store_packs_losslessly),
	    cmocka_unit_test(test_store_thin_matches_model),
	    cmocka_unit_test(test_store_thin_matches_model_reserved),
	    cmocka_unit_test(test_store_reserve_slice_grows),
	    cmocka_unit_test(test_store_thin_to_empty),
	    cmocka_unit_test(test_table_thin_drops_half),
	    cmocka_unit_test(test_window_accounting),
	    cmocka_unit_test(test_profile_assembly),
	    cmocka_unit_test(test_streamed_samples_equal_in_memory_file),
	    cmocka_unit_test(test_stale_position_is_detected),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * The exited threads' arena (lib/sampler/exited.c): a thread's samples
 * copied into a compact record read back exactly as its store holds them,
 * and thinning a record (period auto, when the process level rises) keeps
 * exactly what thinning the store would have kept. Ground truth is the
 * sample store itself, built twice from the same seeds: one copy goes into
 * the arena, the other is thinned with store_thin (which test_inline checks
 * against a naive model).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sampler/sampler.h"

#define THREADS 12

typedef struct twin {
	sample_store a, b; /* a: the ground truth; b: goes into the arena */
	rng fa, fb;
	exited_info info;
} twin;

/* Push n samples (unique starts from first, levels from base) into both stores alike. */
static void twin_fill(twin *t, uint64_t seed, size_t n, uint64_t first, bool adaptive, uint8_t base)
{
	rng gen;
	rng_seed(&gen, seed);
	rng_seed(&t->fa, seed * 7 + 1);
	rng_seed(&t->fb, seed * 7 + 1);
	t->a.fates = adaptive ? &t->fa : NULL;
	t->b.fates = adaptive ? &t->fb : NULL;
	for (size_t i = 0; i < n; i++) {
		uint64_t x = rng_next(&gen);
		isample s = {
		    .start = first + i,
		    .end = first + i + 1 + (x & 0xfff),
		    .addr = 0x7f0000000000ull + (x >> 20) * 64,
		    .start_pc = 0x401000 + (x & 0xff),
		    .end_pc = 0x401000 + ((x >> 8) & 0xff),
		    .kind = (uint8_t)(x & 1),
		    .state = (uint8_t)(i % 7 == 0 ? LOMAS_SAMPLE_DANGLING : LOMAS_SAMPLE_REUSED),
		    .level = (uint8_t)(adaptive ? base + (x >> 60) % 3 : 0)};
		if (s.state == LOMAS_SAMPLE_DANGLING)
			s.end = LOMAS_CLOCK_NONE;
		assert_true(store_push(&t->a, &inline_malloc_alloc, &s));
		assert_true(store_push(&t->b, &inline_malloc_alloc, &s));
	}
}

/* Do two stores hold the same samples, in the same order? */
static void assert_same_store(const sample_store *got, const sample_store *want)
{
	store_iter gi, wi;
	isample g, w;
	assert_int_equal(got->n, want->n);
	store_iter_init(&gi, got);
	store_iter_init(&wi, want);
	while (store_iter_next(&wi, &w)) {
		assert_true(store_iter_next(&gi, &g));
		assert_int_equal(g.start, w.start);
		assert_int_equal(g.end, w.end);
		assert_int_equal(g.addr, w.addr);
		assert_int_equal(g.start_pc, w.start_pc);
		assert_int_equal(g.end_pc, w.end_pc);
		assert_int_equal(g.kind, w.kind);
		assert_int_equal(g.state, w.state);
		assert_int_equal(g.level, w.level);
	}
	assert_false(store_iter_next(&gi, &g));
}

/* Every record, in order, against its twin's store a. */
static void assert_arena_matches(const exited_arena *ar, twin *tw, size_t n)
{
	const exited_rec *r = NULL;
	size_t i = 0;
	while ((r = exited_next(ar, r))) {
		sample_store view;
		assert_true(i < n);
		assert_int_equal(r->index, tw[i].info.index);
		assert_int_equal(r->tid, tw[i].info.tid);
		assert_int_equal(r->refs, tw[i].info.refs);
		assert_true(r->size % 8 == 0);
		exited_view(r, &view);
		assert_same_store(&view, &tw[i].a);
		i++;
	}
	assert_int_equal(i, n);
}

static void test_records_read_back_as_stores_and_thin_alike(void **state)
{
	static twin tw[THREADS];
	exited_arena ar = {0};
	(void)state;
	memset(tw, 0, sizeof tw);
	for (size_t i = 0; i < THREADS; i++) {
		bool adaptive = i % 4 != 3;
		/* Some empty, some small, some with thousands of samples. */
		size_t n = i % 5 == 0 ? 0 : 300 * i * i;
		twin_fill(&tw[i], 100 + i, n, 1000 * i, adaptive, 0);
		/* Some thinned before they exit, as a thread is. */
		for (size_t k = 0; adaptive && k < i % 3; k++) {
			store_thin(&tw[i].a, &inline_malloc_alloc);
			store_thin(&tw[i].b, &inline_malloc_alloc);
		}
		tw[i].info = (exited_info){.tid = 5000 + i,
		                           .refs = 77 * i,
		                           .base_period = 128,
		                           .index = (uint32_t)i,
		                           .adaptive = adaptive};
		assert_true(exited_add(&ar, &inline_malloc_alloc, &tw[i].info, &tw[i].b, 0, 0));
		store_free(&tw[i].b, &inline_malloc_alloc);
	}
	assert_int_equal(ar.count, THREADS);
	assert_arena_matches(&ar, tw, THREADS);
	/* The process level rises: each record thins as its store would have,
	 * the non-adaptive ones not at all, and the arena shrinks. */
	for (uint32_t floor = 1; floor <= 6; floor++) {
		size_t before = ar.len;
		for (size_t i = 0; i < THREADS; i++)
			while (tw[i].info.adaptive && tw[i].a.level < floor)
				store_thin(&tw[i].a, &inline_malloc_alloc);
		exited_thin(&ar, floor + AUTO_LEVELS - 1, floor);
		assert_true(ar.len < before);
		assert_arena_matches(&ar, tw, THREADS);
		for (const exited_rec *r = NULL; (r = exited_next(&ar, r));)
			assert_int_equal(r->level, r->adaptive ? floor + AUTO_LEVELS - 1 : 0);
	}
	for (size_t i = 0; i < THREADS; i++)
		store_free(&tw[i].a, &inline_malloc_alloc);
	exited_free(&ar, &inline_malloc_alloc);
	assert_null(ar.mem);
}

/* Counts the arena's growths. */
static size_t grows;

static void *counting_grow(void *mem, size_t old, size_t bytes)
{
	grows++;
	return inline_malloc_alloc.grow(mem, old, bytes);
}

static void *plain_alloc(size_t bytes)
{
	return inline_malloc_alloc.alloc(bytes);
}

static void plain_release(void *mem, size_t bytes)
{
	inline_malloc_alloc.release(mem, bytes);
}

static void test_arena_thins_before_it_grows(void **state)
{
	static twin tw[400];
	const inline_alloc counting = {plain_alloc, plain_release, counting_grow};
	exited_arena ar = {0};
	size_t n = 0, len0;
	(void)state;
	memset(tw, 0, sizeof tw);
	/* Level 0: the arena grows as the records come. */
	for (; n < 200; n++) {
		twin_fill(&tw[n], 7 + n, 200, 0, true, 0);
		tw[n].info = (exited_info){.tid = n, .index = (uint32_t)n, .adaptive = true};
		assert_true(exited_add(&ar, &counting, &tw[n].info, &tw[n].b, 0, 0));
		store_free(&tw[n].b, &inline_malloc_alloc);
	}
	assert_true(grows >= 2);
	assert_int_equal(ar.thinned_level, 0);
	len0 = ar.len;
	/* The level rises to 8 (floor 4): larger records of samples at levels 4
	 * and up come; when the arena is full the earlier records are thinned to
	 * level 4 before it grows. */
	for (; n < 400; n++) {
		twin_fill(&tw[n], 7 + n, 2000, 0, true, 4);
		tw[n].info =
		    (exited_info){.tid = n, .index = (uint32_t)n, .level = 8, .adaptive = true};
		assert_true(exited_add(&ar, &counting, &tw[n].info, &tw[n].b, 8, 4));
		store_free(&tw[n].b, &inline_malloc_alloc);
	}
	assert_int_equal(ar.thinned_level, 8);
	for (size_t i = 0; i < 200; i++)
		while (tw[i].a.level < 4)
			store_thin(&tw[i].a, &inline_malloc_alloc);
	assert_arena_matches(&ar, tw, 400);
	/* The first 200 now hold about 1/16 of their samples. */
	size_t first200 = 0;
	const exited_rec *r = NULL;
	for (size_t i = 0; i < 200 && (r = exited_next(&ar, r)); i++)
		first200 += r->size;
	assert_true(first200 < len0 / 4);
	for (size_t i = 0; i < 400; i++)
		store_free(&tw[i].a, &inline_malloc_alloc);
	exited_free(&ar, &inline_malloc_alloc);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_records_read_back_as_stores_and_thin_alike),
	    cmocka_unit_test(test_arena_thins_before_it_grows),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

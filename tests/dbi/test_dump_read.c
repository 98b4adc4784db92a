/*
 * The reader of the dbi tool's hand-over file (lib/dbi/dump_read.c), fed
 * files built here: one written as the tool writes it (two threads, their
 * sample stores' streams as they are, open samples in a block of their own,
 * mappings) must give back every sample with its weight, window and thread;
 * every truncation and a set of corruptions must give LOMAS_EFORMAT with no
 * crash (the fuzz target goes further).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "dbi/dbi.h"
#include "dbi/dump.h"
#include "sampler/sampler.h"

typedef struct buf {
	uint8_t *p;
	size_t len, cap;
} buf;

static void put(buf *b, const void *data, size_t n)
{
	if (b->len + n > b->cap) {
		b->cap = (b->len + n) * 2;
		b->p = realloc(b->p, b->cap);
		assert_non_null(b->p);
	}
	memcpy(b->p + b->len, data, n);
	b->len += n;
}

/* What a thread of the test file holds: its store and its expected samples. */
typedef struct fixture {
	buf file;
	size_t nsamples;
	uint64_t refs[2];
	double weight_sum[2];
} fixture;

/* A store of n samples of thread th over refs references, pushed as the runtime does. */
static void fill(sample_store *st, rng *r, size_t n, uint64_t refs, uint32_t level0)
{
	for (size_t i = 0; i < n; i++) {
		isample s;
		memset(&s, 0, sizeof s);
		s.start = rng_next(r) % (refs - 1);
		s.addr = 0x10000 + (rng_next(r) % 4096) * 8;
		s.start_pc = 0x400000 + rng_next(r) % 256;
		s.kind = (uint8_t)(rng_next(r) & 1);
		s.level = (uint8_t)(level0 + rng_next(r) % 3);
		if (i % 7 == 0) {
			s.state = LOMAS_SAMPLE_DANGLING;
			s.end = LOMAS_CLOCK_NONE;
		} else {
			s.state = i % 11 == 0 ? LOMAS_SAMPLE_CENSORED : LOMAS_SAMPLE_REUSED;
			s.end = s.start + 1 + rng_next(r) % (refs - 1 - s.start);
			s.end_pc = s.start_pc + 4;
		}
		assert_true(store_push(st, &inline_malloc_alloc, &s));
	}
}

static void put_thread(fixture *f, uint32_t index, uint64_t refs, double base, uint32_t level,
                       sample_store *st)
{
	dump_thread th = {
	    .index = index, .tid = 1000 + index, .refs = refs, .base_period = base, .level = level};
	profile_sample_block blk;
	unsigned k = 0;
	while (store_next_block(st, &k, 0, base, &blk))
		th.nblocks++;
	put(&f->file, &th, sizeof th);
	k = 0;
	while (store_next_block(st, &k, 0, base, &blk)) {
		dump_block b = {.floor = blk.level_floor, .n = blk.n, .len = blk.len};
		put(&f->file, &b, sizeof b);
		put(&f->file, blk.data, blk.len);
	}
	{
		store_iter it;
		isample s;
		store_iter_init(&it, st);
		while (store_iter_next(&it, &s)) {
			f->nsamples++;
			f->weight_sum[index] += base * (double)(1ull << s.level);
		}
	}
	f->refs[index] = refs;
}

static void build(fixture *f)
{
	dump_header h;
	sample_store a, b;
	rng r, fates;
	dump_map m = {.start = 0x400000, .end = 0x401000, .offset = 0, .prot = 5, .path_len = 8};
	memset(f, 0, sizeof *f);
	memset(&a, 0, sizeof a);
	memset(&b, 0, sizeof b);
	rng_seed(&r, 42);
	rng_seed(&fates, 7);
	b.fates = &fates; /* thread 1 as period auto keeps it: fates, thinned twice */
	fill(&a, &r, 900, 200000, 0);
	fill(&b, &r, 3000, 500000, 0);
	store_thin(&b, &inline_malloc_alloc);
	store_thin(&b, &inline_malloc_alloc);
	memset(&h, 0, sizeof h);
	memcpy(h.magic, DUMP_MAGIC, sizeof h.magic);
	h.version = DUMP_VERSION;
	h.header_bytes = sizeof h;
	h.line_size = 64;
	h.max_live = 8192;
	h.seed = 3;
	h.nthreads = 2;
	h.nmaps = 1;
	snprintf(h.valgrind_version, sizeof h.valgrind_version, "3.19.0");
	snprintf(h.tool_version, sizeof h.tool_version, "0.1.0");
	put(&f->file, &h, sizeof h);
	put_thread(f, 0, 200000, 128.0, 0, &a);
	put_thread(f, 1, 500000, 128.0, 2, &b);
	put(&f->file, &m, sizeof m);
	put(&f->file, "/bin/foo", 8);
	store_free(&a, &inline_malloc_alloc);
	store_free(&b, &inline_malloc_alloc);
}

static void test_reads_what_the_tool_writes(void **state)
{
	fixture f;
	lomas_profile *p = NULL;
	lomas_profile_info info = LOMAS_PROFILE_INFO_INIT;
	dbi_dump_info di;
	double wsum[2] = {0, 0};
	(void)state;
	build(&f);
	assert_int_equal(dbi_dump_read(f.file.p, f.file.len, "t", &p, &di), LOMAS_OK);
	assert_int_equal(lomas_profile_info_get(p, &info), LOMAS_OK);
	assert_int_equal(info.threads, 2);
	assert_int_equal(info.samples, f.nsamples);
	assert_int_equal(info.refs, 700000);
	assert_int_equal(p->maps.n, 1);
	assert_string_equal(p->maps.items[0].path, "/bin/foo");
	assert_string_equal(di.valgrind_version, "3.19.0");
	for (size_t i = 0; i < p->samples.n; i++) {
		const lomas_sample *s = &p->samples.items[i];
		const lomas_window *w = &p->windows.items[s->window];
		wsum[s->thread] += s->weight;
		assert_int_equal(w->thread, s->thread);
		assert_true(s->start >= w->start && s->start < w->start + w->refs);
		/* Thread 1's store was thinned twice: no sample below level 2. */
		if (s->thread == 1)
			assert_true(s->weight >= 512.0);
	}
	assert_true(wsum[0] == f.weight_sum[0]);
	assert_true(wsum[1] == f.weight_sum[1]);
	{
		const char *v;
		assert_int_equal(lomas_profile_meta_get(p, "clock", &v), LOMAS_OK);
		assert_string_equal(v, "dbi");
	}
	lomas_profile_free(p);
	free(f.file.p);
}

static void test_every_truncation_is_an_error(void **state)
{
	fixture f;
	(void)state;
	build(&f);
	for (size_t len = 0; len < f.file.len; len++) {
		lomas_profile *p = (lomas_profile *)(uintptr_t)1;
		uint8_t *copy = malloc(len ? len : 1); /* exactly len bytes: ASan sees overreads */
		memcpy(copy, f.file.p, len);
		assert_int_equal(dbi_dump_read(copy, len, "t", &p, NULL), LOMAS_EFORMAT);
		assert_null(p);
		free(copy);
	}
	free(f.file.p);
}

/* Change the file with fn and expect LOMAS_EFORMAT mentioning what. */
static void expect_bad(void (*fn)(uint8_t *, size_t *), const char *what)
{
	fixture f;
	lomas_profile *p = NULL;
	build(&f);
	fn(f.file.p, &f.file.len);
	assert_int_equal(dbi_dump_read(f.file.p, f.file.len, "t", &p, NULL), LOMAS_EFORMAT);
	assert_non_null(strstr(lomas_error_message(), what));
	free(f.file.p);
}

static void bad_magic(uint8_t *b, size_t *len)
{
	(void)len;
	b[0] = 'X';
}

static void bad_version(uint8_t *b, size_t *len)
{
	(void)len;
	b[offsetof(dump_header, version)] = 99;
}

static void many_threads(uint8_t *b, size_t *len)
{
	uint32_t n = 0xffffffffu;
	(void)len;
	memcpy(b + offsetof(dump_header, nthreads), &n, sizeof n);
}

static void trailing_byte(uint8_t *b, size_t *len)
{
	(void)b;
	(*len)--; /* drop the path's last byte: the mapping runs past the end */
}

static void block_count_too_big(uint8_t *b, size_t *len)
{
	/* The first block of thread 0: claim far more records than its bytes hold. */
	size_t at = sizeof(dump_header) + sizeof(dump_thread) + offsetof(dump_block, n);
	uint64_t n = 1u << 30;
	(void)len;
	memcpy(b + at, &n, sizeof n);
}

static void start_past_refs(uint8_t *b, size_t *len)
{
	/* Thread 0 made fewer references than its samples start at. */
	size_t at = sizeof(dump_header) + offsetof(dump_thread, refs);
	uint64_t refs = 10;
	(void)len;
	memcpy(b + at, &refs, sizeof refs);
}

static void bad_base_period(uint8_t *b, size_t *len)
{
	size_t at = sizeof(dump_header) + offsetof(dump_thread, base_period);
	double nan = 0.0 / 0.0;
	(void)len;
	memcpy(b + at, &nan, sizeof nan);
}

/* A run of 2^40 references in windows of 1000: 10^9 windows would be
 * allocated (the fuzzer found it); refused before anything is. */
static void test_too_many_windows(void **state)
{
	fixture f;
	lomas_profile *p = NULL;
	uint64_t refs = 1ull << 40, window = 1000;
	(void)state;
	build(&f);
	memcpy(f.file.p + sizeof(dump_header) + offsetof(dump_thread, refs), &refs, sizeof refs);
	memcpy(f.file.p + offsetof(dump_header, window), &window, sizeof window);
	assert_int_equal(dbi_dump_read(f.file.p, f.file.len, "t", &p, NULL), LOMAS_ERANGE);
	assert_null(p);
	assert_non_null(strstr(lomas_error_message(), "windows"));
	free(f.file.p);
}

static void test_corruptions_are_errors(void **state)
{
	(void)state;
	expect_bad(bad_magic, "not a dbi hand-over");
	expect_bad(bad_version, "version");
	expect_bad(many_threads, "out of range");
	expect_bad(trailing_byte, "mapping");
	expect_bad(block_count_too_big, "fewer bytes");
	expect_bad(start_past_refs, "out of range");
	expect_bad(bad_base_period, "out of range");
}

/*
 * The exact stack distances after the maps (DUMP_FLAG_EXACT, tool_burst.c):
 * each goes to the reused sample of its thread with its clocks, one that
 * matches none is left unused, and a record no sample can have, a count
 * past the file's end or a cut anywhere in the section is an error.
 */
static void test_exact_distances(void **state)
{
	fixture f;
	lomas_profile *p = NULL;
	const lomas_sample *pick[2] = {NULL, NULL};
	dump_exact_head e = {.n = 3, .bursts = 5, .refs = 1234, .budget = 0.05};
	dump_exact_rec x[3];
	size_t base_len, found = 0;
	(void)state;
	build(&f);
	assert_int_equal(dbi_dump_read(f.file.p, f.file.len, "t", &p, NULL), LOMAS_OK);
	for (size_t i = 0; i < p->samples.n && !pick[1]; i++)
		if (p->samples.items[i].state == LOMAS_SAMPLE_REUSED &&
		    p->samples.items[i].end - p->samples.items[i].start > 10)
			pick[pick[0] ? 1 : 0] = &p->samples.items[i];
	assert_non_null(pick[1]);
	for (int k = 0; k < 2; k++)
		x[k] = (dump_exact_rec){.index = pick[k]->thread,
		                        .sd = (uint32_t)(3 + k),
		                        .start = pick[k]->start,
		                        .end = pick[k]->end};
	x[2] = (dump_exact_rec){.index = 1, .sd = 1, .start = 5, .end = 9}; /* no such sample */
	lomas_profile_free(p);
	p = NULL;
	((dump_header *)(void *)f.file.p)->flags |= DUMP_FLAG_EXACT;
	base_len = f.file.len;
	put(&f.file, &e, sizeof e);
	put(&f.file, x, sizeof x);
	assert_int_equal(dbi_dump_read(f.file.p, f.file.len, "t", &p, NULL), LOMAS_OK);
	for (size_t i = 0; i < p->samples.n; i++) {
		const lomas_sample *s = &p->samples.items[i];
		if (!(s->flags & LOMAS_SAMPLE_EXACT_SD))
			continue;
		found++;
		assert_true((s->start == x[0].start && s->reserved == 3) ||
		            (s->start == x[1].start && s->reserved == 4));
	}
	assert_int_equal(found, 2);
	{
		const char *v;
		assert_int_equal(lomas_profile_meta_get(p, "exact_bursts", &v), LOMAS_OK);
		assert_string_equal(v, "5, 1234 references (budget 5%), 2 distances");
	}
	lomas_profile_free(p);
	/* Every cut inside the section. */
	for (size_t len = base_len; len < f.file.len; len++) {
		p = (lomas_profile *)(uintptr_t)1;
		assert_int_equal(dbi_dump_read(f.file.p, len, "t", &p, NULL), LOMAS_EFORMAT);
		assert_null(p);
	}
	/* A thread the file does not have. */
	((dump_exact_rec *)(void *)(f.file.p + base_len + sizeof e))[2].index = 7;
	assert_int_equal(dbi_dump_read(f.file.p, f.file.len, "t", &p, NULL), LOMAS_EFORMAT);
	assert_non_null(strstr(lomas_error_message(), "exact distance out of range"));
	/* More records than the file holds. */
	((dump_exact_head *)(void *)(f.file.p + base_len))->n = 1u << 30;
	assert_int_equal(dbi_dump_read(f.file.p, f.file.len, "t", &p, NULL), LOMAS_EFORMAT);
	assert_non_null(strstr(lomas_error_message(), "more exact distances"));
	free(f.file.p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_reads_what_the_tool_writes),
	    cmocka_unit_test(test_every_truncation_is_an_error),
	    cmocka_unit_test(test_corruptions_are_errors),
	    cmocka_unit_test(test_too_many_windows),
	    cmocka_unit_test(test_exact_distances),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

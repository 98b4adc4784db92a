/*
 * Phase-guided sampling's pure logic (lib/sampler/phase.c) and the sampler
 * core's thread (lib/sampler/thread.c) driving it, with synthetic windows
 * and reference streams whose phases the test itself generates. Ground
 * truth: the generator's own phase labels, and the exact forward reuse
 * distances of the stream, computed here from last-touch clocks.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "sampler/sampler.h"
#include "heap_alloc.h"

/* xorshift64: the test's own generator, independent of lib/core/rng.c. */
static uint64_t next(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

/*
 * A synthetic window of n samples of phase p (0: A, 1: B, 2: C):
 *  A: random lines over 64 Ki lines (every bucket), two pcs;
 *  B: random lines of a 256-line array, one pc;
 *  C: every 8th line of a 1 Ki-line array (128 buckets), the pcs of A (data
 *     tells it from A).
 */
static void add_window(phase_tracker *pt, int p, unsigned n, uint64_t *x)
{
	for (unsigned i = 0; i < n; i++) {
		uint64_t r = next(x);
		switch (p) {
		case 0:
			phase_add(pt, 0x100000 + r % 65536, (r >> 40) & 1 ? 0x401000 : 0x401010);
			break;
		case 1: phase_add(pt, 0x900000 + r % 256, 0x402000); break;
		default:
			phase_add(pt, 0xa00000 + (r % 128) * 8,
			          (r >> 40) & 1 ? 0x401000 : 0x401010);
			break;
		}
	}
}

static phase_tracker *tracker_new(uint32_t min_samples, uint8_t shift)
{
	phase_settings s = {.min_samples = min_samples, .shift = shift};
	phase_tracker *pt = calloc(1, sizeof *pt);
	assert_non_null(pt);
	phase_tracker_init(pt, &s);
	return pt;
}

/*
 * A window of n samples against a representative of 8 windows of 256, 200
 * times per pair of phases: windows of the representative's phase match
 * (similarity >= 0.8) in >= 95 % of the trials, windows of another phase
 * in <= 3 %. n = 64 is what a window sampled at the lower rate holds
 * (PHASE_WINDOW_SAMPLES); at 16 the data signature of C could not be told
 * from A's (16 samples in 128 buckets rarely collide).
 */
static void test_similarity_separates_phases(void **state)
{
	phase_tracker *a = tracker_new(0, 0), *b = tracker_new(0, 0);
	uint64_t x = 0x1234567;
	(void)state;
	for (int p = 0; p < 3; p++)
		for (int q = 0; q < 3; q++)
			for (unsigned n = 64; n <= 256; n *= 4) {
				unsigned match = 0;
				for (int trial = 0; trial < 200; trial++) {
					memset(&a->win, 0, sizeof a->win);
					add_window(a, p, 8 * 256, &x);
					a->win.k = 8.0f;
					memset(&b->win, 0, sizeof b->win);
					b->win.k = 1.0f;
					add_window(b, q, n, &x);
					match +=
					    phase_similarity(&a->win, &b->win) >= PHASE_THRESHOLD;
				}
				printf("phases %d, %d, %u samples: %u of 200 match\n", p, q, n,
				       match);
				if (p == q)
					assert_true(match >= 190);
				else
					assert_true(match <= 6);
			}
	free(a);
	free(b);
}

/*
 * Windows A x6, B x6, A x6, C x6, B x6: each phase's first window is a
 * transition and its second promotes it; afterwards every window of a phase
 * gets that phase's id, and the three ids differ.
 */
static void test_tracker_labels_follow_the_generator(void **state)
{
	static const int seq[] = {0, 1, 0, 2, 1};
	phase_tracker *pt = tracker_new(0, 0);
	uint32_t id_of[3] = {0, 0, 0};
	uint64_t x = 99;
	(void)state;
	for (size_t r = 0; r < sizeof seq / sizeof seq[0]; r++)
		for (int w = 0; w < 6; w++) {
			int p = seq[r];
			uint32_t id;
			add_window(pt, p, 256, &x);
			id = phase_close(pt);
			if (!id_of[p]) {
				/* Phase p's first window: a transition; its second: the new phase.
				 */
				assert_int_equal(w, 0);
				assert_int_equal(id, 0);
				add_window(pt, p, 256, &x);
				id = phase_close(pt);
				assert_int_not_equal(id, 0);
				id_of[p] = id;
				w++;
				continue;
			}
			assert_int_equal(id, id_of[p]);
		}
	assert_int_not_equal(id_of[0], id_of[1]);
	assert_int_not_equal(id_of[0], id_of[2]);
	assert_int_not_equal(id_of[1], id_of[2]);
	assert_int_equal(pt->nphases, 3);
	free(pt);
}

/*
 * The rate decision through phase_on_sample, windows of 4096 references
 * (phase_window_refs at period 4 and 1/16), a sample every 4 references at
 * the full rate (1024 a window) and every 64 at the lower one (64), a phase
 * worth 8000 samples: A x20, B x10, A x10. A is promoted at window 1 with
 * 2048 samples and has 8192 when window 7 closes: windows 8-19 are drawn at
 * 1/16, and still match A. B's first window (20) starts at A's rate
 * (decided from window 19), but B's pc is in no code bucket of A: after
 * PHASE_FOREIGN_RUN samples of it the full rate returns, mid-window. That
 * window (6 + 928 samples) is a transition; B is promoted at window 21 with
 * 1958 samples and has 8102 when window 27 closes: 28 is at 1/16, and A's
 * return (30, decided from 29, then from A's own windows) stays so. A
 * window at 1/16 that falls under the threshold by noise (64 samples,
 * test_similarity_separates_phases) stays in A by the lenient threshold.
 */
static void test_rate_drops_when_the_phase_has_its_samples(void **state)
{
	phase_tracker *pt = tracker_new(8000, 4);
	uint64_t x = 5;
	unsigned shift = 0, returned = 0;
	(void)state;
	/* B's pc falls outside A's buckets (else no early return: the test
	 * would need other pcs). */
	assert_int_not_equal(phase_code_bucket(0x402000), phase_code_bucket(0x401000));
	assert_int_not_equal(phase_code_bucket(0x402000), phase_code_bucket(0x401010));
	for (unsigned w = 0; w < 40; w++) {
		int p = w < 20 ? 0 : w < 30 ? 1 : 0;
		unsigned want = (w >= 8 && w <= 20) || w >= 28 ? 4 : 0, n = 0;
		for (uint64_t c = 0; c < 4096; c += shift ? 64 : 4) {
			uint64_t r = next(&x);
			uint64_t line = p == 0 ? 0x100000 + r % 65536 : 0x900000 + r % 256;
			uint64_t pc = p == 0 ? ((r >> 40) & 1 ? 0x401000 : 0x401010) : 0x402000;
			bool changed = phase_on_sample(pt, w * 4096ull + c, 4096, line, pc);
			n++;
			if (c == 0) {
				/* Decided at the window's first sample. */
				assert_int_equal(changed, pt->shift_now != shift);
				shift = pt->shift_now;
				assert_int_equal(shift, want);
			} else if (w == 20 && n == PHASE_FOREIGN_RUN) {
				/* B's PHASE_FOREIGN_RUN-th sample: the full rate is back. */
				assert_true(changed);
				assert_int_equal(pt->shift_now, 0);
				shift = 0;
				returned++;
			} else {
				assert_false(changed);
			}
		}
	}
	assert_int_equal(returned, 1);
	assert_int_equal(pt->returns, 1);
	assert_int_equal(pt->nphases, 2);
	assert_int_equal(pt->windows, 39); /* the last is still running */
	assert_int_equal(pt->reduced_windows, 13 + 12);
	printf("%llu windows at 1/16 kept in their phase by the lenient threshold\n",
	       (unsigned long long)pt->stayed);
	free(pt);
}

/* A sample of phase p: add_window's A, B, C (0-2); D and E (3, 4): random
 * reads of 512 lines each (other buckets), one pc each (a straddle of the two is near 0.7
 * from either in data and code). Its line and pc. */
static void phase_ref(int p, uint64_t *x, uint64_t *line, uint64_t *pc)
{
	static const uint64_t base[] = {0x100000, 0x900000, 0xa00000, 0xb00000, 0xc00200};
	static const uint64_t lines[] = {65536, 256, 128, 512, 512};
	uint64_t r = next(x);
	*line = base[p] + (r % lines[p]) * (p == 2 ? 8 : 1);
	*pc = p == 1          ? 0x402000
	      : p == 3        ? 0x403000
	      : p == 4        ? 0x404000
	      : (r >> 40) & 1 ? 0x401000
	                      : 0x401010;
}

/* Window w (4096 references) through phase_on_sample, a sample every 4
 * references at the full rate and every 64 at the lower one, the phase of
 * clock c phase_at(c). Returns the shift decided at its first sample. */
static unsigned drive_window(phase_tracker *pt, unsigned w, int (*phase_at)(uint64_t), uint64_t *x)
{
	unsigned first = 0;
	for (uint64_t c = w * 4096ull; c < (w + 1) * 4096ull; c += pt->shift_now ? 64 : 4) {
		uint64_t line, pc;
		phase_ref(phase_at(c), x, &line, &pc);
		phase_on_sample(pt, c, 4096, line, pc);
		if (c == w * 4096ull)
			first = pt->shift_now;
	}
	return first;
}

/* D x8, E x8, then D and E two windows each, their boundaries in the
 * middle of a window (D, D|E, E, E|D, ...) for 12 rounds, then C x8. */
#define STRADDLE_START (16 * 4096ull)
#define STRADDLE_END (STRADDLE_START + 48 * 4096ull)
static int straddle_phase(uint64_t c)
{
	if (c < STRADDLE_START)
		return c < 8 * 4096ull ? 3 : 4;
	if (c >= STRADDLE_END)
		return 2;
	return 3 + (int)((c - STRADDLE_START + 2048) / 8192 % 2);
}

/*
 * Phases whose boundaries fall in the middle of the windows (what the
 * environment did to the phases workload under the dbi clock): once D and E
 * have their samples, every window of the alternation is sampled at the
 * lower rate (a window straddling D and E is a mixture of the two: a
 * transition, no candidate, the rate kept low) and no phase is made of the
 * straddling windows. The rule before labelled each straddling window a
 * transition (similarity near 0.7 with either phase), raised the rate
 * after it and promoted the straddles to phases of their own. A new phase
 * (C) is still found and given its samples.
 */
static void test_straddling_windows_keep_the_rate(void **state)
{
	phase_tracker *pt = tracker_new(2000, 4);
	uint64_t x = 77;
	unsigned full = 0, lenient = 0, mixed = 0, right = 0;
	uint32_t c_samples;
	(void)state;
	assert_int_not_equal(phase_code_bucket(0x403000), phase_code_bucket(0x404000));
	for (unsigned w = 0; w < 16; w++)
		drive_window(pt, w, straddle_phase, &x);
	assert_int_equal(pt->nphases, 2);
	for (unsigned w = 16; w < 64; w++) {
		uint64_t before = pt->stayed + pt->mixtures;
		unsigned shift = drive_window(pt, w, straddle_phase, &x);
		full += shift == 0;
		/* Window w - 1 closed at w's first sample; the odd ones straddle. */
		if (w % 2 == 0 && w > 16)
			lenient += pt->stayed + pt->mixtures > before;
	}
	printf("alternation: %u of 48 windows at the full rate; of 23 straddles %u judged "
	       "leniently (%llu mixtures, %llu stayed in their first phase)\n",
	       full, lenient, (unsigned long long)pt->mixtures, (unsigned long long)pt->stayed);
	assert_int_equal(full, 0);
	assert_int_equal(pt->nphases, 2);
	assert_true(lenient >= 20);
	/* C: found, and given its samples at the full rate. */
	for (unsigned w = 64; w < 73; w++)
		drive_window(pt, w, straddle_phase, &x); /* 72's first sample closes 71 */
	assert_int_equal(pt->nphases, 3);
	c_samples = (uint32_t)pt->phases[2].samples;
	printf("C: %u samples in its phase\n", c_samples);
	assert_true(c_samples >= 2000);
	free(pt);
	/* The same windows at the full rate (1024 samples each, phase_close by
	 * hand): a straddle falls under the lenient threshold (0.75 there) and
	 * is a mixture (phase 0, no candidate); D and E keep their ids. */
	pt = tracker_new(0, 0);
	for (unsigned w = 0; w < 64; w++) {
		uint32_t id;
		for (uint64_t c = w * 4096ull; c < (w + 1) * 4096ull; c += 4) {
			uint64_t line, pc;
			phase_ref(straddle_phase(c), &x, &line, &pc);
			phase_add(pt, line, pc);
		}
		id = phase_close(pt);
		if (w > 16 && w % 2 == 1)
			mixed += id == 0;
		else if (w >= 16)
			right += id == (uint32_t)(straddle_phase(w * 4096ull) - 2);
	}
	printf("full rate: %u of 24 straddles mixtures, %u of 24 others in their phase\n", mixed,
	       right);
	assert_true(mixed >= 22);
	assert_true(right >= 24);
	assert_int_equal(pt->nphases, 2);
	free(pt);
}

/* ------------------------------------------------- the core's thread */

#define SWEEP_LINES 16384u /* 1 MiB */
#define SMALL_LINES 512u   /* 32 KiB */
#define NLINES (SWEEP_LINES + SMALL_LINES)
#define PHASE_REFS 400000u

/* Reference i of the phased stream: sweeps of 1 MiB (a word per 16 bytes)
 * and random reads of 32 KiB, alternating every PHASE_REFS references;
 * stationary: random reads of 32 KiB throughout. Returns a line index. */
static uint32_t stream_line(bool phased, uint64_t i, uint64_t *x, uint64_t *sweep, uint64_t *pc)
{
	if (phased && (i / PHASE_REFS) % 2 == 0) {
		*pc = 0x401000;
		return (uint32_t)((*sweep)++ / 4 % SWEEP_LINES);
	}
	*pc = 0x402000;
	return SWEEP_LINES + (uint32_t)(next(x) % SMALL_LINES);
}

typedef struct run_result {
	uint64_t samples, reduced;
	double weight;      /* sum of the sample weights */
	double w_short;     /* ... of those reused at a distance < 512 */
	double exact_short; /* references reused at a distance < 512 */
	bool levels_ok;     /* every sample at level 0 or the shift */
} run_result;

static run_result run_stream(bool phased, bool guided, uint64_t refs)
{
	sampler_settings set = {.period = 32, .seed = 7, .max_live = 8192, .line_shift = 6};
	sampler_budget budget = {0};
	sampler_thread t;
	uint8_t *filter = calloc(1, FILTER_SIZE + FILTER_PAD);
	void *mem = calloc(1, wt_bytes(set.max_live));
	uint64_t *last = malloc(NLINES * sizeof *last), x = 42, sweep = 0;
	run_result r = {.levels_ok = true};
	store_iter it;
	isample s;
	assert_non_null(filter);
	assert_non_null(mem);
	assert_non_null(last);
	for (uint32_t l = 0; l < NLINES; l++)
		last[l] = UINT64_MAX;
	set.phase_guided = guided;
	set.phase.min_samples = 2000;
	set.phase.shift = 4;
	sampler_thread_init(&t, &set, 0, mem, filter, &budget, &heap);
	for (uint64_t i = 0; i < refs; i++) {
		uint64_t pc;
		uint32_t line = stream_line(phased, i, &x, &sweep, &pc);
		/* Exact forward distances: the previous touch of the line is reused now. */
		if (last[line] != UINT64_MAX && i - last[line] - 1 < 512)
			r.exact_short += 1.0;
		last[line] = i;
		sampler_visit(&t, &budget, &heap, (uint64_t)line << 6, i, pc, LOMAS_REF_LOAD);
	}
	if (t.phase)
		r.reduced = t.phase->reduced_samples;
	sampler_thread_finish(&t, &budget, &heap);
	store_iter_init(&it, &t.done);
	while (store_iter_next(&it, &s)) {
		double w = set.period * (double)(1u << s.level);
		r.samples++;
		r.weight += w;
		if (s.state == LOMAS_SAMPLE_REUSED && s.end - s.start - 1 < 512)
			r.w_short += w;
		if (s.level != 0 && !(guided && s.level == 4))
			r.levels_ok = false;
	}
	store_free(&t.done, &heap);
	free(filter);
	free(mem);
	free(last);
	return r;
}

/*
 * 6.4M references in 16 alternating phases: phase-guided sampling takes
 * >= 4x fewer samples, and the weighted samples still estimate the number
 * of references (Horvitz-Thompson) and the share reused within 512
 * references (exact, from the stream) as closely as the full rate does.
 */
static void test_phased_stream_fewer_samples_same_estimates(void **state)
{
	const uint64_t refs = 16ull * PHASE_REFS;
	run_result full = run_stream(true, false, refs), pg = run_stream(true, true, refs);
	double exact = full.exact_short / (double)refs;
	(void)state;
	printf("full: %llu samples; phase-guided: %llu (%llu at the lower rate)\n",
	       (unsigned long long)full.samples, (unsigned long long)pg.samples,
	       (unsigned long long)pg.reduced);
	assert_true(full.exact_short == pg.exact_short); /* the same stream */
	assert_true(full.samples >= 4 * pg.samples);
	assert_true(pg.reduced > 0);
	assert_true(full.levels_ok);
	assert_true(pg.levels_ok);
	/* The reference count from the weights: within 3 %. */
	assert_true(full.weight > 0.97 * (double)refs && full.weight < 1.03 * (double)refs);
	assert_true(pg.weight > 0.97 * (double)refs && pg.weight < 1.03 * (double)refs);
	/* The short-reuse share: within 1.5 points of exact. */
	assert_true(full.w_short / full.weight > exact - 0.015 &&
	            full.w_short / full.weight < exact + 0.015);
	assert_true(pg.w_short / pg.weight > exact - 0.015 &&
	            pg.w_short / pg.weight < exact + 0.015);
}

/*
 * A stationary stream (random reads of 32 KiB) is one phase from its second
 * window on: with the option its rate drops and its estimates hold; without
 * it every sample is at level 0 and none is at a lower rate.
 */
static void test_stationary_stream_estimates_hold(void **state)
{
	const uint64_t refs = 2000000;
	run_result full = run_stream(false, false, refs), pg = run_stream(false, true, refs);
	double exact = full.exact_short / (double)refs;
	(void)state;
	assert_true(full.levels_ok && pg.levels_ok);
	assert_int_equal(full.reduced, 0);
	/* 2M references at period 32: 62500 samples (Poisson, +-5 sigma). */
	assert_true(full.samples > 62500 - 1250 && full.samples < 62500 + 1250);
	assert_true(pg.samples * 8 < full.samples);
	assert_true(pg.weight > 0.97 * (double)refs && pg.weight < 1.03 * (double)refs);
	assert_true(pg.w_short / pg.weight > exact - 0.015 &&
	            pg.w_short / pg.weight < exact + 0.015);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_similarity_separates_phases),
	    cmocka_unit_test(test_tracker_labels_follow_the_generator),
	    cmocka_unit_test(test_rate_drops_when_the_phase_has_its_samples),
	    cmocka_unit_test(test_straddling_windows_keep_the_rate),
	    cmocka_unit_test(test_phased_stream_fewer_samples_same_estimates),
	    cmocka_unit_test(test_stationary_stream_estimates_hold),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

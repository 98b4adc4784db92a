/*
 * Unit tests for lib/model: f_L numerics, StatCache roots, StatStack stack
 * distances, window weighting, censored/dangling samples, argument errors
 * and the default sizes. Expected values are computed here independently.
 *
 * The equations are tested in their stationary form: one group per window,
 * no crossing reuses, no footprint bound (model_curve_opts with STATIONARY):
 * these profiles are hand-made and unphysical (reuses of 10^6 references
 * over one line), which the footprint bound would rightly call impossible.
 * The time-aware model and the bound are tested against exact simulation in
 * test_phased.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <math.h>
#include <stdlib.h>

#include "core/core.h"
#include "model/model.h"

/* The stationary per-window equations of docs/model.md. */
static const model_opts STATIONARY = {.grouping = MODEL_GROUP_WINDOW};

/* The default model without the footprint bound, for many sizes. */
static lomas_status curve_nb(const lomas_profile *p, lomas_policy pol, const uint64_t *sizes,
                             size_t n, unsigned flags, double *out)
{
	model_opts o = model_default_opts(pol);
	o.footprint = false;
	return model_curve_opts(p, pol, sizes, n, flags, &o, out);
}

/* The model with options o for one size. */
static lomas_status ratio_opts(const lomas_profile *p, lomas_policy pol, uint64_t bytes,
                               unsigned flags, const model_opts *o, double *r)
{
	return model_curve_opts(p, pol, &bytes, 1, flags, o, r);
}

/* A profile with one thread and nwin windows of the given reference counts. */
static lomas_profile *mkprofile(uint32_t line, size_t nwin, const uint64_t *refs)
{
	lomas_profile *p;
	lomas_thread t = {.tid = 1, .refs = 0};
	uint64_t start = 0;
	assert_int_equal(lomas_profile_new(line, &p), LOMAS_OK);
	for (size_t i = 0; i < nwin; i++)
		t.refs += refs[i];
	assert_int_equal(profile_add_thread(p, &t), LOMAS_OK);
	for (size_t i = 0; i < nwin; i++) {
		lomas_window w = {.start = start, .refs = refs[i], .thread = 0};
		start += refs[i];
		assert_int_equal(profile_add_window(p, &w), LOMAS_OK);
	}
	return p;
}

/* Add a sample of window win with state and distance d (ignored unless REUSED). */
static void add(lomas_profile *p, uint32_t win, int state, uint64_t d, double weight)
{
	lomas_sample s;
	memset(&s, 0, sizeof s);
	s.start = p->windows.items[win].start;
	s.window = win;
	s.thread = 0;
	s.weight = weight;
	s.state = (uint8_t)state;
	if (state == LOMAS_SAMPLE_REUSED)
		s.end = s.start + d + 1;
	else if (state == LOMAS_SAMPLE_CENSORED)
		s.end = s.start + 5;
	else
		s.end = LOMAS_CLOCK_NONE;
	assert_int_equal(profile_add_sample(p, &s), LOMAS_OK);
}

/*
 * StatCache's g(R) of one window computed directly with pow (long double):
 * sum w (1 - (1 - 1/L)^((R + c) d)) + C - R S, with c = D / S the window's
 * cold-miss rate (first touches evict lines too; in one window they are
 * as many as its last touches, the dangling samples).
 */
static double g_ref(const lomas_profile *p, uint32_t win, double L, double R)
{
	long double sum = 0, S = 0, D = 0;
	for (size_t i = 0; i < p->samples.n; i++) {
		const lomas_sample *s = &p->samples.items[i];
		if (s->window != win)
			continue;
		S += s->weight;
		D += s->state == LOMAS_SAMPLE_DANGLING ? s->weight : 0;
	}
	for (size_t i = 0; i < p->samples.n; i++) {
		const lomas_sample *s = &p->samples.items[i];
		if (s->window != win)
			continue;
		if (s->state == LOMAS_SAMPLE_REUSED)
			sum += s->weight *
			       (1.0L - powl(1.0L - 1.0L / L,
			                    ((long double)R + D / S) * (s->end - s->start - 1)));
		else if (s->state == LOMAS_SAMPLE_CENSORED)
			sum += s->weight;
	}
	return (double)((sum - R * S) / S);
}

/* The window's cold-miss rate D / S. */
static double cold_rate(const lomas_profile *p, uint32_t win)
{
	double S = 0, D = 0;
	for (size_t i = 0; i < p->samples.n; i++) {
		const lomas_sample *s = &p->samples.items[i];
		if (s->window == win) {
			S += s->weight;
			D += s->state == LOMAS_SAMPLE_DANGLING ? s->weight : 0;
		}
	}
	return D / S;
}

static void test_f_numerics(void **state)
{
	(void)state;
	assert_true(model_f(0.0, log1p(-1.0 / 64)) == 0.0);
	assert_true(model_f(0.0, log1p(-1.0)) == 0.0); /* L = 1: 0 * -inf must not be NaN */
	assert_true(model_f(3.0, log1p(-1.0)) == 1.0);
	/* Huge L: f ~ n / L, which 1 - pow(1 - 1/L, n) would lose entirely. */
	double f = model_f(1.0, log1p(-1e-18));
	assert_true(fabs(f - 1e-18) < 1e-28);
	f = model_f(1000.0, log1p(-1.0 / 1e15));
	assert_true(fabs(f / 1e-12 - 1.0) < 1e-6);
	/* Huge n: the line is gone. */
	assert_true(model_f(1e300, log1p(-1.0 / 4)) == 1.0);
	assert_true(model_f(1e12, log1p(-1.0 / 1e6)) == 1.0);
	/* Non-power-of-two L: 1 - (2/3)^2 = 5/9. */
	assert_true(fabs(model_f(2.0, log1p(-1.0 / 3)) - 5.0 / 9.0) < 1e-15);
	assert_true(fabs(model_f(7.5, log1p(-1.0 / 1000)) - (1.0 - pow(0.999, 7.5))) < 1e-14);
}

/* A window with a spread of distances, some dangling. */
static lomas_profile *spread_profile(void)
{
	uint64_t refs[1] = {100000};
	lomas_profile *p = mkprofile(64, 1, refs);
	uint64_t x = 12345;
	for (int i = 0; i < 500; i++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		uint64_t d = (x >> 33) % 5000;
		add(p, 0, LOMAS_SAMPLE_REUSED, d * d / 100, 1.0 + (i % 3));
	}
	for (int i = 0; i < 40; i++)
		add(p, 0, LOMAS_SAMPLE_DANGLING, 0, 2.0);
	return p;
}

static void test_statcache_root(void **state)
{
	lomas_profile *p = spread_profile();
	uint64_t sizes[] = {64, 640, 6400, 64000, 640000, 6400000};
	double prev_nc = 1.0;
	(void)state;
	for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
		double L = (double)(sizes[i] / 64), r, rc;
		assert_int_equal(ratio_opts(p, LOMAS_POLICY_RANDOM, sizes[i], 0, &STATIONARY, &r),
		                 LOMAS_OK);
		assert_int_equal(ratio_opts(p, LOMAS_POLICY_RANDOM, sizes[i], LOMAS_MODEL_COLD,
		                            &STATIONARY, &rc),
		                 LOMAS_OK);
		assert_true(r >= 0.0 && r <= 1.0);
		/* Cold misses add exactly the window's first touches. */
		assert_true(fabs(rc - r - cold_rate(p, 0)) < 1e-12);
		assert_true(r <= prev_nc + 1e-12);
		prev_nc = r;
		if (r > 0.0) {
			assert_true(fabs(g_ref(p, 0, L, r)) < 1e-8);
		} else {
			/* Zero only when g <= 0 from 0 on: g < 0 just above 0. */
			assert_true(g_ref(p, 0, L, 1e-6) <= 1e-15);
		}
	}
	lomas_profile_free(p);
}

/* g'(0) <= 0 gives exactly 0; barely positive gives a small positive root, not 0. */
static void test_statcache_zero(void **state)
{
	uint64_t refs[1] = {1000};
	double r;
	(void)state;
	lomas_profile *p = mkprofile(64, 1, refs);
	for (int i = 0; i < 10; i++) {
		add(p, 0, LOMAS_SAMPLE_REUSED, 10, 1.0);
		add(p, 0, LOMAS_SAMPLE_REUSED, 0, 1.0);
	}
	/* L = 1000, no cold misses: g'(0) = 10 * 10 lambda - 20 < 0: exactly 0. */
	for (unsigned fl = 0; fl <= LOMAS_MODEL_COLD; fl++) {
		assert_int_equal(ratio_opts(p, LOMAS_POLICY_RANDOM, 64000, fl, &STATIONARY, &r), 0);
		assert_true(r == 0.0);
	}
	lomas_profile_free(p);

	/* Distance 2100, L = 1000: g'(0) = 21000 lambda - 20 > 0: a small root, not 0. */
	p = mkprofile(64, 1, refs);
	for (int i = 0; i < 10; i++) {
		add(p, 0, LOMAS_SAMPLE_REUSED, 2100, 1.0);
		add(p, 0, LOMAS_SAMPLE_REUSED, 0, 1.0);
	}
	assert_int_equal(ratio_opts(p, LOMAS_POLICY_RANDOM, 64000, 0, &STATIONARY, &r), 0);
	assert_true(r > 1e-3 && r < 0.2);
	assert_true(fabs(g_ref(p, 0, 1000, r)) < 1e-10);
	lomas_profile_free(p);

	/*
	 * Half the samples dangling: the first touches (c = 1/2) evict lines,
	 * so even distance 10 misses a little: 10 f((R + 1/2) 10) = 20 R, R ~
	 * 0.0025; with cold misses counted, R + 1/2.
	 */
	p = mkprofile(64, 1, refs);
	for (int i = 0; i < 10; i++) {
		add(p, 0, LOMAS_SAMPLE_REUSED, 10, 1.0);
		add(p, 0, LOMAS_SAMPLE_DANGLING, 0, 1.0);
	}
	assert_int_equal(ratio_opts(p, LOMAS_POLICY_RANDOM, 64000, 0, &STATIONARY, &r), 0);
	assert_true(r > 0.002 && r < 0.003);
	assert_true(fabs(g_ref(p, 0, 1000, r)) < 1e-10);
	double rc;
	assert_int_equal(
	    ratio_opts(p, LOMAS_POLICY_RANDOM, 64000, LOMAS_MODEL_COLD, &STATIONARY, &rc), 0);
	assert_true(fabs(rc - r - 0.5) < 1e-12);
	lomas_profile_free(p);
}

static void test_monotone_and_curve(void **state)
{
	lomas_profile *p = spread_profile();
	uint64_t sizes[81], shuffled[81];
	double curve[81], c2[81];
	size_t n;
	(void)state;
	assert_int_equal(lomas_model_default_sizes(64, sizes, 81, &n), LOMAS_OK);
	for (int pol = 0; pol < 2; pol++) {
		for (unsigned fl = 0; fl <= LOMAS_MODEL_COLD; fl++) {
			assert_int_equal(curve_nb(p, pol, sizes, 81, fl, curve), 0);
			for (size_t i = 0; i < 81; i++) {
				double r;
				assert_int_equal(curve_nb(p, pol, &sizes[i], 1, fl, &r), 0);
				/* The curve solves StatCache on a grid: within 2e-5. */
				assert_true(fabs(r - curve[i]) <
				            (pol == LOMAS_POLICY_RANDOM ? 2e-5 : 1e-12));
				if (i > 0)
					assert_true(curve[i] <= curve[i - 1] + 1e-12);
				assert_true(curve[i] >= 0.0 && curve[i] <= 1.0);
			}
			/* Any order of sizes gives the same ratios. */
			for (size_t i = 0; i < 81; i++)
				shuffled[i] = sizes[(i * 37) % 81];
			assert_int_equal(curve_nb(p, pol, shuffled, 81, fl, c2), 0);
			for (size_t i = 0; i < 81; i++)
				assert_true(fabs(c2[i] - curve[(i * 37) % 81]) < 1e-9);
		}
		/* Small caches miss more than big ones, by a lot here. */
		assert_true(curve[0] > 0.5);
	}
	lomas_profile_free(p);
}

/*
 * The many-size StatCache path (a tabulated grid) against single-size exact
 * roots, at its edges: one-line caches, huge caches, distance-0 reuses,
 * censored and dangling samples, distances up to 1e15, single-distance windows.
 */
static void test_curve_edges(void **state)
{
	uint64_t refs[4] = {5000, 100, 7000, 300};
	uint64_t sizes[24];
	double curve[24];
	(void)state;
	lomas_profile *p = mkprofile(64, 4, refs);
	for (int i = 0; i < 30; i++) {
		add(p, 0, LOMAS_SAMPLE_REUSED, (uint64_t)i * i * i * 1000, 1.0);
		add(p, 1, LOMAS_SAMPLE_REUSED, 777, 2.0);
		add(p, 2, LOMAS_SAMPLE_REUSED, 0, 1.0);
		add(p, 2, LOMAS_SAMPLE_REUSED, 1000000000000000ull, 1.0);
	}
	add(p, 0, LOMAS_SAMPLE_CENSORED, 0, 1.0);
	add(p, 3, LOMAS_SAMPLE_DANGLING, 0, 1.0);
	add(p, 3, LOMAS_SAMPLE_REUSED, 3, 1.0);
	for (int i = 0; i < 24; i++)
		sizes[i] = 64ull << (2 * i); /* 1 line .. 2^46 lines */
	sizes[1] = 128;
	for (int pol = 0; pol < 2; pol++) {
		for (unsigned fl = 0; fl <= LOMAS_MODEL_COLD; fl++) {
			assert_int_equal(curve_nb(p, pol, sizes, 24, fl, curve), 0);
			for (int i = 0; i < 24; i++) {
				double r;
				assert_int_equal(curve_nb(p, pol, &sizes[i], 1, fl, &r), 0);
				assert_true(fabs(r - curve[i]) < 2e-5);
			}
		}
	}
	lomas_profile_free(p);
}

/* StatStack on a hand-computed distribution (8-byte lines so L is small). */
static void test_statstack_exact(void **state)
{
	uint64_t refs[1] = {100};
	double r;
	(void)state;
	lomas_profile *p = mkprofile(8, 1, refs);
	add(p, 0, LOMAS_SAMPLE_REUSED, 0, 1.0);
	add(p, 0, LOMAS_SAMPLE_REUSED, 10, 1.0);
	add(p, 0, LOMAS_SAMPLE_REUSED, 100, 1.0);
	add(p, 0, LOMAS_SAMPLE_DANGLING, 0, 1.0);
	/*
	 * SD(10) = 10 * 3/4 = 7.5; SD(100) = 7.5 + 90 * 2/4 = 52.5. A stack
	 * distance is a whole number of lines, so estimates round to the
	 * nearest: 7.5 misses in 8 lines, not in 9; 52.5 in 53, not in 54.
	 */
	struct {
		uint64_t L;
		double want;
	} cases[] = {{1, 0.5}, {7, 0.5}, {8, 0.5}, {9, 0.25}, {53, 0.25}, {54, 0.0}, {1000, 0.0}};
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		assert_int_equal(
		    ratio_opts(p, LOMAS_POLICY_LRU, cases[i].L * 8, 0, &STATIONARY, &r), 0);
		assert_true(fabs(r - cases[i].want) < 1e-12);
		assert_int_equal(ratio_opts(p, LOMAS_POLICY_LRU, cases[i].L * 8, LOMAS_MODEL_COLD,
		                            &STATIONARY, &r),
		                 0);
		assert_true(fabs(r - cases[i].want - 0.25) < 1e-12);
	}
	lomas_profile_free(p);
}

/* A cyclic walk over K lines: every distance K - 1; LRU misses iff L <= K - 1. */
static void test_lru_cliff(void **state)
{
	uint64_t refs[1] = {100000};
	double r;
	(void)state;
	lomas_profile *p = mkprofile(64, 1, refs);
	for (int i = 0; i < 300; i++)
		add(p, 0, LOMAS_SAMPLE_REUSED, 999, 10.0);
	assert_int_equal(ratio_opts(p, LOMAS_POLICY_LRU, 999 * 64, 0, &STATIONARY, &r), 0);
	assert_true(r == 1.0);
	assert_int_equal(ratio_opts(p, LOMAS_POLICY_LRU, 1000 * 64, 0, &STATIONARY, &r), 0);
	assert_true(r == 0.0);
	/* Random replacement has no cliff: misses below K lines, but not all. */
	assert_int_equal(ratio_opts(p, LOMAS_POLICY_RANDOM, 900 * 64, 0, &STATIONARY, &r), 0);
	assert_true(r > 0.05 && r < 0.5);
	assert_true(fabs(g_ref(p, 0, 900, r)) < 1e-10);
	assert_int_equal(ratio_opts(p, LOMAS_POLICY_RANDOM, 600 * 64, 0, &STATIONARY, &r), 0);
	assert_true(r > 0.5 && r < 1.0);
	assert_true(fabs(g_ref(p, 0, 600, r)) < 1e-10);
	lomas_profile_free(p);
}

/* Window ratios are averaged with the windows' reference counts. */
static void test_window_weighting(void **state)
{
	uint64_t refs[3] = {3000, 1000, 5000};
	double r;
	(void)state;
	lomas_profile *p = mkprofile(64, 3, refs);
	for (int i = 0; i < 20; i++) {
		add(p, 0, LOMAS_SAMPLE_REUSED, 1000000, 1.0); /* always misses in 64 lines */
		add(p, 1, LOMAS_SAMPLE_REUSED, 0, 5.0);       /* never misses */
	}
	/* Window 2 has no samples and takes no part. */
	for (int pol = 0; pol < 2; pol++) {
		assert_int_equal(ratio_opts(p, pol, 4096, 0, &STATIONARY, &r), 0);
		assert_true(fabs(r - 0.75) < 1e-6);
	}
	lomas_profile_free(p);
}

static void test_censored(void **state)
{
	uint64_t refs[2] = {1000, 1000};
	double r;
	(void)state;
	lomas_profile *p = mkprofile(64, 2, refs);
	/* Window 0: censored only: a miss in every cache, with or without cold. */
	for (int i = 0; i < 10; i++)
		add(p, 0, LOMAS_SAMPLE_CENSORED, 0, 1.0);
	/* Window 1: half censored, half distance 0. */
	for (int i = 0; i < 10; i++) {
		add(p, 1, LOMAS_SAMPLE_CENSORED, 0, 1.0);
		add(p, 1, LOMAS_SAMPLE_REUSED, 0, 1.0);
	}
	for (int pol = 0; pol < 2; pol++) {
		for (unsigned fl = 0; fl <= 1; fl++) {
			assert_int_equal(ratio_opts(p, pol, 1ull << 30, fl, &STATIONARY, &r), 0);
			assert_true(fabs(r - 0.75) < 1e-9);
		}
	}
	lomas_profile_free(p);

	/* Dangling is a cold miss, censored is not: a dangling-only window. */
	p = mkprofile(64, 1, refs);
	for (int i = 0; i < 10; i++)
		add(p, 0, LOMAS_SAMPLE_DANGLING, 0, 1.0);
	for (int pol = 0; pol < 2; pol++) {
		assert_int_equal(ratio_opts(p, pol, 4096, 0, &STATIONARY, &r), 0);
		assert_true(r == 0.0);
		assert_int_equal(ratio_opts(p, pol, 4096, LOMAS_MODEL_COLD, &STATIONARY, &r), 0);
		assert_true(fabs(r - 1.0) < 1e-9);
	}
	lomas_profile_free(p);
}

static void test_errors(void **state)
{
	uint64_t refs[1] = {1000};
	uint64_t sizes[2] = {4096, 100};
	double r[2];
	lomas_profile *p = mkprofile(64, 1, refs);
	(void)state;
	/* Empty profile. */
	assert_int_equal(lomas_model_miss_ratio(p, LOMAS_POLICY_RANDOM, 4096, 0, 0, r),
	                 LOMAS_ERANGE);
	add(p, 0, LOMAS_SAMPLE_REUSED, 5, 1.0);
	assert_int_equal(lomas_model_miss_ratio(NULL, LOMAS_POLICY_RANDOM, 4096, 0, 0, r),
	                 LOMAS_EINVAL);
	assert_int_equal(lomas_model_miss_ratio(p, LOMAS_POLICY_RANDOM, 4096, 0, 0, NULL),
	                 LOMAS_EINVAL);
	assert_int_equal(lomas_model_curve(p, LOMAS_POLICY_RANDOM, NULL, 2, 0, 0, r), LOMAS_EINVAL);
	assert_int_equal(lomas_model_curve(p, LOMAS_POLICY_RANDOM, sizes, 1, 0, 0, NULL),
	                 LOMAS_EINVAL);
	assert_int_equal(lomas_model_miss_ratio(p, (lomas_policy)7, 4096, 0, 0, r), LOMAS_EINVAL);
	assert_non_null(strstr(lomas_error_message(), "policy"));
	assert_int_equal(lomas_model_miss_ratio(p, LOMAS_POLICY_LRU, 4096, 0, 0x10, r),
	                 LOMAS_EINVAL);
	assert_int_equal(lomas_model_miss_ratio(p, LOMAS_POLICY_LRU, 4096, 128, 0, r),
	                 LOMAS_EINVAL);
	assert_non_null(strstr(lomas_error_message(), "64-byte"));
	assert_non_null(strstr(lomas_error_message(), "128-byte"));
	assert_int_equal(lomas_model_miss_ratio(p, LOMAS_POLICY_LRU, 0, 0, 0, r), LOMAS_EINVAL);
	assert_int_equal(lomas_model_curve(p, LOMAS_POLICY_LRU, sizes, 2, 0, 0, r), LOMAS_EINVAL);
	assert_non_null(strstr(lomas_error_message(), "100"));
	assert_int_equal(lomas_model_miss_ratio(p, LOMAS_POLICY_LRU, 4096, 64, 0, r), LOMAS_OK);
	assert_int_equal(lomas_model_curve(p, LOMAS_POLICY_LRU, sizes, 0, 0, 0, r), LOMAS_OK);
	/* A sample naming a window that does not exist. */
	add(p, 0, LOMAS_SAMPLE_REUSED, 5, 1.0);
	p->samples.items[1].window = 9;
	assert_int_equal(lomas_model_miss_ratio(p, LOMAS_POLICY_LRU, 4096, 0, 0, r), LOMAS_EFORMAT);
	lomas_profile_free(p);
}

static void test_default_sizes(void **state)
{
	uint64_t s[100];
	size_t n = 0;
	(void)state;
	assert_int_equal(lomas_model_default_sizes(64, s, 100, &n), LOMAS_OK);
	assert_int_equal(n, 81);
	assert_int_equal(s[0], 1024);
	assert_int_equal(s[4], 2048);
	assert_int_equal(s[80], 1ull << 30);
	/* 2^10.25 = 1217.7 bytes = 19.03 lines -> 1216; 2^10.75 = 1722.2 -> 27 lines. */
	assert_int_equal(s[1], 19 * 64);
	assert_int_equal(s[3], 27 * 64);
	for (size_t i = 0; i < 81; i++) {
		double want = pow(2.0, 10 + i / 4.0);
		assert_true(s[i] % 64 == 0);
		assert_true(fabs((double)s[i] - want) <= 32.0);
	}
	/* cap limits what is written, *n is the full count. */
	s[3] = 777;
	assert_int_equal(lomas_model_default_sizes(64, s, 3, &n), LOMAS_OK);
	assert_int_equal(n, 81);
	assert_int_equal(s[3], 777);
	assert_int_equal(lomas_model_default_sizes(64, NULL, 0, &n), LOMAS_OK);
	assert_int_equal(n, 81);
	/* Big lines: never below one line. */
	assert_int_equal(lomas_model_default_sizes(65536, s, 100, &n), LOMAS_OK);
	assert_int_equal(s[0], 65536);
	assert_int_equal(s[80], 1ull << 30);
	assert_int_equal(lomas_model_default_sizes(96, s, 100, &n), LOMAS_EINVAL);
	assert_int_equal(lomas_model_default_sizes(4, s, 100, &n), LOMAS_EINVAL);
	assert_int_equal(lomas_model_default_sizes(64, s, 100, NULL), LOMAS_EINVAL);
}

/*
 * Small pieces (5 samples each, as phase-guided sampling leaves at its lower
 * rate) of two behaviours in stretches of 30 pieces: every segment holds one
 * behaviour (the stretches are cut where they change, not in blocks of 64
 * samples from wherever the small pieces began), and 240 small pieces of one
 * behaviour stay one segment.
 */
static void segment_small_run(bool alternate, uint32_t *group, size_t *ngroups)
{
	enum { PIECES = 240, PER = 5, STRETCH = 30 };
	uint32_t sp[PIECES * PER];
	uint8_t bin[PIECES * PER];
	model_piece items[PIECES];
	size_t toff[2] = {0, PIECES};
	model_pieces pc = {.items = items, .n = PIECES, .toff = toff, .nthreads = 1};
	uint64_t x = 12345;
	for (size_t i = 0; i < PIECES; i++)
		items[i] =
		    (model_piece){.start = i * 1000, .refs = 1000, .thread = 0, .window = i / 3};
	for (size_t k = 0; k < PIECES * PER; k++) {
		size_t piece = k / PER;
		bool b = alternate && (piece / STRETCH) % 2 == 1;
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		sp[k] = (uint32_t)piece;
		if ((x >> 33) % 10 == 0)
			bin[k] = 10; /* shared by both */
		else
			bin[k] = (uint8_t)((b ? 18 : 2) + (x >> 40) % 3);
	}
	assert_int_equal(model_segment(sp, bin, PIECES * PER, &pc, 0.01 / PIECES, group, ngroups),
	                 LOMAS_OK);
}

static void test_segment_small_pieces(void **state)
{
	uint32_t g[240];
	size_t ng = 0;
	(void)state;
	segment_small_run(true, g, &ng);
	/* 8 stretches: at least 8 segments, none across a stretch's boundary. */
	assert_true(ng >= 8);
	for (size_t i = 30; i < 240; i += 30)
		assert_true(g[i] != g[i - 1]);
	/* And no spurious cuts: at most one more segment a stretch. */
	assert_true(ng <= 16);
	segment_small_run(false, g, &ng);
	assert_int_equal(ng, 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_f_numerics),      cmocka_unit_test(test_statcache_root),
	    cmocka_unit_test(test_statcache_zero),  cmocka_unit_test(test_monotone_and_curve),
	    cmocka_unit_test(test_statstack_exact), cmocka_unit_test(test_lru_cliff),
	    cmocka_unit_test(test_curve_edges),     cmocka_unit_test(test_window_weighting),
	    cmocka_unit_test(test_censored),        cmocka_unit_test(test_errors),
	    cmocka_unit_test(test_default_sizes),   cmocka_unit_test(test_segment_small_pieces),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

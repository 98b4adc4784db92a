/*
 * Unit tests for the trace clock (lib/trace/trace_clock.c). Every sample is
 * checked against a brute-force forward scan of the same reference list,
 * computed here independently of the library.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "trace/trace.h"

/* ------------------------------------------------------------ test helpers */

typedef struct ref {
	uint64_t tid, addr, pc;
	int kind;
} ref;

/* The test's own generator (xorshift64*), independent of the library's rng. */
static uint64_t trng_state = 0x1234567887654321ull;
static uint64_t trng(void)
{
	trng_state ^= trng_state >> 12;
	trng_state ^= trng_state << 25;
	trng_state ^= trng_state >> 27;
	return trng_state * 0x2545f4914f6cdd1dull;
}

static ref *refs_alloc(size_t n)
{
	ref *r = calloc(n, sizeof *r);
	assert_non_null(r);
	return r;
}

/* Fill r[i] for one of several access patterns, addresses inside 64-byte lines. */
enum pattern { PAT_CYCLIC, PAT_RANDOM, PAT_MIX };

static bool scatter; /* spread line numbers over a large range */

static void gen(ref *r, size_t n, enum pattern pat, uint64_t lines, const uint64_t *tids,
                size_t ntids)
{
	uint64_t cyc = 0;
	for (size_t i = 0; i < n; i++) {
		uint64_t line;
		enum pattern p = pat;
		if (pat == PAT_MIX)
			p = (trng() % 3 == 0) ? PAT_RANDOM : PAT_CYCLIC;
		if (p == PAT_CYCLIC)
			line = cyc++ % lines;
		else
			line = trng() % lines;
		/* A hot set of 4 lines touched often makes short distances. */
		if (pat == PAT_MIX && trng() % 5 == 0)
			line = lines + trng() % 4;
		/*
		 * Scattered patterns spread lines over 2^40 (a bijection mod 2^40), so
		 * the library's watch table sees colliding hashes, not consecutive keys.
		 */
		if (scatter)
			line = (line * 0xbf58476d1ce4e5b9ull) & ((1ull << 40) - 1);
		r[i].addr = 0x7f0000000000ull + line * 64 + trng() % 64;
		r[i].pc = 0x400000 + (trng() % 97) * 4;
		r[i].kind = (int)(trng() & 1);
		r[i].tid = tids ? tids[trng() % ntids] : 0;
	}
}

/* Ground truth, per reference: profile thread index (first appearance) and clock. */
typedef struct truth {
	uint32_t *thread;  /* [n] */
	uint64_t *clock;   /* [n] */
	size_t **by_clock; /* [threads][refs]: global index of a thread's clock */
	uint64_t tids[64];
	uint64_t refs[64];
	size_t nthreads;
} truth;

static void truth_build(truth *g, const ref *r, size_t n)
{
	memset(g, 0, sizeof *g);
	g->thread = calloc(n, sizeof *g->thread);
	g->clock = calloc(n, sizeof *g->clock);
	assert_non_null(g->thread);
	assert_non_null(g->clock);
	for (size_t i = 0; i < n; i++) {
		size_t k;
		for (k = 0; k < g->nthreads && g->tids[k] != r[i].tid; k++)
			;
		if (k == g->nthreads) {
			assert_true(k < 64);
			g->tids[g->nthreads++] = r[i].tid;
		}
		g->thread[i] = (uint32_t)k;
		g->clock[i] = g->refs[k]++;
	}
	g->by_clock = calloc(g->nthreads ? g->nthreads : 1, sizeof *g->by_clock);
	for (size_t k = 0; k < g->nthreads; k++)
		g->by_clock[k] = calloc(g->refs[k], sizeof(size_t));
	for (size_t i = 0; i < n; i++)
		g->by_clock[g->thread[i]][g->clock[i]] = i;
}

static void truth_free(truth *g)
{
	for (size_t k = 0; k < g->nthreads; k++)
		free(g->by_clock[k]);
	free(g->by_clock);
	free(g->thread);
	free(g->clock);
}

static lomas_config *cfg_make(const char *period, uint64_t seed)
{
	lomas_config *cfg;
	char buf[32];
	assert_int_equal(lomas_config_new(&cfg), LOMAS_OK);
	assert_int_equal(lomas_config_set(cfg, "period", period), LOMAS_OK);
	snprintf(buf, sizeof buf, "%llu", (unsigned long long)seed);
	assert_int_equal(lomas_config_set(cfg, "seed", buf), LOMAS_OK);
	return cfg;
}

static lomas_profile *run(const lomas_config *cfg, const ref *r, size_t n)
{
	lomas_trace *t;
	lomas_profile *p;
	assert_int_equal(lomas_trace_new(cfg, &t), LOMAS_OK);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(
		    lomas_trace_ref(t, r[i].tid, r[i].addr, r[i].pc, (lomas_ref_kind)r[i].kind),
		    LOMAS_OK);
	assert_int_equal(lomas_trace_finish(t, &p), LOMAS_OK);
	lomas_trace_free(t);
	assert_int_equal(profile_validate(p), LOMAS_OK);
	return p;
}

/* Sort key for the ground truth: references grouped by line, in order. */
typedef struct keyed {
	uint64_t line;
	size_t i;
} keyed;

static int keyed_cmp(const void *a, const void *b)
{
	const keyed *x = a, *y = b;
	if (x->line != y->line)
		return x->line < y->line ? -1 : 1;
	return x->i < y->i ? -1 : x->i > y->i;
}

/*
 * Forward reuse of every reference by brute force over the references to the
 * same line: next[i] = index of the next reference by the same thread to the
 * line (SIZE_MAX if none), cross[i] = another thread touched it in between.
 */
static void forward_truth(const ref *r, size_t n, uint32_t line_size, size_t *next, char *cross)
{
	keyed *k = calloc(n ? n : 1, sizeof *k);
	assert_non_null(k);
	for (size_t i = 0; i < n; i++)
		k[i] = (keyed){r[i].addr / line_size, i};
	qsort(k, n, sizeof *k, keyed_cmp);
	for (size_t q = 0; q < n; q++) {
		size_t i = k[q].i;
		next[i] = SIZE_MAX;
		cross[i] = 0;
		for (size_t u = q + 1; u < n && k[u].line == k[q].line; u++) {
			if (r[k[u].i].tid == r[i].tid) {
				next[i] = k[u].i;
				break;
			}
			cross[i] = 1;
		}
	}
	free(k);
}

/*
 * Check every sample of p against the brute-force truth for r: start clock,
 * addr, pc, kind, thread, end, end_pc, state, cross-thread flag and weight.
 * Returns the number of samples; all_sampled demands one sample per reference.
 */
static size_t check_exact(const lomas_profile *p, const ref *r, size_t n, uint32_t line_size,
                          double weight, bool all_sampled)
{
	truth g;
	char *seen = calloc(n ? n : 1, 1);
	size_t *next = calloc(n ? n : 1, sizeof *next);
	char *cross = calloc(n ? n : 1, 1);
	assert_non_null(seen);
	assert_non_null(next);
	assert_non_null(cross);
	truth_build(&g, r, n);
	forward_truth(r, n, line_size, next, cross);
	assert_int_equal(p->threads.n, g.nthreads);
	for (size_t k = 0; k < g.nthreads; k++) {
		assert_int_equal(p->threads.items[k].tid, g.tids[k]);
		assert_int_equal(p->threads.items[k].refs, g.refs[k]);
	}
	for (size_t s = 0; s < p->samples.n; s++) {
		const lomas_sample *x = &p->samples.items[s];
		size_t i, j;
		assert_true(x->thread < g.nthreads);
		assert_true(x->start < g.refs[x->thread]);
		i = g.by_clock[x->thread][x->start];
		assert_false(seen[i]);
		seen[i] = 1;
		assert_int_equal(x->addr, r[i].addr);
		assert_int_equal(x->start_pc, r[i].pc);
		assert_int_equal(x->kind, r[i].kind);
		assert_true(x->weight == weight);
		j = next[i];
		if (j != SIZE_MAX) {
			assert_int_equal(x->state, LOMAS_SAMPLE_REUSED);
			assert_int_equal(x->end, g.clock[j]);
			assert_int_equal(x->end_pc, r[j].pc);
		} else {
			assert_int_equal(x->state, LOMAS_SAMPLE_DANGLING);
			assert_int_equal(x->end, LOMAS_CLOCK_NONE);
			assert_int_equal(x->end_pc, 0);
		}
		assert_int_equal(!!(x->flags & LOMAS_SAMPLE_CROSS_THREAD), cross[i]);
	}
	if (all_sampled)
		assert_int_equal(p->samples.n, n);
	free(seen);
	free(next);
	free(cross);
	truth_free(&g);
	return p->samples.n;
}

static const char *meta(const lomas_profile *p, const char *key)
{
	const char *v = NULL;
	assert_int_equal(lomas_profile_meta_get(p, key, &v), LOMAS_OK);
	return v;
}

/* ------------------------------------------------------------------- tests */

/* Period 1: every reference is a sample with its exact forward distance. */
static void test_exact_period1(void **state)
{
	const size_t n = 20000;
	ref *r = refs_alloc(n);
	lomas_config *cfg = cfg_make("1", 1);
	(void)state;
	for (int pat = PAT_CYCLIC; pat <= PAT_MIX; pat++) {
		lomas_profile *p;
		gen(r, n, (enum pattern)pat, 300, NULL, 0);
		p = run(cfg, r, n);
		check_exact(p, r, n, 64, 1.0, true);
		assert_string_equal(meta(p, "clock"), "trace");
		assert_string_equal(meta(p, "period"), "1");
		assert_string_equal(meta(p, "period_mode"), "fixed");
		assert_string_equal(meta(p, "seed"), "1");
		assert_string_equal(meta(p, "line_size"), "64");
		assert_string_equal(meta(p, "window"), "256");
		assert_string_equal(meta(p, "refs"), "20000");
		lomas_profile_free(p);
	}
	/* A pure cycle of L lines: every reuse has distance L - 1. */
	gen(r, n, PAT_CYCLIC, 50, NULL, 0);
	{
		lomas_profile *p = run(cfg, r, n);
		for (size_t s = 0; s < p->samples.n; s++) {
			const lomas_sample *x = &p->samples.items[s];
			if (x->start + 50 < n)
				assert_int_equal(sample_distance(x), 49);
			else
				assert_int_equal(x->state, LOMAS_SAMPLE_DANGLING);
		}
		lomas_profile_free(p);
	}
	lomas_config_free(cfg);
	free(r);
}

/* Period 10 and 100: each sampled reference is exact; the count is about n/period. */
static void test_exact_sampled(void **state)
{
	const size_t n = 200000;
	const char *periods[] = {"10", "100"};
	ref *r = refs_alloc(n);
	(void)state;
	for (int k = 0; k < 2; k++) {
		double per = atof(periods[k]);
		lomas_config *cfg = cfg_make(periods[k], 7 + k);
		for (int pat = PAT_CYCLIC; pat <= PAT_MIX; pat++) {
			lomas_profile *p;
			size_t got;
			double expect = n / per, sd = sqrt(n * (1 / per) * (1 - 1 / per));
			gen(r, n, (enum pattern)pat, 1000, NULL, 0);
			p = run(cfg, r, n);
			got = check_exact(p, r, n, 64, per, false);
			assert_true(fabs((double)got - expect) < 6 * sd);
			lomas_profile_free(p);
		}
		lomas_config_free(cfg);
	}
	free(r);
}

/* Several interleaved threads: per-thread clocks, per-thread reuse, cross-thread flags. */
static void test_threads(void **state)
{
	const size_t n = 30000;
	const uint64_t tids[] = {1000, 7, 0xdeadbeefcafeull, UINT64_MAX};
	ref *r = refs_alloc(n);
	(void)state;
	for (int k = 0; k < 3; k++) {
		const char *per = k == 0 ? "1" : k == 1 ? "5" : "50";
		lomas_config *cfg = cfg_make(per, 99);
		lomas_profile *p;
		size_t crossed = 0;
		scatter = k == 1;
		gen(r, n, k == 2 ? PAT_MIX : PAT_RANDOM, 200, tids, 4);
		scatter = false;
		p = run(cfg, r, n);
		check_exact(p, r, n, 64, atof(per), k == 0);
		for (size_t s = 0; s < p->samples.n; s++)
			crossed += !!(p->samples.items[s].flags & LOMAS_SAMPLE_CROSS_THREAD);
		assert_true(crossed > 0); /* the check above is not vacuous */
		lomas_profile_free(p);
		lomas_config_free(cfg);
	}
	free(r);
}

/* A hand-written trace with known answers, line size 128. */
static void test_small_known(void **state)
{
	/* thread A=5, B=9; lines of 128 bytes */
	static const ref r[] = {
	    {5, 0x1000, 0x10, 0}, /* A0 line 0x20 */
	    {9, 0x1010, 0x20, 1}, /* B0 line 0x20: cross for A0 */
	    {5, 0x2000, 0x11, 0}, /* A1 line 0x40 */
	    {5, 0x107f, 0x12, 1}, /* A2 line 0x20: ends A0 (distance 1) */
	    {9, 0x1080, 0x21, 0}, /* B1 line 0x21 */
	    {9, 0x1000, 0x22, 0}, /* B2 line 0x20: ends B0 (distance 1) */
	};
	lomas_config *cfg = cfg_make("1", 3);
	lomas_profile *p;
	(void)state;
	assert_int_equal(lomas_config_set(cfg, "line_size", "128"), LOMAS_OK);
	p = run(cfg, r, 6);
	assert_int_equal(p->samples.n, 6);
	assert_int_equal(p->threads.n, 2);
	assert_int_equal(p->threads.items[0].tid, 5);
	assert_int_equal(p->threads.items[0].refs, 3);
	assert_int_equal(p->threads.items[1].tid, 9);
	assert_int_equal(p->threads.items[1].refs, 3);
	/* samples appear in reference order */
	assert_int_equal(p->samples.items[0].thread, 0);
	assert_int_equal(p->samples.items[0].start, 0);
	assert_int_equal(p->samples.items[0].end, 2);
	assert_int_equal(p->samples.items[0].end_pc, 0x12);
	/* reused, with their exact stack distances: A1's line, B1's line */
	assert_int_equal(p->samples.items[0].flags,
	                 LOMAS_SAMPLE_CROSS_THREAD | LOMAS_SAMPLE_EXACT_SD);
	assert_int_equal(p->samples.items[0].reserved, 1);
	assert_int_equal(p->samples.items[1].thread, 1);
	assert_int_equal(p->samples.items[1].end, 2);
	assert_int_equal(p->samples.items[1].end_pc, 0x22);
	assert_int_equal(p->samples.items[1].flags,
	                 LOMAS_SAMPLE_CROSS_THREAD | LOMAS_SAMPLE_EXACT_SD); /* by A2 */
	assert_int_equal(p->samples.items[1].reserved, 1);
	assert_int_equal(p->samples.items[1].kind, LOMAS_REF_STORE);
	assert_int_equal(p->samples.items[2].state, LOMAS_SAMPLE_DANGLING);
	assert_int_equal(p->samples.items[3].state, LOMAS_SAMPLE_DANGLING);
	assert_int_equal(p->samples.items[3].flags, LOMAS_SAMPLE_CROSS_THREAD); /* by B2 */
	assert_int_equal(p->samples.items[5].flags, 0);
	check_exact(p, r, 6, 128, 1.0, true);
	lomas_profile_free(p);
	lomas_config_free(cfg);
}

/* Same seed and input → identical profile; another seed → different samples. */
static void test_deterministic(void **state)
{
	const size_t n = 50000;
	ref *r = refs_alloc(n);
	lomas_config *a = cfg_make("37", 12345), *b = cfg_make("37", 12346);
	lomas_profile *p1, *p2, *p3;
	(void)state;
	gen(r, n, PAT_MIX, 500, NULL, 0);
	p1 = run(a, r, n);
	p2 = run(a, r, n);
	p3 = run(b, r, n);
	assert_int_equal(p1->samples.n, p2->samples.n);
	assert_memory_equal(p1->samples.items, p2->samples.items,
	                    p1->samples.n * sizeof(lomas_sample));
	assert_int_equal(p1->windows.n, p2->windows.n);
	assert_memory_equal(p1->windows.items, p2->windows.items,
	                    p1->windows.n * sizeof(lomas_window));
	assert_false(p1->samples.n == p3->samples.n &&
	             memcmp(p1->samples.items, p3->samples.items,
	                    p1->samples.n * sizeof(lomas_sample)) == 0);
	lomas_profile_free(p1);
	lomas_profile_free(p2);
	lomas_profile_free(p3);
	lomas_config_free(a);
	lomas_config_free(b);
	free(r);
}

/* The gaps between samples are geometric with mean P: mean, variance and P(gap <= P). */
static void test_gaps_geometric(void **state)
{
	const size_t n = 1000000;
	const double P = 50;
	lomas_config *cfg = cfg_make("50", 2024);
	lomas_trace *t;
	lomas_profile *p;
	double sum = 0, sum2 = 0, le = 0, m, v, ng;
	uint64_t prev = UINT64_MAX; /* gap of the first sample counts from clock -1 */
	(void)state;
	assert_int_equal(lomas_trace_new(cfg, &t), LOMAS_OK);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(lomas_trace_ref(t, 3, i * 64, 0, LOMAS_REF_LOAD), LOMAS_OK);
	assert_int_equal(lomas_trace_finish(t, &p), LOMAS_OK);
	lomas_trace_free(t);
	ng = (double)p->samples.n;
	assert_true(ng > 15000);
	for (size_t s = 0; s < p->samples.n; s++) {
		double gap = (double)(p->samples.items[s].start - prev);
		assert_true(gap >= 1);
		sum += gap;
		sum2 += gap * gap;
		le += gap <= P;
		prev = p->samples.items[s].start;
		assert_int_equal(p->samples.items[s].state, LOMAS_SAMPLE_DANGLING);
	}
	m = sum / ng;
	v = sum2 / ng - m * m;
	/* geometric(p = 1/P) on {1, 2, ...}: mean P, variance P^2 - P */
	assert_true(fabs(m - P) < 6 * sqrt((P * P - P) / ng));
	assert_true(fabs(v / (P * P - P) - 1) < 0.1);
	assert_true(fabs(le / ng - (1 - pow(1 - 1 / P, P))) < 0.02);
	/* fraction sampled ~ 1/P */
	assert_true(fabs(ng / n - 1 / P) < 6 * sqrt(n / P * (1 - 1 / P)) / n);
	lomas_profile_free(p);
	lomas_config_free(cfg);
}

/* Auto period: between 15k and 40k samples, sum of weights ~ references, all exact. */
static void test_auto_period(void **state)
{
	const size_t n = 2000000;
	const uint64_t tids[] = {1, 2};
	ref *r = refs_alloc(n);
	lomas_config *cfg = cfg_make("auto", 5);
	lomas_profile *p;
	lomas_profile_info info = LOMAS_PROFILE_INFO_INIT;
	double per;
	(void)state;
	gen(r, n, PAT_MIX, 2000, tids, 2);
	p = run(cfg, r, n);
	assert_int_equal(lomas_profile_info_get(p, &info), LOMAS_OK);
	assert_true(info.samples >= 15000 && info.samples < 40000);
	assert_true(fabs(info.sample_weight / (double)n - 1) < 0.04);
	assert_string_equal(meta(p, "period_mode"), "auto");
	per = atof(meta(p, "period"));
	assert_true(per >= 2 && (uint64_t)per == ((uint64_t)per & -(uint64_t)per)); /* power of 2 */
	assert_true(fabs(per * (double)info.samples / (double)n - 1) < 0.04);
	assert_true(atof(meta(p, "window")) == 256 * per);
	check_exact(p, r, n, 64, per, false);
	lomas_profile_free(p);

	/* A short run never thins: the exact histogram at period 1. */
	p = run(cfg, r, 30000);
	assert_string_equal(meta(p, "period"), "1");
	check_exact(p, r, 30000, 64, 1.0, true);
	lomas_profile_free(p);
	lomas_config_free(cfg);
	free(r);
}

/* Windows cover each thread's clock exactly; samples lie in their windows. */
static void test_windows(void **state)
{
	ref *r = refs_alloc(6001);
	const uint64_t tids[] = {10, 20, 30};
	size_t k = 0;
	lomas_config *cfg = cfg_make("3", 8);
	lomas_profile *p;
	uint64_t sums[3] = {0, 0, 0};
	(void)state;
	assert_int_equal(lomas_config_set(cfg, "window", "1000"), LOMAS_OK);
	/* thread 10: 2500 refs, 20: 3000 refs, 30: 1 ref (interleaved) */
	for (size_t i = 0; i < 3000; i++) {
		if (i < 2500)
			r[k++] = (ref){tids[0], i * 8, 1, 0};
		r[k++] = (ref){tids[1], i * 16, 2, 1};
		if (i == 1234)
			r[k++] = (ref){tids[2], 64, 3, 0};
	}
	assert_int_equal(k, 5501);
	p = run(cfg, r, k);
	check_exact(p, r, k, 64, 3.0, false);
	assert_string_equal(meta(p, "window"), "1000");
	assert_int_equal(p->windows.n, 3 + 3 + 1);
	for (size_t w = 0; w < p->windows.n; w++) {
		const lomas_window *x = &p->windows.items[w];
		uint64_t th_refs = p->threads.items[x->thread].refs;
		assert_int_equal(x->start, sums[x->thread]);
		assert_int_equal(x->start % 1000, 0);
		assert_int_equal(x->refs, th_refs - x->start < 1000 ? th_refs - x->start : 1000);
		sums[x->thread] += x->refs;
	}
	assert_int_equal(sums[0], 2500);
	assert_int_equal(sums[1], 3000);
	assert_int_equal(sums[2], 1);
	for (size_t s = 0; s < p->samples.n; s++) {
		const lomas_sample *x = &p->samples.items[s];
		const lomas_window *w = &p->windows.items[x->window];
		assert_int_equal(w->thread, x->thread);
		assert_true(x->start >= w->start && x->start < w->start + w->refs);
	}
	lomas_profile_free(p);
	lomas_config_free(cfg);
	free(r);
}

/*
 * max_samples_live: an independent model of the rule (close the oldest open
 * sample as CENSORED at its thread's reference count) checked sample by sample.
 */
static void check_censoring(const char *period, uint64_t max_live, const ref *r, size_t n)
{
	lomas_config *cfg = cfg_make(period, 77);
	char buf[32];
	lomas_profile *p;
	truth g;
	char *sampled = calloc(n, 1);
	size_t *open = calloc(n, sizeof *open), nopen = 0;
	uint64_t clocks[64] = {0};
	lomas_sample *want = calloc(n, sizeof *want);
	size_t *slot_of = calloc(n, sizeof *slot_of), nwant = 0, censored = 0;
	assert_non_null(sampled);
	assert_non_null(open);
	assert_non_null(want);
	assert_non_null(slot_of);
	snprintf(buf, sizeof buf, "%llu", (unsigned long long)max_live);
	assert_int_equal(lomas_config_set(cfg, "max_samples_live", buf), LOMAS_OK);
	p = run(cfg, r, n);
	truth_build(&g, r, n);
	/* Which references were sampled does not depend on censoring. */
	for (size_t s = 0; s < p->samples.n; s++)
		sampled[g.by_clock[p->samples.items[s].thread][p->samples.items[s].start]] = 1;
	for (size_t i = 0; i < n; i++) {
		uint32_t th = g.thread[i];
		clocks[th]++;
		for (size_t k = 0; k < nopen;) {
			size_t o = open[k];
			lomas_sample *w = &want[slot_of[o]];
			if (r[o].addr / 64 == r[i].addr / 64) {
				if (g.thread[o] == th) {
					w->state = LOMAS_SAMPLE_REUSED;
					w->end = g.clock[i];
					/* (its distance: test_exact_sd) */
					w->flags |= LOMAS_SAMPLE_EXACT_SD;
					memmove(open + k, open + k + 1,
					        (nopen - k - 1) * sizeof *open);
					nopen--;
					continue;
				}
				w->flags |= LOMAS_SAMPLE_CROSS_THREAD;
			}
			k++;
		}
		if (!sampled[i])
			continue;
		if (nopen == max_live) {
			lomas_sample *w = &want[slot_of[open[0]]];
			w->state = LOMAS_SAMPLE_CENSORED;
			w->end = clocks[g.thread[open[0]]];
			memmove(open, open + 1, (nopen - 1) * sizeof *open);
			nopen--;
			censored++;
		}
		slot_of[i] = nwant;
		want[nwant].start = g.clock[i];
		want[nwant].thread = th;
		want[nwant].state = LOMAS_SAMPLE_DANGLING;
		want[nwant].end = LOMAS_CLOCK_NONE;
		nwant++;
		open[nopen++] = i;
	}
	assert_int_equal(p->samples.n, nwant);
	assert_true(censored > 0);
	for (size_t s = 0; s < nwant; s++) {
		const lomas_sample *x = &p->samples.items[s];
		assert_int_equal(x->start, want[s].start);
		assert_int_equal(x->thread, want[s].thread);
		assert_int_equal(x->state, want[s].state);
		assert_int_equal(x->end, want[s].end);
		assert_int_equal(x->flags, want[s].flags);
	}
	{
		lomas_profile_info info = LOMAS_PROFILE_INFO_INIT;
		assert_int_equal(lomas_profile_info_get(p, &info), LOMAS_OK);
		assert_int_equal(info.censored, censored);
	}
	truth_free(&g);
	free(sampled);
	free(open);
	free(want);
	free(slot_of);
	lomas_profile_free(p);
	lomas_config_free(cfg);
}

static void test_max_samples_live(void **state)
{
	const size_t n = 20000;
	const uint64_t tids[] = {4, 5, 6};
	ref *r = refs_alloc(n);
	(void)state;
	/* A cycle of 10 lines with 4 slots: sample s is censored at clock s + 5. */
	gen(r, n, PAT_CYCLIC, 10, NULL, 0);
	{
		lomas_config *cfg = cfg_make("1", 1);
		lomas_profile *p;
		assert_int_equal(lomas_config_set(cfg, "max_samples_live", "4"), LOMAS_OK);
		p = run(cfg, r, n);
		for (size_t s = 0; s < n; s++) {
			const lomas_sample *x = &p->samples.items[s];
			if (s + 4 < n) {
				assert_int_equal(x->state, LOMAS_SAMPLE_CENSORED);
				assert_int_equal(x->end, s + 5);
			} else {
				assert_int_equal(x->state, LOMAS_SAMPLE_DANGLING);
			}
		}
		lomas_profile_free(p);
		lomas_config_free(cfg);
	}
	check_censoring("1", 4, r, n);
	gen(r, n, PAT_MIX, 100, tids, 3);
	check_censoring("1", 8, r, n);
	check_censoring("3", 5, r, n);
	check_censoring("20", 1, r, n);
	free(r);
}

/* Argument checks and the finished state. */
static void test_errors(void **state)
{
	lomas_trace *t;
	lomas_profile *p;
	lomas_config *cfg = cfg_make("1", 1);
	(void)state;
	assert_int_equal(lomas_trace_new(NULL, NULL), LOMAS_EINVAL);
	assert_int_equal(lomas_trace_ref(NULL, 0, 0, 0, LOMAS_REF_LOAD), LOMAS_EINVAL);
	assert_int_equal(lomas_trace_finish(NULL, &p), LOMAS_EINVAL);
	lomas_trace_free(NULL);
	cfg->line_size = 48; /* bypassing lomas_config_set */
	assert_int_equal(lomas_trace_new(cfg, &t), LOMAS_EINVAL);
	assert_null(t);
	cfg->line_size = 64;

	assert_int_equal(lomas_trace_new(NULL, &t), LOMAS_OK); /* defaults */
	assert_int_equal(lomas_trace_ref(t, 0, 0, 0, (lomas_ref_kind)2), LOMAS_EINVAL);
	assert_int_equal(lomas_trace_ref(t, 0, 0, 0, (lomas_ref_kind)-1), LOMAS_EINVAL);
	assert_int_equal(lomas_trace_ref(t, 0, 64, 0, LOMAS_REF_STORE), LOMAS_OK);
	assert_int_equal(lomas_trace_finish(t, NULL), LOMAS_EINVAL);
	assert_int_equal(lomas_trace_finish(t, &p), LOMAS_OK);
	assert_string_equal(meta(p, "period_mode"), "auto");
	assert_string_equal(meta(p, "refs"), "1");
	assert_int_equal(p->samples.n, 1);
	assert_int_equal(p->windows.n, 1);
	lomas_profile_free(p);
	assert_int_equal(lomas_trace_ref(t, 0, 64, 0, LOMAS_REF_STORE), LOMAS_ESTATE);
	assert_int_equal(lomas_trace_finish(t, &p), LOMAS_ESTATE);
	assert_null(p);
	lomas_trace_free(t);

	/* An empty run: no threads, no windows, no samples. */
	assert_int_equal(lomas_trace_new(cfg, &t), LOMAS_OK);
	assert_int_equal(lomas_trace_finish(t, &p), LOMAS_OK);
	assert_int_equal(p->threads.n, 0);
	assert_int_equal(p->windows.n, 0);
	assert_int_equal(p->samples.n, 0);
	assert_string_equal(meta(p, "refs"), "0");
	lomas_profile_free(p);
	lomas_trace_free(t);
	lomas_config_free(cfg);
}

/* Many lines watched at once (table growth, deletion) still give exact answers. */
static void test_large_footprint(void **state)
{
	const size_t n = 300000;
	ref *r = refs_alloc(n);
	lomas_config *cfg = cfg_make("1", 4);
	lomas_profile *p;
	(void)state;
	gen(r, n, PAT_RANDOM, 50000, NULL, 0);
	p = run(cfg, r, n);
	check_exact(p, r, n, 64, 1.0, true);
	lomas_profile_free(p);
	/* the same with lines scattered: hash collisions, deletions inside probe runs */
	scatter = true;
	for (int pat = PAT_CYCLIC; pat <= PAT_MIX; pat++) {
		gen(r, n, (enum pattern)pat, pat == PAT_CYCLIC ? 3000 : 20000, NULL, 0);
		p = run(cfg, r, n);
		check_exact(p, r, n, 64, 1.0, true);
		lomas_profile_free(p);
	}
	/* At period > 1 a reuse often deletes a line without re-adding it. */
	for (int k = 0; k < 2; k++) {
		lomas_config *c2 = cfg_make(k ? "3" : "2", 11);
		gen(r, n, PAT_RANDOM, 20000, NULL, 0);
		p = run(c2, r, n);
		check_exact(p, r, n, 64, k ? 3.0 : 2.0, false);
		lomas_profile_free(p);
		lomas_config_free(c2);
	}
	scatter = false;
	lomas_config_free(cfg);
	free(r);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_exact_period1),    cmocka_unit_test(test_exact_sampled),
	    cmocka_unit_test(test_threads),          cmocka_unit_test(test_small_known),
	    cmocka_unit_test(test_deterministic),    cmocka_unit_test(test_gaps_geometric),
	    cmocka_unit_test(test_auto_period),      cmocka_unit_test(test_windows),
	    cmocka_unit_test(test_max_samples_live), cmocka_unit_test(test_errors),
	    cmocka_unit_test(test_large_footprint),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

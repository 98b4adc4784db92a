/*
 * Accuracy of the model against exact simulators, on synthetic traces of
 * several shapes (cyclic, uniform random, strided, phased, mixed) whose
 * working sets span from under 4 KiB to tens of MiB.
 *
 * Everything but the model is done here, independently of liblomas: the
 * traces, exact LRU (stack distances with a Fenwick tree), exact random
 * replacement (direct simulation with a seeded RNG), and the sampling (a
 * geometric gap from our own RNG, exact forward distances, windows of
 * 256 x period references). Requirement: mean absolute error <= 1
 * percentage point over the default sizes from 4 KiB to 64 MiB, for both
 * policies, at 1-in-100 and 1-in-1000 sampling.
 *
 * LOMAS_TEST_VERBOSE=1 prints the exact and modelled curves size by size.
 * LOMAS_TEST_QUICK=1 shortens the traces to 2M references: only 1-in-100 is
 * checked (1-in-1000 would have too few samples) and the two largest working
 * sets shrink five-fold, since a trace only a few times longer than its
 * footprint is dominated by end effects.
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

#include "core/core.h"
#include "model/model.h"
#include "exact_sim.h"

#define LINE 64
#define MIN_BYTES 4096ull
#define MAX_BYTES (64ull << 20)
#define MAX_SIZES 81

static size_t trace_len(void)
{
	const char *q = getenv("LOMAS_TEST_QUICK");
	return q && *q && strcmp(q, "0") != 0 ? 2000000 : 16000000;
}

/* Our own RNG (splitmix64) and exact simulators: exact_sim.h. */

/* ---- traces: n references as dense line ids < *k ---- */

typedef enum { CYCLIC, UNIFORM, STRIDED, PHASES, MIXED } shape_kind;

typedef struct shape {
	const char *name;
	shape_kind kind;
	uint64_t a, b; /* shape parameters */
} shape;

static uint32_t *make_trace(const shape *s, size_t n, uint32_t *k)
{
	uint32_t *t = malloc(n * sizeof *t);
	uint64_t x = 0x5eed0000 + s->kind;
	*k = 1;
	assert_non_null(t);
	switch (s->kind) {
	case CYCLIC: /* a lines in a loop */
		for (size_t i = 0; i < n; i++)
			t[i] = (uint32_t)(i % s->a);
		*k = (uint32_t)s->a;
		break;
	case UNIFORM: /* a lines uniformly at random */
		for (size_t i = 0; i < n; i++)
			t[i] = (uint32_t)sm_below(&x, s->a);
		*k = (uint32_t)s->a;
		break;
	case STRIDED: /* a walk of stride b bytes over a buffer of a bytes */
		for (size_t i = 0; i < n; i++)
			t[i] = (uint32_t)(((uint64_t)i * s->b % s->a) / LINE);
		*k = (uint32_t)((s->a + LINE - 1) / LINE);
		break;
	case PHASES: {
		/*
		 * Phases of a references: uniform over 40 lines (2.5 KiB), a
		 * loop over 20000 lines (1.2 MiB), uniform over 6000 lines, a
		 * 16-byte stride over 1 MiB; each phase uses its own lines and
		 * runs several times, so that data is reused across phases.
		 */
		uint64_t loop = 0, walk = 0;
		const uint32_t base[4] = {0, 40, 20040, 26040};
		for (size_t i = 0; i < n; i++) {
			switch ((i / s->a) % 4) {
			case 0: t[i] = base[0] + (uint32_t)sm_below(&x, 40); break;
			case 1: t[i] = base[1] + (uint32_t)(loop++ % 20000); break;
			case 2: t[i] = base[2] + (uint32_t)sm_below(&x, 6000); break;
			default:
				t[i] = base[3] + (uint32_t)((walk * 16 % (1u << 20)) / LINE);
				walk++;
			}
		}
		*k = base[3] + (1u << 20) / LINE;
		break;
	}
	case MIXED: /* a hot set of a lines (60 %) interleaved with a stream over b lines */
	{
		uint64_t pos = 0;
		for (size_t i = 0; i < n; i++) {
			if (sm_unit(&x) <= 0.6)
				t[i] = (uint32_t)sm_below(&x, s->a);
			else
				t[i] = (uint32_t)(s->a + pos++ % s->b);
		}
		*k = (uint32_t)(s->a + s->b);
		break;
	}
	}
	return t;
}

/* ---- exact simulation (exact_sim.h) ---- */

/* The trace t[0..n) as exact_sim.h's trace (a view, not a copy). */
static sim_trace view(const uint32_t *t, size_t n, uint32_t k)
{
	return (sim_trace){.t = (uint32_t *)t, .n = n, .cap = n, .k = k};
}

/* Exact non-cold LRU misses at each of ns sizes; *cold = first touches. */
static void exact_lru(const uint32_t *t, size_t n, uint32_t k, const uint64_t *lines, size_t ns,
                      double *misses, uint64_t *cold)
{
	sim_trace v = view(t, n, k);
	uint64_t *hist = sim_lru_hist(&v, cold);
	for (size_t s = 0; s < ns; s++)
		misses[s] = sim_lru_misses(hist, k, lines[s]);
	free(hist);
}

static double exact_random(const uint32_t *t, size_t n, uint32_t k, uint64_t lines, uint64_t seed)
{
	sim_trace v = view(t, n, k);
	return sim_random_misses(&v, lines, seed);
}

/* ---- sampling: a profile like the trace clock would record ---- */

static lomas_profile *sample_trace(const uint32_t *t, const uint32_t *next, size_t n, double period,
                                   uint64_t seed, size_t *nsamples)
{
	lomas_profile *p;
	lomas_thread th = {.tid = 1, .refs = n};
	uint64_t wlen = (uint64_t)(256 * period), x = seed;
	double lq = log1p(-1.0 / period);
	assert_int_equal(lomas_profile_new(LINE, &p), LOMAS_OK);
	assert_int_equal(profile_add_thread(p, &th), LOMAS_OK);
	for (uint64_t s = 0; s < n; s += wlen) {
		lomas_window w = {.start = s, .refs = n - s < wlen ? n - s : wlen, .thread = 0};
		assert_int_equal(profile_add_window(p, &w), LOMAS_OK);
	}
	*nsamples = 0;
	/* Each reference is sampled with probability 1/period: geometric gaps. */
	for (uint64_t i = (uint64_t)floor(log(sm_unit(&x)) / lq); i < n;
	     i += (uint64_t)floor(log(sm_unit(&x)) / lq) + 1) {
		lomas_sample s;
		memset(&s, 0, sizeof s);
		s.start = i;
		s.addr = (uint64_t)t[i] * LINE;
		s.weight = period;
		s.window = (uint32_t)(i / wlen);
		if (next[i] != UINT32_MAX) {
			s.state = LOMAS_SAMPLE_REUSED;
			s.end = next[i];
		} else {
			s.state = LOMAS_SAMPLE_DANGLING;
			s.end = LOMAS_CLOCK_NONE;
		}
		assert_int_equal(profile_add_sample(p, &s), LOMAS_OK);
		(*nsamples)++;
	}
	return p;
}

static double mae(const double *a, const double *b, size_t n)
{
	double s = 0;
	for (size_t i = 0; i < n; i++)
		s += fabs(a[i] - b[i]);
	return s / (double)n;
}

/* Run one shape: exact curves, then the model at two sampling rates. */
static void check_shape(const shape *sh, bool check_cold)
{
	size_t n = trace_len(), nsz = 0, all;
	uint64_t def[MAX_SIZES], sizes[MAX_SIZES], lines[MAX_SIZES], cold;
	double lru[MAX_SIZES], rnd[MAX_SIZES], model[MAX_SIZES];
	uint32_t k = 0, *t, *next, *last;
	bool quick = n < 16000000;

	assert_int_equal(lomas_model_default_sizes(LINE, def, MAX_SIZES, &all), LOMAS_OK);
	for (size_t i = 0; i < all; i++) {
		if (def[i] >= MIN_BYTES && def[i] <= MAX_BYTES) {
			sizes[nsz] = def[i];
			lines[nsz++] = def[i] / LINE;
		}
	}
	assert_int_equal(nsz, 57);

	t = make_trace(sh, n, &k);
	exact_lru(t, n, k, lines, nsz, lru, &cold);
	for (size_t i = 0; i < nsz; i++) {
		rnd[i] = lines[i] >= k ? 0.0 : exact_random(t, n, k, lines[i], 99 + i);
		rnd[i] /= (double)n;
		lru[i] /= (double)n;
	}

	/* Exact forward reuse: next[i] = index of the next reference to t[i]. */
	next = malloc(n * sizeof *next);
	last = malloc(k * sizeof *last);
	assert_true(next && last);
	memset(last, 0xff, k * sizeof *last);
	for (size_t i = n; i-- > 0;) {
		next[i] = last[t[i]];
		last[t[i]] = (uint32_t)i;
	}

	const double periods[2] = {100.0, 1000.0};
	for (int pi = 0; pi < (quick ? 1 : 2); pi++) {
		size_t ns;
		lomas_profile *p = sample_trace(t, next, n, periods[pi], 1234 + pi, &ns);
		double e_r, e_l;
		if (!quick)
			assert_true(ns >= 10000);
		assert_int_equal(lomas_model_curve(p, LOMAS_POLICY_RANDOM, sizes, nsz, 0, 0, model),
		                 LOMAS_OK);
		e_r = mae(model, rnd, nsz);
		if (getenv("LOMAS_TEST_VERBOSE"))
			for (size_t i = 0; i < nsz; i++)
				printf("  %10llu random exact %.4f model %.4f\n",
				       (unsigned long long)sizes[i], rnd[i], model[i]);
		assert_int_equal(lomas_model_curve(p, LOMAS_POLICY_LRU, sizes, nsz, 0, 0, model),
		                 LOMAS_OK);
		e_l = mae(model, lru, nsz);
		if (getenv("LOMAS_TEST_VERBOSE"))
			for (size_t i = 0; i < nsz; i++)
				printf("  %10llu lru exact %.4f model %.4f\n",
				       (unsigned long long)sizes[i], lru[i], model[i]);
		printf("accuracy %-14s 1/%-5.0f %7zu samples  MAE random %.3f pp  lru %.3f pp",
		       sh->name, periods[pi], ns, 100 * e_r, 100 * e_l);
		/* StatStack over the whole profile, for comparison. */
		model_opts global = {.grouping = MODEL_GROUP_GLOBAL};
		assert_int_equal(
		    model_curve_opts(p, LOMAS_POLICY_LRU, sizes, nsz, 0, &global, model), LOMAS_OK);
		printf("  (lru whole-profile %.3f pp)", 100 * mae(model, lru, nsz));
		/* Phases are where per-window StatStack must be better. */
		if (sh->kind == PHASES)
			assert_true(e_l <= mae(model, lru, nsz));
		printf("\n");
		assert_true(e_r <= 0.01);
		assert_true(e_l <= 0.01);
		if (check_cold) {
			double rc[MAX_SIZES], lc[MAX_SIZES];
			for (size_t i = 0; i < nsz; i++) {
				rc[i] = rnd[i] + (double)cold / (double)n;
				lc[i] = lru[i] + (double)cold / (double)n;
			}
			assert_int_equal(lomas_model_curve(p, LOMAS_POLICY_RANDOM, sizes, nsz, 0,
			                                   LOMAS_MODEL_COLD, model),
			                 LOMAS_OK);
			e_r = mae(model, rc, nsz);
			assert_int_equal(lomas_model_curve(p, LOMAS_POLICY_LRU, sizes, nsz, 0,
			                                   LOMAS_MODEL_COLD, model),
			                 LOMAS_OK);
			e_l = mae(model, lc, nsz);
			printf(
			    "accuracy %-14s 1/%-5.0f cold included   MAE random %.3f pp  lru %.3f "
			    "pp (cold %.2f %%)\n",
			    sh->name, periods[pi], 100 * e_r, 100 * e_l,
			    100.0 * (double)cold / (double)n);
			assert_true(e_r <= 0.01);
			assert_true(e_l <= 0.01);
		}
		lomas_profile_free(p);
	}
	fflush(stdout);
	free(t);
	free(next);
	free(last);
}

static void test_cyclic(void **state)
{
	shape s = {"cyclic-188KiB", CYCLIC, 3000, 0};
	(void)state;
	check_shape(&s, false);
}

static void test_uniform_small(void **state)
{
	shape s = {"uniform-1.2MiB", UNIFORM, 20000, 0};
	(void)state;
	check_shape(&s, false);
}

static void test_strided(void **state)
{
	shape s = {"stride24-2.9MiB", STRIDED, 3000000, 24};
	(void)state;
	check_shape(&s, false);
}

static void test_uniform_large(void **state)
{
	/* The quick run is too short for 24 MiB (end effects): 4.9 MiB there. */
	bool quick = trace_len() < 16000000;
	shape s = {quick ? "uniform-4.9MiB" : "uniform-24MiB", UNIFORM, quick ? 80000 : 400000, 0};
	(void)state;
	check_shape(&s, true);
}

static void test_phases(void **state)
{
	/* Eight phases, each twice through the four kinds. */
	shape s = {"phases", PHASES, trace_len() / 8, 0};
	(void)state;
	check_shape(&s, true);
}

static void test_mixed(void **state)
{
	bool quick = trace_len() < 16000000;
	shape s = {"hot+stream", MIXED, 1000, quick ? 60000 : 300000};
	(void)state;
	check_shape(&s, false);
}

/*
 * A sweep of 5120 lines, two references a line, 20 times: a cache of 4096
 * or 4608 lines (256 / 288 KiB) holds 80 or 90 % of it. The footprint's
 * estimate from the dangling samples is 80 of them at period 64, +-9: with
 * a seed that draws 62 (F = 3968), the random curve kept 40 % of its
 * misses at 4096 lines (7.0 % for the exact 17.5 %), although every one of
 * 1500 long reuses sees 5119 lines. 8 seeds, both policies within 3 pp
 * of the exact simulation at both sizes: random -2.2 to +1.6 (before the
 * reuses' floor, seed 1 at 4608 lines: -3.4), LRU -2.5 to +1.3 (the
 * sampling noise of the long reuses' share, ~1500 of ~3200 samples).
 */
static void test_sweep_footprint(void **state)
{
	const uint32_t k = 5120;
	const size_t n = 20 * 2 * (size_t)k;
	const uint64_t sizes[2] = {4096 * LINE, 4608 * LINE};
	uint32_t *t = malloc(n * sizeof *t), *next = malloc(n * sizeof *next);
	uint32_t *last = malloc(k * sizeof *last);
	double rnd[2], ex_lru[2], model[2];
	uint64_t lines[2] = {4096, 4608}, cold;
	(void)state;
	assert_true(t && next && last);
	for (size_t i = 0; i < n; i++)
		t[i] = (uint32_t)(i / 2 % k);
	memset(last, 0xff, k * sizeof *last);
	for (size_t i = n; i-- > 0;) {
		next[i] = last[t[i]];
		last[t[i]] = (uint32_t)i;
	}
	exact_lru(t, n, k, lines, 2, ex_lru, &cold);
	for (int j = 0; j < 2; j++) {
		rnd[j] = 0.0;
		for (int r = 0; r < 3; r++)
			rnd[j] +=
			    exact_random(t, n, k, lines[j], 7 + (uint64_t)r) / 3.0 / (double)n;
		ex_lru[j] /= (double)n;
	}
	for (uint64_t seed = 1; seed <= 8; seed++) {
		size_t ns;
		lomas_profile *p = sample_trace(t, next, n, 64.0, seed, &ns);
		for (int lru = 0; lru < 2; lru++) {
			const double *ex = lru ? ex_lru : rnd;
			assert_int_equal(
			    lomas_model_curve(p, lru ? LOMAS_POLICY_LRU : LOMAS_POLICY_RANDOM,
			                      sizes, 2, 0, 0, model),
			    LOMAS_OK);
			for (int j = 0; j < 2; j++) {
				printf(
				    "sweep seed %llu %4llu lines %-6s exact %.3f model %.3f (%+.2f "
				    "pp)\n",
				    (unsigned long long)seed, (unsigned long long)lines[j],
				    lru ? "lru" : "random", 100 * ex[j], 100 * model[j],
				    100 * (model[j] - ex[j]));
				assert_true(fabs(model[j] - ex[j]) <= 0.03);
			}
		}
		lomas_profile_free(p);
	}
	free(t);
	free(next);
	free(last);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_cyclic),          cmocka_unit_test(test_uniform_small),
	    cmocka_unit_test(test_strided),         cmocka_unit_test(test_uniform_large),
	    cmocka_unit_test(test_phases),          cmocka_unit_test(test_mixed),
	    cmocka_unit_test(test_sweep_footprint),
	};
	if (getenv("LOMAS_TEST_FILTER")) /* one test while working on it */
		cmocka_set_test_filter(getenv("LOMAS_TEST_FILTER"));
	return cmocka_run_group_tests(tests, NULL, NULL);
}

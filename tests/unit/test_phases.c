/*
 * Phase detection (lomas_profile_phases) and each phase's own curve
 * (lomas_profile_phase_select + lomas_model_curve), against the generator
 * that made the trace and exact LRU simulation of each phase's own
 * references (exact_sim.h, independent of liblomas).
 *
 * Workloads, recorded through the trace clock (lomas_trace_ref, period 16,
 * windows of 4096 references), each phase a segment of 20 windows:
 *   A: a sweep of a small array (256 lines, 16 KiB), one loop's pcs;
 *   B: a sweep of a large array (16384 lines, 1 MiB), another loop;
 *   C: random accesses over 8192 lines (512 KiB), a third.
 *   S: a slow sweep of a large array (12288 lines, 8 references a line:
 *      512 lines a window, a different 512 every window), a fourth loop;
 *   H: random reads of a hot array (256 lines), a fifth.
 * Two-phase: A B A B ...; three-phase: A B C A B C ...; slow sweep: S H S H ...
 * Requirements: as many phases found as the generator has (phase 0 aside);
 * each found phase maps to one generator phase (the majority of its
 * windows), distinct phases to distinct ones; >= 90 % of the non-transition
 * windows carry the phase their generator phase maps to; each phase's
 * curve (the mean absolute error over the 57 sizes 4 KiB..64 MiB) within
 * 1.5 percentage points of the exact LRU curve of that phase's own
 * references, no size more than 5 points off; A's cache demand is its 256
 * sets (at most 256, and most of them), B's nearly all 1024.
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

#include "exact_sim.h"
#include "lomas/lomas.h"

#define WINDOW 4096
#define SEG_WINDOWS 20
#define SEG (WINDOW * SEG_WINDOWS)
#define SMALL 256
#define LARGE 16384
#define RANDOM 8192
#define BASE_A 0u
#define BASE_B 1024u
#define BASE_C (BASE_B + LARGE + 1024u)
#define SLOW 12288 /* its LRU cliff (768 KiB) between two sizes of the curve's grid */
#define BASE_S (BASE_C + RANDOM + 1024u)
#define BASE_H (BASE_S + SLOW + 1024u)
#define KINDS 6

typedef struct gen {
	lomas_trace *t;
	sim_trace own[KINDS]; /* each generator phase's own references */
	uint64_t pos[KINDS];  /* sweep positions, so a phase resumes where it left */
	uint64_t rng;
} gen;

static void ref(gen *g, int phase, uint32_t line, uint64_t pc)
{
	assert_int_equal(lomas_trace_ref(g->t, 1, (uint64_t)line * SIM_LINE, pc, LOMAS_REF_LOAD),
	                 LOMAS_OK);
	sim_push(&g->own[phase], line);
}

static void segment(gen *g, int phase)
{
	for (uint64_t i = 0; i < SEG; i++) {
		switch (phase) {
		case 3:
			ref(g, 3, BASE_S + (uint32_t)(g->pos[3]++ / 8 % SLOW),
			    0x404000 + 8 * (i & 1));
			break;
		case 4:
			ref(g, 4, BASE_H + (uint32_t)sm_below(&g->rng, SMALL),
			    0x405000 + 8 * (i & 1));
			break;
		case 0:
			ref(g, 0, BASE_A + (uint32_t)(g->pos[0]++ % SMALL), 0x401000 + 8 * (i & 1));
			break;
		case 1:
			ref(g, 1, BASE_B + (uint32_t)(g->pos[1]++ % LARGE), 0x402000 + 8 * (i & 1));
			break;
		case 2:
			ref(g, 2, BASE_C + (uint32_t)sm_below(&g->rng, RANDOM),
			    0x403000 + 8 * (i & 1));
			break;
		case 5:
			ref(g, 5, BASE_B + (uint32_t)(g->pos[5]++ / 8 % LARGE),
			    0x406000 + 8 * (i & 1));
			break;
		}
	}
}

/* Record rounds of the nphase generator phases kinds[]; truth[w] = each window's generator phase.
 */
static lomas_profile *record(gen *g, const int *kinds, int nphase, int rounds, int *truth,
                             size_t cap)
{
	lomas_config *cfg;
	lomas_profile *p;
	size_t w = 0;
	char buf[32];
	memset(g, 0, sizeof *g);
	g->rng = 12345;
	assert_int_equal(lomas_config_new(&cfg), LOMAS_OK);
	assert_int_equal(lomas_config_set(cfg, "period", "16"), LOMAS_OK);
	snprintf(buf, sizeof buf, "%d", WINDOW);
	assert_int_equal(lomas_config_set(cfg, "window", buf), LOMAS_OK);
	assert_int_equal(lomas_config_set(cfg, "seed", "7"), LOMAS_OK);
	assert_int_equal(lomas_trace_new(cfg, &g->t), LOMAS_OK);
	for (int r = 0; r < rounds; r++)
		for (int ph = 0; ph < nphase; ph++) {
			segment(g, kinds[ph]);
			for (int k = 0; k < SEG_WINDOWS; k++) {
				assert_true(w < cap);
				truth[w++] = kinds[ph];
			}
		}
	assert_int_equal(lomas_trace_finish(g->t, &p), LOMAS_OK);
	lomas_trace_free(g->t);
	lomas_config_free(cfg);
	return p;
}

static void check(const int *kinds, int nphase, int rounds)
{
	gen g;
	int truth[1024];
	lomas_profile_info info = LOMAS_PROFILE_INFO_INIT;
	lomas_window *wins;
	uint32_t *wp;
	lomas_phase_info phs[16];
	size_t nph, copied, good = 0, counted = 0;
	int map[16];
	uint64_t bytes[64], lines[64];
	size_t nsz = sim_sizes(bytes, lines);
	lomas_profile *p = record(&g, kinds, nphase, rounds, truth, 1024);

	assert_int_equal(lomas_profile_info_get(p, &info), LOMAS_OK);
	assert_int_equal(info.windows, (uint64_t)nphase * rounds * SEG_WINDOWS);
	wins = calloc(info.windows, sizeof *wins);
	wp = calloc(info.windows, sizeof *wp);
	assert_non_null(wins);
	assert_non_null(wp);
	assert_int_equal(lomas_profile_windows(p, 0, info.windows, wins, &copied), LOMAS_OK);
	assert_int_equal(lomas_profile_phases(p, 0, 0, 0, wp, info.windows, phs, 16, &nph),
	                 LOMAS_OK);
	assert_int_equal(nph, (size_t)nphase + 1);

	/* Majority mapping of each found phase onto the generator's. */
	for (size_t k = 1; k < nph; k++) {
		size_t votes[KINDS] = {0};
		map[k] = kinds[0];
		for (size_t w = 0; w < info.windows; w++) {
			int tw = truth[wins[w].start / WINDOW];
			if (wp[w] == k)
				votes[tw]++;
		}
		for (int j = 0; j < KINDS; j++)
			if (votes[j] > votes[map[k]])
				map[k] = j;
		for (size_t j = 1; j < k; j++)
			assert_int_not_equal(map[j], map[k]);
	}
	for (size_t w = 0; w < info.windows; w++) {
		if (wp[w] == 0)
			continue;
		counted++;
		good += map[wp[w]] == truth[wins[w].start / WINDOW];
	}
	printf("# %d phases: %zu of %zu non-transition windows right, %zu transitions\n", nphase,
	       good, counted, (size_t)info.windows - counted);
	assert_true(counted > 0 && (double)good >= 0.9 * (double)counted);

	for (size_t k = 1; k < nph; k++) {
		lomas_profile *sub;
		double model[64], mae = 0, worst = 0, n;
		uint64_t cold, *hist;
		const sim_trace *own = &g.own[map[k]];
		assert_int_equal(lomas_profile_phase_select(p, wp, info.windows, (uint32_t)k, &sub),
		                 LOMAS_OK);
		assert_int_equal(lomas_model_curve(sub, LOMAS_POLICY_LRU, bytes, nsz, 0, 0, model),
		                 LOMAS_OK);
		hist = sim_lru_hist(own, &cold);
		n = (double)own->n;
		for (size_t j = 0; j < nsz; j++) {
			double d = fabs(model[j] - sim_lru_misses(hist, own->k, lines[j]) / n);
			mae += d / (double)nsz;
			worst = d > worst ? d : worst;
		}
		printf("# phase %zu (generator %d): %llu windows, demand %u, curve MAE %.3f pp, "
		       "max %.3f pp\n",
		       k, map[k], (unsigned long long)phs[k].windows, phs[k].demand, 100 * mae,
		       100 * worst);
		assert_true(mae <= 0.015);
		assert_true(worst <= 0.05);
		if (map[k] == 0)
			assert_true(phs[k].demand <= SMALL && phs[k].demand >= SMALL * 3 / 4);
		if (map[k] == 1)
			assert_true(phs[k].demand >= 900);
		free(hist);
		lomas_profile_free(sub);
	}
	for (int j = 0; j < KINDS; j++)
		free(g.own[j].t);
	free(wins);
	free(wp);
	lomas_profile_free(p);
}

static void test_two_alternating_phases(void **state)
{
	(void)state;
	static const int kinds[] = {0, 1};
	check(kinds, 2, 5);
}

static void test_three_phases(void **state)
{
	(void)state;
	static const int kinds[] = {0, 1, 2};
	check(kinds, 3, 4);
}

/*
 * A slow sweep (512 lines a window of a 12288-line array, each window
 * different lines) alternating with random reads of a hot array: each
 * sweep window's set-index signature is disjoint from the last one's, and
 * compared at 1024 buckets the windows of one sweep fell into two phases
 * that alternated (their supports, line mod 1024, alternate halves).
 * Compared at no finer a resolution than the windows' footprints (512
 * lines: 512 buckets) they are one phase, as their code says.
 */
static void test_slow_sweep(void **state)
{
	static const int kinds[] = {3, 4};
	(void)state;
	check(kinds, 2, 5);
}

/*
 * An initialisation, then the work on what it wrote: I writes 10240 lines
 * of B's array in order, 8 references a line, once; B then sweeps the
 * array. I's own references miss only the first time each line is touched
 * (cold: not counted); its last touch of each line is reused by B, outside
 * its phase, and lomas_profile_phase_select made those samples censored,
 * counted as misses: I's curve 12.5 points high at every size (a program's
 * initialisation phases, lomas-demo curve --phase: +12.3, +12.4). After a
 * phase's last window nothing of it touches the line again: dangling.
 */
static void test_init_then_compute(void **state)
{
	static const int kinds[] = {5, 1};
	(void)state;
	check(kinds, 2, 1);
}

/* Bad arguments: a clear error, nothing written. */
static void test_bad_arguments(void **state)
{
	lomas_profile *p;
	uint32_t wp[4] = {9, 9, 9, 9};
	size_t nph = 77;
	(void)state;
	assert_int_equal(lomas_profile_new(64, &p), LOMAS_OK);
	assert_int_equal(lomas_profile_phases(p, 0, 1.5, 0, wp, 4, NULL, 0, &nph), LOMAS_EINVAL);
	assert_true(strstr(lomas_error_message(), "threshold") != NULL);
	assert_int_equal(lomas_profile_phases(p, 0, 0, 0, NULL, 0, NULL, 0, NULL), LOMAS_EINVAL);
	/* An empty profile: only phase 0. */
	assert_int_equal(lomas_profile_phases(p, 0, 0, 0, wp, 0, NULL, 0, &nph), LOMAS_OK);
	assert_int_equal(nph, 1);
	lomas_profile_free(p);
	assert_int_equal(lomas_profile_phase_select(NULL, NULL, 0, 0, NULL), LOMAS_EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_two_alternating_phases),
	    cmocka_unit_test(test_three_phases),
	    cmocka_unit_test(test_slow_sweep),
	    cmocka_unit_test(test_init_then_compute),
	    cmocka_unit_test(test_bad_arguments),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

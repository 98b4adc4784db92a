/*
 * Per-instruction attribution with the time-aware model (attribution.c):
 * on phased and steady traces (exact_sim.h, independent of liblomas),
 *  - the misses attributed to all pcs over the list's references equal
 *    lomas_model_miss_ratio at the same size, to 1e-9 relative, both
 *    policies, with and without cold misses: the list and the curve never
 *    disagree;
 *  - each pc's share of the misses is within 5 points of the share that
 *    exact LRU and random caches simulated over the same trace charge to
 *    it, and the delinquent set holds every pc with 1 % or more of the
 *    exact misses (UMI's recall), at three sizes.
 *
 * LOMAS_TEST_VERBOSE=1 prints the shares.
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
#include "model/model.h"

#define MAXPC 8

/* A trace with each reference's instruction (pc index). */
typedef struct prog {
	sim_trace tr;
	uint8_t *pc;
	size_t cap;
	int npc;
} prog;

static void push(prog *g, uint32_t line, uint8_t pc)
{
	sim_push(&g->tr, line);
	if (g->tr.n > g->cap) {
		g->cap = g->tr.cap;
		g->pc = realloc(g->pc, g->cap);
		assert_non_null(g->pc);
	}
	g->pc[g->tr.n - 1] = pc;
	if (pc + 1 > g->npc)
		g->npc = pc + 1;
}

static void prog_free(prog *g)
{
	free(g->tr.t);
	free(g->pc);
}

static uint64_t pc_addr(int k)
{
	return 0x401000 + 0x10 * (uint64_t)k;
}

/*
 * Rounds of a hot phase (random reads of `small` lines at pc 0, a random
 * walk over `mid` lines at pc 1 every fourth reference) and a sweep over
 * `big` lines (pc 2): the sweep's reuses span the hot phase.
 */
static prog alternate(uint32_t small, uint32_t mid, uint32_t big, size_t hot, int rounds,
                      uint64_t seed)
{
	prog g = {0};
	uint64_t x = seed;
	for (int r = 0; r < rounds; r++) {
		for (size_t i = 0; i < hot; i++) {
			push(&g, (uint32_t)sm_below(&x, small), 0);
			if (i % 4 == 3)
				push(&g, small + (uint32_t)sm_below(&x, mid), 1);
		}
		for (uint32_t i = 0; i < big; i++)
			push(&g, small + mid + i, 2);
	}
	return g;
}

/* An array written (pc 0) then a long compute phase (pc 1, 2), then the array read (pc 3). */
static prog init_then_compute(void)
{
	prog g = {0};
	uint64_t x = 5;
	const uint32_t big = 20000, small = 400;
	for (uint32_t i = 0; i < big; i++)
		for (int k = 0; k < 8; k++)
			push(&g, small + i, 0);
	for (size_t i = 0; i < 1000000; i++)
		push(&g, (uint32_t)sm_below(&x, small), i % 3 == 0 ? 2 : 1);
	for (uint32_t i = 0; i < big; i++)
		for (int k = 0; k < 8; k++)
			push(&g, small + i, 3);
	return g;
}

/*
 * Phases of four kinds with random lengths, each kind its own pc and data
 * (kept across phases): random reads of 50 lines, a cyclic walk over 3000
 * lines, a strided walk over 40000 lines, random reads of 12000 lines.
 */
static prog random_phases(void)
{
	prog g = {0};
	uint64_t x = 41, pos[4] = {0, 0, 0, 0};
	const uint32_t base[4] = {0, 50, 3050, 43050};
	for (int ph = 0; ph < 30; ph++) {
		size_t len = 20000 + sm_below(&x, 160001);
		int kind = (int)sm_below(&x, 4);
		for (size_t i = 0; i < len; i++) {
			uint32_t id;
			switch (kind) {
			case 0: id = base[0] + (uint32_t)sm_below(&x, 50); break;
			case 1: id = base[1] + (uint32_t)(pos[1]++ % 3000); break;
			case 2: id = base[2] + (uint32_t)((pos[2]++ * 2) % 40000); break;
			default: id = base[3] + (uint32_t)sm_below(&x, 12000);
			}
			push(&g, id, (uint8_t)kind);
		}
	}
	return g;
}

/*
 * Steady: a 16-line hot set read four times per step (pc 0), a cyclic
 * stream of 2048 lines (pc 1), random reads of 1024 lines (pc 2) and of 300
 * lines (pc 3); and a cyclic sweep over 514 lines visited as load, store,
 * and an accumulator's load and store (the knife edge of a 512-line cache;
 * its reuse classes are corrected), pcs 4 to 7.
 */
static prog steady(void)
{
	prog g = {0};
	uint64_t x = 9;
	for (size_t s = 0; s < 150000; s++) {
		for (int h = 0; h < 4; h++)
			push(&g, (uint32_t)((s * 4 + (size_t)h) % 16), 0);
		push(&g, (uint32_t)(16 + s % 2048), 1);
		push(&g, (uint32_t)(16 + 2048 + sm_below(&x, 1024)), 2);
		push(&g, (uint32_t)(16 + 2048 + 1024 + sm_below(&x, 300)), 3);
	}
	for (int c = 0; c < 300; c++) {
		for (uint32_t l = 0; l < 514; l++) {
			push(&g, 4000 + l, 4);
			push(&g, 4000 + l, 5);
			push(&g, 4000 + 514, 6);
			push(&g, 4000 + 514, 7);
		}
	}
	return g;
}

/* Sample thread th of g into p (trace clock, exact_sim.h). */
static void sample(lomas_profile *p, uint32_t th, const prog *g, double period, uint64_t seed)
{
	uint64_t *pcs = malloc(g->tr.n * sizeof *pcs);
	assert_non_null(pcs);
	for (size_t i = 0; i < g->tr.n; i++)
		pcs[i] = pc_addr(g->pc[i]) + ((uint64_t)th << 12);
	sim_sample(p, th, &g->tr, period, seed, pcs);
	free(pcs);
}

/*
 * The StatCache probabilities, summed over the reuses that end in a group,
 * give the group's solved ratio up to the solver's tolerance (1e-7 per
 * ratio) where it is below 1: the scaling to it corrects rounding, not the
 * model.
 */
static void check_scaling(const char *name, const lomas_profile *p, uint64_t bytes)
{
	size_t n = p->samples.n;
	model_attr at = {.prob = malloc(n * sizeof(double)),
	                 .mscale = malloc(n * sizeof(double)),
	                 .rscale = malloc(n * sizeof(double))};
	assert_non_null(at.prob);
	assert_non_null(at.mscale);
	assert_non_null(at.rscale);
	assert_int_equal(
	    model_sample_miss_probs(p, LOMAS_POLICY_RANDOM, (double)(bytes / SIM_LINE), 0, &at),
	    LOMAS_OK);
	if (getenv("LOMAS_TEST_VERBOSE"))
		printf("%-18s %9llu B random residual %.3g, %zu groups capped\n", name,
		       (unsigned long long)bytes, at.resid, at.capped);
	assert_true(at.resid <= 1e-6);
	for (size_t i = 0; i < n; i++)
		assert_true(at.prob[i] >= 0.0 && at.prob[i] <= 1.0 + 1e-5);
	free(at.prob);
	free(at.mscale);
	free(at.rscale);
}

/* The list's misses over its references against the curve, every policy and flag. */
static void check_totals(const char *name, const lomas_profile *p, const uint64_t *sizes,
                         size_t nsz)
{
	for (size_t k = 0; k < nsz; k++) {
		for (int pol = 0; pol < 2; pol++) {
			for (unsigned flags = 0; flags <= LOMAS_MODEL_COLD; flags++) {
				lomas_hot_list *l;
				lomas_hot_info info = LOMAS_HOT_INFO_INIT;
				double ratio, got, sum = 0.0;
				assert_int_equal(lomas_model_miss_ratio(p, (lomas_policy)pol,
				                                        sizes[k], 0, flags, &ratio),
				                 LOMAS_OK);
				assert_int_equal(
				    lomas_profile_hot_pcs(p, (lomas_policy)pol, sizes[k], 0,
				                          flags | LOMAS_HOT_NO_SYMBOLS, &l),
				    LOMAS_OK);
				assert_int_equal(lomas_hot_list_info(l, &info), LOMAS_OK);
				for (size_t i = 0; i < info.count; i++) {
					lomas_hot_pc e = LOMAS_HOT_PC_INIT;
					assert_int_equal(lomas_hot_list_get(l, i, &e), LOMAS_OK);
					sum += e.misses;
				}
				got = info.misses / info.refs;
				if (getenv("LOMAS_TEST_VERBOSE"))
					printf("%-18s %9llu B %-6s %s curve %.9f list %.9f\n", name,
					       (unsigned long long)sizes[k], pol ? "lru" : "random",
					       flags ? "cold" : "    ", ratio, got);
				if (!(fabs(got - ratio) <= 1e-9 * ratio + 1e-13))
					fail_msg("%s, %llu bytes, %s%s: curve %.12f, list %.12f",
					         name, (unsigned long long)sizes[k],
					         pol ? "lru" : "random", flags ? ", cold" : "",
					         ratio, got);
				assert_true(fabs(sum - info.misses) <=
				            1e-9 * (info.misses + 1e-300));
				lomas_hot_list_free(l);
			}
		}
		check_scaling(name, p, sizes[k]);
	}
}

static const uint64_t sizes[] = {4096, 16384, 32768, 65536, 131072, 262144, 1 << 20, 4 << 20};
#define NSIZES (sizeof sizes / sizeof sizes[0])

static void test_totals_alternate(void **state)
{
	prog g = alternate(256, 2000, 30000, 150000, 6, 1);
	lomas_profile *p;
	(void)state;
	assert_int_equal(lomas_profile_new(SIM_LINE, &p), LOMAS_OK);
	sample(p, 0, &g, 100, 11);
	check_totals("alternate", p, sizes, NSIZES);
	lomas_profile_free(p);
	prog_free(&g);
}

static void test_totals_init_then_compute(void **state)
{
	prog g = init_then_compute();
	lomas_profile *p;
	(void)state;
	assert_int_equal(lomas_profile_new(SIM_LINE, &p), LOMAS_OK);
	sample(p, 0, &g, 100, 21);
	check_totals("init-then-compute", p, sizes, NSIZES);
	lomas_profile_free(p);
	prog_free(&g);
}

static void test_totals_random_phases(void **state)
{
	prog g = random_phases();
	lomas_profile *p;
	(void)state;
	assert_int_equal(lomas_profile_new(SIM_LINE, &p), LOMAS_OK);
	sample(p, 0, &g, 100, 41);
	check_totals("random-phases", p, sizes, NSIZES);
	lomas_profile_free(p);
	prog_free(&g);
}

/* Steady, and two threads (a phased one and a steady one) with their own clocks. */
static void test_totals_steady_and_threads(void **state)
{
	prog g = steady(), a = alternate(100, 500, 8000, 40000, 5, 7);
	lomas_profile *p;
	(void)state;
	assert_int_equal(lomas_profile_new(SIM_LINE, &p), LOMAS_OK);
	sample(p, 0, &g, 50, 31);
	check_totals("steady", p, sizes, NSIZES);
	lomas_profile_free(p);
	assert_int_equal(lomas_profile_new(SIM_LINE, &p), LOMAS_OK);
	sample(p, 0, &g, 100, 51);
	sample(p, 1, &a, 100, 52);
	check_totals("two-threads", p, sizes, NSIZES);
	lomas_profile_free(p);
	prog_free(&g);
	prog_free(&a);
}

/* Exact LRU stack distance of every reference (UINT32_MAX: a first touch). */
static uint32_t *exact_sds(const sim_trace *tr)
{
	size_t n = tr->n;
	int64_t *last = malloc(tr->k * sizeof *last);
	int32_t *fen = calloc(n + 1, sizeof *fen);
	uint32_t *sd = malloc(n * sizeof *sd);
	assert_true(last && fen && sd);
	for (uint32_t i = 0; i < tr->k; i++)
		last[i] = -1;
	for (size_t i = 0; i < n; i++) {
		uint32_t id = tr->t[i];
		sd[i] = UINT32_MAX;
		if (last[id] >= 0) {
			/* Lines whose last touch lies between: the distinct ones. */
			int64_t c = 0;
			for (size_t j = i; j > 0; j -= j & -j)
				c += fen[j];
			for (size_t j = (size_t)last[id] + 1; j > 0; j -= j & -j)
				c -= fen[j];
			sd[i] = (uint32_t)c;
			for (size_t j = (size_t)last[id] + 1; j <= n; j += j & -j)
				fen[j]--;
		}
		for (size_t j = i + 1; j <= n; j += j & -j)
			fen[j]++;
		last[id] = (int64_t)i;
	}
	free(last);
	free(fen);
	return sd;
}

/* Exact non-cold misses per pc of a random-replacement cache of `lines`, one run. */
static void exact_random_pc(const prog *g, uint64_t lines, uint64_t seed, double *miss)
{
	sim_random_misses_by(&g->tr, lines, seed, g->pc, miss);
}

/*
 * Each pc's share of the misses against exact simulation of the same trace
 * at three sizes, both policies: within 5 points (measured: 1.3 at most),
 * and recall: *found of *total pcs with 1 % of the exact misses are in the
 * delinquent set.
 */
static void check_shares(const char *name, const prog *g, const lomas_profile *p,
                         const uint64_t lines[3], int *found, int *total)
{
	uint32_t *sd = exact_sds(&g->tr);
	for (int k = 0; k < 3; k++) {
		for (int pol = 0; pol < 2; pol++) {
			double miss[MAXPC] = {0}, all = 0, share[MAXPC] = {0};
			int delinquent[MAXPC] = {0};
			lomas_hot_list *l;
			if (pol == LOMAS_POLICY_LRU) {
				for (size_t i = 0; i < g->tr.n; i++)
					miss[g->pc[i]] += sd[i] != UINT32_MAX && sd[i] >= lines[k];
			} else {
				exact_random_pc(g, lines[k], 1234 + (uint64_t)k, miss);
			}
			for (int i = 0; i < g->npc; i++)
				all += miss[i];
			if (all < 1e-3 * (double)g->tr.n)
				continue; /* the cache holds the program: nothing to share */
			assert_int_equal(lomas_profile_hot_pcs(p, (lomas_policy)pol,
			                                       lines[k] * SIM_LINE, 0,
			                                       LOMAS_HOT_NO_SYMBOLS, &l),
			                 LOMAS_OK);
			for (size_t i = 0; i < lomas_hot_list_count(l); i++) {
				lomas_hot_pc e = LOMAS_HOT_PC_INIT;
				assert_int_equal(lomas_hot_list_get(l, i, &e), LOMAS_OK);
				for (int j = 0; j < g->npc; j++) {
					if (e.pc == pc_addr(j)) {
						share[j] = e.share;
						delinquent[j] = e.delinquent;
					}
				}
			}
			lomas_hot_list_free(l);
			for (int j = 0; j < g->npc; j++) {
				double want = miss[j] / all;
				if (getenv("LOMAS_TEST_VERBOSE"))
					printf("%-18s %7llu lines %-6s pc %d: share %.3f exact "
					       "%.3f%s\n",
					       name, (unsigned long long)lines[k],
					       pol ? "lru" : "random", j, share[j], want,
					       delinquent[j] ? " delinquent" : "");
				if (fabs(share[j] - want) > 0.05)
					fail_msg(
					    "%s, %llu lines, %s, pc %d: share %.3f, exact %.3f",
					    name, (unsigned long long)lines[k],
					    pol ? "lru" : "random", j, share[j], want);
				if (want >= 0.01) {
					(*total)++;
					*found += delinquent[j];
				}
			}
		}
	}
	free(sd);
}

/* Shares and recall on the phased traces and the steady one. */
static void test_shares_and_recall(void **state)
{
	const uint64_t alt_lines[3] = {128, 1024, 16384}, ph_lines[3] = {64, 1024, 16384};
	const uint64_t st_lines[3] = {256, 700, 1500};
	int found = 0, total = 0;
	(void)state;
	struct {
		const char *name;
		prog g;
		const uint64_t *lines;
	} cases[] = {{"alternate", alternate(256, 2000, 30000, 150000, 6, 1), alt_lines},
	             {"init-then-compute", init_then_compute(), ph_lines},
	             {"random-phases", random_phases(), ph_lines},
	             {"steady", steady(), st_lines}};
	for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
		lomas_profile *p;
		assert_int_equal(lomas_profile_new(SIM_LINE, &p), LOMAS_OK);
		sample(p, 0, &cases[c].g, 50, 61 + c);
		check_shares(cases[c].name, &cases[c].g, p, cases[c].lines, &found, &total);
		lomas_profile_free(p);
		prog_free(&cases[c].g);
	}
	printf("recall: %d of %d pcs with 1 %% of the exact misses\n", found, total);
	assert_true(total >= 30);
	assert_true(found >= 0.9 * total);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_totals_alternate),
	    cmocka_unit_test(test_totals_init_then_compute),
	    cmocka_unit_test(test_totals_random_phases),
	    cmocka_unit_test(test_totals_steady_and_threads),
	    cmocka_unit_test(test_shares_and_recall),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * Knife edges (issue 17 item 4): traces whose reuses share one stack
 * distance just below or just above a power of two, where an LRU curve
 * drops by tens of points within one line of cache. The model must place
 * the cliff on the right side of the power of two: against exact LRU and
 * random replacement of the same trace (exact_sim.h), mean absolute error
 * <= 1 point over the default sizes from 4 KiB to 64 MiB and no size more
 * than 5 points off, the sizes from 24 lines below to 24 lines above the
 * power of two included, for both policies.
 *
 * - sweep: a cyclic walk over N lines, 8 references per line (a loop over
 *   doubles): every reuse of a line has stack distance N - 1, so N = 2^k
 *   hits in 2^k lines and N = 2^k + 1 misses there.
 * - column: PolyBench correlation's inner loop, sum over k of
 *   A[k][j] * x[k] into an accumulator, for each column j: the reuse of
 *   A's line at the next column sees the K other rows' lines, the K / 8
 *   lines of x and the accumulator, so thousands of reuses share one stack
 *   distance, here 507 (hits in 512 lines) or 515 (misses there).
 *
 * LOMAS_TEST_VERBOSE=1 prints the exact and modelled curves near the edge.
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
#include "exact_sim.h"

#define NDEF 57 /* default sizes, 4 KiB to 64 MiB */
#define NEAR 1  /* fine sizes each side of the power of two */
#define REFS 2000000
#define PERIOD 100.0

/* The instructions of the traces: a class of reuses is keyed by its pcs. */
enum { PC_SWEEP = 0x1000, PC_A = 0x2000, PC_X = 0x2010, PC_ACC = 0x2020 };

/* A cyclic walk over `lines` lines, 8 references (doubles) per line. */
static void make_sweep(sim_trace *tr, uint64_t **pc, uint32_t lines)
{
	*pc = malloc(REFS * sizeof **pc);
	assert_non_null(*pc);
	for (size_t i = 0; i < REFS; i++) {
		sim_push(tr, (uint32_t)(i / 8 % lines));
		(*pc)[i] = PC_SWEEP;
	}
}

/*
 * Columns j of a matrix with `rows` rows of 8 lines (64 doubles): for each
 * row k, A[k][j], x[k], the accumulator (PolyBench correlation's
 * data[k][i] * data[k][j] with the row-i operand as x).
 */
static void make_columns(sim_trace *tr, uint64_t **pc, uint32_t rows)
{
	const uint32_t x0 = rows * 8, acc = x0 + (rows + 7) / 8;
	*pc = malloc((REFS + 3 * (size_t)rows) * sizeof **pc);
	assert_non_null(*pc);
	for (uint32_t j = 0; tr->n < REFS; j = (j + 1) % 64) {
		for (uint32_t k = 0; k < rows; k++) {
			(*pc)[tr->n] = PC_A;
			sim_push(tr, k * 8 + j / 8);
			(*pc)[tr->n] = PC_X;
			sim_push(tr, x0 + k / 8);
			(*pc)[tr->n] = PC_ACC;
			sim_push(tr, acc);
		}
	}
}

/* The model's curve and the exact ones at the sizes; returns the sample count. */
static size_t curves(const sim_trace *tr, const uint64_t *pc, const uint64_t *bytes,
                     const uint64_t *lines, size_t n, double *m_rnd, double *m_lru, double *x_rnd,
                     double *x_lru)
{
	lomas_profile *p;
	uint64_t cold;
	uint64_t *hist = sim_lru_hist(tr, &cold);
	size_t ns;
	assert_non_null(hist);
	for (size_t i = 0; i < n; i++) {
		x_lru[i] = sim_lru_misses(hist, tr->k, lines[i]) / (double)tr->n;
		x_rnd[i] = lines[i] >= tr->k
		               ? 0.0
		               : sim_random_misses(tr, lines[i], 77 + i) / (double)tr->n;
	}
	free(hist);
	assert_int_equal(lomas_profile_new(SIM_LINE, &p), LOMAS_OK);
	ns = sim_sample(p, 0, tr, PERIOD, 4321, pc);
	assert_int_equal(lomas_model_curve(p, LOMAS_POLICY_RANDOM, bytes, n, 0, 0, m_rnd),
	                 LOMAS_OK);
	assert_int_equal(lomas_model_curve(p, LOMAS_POLICY_LRU, bytes, n, 0, 0, m_lru), LOMAS_OK);
	lomas_profile_free(p);
	return ns;
}

/* Errors of one policy: MAE over the default sizes, largest over all. */
static void errors(const double *m, const double *x, size_t n, double *mae, double *worst,
                   size_t *at)
{
	*mae = 0.0;
	*worst = 0.0;
	*at = 0;
	for (size_t i = 0; i < n; i++) {
		double e = fabs(m[i] - x[i]);
		if (i < NDEF)
			*mae += e / NDEF;
		if (e > *worst) {
			*worst = e;
			*at = i;
		}
	}
}

/* Build the trace (kind 0: sweep, 1: columns) and check the model at the edge pow2 lines. */
static void check_edge(const char *name, int kind, uint32_t param, uint64_t pow2, double exact_lo,
                       double exact_hi)
{
	uint64_t bytes[NDEF + 2 * NEAR + 1], lines[NDEF + 2 * NEAR + 1], *pc = NULL;
	double m_rnd[NDEF + 2 * NEAR + 1], m_lru[NDEF + 2 * NEAR + 1];
	double x_rnd[NDEF + 2 * NEAR + 1], x_lru[NDEF + 2 * NEAR + 1];
	double mae_r, mae_l, max_r, max_l;
	size_t n = sim_sizes(bytes, lines), at_r, at_l, ns, edge = 0;
	sim_trace tr = {0};
	assert_int_equal(n, NDEF);
	for (int64_t d = -NEAR; d <= NEAR; d++) {
		lines[n] = (uint64_t)((int64_t)pow2 + d);
		bytes[n] = lines[n] * SIM_LINE;
		n++;
	}
	if (kind == 0)
		make_sweep(&tr, &pc, param);
	else
		make_columns(&tr, &pc, param);
	ns = curves(&tr, pc, bytes, lines, n, m_rnd, m_lru, x_rnd, x_lru);
	for (size_t i = NDEF; i < n; i++)
		edge = lines[i] == pow2 ? i : edge;
	/* The trace is the knife edge it claims to be (exact LRU just below and at 2^k). */
	assert_true(fabs(x_lru[edge - 1] - exact_lo) < 0.02);
	assert_true(fabs(x_lru[edge] - exact_hi) < 0.02);
	errors(m_rnd, x_rnd, n, &mae_r, &max_r, &at_r);
	errors(m_lru, x_lru, n, &mae_l, &max_l, &at_l);
	if (getenv("LOMAS_TEST_VERBOSE"))
		for (size_t i = NDEF; i < n; i++)
			printf("  %6llu lines  random exact %.4f model %.4f  lru exact %.4f model "
			       "%.4f\n",
			       (unsigned long long)lines[i], x_rnd[i], m_rnd[i], x_lru[i],
			       m_lru[i]);
	printf("edge %-12s %6zu samples  random MAE %.3f max %.2f pp (%llu lines)  lru MAE %.3f "
	       "max %.2f pp (%llu lines)\n",
	       name, ns, 100 * mae_r, 100 * max_r, (unsigned long long)lines[at_r], 100 * mae_l,
	       100 * max_l, (unsigned long long)lines[at_l]);
	fflush(stdout);
	assert_true(mae_r <= 0.01);
	assert_true(mae_l <= 0.01);
	assert_true(max_r <= 0.05);
	assert_true(max_l <= 0.05);
	free(tr.t);
	free(pc);
}

/* SD 255 in 256 lines: every reuse hits (1/8 of the references are line reuses). */
static void test_sweep_below(void **state)
{
	(void)state;
	check_edge("sweep-256", 0, 256, 256, 0.125, 0.0);
}

/* SD 256 in 256 lines: every reuse misses. */
static void test_sweep_above(void **state)
{
	(void)state;
	check_edge("sweep-257", 0, 257, 256, 0.125, 0.125);
}

/* The same at 512 lines, the sweep one line longer and one shorter. */
static void test_sweep_512(void **state)
{
	(void)state;
	check_edge("sweep-511", 0, 511, 512, 0.0, 0.0);
	check_edge("sweep-513", 0, 513, 512, 0.125, 0.125);
}

/*
 * 450 rows: the reuses of A's lines at the next column have SD 450 - 1 +
 * 57 + 1 = 507 and hit in 512 lines; 457 rows: 457 - 1 + 58 + 1 = 515,
 * they miss there (7 / 8 of A's references and 1 / 8 of x's reuse within
 * the line: 29 % of the references are these long reuses; another 4 %,
 * A's lines when the column moves to the next line, miss in both).
 */
static void test_columns_below(void **state)
{
	(void)state;
	check_edge("columns-450", 1, 450, 512, 0.04, 0.04);
}

static void test_columns_above(void **state)
{
	(void)state;
	check_edge("columns-457", 1, 457, 512, 0.332, 0.332);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_sweep_below),   cmocka_unit_test(test_sweep_above),
	    cmocka_unit_test(test_sweep_512),     cmocka_unit_test(test_columns_below),
	    cmocka_unit_test(test_columns_above),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * Time-sharing bounds (lomas_model_thrash_bounds): the upper bound against
 * a Monte Carlo of the same pure-birth chain (its probabilities taken from
 * the public LRU curve at every span), and both bounds around an exact LRU
 * simulation of the trace with the cache flushed every n references.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>

#include "exact_sim.h"
#include "lomas/lomas.h"

/* Misses (cold included) of an LRU cache of C lines emptied every n references. */
static double sim_flushed(const sim_trace *tr, uint64_t C, uint64_t n)
{
	size_t len = tr->n;
	int64_t *last = malloc(tr->k * sizeof *last);
	int32_t *fen = calloc(len + 1, sizeof *fen);
	uint64_t misses = 0;
	assert_non_null(last);
	assert_non_null(fen);
	for (uint32_t i = 0; i < tr->k; i++)
		last[i] = -1;
	for (size_t i = 0; i < len; i++) {
		uint32_t id = tr->t[i];
		int64_t flush = (int64_t)(i / n * n);
		if (last[id] < flush) {
			misses++;
		} else {
			/* Distinct lines since its last touch: the last touches in (last, i). */
			int64_t c = 0;
			for (size_t j = i; j > 0; j -= j & -j)
				c += fen[j];
			for (size_t j = (size_t)last[id] + 1; j > 0; j -= j & -j)
				c -= fen[j];
			misses += (uint64_t)c >= C;
		}
		if (last[id] >= 0)
			for (size_t j = (size_t)last[id] + 1; j <= len; j += j & -j)
				fen[j]--;
		for (size_t j = i + 1; j <= len; j += j & -j)
			fen[j]++;
		last[id] = (int64_t)i;
	}
	free(last);
	free(fen);
	return (double)misses / (double)len;
}

/* Expected misses per reference of the chain with q[s] (s = 0..C), by simulation. */
static double chain_mc(const double *q, uint64_t C, uint64_t n, unsigned quanta, uint64_t seed)
{
	uint64_t x = seed, misses = 0;
	for (unsigned r = 0; r < quanta; r++) {
		uint64_t s = 0;
		for (uint64_t t = 0; t < n; t++) {
			double u = sm_unit(&x);
			if (u <= q[s < C ? s : C]) {
				misses++;
				if (s < C)
					s++;
			}
		}
	}
	return (double)misses / ((double)n * quanta);
}

static lomas_profile *profile_of(const sim_trace *tr, double period)
{
	lomas_profile *p = NULL;
	assert_int_equal(lomas_profile_new(SIM_LINE, &p), LOMAS_OK);
	sim_sample(p, 0, tr, period, 11, NULL);
	return p;
}

/* Random lines of a hot set of 300 (3/4 of references) and a cold array of 6000. */
static sim_trace mixed_trace(size_t n)
{
	sim_trace tr = {0};
	uint64_t x = 42;
	for (size_t i = 0; i < n; i++)
		sim_push(&tr, sm_below(&x, 4) ? (uint32_t)sm_below(&x, 300)
		                              : 300 + (uint32_t)sm_below(&x, 6000));
	return tr;
}

static void test_upper_matches_chain(void **state)
{
	(void)state;
	sim_trace tr = mixed_trace(2000000);
	lomas_profile *p = profile_of(&tr, 20);
	static const uint64_t Cs[] = {256, 1024};
	static const uint64_t quanta[] = {500, 5000, 50000};
	for (size_t c = 0; c < 2; c++) {
		uint64_t C = Cs[c], *bytes = malloc(C * sizeof *bytes);
		double *q = malloc((C + 1) * sizeof *q), lower, upper[3];
		assert_non_null(bytes);
		assert_non_null(q);
		for (uint64_t s = 1; s <= C; s++)
			bytes[s - 1] = s * SIM_LINE;
		q[0] = 1.0;
		assert_int_equal(
		    lomas_model_curve(p, LOMAS_POLICY_LRU, bytes, C, 0, LOMAS_MODEL_COLD, q + 1),
		    LOMAS_OK);
		assert_int_equal(lomas_model_thrash_bounds(p, C * SIM_LINE, 0, quanta, 3,
		                                           LOMAS_MODEL_COLD, &lower, upper),
		                 LOMAS_OK);
		assert_true(fabs(lower - q[C]) < 1e-12);
		for (size_t k = 0; k < 3; k++) {
			unsigned reps = (unsigned)(4000000 / quanta[k]);
			double mc = chain_mc(q, C, quanta[k], reps, 7 + k);
			printf("C %5llu n %6llu  lower %.4f  upper %.4f  chain (Monte Carlo) %.4f  "
			       "(%+.2f %%)\n",
			       (unsigned long long)C, (unsigned long long)quanta[k], lower,
			       upper[k], mc, 100 * (upper[k] - mc) / mc);
			assert_true(fabs(upper[k] - mc) <= 0.02 * mc);
		}
		free(bytes);
		free(q);
	}
	lomas_profile_free(p);
	free(tr.t);
}

static void test_flushed_lru_between_bounds(void **state)
{
	(void)state;
	sim_trace tr = mixed_trace(1500000);
	lomas_profile *p = profile_of(&tr, 20);
	static const uint64_t Cs[] = {128, 512, 2048};
	static const uint64_t quanta[] = {300, 3000, 30000, 300000};
	for (size_t c = 0; c < 3; c++) {
		double lower, upper[4];
		assert_int_equal(lomas_model_thrash_bounds(p, Cs[c] * SIM_LINE, 0, quanta, 4,
		                                           LOMAS_MODEL_COLD, &lower, upper),
		                 LOMAS_OK);
		for (size_t k = 0; k < 4; k++) {
			double exact = sim_flushed(&tr, Cs[c], quanta[k]);
			printf("C %5llu n %6llu  lower %.4f <= flushed LRU %.4f <= upper %.4f\n",
			       (unsigned long long)Cs[c], (unsigned long long)quanta[k], lower,
			       exact, upper[k]);
			/* The bounds are the model's: half a point for its own error. */
			assert_true(lower <= exact + 0.005);
			assert_true(exact <= upper[k] + 0.005);
		}
	}
	lomas_profile_free(p);
	free(tr.t);
}

/*
 * Phases of 100k references alternating: random reads over 1500 lines (a
 * flush costs refilling them) and a cyclic walk over 20000 lines (every
 * reference misses in these caches, flushed or not). One chain over the
 * run's mixed q(s) refills the cache at the walk's pace as well and so
 * prices every flush under the random phase's cost averaged over the run:
 * at C = 2048, n = 3000, 0.150 for the exact 0.210, the upper bound 6
 * points under the flushed cache's ratio.
 */
static sim_trace phased_trace(size_t n)
{
	sim_trace tr = {0};
	uint64_t x = 7;
	for (size_t i = 0; i < n; i++)
		sim_push(&tr, i / 100000 % 2 == 0 ? (uint32_t)sm_below(&x, 1500)
		                                  : 1500 + (uint32_t)(i % 20000));
	return tr;
}

static void test_phased_between_bounds(void **state)
{
	(void)state;
	sim_trace tr = phased_trace(1600000);
	lomas_profile *p = profile_of(&tr, 20);
	static const uint64_t Cs[] = {512, 2048};
	static const uint64_t quanta[] = {300, 3000, 30000};
	for (size_t c = 0; c < 2; c++) {
		double lower, upper[3], warm = sim_flushed(&tr, Cs[c], tr.n);
		assert_int_equal(lomas_model_thrash_bounds(p, Cs[c] * SIM_LINE, 0, quanta, 3,
		                                           LOMAS_MODEL_COLD, &lower, upper),
		                 LOMAS_OK);
		for (size_t k = 0; k < 3; k++) {
			double exact = sim_flushed(&tr, Cs[c], quanta[k]);
			printf(
			    "C %5llu n %6llu  lower %.4f <= flushed LRU %.4f <= upper %.4f  (flush "
			    "cost: exact %.4f, bound %.4f)\n",
			    (unsigned long long)Cs[c], (unsigned long long)quanta[k], lower, exact,
			    upper[k], exact - warm, upper[k] - lower);
			assert_true(lower <= exact + 0.005);
			assert_true(exact <= upper[k] + 0.005);
			/* The flush's cost, the bounds' difference, within a tenth of the exact
			 * one. */
			assert_true(fabs((upper[k] - lower) - (exact - warm)) <=
			            0.1 * (exact - warm) + 0.002);
		}
	}
	lomas_profile_free(p);
	free(tr.t);
}

static void test_arguments(void **state)
{
	(void)state;
	sim_trace tr = mixed_trace(100000);
	lomas_profile *p = profile_of(&tr, 10);
	uint64_t zero = 0, one = 1000;
	double lower, upper, warm;
	assert_int_equal(lomas_model_thrash_bounds(p, 65536, 0, &zero, 1, 0, &lower, &upper),
	                 LOMAS_EINVAL);
	assert_int_equal(lomas_model_thrash_bounds(p, 100, 0, &one, 1, 0, &lower, &upper),
	                 LOMAS_EINVAL);
	assert_int_equal(lomas_model_thrash_bounds(NULL, 65536, 0, &one, 1, 0, &lower, &upper),
	                 LOMAS_EINVAL);
	assert_int_equal(lomas_model_thrash_bounds(p, 65536, 0, &one, 1, 0, &lower, &upper),
	                 LOMAS_OK);
	assert_int_equal(lomas_model_miss_ratio(p, LOMAS_POLICY_LRU, 65536, 0, 0, &warm), LOMAS_OK);
	assert_true(lower == warm && upper >= lower);
	lomas_profile_free(p);
	free(tr.t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_arguments),
	    cmocka_unit_test(test_upper_matches_chain),
	    cmocka_unit_test(test_flushed_lru_between_bounds),
	    cmocka_unit_test(test_phased_between_bounds),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

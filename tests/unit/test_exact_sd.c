/*
 * Exact stack distances (issue 17 item 4, docs/model.md "Knife edges"):
 *
 * - the trace clock's tracker (lib/trace/stack_dist.c: a Fenwick tree over
 *   the lines' last touches, renumbered when its positions run out) against
 *   a naive count of the distinct lines between two touches, on random
 *   traces that cross many renumberings and growths;
 * - the trace clock's samples: every reused one carries its thread's exact
 *   distance (LOMAS_SAMPLE_EXACT_SD), through save, load and merge, and a
 *   2.1 reader's view of the same file (no distances);
 * - the LRU curve with exact distances against exact LRU simulation of the
 *   same trace (exact_sim.h): cyclic sweeps whose distance sits just below
 *   and just above 512 lines, and a class split across 214/215/216 lines
 *   (PolyBench 2mm's), on 20 sampling seeds each, within 1 point at every
 *   size; the same profiles without the distances (StatStack's estimates)
 *   are printed for comparison.
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
#include "trace/trace.h"

/* Distinct lines in t[from, to) (naive: a stamp per line). */
static uint64_t naive_distinct(const uint32_t *t, size_t from, size_t to, uint32_t *stamp,
                               uint32_t *now)
{
	uint64_t c = 0;
	(*now)++;
	for (size_t i = from; i < to; i++) {
		if (stamp[t[i]] != *now) {
			stamp[t[i]] = *now;
			c++;
		}
	}
	return c;
}

/* Feed t to a tracker; every `every`-th reuse's distance against the naive count. */
static size_t check_tracker(const uint32_t *t, size_t n, uint32_t k, size_t every)
{
	sd_tracker tr = {0};
	size_t *last = malloc(k * sizeof *last), renumbered = 0;
	uint32_t *stamp = calloc(k, sizeof *stamp), now = 0;
	assert_non_null(last);
	assert_non_null(stamp);
	for (uint32_t l = 0; l < k; l++)
		last[l] = SIZE_MAX;
	for (size_t i = 0; i < n; i++) {
		size_t slot, before = tr.next;
		uint32_t pos;
		assert_int_equal(sd_tracker_reserve(&tr), LOMAS_OK);
		renumbered += tr.next < before;
		pos = sd_tracker_find(&tr, t[i], &slot);
		if (last[t[i]] == SIZE_MAX) {
			assert_int_equal(pos, 0);
		} else if (i % every == 0) {
			assert_true(pos > 0);
			uint64_t want = naive_distinct(t, last[t[i]] + 1, i, stamp, &now);
			assert_int_equal(sd_tracker_after(&tr, pos), want);
		}
		sd_tracker_mark(&tr, slot, pos);
		last[t[i]] = i;
	}
	sd_tracker_free(&tr);
	free(last);
	free(stamp);
	return renumbered;
}

static void test_tracker_vs_naive(void **state)
{
	uint64_t x = 12345;
	size_t n = 300000, r;
	uint32_t *t = malloc(n * sizeof *t);
	(void)state;
	assert_non_null(t);
	/* Few lines, long trace: a renumbering every ~1150 touches (cap 1188). */
	for (size_t i = 0; i < n; i++)
		t[i] = (uint32_t)sm_below(&x, 40);
	r = check_tracker(t, n, 40, 1);
	assert_true(r > 100);
	/* A growing footprint (new lines keep coming): the tree and table grow. */
	n = 60000;
	for (size_t i = 0; i < n; i++)
		t[i] = (uint32_t)sm_below(&x, 1 + i / 20);
	r = check_tracker(t, n, 3001, 1);
	assert_true(r > 5);
	/* Skewed: a hot set and a long tail (many lines touched once in a while). */
	for (size_t i = 0; i < n; i++)
		t[i] = sm_below(&x, 4) ? (uint32_t)sm_below(&x, 16)
		                       : 16 + (uint32_t)sm_below(&x, 5000);
	r = check_tracker(t, n, 5016, 1);
	assert_true(r > 2);
	/* 20000 lines (positions past several 32768-position superblocks): sweeps in
	 * shuffled order with hot lines between, every 37th reuse checked. */
	n = 300000;
	for (size_t i = 0; i < n; i++)
		t[i] = sm_below(&x, 3) ? (uint32_t)((i * 7919) % 20000)
		                       : 20000 + (uint32_t)sm_below(&x, 8);
	r = check_tracker(t, n, 20008, 37);
	assert_true(r > 2);
	free(t);
}

/* Two threads' references through the trace clock at period 1 (every reference sampled). */
static void test_trace_clock_distances(void **state)
{
	enum { N = 40000, LINES = 700 };
	uint64_t x = 99;
	uint32_t *t[2], n[2] = {0, 0}, stamp[LINES + 1] = {0}, now = 0;
	uint8_t *th = malloc(N);
	lomas_config *cfg;
	lomas_trace *tc;
	lomas_profile *p, *q, *m;
	size_t exact = 0;
	void *buf;
	size_t len;
	(void)state;
	t[0] = malloc(N * sizeof **t);
	t[1] = malloc(N * sizeof **t);
	assert_true(th && t[0] && t[1]);
	assert_int_equal(lomas_config_new(&cfg), LOMAS_OK);
	assert_int_equal(lomas_config_set(cfg, "period", "1"), LOMAS_OK);
	assert_int_equal(lomas_trace_new(cfg, &tc), LOMAS_OK);
	for (size_t i = 0; i < N; i++) {
		/* Thread 1 shares thread 0's lines (cross-thread touches count for neither). */
		uint32_t line =
		    sm_below(&x, 3) ? (uint32_t)sm_below(&x, 60) : (uint32_t)sm_below(&x, LINES);
		th[i] = (uint8_t)(sm_below(&x, 3) == 0);
		t[th[i]][n[th[i]]++] = line;
		assert_int_equal(lomas_trace_ref(tc, 7 + th[i], (uint64_t)line * 64 + 8 * (i % 8),
		                                 0x400000 + th[i], LOMAS_REF_LOAD),
		                 LOMAS_OK);
	}
	assert_int_equal(lomas_trace_finish(tc, &p), LOMAS_OK);
	lomas_trace_free(tc);
	assert_int_equal(p->samples.n, N);
	for (size_t i = 0; i < p->samples.n; i++) {
		const lomas_sample *s = &p->samples.items[i];
		uint32_t ti = s->thread;
		const uint32_t *tt = t[p->threads.items[ti].tid - 7];
		if (s->state != LOMAS_SAMPLE_REUSED) {
			assert_false(s->flags & LOMAS_SAMPLE_EXACT_SD);
			assert_int_equal(s->reserved, 0);
			continue;
		}
		assert_true(s->flags & LOMAS_SAMPLE_EXACT_SD);
		assert_int_equal(tt[s->start], tt[s->end]);
		assert_int_equal(s->reserved,
		                 naive_distinct(tt, s->start + 1, s->end, stamp, &now));
		exact++;
	}
	assert_true(exact > N / 2);

	/* Saved and loaded (PSAMPLES and EXACTSD): the same distances. */
	assert_int_equal(profile_save_buffer(p, &buf, &len), LOMAS_OK);
	assert_int_equal(profile_load_buffer(buf, len, "exact", &q), LOMAS_OK);
	assert_int_equal(q->samples.n, p->samples.n);
	for (size_t i = 0; i < p->samples.n; i++) {
		assert_int_equal(q->samples.items[i].flags, p->samples.items[i].flags);
		assert_int_equal(q->samples.items[i].reserved, p->samples.items[i].reserved);
	}
	/* As a 2.1 file (a reader that predates EXACTSD skips it): no distances. */
	{
		uint8_t *b = buf;
		lomas_profile *old;
		assert_int_equal(b[8] | b[9] << 8, 2); /* minor 2: EXACTSD */
		b[8] = 1;
		assert_int_equal(profile_load_buffer(buf, len, "as-2.1", &old), LOMAS_OK);
		for (size_t i = 0; i < old->samples.n; i++) {
			assert_false(old->samples.items[i].flags & LOMAS_SAMPLE_EXACT_SD);
			assert_int_equal(old->samples.items[i].reserved, 0);
		}
		lomas_profile_free(old);
	}
	free(buf);
	/* Merged: dst's and src's samples keep theirs. */
	assert_int_equal(lomas_profile_new(64, &m), LOMAS_OK);
	assert_int_equal(lomas_profile_merge(m, q), LOMAS_OK);
	assert_int_equal(lomas_profile_merge(m, p), LOMAS_OK);
	for (size_t i = 0; i < p->samples.n; i++) {
		assert_int_equal(m->samples.items[N + i].reserved, p->samples.items[i].reserved);
		assert_int_equal(m->samples.items[i].flags, p->samples.items[i].flags);
	}
	/* Through SAMPLES (a sample that cannot be packed: a flag PSAMPLES cannot hold). */
	m->samples.items[1].flags |= 0x8;
	assert_int_equal(profile_save_buffer(m, &buf, &len), LOMAS_OK);
	lomas_profile_free(q);
	assert_int_equal(profile_load_buffer(buf, len, "samples", &q), LOMAS_OK);
	for (size_t i = 0; i < m->samples.n; i++) {
		assert_int_equal(q->samples.items[i].flags, m->samples.items[i].flags);
		assert_int_equal(q->samples.items[i].reserved, m->samples.items[i].reserved);
	}
	free(buf);
	lomas_profile_free(m);
	lomas_profile_free(q);
	lomas_profile_free(p);
	lomas_config_free(cfg);
	free(th);
	free(t[0]);
	free(t[1]);
}

#define NDEF 57
#define NFINE 13
#define PERIOD "20"
#define SEEDS 20

/* The profile of tr through the trace clock (period PERIOD, seed), one thread. */
static lomas_profile *trace_profile(const sim_trace *tr, uint64_t seed)
{
	lomas_config *cfg;
	lomas_trace *tc;
	lomas_profile *p;
	char buf[32];
	assert_int_equal(lomas_config_new(&cfg), LOMAS_OK);
	assert_int_equal(lomas_config_set(cfg, "period", PERIOD), LOMAS_OK);
	snprintf(buf, sizeof buf, "%llu", (unsigned long long)seed);
	assert_int_equal(lomas_config_set(cfg, "seed", buf), LOMAS_OK);
	assert_int_equal(lomas_trace_new(cfg, &tc), LOMAS_OK);
	for (size_t i = 0; i < tr->n; i++)
		assert_int_equal(
		    lomas_trace_ref(tc, 1, (uint64_t)tr->t[i] * SIM_LINE, 0x401000, LOMAS_REF_LOAD),
		    LOMAS_OK);
	assert_int_equal(lomas_trace_finish(tc, &p), LOMAS_OK);
	lomas_trace_free(tc);
	lomas_config_free(cfg);
	return p;
}

/*
 * The LRU curve of tr's trace-clock profiles (SEEDS seeds) against exact
 * LRU at the default sizes and NFINE sizes around edge lines: within 1
 * point everywhere. Prints the worst error, and that of the same profiles
 * without their distances (StatStack's estimate alone).
 */
static void check_exact_curve(const char *name, const sim_trace *tr, uint64_t edge)
{
	uint64_t bytes[NDEF + NFINE], lines[NDEF + NFINE], cold;
	double exact[NDEF + NFINE], model[NDEF + NFINE];
	size_t n = sim_sizes(bytes, lines), bad_est = 0;
	uint64_t *hist = sim_lru_hist(tr, &cold);
	double worst = 0.0, worst_est = 0.0;
	assert_non_null(hist);
	assert_int_equal(n, NDEF);
	for (int d = -(NFINE / 2); d <= NFINE / 2; d++, n++) {
		lines[n] = (uint64_t)((int64_t)edge + d);
		bytes[n] = lines[n] * SIM_LINE;
	}
	for (size_t i = 0; i < n; i++)
		exact[i] = sim_lru_misses(hist, tr->k, lines[i]) / (double)tr->n;
	free(hist);
	for (uint64_t seed = 1; seed <= SEEDS; seed++) {
		lomas_profile *p = trace_profile(tr, seed);
		double w = 0.0;
		assert_int_equal(lomas_model_curve(p, LOMAS_POLICY_LRU, bytes, n, 0, 0, model),
		                 LOMAS_OK);
		for (size_t i = 0; i < n; i++)
			w = fmax(w, fabs(model[i] - exact[i]));
		if (w > 0.01)
			printf("  %s seed %llu: %.2f pp off\n", name, (unsigned long long)seed,
			       100 * w);
		assert_true(w <= 0.01);
		worst = fmax(worst, w);
		/* The same samples without their distances: StatStack's estimates. */
		for (size_t i = 0; i < p->samples.n; i++) {
			p->samples.items[i].flags &= (uint16_t)~LOMAS_SAMPLE_EXACT_SD;
			p->samples.items[i].reserved = 0;
		}
		assert_int_equal(lomas_model_curve(p, LOMAS_POLICY_LRU, bytes, n, 0, 0, model),
		                 LOMAS_OK);
		w = 0.0;
		for (size_t i = 0; i < n; i++)
			w = fmax(w, fabs(model[i] - exact[i]));
		worst_est = fmax(worst_est, w);
		bad_est += w > 0.01;
		lomas_profile_free(p);
	}
	printf("%-16s exact distances: worst %.2f pp over %d seeds; estimates alone: worst "
	       "%.2f pp, %zu seeds over 1 pp\n",
	       name, 100 * worst, SEEDS, 100 * worst_est, bad_est);
	fflush(stdout);
}

/* A cyclic walk over `k` lines, 8 references a line: every line reuse has distance k - 1. */
static void sweep(sim_trace *tr, uint32_t k, size_t refs)
{
	*tr = (sim_trace){0};
	for (size_t i = 0; i < refs; i++)
		sim_push(tr, (uint32_t)(i / 8 % k));
}

static void test_knife_sweeps(void **state)
{
	static const uint32_t ks[] = {500, 510, 515}; /* distances 499, 509, 514 */
	(void)state;
	for (size_t j = 0; j < sizeof ks / sizeof ks[0]; j++) {
		sim_trace tr;
		char name[32];
		sweep(&tr, ks[j], 1000000);
		snprintf(name, sizeof name, "sweep-sd-%u", ks[j] - 1);
		check_exact_curve(name, &tr, 512);
		free(tr.t);
	}
}

/*
 * 2mm's class: a cyclic walk over 214 lines, each cycle started by touches
 * of 1, 2 or 3 other lines (in turn): a walk line's reuse sees the 213
 * other walk lines and the extra lines at the start of the cycle it ends
 * in, so a third of the reuses have distance 214, a third 215, a third
 * 216, and a cache of 215 lines misses two thirds of them.
 */
static void test_class_split(void **state)
{
	sim_trace tr = {0};
	(void)state;
	for (uint32_t c = 0; tr.n < 1000000; c++) {
		for (uint32_t e = 0; e <= c % 3; e++)
			sim_push(&tr, 214 + e);
		for (uint32_t l = 0; l < 214; l++)
			sim_push(&tr, l);
	}
	check_exact_curve("class-214-216", &tr, 215);
	free(tr.t);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_tracker_vs_naive),
	    cmocka_unit_test(test_trace_clock_distances),
	    cmocka_unit_test(test_knife_sweeps),
	    cmocka_unit_test(test_class_split),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

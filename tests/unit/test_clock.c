/*
 * lib/clock pure logic: the skid planner against a simulated counter with
 * both PERF_EVENT_IOC_PERIOD semantics and random skid, the compensation
 * ledger against synthetic miscounts, and the step sampler against the sample
 * points the seed implies (computed here with the core rng).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>

#include "clock/clock.h"

/*
 * Drive the planner over a run: one reference per instruction, overflows
 * reported skid (random in [0, max_skid + extra]) references late. Returns
 * how many sample points were reached exactly; *overshots counts reports
 * that came after their point.
 */
static size_t drive(skid_semantics sem, uint32_t max_skid, uint32_t extra, uint64_t min_gap,
                    uint64_t seed, size_t npoints, size_t *overshots)
{
	rng r;
	uint64_t *sp = malloc((npoints + 2) * sizeof *sp), acc = 0, count = 0;
	skid_planner p;
	skid_counter k;
	skid_program prog;
	size_t hit = 0, next = 0;
	bool stepping = false;
	rng_seed(&r, seed);
	for (size_t i = 0; i < npoints + 2; i++) {
		acc += min_gap + rng_gap(&r, 50.0);
		sp[i] = acc;
	}
	*overshots = 0;
	prog = skid_plan_start(&p, max_skid, sem, 0, sp[0], sp[1]);
	skid_counter_open(&k, sem, 0, prog.step_now ? 0 : prog.period);
	if (prog.has_reload)
		skid_counter_set_period(&k, prog.reload);
	stepping = prog.step_now;
	while (next < npoints) {
		uint32_t skid = (uint32_t)(rng_next(&r) % (max_skid + extra + 1ull));
		/* One instruction, one reference. */
		bool due = skid_counter_advance(&k, 1, skid);
		count++;
		if (!stepping && due) {
			skid_action a;
			skid_counter_ack(&k);
			a = skid_plan_overflow(&p, count);
			if (a.overshot) {
				(*overshots)++;
				/* Lost: move on to the next point, as a real monitor would. */
			} else {
				assert_int_equal(a.target, sp[next]);
				assert_int_equal(a.target - count, a.remaining);
			}
			stepping = true;
		}
		if (stepping && count >= p.target) {
			if (count == p.target && count == sp[next])
				hit++;
			next++;
			prog = skid_plan_next(&p, count, sp[next + 1]);
			if (prog.step_now) {
				stepping = true;
			} else {
				stepping = false;
				if (sem == SKID_PERIOD_IMMEDIATE)
					skid_counter_set_period(&k, prog.period);
				else
					skid_counter_set_period(&k, prog.reload);
			}
		}
	}
	free(sp);
	return hit;
}

static void test_planner_immediate(void **state)
{
	size_t over;
	(void)state;
	for (uint32_t skid = 0; skid <= 12; skid += 4) {
		/* Points closer than max_skid are single-stepped to: all exact. */
		assert_int_equal(drive(SKID_PERIOD_IMMEDIATE, skid, 0, 1, 11 + skid, 2000, &over),
		                 2000);
		assert_int_equal(over, 0);
	}
	/* Skid beyond what was planned for loses points: the test can fail. */
	size_t hit = drive(SKID_PERIOD_IMMEDIATE, 4, 20, 1, 5, 2000, &over);
	assert_true(over > 0);
	assert_true(hit < 2000);
}

static void test_planner_next_overflow(void **state)
{
	size_t over;
	(void)state;
	/* The 2.6.36 semantics: the period set now applies after the next overflow. */
	for (uint32_t skid = 0; skid <= 12; skid += 4) {
		assert_int_equal(
		    drive(SKID_PERIOD_NEXT_OVERFLOW, skid, 0, 2 * skid + 2, 23 + skid, 2000, &over),
		    2000);
		assert_int_equal(over, 0);
	}
}

/* A counter planned for immediate semantics but running the old kernel's misses points. */
static void test_planner_semantics_matter(void **state)
{
	rng r;
	skid_planner p;
	skid_counter k;
	skid_program prog;
	uint64_t sp[3] = {100, 300, 1000};
	(void)state;
	rng_seed(&r, 1);
	prog = skid_plan_start(&p, 8, SKID_PERIOD_IMMEDIATE, 0, sp[0], sp[1]);
	assert_int_equal(prog.period, 92);
	skid_counter_open(&k, SKID_PERIOD_NEXT_OVERFLOW, 0, prog.period);
	assert_true(skid_counter_advance(&k, 92, 0));
	skid_counter_ack(&k);
	/* Re-armed at 100 for 300 - 8 = 292: an old kernel still counts the old 92. */
	prog = skid_plan_next(&p, 100, sp[2]);
	assert_int_equal(prog.period, 192);
	skid_counter_set_period(&k, prog.period);
	assert_true(skid_counter_advance(&k, 92, 0)); /* fires at 184, not 292 */
	/* The NEXT_OVERFLOW plan gets it right. */
	prog = skid_plan_start(&p, 8, SKID_PERIOD_NEXT_OVERFLOW, 0, sp[0], sp[1]);
	skid_counter_open(&k, SKID_PERIOD_NEXT_OVERFLOW, 0, prog.period);
	skid_counter_set_period(&k, prog.reload);
	assert_false(skid_counter_advance(&k, 91, 0));
	assert_true(skid_counter_advance(&k, 1, 0)); /* 92 = 100 - 8 */
	skid_counter_ack(&k);
	assert_false(skid_counter_advance(&k, 199, 0));
	assert_true(skid_counter_advance(&k, 1, 0)); /* 292 = 300 - 8 */
}

/* ------------------------------------------------------------------ ledger */

static void test_ledger(void **state)
{
	/* What each event really adds to the counter (unknown to the ledger). */
	const int64_t truth[LEDGER_NKINDS] = {3, 1, 7, 2};
	ledger l, cal;
	rng r;
	uint64_t refs = 0, raw = 0;
	(void)state;
	/* Calibration: a known sequence of 1000 references with k events of one kind each. */
	ledger_init(&cal);
	for (int kind = 0; kind < LEDGER_NKINDS; kind++) {
		uint64_t events = 10 + (uint64_t)kind;
		ledger_init(&l);
		memcpy(l.per_event, cal.per_event, sizeof l.per_event);
		assert_int_equal(ledger_calibrate(&l, (ledger_kind)kind, 1000,
		                                  1000 + (uint64_t)truth[kind] * events, events),
		                 LOMAS_OK);
		cal.per_event[kind] = l.per_event[kind];
	}
	for (int kind = 0; kind < LEDGER_NKINDS; kind++)
		assert_int_equal(cal.per_event[kind], truth[kind]);
	/* A miscount that is not a whole number per event is refused. */
	ledger_init(&l);
	assert_int_equal(ledger_calibrate(&l, LEDGER_TRAP, 1000, 1005, 2), LOMAS_EINVAL);
	/* A run: references interleaved with events; begin/end times recovered exactly. */
	l = cal;
	memset(l.events, 0, sizeof l.events);
	rng_seed(&r, 99);
	uint64_t begin_true = 0, begin_raw = 0;
	for (int i = 0; i < 100000; i++) {
		if (rng_next(&r) % 5 == 0) {
			ledger_kind kind = (ledger_kind)(rng_next(&r) % LEDGER_NKINDS);
			ledger_note(&l, kind, 1);
			raw += (uint64_t)truth[kind];
		} else {
			refs++;
			raw++;
		}
		assert_int_equal(ledger_correct(&l, raw), refs);
		if (i == 5000) {
			begin_true = refs;
			begin_raw = ledger_correct(&l, raw);
		}
	}
	assert_int_equal(ledger_correct(&l, raw) - begin_raw, refs - begin_true);
}

/* ---------------------------------------------------------------- sampler */

static void sampler_exact(uint64_t seed, double period, uint32_t max_skid)
{
	step_sampler s;
	rng r, shape;
	uint64_t clock = 0, sp = 0;
	size_t got = 0, want = 0;
	uint64_t *expect = malloc(200001 * sizeof *expect);
	/* The points: counts sp = sum of gaps, i.e. reference clocks sp - 1. */
	rng_seed(&r, seed);
	for (;;) {
		sp += rng_gap(&r, period);
		if (sp > 200000)
			break;
		expect[want++] = sp - 1;
	}
	step_sampler_init(&s, seed, period, max_skid);
	rng_seed(&shape, seed * 3 + 1);
	while (clock < 200000) {
		unsigned n = (unsigned)(rng_next(&shape) % 5), idx[8];
		if (clock + n > 200000)
			n = (unsigned)(200000 - clock);
		unsigned k = step_sampler_commit(&s, clock, n, idx);
		for (unsigned j = 0; j < k; j++) {
			assert_true(idx[j] < n);
			if (j)
				assert_true(idx[j] > idx[j - 1]);
			assert_true(got < want);
			assert_int_equal(clock + idx[j], expect[got]);
			got++;
		}
		clock += n;
	}
	assert_int_equal(got, want);
	assert_int_equal(s.lost, 0);
	if (max_skid && period > 4.0 * max_skid)
		assert_true(s.overflows > 0);
	free(expect);
}

static void test_sampler(void **state)
{
	(void)state;
	sampler_exact(1, 1.0, 0);
	sampler_exact(2, 3.0, 8);
	sampler_exact(3, 100.0, 0);
	sampler_exact(4, 100.0, 8);
	sampler_exact(5, 40.0, 30);
	sampler_exact(6, 1000.0, 8);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_planner_immediate),
	    cmocka_unit_test(test_planner_next_overflow),
	    cmocka_unit_test(test_planner_semantics_matter),
	    cmocka_unit_test(test_ledger),
	    cmocka_unit_test(test_sampler),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

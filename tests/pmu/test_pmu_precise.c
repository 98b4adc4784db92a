/*
 * The pmu clock's precise mode (pmu_sample=precise) through the replay
 * kernel (issue 20, "A PEBS/IBS replay gives records with exact ip and
 * address"): the fake writes, when a counter overflows, a PERF_RECORD_SAMPLE
 * naming the reference that overflowed it (ip, data address, data source)
 * into the counter's ring, and signals the overflow late by a random skid.
 * The clock takes each sample from the record, with no step to the point.
 *
 * Ground truth: the step clock's samples at the same seed, which counts
 * every reference by decoding. Every precise sample must be one of them, the
 * same point (clock, pc, address, kind); its end the same, except where the
 * step clock's reuse lies inside the skid window (between the sampled
 * reference and the signal), which precise sampling cannot see: there the
 * precise sample ends later or not at all, and the test counts and prints
 * those and the distance they add.
 */
#include "pmu_replay_run.h"

typedef struct precise_out {
	uint64_t runs, points, exact_ends, window_lost, window_extra, lost, records, stale,
	    clock_steps, retry_steps, overflows, moved, at_end;
} precise_out;

static bool same_point(const lomas_sample *x, const lomas_sample *y)
{
	return x->start == y->start && x->start_pc == y->start_pc && x->addr == y->addr &&
	       x->kind == y->kind && x->thread == y->thread;
}

/*
 * Match b's samples (precise) to a's (step clock) point for point; a point
 * of a missing from b counts as lost. The ends: see the file's comment.
 */
static void compare(const lomas_profile *a, const lomas_profile *b, uint64_t window, precise_out *o,
                    const char *what)
{
	size_t i = 0;
	for (size_t j = 0; j < b->samples.n; j++, i++) {
		const lomas_sample *y = &b->samples.items[j], *x;
		while (i < a->samples.n && !same_point(&a->samples.items[i], y) &&
		       a->samples.items[i].start < y->start) {
			if (getenv("PRECISE_DEBUG"))
				fprintf(stderr, "#   %s: missing %llu\n", what,
				        (unsigned long long)a->samples.items[i].start);
			i++, o->lost++;
		}
		if (i == a->samples.n || !same_point(&a->samples.items[i], y)) {
			for (size_t k = i > 2 ? i - 2 : 0; k < i + 3 && k < a->samples.n; k++)
				fprintf(stderr, "#   step clock: start %llu pc %#llx addr %#llx\n",
				        (unsigned long long)a->samples.items[k].start,
				        (unsigned long long)a->samples.items[k].start_pc,
				        (unsigned long long)a->samples.items[k].addr);
			fail_msg(
			    "%s: precise sample %zu (start %llu pc %#llx addr %#llx) is no point "
			    "of the step clock's",
			    what, j, (unsigned long long)y->start, (unsigned long long)y->start_pc,
			    (unsigned long long)y->addr);
		}
		x = &a->samples.items[i];
		o->points++;
		if (x->state == y->state && (x->state != LOMAS_SAMPLE_REUSED ||
		                             (x->end == y->end && x->end_pc == y->end_pc))) {
			o->exact_ends++;
			continue;
		}
		/* Only a reuse inside the skid window may be missed, and only by ending later. */
		if (x->state != LOMAS_SAMPLE_REUSED || x->end - x->start > window ||
		    (y->state == LOMAS_SAMPLE_REUSED && y->end <= x->end))
			fail_msg(
			    "%s: sample at %llu: step clock end %llu (state %d), precise end %llu "
			    "(state %d), window %llu",
			    what, (unsigned long long)x->start, (unsigned long long)x->end,
			    x->state, (unsigned long long)y->end, y->state,
			    (unsigned long long)window);
		o->window_lost++;
		if (y->state == LOMAS_SAMPLE_REUSED)
			o->window_extra += y->end - x->end;
	}
	if (getenv("PRECISE_DEBUG"))
		fprintf(stderr,
		        "#   %s: %zu missing at the end; last step point %llu, last precise %llu\n",
		        what, a->samples.n - i,
		        a->samples.n ? (unsigned long long)a->samples.items[a->samples.n - 1].start
		                     : 0,
		        b->samples.n ? (unsigned long long)b->samples.items[b->samples.n - 1].start
		                     : 0);
	o->lost += a->samples.n - i;
	o->at_end += a->samples.n - i; /* after the last sample taken */
}

static void sweep(const char *tgt, const char *arg, uint32_t skid, const int64_t pert[4],
                  const unsigned *periods, size_t np, unsigned seeds, precise_out *o)
{
	char path[4200], seed[32], period[32], skids[32], what[256];
	run_result n, s, p;
	memset(o, 0, sizeof *o);
	target(path, sizeof path, tgt);
	char *argv[] = {path, (char *)arg, NULL};
	run_native(argv, &n);
	snprintf(skids, sizeof skids, "%u", skid);
	for (size_t pi = 0; pi < np; pi++)
		for (unsigned k = 1; k <= seeds; k++) {
			pmu_replay_stats rs;
			uint64_t before = o->lost;
			snprintf(seed, sizeof seed, "%u", k);
			snprintf(period, sizeof period, "%u", periods[pi]);
			snprintf(what, sizeof what, "%s period %s seed %s skid %u", tgt, period,
			         seed, skid);
			assert_int_equal(run_step(argv, &s, "period", period, "seed", seed, NULL),
			                 LOMAS_OK);
			replay_on_mode(k * 7919, skid, false, pert[0], pert[1], pert[2], pert[3],
			               true);
			if (run_step(argv, &p, "clock", "pmu", "events", "MEM_INST_RETIRED:ANY",
			             "pmu_sample", "precise", "period", period, "seed", seed,
			             "max_skid", skids, NULL))
				fail_msg("the pmu clock, precise: %s", lomas_error_message());
			replay_off(&rs);
			assert_string_equal(p.out, n.out);
			assert_int_equal(p.status, n.status);
			assert_int_equal(profile_validate(p.prof), LOMAS_OK);
			{
				const char *mode = NULL;
				assert_int_equal(
				    lomas_profile_meta_get(p.prof, "pmu.sample", &mode), LOMAS_OK);
				assert_string_equal(mode, "precise");
			}
			compare(s.prof, p.prof, skid + DECODE_MAX_REFS, o, what);
			/*
			 * Every point missing is one the clock knows it lost, those
			 * its thread passed before it exited with their overflow not
			 * signalled yet too (test_precise_lost_at_exit; hybrid runs
			 * lost one such point uncounted now and then).
			 */
			assert_int_equal(o->lost - before, meta_u64(p.prof, "pmu.overshoots"));
			o->runs++;
			o->records += meta_u64(p.prof, "pmu.records");
			o->stale += meta_u64(p.prof, "pmu.stale_records");
			o->clock_steps += meta_u64(p.prof, "pmu.clock_steps");
			o->retry_steps += meta_u64(p.prof, "pmu.retry_steps");
			o->overflows += meta_u64(p.prof, "pmu.overflows");
			if (hybrid_every)
				o->moved += meta_u64(p.prof, "pmu.moved_kind");
			assert_true(rs.records >= meta_u64(p.prof, "pmu.records"));
			free_result(&s);
			free_result(&p);
		}
	fprintf(stderr,
	        "# precise %s skid %u perturbations %lld/%lld/%lld/%lld: %llu runs, %llu points "
	        "of the step clock's (%llu lost), %llu with the same end, %llu reuses inside "
	        "the skid window missed (distance +%.1f on average where a later reuse ended "
	        "them), %llu records taken, %llu stale, %llu overflows, clock steps %llu, "
	        "fault-retry steps %llu\n",
	        tgt, skid, (long long)pert[0], (long long)pert[1], (long long)pert[2],
	        (long long)pert[3], (unsigned long long)o->runs, (unsigned long long)o->points,
	        (unsigned long long)o->lost, (unsigned long long)o->exact_ends,
	        (unsigned long long)o->window_lost,
	        o->window_lost ? (double)o->window_extra / (double)o->window_lost : 0.0,
	        (unsigned long long)o->records, (unsigned long long)o->stale,
	        (unsigned long long)o->overflows, (unsigned long long)o->clock_steps,
	        (unsigned long long)o->retry_steps);
}

static const unsigned periods[] = {50, 300};

/* No skid, no perturbation: every point, every end as the step clock's; no stepping. */
static void test_precise_exact(void **state)
{
	static const int64_t none[4] = {0, 0, 0, 0};
	precise_out o;
	sweep("t_loop", "6", 0, none, periods, 2, 4, &o);
	assert_int_equal(o.lost, 0);
	assert_true(o.points > o.runs * 5);
	assert_int_equal(o.clock_steps, 0);
	assert_int_equal(o.records, o.points);
	/* With no skid only a reuse by the same instruction is out of reach. */
	assert_true(o.exact_ends * 10 >= o.points * 9);
}

/* Random skid and every perturbation: the points still the step clock's, never stepped to. */
static void test_precise_skid_perturbed(void **state)
{
	static const int64_t pert[4] = {1, 2, 3, 5};
	precise_out o;
	sweep("t_loop", "6", 12, pert, periods, 2, 4, &o);
	assert_int_equal(o.clock_steps, 0);
	assert_true(o.points > o.runs * 5);
	/* Lost points are those passed within a skid or moved onto a perturbation: few. */
	assert_true(o.lost * 5 <= o.points);
	assert_true(o.exact_ends * 2 >= o.points);
}

/* A program that faults on purpose and catches its signals: same output, points exact. */
static void test_precise_segv_recover(void **state)
{
	static const int64_t pert[4] = {1, 2, 3, 5};
	static const unsigned p[] = {40};
	precise_out o;
	sweep("t_segv_recover", "1", 8, pert, p, 1, 3, &o);
	assert_int_equal(o.clock_steps, 0);
	assert_true(o.points > 0);
}

/*
 * The seed's double trap: the record's ip gets an int3, and the sample is
 * the reference of that instruction's next run. Each sample must come from
 * a step clock point (same pc, later start); the test measures the bias:
 * how much later (references), and the mean reuse distance of the double
 * trap's samples against the step clock's at the same seed.
 */
static void dtrap_sweep(const char *tgt, const char *arg, uint32_t skid, const int64_t pert[4],
                        const unsigned *per, size_t np, unsigned seeds)
{
	char path[4200], seed[32], period[32], skids[32];
	run_result n, s, p;
	uint64_t runs = 0, samples = 0, points = 0, delay = 0, max_delay = 0, nx = 0, ny = 0;
	double dx = 0, dy = 0;
	target(path, sizeof path, tgt);
	char *argv[] = {path, (char *)arg, NULL};
	run_native(argv, &n);
	snprintf(skids, sizeof skids, "%u", skid);
	for (size_t pi = 0; pi < np; pi++)
		for (unsigned k = 1; k <= seeds; k++) {
			snprintf(seed, sizeof seed, "%u", k);
			snprintf(period, sizeof period, "%u", per[pi]);
			assert_int_equal(run_step(argv, &s, "period", period, "seed", seed, NULL),
			                 LOMAS_OK);
			replay_on_mode(k * 7919, skid, false, pert[0], pert[1], pert[2], pert[3],
			               true);
			if (run_step(argv, &p, "clock", "pmu", "events", "MEM_INST_RETIRED:ANY",
			             "pmu_sample", "double_trap", "period", period, "seed", seed,
			             "max_skid", skids, NULL))
				fail_msg("the pmu clock, double trap: %s", lomas_error_message());
			replay_off(NULL);
			/* Every int3 gone: the program runs as without us. */
			assert_string_equal(p.out, n.out);
			assert_int_equal(p.status, n.status);
			assert_int_equal(profile_validate(p.prof), LOMAS_OK);
			assert_int_equal(meta_u64(p.prof, "pmu.clock_steps"), 0);
			assert_int_equal(meta_u64(p.prof, "pmu.dtrap_taken"), p.prof->samples.n);
			for (size_t j = 0; j < p.prof->samples.n; j++) {
				const lomas_sample *y = &p.prof->samples.items[j], *x = NULL;
				/* The latest step clock point at this pc before it: its overflow.
				 */
				for (size_t i = 0; i < s.prof->samples.n; i++) {
					const lomas_sample *c = &s.prof->samples.items[i];
					if (c->start >= y->start)
						break;
					if (c->start_pc == y->start_pc)
						x = c;
				}
				if (!x) {
					for (size_t i = 0; i < s.prof->samples.n; i++)
						if (s.prof->samples.items[i].start + 200 >
						        y->start &&
						    s.prof->samples.items[i].start < y->start + 50)
							fprintf(stderr,
							        "#   step clock: %llu pc %#llx\n",
							        (unsigned long long)s.prof->samples
							            .items[i]
							            .start,
							        (unsigned long long)s.prof->samples
							            .items[i]
							            .start_pc);
					for (size_t i = 0; i < p.prof->samples.n; i++)
						if (p.prof->samples.items[i].start + 200 >
						        y->start &&
						    p.prof->samples.items[i].start < y->start + 50)
							fprintf(stderr,
							        "#   double trap: %llu pc %#llx\n",
							        (unsigned long long)p.prof->samples
							            .items[i]
							            .start,
							        (unsigned long long)p.prof->samples
							            .items[i]
							            .start_pc);
					fail_msg("%s period %s seed %s: double trap sample at %llu "
					         "pc %#llx "
					         "follows no point of the step clock's at that pc",
					         tgt, period, seed, (unsigned long long)y->start,
					         (unsigned long long)y->start_pc);
				}
				delay += y->start - x->start;
				if (y->start - x->start > max_delay)
					max_delay = y->start - x->start;
				if (y->state == LOMAS_SAMPLE_REUSED)
					dy += (double)(y->end - y->start), ny++;
			}
			for (size_t i = 0; i < s.prof->samples.n; i++) {
				const lomas_sample *c = &s.prof->samples.items[i];
				if (c->state == LOMAS_SAMPLE_REUSED)
					dx += (double)(c->end - c->start), nx++;
			}
			runs++;
			samples += p.prof->samples.n;
			points += s.prof->samples.n;
			free_result(&s);
			free_result(&p);
		}
	assert_true(samples > runs);
	fprintf(stderr,
	        "# double trap %s skid %u: %llu runs, %llu samples for the step "
	        "clock's %llu "
	        "points; each %.1f references after its point on average (at most "
	        "%llu); mean "
	        "reuse distance %.1f against the step clock's %.1f (%+.1f %%), "
	        "reused %.1f %% "
	        "against %.1f %%\n",
	        tgt, skid, (unsigned long long)runs, (unsigned long long)samples,
	        (unsigned long long)points, (double)delay / (double)samples,
	        (unsigned long long)max_delay, ny ? dy / (double)ny : 0.0,
	        nx ? dx / (double)nx : 0.0,
	        nx && ny && dx > 0 ? (dy / (double)ny / (dx / (double)nx) - 1) * 100 : 0.0,
	        100.0 * (double)ny / (double)samples, 100.0 * (double)nx / (double)points);
}

static void test_double_trap(void **state)
{
	static const int64_t none[4] = {0, 0, 0, 0}, pert[4] = {1, 2, 3, 5};
	dtrap_sweep("t_loop", "6", 0, none, periods, 2, 4);
	dtrap_sweep("t_loop", "6", 12, pert, periods, 2, 4);
}

/* A program with its own SIGSEGV handler: the int3s never reach it. */
static void test_double_trap_segv_recover(void **state)
{
	static const int64_t pert[4] = {1, 2, 3, 5};
	static const unsigned p[] = {40};
	dtrap_sweep("t_segv_recover", "1", 8, pert, p, 1, 3);
}

/* A hybrid CPU (the replay's threads move between two kinds of core): the same points. */
static void test_precise_hybrid(void **state)
{
	static const int64_t pert[4] = {1, 2, 3, 5};
	precise_out o;
	hybrid_on(97);
	sweep("t_loop", "6", 12, pert, periods, 2, 2, &o);
	hybrid_off();
	assert_int_equal(o.clock_steps, 0);
	assert_true(o.points > o.runs * 5);
	fprintf(stderr, "# precise, hybrid: %llu points lost to a move between arming and signal\n",
	        (unsigned long long)o.moved);
}

/*
 * A skid longer than the program's way from its last point to its exit
 * (t_loop: the rest of the loop, write, exit): the overflow of the last
 * point is never signalled, the thread exits first. That point is lost,
 * and the clock must know it (pmu.overshoots), as it knows every other.
 */
static void test_precise_lost_at_exit(void **state)
{
	static const int64_t none[4] = {0, 0, 0, 0};
	static const unsigned p[] = {50};
	precise_out o;
	sweep("t_loop", "6", 400, none, p, 1, 4, &o);
	assert_true(o.points > o.runs * 5);
	/* The case happened: points after the last one taken, counted among the lost above. */
	assert_true(o.at_end >= o.runs);
	fprintf(stderr, "# precise, lost at exit: %llu points after the last sample taken\n",
	        (unsigned long long)o.at_end);
}

/* Refused where it cannot be right: the 2.6.36 period semantics. */
static void test_precise_needs_immediate(void **state)
{
	char path[4200];
	run_result p;
	target(path, sizeof path, "t_loop");
	char *argv[] = {path, "2", NULL};
	replay_on_mode(1, 4, true, 0, 0, 0, 0, true);
	assert_int_equal(run_step(argv, &p, "clock", "pmu", "events", "MEM_INST_RETIRED:ANY",
	                          "pmu_sample", "precise", "period_semantics", "next_overflow",
	                          NULL),
	                 LOMAS_ENOTSUP);
	replay_off(NULL);
	assert_non_null(strstr(lomas_error_message(), "Linux >= 3.14"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_precise_exact),
	    cmocka_unit_test(test_precise_skid_perturbed),
	    cmocka_unit_test(test_precise_segv_recover),
	    cmocka_unit_test(test_precise_needs_immediate),
	    cmocka_unit_test(test_precise_hybrid),
	    cmocka_unit_test(test_precise_lost_at_exit),
	    cmocka_unit_test(test_double_trap),
	    cmocka_unit_test(test_double_trap_segv_recover),
	};
	return pmu_replay_main(tests, sizeof tests / sizeof *tests, "test_pmu_precise", true,
	                       "skl");
}

/*
 * The step clock and programs that fault on purpose (issue 16, item 3).
 * t_segv_recover catches its own SIGSEGV and SIGBUS in every way a program
 * can (siglongjmp out of handlers that run with SIGSEGV blocked, a handler
 * that fixes the page and returns, an alternate stack, SIGSEGV blocked or
 * ignored for a while); under the step clock it must print the same lines
 * and exit with the same status as natively at every seed, period and
 * skid. Before lib/monitor/sigstate.c, a fault on a page we protected,
 * taken inside such a handler, made the kernel reset the program's SIGSEGV
 * handler (force_sig_info_to_task) and its next genuine fault killed it:
 * every seed at --period 50 died so.
 */
#include "step_run.h"

#include "lomas/lomas.h"

static void sweep(const char *name, const char *rounds, const unsigned *periods, size_t nperiods,
                  unsigned nseeds, const char *max_skid)
{
	char path[4200], seed[32], period[32];
	run_result n, s;
	uint64_t faults = 0, reused = 0, steps = 0, runs = 0;
	double t0 = mono_s();
	target(path, sizeof path, name);
	char *argv[] = {path, (char *)rounds, NULL};
	run_native(argv, &n);
	assert_true(WIFEXITED(n.status));
	for (size_t p = 0; p < nperiods; p++)
		for (unsigned k = 1; k <= nseeds; k++) {
			snprintf(seed, sizeof seed, "%u", k);
			snprintf(period, sizeof period, "%u", periods[p]);
			assert_int_equal(run_step(argv, &s, "period", period, "seed", seed,
			                          "max_skid", max_skid, NULL),
			                 LOMAS_OK);
			if (strcmp(s.out, n.out) != 0 || s.status != n.status)
				fail_msg("%s, period %s, seed %s, max_skid %s: status %#x (native "
				         "%#x), output:\n%s\nnative:\n%s",
				         name, period, seed, max_skid, s.status, n.status, s.out,
				         n.out);
			assert_int_equal(profile_validate(s.prof), LOMAS_OK);
			faults += s.stats.faults;
			reused += s.stats.reused;
			steps += s.stats.steps;
			runs++;
			free_result(&s);
		}
	/* The sweep did watch pages and take faults on them: it tested something. */
	assert_true(faults > runs);
	assert_true(reused > runs);
	fprintf(stderr,
	        "# %s max_skid %s: %llu runs, %llu steps, %llu faults of ours, %llu reuses, "
	        "%.1f s\n",
	        name, max_skid, (unsigned long long)runs, (unsigned long long)steps,
	        (unsigned long long)faults, (unsigned long long)reused, mono_s() - t0);
}

#if defined(__SANITIZE_ADDRESS__)
#define SEEDS 10 /* the sanitized build: the same paths, fewer seeds */
#else
#define SEEDS 30
#endif

/* 30 seeds x periods 10, 50, 200: output and exit status as natively. */
static void test_segv_recover_seeds(void **state)
{
	static const unsigned periods[] = {10, 50, 200};
	(void)state;
	sweep("t_segv_recover", "1", periods, 3, SEEDS, "0");
}

/* The same with simulated skid (samples start later than the overflow). */
static void test_segv_recover_skid(void **state)
{
	static const unsigned periods[] = {10, 50};
	(void)state;
	sweep("t_segv_recover", "1", periods, 2, SEEDS / 3, "8");
}

int main(void)
{
	int rc = step_test_setup();
	if (rc)
		return rc;
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_segv_recover_seeds),
	    cmocka_unit_test(test_segv_recover_skid),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

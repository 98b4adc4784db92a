/*
 * The hostile set under the pmu clock through the replay kernel (issue 20;
 * docs/pmu-clock.md, "Running free"): between samples the target runs
 * freely under PTRACE_SYSCALL, its system calls skipped at entry and
 * stepped over with the watched pages lifted, its own signals delivered,
 * its faults on pages we protected retried. Each target must behave
 * exactly as natively (the same output, the same exit status or signal)
 * and the profile must be valid, with samples taken. Ground truth: the
 * native run of the same program.
 */
#include "pmu_replay_run.h"

/* argv under the pmu clock through a replay kernel with skid and perturbations. */
static void same_as_native(char *const argv[], const char *period, uint64_t seed)
{
	run_result n, p;
	pmu_replay_stats rs;
	run_native(argv, &n);
	replay_on(seed, 8, false, 1, 2, 3, 5);
	if (run_step(argv, &p, "clock", "pmu", "events", "MEM_INST_RETIRED:ANY", "period", period,
	             "seed", "3", "max_skid", "8", NULL))
		fail_msg("the pmu clock on %s: %s", argv[0], lomas_error_message());
	replay_off(&rs);
	assert_string_equal(p.out, n.out);
	assert_int_equal(p.status, n.status);
	assert_int_equal(profile_validate(p.prof), LOMAS_OK);
	assert_true(p.stats.samples > 0);
	/* It ran free between samples: the monitor resumed it so, and took overflows. */
	assert_true(meta_u64(p.prof, "pmu.runs") > 0);
	assert_true(meta_u64(p.prof, "pmu.overflows") > 0);
	fprintf(stderr,
	        "# %s %s: status %#x, %llu samples, %llu monitor steps, %llu free runs, %llu "
	        "calls stepped over, %llu overflows\n",
	        strrchr(argv[0], '/') + 1, argv[1] ? argv[1] : "", p.status,
	        (unsigned long long)p.stats.samples, (unsigned long long)p.stats.steps,
	        (unsigned long long)meta_u64(p.prof, "pmu.runs"),
	        (unsigned long long)meta_u64(p.prof, "pmu.calls_stepped"),
	        (unsigned long long)meta_u64(p.prof, "pmu.overflows"));
	free_result(&p);
}

/* Its own SIGSEGV handler, reads and writes on watched pages, sigaltstack, SIGALRM, raise. */
static void test_signals(void **state)
{
	char path[4200];
	target(path, sizeof path, "t_signals");
	char *argv[] = {path, NULL};
	same_as_native(argv, "20", 1);
}

/* Faults on purpose and recovers (siglongjmp out of its handler). */
static void test_segv_recover(void **state)
{
	char path[4200];
	target(path, sizeof path, "t_segv_recover");
	char *argv[] = {path, "3", NULL};
	same_as_native(argv, "30", 2);
}

/* Two threads; the second ends the process with exit(5). */
static void test_threads(void **state)
{
	char path[4200];
	target(path, sizeof path, "t_threads");
	char *argv[] = {path, NULL};
	same_as_native(argv, "30", 3);
}

/* Crashes: the same signal, the same output before it. */
static void test_crash(void **state)
{
	char path[4200];
	target(path, sizeof path, "t_crash");
	char *argv[] = {path, NULL};
	char *argv2[] = {path, "abort", NULL};
	char *argv3[] = {path, "fpe", NULL};
	same_as_native(argv, "50", 4);
	same_as_native(argv2, "50", 5);
	same_as_native(argv3, "50", 6);
}

/* fork, the child execs (not followed): it sees none of our protections. */
static void test_fork_exec(void **state)
{
	char path[4200];
	target(path, sizeof path, "t_fork");
	char *argv[] = {path, "/bin/echo", "from the child", NULL};
	same_as_native(argv, "20", 7);
}

/* Threads starting and ending while SIGALRM and SIGUSR1 arrive throughout. */
static void test_stress(void **state)
{
	char path[4200];
	target(path, sizeof path, "t_stress");
	char *argv[] = {path, "12", "4", "40", NULL};
	same_as_native(argv, "40", 8);
}

/* Realtime signals queued by another process in bursts: each delivered once, its value kept. */
static void test_rt_signals(void **state)
{
	char path[4200];
	target(path, sizeof path, "t_rtsig");
	char *argv[] = {path, "300", "50", NULL};
	char *argv2[] = {path, "300", "300", NULL};
	same_as_native(argv, "40", 9);
	same_as_native(argv2, "40", 10);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_signals),    cmocka_unit_test(test_segv_recover),
	    cmocka_unit_test(test_threads),    cmocka_unit_test(test_crash),
	    cmocka_unit_test(test_fork_exec),  cmocka_unit_test(test_stress),
	    cmocka_unit_test(test_rt_signals),
	};
	return pmu_replay_main(tests, sizeof tests / sizeof *tests, "test_pmu_hostile", false,
	                       "skl");
}

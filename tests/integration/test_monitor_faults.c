/*
 * Fault injection into the monitor (issue 16, "Also"): the target can vanish
 * between any two of the monitor's system calls, and then every ptrace,
 * waitpid and process_vm_readv fails (ESRCH, ECHILD). Through the seam in
 * lib/monitor/sys.c, for each N:
 *
 *  - the Nth call fails with ESRCH (a wait: EINTR), a failure the monitor
 *    cannot explain: the target is still there and stopped;
 *  - the target is killed (SIGKILL) just before the Nth call (it vanishes
 *    for real, at that exact point);
 *  - the Nth call of a detach (lomas_session_stop mid-run) fails.
 *
 * Each time the session must end with a clear status (the target's own, or
 * an error with a message), never hang (every wait here has a deadline),
 * never crash, leak nothing (the ASan build runs this too), and leave a
 * target that still exists neither stopped (not in a ptrace- or
 * group-stop) nor protected (no PROT_NONE page, no page of ours mapped).
 */
#include <dirent.h>
#include <fcntl.h>
#include <sys/prctl.h>

#include "step_run.h"

#include "lomas/lomas.h"
#include "monitor/monitor.h"

#define DEADLINE_S 30.0

static char path[4200];
static char *argv_spin[] = {path, "spin", "60", NULL};

static lomas_config *config(void)
{
	lomas_config *cfg;
	assert_int_equal(lomas_config_new(&cfg), LOMAS_OK);
	assert_int_equal(lomas_config_set(cfg, "clock", "step"), LOMAS_OK);
	assert_int_equal(lomas_config_set(cfg, "period", "7"), LOMAS_OK);
	return cfg;
}

/* SIGKILL every child of ours (the target: the test starts no other). */
static void kill_children(uint64_t call, void *ctx)
{
	char dir[64], file[128];
	DIR *d;
	struct dirent *de;
	(void)call;
	(void)ctx;
	snprintf(dir, sizeof dir, "/proc/%d/task", (int)getpid());
	if (!(d = opendir(dir)))
		return;
	while ((de = readdir(d))) {
		FILE *f;
		int pid;
		if (de->d_name[0] == '.')
			continue;
		snprintf(file, sizeof file, "%s/%s/children", dir, de->d_name);
		if (!(f = fopen(file, "re")))
			continue;
		while (fscanf(f, "%d", &pid) == 1)
			kill(pid, SIGKILL);
		fclose(f);
	}
	closedir(d);
}

static char state_of(pid_t pid)
{
	char p[64], buf[512];
	FILE *f;
	snprintf(p, sizeof p, "/proc/%d/stat", (int)pid);
	if (!(f = fopen(p, "re")))
		return 0;
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = 0;
	char *rp = strrchr(buf, ')');
	return rp && rp[1] && rp[2] ? rp[2] : '?';
}

/*
 * The target (our child) after the session let go of it: gone, a zombie, or
 * running with its own protections only; then killed and reaped.
 */
static void check_let_go(pid_t pid, uint64_t n, const char *mode)
{
	char p[64], line[512];
	FILE *f;
	int st;
	char c = state_of(pid);
	if (c && c != 'Z') {
		/* Detached: a stop we caused would show as t (traced) or T. */
		for (int i = 0; i < 50 && (c == 't' || c == 'T'); i++) {
			usleep(2000);
			c = state_of(pid);
		}
		if (c == 't' || c == 'T')
			fail_msg("%s, call %llu: the target was left stopped (%c)", mode,
			         (unsigned long long)n, c);
		snprintf(p, sizeof p, "/proc/%d/maps", (int)pid);
		if ((f = fopen(p, "re"))) {
			while (fgets(line, sizeof line, f)) {
				char perms[8] = "", name[256] = "";
				unsigned long ino = 1;
				sscanf(line, "%*x-%*x %7s %*x %*s %lu %255s", perms, &ino, name);
				if (!strcmp(perms, "---p") ||
				    (ino == 0 && !name[0] && perms[2] == 'x'))
					fail_msg("%s, call %llu: a page of ours is left: %s", mode,
					         (unsigned long long)n, line);
			}
			fclose(f);
		}
	}
	kill(pid, SIGKILL);
	if (waitpid(pid, &st, 0) != pid)
		fail_msg("%s, call %llu: the target %d is not our child any more", mode,
		         (unsigned long long)n, (int)pid);
}

/* No child of ours is left (every target reaped). */
static void no_children(void)
{
	int st;
	errno = 0;
	assert_int_equal(waitpid(-1, &st, WNOHANG), -1);
	assert_int_equal(errno, ECHILD);
}

/* Read the pid the profile records (0 if none). */
static pid_t pid_of(lomas_session *s)
{
	lomas_profile *p;
	const char *v = NULL;
	pid_t pid = 0;
	if (lomas_session_profile(s, &p) != LOMAS_OK)
		return 0;
	if (lomas_profile_meta_get(p, "pid", &v) == LOMAS_OK && v)
		pid = (pid_t)atoi(v);
	lomas_profile_free(p);
	return pid;
}

/*
 * One run of t_jobctl under the step clock with the hook set; the run's
 * outcome checked. Returns the seam calls the run made.
 */
static uint64_t run_once(const mon_sys_hook *hook, uint64_t n, const char *mode, int native)
{
	lomas_config *cfg = config();
	lomas_session *s = NULL;
	lomas_status st;
	int running = 1, status = -1, devnull = open("/dev/null", O_WRONLY), saved = dup(1);
	uint64_t calls;
	double t0 = mono_s();
	pid_t pid = 0;
	mon_sys_set_hook(hook);
	dup2(devnull, 1);
	st = lomas_session_start(cfg, argv_spin, &s);
	dup2(saved, 1);
	close(saved);
	close(devnull);
	if (st) {
		/* Refused at the start: with a message, and nothing left running. */
		assert_true(lomas_error_message()[0] != 0);
		mon_sys_set_hook(NULL);
		lomas_config_free(cfg);
		no_children();
		return 0;
	}
	pid = pid_of(s);
	while (running) {
		st = lomas_session_poll(s, 100, &running);
		if (st)
			break;
		if (mono_s() - t0 > DEADLINE_S)
			fail_msg("%s, call %llu: the session hangs", mode, (unsigned long long)n);
	}
	calls = mon_sys_calls();
	mon_sys_set_hook(NULL);
	if (st) {
		/* An error: it says what, and stopping lets go of the target cleanly. */
		assert_true(lomas_error_message()[0] != 0);
		lomas_session_stop(s);
		check_let_go(pid, n, mode);
	} else {
		assert_int_equal(lomas_session_wait(s, &status), LOMAS_OK);
		/* Ended: its own status, or killed under us. */
		if (status != native && !(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL))
			fail_msg("%s, call %llu: status %#x, native %#x", mode,
			         (unsigned long long)n, status, native);
	}
	lomas_profile *p = NULL;
	if (lomas_session_profile(s, &p) == LOMAS_OK)
		assert_int_equal(profile_validate(p), LOMAS_OK);
	lomas_profile_free(p);
	lomas_session_free(s);
	lomas_config_free(cfg);
	no_children();
	return calls;
}

static int native_status(void)
{
	run_result n;
	run_native(argv_spin, &n);
	return n.status;
}

/*
 * The calls N to try out of a run of `total`: all of the first 200 (spawn,
 * the first steps, the scratch page, the first protections), then 60 spread
 * over the rest (the steady state repeats itself) and the end; half as many
 * in the sanitized build.
 */
#if defined(__SANITIZE_ADDRESS__)
#define ALL_FIRST 100 /* the sanitized build: the same paths, fewer of each */
#define SPREAD 30
#else
#define ALL_FIRST 200
#define SPREAD 60
#endif

static uint64_t next_n(uint64_t n, uint64_t total)
{
	if (n < ALL_FIRST)
		return n + 1;
	return n + (total > ALL_FIRST ? (total - ALL_FIRST) / SPREAD + 1 : 1);
}

static void sweep_run(int err, void (*before)(uint64_t, void *), const char *mode)
{
	int native = native_status();
	uint64_t total = run_once(NULL, 0, mode, native), runs = 0;
	double t0 = mono_s();
	assert_true(total > 100);
	for (uint64_t n = 1; n <= total + 2; n = next_n(n, total)) {
		mon_sys_hook h = {.fail_at = n, .err = err, .before = before};
		run_once(&h, n, mode, native);
		runs++;
	}
	fprintf(stderr, "# %s: %llu calls in a clean run, %llu runs, %.1f s\n", mode,
	        (unsigned long long)total, (unsigned long long)runs, mono_s() - t0);
}

/* The Nth call fails with ESRCH though the target is there. */
static void test_nth_call_fails(void **state)
{
	(void)state;
	sweep_run(ESRCH, NULL, "ESRCH at call N");
}

/* The target is killed just before the Nth call. */
static void test_target_vanishes_at_call_n(void **state)
{
	(void)state;
	sweep_run(0, kill_children, "SIGKILL before call N");
}

/*
 * A detach (lomas_session_stop mid-run) whose Nth call fails: it reports
 * the failure or succeeds, and leaves the target running, unprotected.
 */
static void test_detach_call_fails(void **state)
{
	uint64_t total = 0, runs = 0;
	(void)state;
	for (uint64_t n = 0;; n++) {
		lomas_config *cfg = config();
		lomas_session *s;
		int running = 1, devnull = open("/dev/null", O_WRONLY), saved = dup(1);
		char *argv_long[] = {path, "spin", "4000000000", NULL};
		mon_sys_hook h = {.fail_at = n, .err = ESRCH};
		lomas_stats stt = LOMAS_STATS_INIT;
		double t0 = mono_s();
		dup2(devnull, 1);
		assert_int_equal(lomas_session_start(cfg, argv_long, &s), LOMAS_OK);
		dup2(saved, 1);
		close(saved);
		close(devnull);
		pid_t pid = pid_of(s);
		/* Until some samples are watched (pages protected). */
		do {
			assert_int_equal(lomas_session_poll(s, 50, &running), LOMAS_OK);
			assert_int_equal(lomas_session_stats(s, &stt), LOMAS_OK);
			assert_true(mono_s() - t0 < DEADLINE_S);
		} while (stt.samples < 20);
		mon_sys_set_hook(n ? &h : NULL);
		lomas_status st = lomas_session_stop(s);
		uint64_t calls = mon_sys_calls();
		mon_sys_set_hook(NULL);
		if (st)
			assert_true(lomas_error_message()[0] != 0);
		assert_true(mono_s() - t0 < DEADLINE_S);
		check_let_go(pid, n, "detach, ESRCH at call N");
		lomas_session_free(s);
		lomas_config_free(cfg);
		no_children();
		runs++;
		if (!n)
			total = calls;
		else if (n > total + 2)
			break;
	}
	fprintf(stderr, "# detach: %llu calls in a clean detach, %llu runs\n",
	        (unsigned long long)total, (unsigned long long)runs);
}

int main(void)
{
	int rc = step_test_setup();
	if (rc)
		return rc;
	target(path, sizeof path, "t_jobctl");
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_nth_call_fails),
	    cmocka_unit_test(test_target_vanishes_at_call_n),
	    cmocka_unit_test(test_detach_call_fails),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

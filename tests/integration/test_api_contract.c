/*
 * The public API's contract (include/lomas/lomas.h), walked call by call:
 *  - after a call that succeeds, lomas_error_message() is "" (every public
 *    call but lomas_error_message, lomas_strerror and the _free functions
 *    clears it on entry), checked for every function the header declares;
 *  - lomas_session_wait and lomas_session_poll after lomas_session_stop of a
 *    running target give LOMAS_ESTATE (no status to give: the target runs
 *    on), for the step clock and the inline clock; after a target that ended
 *    on its own, stop changes nothing and wait gives its status.
 * Environment: LOMAS_TARGETS (t_loop, t_spin), LOMAS_INLINE_TARGET (an
 * instrumented chase; the inline part is skipped without it).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <regex.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lomas/lomas.h"

#ifndef LOMAS_SOURCE_ROOT
#error "LOMAS_SOURCE_ROOT: the source tree, for the header"
#endif

/* ----------------------------------------------------- the message walk */

#define MAX_NAMES 128
static const char *covered[MAX_NAMES];
static size_t ncovered;

/* Leave a message behind: a failing call. */
static void provoke(void)
{
	lomas_profile *p;
	assert_int_equal(lomas_profile_load("/nonexistent/dir/x.lomas", &p), LOMAS_ENOENT);
	assert_true(lomas_error_message()[0] != '\0');
}

static void cover(const char *name)
{
	for (size_t i = 0; i < ncovered; i++)
		if (strcmp(covered[i], name) == 0)
			return;
	assert_true(ncovered < MAX_NAMES);
	covered[ncovered++] = name;
}

/* After an error, fn(args) succeeds and the message is "" again. */
#define CLEARS(fn, args)                                                        \
	do {                                                                    \
		provoke();                                                      \
		if ((fn args) != LOMAS_OK)                                      \
			fail_msg("%s failed: %s", #fn, lomas_error_message());  \
		if (lomas_error_message()[0])                                   \
			fail_msg("%s succeeded but left the message '%s'", #fn, \
			         lomas_error_message());                        \
		cover(#fn);                                                     \
	} while (0)

/* The same for calls that cannot fail (no status to check). */
#define CLEARS_VOID(fn, args)                                                             \
	do {                                                                              \
		provoke();                                                                \
		(void)(fn args);                                                          \
		if (lomas_error_message()[0])                                             \
			fail_msg("%s left the message '%s'", #fn, lomas_error_message()); \
		cover(#fn);                                                               \
	} while (0)

/* Calls that keep the message, so that reporting it and cleaning up before that work. */
#define KEEPS(fn, args)                                                       \
	do {                                                                  \
		char before[1024];                                            \
		provoke();                                                    \
		snprintf(before, sizeof before, "%s", lomas_error_message()); \
		(void)(fn args);                                              \
		assert_string_equal(lomas_error_message(), before);           \
		cover(#fn);                                                   \
	} while (0)

static void on_log(lomas_log_level level, const char *message, void *user)
{
	(void)level;
	(void)message;
	(void)user;
}

static char lackey_path[] = "/tmp/lomas-api-XXXXXX";
static char profile_path[64];

static void test_every_success_clears_the_message(void **state)
{
	lomas_config *cfg;
	lomas_profile *p, *q, *r;
	lomas_trace *t;
	lomas_profile_info info = LOMAS_PROFILE_INFO_INIT;
	lomas_sample samples[4];
	lomas_window windows[4];
	lomas_thread threads[4];
	uint64_t sizes[128], cache = 65536;
	double ratios[128], ratio;
	const char *k, *v;
	char buf[64];
	size_t n;
	FILE *devnull, *in;
	int fd;
	(void)state;

	KEEPS(lomas_error_message, ());
	KEEPS(lomas_strerror, (LOMAS_EIO));
	CLEARS_VOID(lomas_version, ());
	CLEARS_VOID(lomas_version_number, ());
	CLEARS_VOID(lomas_set_log_callback, (on_log, NULL));
	lomas_set_log_callback(NULL, NULL);

	CLEARS(lomas_config_new, (&cfg));
	CLEARS(lomas_config_set, (cfg, "period", "1"));
	CLEARS(lomas_config_get, (cfg, "period", buf, sizeof buf));

	CLEARS(lomas_trace_new, (cfg, &t));
	for (uint64_t i = 0; i < 3000; i++)
		CLEARS(lomas_trace_ref,
		       (t, i % 2, 0x10000 + 64 * (i * 7 % 97), 0x400000, (lomas_ref_kind)(i & 1)));
	CLEARS(lomas_trace_finish, (t, &p));
	KEEPS(lomas_trace_free, (t));

	fd = mkstemp(lackey_path);
	assert_true(fd >= 0);
	{
		static const char text[] = "==1== x\n### y\nI  0400,3\n L 1000,4\n S 2000,8\n";
		assert_true(write(fd, text, sizeof text - 1) == (ssize_t)(sizeof text - 1));
	}
	close(fd);
	CLEARS(lomas_trace_analyze_lackey, (cfg, lackey_path, &q));
	in = fopen(lackey_path, "r");
	assert_non_null(in);
	CLEARS(lomas_trace_analyze_lackey_stream, (cfg, in, "x", &r));
	fclose(in);
	unlink(lackey_path);

	snprintf(profile_path, sizeof profile_path, "%s.lomas", lackey_path);
	CLEARS(lomas_profile_save, (p, profile_path));
	KEEPS(lomas_profile_free, (q));
	CLEARS(lomas_profile_load, (profile_path, &q));
	unlink(profile_path);
	CLEARS(lomas_profile_merge, (q, r));
	CLEARS(lomas_profile_info_get, (q, &info));
	CLEARS(lomas_profile_meta_set, (q, "k", "v"));
	CLEARS(lomas_profile_meta_get, (q, "k", &v));
	CLEARS_VOID(lomas_profile_meta_count, (q));
	CLEARS(lomas_profile_meta_at, (q, 0, &k, &v));
	CLEARS(lomas_profile_samples, (q, 0, 4, samples, &n));
	CLEARS(lomas_profile_windows, (q, 0, 4, windows, &n));
	CLEARS(lomas_profile_threads, (q, 0, 4, threads, &n));
	devnull = fopen("/dev/null", "w");
	assert_non_null(devnull);
	CLEARS(lomas_profile_export, (q, LOMAS_EXPORT_CSV, devnull));
	fclose(devnull);

	CLEARS(lomas_model_default_sizes, (64, sizes, 128, &n));
	CLEARS(lomas_model_curve, (q, LOMAS_POLICY_RANDOM, sizes, n, 0, 0, ratios));
	CLEARS(lomas_model_curve, (q, LOMAS_POLICY_LRU, sizes, 3, 0, LOMAS_MODEL_COLD, ratios));
	double lo[8], hi[8];
	CLEARS(lomas_model_curve_ci,
	       (q, LOMAS_POLICY_RANDOM, sizes, 3, 0, 0, 0.9, 20, 7, ratios, lo, hi));
	CLEARS(lomas_model_miss_ratio, (q, LOMAS_POLICY_LRU, cache, 64, 0, &ratio));
	CLEARS(lomas_model_curve_assoc, (q, LOMAS_POLICY_LRU, sizes, 3, 0, 0, 0, ratios));
	{
		const uint64_t quanta[2] = {1000, 100000};
		double lower, upper[2];
		CLEARS(lomas_model_thrash_bounds, (q, cache, 0, quanta, 2, 0, &lower, upper));
	}
	{
		lomas_profile_info pinfo = LOMAS_PROFILE_INFO_INIT;
		uint32_t *wp;
		lomas_phase_info phs[8];
		size_t nph;
		lomas_profile *sub;
		assert_int_equal(lomas_profile_info_get(q, &pinfo), LOMAS_OK);
		wp = calloc(pinfo.windows + 1, sizeof *wp);
		assert_non_null(wp);
		CLEARS(lomas_profile_phases, (q, 0, 0, 0, wp, pinfo.windows, phs, 8, &nph));
		CLEARS(lomas_profile_phase_select, (q, wp, pinfo.windows, nph > 1 ? 1 : 0, &sub));
		KEEPS(lomas_profile_free, (sub));
		free(wp);
	}
	{
		const uint64_t sa[2] = {32768, 65536};
		CLEARS(lomas_model_curve_assoc, (q, LOMAS_POLICY_RANDOM, sa, 2, 0, 8, 0, ratios));
	}
	{
		lomas_hot_list *hl;
		lomas_hot_pc e = LOMAS_HOT_PC_INIT;
		lomas_hot_info hinfo = LOMAS_HOT_INFO_INIT;
		lomas_hot_frame fr;
		CLEARS(lomas_profile_hot_pcs, (q, LOMAS_POLICY_RANDOM, cache, 0, 0, &hl));
		CLEARS_VOID(lomas_hot_list_count, (hl));
		CLEARS(lomas_hot_list_get, (hl, 0, &e));
		CLEARS(lomas_hot_list_info, (hl, &hinfo));
		CLEARS(lomas_hot_list_symbolize, (hl, q, NULL));
		/* These pcs have no inlined-at chain: the call fails here, and
		 * tests/unit/test_sym.c walks its success (which clears) on a real one. */
		assert_int_equal(lomas_hot_list_frame(hl, 0, 0, &fr), LOMAS_EINVAL);
		cover("lomas_hot_list_frame");
		KEEPS(lomas_hot_list_free, (hl));
	}

	KEEPS(lomas_profile_free, (r));
	CLEARS(lomas_profile_new, (128, &r));
	KEEPS(lomas_profile_free, (r));
	KEEPS(lomas_profile_free, (q));
	KEEPS(lomas_profile_free, (p));
	KEEPS(lomas_config_free, (cfg));
	{
		char *json = NULL;
		CLEARS(lomas_machine_info, (NULL, &json));
		assert_non_null(strstr(json, "\"clocks\""));
		KEEPS(lomas_string_free, (json));
	}
	{
		/* As execvp finds it: /bin/sh is sh; a directory is no program. */
		char found[4096];
		CLEARS(lomas_program_find, ("/bin/sh", found, sizeof found));
		assert_string_equal(found, "/bin/sh");
		provoke();
		assert_int_equal(lomas_program_find("/tmp", found, sizeof found), LOMAS_EPERM);
		assert_non_null(strstr(lomas_error_message(), strerror(EISDIR)));
		assert_int_equal(lomas_program_find("lomas-no-such-program-x", found, sizeof found),
		                 LOMAS_ENOENT);
		assert_non_null(strstr(lomas_error_message(), "command not found"));
		{
			/* A directory named like the command earlier in PATH is passed
			 * over, as execvp does (the search took it for the program). */
			char dir[] = "/tmp/lomas-find-XXXXXX", sub[64], *old = getenv("PATH");
			char saved[4096], path[4200];
			assert_non_null(mkdtemp(dir));
			snprintf(sub, sizeof sub, "%s/sh", dir);
			assert_int_equal(mkdir(sub, 0755), 0);
			snprintf(saved, sizeof saved, "%s", old ? old : "");
			snprintf(path, sizeof path, "%s:/bin", dir);
			setenv("PATH", path, 1);
			assert_int_equal(lomas_program_find("sh", found, sizeof found), LOMAS_OK);
			assert_string_equal(found, "/bin/sh");
			if (old)
				setenv("PATH", saved, 1);
			else
				unsetenv("PATH");
			rmdir(sub);
			rmdir(dir);
		}
	}
	/* The session calls: see test_session_* (each clears on entry the same way). */
}

/* Set when a session test had no target to run: the header check then spares lomas_session_*. */
static bool session_skipped;

/* Every function lomas.h declares is walked above (a new one must be added there). */
static void test_the_walk_covers_the_header(void **state)
{
	char path[1024], line[1024];
	FILE *f;
	regex_t re;
	regmatch_t m[2];
	int declared = 0;
	(void)state;
	snprintf(path, sizeof path, "%s/include/lomas/lomas.h", LOMAS_SOURCE_ROOT);
	f = fopen(path, "r");
	assert_non_null(f);
	assert_int_equal(regcomp(&re, "LOMAS_API[^(]*[ *](lomas_[a-z0-9_]+)\\(", REG_EXTENDED), 0);
	while (fgets(line, sizeof line, f)) {
		bool found = false;
		if (regexec(&re, line, 2, m, 0) != 0)
			continue;
		line[m[1].rm_eo] = '\0';
		declared++;
		for (size_t i = 0; i < ncovered; i++)
			found |= strcmp(covered[i], line + m[1].rm_so) == 0;
		found |= session_skipped && strncmp(line + m[1].rm_so, "lomas_session_", 14) == 0;
		if (!found)
			fail_msg("%s (lomas.h) is not in the walk of test_api_contract.c",
			         line + m[1].rm_so);
	}
	fclose(f);
	regfree(&re);
	assert_true(declared >= 40);
}

/* ------------------------------------------------------ stop, then wait */

static const char *target(const char *name, char *buf, size_t len)
{
	const char *dir = getenv("LOMAS_TARGETS");
	if (!dir)
		return NULL;
	snprintf(buf, len, "%s/%s", dir, name);
	return access(buf, X_OK) == 0 ? buf : NULL;
}

static lomas_config *config(const char *clock, const char *period)
{
	lomas_config *cfg;
	assert_int_equal(lomas_config_new(&cfg), LOMAS_OK);
	assert_int_equal(lomas_config_set(cfg, "clock", clock), LOMAS_OK);
	assert_int_equal(lomas_config_set(cfg, "period", period), LOMAS_OK);
	return cfg;
}

/* After stop of a running target: wait and poll give ESTATE, saying why; the rest works. */
static void expect_stopped(lomas_session *s)
{
	lomas_stats st = LOMAS_STATS_INIT;
	int status = 12345, running = 7;
	provoke();
	assert_int_equal(lomas_session_stop(s), LOMAS_OK);
	assert_string_equal(lomas_error_message(), "");
	cover("lomas_session_stop");
	assert_int_equal(lomas_session_wait(s, &status), LOMAS_ESTATE);
	assert_int_equal(status, 12345); /* untouched: there is no status */
	assert_non_null(strstr(lomas_error_message(), "stopped"));
	assert_int_equal(lomas_session_poll(s, 0, &running), LOMAS_ESTATE);
	assert_int_equal(lomas_session_poll(s, -1, &running), LOMAS_ESTATE); /* never blocks */
	assert_int_equal(lomas_session_stop(s), LOMAS_OK);                   /* twice: no-op */
	provoke();
	assert_int_equal(lomas_session_stats(s, &st), LOMAS_OK);
	assert_string_equal(lomas_error_message(), "");
	cover("lomas_session_stats");
	assert_int_equal(st.size, sizeof st); /* a sized struct: the library filled all of it */
	{
		lomas_stats unset = {0};
		assert_int_equal(lomas_session_stats(s, &unset), LOMAS_EINVAL);
		assert_non_null(strstr(lomas_error_message(), "size"));
	}
}

static void test_session_step_stop_then_wait(void **state)
{
	char path[1024];
	int p[2], running = 1, status;
	char ready[8];
	pid_t pid;
	lomas_config *cfg;
	lomas_session *s;
	lomas_profile *prof;
	(void)state;
	if (!target("t_spin", path, sizeof path)) {
		session_skipped = true;
		skip();
	}
	/* Attached: t_spin runs until killed. */
	assert_int_equal(pipe(p), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(p[1], 1);
		close(p[0]);
		close(p[1]);
		execl(path, path, (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	assert_int_equal(read(p[0], ready, 6), 6);
	close(p[0]);
	cfg = config("step", "20");
	provoke();
	assert_int_equal(lomas_session_attach(cfg, pid, &s), LOMAS_OK);
	assert_string_equal(lomas_error_message(), "");
	cover("lomas_session_attach");
	for (int i = 0; i < 3; i++) {
		provoke();
		assert_int_equal(lomas_session_poll(s, 30, &running), LOMAS_OK);
		assert_string_equal(lomas_error_message(), "");
	}
	cover("lomas_session_poll");
	assert_true(running);
	expect_stopped(s);
	provoke();
	assert_int_equal(lomas_session_profile(s, &prof), LOMAS_OK);
	assert_string_equal(lomas_error_message(), "");
	cover("lomas_session_profile");
	lomas_profile_free(prof);
	KEEPS(lomas_session_free, (s));
	/* Left running, unharmed: still there until we kill it. */
	assert_int_equal(waitpid(pid, &status, WNOHANG), 0);
	kill(pid, SIGKILL);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);

	/* Spawned: t_loop ends by itself once detached. */
	if (target("t_loop", path, sizeof path)) {
		char *argv[] = {path, "200000", NULL};
		provoke();
		assert_int_equal(lomas_session_start(cfg, argv, &s), LOMAS_OK);
		assert_string_equal(lomas_error_message(), "");
		cover("lomas_session_start");
		/* What auto or step chose; a getter that touches no message. */
		assert_string_equal(lomas_session_clock(s), "step");
		assert_null(lomas_session_clock(NULL));
		CLEARS_VOID(lomas_session_clock, (s));
		assert_int_equal(lomas_session_poll(s, 30, &running), LOMAS_OK);
		assert_true(running);
		expect_stopped(s);
		lomas_session_free(s);
		while (waitpid(-1, &status, 0) > 0) /* reap it (our child) */
			;
	}
	lomas_config_free(cfg);
}

/* A target that ended on its own: stop is a no-op and wait still gives its status. */
static void test_session_ended_then_stop(void **state)
{
	char path[1024];
	int status = -1;
	lomas_config *cfg;
	lomas_session *s;
	(void)state;
	if (!target("t_loop", path, sizeof path)) {
		session_skipped = true;
		skip();
	}
	char *argv[] = {path, "3", NULL};
	cfg = config("step", "20");
	assert_int_equal(lomas_session_start(cfg, argv, &s), LOMAS_OK);
	provoke();
	assert_int_equal(lomas_session_wait(s, &status), LOMAS_OK);
	assert_string_equal(lomas_error_message(), "");
	cover("lomas_session_wait");
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	/* interrupt: a bad signal is refused; after the end it is a no-op that clears */
	assert_int_equal(lomas_session_interrupt(s, 0, 0), LOMAS_EINVAL);
	assert_non_null(strstr(lomas_error_message(), "bad signal"));
	provoke();
	assert_int_equal(lomas_session_interrupt(s, SIGINT, 0), LOMAS_OK);
	assert_string_equal(lomas_error_message(), "");
	cover("lomas_session_interrupt");
	assert_int_equal(lomas_session_stop(s), LOMAS_OK);
	status = -1;
	assert_int_equal(lomas_session_wait(s, &status), LOMAS_OK);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	lomas_session_free(s);
	lomas_config_free(cfg);
}

/* The log line of the inline backend's detach names the pid and the directory. */
static char detach_line[1024];

static void capture_log(lomas_log_level level, const char *message, void *user)
{
	(void)level;
	(void)user;
	if (strstr(message, "detached from pid"))
		snprintf(detach_line, sizeof detach_line, "%s", message);
}

static void test_session_inline_stop_then_wait(void **state)
{
	const char *prog = getenv("LOMAS_INLINE_TARGET");
	char *argv[] = {(char *)prog, "65536", "400000000", NULL};
	lomas_config *cfg;
	lomas_session *s;
	lomas_profile *prof = NULL;
	int running = 1, status, pid = 0;
	char dir[512] = "", cmd[600];
	const char *at;
	(void)state;
	if (!prog || access(prog, X_OK) != 0)
		skip();
	cfg = config("inline", "1000");
	lomas_set_log_callback(capture_log, NULL);
	provoke();
	assert_int_equal(lomas_session_start(cfg, argv, &s), LOMAS_OK);
	assert_string_equal(lomas_error_message(), "");
	assert_int_equal(lomas_session_poll(s, 50, &running), LOMAS_OK);
	assert_true(running); /* 400M steps: seconds */
	expect_stopped(s);
	assert_int_equal(lomas_session_profile(s, &prof), LOMAS_ESTATE);
	lomas_session_free(s);
	lomas_set_log_callback(NULL, NULL);
	lomas_config_free(cfg);
	/* Clean up after the detached target: end it, reap it, remove its directory. */
	assert_non_null(at = strstr(detach_line, "pid "));
	assert_int_equal(sscanf(at, "pid %d", &pid), 1);
	at = strstr(detach_line, " to ");
	if (at && sscanf(at, " to %511s", dir) == 1 && strrchr(dir, '/'))
		*strrchr(dir, '/') = '\0';
	kill(pid, SIGKILL);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (strstr(dir, "/lomas-inline-")) {
		snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
		assert_int_equal(system(cmd), 0);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_every_success_clears_the_message),
	    cmocka_unit_test(test_session_step_stop_then_wait),
	    cmocka_unit_test(test_session_ended_then_stop),
	    cmocka_unit_test(test_session_inline_stop_then_wait),
	    cmocka_unit_test(test_the_walk_covers_the_header), /* last: the others cover */
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * Helpers shared by the step clock's integration tests: run a target
 * natively and under the step clock (through the public session API), with
 * its stdout captured, and compare. Included by one .c file each (static).
 */
#ifndef LOMAS_TEST_STEP_RUN_H
#define LOMAS_TEST_STEP_RUN_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/core.h"

static char target_dir[4096];

static inline void target(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "%s/%s", target_dir, name);
}

typedef struct run_result {
	int status;
	char out[8192];
	lomas_stats stats;
	lomas_profile *prof;
} run_result;

static inline void read_all(int fd, char *buf, size_t len)
{
	size_t n = 0;
	ssize_t r;
	while (n + 1 < len && (r = read(fd, buf + n, len - 1 - n)) != 0) {
		if (r < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		n += (size_t)r;
	}
	buf[n] = 0;
}

/* Run argv natively with stdout into a pipe. */
static inline void run_native(char *const argv[], run_result *res)
{
	int p[2];
	pid_t pid;
	memset(res, 0, sizeof *res);
	assert_int_equal(pipe(p), 0);
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		dup2(p[1], 1);
		close(p[0]);
		close(p[1]);
		execv(argv[0], argv);
		_exit(127);
	}
	close(p[1]);
	read_all(p[0], res->out, sizeof res->out);
	close(p[0]);
	assert_int_equal(waitpid(pid, &res->status, 0), pid);
}

/* A config for the step clock with key/value pairs (NULL-terminated list). */
static inline lomas_config *step_config_v(va_list ap)
{
	lomas_config *cfg;
	const char *k;
	assert_int_equal(lomas_config_new(&cfg), LOMAS_OK);
	assert_int_equal(lomas_config_set(cfg, "clock", "step"), LOMAS_OK);
	while ((k = va_arg(ap, const char *))) {
		const char *v = va_arg(ap, const char *);
		assert_int_equal(lomas_config_set(cfg, k, v), LOMAS_OK);
	}
	return cfg;
}

/* Run argv under the step clock to its end (config pairs, NULL-terminated). */
static inline lomas_status run_step(char *const argv[], run_result *res, ...)
{
	lomas_config *cfg;
	lomas_session *s = NULL;
	int p[2], saved;
	lomas_status st;
	va_list ap;
	memset(res, 0, sizeof *res);
	va_start(ap, res);
	cfg = step_config_v(ap);
	va_end(ap);
	assert_int_equal(pipe(p), 0);
	fflush(stdout);
	saved = dup(1);
	dup2(p[1], 1);
	st = lomas_session_start(cfg, argv, &s);
	dup2(saved, 1);
	close(saved);
	close(p[1]);
	if (st) {
		close(p[0]);
		lomas_config_free(cfg);
		return st;
	}
	st = lomas_session_wait(s, &res->status);
	read_all(p[0], res->out, sizeof res->out);
	close(p[0]);
	assert_int_equal(st, LOMAS_OK);
	res->stats.size = sizeof res->stats;
	assert_int_equal(lomas_session_stats(s, &res->stats), LOMAS_OK);
	assert_int_equal(lomas_session_profile(s, &res->prof), LOMAS_OK);
	lomas_session_free(s);
	lomas_config_free(cfg);
	return LOMAS_OK;
}

static inline void free_result(run_result *r)
{
	lomas_profile_free(r->prof);
	r->prof = NULL;
}

static inline bool ptrace_allowed(void)
{
	pid_t pid = fork();
	int st;
	if (pid == 0) {
		pause();
		_exit(0);
	}
	bool ok = ptrace(PTRACE_SEIZE, pid, NULL, NULL) == 0;
	kill(pid, SIGKILL);
	waitpid(pid, &st, 0);
	return ok;
}

/* main()'s common part: 77 (skip) when the targets or ptrace are missing. */
static inline int step_test_setup(void)
{
	const char *dir = getenv("LOMAS_TARGETS");
	if (!dir) {
		fprintf(stderr, "LOMAS_TARGETS is not set (run through meson test)\n");
		return 77;
	}
	snprintf(target_dir, sizeof target_dir, "%s", dir);
	if (!ptrace_allowed()) {
		fprintf(stderr, "ptrace is not permitted here: skipping the step clock tests\n");
		return 77;
	}
	return 0;
}

static inline double mono_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

#endif /* LOMAS_TEST_STEP_RUN_H */

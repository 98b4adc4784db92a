/*
 * The inline session backend through the public API: detect the hooks,
 * run an instrumented workload under clock=inline (and auto), wait, and
 * check the profile it wrote against what the workload is known to do.
 *   session_check INSTRUMENTED PLAIN
 * INSTRUMENTED: an instrumented chase (4096 nodes, 100000 steps);
 * PLAIN: the same program built without the hooks.
 */
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "session/session.h"

static int failures;

#define CHECK(cond, ...)                                                     \
	do {                                                                 \
		if (!(cond)) {                                               \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
			fprintf(stderr, __VA_ARGS__);                        \
			fprintf(stderr, "\n");                               \
			failures++;                                          \
		}                                                            \
	} while (0)

static void run(const char *prog, const char *clock)
{
	char *argv[] = {(char *)prog, "4096", "100000", NULL};
	lomas_config *cfg;
	lomas_session *s;
	lomas_profile *p;
	lomas_profile_info info = LOMAS_PROFILE_INFO_INIT;
	lomas_stats stats = LOMAS_STATS_INIT;
	const char *v;
	int status = -1, running = 1;
	lomas_status st;
	lomas_config_new(&cfg);
	lomas_config_set(cfg, "clock", clock);
	lomas_config_set(cfg, "period", "50");
	lomas_config_set(cfg, "seed", "7");
	st = lomas_session_start(cfg, argv, &s);
	CHECK(st == LOMAS_OK, "start (%s): %s", clock, lomas_error_message());
	if (st)
		return;
	/* Not finished yet or finished: either way poll(0) must not block or fail. */
	CHECK(lomas_session_poll(s, 0, &running) == LOMAS_OK, "poll: %s", lomas_error_message());
	CHECK(lomas_session_wait(s, &status) == LOMAS_OK, "wait: %s", lomas_error_message());
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "status %#x", status);
	CHECK(lomas_session_profile(s, &p) == LOMAS_OK, "profile: %s", lomas_error_message());
	CHECK(lomas_session_stats(s, &stats) == LOMAS_OK, "stats");
	if (p) {
		lomas_profile_info_get(p, &info);
		/* chase: 100000 loads + the shuffle and the ring (~6 references per node). */
		CHECK(info.refs > 104096 && info.refs < 150000, "refs %llu",
		      (unsigned long long)info.refs);
		/* ~refs / 50 samples */
		CHECK(info.samples > 1500 && info.samples < 3500, "samples %llu",
		      (unsigned long long)info.samples);
		CHECK(stats.samples == info.samples && stats.refs == info.refs, "stats");
		CHECK(lomas_profile_meta_get(p, "clock", &v) == 0 && !strcmp(v, "inline"), "clock");
		CHECK(lomas_profile_meta_get(p, "period", &v) == 0 && !strcmp(v, "50"), "period %s",
		      v);
		CHECK(lomas_profile_meta_get(p, "seed", &v) == 0 && !strcmp(v, "7"), "seed");
		CHECK(lomas_profile_meta_get(p, "command", &v) == 0 && strstr(v, "4096 100000"),
		      "command");
		/* The first call took the session's profile; a second one is decoded
		 * again from the file's bytes: the same profile, a separate object. */
		lomas_profile *p2 = NULL;
		lomas_profile_info info2 = LOMAS_PROFILE_INFO_INIT;
		CHECK(lomas_session_profile(s, &p2) == LOMAS_OK && p2 && p2 != p,
		      "second profile: %s", lomas_error_message());
		if (p2) {
			lomas_profile_info_get(p2, &info2);
			CHECK(info2.samples == info.samples && info2.refs == info.refs &&
			          info2.reused == info.reused && info2.threads == info.threads,
			      "second profile differs");
			CHECK(lomas_profile_meta_get(p2, "clock", &v) == 0 && !strcmp(v, "inline"),
			      "second clock");
			CHECK(lomas_profile_meta_get(p2, "command", &v) == 0 &&
			          strstr(v, "4096 100000"),
			      "second command");
		}
		lomas_profile_free(p);
		lomas_profile_free(p2);
		/* The session's stats outlive the profiles it gave away. */
		CHECK(lomas_session_stats(s, &stats) == LOMAS_OK && stats.samples == info.samples,
		      "stats after");
	}
	lomas_session_free(s);
	lomas_config_free(cfg);
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: session_check INSTRUMENTED PLAIN\n");
		return 2;
	}
	CHECK(inline_backend_detect(argv[1]), "%s: hooks not detected", argv[1]);
	CHECK(!inline_backend_detect(argv[2]), "%s: hooks detected in a plain build", argv[2]);
	CHECK(!inline_backend_detect("/nonexistent"), "nonexistent file detected");
	run(argv[1], "inline");
	run(argv[1], "auto");
	{
		/* A program that cannot run: a clear error, no session. */
		char *bad[] = {"/nonexistent/prog", NULL};
		lomas_config *cfg;
		lomas_session *s = NULL;
		lomas_config_new(&cfg);
		lomas_config_set(cfg, "clock", "inline");
		CHECK(lomas_session_start(cfg, bad, &s) == LOMAS_ENOENT && !s, "bad program");
		lomas_config_free(cfg);
	}
	if (failures)
		fprintf(stderr, "%d failure(s)\n", failures);
	else
		printf("session_check: ok\n");
	return failures ? 1 : 0;
}

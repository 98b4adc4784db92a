/*
 * The debug-register watch engine (--watch debugreg) under the step clock,
 * on real targets. Ground truth from outside the code under test: an
 * independent full trace (full_trace.h: this file's own single-stepper),
 * the sample points the seed implies (core rng), native runs for behaviour,
 * and the mprotect engine's run at the same sample points.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <linux/filter.h>
#include <linux/hw_breakpoint.h>
#include <linux/perf_event.h>
#include <linux/seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/core.h"
#include "full_trace.h"
#include "watch/watch.h"
#include "step_run.h"

/* The sample points the seed implies: counts sp_k = sum of rng_gap draws. */
static size_t expected_starts(uint64_t seed, double period, uint64_t refs, uint64_t **out)
{
	rng r;
	uint64_t sp = 0;
	size_t n = 0, cap = 1024;
	*out = malloc(cap * sizeof **out);
	rng_seed(&r, seed);
	for (;;) {
		sp += rng_gap(&r, period);
		if (sp > refs)
			break;
		if (n == cap)
			*out = realloc(*out, (cap *= 2) * sizeof **out);
		(*out)[n++] = sp - 1;
	}
	return n;
}

static lomas_sample *samples_of(const run_result *res, size_t *n)
{
	lomas_profile_info info = LOMAS_PROFILE_INFO_INIT;
	lomas_sample *s;
	size_t copied;
	assert_int_equal(lomas_profile_info_get(res->prof, &info), LOMAS_OK);
	*n = info.samples;
	s = calloc(*n + 1, sizeof *s);
	assert_int_equal(lomas_profile_samples(res->prof, 0, *n, s, &copied), LOMAS_OK);
	assert_int_equal(copied, *n);
	return s;
}

static uint64_t meta_u64(const run_result *r, const char *key)
{
	const char *v = NULL;
	assert_int_equal(lomas_profile_meta_get(r->prof, key, &v), LOMAS_OK);
	return strtoull(v, NULL, 10);
}

typedef struct word_check {
	size_t reused, dangling, censored;
	size_t sure; /* samples the trace says must be reused (see check_words) */
} word_check;

/*
 * Every sample of the debugreg run res: at the seed's point, and its
 * distance the exact WORD distance of the trace (reused), none (dangling),
 * or a lower bound of it (censored: its slot went to a newer sample).
 * A sample whose word the trace reuses before four newer samples started
 * cannot have lost its slot (four per thread, the oldest gives way): it
 * must be reused ("sure"), however many samples the run offers.
 */
static word_check check_words(const trace *t, const run_result *res, uint64_t seed, double period)
{
	word_check c = {0};
	size_t n, nexp;
	uint64_t *exp;
	lomas_sample *s = samples_of(res, &n);
	nexp = expected_starts(seed, period, t->n, &exp);
	assert_int_equal(n, nexp);
	for (size_t i = 0; i < n; i++) {
		uint64_t d = exact_block_distance(t, s[i].start, 8);
		size_t newer = 0;
		assert_int_equal(s[i].start, exp[i]);
		if (d != UINT64_MAX) {
			for (size_t j = i + 1; j < n && exp[j] < exp[i] + d + 1; j++)
				newer++;
			if (newer < 4) {
				c.sure++;
				if (s[i].state != LOMAS_SAMPLE_REUSED)
					fail_msg(
					    "sample %zu at %llu addr %#llx: state %d, but its word "
					    "is reused at distance %llu, %zu newer samples before",
					    i, (unsigned long long)s[i].start,
					    (unsigned long long)s[i].addr, s[i].state,
					    (unsigned long long)d, newer);
			}
		}
		assert_int_equal(s[i].addr, t->r[s[i].start].addr);
		switch (s[i].state) {
		case LOMAS_SAMPLE_REUSED:
			if (s[i].end - s[i].start - 1 != d)
				fail_msg(
				    "sample %zu at %llu addr %#llx: distance %llu, exact word "
				    "distance %llu (line %llu)",
				    i, (unsigned long long)s[i].start,
				    (unsigned long long)s[i].addr,
				    (unsigned long long)(s[i].end - s[i].start - 1),
				    (unsigned long long)d,
				    (unsigned long long)exact_block_distance(t, s[i].start, 64));
			assert_int_equal(s[i].end_pc, t->r[s[i].end].pc);
			c.reused++;
			break;
		case LOMAS_SAMPLE_DANGLING:
			if (d != UINT64_MAX)
				fail_msg(
				    "sample %zu at %llu addr %#llx: dangling, exact word distance "
				    "%llu",
				    i, (unsigned long long)s[i].start,
				    (unsigned long long)s[i].addr, (unsigned long long)d);
			c.dangling++;
			break;
		default:
			assert_int_equal(s[i].state, LOMAS_SAMPLE_CENSORED);
			assert_true(s[i].end > s[i].start);
			/* Its age: a true lower bound, so the word was not touched before it. */
			assert_true(d == UINT64_MAX || s[i].end - s[i].start - 1 <= d);
			c.censored++;
		}
	}
	free(exp);
	free(s);
	return c;
}

/*
 * (a) Sampled distances are the exact word distances of an independent
 * trace, every sample at the seed's point, and the breakpoints did the
 * work: traps, no false positive, most reuses ended by a trap. Returns
 * the reuses the decoder saw and no trap confirmed (a masked store).
 */
/* AVX-512 masked moves the clock narrowed (step.masked_moves), summed over runs. */
static uint64_t masked_moves;

static uint64_t exact_words(char *const argv[], const char *period, uint64_t seed)
{
	trace t = {0};
	run_result r;
	char sd[32];
	word_check c;
	uint64_t by_trap, decoded_only;
	snprintf(sd, sizeof sd, "%llu", (unsigned long long)seed);
	full_trace(argv, &t);
	assert_int_equal(
	    run_step(argv, &r, "watch", "debugreg", "period", period, "seed", sd, NULL), LOMAS_OK);
	c = check_words(&t, &r, seed, strtod(period, NULL));
	/* Not a fixed count: the environment moves the sample points (env -i: few). */
	assert_true(c.sure > 0);
	assert_true(c.reused >= c.sure);
	assert_int_equal(r.stats.false_positives, 0);
	assert_true(r.stats.faults > 0);
	by_trap = meta_u64(&r, "step.reuse_by_fault");
	decoded_only = meta_u64(&r, "debugreg.decoded_only_reuses");
	masked_moves += meta_u64(&r, "step.masked_moves");
	assert_true(by_trap + decoded_only <= c.reused);
	assert_true(by_trap > c.reused / 2);
	{
		const char *w = NULL;
		assert_int_equal(lomas_profile_meta_get(r.prof, "watch", &w), LOMAS_OK);
		assert_string_equal(w, "debugreg");
		assert_int_equal(lomas_profile_meta_get(r.prof, "watch.granularity", &w), LOMAS_OK);
		assert_non_null(strstr(w, "word"));
	}
	fprintf(stderr,
	        "  %s %s period %s: %zu reused (%zu sure), %zu dangling, %zu censored, %llu "
	        "traps, %llu decoded-only\n",
	        argv[0], argv[1] ? argv[1] : "", period, c.reused, c.sure, c.dangling, c.censored,
	        (unsigned long long)r.stats.faults, (unsigned long long)decoded_only);
	free_result(&r);
	free(t.r);
	return decoded_only;
}

static void test_exact_word_distances(void **state)
{
	char loop[4200], dreg[4200];
	(void)state;
	target(loop, sizeof loop, "t_loop");
	target(dreg, sizeof dreg, "t_dreg");
	char *a1[] = {loop, "2", NULL};      /* load and store on other words of a line */
	char *a2[] = {loop, "2", "8", NULL}; /* word stride: the next load reuses the store */
	char *a3[] = {dreg, "single", "6", NULL};
	exact_words(a1, "40", 7);
	exact_words(a1, "300", 11);
	exact_words(a2, "50", 3);
	exact_words(a3, "20", 5);
	exact_words(a3, "7", 9);
}

/*
 * (a') A store whose word's next decoded touch is an AVX-512 masked store
 * that leaves it out (glibc's memset tail; the CI failure, where malloc's
 * MALLOC_PERTURB_ fill ran it): the CPU does not touch the word, so no
 * trap. The clock reads the mask registers and narrows the masked store to
 * the bytes it selects (lib/decode/decode_mask.c), as the independent
 * trace does: the distances are the CPU's, every reuse ended by a trap and
 * none by the decoder alone. (Before the masks were read, the decoder
 * counted the store full-size: 18 of 357 distances ended there.)
 */
static void test_masked_store(void **state)
{
	char dreg[4200];
	uint64_t n;
	(void)state;
	target(dreg, sizeof dreg, "t_dreg");
	char *a[] = {dreg, "masked", "4", NULL};
	masked_moves = 0;
	n = exact_words(a, "3", 5);
	n += exact_words(a, "11", 8);
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx512bw"))
		assert_true(masked_moves >= 2 * 32); /* 4 rounds of 8, two runs */
	fprintf(stderr, "  masked moves narrowed %llu, decoded-only reuses %llu\n",
	        (unsigned long long)masked_moves, (unsigned long long)n);
	assert_int_equal(n, 0);
}

/*
 * (b) The same sample points as the mprotect engine, and the same distance
 * wherever the line's reuse is by the sampled word itself (the trace says
 * which); where another word of the line comes first, the mprotect engine's
 * distance is the shorter.
 */
static void same_as_mprotect(char *const argv[], const char *period, const char *seed)
{
	trace t = {0};
	run_result a, b;
	size_t na, nb, same = 0, shorter = 0;
	lomas_sample *sa, *sb;
	full_trace(argv, &t);
	assert_int_equal(
	    run_step(argv, &a, "watch", "mprotect", "period", period, "seed", seed, NULL),
	    LOMAS_OK);
	assert_int_equal(
	    run_step(argv, &b, "watch", "debugreg", "period", period, "seed", seed, NULL),
	    LOMAS_OK);
	assert_string_equal(a.out, b.out);
	assert_int_equal(a.status, b.status);
	assert_int_equal(a.stats.refs, b.stats.refs);
	sa = samples_of(&a, &na);
	sb = samples_of(&b, &nb);
	assert_int_equal(na, nb);
	for (size_t i = 0; i < na; i++) {
		uint64_t dl = exact_block_distance(&t, sa[i].start, 64);
		uint64_t dw = exact_block_distance(&t, sa[i].start, 8);
		assert_int_equal(sa[i].start, sb[i].start);
		assert_int_equal(sa[i].addr, sb[i].addr);
		if (sa[i].state != LOMAS_SAMPLE_REUSED || sb[i].state != LOMAS_SAMPLE_REUSED)
			continue;
		if (dl == dw) {
			assert_int_equal(sa[i].end, sb[i].end);
			assert_int_equal(sa[i].end_pc, sb[i].end_pc);
			same++;
		} else {
			assert_true(sa[i].end < sb[i].end);
			shorter++;
		}
	}
	fprintf(stderr,
	        "  %s period %s: %zu samples, %zu same-word reuses equal, %zu shorter "
	        "by line; false positives mprotect %llu, debugreg %llu\n",
	        argv[1], period, na, same, shorter, (unsigned long long)a.stats.false_positives,
	        (unsigned long long)b.stats.false_positives);
	assert_true(same > 10);
	assert_int_equal(b.stats.false_positives, 0);
	free(sa);
	free(sb);
	free_result(&a);
	free_result(&b);
	free(t.r);
}

static void test_same_as_mprotect(void **state)
{
	char loop[4200], dreg[4200];
	(void)state;
	target(loop, sizeof loop, "t_loop");
	target(dreg, sizeof dreg, "t_dreg");
	char *a1[] = {loop, "2", NULL};
	char *a2[] = {loop, "3", "8", NULL};
	char *a3[] = {dreg, "single", "6", NULL};
	same_as_mprotect(a1, "40", "7");
	same_as_mprotect(a2, "60", "2");
	same_as_mprotect(a3, "15", "4");
}

/* (c) The hostile set: output, exit status and the program's own signals as natively. */
static void same_as_native(char *const argv[], const char *period)
{
	run_result n, s;
	run_native(argv, &n);
	assert_int_equal(run_step(argv, &s, "watch", "debugreg", "period", period, NULL), LOMAS_OK);
	if (strcmp(s.out, n.out) != 0 || s.status != n.status)
		fail_msg("%s %s: under debugreg status %#x output:\n%s\nnatively %#x:\n%s", argv[0],
		         argv[1] ? argv[1] : "", s.status, s.out, n.status, n.out);
	assert_true(s.stats.samples > 0);
	assert_int_equal(profile_validate(s.prof), LOMAS_OK);
	free_result(&s);
}

static void test_hostile_same_as_native(void **state)
{
	char p[8][4200];
	(void)state;
	target(p[0], sizeof p[0], "t_dreg");
	target(p[1], sizeof p[1], "t_signals");
	target(p[2], sizeof p[2], "t_threads");
	target(p[3], sizeof p[3], "t_segv_recover");
	target(p[4], sizeof p[4], "t_stress");
	target(p[5], sizeof p[5], "t_crash");
	target(p[6], sizeof p[6], "t_fork");
	char *a0[] = {p[0], "single", "9", NULL};
	char *a1[] = {p[0], "threads", "9", NULL};
	char *a2[] = {p[1], NULL};
	char *a3[] = {p[2], NULL};
	char *a4[] = {p[3], "1", NULL};
	char *a5[] = {p[4], "64", "16", "40", NULL};
	char *a6[] = {p[5], NULL};
	char *a7[] = {p[6], NULL};
	char *a8[] = {p[0], "masked", "5", NULL}; /* zmm0 and k1 kept across our stops */
	same_as_native(a0, "5");
	same_as_native(a1, "5");
	same_as_native(a2, "20");
	same_as_native(a3, "50");
	same_as_native(a4, "10");
	same_as_native(a5, "20");
	same_as_native(a6, "50");
	same_as_native(a7, "50");
	same_as_native(a8, "4");
}

/* (d) Threads: each has its own breakpoints; samples of several threads are reused. */
static void test_threads(void **state)
{
	char path[4200];
	run_result r;
	size_t n;
	uint32_t seen = 0;
	(void)state;
	target(path, sizeof path, "t_dreg");
	char *argv[] = {path, "threads", "6", NULL};
	assert_int_equal(run_step(argv, &r, "watch", "debugreg", "period", "9", NULL), LOMAS_OK);
	lomas_sample *s = samples_of(&r, &n);
	for (size_t i = 0; i < n; i++)
		if (s[i].state == LOMAS_SAMPLE_REUSED && s[i].thread < 32)
			seen |= 1u << s[i].thread;
	assert_true(__builtin_popcount(seen) >= 2);
	assert_int_equal(meta_u64(&r, "debugreg.unexplained_traps"), 0);
	/* Its stretch with SIGRTMAX blocked: the counters were read instead. */
	assert_true(meta_u64(&r, "debugreg.polls") > 0);
	free(s);
	free_result(&r);
}

/*
 * (e) Attach, sample, detach while breakpoints are armed: the program runs
 * on and ends as natively (no breakpoint left, no overflow signal left
 * pending to kill it: SIGRTMAX's default action ends a process).
 */
static void test_detach(void **state)
{
	char path[4200], out[256];
	(void)state;
	target(path, sizeof path, "t_loop");
	for (int k = 0; k < 3; k++) {
		int p[2], status, running = 1;
		pid_t pid;
		lomas_config *cfg;
		lomas_session *s;
		lomas_stats st = LOMAS_STATS_INIT;
		assert_int_equal(pipe(p), 0);
		fflush(NULL);
		pid = fork();
		if (pid == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			dup2(p[1], 1);
			close(p[0]);
			close(p[1]);
			execl(path, path, "400000", (char *)NULL);
			_exit(127);
		}
		close(p[1]);
		usleep(20000);
		assert_int_equal(lomas_config_new(&cfg), LOMAS_OK);
		assert_int_equal(lomas_config_set(cfg, "clock", "step"), LOMAS_OK);
		assert_int_equal(lomas_config_set(cfg, "watch", "debugreg"), LOMAS_OK);
		assert_int_equal(lomas_config_set(cfg, "period", k ? "7" : "30"), LOMAS_OK);
		assert_int_equal(lomas_session_attach(cfg, pid, &s), LOMAS_OK);
		for (int i = 0; i < 4 + 2 * k && running; i++)
			assert_int_equal(lomas_session_poll(s, 50, &running), LOMAS_OK);
		assert_true(running);
		assert_int_equal(lomas_session_stats(s, &st), LOMAS_OK);
		assert_true(st.samples > 0);
		assert_int_equal(lomas_session_stop(s), LOMAS_OK);
		lomas_session_free(s);
		lomas_config_free(cfg);
		read_all(p[0], out, sizeof out);
		close(p[0]);
		assert_int_equal(waitpid(pid, &status, 0), pid);
		if (!WIFEXITED(status))
			fail_msg("detached target ended by signal %d", WTERMSIG(status));
		assert_int_equal(WEXITSTATUS(status), 0);
		assert_string_equal(out, "loop done\n");
	}
}

/* perf_event_open refused with EACCES from here on (as perf_event_paranoid would). */
static void refuse_perf(void)
{
	struct sock_filter f[] = {
	    BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
	    BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_perf_event_open, 0, 1),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EACCES),
	    BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {.len = sizeof f / sizeof f[0], .filter = f};
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog))
		_exit(99);
}

/*
 * (f) Where breakpoints are refused: LOMAS_ENOTSUP with one line naming
 * the cause and the other engine, nothing run; lomas-demo record exits 125.
 */
static void test_capability_error(void **state)
{
	char path[4200];
	const char *demo = getenv("LOMAS_DEMO");
	pid_t pid;
	int st;
	(void)state;
	target(path, sizeof path, "t_dreg");
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		char *argv[] = {path, "single", "1", NULL};
		run_result r;
		refuse_perf();
		if (run_step(argv, &r, "watch", "debugreg", NULL) != LOMAS_ENOTSUP)
			_exit(1);
		const char *msg = lomas_error_message();
		if (!strstr(msg, "perf_event_paranoid") || !strstr(msg, "--watch mprotect") ||
		    strchr(msg, '\n'))
			_exit(2);
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 0);
	if (!demo)
		return;
	int p[2];
	assert_int_equal(pipe(p), 0);
	pid = fork();
	if (pid == 0) {
		dup2(p[1], 2);
		close(p[0]);
		close(p[1]);
		refuse_perf();
		execl(demo, demo, "record", "--clock", "step", "--watch", "debugreg", "-o",
		      "/dev/null", "--", path, "single", "1", (char *)NULL);
		_exit(98);
	}
	close(p[1]);
	char err[4096];
	read_all(p[0], err, sizeof err);
	close(p[0]);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 125);
	assert_non_null(strstr(err, "perf_event_paranoid"));
	assert_ptr_equal(strchr(err, '\n'), err + strlen(err) - 1); /* one line */
}

/* Run demo's argv with stdout and stderr captured; its wait status. */
static int run_demo(char *const argv[], char *out, size_t outlen)
{
	int p[2], st;
	pid_t pid;
	assert_int_equal(pipe(p), 0);
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		dup2(p[1], 1);
		dup2(p[1], 2);
		close(p[0]);
		close(p[1]);
		execv(argv[0], argv);
		_exit(98);
	}
	close(p[1]);
	read_all(p[0], out, outlen);
	close(p[0]);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	return st;
}

/*
 * Whether a breakpoint on a word of this thread fires when touched, asked
 * of the kernel here without the library: -1 when none opens, else the
 * count of 4 touches (0: it opens but never fires, as under some
 * hypervisors).
 */
static long long raw_breakpoint_count(void)
{
	static volatile uint64_t word;
	struct perf_event_attr a;
	long long count = 0;
	memset(&a, 0, sizeof a);
	a.type = PERF_TYPE_BREAKPOINT;
	a.size = sizeof a;
	a.bp_type = HW_BREAKPOINT_RW;
	a.bp_addr = (uint64_t)(uintptr_t)&word;
	a.bp_len = HW_BREAKPOINT_LEN_8;
	a.sample_period = 1;
	a.exclude_kernel = 1;
	a.exclude_hv = 1;
	int fd = (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, 0);
	if (fd < 0)
		return -1;
	for (int i = 0; i < 4; i++)
		word += (uint64_t)i;
	if (read(fd, &count, sizeof count) != (ssize_t)sizeof count)
		count = -1;
	close(fd);
	return count;
}

/*
 * (h) Where breakpoints open but never fire, or do not open: the engine
 * refuses with LOMAS_ENOTSUP and one line naming the other engine, and
 * lomas-demo record exits 125 with that line; never a run that misses
 * every reuse. The kernel is asked independently first: if a breakpoint
 * does fire here, the refusal is wrong.
 */
static void test_refused_here(void **state)
{
	char path[4200], err[4096];
	const char *demo = getenv("LOMAS_DEMO");
	run_result r;
	int st;
	(void)state;
	assert_true(raw_breakpoint_count() <= 0);
	target(path, sizeof path, "t_dreg");
	char *argv[] = {path, "single", "1", NULL};
	assert_int_equal(run_step(argv, &r, "watch", "debugreg", NULL), LOMAS_ENOTSUP);
	assert_non_null(strstr(lomas_error_message(), "--watch mprotect"));
	assert_null(strchr(lomas_error_message(), '\n'));
	if (!demo)
		return;
	char *rec[] = {(char *)demo, "record", "--clock", "step",   "--watch", "debugreg", "-o",
	               "/dev/null",  "--",     path,      "single", "1",       NULL};
	st = run_demo(rec, err, sizeof err);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 125);
	assert_non_null(strstr(err, "--watch mprotect"));
	assert_ptr_equal(strchr(err, '\n'), err + strlen(err) - 1); /* one line */
}

/*
 * (g) From the command line: record --clock step --watch debugreg exits
 * with the target's status, and report states the engine and its word
 * granularity.
 */
static void test_cli(void **state)
{
	char path[4200], prof[] = "/tmp/lomas-dreg-XXXXXX", out[16384];
	const char *demo = getenv("LOMAS_DEMO");
	run_result n;
	int fd, st;
	(void)state;
	if (!demo)
		skip();
	target(path, sizeof path, "t_dreg");
	char *native[] = {path, "single", "3", NULL};
	run_native(native, &n);
	fd = mkstemp(prof);
	assert_true(fd >= 0);
	close(fd);
	char *rec[] = {(char *)demo, "record",   "--clock", "step", "--watch",
	               "debugreg",   "--period", "10",      "-o",   prof,
	               "--",         path,       "single",  "3",    NULL};
	st = run_demo(rec, out, sizeof out);
	assert_true(WIFEXITED(st));
	assert_int_equal(WEXITSTATUS(st), 3);
	assert_non_null(strstr(out, n.out));
	char *rep[] = {(char *)demo, "report", prof, NULL};
	st = run_demo(rep, out, sizeof out);
	assert_int_equal(st, 0);
	assert_non_null(strstr(out, "debugreg"));
	assert_non_null(strstr(out, "word (8-byte hardware breakpoints)"));
	unlink(prof);
}

int main(void)
{
	int skip = step_test_setup();
	if (skip)
		return skip;
	if (dreg_probe() != LOMAS_OK) {
		/* No working breakpoints: only the clean refusal can be checked. */
		fprintf(stderr,
		        "no working perf hardware breakpoints here (%s): checking the refusal\n",
		        lomas_error_message());
		const struct CMUnitTest refusal[] = {cmocka_unit_test(test_refused_here)};
		return cmocka_run_group_tests(refusal, NULL, NULL);
	}
	/* Same addresses in every run: the full trace and the sampled runs must agree. */
	personality(ADDR_NO_RANDOMIZE);
	if (getenv("LOMAS_TEST_FILTER")) /* one test while working on it */
		cmocka_set_test_filter(getenv("LOMAS_TEST_FILTER"));
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_exact_word_distances),
	    cmocka_unit_test(test_masked_store),
	    cmocka_unit_test(test_same_as_mprotect),
	    cmocka_unit_test(test_hostile_same_as_native),
	    cmocka_unit_test(test_threads),
	    cmocka_unit_test(test_detach),
	    cmocka_unit_test(test_capability_error),
	    cmocka_unit_test(test_cli),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

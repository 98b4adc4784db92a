/*
 * The monitor and its step clock on real (tiny, static) targets, through the
 * public session API. Ground truth comes from outside the code under test:
 * an independent full trace recorded by this file's own single-stepper (the
 * decoder is its only shared part), counts known by construction, the
 * sample points the seed implies (core rng), and native runs of the same
 * targets for behaviour (stdout, exit status).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/personality.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/core.h"
#include "decode/decode.h"
#include "monitor/monitor.h"
#include "step_run.h"

/* ---------------------------------------- the independent full-trace path */

typedef struct tref {
	uint64_t addr, pc;
	uint32_t size;
	uint8_t kind;
} tref;

typedef struct trace {
	tref *r;
	size_t n, cap;
} trace;

static void trace_push(trace *t, const decode_ref *d, uint64_t pc)
{
	if (t->n == t->cap) {
		t->cap = t->cap ? t->cap * 2 : 65536;
		t->r = realloc(t->r, t->cap * sizeof *t->r);
		assert_non_null(t->r);
	}
	t->r[t->n++] = (tref){d->addr, pc, d->size, d->kind};
}

/*
 * Record every reference of a run of argv: PTRACE_TRACEME, single-step each
 * instruction, decode it before it runs, keep its references when it
 * retires. Stdout goes to a pipe as in run_step (stdio buffering depends on it).
 */
static void full_trace(char *const argv[], trace *t)
{
	decoder *d;
	int p[2], status;
	pid_t pid;
	char sink[8192];
	assert_int_equal(decoder_new(&d), LOMAS_OK);
	assert_int_equal(pipe(p), 0);
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		dup2(p[1], 1);
		close(p[0]);
		close(p[1]);
		ptrace(PTRACE_TRACEME, 0, NULL, NULL);
		kill(getpid(), SIGSTOP);
		execv(argv[0], argv);
		_exit(127);
	}
	close(p[1]);
	assert_int_equal(waitpid(pid, &status, 0), pid); /* SIGSTOP */
	ptrace(PTRACE_CONT, pid, NULL, NULL);
	assert_int_equal(waitpid(pid, &status, 0), pid); /* SIGTRAP after exec */
	assert_true(WIFSTOPPED(status) && WSTOPSIG(status) == SIGTRAP);
	for (;;) {
		struct user_regs_struct regs;
		decode_insn in;
		assert_int_equal(ptrace(PTRACE_GETREGS, pid, NULL, &regs), 0);
		if (decoder_at(d, pid, &regs, &in) != LOMAS_OK)
			in.nrefs = 0;
		if (decode_has_opmask(&in)) { /* AVX-512 masked moves: what the mask selects */
			uint64_t k[8];
			assert_int_equal(decode_read_opmask(pid, k), LOMAS_OK);
			decode_apply_opmask(&in, k);
		}
		if (decode_is_cpuid(&in)) {
			/* Run here, not stepped: a hypervisor may lose CPUID's step
			 * trap (decode_cpuid.c). */
			assert_int_equal(decode_run_cpuid(pid, &in), LOMAS_OK);
			continue;
		}
		ptrace(PTRACE_SINGLESTEP, pid, NULL, NULL);
		assert_int_equal(waitpid(pid, &status, 0), pid);
		if (WIFEXITED(status) || WIFSIGNALED(status))
			break;
		assert_int_equal(WSTOPSIG(status), SIGTRAP);
		for (unsigned j = 0; j < in.nrefs; j++)
			trace_push(t, &in.refs[j], in.pc);
	}
	read_all(p[0], sink, sizeof sink);
	close(p[0]);
	decoder_free(d);
}

/* The exact forward reuse distance of reference i at line granularity; UINT64_MAX if none. */
static uint64_t exact_distance(const trace *t, size_t i, uint64_t line_size)
{
	uint64_t line = t->r[i].addr & ~(line_size - 1);
	for (size_t j = i + 1; j < t->n; j++) {
		uint64_t a = t->r[j].addr & ~(line_size - 1);
		uint64_t b =
		    (t->r[j].addr + (t->r[j].size ? t->r[j].size - 1 : 0)) & ~(line_size - 1);
		if (a == line || b == line)
			return j - i - 1;
	}
	return UINT64_MAX;
}

/* ------------------------------------------------------------------ tests */

/* (a) The reference count equals a count known by construction. */
static void test_count_by_construction(void **state)
{
	char path[4200];
	run_result a, b, c;
	(void)state;
	target(path, sizeof path, "t_loop");
	char *argv1[] = {path, "100", NULL};
	char *argv3[] = {path, "300", NULL};
	assert_int_equal(run_step(argv1, &a, "period", "1000000000", NULL), LOMAS_OK);
	assert_int_equal(run_step(argv3, &b, "period", "1000000000", NULL), LOMAS_OK);
	assert_int_equal(WEXITSTATUS(a.status), 0);
	assert_string_equal(a.out, "loop done\n");
	/* 200 more rounds x 256 lines x (one load + one store). */
	assert_int_equal(b.stats.refs - a.stats.refs, 200 * 256 * 2);
	/* Sampling (faults, injections, re-steps) must not change the count. */
	assert_int_equal(run_step(argv1, &c, "period", "50", NULL), LOMAS_OK);
	assert_true(c.stats.samples > 100);
	assert_int_equal(c.stats.refs, a.stats.refs);
	free_result(&a);
	free_result(&b);
	free_result(&c);
}

/*
 * The store right after a CPUID is counted: under a hypervisor that drops
 * CPUID's single-step trap (PVM, this project's machines) the step ran it
 * unseen, one reference lost per CPUID, until the monitor ran CPUID itself.
 */
static void test_count_after_cpuid(void **state)
{
	char path[4200];
	run_result a, b;
	const char *v = NULL;
	(void)state;
	target(path, sizeof path, "t_loop");
	char *plain[] = {path, "40", "64", "plain", NULL};
	char *cpuid[] = {path, "40", "64", "cpuid", NULL};
	assert_int_equal(run_step(plain, &a, "period", "1000000000", NULL), LOMAS_OK);
	assert_int_equal(run_step(cpuid, &b, "period", "1000000000", NULL), LOMAS_OK);
	assert_string_equal(b.out, "loop done\n");
	/* 40 rounds, each one store more. */
	assert_int_equal(b.stats.refs - a.stats.refs, 40);
	assert_int_equal(lomas_profile_meta_get(b.prof, "step.cpuid_run", &v), LOMAS_OK);
	assert_true(strtoull(v, NULL, 10) >= 40);
	free_result(&a);
	free_result(&b);
}

/* The sample points the seed implies: counts sp_k = sum of rng_gap draws. */
static void expected_starts(uint64_t seed, double period, uint64_t refs, uint64_t **out, size_t *n)
{
	rng r;
	uint64_t sp = 0;
	size_t cap = 1024;
	*out = malloc(cap * sizeof **out);
	*n = 0;
	rng_seed(&r, seed);
	for (;;) {
		sp += rng_gap(&r, period);
		if (sp > refs)
			break;
		if (*n == cap)
			*out = realloc(*out, (cap *= 2) * sizeof **out);
		(*out)[(*n)++] = sp - 1;
	}
}

static void check_exact(const trace *t, const run_result *res, uint64_t seed, double period)
{
	lomas_profile_info info = LOMAS_PROFILE_INFO_INIT;
	lomas_sample *s;
	size_t n, copied, nexp;
	uint64_t *exp;
	assert_int_equal(lomas_profile_info_get(res->prof, &info), LOMAS_OK);
	assert_int_equal(info.refs, t->n);
	n = info.samples;
	s = calloc(n, sizeof *s);
	assert_int_equal(lomas_profile_samples(res->prof, 0, n, s, &copied), LOMAS_OK);
	assert_int_equal(copied, n);
	expected_starts(seed, period, t->n, &exp, &nexp);
	assert_int_equal(n, nexp);
	for (size_t i = 0; i < n; i++) {
		uint64_t d = exact_distance(t, s[i].start, 64);
		assert_int_equal(s[i].start, exp[i]);
		assert_int_equal(s[i].addr, t->r[s[i].start].addr);
		assert_int_equal(s[i].start_pc, t->r[s[i].start].pc);
		assert_int_equal(s[i].kind, t->r[s[i].start].kind);
		if (d == UINT64_MAX) {
			if (s[i].state != LOMAS_SAMPLE_DANGLING)
				fail_msg(
				    "sample %zu at %llu (pc %#llx addr %#llx): state %u end %llu, "
				    "expected dangling",
				    i, (unsigned long long)s[i].start,
				    (unsigned long long)s[i].start_pc,
				    (unsigned long long)s[i].addr, s[i].state,
				    (unsigned long long)s[i].end);
		} else {
			if (s[i].state != LOMAS_SAMPLE_REUSED)
				fail_msg("sample %zu at %llu (pc %#llx addr %#llx): state %u, "
				         "expected distance %llu",
				         i, (unsigned long long)s[i].start,
				         (unsigned long long)s[i].start_pc,
				         (unsigned long long)s[i].addr, s[i].state,
				         (unsigned long long)d);
			if (s[i].end - s[i].start - 1 != d) {
				for (uint64_t c = s[i].start; c <= s[i].start + d + 1 && c < t->n;
				     c++)
					fprintf(stderr,
					        "  ref %llu pc %#llx addr %#llx size %u kind %u\n",
					        (unsigned long long)c,
					        (unsigned long long)t->r[c].pc,
					        (unsigned long long)t->r[c].addr, t->r[c].size,
					        t->r[c].kind);
				fail_msg(
				    "sample %zu at %llu addr %#llx: distance %llu (end pc %#llx), "
				    "expected %llu",
				    i, (unsigned long long)s[i].start,
				    (unsigned long long)s[i].addr,
				    (unsigned long long)(s[i].end - s[i].start - 1),
				    (unsigned long long)s[i].end_pc, (unsigned long long)d);
			}
			assert_int_equal(s[i].end_pc, t->r[s[i].end].pc);
		}
	}
	free(exp);
	free(s);
}

/*
 * (b) Every sampled distance equals the exact distance in an independent full
 * trace, with and without simulated skid; (c) the target touches other lines
 * of watched pages: false positives are counted, distances stay exact.
 */
static void test_exact_distances(void **state)
{
	char path[4200];
	trace t = {0};
	run_result a, b;
	const char *by_fault = NULL;
	(void)state;
	target(path, sizeof path, "t_loop");
	char *argv[] = {path, "2", NULL};
	full_trace(argv, &t);
	assert_true(t.n > 2000);
	assert_int_equal(run_step(argv, &a, "period", "40", "seed", "7", NULL), LOMAS_OK);
	check_exact(&t, &a, 7, 40.0);
	/* The mprotect engine did the work: faults, false positives, reprotects. */
	assert_true(a.stats.faults > 0);
	assert_true(a.stats.false_positives > 0);
	assert_true(a.stats.reprotects > 0);
	assert_int_equal(lomas_profile_meta_get(a.prof, "step.reuse_by_fault", &by_fault),
	                 LOMAS_OK);
	assert_true(strtoull(by_fault, NULL, 10) * 2 > a.stats.reused);
	assert_int_equal(run_step(argv, &b, "period", "40", "seed", "7", "max_skid", "8", NULL),
	                 LOMAS_OK);
	check_exact(&t, &b, 7, 40.0);
	assert_int_equal(b.stats.samples, a.stats.samples);
	free_result(&a);
	free_result(&b);
	free(t.r);
}

/* (c) A sparse stride: most faults are on other lines of watched pages. */
static void test_false_positives(void **state)
{
	char path[4200];
	trace t = {0};
	run_result a;
	(void)state;
	target(path, sizeof path, "t_loop");
	char *argv[] = {path, "3", "256", NULL};
	full_trace(argv, &t);
	assert_int_equal(run_step(argv, &a, "period", "60", "seed", "3", "max_skid", "5", NULL),
	                 LOMAS_OK);
	check_exact(&t, &a, 3, 60.0);
	assert_true(a.stats.false_positives > a.stats.reused / 4);
	free_result(&a);
	free(t.r);
}

static void same_as_native(char *const argv[], const char *period)
{
	run_result n, s;
	run_native(argv, &n);
	assert_int_equal(run_step(argv, &s, "period", period, NULL), LOMAS_OK);
	assert_string_equal(s.out, n.out);
	assert_int_equal(s.status, n.status);
	assert_true(s.stats.samples > 0);
	assert_int_equal(profile_validate(s.prof), LOMAS_OK);
	free_result(&s);
}

/* (d) Signals: own SIGSEGV handler, read/write on watched pages, sigaltstack, SIGALRM, raise. */
static void test_native_signals(void **state)
{
	char path[4200];
	(void)state;
	target(path, sizeof path, "t_signals");
	char *argv[] = {path, NULL};
	same_as_native(argv, "20");
}

/* (d) Two threads, then exit(5) from a non-main thread. */
static void test_native_threads(void **state)
{
	char path[4200];
	run_result s;
	(void)state;
	target(path, sizeof path, "t_threads");
	char *argv[] = {path, NULL};
	same_as_native(argv, "30");
	assert_int_equal(run_step(argv, &s, "period", "100", NULL), LOMAS_OK);
	assert_true(s.stats.threads >= 3);
	lomas_profile_info info = LOMAS_PROFILE_INFO_INIT;
	lomas_profile_info_get(s.prof, &info);
	assert_true(info.threads >= 3);
	free_result(&s);
}

/* (d) fork, then exec in the child (not followed); the child sees no protections. */
static void test_native_fork_exec(void **state)
{
	char path[4200];
	(void)state;
	target(path, sizeof path, "t_fork");
	char *argv[] = {path, "/bin/echo", "from the child", NULL};
	same_as_native(argv, "20");
	char *argv2[] = {path, NULL};
	same_as_native(argv2, "20");
}

/* (d) A crash is reported with the same signal. */
static void test_native_crash(void **state)
{
	char path[4200];
	(void)state;
	target(path, sizeof path, "t_crash");
	char *argv[] = {path, NULL};
	char *argv2[] = {path, "abort", NULL};
	char *argv3[] = {path, "kill", NULL};
	same_as_native(argv, "50");
	same_as_native(argv2, "50");
	same_as_native(argv3, "50");
}

static void proc_perms(pid_t pid, char *buf, size_t len)
{
	char path[64], line[512];
	FILE *f;
	size_t n = 0;
	snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
	f = fopen(path, "re");
	assert_non_null(f);
	buf[0] = 0;
	while (fgets(line, sizeof line, f)) {
		/* address range and permissions only */
		char *sp = strchr(line, ' ');
		if (!sp)
			continue;
		n += (size_t)snprintf(buf + n, len - n, "%.*s\n", (int)(sp - line + 5), line);
		if (n >= len)
			break;
	}
	fclose(f);
}

static char proc_state(pid_t pid)
{
	char path[64], buf[512];
	FILE *f;
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return '?';
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = 0;
	char *rp = strrchr(buf, ')');
	return rp && rp[1] && rp[2] ? rp[2] : '?';
}

static volatile sig_atomic_t alarms;

static void on_alarm(int sig)
{
	(void)sig;
	alarms++;
}

/*
 * Attach to a running program, sample, detach: protections as before, it
 * runs on. With interrupt_us > 0 the caller takes a signal every interrupt_us
 * microseconds, its handler installed without SA_RESTART (as lomas-demo's
 * SIGINT handler is): every blocking call of the library may end in EINTR.
 */
static void attach_detach(long interrupt_us)
{
	char path[4200], before[16384], after[16384], ready[16];
	int p[2], status;
	pid_t pid;
	lomas_config *cfg;
	lomas_session *s;
	lomas_stats st = LOMAS_STATS_INIT;
	lomas_profile *prof;
	int running = 1;
	struct sigaction sa, old_sa;
	struct itimerval it = {{0, interrupt_us}, {0, interrupt_us}}, off = {{0, 0}, {0, 0}};
	target(path, sizeof path, "t_spin");
	assert_int_equal(pipe(p), 0);
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		/* A failed assertion leaves the test early: the target must not outlive it. */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(p[1], 1);
		close(p[0]);
		close(p[1]);
		execl(path, path, (char *)NULL);
		_exit(127);
	}
	close(p[1]);
	assert_int_equal(read(p[0], ready, 6), 6);
	proc_perms(pid, before, sizeof before);
	assert_int_equal(lomas_config_new(&cfg), LOMAS_OK);
	assert_int_equal(lomas_config_set(cfg, "clock", "step"), LOMAS_OK);
	assert_int_equal(lomas_config_set(cfg, "period", "20"), LOMAS_OK);
	if (interrupt_us > 0) {
		memset(&sa, 0, sizeof sa);
		sa.sa_handler = on_alarm;
		sigemptyset(&sa.sa_mask);
		assert_int_equal(sigaction(SIGALRM, &sa, &old_sa), 0);
		alarms = 0;
		assert_int_equal(setitimer(ITIMER_REAL, &it, NULL), 0);
	}
	assert_int_equal(lomas_session_attach(cfg, pid, &s), LOMAS_OK);
	for (int i = 0; i < 6 && running; i++)
		assert_int_equal(lomas_session_poll(s, 50, &running), LOMAS_OK);
	assert_true(running);
	assert_int_equal(lomas_session_stats(s, &st), LOMAS_OK);
	assert_true(st.refs > 100);
	assert_true(st.samples > 0);
	assert_true(st.injected_syscalls > 0);
	assert_int_equal(lomas_session_stop(s), LOMAS_OK);
	if (interrupt_us > 0) {
		setitimer(ITIMER_REAL, &off, NULL);
		sigaction(SIGALRM, &old_sa, NULL);
		assert_true(alarms > 10);
	}
	assert_int_equal(lomas_session_profile(s, &prof), LOMAS_OK);
	assert_int_equal(profile_validate(prof), LOMAS_OK);
	lomas_profile_free(prof);
	lomas_session_free(s);
	lomas_config_free(cfg);
	proc_perms(pid, after, sizeof after);
	assert_string_equal(after, before);
	/* Not stopped, not traced: it runs on, and dies only when we kill it. */
	struct timespec ts = {0, 50000000};
	nanosleep(&ts, NULL);
	char c = proc_state(pid);
	assert_true(c == 'R' || c == 'S');
	assert_int_equal(waitpid(pid, &status, WNOHANG), 0);
	kill(pid, SIGKILL);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	close(p[0]);
}

/* (e) Attach to a running program, sample, detach. */
static void test_attach_detach(void **state)
{
	(void)state;
	attach_detach(0);
}

/*
 * (e') The same while the caller's signals interrupt the library's waits: an
 * interrupted wait for an injected call's step must not leave the thread with
 * the injection's registers (it would run on in our scratch page: SIGTRAP while
 * traced, or SIGSEGV once detached and the page is gone).
 */
static void test_attach_detach_interrupted(void **state)
{
	(void)state;
	for (int i = 0; i < 3; i++)
		attach_detach(200);
}

/*
 * (e'') A thread whose resume fails because it is not in a ptrace-stop any
 * more (a SIGKILL ends the target between its step report and our resume:
 * PTRACE_SINGLESTEP fails with ESRCH) is still waited for, so its next
 * report (there: its exit) is collected. It used to stay marked stopped,
 * mon_wait passed it over, and a session polled forever while its target sat
 * in its exit stop (lomas-demo record of a target killed under it hung so,
 * about once in twenty kills). The window cannot be timed from here, so the
 * test gives step_handle a report for a thread it has already resumed: the
 * same failure, every time. Drives the monitor directly.
 */
static void test_failed_resume_is_waited_for(void **state)
{
	char path[4096];
	char *argv[] = {path, NULL};
	struct lomas_config cfg;
	monitor *m = calloc(1, sizeof *m);
	mon_thread *t = NULL;
	int status = 0, stale, r;
	(void)state;
	assert_non_null(m);
	target(path, sizeof path, "t_spin");
	config_defaults(&cfg);
	cfg.clock = CLOCK_STEP;
	cfg.period_refs = 100;
	assert_int_equal(step_init(m, &cfg), LOMAS_OK);
	assert_int_equal(mon_spawn(m, path, argv), LOMAS_OK);
	assert_int_equal(step_begin(m), LOMAS_OK);
	for (int i = 0; i < 200; i++) {
		assert_int_equal(mon_wait(m, -1, &t, &status), 1);
		assert_int_equal(step_handle(m, t, status, false), LOMAS_OK);
	}
	assert_int_equal(mon_wait(m, -1, &t, &status), 1);
	assert_true(WIFSTOPPED(status));
	stale = status;
	assert_int_equal(step_handle(m, t, status, false), LOMAS_OK); /* running again */
	/* The same report again: the thread is not stopped, the resume fails. */
	t = mon_thread_of(m, m->pid);
	assert_non_null(t);
	assert_int_equal(step_handle(m, t, stale, false), LOMAS_ETARGET);
	t = mon_thread_of(m, m->pid);
	assert_non_null(t);
	assert_int_not_equal(t->state, MT_STOPPED);
	/* It is waited for: its next report comes. */
	assert_int_equal(mon_wait(m, 5000, &t, &status), 1);
	assert_true(WIFSTOPPED(status));
	assert_int_equal(step_handle(m, t, status, false), LOMAS_OK);
	/* Killed now, it ends the run: every report collected, none left. */
	assert_int_equal(kill(m->pid, SIGKILL), 0);
	for (int i = 0; i < 1000 && !m->ended; i++) {
		r = mon_wait(m, 5000, &t, &status);
		assert_true(r >= 0);
		if (r == 0)
			break;
		step_handle(m, t, status, false);
	}
	assert_true(m->ended);
	assert_true(WIFSIGNALED(m->exit_status) && WTERMSIG(m->exit_status) == SIGKILL);
	step_free(m);
	maps_free(&m->maps);
	free(m->threads.items);
	free(m);
}

/* Errors: not found, not executable, no such process. */
static void test_errors(void **state)
{
	char path[] = "/tmp/lomas-test-noexec-XXXXXX";
	run_result r;
	lomas_session *s;
	int fd;
	(void)state;
	char *argv[] = {"lomas-no-such-command-anywhere", NULL};
	assert_int_equal(run_step(argv, &r, NULL), LOMAS_ENOENT);
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "x", 1), 1);
	close(fd);
	chmod(path, 0644);
	char *argv2[] = {path, NULL};
	assert_int_equal(run_step(argv2, &r, NULL), LOMAS_EPERM);
	unlink(path);
	assert_int_equal(lomas_session_attach(NULL, 999999999, &s), LOMAS_ENOENT);
}

int main(void)
{
	int skip = step_test_setup();
	if (skip)
		return skip;
	/* Same addresses in every run: the full trace and the sampled run must agree. */
	personality(ADDR_NO_RANDOMIZE);
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_count_by_construction),
	    cmocka_unit_test(test_count_after_cpuid),
	    cmocka_unit_test(test_exact_distances),
	    cmocka_unit_test(test_false_positives),
	    cmocka_unit_test(test_native_signals),
	    cmocka_unit_test(test_native_threads),
	    cmocka_unit_test(test_native_fork_exec),
	    cmocka_unit_test(test_native_crash),
	    cmocka_unit_test(test_attach_detach),
	    cmocka_unit_test(test_attach_detach_interrupted),
	    cmocka_unit_test(test_failed_resume_is_waited_for),
	    cmocka_unit_test(test_errors),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

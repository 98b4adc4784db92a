/*
 * Job control under the step clock (issue 16, item 4). A target stopped
 * from outside (SIGSTOP, SIGTSTP) or by itself (raise, or kill of its own
 * process from one of its threads) stays stopped, makes no progress, costs
 * the session no CPU, and resumes on SIGCONT to end with the output and
 * status of its native run; the same when attached, to a running or to an
 * already stopped process, and a detach while it is stopped leaves it
 * stopped, as it was. Before: a group-stop's pending protection change was
 * injected from the stopped thread, which ended its stop; PTRACE_LISTEN then
 * failed, SIGCONT was never seen, and the target sat in its ptrace-stop
 * forever while the monitor polled in a loop.
 */
#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "step_run.h"

#include <sys/syscall.h>
#include <sys/user.h>

#include "lomas/lomas.h"
#include "monitor/monitor.h"

/* A live session of t_jobctl with its stdout in a pipe and its pid. */
typedef struct live {
	lomas_session *s;
	lomas_config *cfg;
	pid_t pid;
	int out;
} live;

static lomas_config *config(const char *period)
{
	lomas_config *cfg;
	assert_int_equal(lomas_config_new(&cfg), LOMAS_OK);
	assert_int_equal(lomas_config_set(cfg, "clock", "step"), LOMAS_OK);
	assert_int_equal(lomas_config_set(cfg, "period", period), LOMAS_OK);
	return cfg;
}

/* Read "PID\n" from the handshake pipe, polling the session (if any) meanwhile. */
static pid_t read_pid(lomas_session *s, int fd)
{
	char b[32];
	size_t n = 0;
	double t0 = mono_s();
	fcntl(fd, F_SETFL, O_NONBLOCK);
	while (mono_s() - t0 < 60) {
		int running = 1;
		ssize_t r = read(fd, b + n, sizeof b - 1 - n);
		if (r > 0) {
			n += (size_t)r;
			b[n] = 0;
			if (strchr(b, '\n'))
				return (pid_t)atoi(b);
		}
		if (s)
			assert_int_equal(lomas_session_poll(s, 10, &running), LOMAS_OK);
		else
			usleep(1000);
	}
	fail_msg("no handshake from the target");
	return -1;
}

/* Start argv under the step clock; its fd 3 is the handshake pipe. */
static void live_start(live *L, char *const argv[], const char *period)
{
	int o[2], h[2], saved1, saved3;
	memset(L, 0, sizeof *L);
	L->cfg = config(period);
	assert_int_equal(pipe(o), 0);
	assert_int_equal(pipe(h), 0);
	fflush(stdout);
	saved1 = dup(1);
	saved3 = dup(3);
	dup2(o[1], 1);
	dup2(h[1], 3);
	assert_int_equal(lomas_session_start(L->cfg, argv, &L->s), LOMAS_OK);
	dup2(saved1, 1);
	close(saved1);
	if (saved3 >= 0) {
		dup2(saved3, 3);
		close(saved3);
	} else {
		close(3);
	}
	close(o[1]);
	close(h[1]);
	L->out = o[0];
	L->pid = read_pid(L->s, h[0]);
	close(h[0]);
}

static uint64_t refs(lomas_session *s)
{
	lomas_stats st = LOMAS_STATS_INIT;
	assert_int_equal(lomas_session_stats(s, &st), LOMAS_OK);
	return st.refs;
}

/* Poll for ms; the references counted meanwhile. */
static uint64_t progress_over(lomas_session *s, int ms)
{
	uint64_t r0 = refs(s);
	double t0 = mono_s();
	int running = 1;
	while (running && (mono_s() - t0) * 1000 < ms)
		assert_int_equal(lomas_session_poll(s, 50, &running), LOMAS_OK);
	assert_true(running);
	return refs(s) - r0;
}

/* Poll until the target makes no progress for 300 ms (it is stopped); fail after 30 s. */
static void until_stopped(lomas_session *s)
{
	double t0 = mono_s();
	while (progress_over(s, 300) != 0)
		if (mono_s() - t0 > 30)
			fail_msg("the target did not stop");
}

static double cpu_s(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

/*
 * While the target is stopped: no progress over a second, and the session
 * blocks (its CPU time over that second is a small part of it; a loop
 * polling with WNOHANG used all of it).
 */
static void stays_stopped_cheaply(lomas_session *s)
{
	double c0 = cpu_s(), t0 = mono_s();
	assert_int_equal(progress_over(s, 1000), 0);
	double cpu = cpu_s() - c0, wall = mono_s() - t0;
	fprintf(stderr, "# while stopped: %.3f s CPU over %.2f s\n", cpu, wall);
	assert_true(cpu < 0.03 * wall);
}

/* Run to the end; the result into res (stdout, status). */
static void live_finish(live *L, run_result *res)
{
	int running = 1;
	double t0 = mono_s();
	memset(res, 0, sizeof *res);
	while (running) {
		assert_int_equal(lomas_session_poll(L->s, 100, &running), LOMAS_OK);
		if (running && mono_s() - t0 > 120)
			fail_msg("the target did not finish after its SIGCONT");
	}
	assert_int_equal(lomas_session_wait(L->s, &res->status), LOMAS_OK);
	read_all(L->out, res->out, sizeof res->out);
	close(L->out);
	lomas_session_free(L->s);
	lomas_config_free(L->cfg);
}

/* The native run of a target that may stop itself: continued whenever it stops. */
static void native_continued(char *const argv[], run_result *res)
{
	int p[2], st;
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
	for (;;) {
		assert_int_equal(waitpid(pid, &st, WUNTRACED), pid);
		if (!WIFSTOPPED(st))
			break;
		kill(pid, SIGCONT);
	}
	read_all(p[0], res->out, sizeof res->out);
	close(p[0]);
	res->status = st;
}

static void same(const run_result *a, const run_result *native)
{
	if (strcmp(a->out, native->out) || a->status != native->status)
		fail_msg("status %#x, output '%s'; native %#x, '%s'", a->status, a->out,
		         native->status, native->out);
}

static pid_t native_spin(int *out);
static void end_native(pid_t pid, int out);

/*
 * Does sig stop a program here, natively? SIGTSTP, SIGTTIN and SIGTTOU are
 * discarded in an orphaned process group (kernel/signal.c, get_signal()), as
 * the tests' may be under a test runner; then the target must run on.
 */
static bool stops_natively(int sig)
{
	int out, st = 0;
	pid_t pid = native_spin(&out), r = 0;
	kill(pid, sig);
	for (int i = 0; i < 100 && !(r = waitpid(pid, &st, WUNTRACED | WNOHANG)); i++)
		usleep(2000);
	if (r == pid && WIFSTOPPED(st))
		kill(pid, SIGCONT);
	end_native(pid, out);
	return r == pid && WIFSTOPPED(st);
}

/* A stop signal from outside mid-run, then SIGCONT. */
static void stop_from_outside(int sig, const char *mode)
{
	char path[4200];
	live L;
	run_result n, r;
	bool stops = stops_natively(sig);
	target(path, sizeof path, "t_jobctl");
	char *argv[] = {path, (char *)mode, "1500", "3", NULL};
	native_continued(argv, &n);
	live_start(&L, argv, "20");
	assert_int_equal(kill(L.pid, sig), 0); /* while it works (~25k steps to go) */
	if (stops) {
		until_stopped(L.s);
		stays_stopped_cheaply(L.s);
	} else {
		fprintf(stderr,
		        "# signal %d does not stop a program here (orphaned process "
		        "group): it must not under lomas either\n",
		        sig);
	}
	assert_int_equal(kill(L.pid, SIGCONT), 0);
	live_finish(&L, &r);
	same(&r, &n);
}

static void test_sigstop_sigcont(void **state)
{
	(void)state;
	stop_from_outside(SIGSTOP, "spin");
}

static void test_sigtstp_sigcont(void **state)
{
	(void)state;
	stop_from_outside(SIGTSTP, "spin");
}

/* Four threads working, stopped and continued from outside. */
static void test_threads_sigstop_sigcont(void **state)
{
	char path[4200];
	live L;
	run_result n, r;
	(void)state;
	target(path, sizeof path, "t_jobctl");
	/* rounds large enough that the outside SIGSTOP lands while they work */
	char *argv[] = {path, "threads", "400", "4", NULL};
	native_continued(argv, &n);
	live_start(&L, argv, "20");
	/* The target stops itself once (thread 1): wait for that, continue it. */
	until_stopped(L.s);
	assert_int_equal(kill(L.pid, SIGCONT), 0);
	while (progress_over(L.s, 20) == 0)
		;
	/* Then from outside, while its threads run (thousands of steps to go). */
	assert_int_equal(kill(L.pid, SIGSTOP), 0);
	until_stopped(L.s);
	stays_stopped_cheaply(L.s);
	assert_int_equal(kill(L.pid, SIGCONT), 0);
	live_finish(&L, &r);
	same(&r, &n);
}

/*
 * raise(SIGSTOP) in the target itself. A period of 20 keeps pages watched,
 * so the stop always finds protections to bring back: injected from the
 * stopped thread, that ended its group-stop and the SIGCONT was lost.
 */
static void test_self_stop(void **state)
{
	char path[4200];
	live L;
	run_result n, r;
	(void)state;
	target(path, sizeof path, "t_jobctl");
	char *argv[] = {path, "self", "500", NULL};
	native_continued(argv, &n);
	live_start(&L, argv, "20");
	until_stopped(L.s);
	assert_int_equal(progress_over(L.s, 500), 0);
	assert_int_equal(kill(L.pid, SIGCONT), 0);
	live_finish(&L, &r);
	same(&r, &n);
}

/* Start t_jobctl natively (a child of ours) with the handshake; its pid. */
static pid_t native_spin(int *out)
{
	char path[4200];
	int o[2], h[2];
	pid_t pid;
	target(path, sizeof path, "t_jobctl");
	assert_int_equal(pipe(o), 0);
	assert_int_equal(pipe(h), 0);
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		dup2(o[1], 1);
		dup2(h[1], 3);
		execl(path, path, "spin", "4000000000", (char *)NULL);
		_exit(127);
	}
	close(o[1]);
	close(h[1]);
	assert_int_equal(read_pid(NULL, h[0]), pid);
	close(h[0]);
	*out = o[0];
	return pid;
}

static char proc_state(pid_t pid)
{
	char path[64], buf[512];
	FILE *f;
	snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
	if (!(f = fopen(path, "re")))
		return '?';
	size_t n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = 0;
	char *rp = strrchr(buf, ')');
	return rp && rp[1] && rp[2] ? rp[2] : '?';
}

static void end_native(pid_t pid, int out)
{
	int st;
	kill(pid, SIGKILL);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	close(out);
}

/*
 * Attach to a process that is already stopped: it stays stopped under us,
 * resumes on SIGCONT; stopped again and detached, it stays stopped, and a
 * SIGCONT after the detach lets it run on.
 */
static void test_attach_stopped(void **state)
{
	lomas_config *cfg = config("20");
	lomas_session *s;
	int out, st;
	pid_t pid = native_spin(&out);
	(void)state;
	assert_int_equal(kill(pid, SIGSTOP), 0);
	assert_int_equal(waitpid(pid, &st, WUNTRACED), pid);
	assert_true(WIFSTOPPED(st));
	assert_int_equal(lomas_session_attach(cfg, pid, &s), LOMAS_OK);
	stays_stopped_cheaply(s);
	assert_int_equal(kill(pid, SIGCONT), 0);
	assert_true(progress_over(s, 300) > 0);
	assert_int_equal(kill(pid, SIGSTOP), 0);
	until_stopped(s);
	assert_int_equal(lomas_session_stop(s), LOMAS_OK);
	lomas_session_free(s);
	lomas_config_free(cfg);
	/* Detached while stopped: still stopped (T), not traced any more. */
	usleep(100000);
	assert_int_equal(proc_state(pid), 'T');
	assert_int_equal(kill(pid, SIGCONT), 0);
	usleep(100000);
	char c = proc_state(pid);
	assert_true(c == 'R' || c == 'S');
	end_native(pid, out);
}

/*
 * A call injected into a thread just as another thread begins a group-stop:
 * the stop reaches the thread on its way back to user mode, before the call
 * runs. The injection gives up with the registers untouched and the thread
 * takes part in the stop; stepping on, it ran alone while the group was
 * stopped. Driven through the monitor directly, so the moment is exact: the
 * thread is held in its ptrace-stop while SIGSTOP starts the group-stop.
 */
static void test_injection_meets_group_stop(void **state)
{
	char path[4200];
	struct lomas_config cfg;
	monitor *m = calloc(1, sizeof *m);
	mon_thread *t = NULL, *a = NULL;
	struct user_regs_struct r0, r1;
	uint64_t none[6] = {0};
	long ret = 0;
	int status, devnull = open("/dev/null", O_WRONLY), saved = dup(1);
	double t0 = mono_s();
	(void)state;
	target(path, sizeof path, "t_jobctl");
	char *argv[] = {path, "threads", "400000", "2", NULL};
	config_defaults(&cfg);
	cfg.clock = CLOCK_STEP;
	cfg.period_refs = 1000000;
	assert_int_equal(step_init(m, &cfg), LOMAS_OK);
	dup2(devnull, 1);
	assert_int_equal(mon_spawn(m, path, argv), LOMAS_OK);
	dup2(saved, 1);
	close(saved);
	close(devnull);
	assert_int_equal(step_begin(m), LOMAS_OK);
	/* Until a worker has stepped a while: then hold it in its stop (detaching mode). */
	while (!a) {
		assert_true(mono_s() - t0 < 60);
		assert_int_equal(mon_wait(m, 1000, &t, &status), 1);
		bool hold = t->tid != m->pid && t->clock > 200 && WIFSTOPPED(status) &&
		            (status >> 16) == 0 && WSTOPSIG(status) == SIGTRAP;
		assert_true(step_handle(m, t, status, hold) >= LOMAS_ETARGET);
		if (hold)
			a = mon_thread_of(m, t->tid);
	}
	pid_t atid = a->tid;
	assert_int_equal(a->state, MT_STOPPED);
	assert_int_equal(mon_inject(m, a, SYS_getpid, none, &ret), LOMAS_OK); /* our page */
	assert_int_equal(ret, m->pid);
	/* SIGSTOP: another thread takes it and begins the group-stop. */
	assert_int_equal(kill(m->pid, SIGSTOP), 0);
	for (;;) {
		bool listening = false;
		assert_true(mono_s() - t0 < 60);
		for (size_t i = 0; i < m->threads.n; i++)
			listening |= m->threads.items[i].state == MT_LISTEN;
		if (listening)
			break;
		assert_int_equal(mon_wait(m, 1000, &t, &status), 1);
		step_handle(m, t, status, false);
	}
	a = mon_thread_of(m, atid);
	m->cur_tid = atid;
	assert_int_equal(ptrace(PTRACE_GETREGS, atid, NULL, &r0), 0);
	assert_int_equal(mon_inject(m, a, SYS_getpid, none, &ret), LOMAS_ESTATE);
	assert_true(a->group_stop);
	assert_int_equal(ptrace(PTRACE_GETREGS, atid, NULL, &r1), 0);
	assert_memory_equal(&r0, &r1, sizeof r0); /* nothing ran, nothing changed */
	/* It takes part in the stop: every live thread listens, none steps on. */
	assert_int_equal(step_group_stop(m, a, false), LOMAS_OK);
	for (int quiet = 0; quiet < 3;) {
		int r = mon_wait(m, 200, &t, &status);
		assert_true(r >= 0 && mono_s() - t0 < 60);
		if (r == 0) {
			quiet++;
			continue;
		}
		quiet = 0;
		step_handle(m, t, status, false);
	}
	for (size_t i = 0; i < m->threads.n; i++)
		if (m->threads.items[i].state != MT_GONE)
			assert_int_equal(m->threads.items[i].state, MT_LISTEN);
	/* Done: kill it, collect every report. */
	kill(m->pid, SIGKILL);
	while (!m->ended && mon_wait(m, 5000, &t, &status) == 1)
		step_handle(m, t, status, false);
	assert_true(m->ended);
	step_free(m);
	maps_free(&m->maps);
	free(m->threads.items);
	free(m->command);
	free(m);
}

/*
 * Run the tests in a process group of their own whose parent (this process)
 * is in the same session: not orphaned, so SIGTSTP stops the target as in
 * a shell. Test runners start tests as session leaders (meson does), where
 * the kernel discards SIGTSTP, SIGTTIN and SIGTTOU.
 */
static int in_own_group(void)
{
	int st;
	pid_t pid;
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		setpgid(0, 0);
		return 0;
	}
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	exit(WIFEXITED(st) ? WEXITSTATUS(st) : 1);
}

int main(void)
{
	int rc = step_test_setup();
	if (rc)
		return rc;
	in_own_group();
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_sigstop_sigcont),
	    cmocka_unit_test(test_sigtstp_sigcont),
	    cmocka_unit_test(test_self_stop),
	    cmocka_unit_test(test_threads_sigstop_sigcont),
	    cmocka_unit_test(test_attach_stopped),
	    cmocka_unit_test(test_injection_meets_group_stop),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * The monitor's unit costs on this machine: one single-step, one injected
 * system call, one false-positive fault round trip of the mprotect engine
 * (fault stop, injected mprotect to lift, single-step, injected mprotect to
 * protect again, continue). The seed measured 0.025 ms per step and 0.051 ms
 * per fault on its Nehalem. Then the whole step clock through the session
 * API as lomas-demo record drives it (lomas_session_poll with 100 ms): time
 * and tracer CPU per step, and the tracer's CPU while the target is stopped
 * (it sleeps until SIGCHLD; the loop that polled with WNOHANG used ~10 %).
 */
#include <fcntl.h>
#include <sys/resource.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lomas/lomas.h"
#include "monitor/monitor.h"

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double cpu_s(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 +
	       (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6;
}

/* Steps through the session loop for `seconds`; then a second stopped. */
static int session_figures(char *target, double seconds)
{
	lomas_config *cfg;
	lomas_session *s;
	lomas_stats st0 = LOMAS_STATS_INIT, st1 = LOMAS_STATS_INIT;
	lomas_profile *p;
	const char *pidv = NULL;
	int running = 1, devnull = open("/dev/null", O_WRONLY), saved = dup(1);
	char *targv[] = {target, NULL};
	if (lomas_config_new(&cfg) || lomas_config_set(cfg, "clock", "step") ||
	    lomas_config_set(cfg, "period", "1000"))
		return 1;
	dup2(devnull, 1);
	lomas_status rc = lomas_session_start(cfg, targv, &s);
	dup2(saved, 1);
	close(devnull);
	close(saved);
	if (rc) {
		fprintf(stderr, "session: %s\n", lomas_error_message());
		return 1;
	}
	lomas_session_poll(s, 100, &running); /* past the start-up */
	lomas_session_stats(s, &st0);
	double t0 = now_s(), c0 = cpu_s();
	while (running && now_s() - t0 < seconds)
		lomas_session_poll(s, 100, &running);
	lomas_session_stats(s, &st1);
	double wall = now_s() - t0, cpu = cpu_s() - c0;
	uint64_t n = st1.steps - st0.steps;
	lomas_session_profile(s, &p);
	lomas_profile_meta_get(p, "pid", &pidv);
	pid_t pid = pidv ? (pid_t)atoi(pidv) : 0;
	lomas_profile_free(p);
	kill(pid, SIGSTOP);
	for (int i = 0; i < 3; i++) /* the stop reaches it */
		lomas_session_poll(s, 100, &running);
	double t1 = now_s(), c1 = cpu_s();
	while (running && now_s() - t1 < 1.0)
		lomas_session_poll(s, 100, &running);
	double stopped_cpu = cpu_s() - c1, stopped_wall = now_s() - t1;
	kill(pid, SIGCONT);
	lomas_session_stop(s);
	lomas_session_free(s);
	lomas_config_free(cfg);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	printf("session step (poll 100 ms): %8.4f ms  (%llu steps in %.1f s; tracer CPU "
	       "%.4f ms per step)\n",
	       n ? wall / (double)n * 1e3 : 0.0, (unsigned long long)n, wall,
	       n ? cpu / (double)n * 1e3 : 0.0);
	printf("target stopped:             %8.1f %%  tracer CPU over %.1f s\n",
	       100.0 * stopped_cpu / stopped_wall, stopped_wall);
	return 0;
}

int main(int argc, char **argv)
{
	monitor m;
	mon_thread *t;
	int p[2], saved, status;
	char line[64] = "";
	uint64_t page;
	long ret;
	const int steps = 20000, calls = 5000, faults = 3000;
	if (argc < 2) {
		fprintf(stderr, "usage: bench_monitor TARGET\n");
		return 2;
	}
	memset(&m, 0, sizeof m);
	m.page_size = 4096;
	if (pipe(p))
		return 1;
	saved = dup(1);
	dup2(p[1], 1);
	char *targv[] = {argv[1], NULL};
	if (mon_spawn(&m, argv[1], targv)) {
		dup2(saved, 1);
		fprintf(stderr, "spawn: %s\n", lomas_error_message());
		return 1;
	}
	dup2(saved, 1);
	close(p[1]);
	t = &m.threads.items[0];
	/* Run to the printf so the page address is known. */
	ptrace(PTRACE_CONT, t->tid, NULL, NULL);
	for (size_t n = 0; n < sizeof line - 1;) {
		if (read(p[0], line + n, 1) != 1 || line[n] == '\n')
			break;
		n++;
	}
	page = strtoull(line, NULL, 16);
	kill(t->tid, SIGSTOP);
	waitpid(t->tid, &status, __WALL); /* signal-delivery-stop of SIGSTOP: swallow it */

	double t0 = now_s();
	for (int i = 0; i < steps; i++) {
		ptrace(PTRACE_SINGLESTEP, t->tid, NULL, NULL);
		waitpid(t->tid, &status, __WALL);
	}
	double step_s = (now_s() - t0) / steps;

	uint64_t none[6] = {0};
	mon_inject(&m, t, SYS_getpid, none, &ret); /* maps the scratch page */
	t0 = now_s();
	for (int i = 0; i < calls; i++)
		mon_inject(&m, t, SYS_getpid, none, &ret);
	double inject_s = (now_s() - t0) / calls;

	uint64_t protect[6] = {page, 4096, PROT_NONE, 0, 0, 0};
	uint64_t lift[6] = {page, 4096, PROT_READ | PROT_WRITE, 0, 0, 0};
	mon_inject(&m, t, SYS_mprotect, protect, &ret);
	ptrace(PTRACE_CONT, t->tid, NULL, NULL);
	int got = 0;
	t0 = now_s();
	while (got < faults) {
		waitpid(t->tid, &status, __WALL);
		if (!WIFSTOPPED(status))
			break;
		if (WSTOPSIG(status) != SIGSEGV) {
			ptrace(PTRACE_CONT, t->tid, NULL, NULL);
			continue;
		}
		got++;
		mon_inject(&m, t, SYS_mprotect, lift, &ret);
		ptrace(PTRACE_SINGLESTEP, t->tid, NULL, NULL);
		waitpid(t->tid, &status, __WALL);
		mon_inject(&m, t, SYS_mprotect, protect, &ret);
		ptrace(PTRACE_CONT, t->tid, NULL, NULL);
	}
	double fault_s = (now_s() - t0) / (got ? got : 1);
	kill(t->tid, SIGKILL);
	waitpid(t->tid, &status, __WALL);

	printf("single-step:            %8.4f ms  (%d steps; seed: 0.025 ms on Nehalem)\n",
	       step_s * 1e3, steps);
	printf("injected system call:   %8.4f ms  (%d getpid)\n", inject_s * 1e3, calls);
	printf("false-positive fault:   %8.4f ms  (%d round trips: fault, lift, step, protect; "
	       "seed: 0.051 ms)\n",
	       fault_s * 1e3, got);
	free(m.threads.items);
	if (session_figures(argv[1], 3.0))
		return 1;
	return got == faults ? 0 : 1;
}

/*
 * The monitor's unit costs on this machine: one single-step, one injected
 * system call, one false-positive fault round trip of the mprotect engine
 * (fault stop, injected mprotect to lift, single-step, injected mprotect to
 * protect again, continue). The seed measured 0.025 ms per step and 0.051 ms
 * per fault on its Nehalem.
 */
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

#include "monitor/monitor.h"

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
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
	return got == faults ? 0 : 1;
}

/*
 * The pmu clock between samples (docs/pmu-clock.md, "Running free"): the
 * thread runs under PTRACE_SYSCALL (PMU_RUN), nothing stepped or decoded;
 * the counters say where it is when it stops. What stops it: the
 * overflow (pmu_clock.c), a fault on a page the watch engine protected
 * (stops.c: lifted, the one instruction stepped and decoded, protected
 * again), the target's own signals (delivered by a step, every page lifted
 * until the handler's first instruction, as under the step clock), ptrace
 * events, and each system call's entry and exit, here.
 *
 * No call may see EFAULT because of us, so a call runs with the watch
 * engine's pages lifted, as the step clock runs it. Pages cannot be lifted
 * from the entry stop itself: an injected mprotect needs the thread in user
 * mode, and the call, once entered, runs whatever the registers say then.
 * So the call is skipped at its entry (orig_rax = -1: the kernel runs
 * nothing, syscall_trace_enter()), and at the exit of the skipped call the
 * thread is put back on its syscall instruction (rip - 2: syscall,
 * sysenter and int 0x80 are two bytes each) with its registers as they
 * were; from there the step clock's own path runs it: decoded (a syscall),
 * every page lifted, one single step over it, protections back at its end
 * (step_release). That step counts as the monitor's (the ledger's steps).
 */
#include <errno.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>

#include "monitor.h"

#ifndef PTRACE_GET_SYSCALL_INFO
#define PTRACE_GET_SYSCALL_INFO 0x420e
#endif
/* struct ptrace_syscall_info's op (include/uapi/linux/ptrace.h). */
#define CALL_ENTRY 1
#define CALL_EXIT 2

/* Its op (CALL_ENTRY, CALL_EXIT), or -1: the first byte of struct ptrace_syscall_info. */
static int call_op(pid_t tid)
{
	uint8_t info[128];
	memset(info, 0, sizeof info);
	if (mon_ptrace(PTRACE_GET_SYSCALL_INFO, tid, (void *)sizeof info, info) <= 0)
		return -1;
	return info[0];
}

/*
 * Every report of a thread comes through the table's wait: a fake kernel
 * that runs the thread itself sees each stop it must count, those of the
 * monitor's injected calls too.
 */
pid_t mon_wait_injected(monitor *m, pid_t tid, int *status)
{
	pid_t r;
	if (!m->pmu_mode || !m->psys || !m->psys->wait)
		return mon_waitpid(tid, status, __WALL);
	do
		r = m->psys->wait(m->psys->ctx, tid, status, __WALL);
	while (r < 0 && errno == EINTR);
	return r;
}

pid_t mon_wait_report(monitor *m, pid_t tid, int *status, int flags)
{
	if (m->pmu_mode && m->psys && m->psys->wait)
		return m->psys->wait(m->psys->ctx, tid, status, flags);
	return mon_sys_waitpid(tid, status, flags);
}

bool pmu_wants_step(monitor *m, mon_thread *t, bool must_step)
{
	bool step = must_step || t->pmu.force_step || t->have_pending;
	for (unsigned i = 0; i < m->ptab.n; i++)
		step |= t->pmu.s[i].approaching || t->pmu.dt_wait[i];
	/*
	 * A reuse on a watched page that stays readable raises no fault: it
	 * is found by decoding, as the step clock finds it, so the thread is
	 * stepped while any exists: a lift held (a thread with SIGSEGV
	 * blocked, another inside a system call: sigstate.c, step.c), a page
	 * another thread holds lifted for its fault retry, a page the engine
	 * may not protect (TCB, rseq: step.c; one that became so after its
	 * samples started, as static glibc's TLS setup moves fs_base onto a
	 * page of .bss, missed a reuse there when only samples started on it
	 * were followed).
	 */
	return step || mprot_unfaulting_pages(&m->eng) > 0;
}

lomas_status pmu_call_stop(monitor *m, mon_thread *t, bool detaching)
{
	const pmu_sys_ops *sys = m->psys;
	struct user_regs_struct r;
	int op = call_op(t->tid);
	if (op < 0)
		return error_set(LOMAS_ETARGET, "PTRACE_GET_SYSCALL_INFO(%d): %s", (int)t->tid,
		                 strerror(errno));
	if (op == CALL_ENTRY && !t->pmu.skipping) {
		/* Detached here, the call runs under the program's own protections. */
		if (detaching)
			return LOMAS_OK;
		if (mon_ptrace(PTRACE_GETREGS, t->tid, NULL, &r) < 0)
			return error_set(LOMAS_ETARGET, "PTRACE_GETREGS(%d): %s", (int)t->tid,
			                 strerror(errno));
		t->pmu.call_regs = r;
		r.orig_rax = (uint64_t)-1;
		if (mon_ptrace(PTRACE_SETREGS, t->tid, NULL, &r) < 0)
			return error_set(LOMAS_ETARGET, "PTRACE_SETREGS(%d): %s", (int)t->tid,
			                 strerror(errno));
		t->pmu.skipping = true;
		/* On to the skipped call's exit: nothing of user mode runs, nothing is counted. */
		t->pmu.clock_step = false;
		if (sys->resume(sys->ctx, t->tid, PMU_RUN, 0) < 0)
			return error_set(LOMAS_ETARGET, "PTRACE_SYSCALL(%d): %s", (int)t->tid,
			                 strerror(errno));
		t->state = MT_RUNNING;
		return LOMAS_OK;
	}
	if (op == CALL_EXIT && t->pmu.skipping) {
		/* Back on the syscall instruction, as before the call (detaching too). */
		r = t->pmu.call_regs;
		r.rip -= 2;
		r.rax = r.orig_rax;
		r.orig_rax = (uint64_t)-1; /* nothing to restart: rax is the call's number */
		t->pmu.skipping = false;
		if (mon_ptrace(PTRACE_SETREGS, t->tid, NULL, &r) < 0)
			return error_set(LOMAS_ETARGET, "PTRACE_SETREGS(%d): %s", (int)t->tid,
			                 strerror(errno));
		m->pstats.calls++;
		if (detaching)
			return LOMAS_OK;
		t->pmu.force_step = true;
		t->have_pending = false;
		return step_resume(m, t, 0, NULL);
	}
	/* Neither (a call's exit after a step that ended in it): run on. */
	return detaching ? LOMAS_OK : step_resume(m, t, 0, NULL);
}

/*
 * A call through the vsyscall page (legacy time, gettimeofday, getcpu) is
 * emulated by the kernel on the instruction fetch, with no system call
 * stop (arch/x86/entry/vsyscall/vsyscall_64.c): a free-running thread
 * meets it with our pages protected, the emulation's write fails, and the
 * kernel sends SIGSEGV (SI_KERNEL) with rip still at the entry. While
 * samples are watched, that one is ours: the thread is stepped over the
 * entry with every page lifted (decode_next lifts for the vsyscall page as
 * for a system call); a SIGSEGV again there is the program's own.
 */
bool pmu_vsyscall_fault(monitor *m, mon_thread *t, const siginfo_t *si)
{
	struct user_regs_struct r;
	bool retry = t->pmu.vsys_retry;
	t->pmu.vsys_retry = false;
	if (si->si_code != SI_KERNEL || retry || !m->eng.table.n ||
	    mon_ptrace(PTRACE_GETREGS, t->tid, NULL, &r) < 0 || r.rip < 0xffffffffff600000ull ||
	    r.rip >= 0xffffffffff601000ull)
		return false;
	t->pmu.vsys_retry = true;
	t->pmu.force_step = true;
	t->have_pending = false;
	m->pstats.calls++;
	return true;
}

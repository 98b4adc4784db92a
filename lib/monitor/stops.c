/*
 * The step clock's handling of one report of a traced thread: a step
 * retired (or a handler was entered), a fault on a page we protected, a
 * genuine signal (delivered unchanged), a new thread, exec, exit, and job
 * control (group-stop, PTRACE_LISTEN, the stop's end); then the thread is
 * resumed with its next single-step. Detaching handles the same reports
 * without resuming anything.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "monitor.h"

static void handle_exec(monitor *m, mon_thread *t)
{
	for (size_t i = 0; i < m->threads.n; i++) {
		mon_thread *o = &m->threads.items[i];
		if (o != t) {
			if (o->state != MT_GONE)
				o->state = MT_GONE; /* exec ended every other thread */
			o->held.n = 0; /* and its signals (t's stay pending, as over exec) */
		}
		o->in_syscall = o->delivering = o->segv_lift = false;
	}
	m->segv_ignored = false;
	t->have_pending = false;
	t->fs_base = 0;
	t->rseq_addr = 0;
	mprot_forget_all(&m->eng);
	if (m->dreg_mode)
		dwatch_exec(m);
	maps_read(&m->maps, m->pid);
	decoder_invalidate(m->dec, 0, UINT64_MAX);
	m->scratch = 0;
	m->syscall_insn = 0;
	m->sync_needed = false;
	/* execve keeps the mask and the ignored signals. */
	sig_refresh_ignored(m);
	sig_guard_thread(m, t);
}

static bool is_stop_signal(int sig)
{
	return sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU;
}

/*
 * t reported its part in a group-stop: it stays stopped until SIGCONT, as
 * natively. With PTRACE_LISTEN the next report is the stop's end (an
 * EVENT_STOP with SIGTRAP), a new signal, or the thread's death. Nothing is
 * injected from a thread in this state (eng_mprotect defers): the
 * protections follow at the next resume of any thread.
 */
lomas_status step_group_stop(monitor *m, mon_thread *t, bool detaching)
{
	t->have_pending = false;
	t->fault_page = 0;
	t->group_stop = false;
	t->state = MT_LISTEN;
	step_release(m, t, true);
	m->sync_needed = true;
	if (detaching)
		return LOMAS_OK;
	if (mon_ptrace(PTRACE_LISTEN, t->tid, NULL, NULL) < 0) {
		/* Out of its stop already (a SIGKILL): wait for its death. */
		t->state = MT_STOPPED;
		return error_set(LOMAS_ETARGET, "PTRACE_LISTEN(%d): %s", (int)t->tid,
		                 strerror(errno));
	}
	return LOMAS_OK;
}

lomas_status step_begin(monitor *m)
{
	lomas_status st;
	if ((st = maps_read(&m->maps, m->pid)))
		return st;
	sig_refresh_ignored(m);
	for (size_t i = 0; i < m->threads.n; i++) {
		mon_thread *t = &m->threads.items[i];
		step_thread_init(m, t);
		if (t->state == MT_STOPPED)
			sig_guard_thread(m, t);
	}
	for (size_t i = 0; i < m->threads.n; i++) {
		mon_thread *t = &m->threads.items[i];
		if (t->state != MT_STOPPED)
			continue;
		m->cur_tid = t->tid;
		if ((st = step_resume(m, t, 0, NULL)))
			return st;
	}
	return LOMAS_OK;
}

static lomas_status handle_stop(monitor *m, mon_thread *t, int status, bool detaching);

/*
 * A thread's report: handle it and resume the thread. When that fails with
 * LOMAS_ETARGET because the thread is being killed (PTRACE_SINGLESTEP fails
 * with ESRCH on a tracee a SIGKILL is ending, and reading its memory fails
 * too), the thread is marked running again, so that the next mon_wait
 * collects its death. Left marked stopped, mon_wait passed it over: a
 * session whose only thread it was polled forever without a system call
 * while the target sat in its ptrace-stop (lomas-demo record of a target
 * killed under it hung so, once in twenty kills). It is also marked
 * suspect: should it sit in a ptrace-stop with no report to collect (the
 * request failed for another reason), mon_wait ends the session with an
 * error instead of waiting for it forever.
 */
lomas_status step_handle(monitor *m, mon_thread *t, int status, bool detaching)
{
	pid_t tid = t->tid;
	lomas_status st = handle_stop(m, t, status, detaching);
	mon_thread *u;
	if (st == LOMAS_ETARGET && !detaching && (u = mon_thread_of(m, tid)) &&
	    u->state == MT_STOPPED) {
		/* Suspect: if it sits in a ptrace-stop with no report, mon_wait gives up. */
		u->state = MT_RUNNING;
		u->suspect = true;
	}
	return st;
}

static lomas_status handle_stop(monitor *m, mon_thread *t, int status, bool detaching)
{
	pid_t tid = t->tid;
	int sig, ev;
	siginfo_t si;
	m->cur_tid = tid;
	if (WIFEXITED(status) || WIFSIGNALED(status)) {
		step_thread_gone(m, t);
		mon_reap(m, t, status);
		return LOMAS_OK;
	}
	if (!WIFSTOPPED(status))
		return LOMAS_OK;
	sig = WSTOPSIG(status);
	ev = status >> 16;
	t->state = MT_STOPPED;
	t->at_sigstop = ev == 0 && sig != (SIGTRAP | 0x80);
	switch (ev) {
	case PTRACE_EVENT_EXIT:
		/* Keep its lifts: the kernel still writes clear_child_tid while it exits. */
		t->have_pending = false;
		/* Its last counts, read while it can be (pmu_precise.c). */
		if (m->pmu_mode)
			pmu_points_end(m, t, true);
		t->state = MT_EXITING;
		/* Not let go, it would never report its death: a suspect (wait.c). */
		if (!detaching && mon_ptrace(PTRACE_CONT, tid, NULL, NULL) < 0)
			t->suspect = true;
		return LOMAS_OK;
	case PTRACE_EVENT_CLONE: {
		unsigned long nt = 0;
		mon_thread *n;
		lomas_status st = LOMAS_OK;
		if (mon_ptrace(PTRACE_GETEVENTMSG, tid, NULL, &nt) == 0 && nt) {
			if (!mon_thread_of(m, (pid_t)nt)) {
				if (mon_add_thread(m, (pid_t)nt, &n))
					return mon_fail(
					    m, error_set(LOMAS_ENOMEM,
					                 "the step clock ran out of memory"));
				step_thread_init(m, n);
			}
		} else {
			/* Unnamed, it would wait unseen in its first stop: find it. */
			st = mon_adopt_threads(m);
		}
		t = mon_thread_of(m, tid); /* the array may have moved */
		if (st)
			return mon_fail(m, st);
		return detaching ? LOMAS_OK : step_resume(m, t, 0, NULL);
	}
	case PTRACE_EVENT_EXEC:
		handle_exec(m, t);
		return detaching ? LOMAS_OK : step_resume(m, t, 0, NULL);
	case PTRACE_EVENT_STOP:
		if (is_stop_signal(sig))
			return step_group_stop(m, t, detaching);
		/* An interrupt, a new thread's first stop, or the end of a group-stop. */
		if (detaching)
			return LOMAS_OK;
		sig_guard_thread(m, t);
		return step_resume(m, t, 0, NULL);
	default: break;
	}
	/* The pmu clock runs free under PTRACE_SYSCALL: a call's entry or exit (pmu_free.c). */
	if (m->pmu_mode && sig == (SIGTRAP | 0x80))
		return pmu_call_stop(m, t, detaching);
	/*
	 * Without its siginfo a stop cannot be told apart (our step's SIGTRAP
	 * taken for the program's own would kill it): the thread is suspect.
	 */
	if (mon_ptrace(PTRACE_GETSIGINFO, tid, NULL, &si) < 0)
		return error_set(LOMAS_ETARGET, "PTRACE_GETSIGINFO(%d): %s", (int)tid,
		                 strerror(errno));
	/*
	 * A step that entered a handler stops in ptrace_notify (si_code
	 * SIGTRAP), not in a signal's delivery: a signal given there is lost.
	 */
	if (sig == SIGTRAP && si.si_code == SIGTRAP)
		t->at_sigstop = false;
	if (m->pmu_mode) {
		/* The counter's overflow is swallowed; faults and traps are noted. */
		int r = pmu_signal(m, t, sig, &si, detaching);
		if (r < 0)
			return r;
		if (r > 0)
			return LOMAS_OK;
	}
	if (m->dreg_mode) {
		/* A breakpoint's signal is swallowed: its sample ends (dwatch.c). */
		int r = dwatch_signal(m, t, sig, &si, detaching);
		if (r < 0)
			return r;
		if (r > 0)
			return LOMAS_OK;
	}
	if (sig == SIGTRAP &&
	    (si.si_code == TRAP_TRACE || si.si_code == TRAP_BRKPT || si.si_code == SIGTRAP)) {
		/* Our step report: the pending instruction retired (or a handler was entered). */
		bool retired = si.si_code != SIGTRAP && t->have_pending;
		t->segv_retry = 0;
		if (retired)
			step_commit(m, t);
		t->have_pending = false;
		t->fault_page = 0;
		step_release(m, t, true);
		return detaching ? LOMAS_OK : step_resume(m, t, 0, NULL);
	}
	if (m->pmu_mode && sig == SIGSEGV && !detaching && pmu_vsyscall_fault(m, t, &si))
		return step_resume(m, t, 0, NULL); /* the SIGSEGV was ours: dropped */
	if (sig == SIGSEGV && si.si_code > 0 && mprot_is_tracked(&m->eng, (uint64_t)si.si_addr)) {
		uint64_t addr = (uint64_t)si.si_addr;
		/*
		 * A fault on a page we watch. It is genuine only if it comes again
		 * while the page has had the program's own protection all along
		 * since the last try: held for this thread (temp_owner), which no
		 * other thread's lifts and syncs undo. Under threads the page goes
		 * in and out of PROT_NONE as others enter and leave system calls:
		 * "lifted now, so retry once" took the second of two faults of ours
		 * for the program's and killed it (t_stress, 1 run in 3).
		 */
		if (detaching) {
			/* Let go of, the instruction runs again under its own protections. */
			t->have_pending = false;
			return LOMAS_OK;
		}
		if (!(t->segv_retry == addr + 1 && mprot_held_by(&m->eng, addr, t->index))) {
			lomas_status st;
			/* Running free, nothing was decoded: the faulting instruction now. */
			if (m->pmu_mode && (st = step_decode(m, t)))
				return st;
			if (mprot_is_ours(&m->eng, addr))
				step_our_fault(m, t, addr);
			else
				mprot_hold(&m->eng, addr, t->index);
			t->segv_retry = addr + 1;
			/* Step the same instruction again, the page held lifted for it. */
			if (m->sync_needed) {
				m->sync_needed = false;
				mprot_sync(&m->eng);
			}
			/*
			 * The counter's overflow, met during the injected calls: taken
			 * now, where it came (its trap is in the counts already).
			 */
			if (m->pmu_mode && t->held.n) {
				mon_held h = t->held.items[0];
				if (pmu_take_signal(m, t, h.si.si_signo, &h.si, h.noted))
					sig_held_take(t, &h);
			}
			if (t->group_stop) /* it entered a group-stop instead (ptrace.c) */
				return step_group_stop(m, t, false);
			t->resume_epoch = m->eng.lift_events - 1; /* relaxed: reuse by decode */
			if (m->pmu_mode ? pmu_resume(m, t, 0, true) < 0
			                : mon_ptrace(PTRACE_SINGLESTEP, tid, NULL, NULL) < 0)
				return error_set(LOMAS_ETARGET, "PTRACE_SINGLESTEP(%d): %s",
				                 (int)tid, strerror(errno));
			m->stats.steps++;
			t->state = MT_RUNNING;
			return LOMAS_OK;
		}
	}
	t->segv_retry = 0;
	/* A genuine signal: the pending instruction did not run; deliver it unchanged. */
	t->have_pending = false;
	t->fault_page = 0;
	step_release(m, t, true);
	if (detaching) {
		sig_hold(m, t, &si);
		return LOMAS_OK;
	}
	return step_resume(m, t, sig, &si);
}

void step_thread_gone(monitor *m, mon_thread *t)
{
	if (t->delivering && m->eng.lift_depth > 0)
		m->eng.lift_depth--;
	if (t->in_syscall && m->eng.lift_depth > 0)
		m->eng.lift_depth--;
	t->delivering = t->in_syscall = false;
	sig_forget_thread(m, t);
	mprot_fault_forget(&m->eng, t->index);
	if (m->pmu_mode)
		pmu_thread_end(m, t);
	if (m->dreg_mode)
		dwatch_thread_end(m, t);
	t->state = MT_GONE;
	m->sync_needed = true;
}

lomas_status step_restore(monitor *m, mon_thread *t)
{
	lomas_status st;
	m->cur_tid = t->tid;
	m->eng.lift_depth = 0;
	st = mprot_restore_all(&m->eng);
	lomas_status s2 = mon_drop_scratch(m, t);
	return st ? st : s2;
}

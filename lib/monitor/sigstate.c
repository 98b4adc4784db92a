/*
 * What a fault of ours would change in the target's signal state, and the
 * lifts that keep it from happening (docs/architecture.md, the watch engines: a genuine SIGSEGV is
 * delivered unchanged).
 *
 * A fault is turned into its signal by force_sig_info_to_task() in
 * kernel/signal.c, BEFORE any tracer sees it: when SIGSEGV is blocked in the
 * faulting thread or ignored by the process, the kernel resets the
 * disposition to SIG_DFL and unblocks it, whatever the tracer then does with
 * the signal. A fault on a page we protected taken in such a state would
 * cost the program its own handler: the common case is a SIGSEGV handler
 * (without SA_NODEFER) touching a watched line, and its next genuine fault,
 * meant to be caught and recovered with siglongjmp, killed it. So while a
 * thread has SIGSEGV blocked, or the process ignores it, a lift is held: no
 * page is ours while such a thread runs, and reuse is found from the retired
 * instructions' decoded references instead (step.c, "reuse by decode").
 *
 * The mask changes only in a system call (rt_sigprocmask, rt_sigreturn,
 * sigsuspend, ppoll, ...), at a signal delivery, and at a thread's creation
 * (pthread_create blocks every signal around clone); the disposition only in
 * rt_sigaction and execve. The stepping loop sees each of those while the
 * thread still holds a lift (in_syscall, delivering), so taking the new lift
 * before dropping that one leaves no gap.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "monitor.h"

/* Is signal sig in a kernel sigset word (bit sig - 1)? */
static bool in_set(uint64_t set, int sig)
{
	return (set >> (sig - 1)) & 1;
}

static void hold(monitor *m, bool *flag, bool want)
{
	if (*flag == want)
		return;
	*flag = want;
	if (want)
		m->eng.lift_depth++;
	else if (m->eng.lift_depth > 0)
		m->eng.lift_depth--;
	/* The protections follow at the next resume (resume_step syncs first). */
	m->sync_needed = true;
}

uint64_t sig_blocked(pid_t tid)
{
	uint64_t mask = 0;
	/* PTRACE_GETSIGMASK (Linux 3.11): data is the sigset's size in bytes. */
	if (mon_ptrace(PTRACE_GETSIGMASK, tid, (void *)sizeof mask, &mask) < 0)
		mask = ~0ull; /* unknown (the thread is going away): assume the worst */
	return mask;
}

void sig_guard_thread(monitor *m, mon_thread *t)
{
	uint64_t mask = sig_blocked(t->tid);
	hold(m, &t->segv_lift, in_set(mask, SIGSEGV));
	if (m->dreg_mode)
		dwatch_mask(m, t, mask);
}

void sig_forget_thread(monitor *m, mon_thread *t)
{
	hold(m, &t->segv_lift, false);
	free(t->held.items);
	memset(&t->held, 0, sizeof t->held);
}

/* ----------------------------------------------------------- held signals */

/* Hold h first or last; a standard signal held already is merged (counted, as no memory). */
static void held_put(monitor *m, mon_thread *t, const mon_held *h, bool first)
{
	/* A standard signal pending twice is one (the kernel's sigpending bit). */
	if (h->si.si_signo < SIGRTMIN)
		for (size_t i = 0; i < t->held.n; i++)
			if (t->held.items[i].si.si_signo == h->si.si_signo) {
				m->stats.held_merged++;
				return;
			}
	if (vec_reserve(&t->held, t->held.n + 1)) {
		error_clear();
		m->stats.held_lost++;
		return;
	}
	if (first) {
		memmove(t->held.items + 1, t->held.items, t->held.n * sizeof *t->held.items);
		t->held.items[0] = *h;
	} else {
		t->held.items[t->held.n] = *h;
	}
	t->held.n++;
}

void sig_hold(monitor *m, mon_thread *t, const siginfo_t *si)
{
	mon_held h = {.si = *si};
	if (!m->pmu_mode || pmu_hold(m, t, &h))
		held_put(m, t, &h, false);
}

void sig_hold_first(monitor *m, mon_thread *t, const siginfo_t *si)
{
	held_put(m, t, &(mon_held){.si = *si}, true);
}

bool sig_held_take(mon_thread *t, mon_held *out)
{
	if (!t->held.n)
		return false;
	*out = t->held.items[0];
	t->held.n--;
	memmove(t->held.items, t->held.items + 1, t->held.n * sizeof *t->held.items);
	return true;
}

void sig_held_drop(monitor *m, mon_thread *t,
                   bool (*ours)(monitor *m, mon_thread *t, const mon_held *h))
{
	size_t w = 0;
	for (size_t i = 0; i < t->held.n; i++)
		if (!ours(m, t, &t->held.items[i]))
			t->held.items[w++] = t->held.items[i];
	t->held.n = w;
}

void sig_resend(monitor *m, mon_thread *t, const siginfo_t *si)
{
	/*
	 * A signal queued by a process (sigqueue, a timer: si_code < 0, not
	 * tkill) keeps its siginfo, value and all; the kernel's own go plain.
	 */
	if (si->si_code >= 0 || si->si_code == SI_TKILL ||
	    syscall(SYS_rt_tgsigqueueinfo, m->pid, t->tid, si->si_signo, si) < 0)
		syscall(SYS_tgkill, m->pid, t->tid, si->si_signo);
}

void sig_held_resend(monitor *m, mon_thread *t)
{
	for (size_t i = 0; i < t->held.n; i++)
		sig_resend(m, t, &t->held.items[i].si);
	t->held.n = 0;
}

void sig_refresh_ignored(monitor *m)
{
	char path[64], line[256];
	FILE *f;
	bool ign = m->segv_ignored;
	snprintf(path, sizeof path, "/proc/%d/status", (int)m->pid);
	if (!(f = fopen(path, "re")))
		return;
	while (fgets(line, sizeof line, f))
		if (!strncmp(line, "SigIgn:", 7)) {
			ign = in_set(strtoull(line + 7, NULL, 16), SIGSEGV);
			break;
		}
	fclose(f);
	hold(m, &m->segv_ignored, ign);
}

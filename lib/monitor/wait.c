/*
 * Waiting for the traced threads' reports without spinning.
 *
 * waitpid() waits for one pid or for any child, and a library may not reap
 * its caller's other children, so waiting for "any of our threads" is a
 * sweep of WNOHANG waits. Between sweeps the monitor sleeps until SIGCHLD:
 * every ptrace-stop and every exit of a tracee sends SIGCHLD to its tracer
 * (do_notify_parent_cldstop() / do_notify_parent() in kernel/signal.c)
 * unless the tracer ignores SIGCHLD or set SA_NOCLDSTOP. SIGCHLD is blocked
 * in the calling thread for the whole wait, so a report that comes between
 * a sweep and the sleep leaves SIGCHLD pending and the sleep returns at once;
 * sigtimedwait() takes it and honours the timeout. A handler of the
 * caller's that runs meanwhile (lomas-demo's SIGINT) interrupts the sleep,
 * not the wait: the caller acts on its signal when its poll's timeout ends,
 * even while the target sits in a group-stop, and no wait of ours is given
 * up half-way because the caller's handlers lack SA_RESTART.
 *
 * Where SIGCHLD cannot be relied on (ignored, SA_NOCLDSTOP, blocked by the
 * caller, or taken by another thread of the caller's: detected as a report
 * found after a sleep that timed out), the monitor sleeps in growing steps
 * (20 us to 10 ms) instead: slower to react, still not spinning.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "monitor.h"

#define SLICE_MS 100 /* longest single sleep: a lost SIGCHLD costs at most this */
#define BACKOFF_MAX_US 10000

static uint64_t mono_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

static bool waitable(const mon_thread *t)
{
	return t->state != MT_GONE && t->state != MT_STOPPED;
}

/*
 * One WNOHANG wait for each waitable thread, starting after the one that
 * reported last (a thread that is always ready must not starve the others).
 * 1 with *out and *status; 0 with *live = waitable threads left.
 */
static int sweep(monitor *m, mon_thread **out, int *status, size_t *live, bool *again)
{
	size_t n = m->threads.n;
	*live = 0;
	*again = false;
	for (size_t k = 0; k < n; k++) {
		size_t i = (m->wait_next + k) % n;
		mon_thread *t = &m->threads.items[i];
		pid_t r;
		if (!waitable(t))
			continue;
		r = mon_wait_report(m, t->tid, status, __WALL | WNOHANG);
		if (r == t->tid) {
			m->wait_next = i + 1;
			*out = t;
			return 1;
		}
		if (r < 0 && errno == ECHILD) {
			/* Gone without a report (another thread's exec ended it). */
			step_thread_gone(m, t);
			continue;
		}
		if (r < 0)
			*again = true; /* interrupted: its report may be there, look again first */
		(*live)++;
	}
	return 0;
}

static bool any_suspect(const monitor *m)
{
	for (size_t i = 0; i < m->threads.n; i++)
		if (m->threads.items[i].suspect && waitable(&m->threads.items[i]))
			return true;
	return false;
}

/* Is tid in a ptrace-stop ('t' in /proc/PID/task/TID/stat)? */
static bool in_trace_stop(pid_t pid, pid_t tid)
{
	char path[96], buf[512];
	FILE *f;
	size_t n;
	snprintf(path, sizeof path, "/proc/%d/task/%d/stat", (int)pid, (int)tid);
	if (!(f = fopen(path, "re")))
		return false;
	n = fread(buf, 1, sizeof buf - 1, f);
	fclose(f);
	buf[n] = 0;
	const char *rp = strrchr(buf, ')');
	return rp && rp[1] == ' ' && rp[2] == 't';
}

/*
 * A suspect thread (its resume failed) that sits in a ptrace-stop whose
 * report was already collected will never report again: we lost track of
 * it. The stop is seen before its report can be collected (ptrace_stop()
 * sets exit_code before the state), so a wait after seeing 't' is final.
 * 1: a report after all (*out, *status); 0: none lost; negative: the
 * session's error (the thread is marked stopped, so detaching restores and
 * lets go of it).
 */
static int check_suspects(monitor *m, mon_thread **out, int *status)
{
	for (size_t i = 0; i < m->threads.n; i++) {
		mon_thread *t = &m->threads.items[i];
		pid_t r;
		if (!t->suspect || !waitable(t) || !in_trace_stop(m->pid, t->tid))
			continue;
		r = mon_wait_report(m, t->tid, status, __WALL | WNOHANG);
		if (r == t->tid) {
			t->suspect = false;
			*out = t;
			return 1;
		}
		t->suspect = false;
		t->state = MT_STOPPED;
		return mon_fail(m, error_set(LOMAS_ETARGET,
		                             "lost track of thread %d of process %d: a request to "
		                             "resume it failed while it stayed stopped",
		                             (int)t->tid, (int)m->pid));
	}
	return 0;
}

/* How this thread can sleep until a report: by SIGCHLD, or by polling. */
typedef struct chld_wait {
	bool armed;   /* SIGCHLD blocked here by us: sleep in sigtimedwait */
	bool handler; /* the caller has a SIGCHLD handler: give it what we take */
	bool took;    /* we took a SIGCHLD */
	sigset_t old; /* the caller's mask */
} chld_wait;

/* Is a SIGCHLD pending (blocked here)? A report that came just as a sleep timed out. */
static bool chld_pending(void)
{
	sigset_t set;
	return sigpending(&set) == 0 && sigismember(&set, SIGCHLD);
}

static void chld_arm(monitor *m, chld_wait *w)
{
	struct sigaction sa;
	sigset_t set;
	memset(w, 0, sizeof *w);
	if (m->wait_poll || sigaction(SIGCHLD, NULL, &sa) < 0 || sa.sa_handler == SIG_IGN ||
	    (sa.sa_flags & SA_NOCLDSTOP))
		return;
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	if (pthread_sigmask(SIG_BLOCK, &set, &w->old))
		return;
	if (sigismember(&w->old, SIGCHLD))
		return; /* the caller waits for SIGCHLD itself (signalfd?): leave it be */
	w->armed = true;
	w->handler = sa.sa_handler != SIG_DFL;
}

static void chld_disarm(chld_wait *w)
{
	if (!w->armed)
		return;
	pthread_sigmask(SIG_SETMASK, &w->old, NULL);
	/*
	 * A SIGCHLD we took may have stood for one of the caller's own children
	 * too (standard signals do not queue): the caller's handler gets one.
	 */
	if (w->took && w->handler)
		syscall(SYS_tgkill, getpid(), (pid_t)syscall(SYS_gettid), SIGCHLD);
	w->armed = false;
}

/*
 * Sleep until a report may be there, for at most us microseconds.
 * 1: look again; 0: a signal of the caller's interrupted the sleep.
 */
static int chld_sleep(monitor *m, chld_wait *w, uint64_t us)
{
	if (w->armed) {
		sigset_t set;
		siginfo_t si;
		struct timespec ts;
		if (us > SLICE_MS * 1000u)
			us = SLICE_MS * 1000u;
		ts.tv_sec = (time_t)(us / 1000000u);
		ts.tv_nsec = (long)(us % 1000000u) * 1000;
		sigemptyset(&set);
		sigaddset(&set, SIGCHLD);
		if (sigtimedwait(&set, &si, &ts) == SIGCHLD) {
			w->took = true;
			return 1;
		}
		if (errno == EINTR)
			return 0;
		m->wait_slept = true; /* a timeout: a report found now means SIGCHLD went astray */
		return 1;
	}
	if (!m->backoff_us)
		m->backoff_us = 20;
	if (us > m->backoff_us)
		us = m->backoff_us;
	if (m->backoff_us < BACKOFF_MAX_US)
		m->backoff_us *= 2;
	struct timespec ts = {(time_t)(us / 1000000u), (long)(us % 1000000u) * 1000};
	return nanosleep(&ts, NULL) == 0 ? 1 : 0;
}

int mon_wait(monitor *m, int timeout_ms, mon_thread **out, int *status)
{
	uint64_t deadline = timeout_ms < 0 ? UINT64_MAX : mono_us() + (uint64_t)timeout_ms * 1000u;
	chld_wait w = {0};
	int ret = 0;
	for (;;) {
		size_t live;
		uint64_t now;
		bool again;
		if (sweep(m, out, status, &live, &again)) {
			if (m->wait_slept && w.armed && !chld_pending())
				m->wait_poll = true; /* slept to the timeout past a report */
			m->backoff_us = 0;
			(*out)->suspect = false;
			ret = 1;
			break;
		}
		m->wait_slept = false;
		if (live && (ret = check_suspects(m, out, status)))
			break;
		if (!live || !timeout_ms)
			break;
		if (again)
			continue;
		if (live == 1 && timeout_ms < 0 && !w.armed && !any_suspect(m)) {
			/* One thread and no deadline: block in waitpid itself. */
			mon_thread *only = NULL;
			for (size_t i = 0; i < m->threads.n && !only; i++)
				if (waitable(&m->threads.items[i]))
					only = &m->threads.items[i];
			pid_t r = mon_wait_report(m, only->tid, status, __WALL);
			if (r == only->tid) {
				*out = only;
				ret = 1;
			} else if (errno == ECHILD) {
				step_thread_gone(m, only);
				continue;
			} else if (errno != EINTR) {
				ret = error_set(LOMAS_ETARGET, "waitpid(%d): %s", (int)only->tid,
				                strerror(errno));
			}
			break;
		}
		now = mono_us();
		if (now >= deadline)
			break;
		if (!w.armed && !m->wait_poll) {
			chld_arm(m, &w);
			if (w.armed)
				continue; /* sweep again with SIGCHLD blocked: none can be lost now
				           */
		}
		/* A suspect is looked at again soon; a signal of the caller's changes nothing. */
		chld_sleep(m, &w,
		           any_suspect(m) && deadline - now > 50000 ? 50000 : deadline - now);
	}
	chld_disarm(&w);
	return ret;
}

int mon_wait_tid(monitor *m, pid_t tid, int timeout_ms, int *status)
{
	uint64_t deadline = timeout_ms < 0 ? UINT64_MAX : mono_us() + (uint64_t)timeout_ms * 1000u;
	chld_wait w = {0};
	int ret = 0;
	chld_arm(m, &w);
	for (;;) {
		/*
		 * Through the pmu clock's table, as every other report: a fake
		 * kernel that runs a thread itself must see the stops it made
		 * (taken here, its thread would later run on unseen).
		 */
		pid_t r = mon_wait_report(m, tid, status, __WALL | WNOHANG);
		uint64_t now;
		if (r == tid) {
			ret = 1;
			break;
		}
		if (r < 0 && errno == ECHILD) {
			ret = -1; /* gone without a report */
			break;
		}
		now = mono_us();
		if (now >= deadline)
			break;
		chld_sleep(m, &w, deadline - now);
	}
	m->backoff_us = 0;
	chld_disarm(&w);
	return ret;
}

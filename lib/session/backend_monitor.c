/*
 * Session backend of the monitor: the step clock behind the session_ops of
 * session.c (spawn or attach, poll, stop = detach, stats, profile, free).
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "monitor/monitor.h"
#include "session.h"

static uint64_t mono_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static lomas_status mb_poll(void *impl, int timeout_ms, bool *running)
{
	monitor *m = impl;
	uint64_t deadline = timeout_ms < 0 ? UINT64_MAX : mono_ms() + (uint64_t)timeout_ms;
	unsigned handled = 0;
	if (m->error)
		return error_set(m->error, "%s", m->errmsg);
	*running = !(m->ended || m->detached);
	while (*running) {
		mon_thread *t = NULL;
		int status = 0, r;
		uint64_t now = mono_ms();
		int left = timeout_ms < 0 ? -1 : now >= deadline ? 0 : (int)(deadline - now);
		r = mon_wait(m, left, &t, &status);
		if (r < 0) {
			mon_fail(m, r);
			return r;
		}
		if (r == 0) {
			if (!mon_live_threads(m) && !m->ended) {
				/* Every thread vanished without a leader report. */
				m->ended = true;
			}
			*running = !m->ended;
			/* A timeout, or a signal handler of the caller's ran: let it look. */
			if (timeout_ms >= 0 || !*running || !left)
				break;
			continue;
		}
		if ((r = step_handle(m, t, status, false)) && r != LOMAS_ETARGET)
			mon_fail(m, r);
		error_clear();
		if (m->error)
			return error_set(m->error, "%s", m->errmsg);
		*running = !m->ended;
		/* Do not starve the caller: look at the clock now and then. */
		if (timeout_ms >= 0 && (++handled & 255) == 0 && mono_ms() >= deadline)
			break;
	}
	return LOMAS_OK;
}

/* Is SIGTRAP pending for tid (a step report not yet collected)? */
static bool sigtrap_pending(pid_t pid, pid_t tid)
{
	char path[96], line[256];
	FILE *f;
	bool pend = false;
	snprintf(path, sizeof path, "/proc/%d/task/%d/status", (int)pid, (int)tid);
	f = fopen(path, "re");
	if (!f)
		return false;
	while (fgets(line, sizeof line, f)) {
		if (!strncmp(line, "SigPnd:", 7)) {
			unsigned long long mask = strtoull(line + 7, NULL, 16);
			pend = (mask >> (SIGTRAP - 1)) & 1;
			break;
		}
	}
	fclose(f);
	return pend;
}

/* How long detaching waits for one thread's report before it gives up on it. */
#define DETACH_WAIT_MS 2000

/*
 * Bring t to a ptrace-stop, handling what it reports on the way (detaching:
 * nothing is resumed). false if it did not stop in time (it cannot be
 * restored from, nor detached cleanly).
 */
static bool stop_one(monitor *m, size_t i)
{
	mon_thread *t = &m->threads.items[i];
	pid_t tid = t->tid;
	bool interrupted = false;
	int status;
	if (t->state == MT_EXITING) {
		/* Running to its death: collect it if it is quick, else leave it. */
		if (mon_wait_tid(m, tid, 50, &status) == 1)
			step_handle(m, t, status, true);
		return true;
	}
	if (t->state == MT_LISTEN) {
		/* In a group-stop, listening: interrupting it reports an EVENT_STOP. */
		mon_ptrace(PTRACE_INTERRUPT, tid, NULL, NULL);
		interrupted = true;
		t->state = MT_RUNNING;
	} else if (mon_wait_tid(m, tid, 20, &status) == 1) {
		/* A step report is usually a few microseconds away. */
		step_handle(m, t, status, true);
	}
	for (;;) {
		t = &m->threads.items[i];
		if (t->state == MT_GONE || t->state == MT_STOPPED || t->state == MT_EXITING)
			return true;
		if (t->state == MT_LISTEN) {
			/* Reported its group-stop: stopped there, and stays so after detach. */
			t->state = MT_STOPPED;
			return true;
		}
		if (!interrupted) {
			/* In a blocking call: PTRACE_INTERRUPT ends it in an EVENT_STOP. */
			mon_ptrace(PTRACE_INTERRUPT, tid, NULL, NULL);
			interrupted = true;
		}
		int r = mon_wait_tid(m, tid, DETACH_WAIT_MS, &status);
		if (r < 0) {
			step_thread_gone(m, t); /* ECHILD: gone without a report */
			return true;
		}
		if (r == 0)
			return false;
		if (WIFSTOPPED(status) && (status >> 16) == PTRACE_EVENT_STOP &&
		    WSTOPSIG(status) == SIGTRAP) {
			/* Our interrupt. */
			t->state = MT_STOPPED;
			return true;
		}
		step_handle(m, t, status, true);
	}
}

lomas_status mon_detach(monitor *m)
{
	mon_thread *host = NULL;
	lomas_status st = LOMAS_OK;
	size_t lost = 0;
	if (m->ended || m->detached)
		return LOMAS_OK;
	/* 1. Bring every thread to a ptrace-stop, handling what it reports on the way. */
	for (size_t i = 0; i < m->threads.n; i++) {
		mon_thread *t = &m->threads.items[i];
		if (t->state == MT_GONE || t->state == MT_STOPPED)
			continue;
		if (!stop_one(m, i))
			lost++;
	}
	if (m->ended) {
		m->detached = true;
		return LOMAS_OK;
	}
	if (m->pmu_mode)
		pmu_detach(m);
	else if (m->dreg_mode)
		dwatch_detach(m);
	/* 2. A step report may still be queued behind an interrupt: collect it. */
	for (size_t i = 0; i < m->threads.n; i++) {
		mon_thread *t = &m->threads.items[i];
		int status;
		if (t->state != MT_STOPPED || !sigtrap_pending(m->pid, t->tid))
			continue;
		if (mon_ptrace(PTRACE_CONT, t->tid, NULL, NULL) < 0 ||
		    mon_wait_tid(m, t->tid, DETACH_WAIT_MS, &status) != 1)
			continue;
		siginfo_t si;
		if (WIFEXITED(status) || WIFSIGNALED(status)) {
			step_thread_gone(m, t);
			mon_reap(m, t, status);
			continue;
		}
		if ((status >> 16) != 0)
			continue;
		if (mon_ptrace(PTRACE_GETSIGINFO, t->tid, NULL, &si) < 0) {
			/* A SIGTRAP here is our step's (resent, it would kill the program). */
			if (WSTOPSIG(status) == SIGTRAP)
				continue;
			memset(&si, 0, sizeof si);
			si.si_signo = WSTOPSIG(status);
		}
		if (si.si_signo == SIGTRAP && si.si_code > 0 && si.si_code != 0x80)
			continue; /* ours: swallowed */
		sig_hold(m, t, &si);
	}
	/*
	 * 3. Give every page its protection back and unmap our page, from a
	 * stopped thread (a second one if a call fails in the first).
	 */
	for (int attempt = 0; attempt < 2; attempt++) {
		host = NULL;
		for (size_t i = 0; i < m->threads.n; i++)
			if (m->threads.items[i].state == MT_STOPPED) {
				host = &m->threads.items[i];
				if (attempt == 0 || host->tid != m->cur_tid)
					break;
			}
		if (!host)
			break;
		if (!(st = step_restore(m, host)))
			break;
	}
	if (!host && (mprot_protected_pages(&m->eng) || m->scratch))
		st = error_set(LOMAS_ETARGET, "no stopped thread to restore page protections from");
	if (!st && lost)
		st = error_set(LOMAS_ETARGET, "%zu thread(s) of %d did not stop to be detached",
		               lost, (int)m->pid);
	/* 4. Let go; signals caught on the way are delivered again. */
	for (size_t i = 0; i < m->threads.n; i++) {
		mon_thread *t = &m->threads.items[i];
		if (t->state == MT_GONE)
			continue;
		if (mon_ptrace(PTRACE_DETACH, t->tid, NULL, NULL) < 0 &&
		    mon_ptrace(PTRACE_DETACH, t->tid, NULL, NULL) < 0 && errno != ESRCH && !st)
			st = error_set(LOMAS_ETARGET, "PTRACE_DETACH(%d): %s", (int)t->tid,
			               strerror(errno));
		sig_held_resend(m, t);
		t->state = MT_GONE;
	}
	m->detached = true;
	return st;
}

static lomas_status mb_stop(void *impl)
{
	return mon_detach(impl);
}

static lomas_status mb_stats(void *impl, lomas_stats *out)
{
	monitor *m = impl;
	memset(out, 0, sizeof *out);
	for (size_t i = 0; i < m->threads.n; i++)
		out->refs += m->threads.items[i].clock;
	out->samples = m->samples.n;
	for (size_t i = 0; i < m->samples.n; i++) {
		out->reused += m->samples.items[i].state == LOMAS_SAMPLE_REUSED;
		out->censored += m->samples.items[i].state == LOMAS_SAMPLE_CENSORED;
	}
	out->faults = m->dreg_mode ? m->dreg.stats.fired : m->eng.stats.faults;
	out->false_positives = m->eng.stats.false_positives; /* debugreg: none, by design */
	out->reprotects = m->eng.stats.reprotects;
	out->steps = m->stats.steps;
	out->injected_syscalls = m->stats.injected;
	out->signals_forwarded = m->stats.signals;
	out->threads = m->stats.threads;
	return LOMAS_OK;
}

static lomas_status mb_profile(void *impl, lomas_profile **out)
{
	return step_profile(impl, out);
}

static int mb_wait_status(void *impl)
{
	return ((monitor *)impl)->exit_status;
}

static void mb_free(void *impl)
{
	monitor *m = impl;
	if (!m)
		return;
	if (m->pid > 0 && !m->ended && !m->detached)
		mon_detach(m);
	if (m->pmu_mode)
		pmu_clock_free(m);
	step_free(m);
	maps_free(&m->maps);
	for (size_t i = 0; i < m->threads.n; i++)
		free(m->threads.items[i].held.items);
	free(m->threads.items);
	free(m->command);
	free(m);
}

static const session_ops monitor_ops = {
    .name = "step",
    .poll = mb_poll,
    .stop = mb_stop,
    .stats = mb_stats,
    .profile = mb_profile,
    .wait_status = mb_wait_status,
    .free = mb_free,
};

/* The same backend running the pmu clock. */
static const session_ops pmu_ops = {
    .name = "pmu",
    .poll = mb_poll,
    .stop = mb_stop,
    .stats = mb_stats,
    .profile = mb_profile,
    .wait_status = mb_wait_status,
    .free = mb_free,
};

static char *join_argv(char *const argv[])
{
	size_t n = 1;
	char *s, *p;
	for (size_t i = 0; argv[i]; i++)
		n += strlen(argv[i]) + 1;
	s = p = malloc(n);
	if (!s)
		return NULL;
	*s = 0;
	for (size_t i = 0; argv[i]; i++)
		p += sprintf(p, "%s%s", i ? " " : "", argv[i]);
	return s;
}

static lomas_status new_monitor(const struct lomas_config *cfg, monitor **out)
{
	monitor *m = calloc(1, sizeof *m);
	lomas_status st;
	if (!m)
		return error_set(LOMAS_ENOMEM, "out of memory");
	if (cfg->clock != CLOCK_STEP && cfg->clock != CLOCK_AUTO && cfg->clock != CLOCK_PMU) {
		free(m);
		return error_set(LOMAS_ENOTSUP, "the monitor runs only the step and pmu clocks");
	}
	if ((st = step_init(m, cfg)) ||
	    (cfg->clock == CLOCK_PMU && (st = pmu_clock_init(m, cfg)))) {
		step_free(m);
		free(m);
		return st;
	}
	*out = m;
	return LOMAS_OK;
}

/* The pmu clock's calibration, in the first stopped thread, before anything runs. */
static lomas_status pmu_begin(monitor *m)
{
	if (!m->pmu_mode || !m->cfg.pmu_calibrate)
		return LOMAS_OK;
	for (size_t i = 0; i < m->threads.n; i++) {
		mon_thread *t = &m->threads.items[i];
		int status;
		if (t->state != MT_STOPPED)
			continue;
		/*
		 * A spawned target is in its exec stop, inside execve: the call's
		 * return value (0) is stored into rax after this stop, over an
		 * injected call's number (do_syscall_64). Its syscall-exit-stop
		 * comes next under PTRACE_SYSCALL (ptrace(2)), and from there on
		 * registers set are the ones user mode gets.
		 */
		if (m->spawned && (mon_ptrace(PTRACE_SYSCALL, t->tid, NULL, NULL) < 0 ||
		                   mon_waitpid(t->tid, &status, __WALL) != t->tid ||
		                   !WIFSTOPPED(status) || WSTOPSIG(status) != (SIGTRAP | 0x80)))
			return error_set(LOMAS_ETARGET, "the target did not finish its exec");
		return pmu_calibrate(m, t);
	}
	return error_set(LOMAS_ETARGET, "no stopped thread to calibrate the counters in");
}

lomas_status monitor_backend_start(const struct lomas_config *cfg, const char *program_path,
                                   char *const argv[], const session_ops **ops, void **impl)
{
	monitor *m = NULL;
	lomas_status st;
	if ((st = new_monitor(cfg, &m)))
		return st;
	m->command = join_argv(argv);
	if ((st = mon_spawn(m, program_path, argv)) || (st = pmu_begin(m)) ||
	    (st = step_begin(m)) || (m->error && (st = error_set(m->error, "%s", m->errmsg)))) {
		if (m->pid > 0 && !m->ended)
			mon_kill_reap(m->pid);
		m->ended = true;
		mb_free(m);
		return st;
	}
	*ops = m->pmu_mode ? &pmu_ops : &monitor_ops;
	*impl = m;
	return LOMAS_OK;
}

lomas_status monitor_backend_attach(const struct lomas_config *cfg, int pid,
                                    const session_ops **ops, void **impl)
{
	monitor *m = NULL;
	lomas_status st;
	char path[64], buf[4096];
	FILE *f;
	if ((st = new_monitor(cfg, &m)))
		return st;
	snprintf(path, sizeof path, "/proc/%d/cmdline", pid);
	if ((f = fopen(path, "re"))) {
		size_t n = fread(buf, 1, sizeof buf - 1, f);
		fclose(f);
		for (size_t i = 0; i + 1 < n; i++)
			if (!buf[i])
				buf[i] = ' ';
		buf[n] = 0;
		m->command = strdup(buf);
	}
	if ((st = mon_attach(m, pid)) || (st = pmu_begin(m)) || (st = step_begin(m)) ||
	    (m->error && (st = error_set(m->error, "%s", m->errmsg)))) {
		lomas_status keep = st;
		char msg[512];
		snprintf(msg, sizeof msg, "%s", lomas_error_message());
		mon_detach(m);
		mb_free(m);
		return error_set(keep, "%s", msg);
	}
	*ops = m->pmu_mode ? &pmu_ops : &monitor_ops;
	*impl = m;
	return LOMAS_OK;
}

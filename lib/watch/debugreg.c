/*
 * The debug-register watch engine (docs/architecture.md, "The debug-register engine"): x86 data
 * breakpoints as perf hardware breakpoints, one per debug register (DR0-DR3) of a target thread.
 * Unlike the mprotect engine it needs nothing injected into the target and has no false positives:
 * a breakpoint fires only on an access to its own 8 bytes. Its granularity is therefore the word,
 * not the line.
 *
 * Kernel behaviour this depends on (arch/x86/kernel/hw_breakpoint.c,
 * kernel/events/core.c):
 * - a data breakpoint traps AFTER the accessing instruction retired
 *   (trap-like #DB); the perf handler counts it and clears its DR6 bit, so
 *   no SIGTRAP reaches the thread, and a single-step in the same #DB still
 *   reports TRAP_TRACE;
 * - with sample_period 1 every hit is an overflow; F_SETOWN_EX/F_SETSIG/
 *   O_ASYNC send F_SETSIG's signal (si_code POLL_IN, si_fd) to the owner
 *   thread before it next returns to user mode;
 * - exclude_kernel: the kernel's own accesses to the word (copy_to_user in
 *   a system call, a signal frame) do not count, as the decoded clock does
 *   not count them either;
 * - PERF_EVENT_IOC_MODIFY_ATTRIBUTES (Linux 4.17) moves a breakpoint in
 *   place (perf_event_modify_breakpoint()), keeping its count; where it is
 *   refused the slot is closed and opened again.
 * The counter, not the signal, says whether a slot fired: its value is
 * recorded when armed, so a signal that comes after the slot was taken for
 * another sample is recognised as stale.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/hw_breakpoint.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "watch.h"

#ifndef PERF_EVENT_IOC_MODIFY_ATTRIBUTES
#define PERF_EVENT_IOC_MODIFY_ATTRIBUTES _IOW('$', 11, struct perf_event_attr *)
#endif

static void bp_attr(struct perf_event_attr *a, uint64_t word, bool disabled)
{
	memset(a, 0, sizeof *a);
	a->type = PERF_TYPE_BREAKPOINT;
	a->size = sizeof *a;
	a->bp_type = HW_BREAKPOINT_RW;
	a->bp_addr = word;
	a->bp_len = HW_BREAKPOINT_LEN_8;
	a->sample_period = 1;
	a->wakeup_events = 1;
	a->exclude_kernel = 1;
	a->exclude_hv = 1;
	a->disabled = disabled;
}

static int bp_open(uint64_t word, int tid)
{
	struct perf_event_attr a;
	long fd;
	bp_attr(&a, word, false);
	fd = syscall(SYS_perf_event_open, &a, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
	return fd < 0 ? -errno : (int)fd;
}

static int paranoid(void)
{
	FILE *f = fopen("/proc/sys/kernel/perf_event_paranoid", "re");
	int v = -100;
	if (f) {
		if (fscanf(f, "%d", &v) != 1)
			v = -100;
		fclose(f);
	}
	return v;
}

static volatile uint64_t probe_word;

/*
 * Whether this thread can have hardware breakpoints: one that opens must
 * also fire. Under some hypervisors (seen: PVM on an AMD EPYC host,
 * 2026-11-29) perf_event_open of a breakpoint succeeds and the event never
 * counts, so a watch engine built on it would miss every reuse silently.
 */
lomas_status dreg_probe(void)
{
	int fd = bp_open((uint64_t)&probe_word, 0), p;
	if (fd >= 0) {
		uint64_t count = 0;
		ssize_t got;
		for (int i = 0; i < 4; i++)
			probe_word += (uint64_t)i;
		got = read(fd, &count, sizeof count);
		close(fd);
		if (got == (ssize_t)sizeof count && count == 0)
			return error_set(
			    LOMAS_ENOTSUP,
			    "perf hardware breakpoints open on this machine but never "
			    "fire (a hypervisor that does not pass the debug registers "
			    "through): use --watch mprotect");
		return LOMAS_OK;
	}
	if (fd == -EACCES || fd == -EPERM) {
		p = paranoid();
		return error_set(
		    LOMAS_ENOTSUP,
		    "perf hardware breakpoints are not permitted "
		    "(kernel.perf_event_paranoid = %d; lower it or grant CAP_PERFMON): "
		    "use --watch mprotect",
		    p);
	}
	return error_set(LOMAS_ENOTSUP,
	                 "this kernel or machine has no perf hardware breakpoints "
	                 "(perf_event_open PERF_TYPE_BREAKPOINT: %s): use --watch mprotect",
	                 strerror(-fd));
}

bool dreg_cpu_has_bpext(void)
{
	/* CPUID 0x80000001 ECX bit 26 (BPEXT), shown as "bpext" in /proc/cpuinfo. */
	FILE *f = fopen("/proc/cpuinfo", "re");
	char line[4096];
	bool has = false;
	if (!f)
		return false;
	while (!has && fgets(line, sizeof line, f))
		if (!strncmp(line, "flags", 5))
			has = strstr(line, " bpext") != NULL;
	fclose(f);
	return has;
}

void dreg_init(dreg_engine *e, int sig)
{
	memset(e, 0, sizeof *e);
	e->sig = sig;
}

void dreg_thread_init(dreg_thread *t, int tid)
{
	memset(t, 0, sizeof *t);
	t->tid = tid;
	for (unsigned i = 0; i < DREG_SLOTS; i++)
		t->s[i].fd = -1;
}

static uint64_t count_of(int fd)
{
	uint64_t c = 0;
	if (read(fd, &c, sizeof c) != (ssize_t)sizeof c)
		return 0;
	return c;
}

/* Route fd's overflow to t as e->sig (or not, while t blocks it). */
static int route(const dreg_engine *e, const dreg_thread *t, int fd)
{
	struct f_owner_ex own = {.type = F_OWNER_TID, .pid = t->tid};
	if (fcntl(fd, F_SETOWN_EX, &own) < 0 || fcntl(fd, F_SETSIG, e->sig) < 0 ||
	    fcntl(fd, F_SETFL, (t->quiet ? 0 : O_ASYNC) | O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

/* Point slot s of t at word, enabled: 0 or -errno. */
static int point(dreg_engine *e, dreg_thread *t, dreg_slot *s, uint64_t word)
{
	struct perf_event_attr a;
	int fd, r;
	if (s->fd >= 0 && !e->no_modify) {
		bp_attr(&a, word, false);
		if (ioctl(s->fd, PERF_EVENT_IOC_MODIFY_ATTRIBUTES, &a) == 0) {
			e->stats.modifies++;
			return 0;
		}
		if (errno != ENOTTY && errno != EINVAL && errno != EOPNOTSUPP)
			return -errno;
		e->no_modify = true; /* before Linux 4.17: close and open */
	}
	if (s->fd >= 0) {
		close(s->fd);
		s->fd = -1;
		e->stats.reopens++;
	}
	e->stats.opens++;
	if ((fd = bp_open(word, t->tid)) < 0)
		return fd;
	if ((r = route(e, t, fd)) < 0) {
		close(fd);
		return r;
	}
	s->fd = fd;
	if (fd < DREG_FD_BITS)
		e->fds[fd / 64] |= 1ull << (fd % 64);
	return 0;
}

lomas_status dreg_arm(dreg_engine *e, dreg_thread *t, uint64_t addr, uint64_t sample,
                      dreg_slot *evicted, bool *did_evict, bool *evicted_fired)
{
	dreg_slot *s = NULL;
	uint64_t word = addr & ~(uint64_t)(DREG_WORD - 1);
	int r;
	*did_evict = *evicted_fired = false;
	for (unsigned i = 0; i < DREG_SLOTS && !s; i++)
		if (!t->s[i].armed)
			s = &t->s[i];
	if (!s) {
		/* Four armed: the oldest gives way (censored, or reused if it fired). */
		unsigned old = 0;
		for (unsigned i = 1; i < DREG_SLOTS; i++)
			if (t->s[i].seq < t->s[old].seq)
				old = i;
		s = &t->s[old];
		*evicted = *s;
		*did_evict = true;
		*evicted_fired = dreg_fired(e, t, old);
		s->armed = false;
		e->stats.evictions++;
	}
	if ((r = point(e, t, s, word)) < 0) {
		e->stats.refused++;
		if (s->fd >= 0)
			ioctl(s->fd, PERF_EVENT_IOC_DISABLE, 0);
		return error_set(LOMAS_ENOTSUP, "no data breakpoint for thread %d: %s", t->tid,
		                 strerror(-r));
	}
	s->armed = true;
	s->word = word;
	s->sample = sample;
	s->seq = ++e->seq;
	s->base = count_of(s->fd);
	e->stats.arms++;
	return LOMAS_OK;
}

void dreg_disarm(dreg_engine *e, dreg_thread *t, unsigned i)
{
	dreg_slot *s = &t->s[i];
	(void)e;
	if (!s->armed)
		return;
	s->armed = false;
	/* Disabled, it holds no debug register and sends nothing until pointed again. */
	if (s->fd >= 0)
		ioctl(s->fd, PERF_EVENT_IOC_DISABLE, 0);
}

int dreg_slot_of_fd(const dreg_thread *t, int fd)
{
	for (unsigned i = 0; i < DREG_SLOTS; i++)
		if (t->s[i].fd >= 0 && t->s[i].fd == fd)
			return (int)i;
	return -1;
}

bool dreg_fired(dreg_engine *e, dreg_thread *t, unsigned i)
{
	dreg_slot *s = &t->s[i];
	uint64_t c;
	if (!s->armed || s->fd < 0)
		return false;
	c = count_of(s->fd);
	if (c <= s->base)
		return false;
	s->base = c;
	e->stats.fired++;
	return true;
}

int dreg_signal_slot(const dreg_engine *e, const dreg_thread *t, int sig, const siginfo_t *si)
{
	/* perf_event_wakeup() -> kill_fasync(..., SIGIO, POLL_IN); F_SETSIG fills si_fd. */
	int i;
	if (sig != e->sig || si->si_code != POLL_IN)
		return -1;
	if ((i = dreg_slot_of_fd(t, si->si_fd)) >= 0)
		return i;
	if (si->si_fd >= 0 && si->si_fd < DREG_FD_BITS &&
	    (e->fds[si->si_fd / 64] >> (si->si_fd % 64) & 1))
		return -2;
	return -1;
}

void dreg_set_quiet(dreg_engine *e, dreg_thread *t, bool quiet)
{
	if (t->quiet == quiet)
		return;
	t->quiet = quiet;
	for (unsigned i = 0; i < DREG_SLOTS; i++)
		if (t->s[i].fd >= 0)
			route(e, t, t->s[i].fd);
}

void dreg_thread_close(dreg_thread *t)
{
	for (unsigned i = 0; i < DREG_SLOTS; i++) {
		if (t->s[i].fd >= 0)
			close(t->s[i].fd);
		t->s[i].fd = -1;
		t->s[i].armed = false;
	}
}

unsigned dreg_armed(const dreg_thread *t)
{
	unsigned n = 0;
	for (unsigned i = 0; i < DREG_SLOTS; i++)
		n += t->s[i].armed;
	return n;
}

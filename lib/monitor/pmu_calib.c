/*
 * Counter compensation, calibrated (docs/architecture.md, the clocks, issue 20 item 4): before the
 * target runs, a known instruction sequence is run in its first thread
 * under counting-only copies of its events, four times, each time adding
 * one kind of event the monitor causes:
 *   1. run to an int3 ............................ + 1 trap
 *   2. single-step the same sequence ............. + 1 step per instruction
 *   3. an injected getpid ......................... + 1 system call
 *   4. a load from a page mapped PROT_NONE, which faults, is given read
 *      access by an injected mprotect and retires  + 1 page fault
 * Each time the excess of the counter over the sequence's references,
 * less what the kinds measured before account for, is what one event of the
 * new kind adds (ledger_calibrate). The ledgers of every thread subtract it
 * from then on; the profile's CALIB section keeps it.
 *
 * The sequence runs from our scratch page (written through ptrace) on the
 * thread's stack below its red zone; its registers are put back after.
 */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "monitor.h"

#define SEQ_OFF 64    /* sub rsp, 256; push rax x K; pop rax x K; int3 */
#define FAULT_OFF 256 /* movabs rax, [page]; int3 */
#define SEQ_PUSHES 16

typedef struct calib {
	monitor *m;
	mon_thread *t;
	int fd[PMU_MAX_EVENTS];
	uint64_t raw0[PMU_MAX_EVENTS];
	uint64_t expected[PMU_MAX_EVENTS];
	uint64_t injected;
	ledger led[PMU_MAX_EVENTS];
} calib;

/* Write len bytes at addr in the target (whole words, read-modify-write). */
static lomas_status poke(monitor *m, pid_t tid, uint64_t addr, const uint8_t *b, size_t len)
{
	for (size_t off = 0; off < len; off += 8) {
		long word;
		errno = 0;
		word = mon_ptrace(PTRACE_PEEKTEXT, tid, (void *)(addr + off), NULL);
		if (errno)
			return error_set(LOMAS_ETARGET, "calibration: cannot read our page");
		memcpy(&word, b + off, len - off < 8 ? len - off : 8);
		if (mon_ptrace(PTRACE_POKETEXT, tid, (void *)(addr + off), (void *)word) < 0)
			return error_set(LOMAS_ETARGET, "calibration: cannot write our page");
	}
	decoder_invalidate(m->dec, addr, addr + len);
	return LOMAS_OK;
}

static void note_all(calib *c, ledger_kind k)
{
	for (unsigned i = 0; i < c->m->ptab.n; i++)
		ledger_note(&c->led[i], k, 1);
}

/*
 * Run (PMU_RUN) or step (PMU_STEP, up to stop_at) the thread from its rip
 * until a stop other than a step report; *si gets it. Reports are
 * collected through the function table, as the clock's are (a fake kernel
 * counts what retires as it runs the thread).
 */
static lomas_status run(calib *c, int how, uint64_t stop_at, siginfo_t *si)
{
	monitor *m = c->m;
	mon_thread *t = c->t;
	const pmu_sys_ops *sys = m->psys;
	for (int n = 0; n < 4 * SEQ_PUSHES + 16; n++) {
		struct user_regs_struct r;
		int status;
		if (mon_ptrace(PTRACE_GETREGS, t->tid, NULL, &r) < 0)
			return error_set(LOMAS_ETARGET, "calibration: PTRACE_GETREGS: %s",
			                 strerror(errno));
		if (how == PMU_STEP && r.rip == stop_at)
			return LOMAS_OK;
		if (how == PMU_STEP)
			note_all(c, LEDGER_STEP);
		if (sys->resume(sys->ctx, t->tid, how, 0) < 0 ||
		    sys->wait(sys->ctx, t->tid, &status, __WALL) != t->tid)
			return error_set(LOMAS_ETARGET, "calibration: cannot run thread %d",
			                 (int)t->tid);
		if (!WIFSTOPPED(status) || (status >> 16) != 0 ||
		    mon_ptrace(PTRACE_GETSIGINFO, t->tid, NULL, si) < 0)
			return error_set(LOMAS_ETARGET,
			                 "calibration: thread %d stopped unexpectedly (status %#x)",
			                 (int)t->tid, status);
		if (WSTOPSIG(status) == SIGTRAP && si->si_code == TRAP_TRACE)
			continue;
		return LOMAS_OK;
	}
	return error_set(LOMAS_ETARGET, "calibration: the sequence did not end");
}

/* Read the counters and calibrate kind k from what they show. */
static lomas_status measure(calib *c, ledger_kind k)
{
	const pmu_sys_ops *sys = c->m->psys;
	uint64_t inj = mon_injected_into(c->t->tid);
	for (unsigned i = 0; i < c->m->ptab.n; i++) {
		uint64_t raw = 0;
		lomas_status st;
		if (inj > c->injected)
			ledger_note(&c->led[i], LEDGER_SYSCALL, inj - c->injected);
		if (sys->read(sys->ctx, c->fd[i], &raw, sizeof raw) != (ssize_t)sizeof raw)
			return error_set(LOMAS_ETARGET, "calibration: cannot read the counter");
		if ((st = ledger_calibrate(&c->led[i], k, c->expected[i], raw - c->raw0[i],
		                           c->led[i].events[k])))
			return st;
	}
	c->injected = inj;
	return LOMAS_OK;
}

/* The references of the sequence (k loads, k stores) that stream i counts. */
static void expect(calib *c, uint64_t loads, uint64_t stores)
{
	for (unsigned i = 0; i < c->m->ptab.n; i++) {
		unsigned kinds = c->m->ptab.ev[i].kinds;
		c->expected[i] +=
		    (kinds & PMU_KIND_LOADS ? loads : 0) + (kinds & PMU_KIND_STORES ? stores : 0);
	}
}

static lomas_status set_rip(mon_thread *t, const struct user_regs_struct *saved, uint64_t rip)
{
	struct user_regs_struct r = *saved;
	r.rip = rip;
	r.orig_rax = (uint64_t)-1; /* no system call to restart */
	if (mon_ptrace(PTRACE_SETREGS, t->tid, NULL, &r) < 0)
		return error_set(LOMAS_ETARGET, "calibration: PTRACE_SETREGS: %s", strerror(errno));
	return LOMAS_OK;
}

static lomas_status phases(calib *c, const struct user_regs_struct *saved)
{
	monitor *m = c->m;
	mon_thread *t = c->t;
	uint64_t seq = m->scratch + SEQ_OFF, fseq = m->scratch + FAULT_OFF, page = 0;
	uint64_t end = seq + 7 + 2 * SEQ_PUSHES;
	uint64_t a[6] = {0};
	uint8_t code[7 + 2 * SEQ_PUSHES + 1] = {0x48, 0x81, 0xec, 0x00, 0x01, 0x00, 0x00};
	uint8_t fcode[11] = {0x48, 0xa1};
	siginfo_t si;
	lomas_status st;
	long ret = 0;
	memset(code + 7, 0x50, SEQ_PUSHES);
	memset(code + 7 + SEQ_PUSHES, 0x58, SEQ_PUSHES);
	code[sizeof code - 1] = 0xcc;
	if ((st = poke(m, t->tid, seq, code, sizeof code)))
		return st;
	/* 1. A trap. */
	if ((st = set_rip(t, saved, seq)) || (st = run(c, PMU_RUN, 0, &si)))
		return st;
	if (si.si_signo != SIGTRAP || si.si_code != SI_KERNEL)
		return error_set(LOMAS_ETARGET, "calibration: signal %d instead of the trap",
		                 si.si_signo);
	note_all(c, LEDGER_TRAP);
	expect(c, SEQ_PUSHES, SEQ_PUSHES);
	if ((st = measure(c, LEDGER_TRAP)))
		return st;
	/* 2. Single-steps (up to the int3, not through it). */
	if ((st = set_rip(t, saved, seq)) || (st = run(c, PMU_STEP, end, &si)))
		return st;
	expect(c, SEQ_PUSHES, SEQ_PUSHES);
	if ((st = measure(c, LEDGER_STEP)))
		return st;
	/* 3. An injected system call. */
	if ((st = mon_inject(m, t, SYS_getpid, a, &ret)))
		return st;
	if ((st = measure(c, LEDGER_SYSCALL)))
		return st;
	/* 4. A page fault on a page of ours. */
	a[1] = m->page_size;
	a[2] = PROT_NONE;
	a[3] = MAP_PRIVATE | MAP_ANONYMOUS;
	a[4] = (uint64_t)-1;
	if ((st = mon_inject(m, t, SYS_mmap, a, &ret)))
		return st;
	if (ret < 0 && ret > -4096)
		return error_set(LOMAS_ETARGET, "calibration: mmap: %s", strerror((int)-ret));
	page = (uint64_t)ret;
	memcpy(fcode + 2, &page, 8);
	fcode[10] = 0xcc;
	if ((st = poke(m, t->tid, fseq, fcode, sizeof fcode)) || (st = set_rip(t, saved, fseq)) ||
	    (st = run(c, PMU_RUN, 0, &si)))
		goto unmap;
	if (si.si_signo != SIGSEGV || (uint64_t)si.si_addr != page) {
		st = error_set(LOMAS_ETARGET, "calibration: signal %d instead of the fault",
		               si.si_signo);
		goto unmap;
	}
	note_all(c, LEDGER_PAGE_FAULT);
	a[0] = page;
	a[2] = PROT_READ;
	if ((st = mon_inject(m, t, SYS_mprotect, a, &ret)) || (st = run(c, PMU_RUN, 0, &si)))
		goto unmap;
	if (si.si_signo != SIGTRAP || si.si_code != SI_KERNEL) {
		st = error_set(LOMAS_ETARGET, "calibration: signal %d instead of the trap",
		               si.si_signo);
		goto unmap;
	}
	note_all(c, LEDGER_TRAP);
	expect(c, 1, 0);
	st = measure(c, LEDGER_PAGE_FAULT);
unmap:
	a[0] = page;
	a[1] = m->page_size;
	if (page)
		mon_inject(m, t, SYS_munmap, a, &ret);
	return st;
}

lomas_status pmu_calibrate(monitor *m, mon_thread *t)
{
	const pmu_sys_ops *sys = m->psys;
	struct user_regs_struct saved;
	calib c = {.m = m, .t = t};
	uint64_t a[6] = {0};
	lomas_status st = LOMAS_OK;
	long ret;
	for (unsigned i = 0; i < PMU_MAX_EVENTS; i++)
		c.fd[i] = -1;
	/* Our page first (its mmap is not part of any measurement). */
	if (!m->syscall_insn && (st = mon_inject(m, t, SYS_getpid, a, &ret)))
		return error_prefix(st, "calibration");
	if (mon_ptrace(PTRACE_GETREGS, t->tid, NULL, &saved) < 0)
		return error_set(LOMAS_ETARGET, "calibration: PTRACE_GETREGS: %s", strerror(errno));
	for (unsigned i = 0; i < m->ptab.n && !st; i++) {
		struct perf_event_attr attr = m->ptab.ev[i].attr;
		attr.size = sizeof attr;
		attr.sample_period = 0; /* counting only: calibration raises no overflow */
		attr.exclude_kernel = 1;
		attr.exclude_hv = 1;
		c.fd[i] = sys->open(sys->ctx, &attr, t->tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
		if (c.fd[i] < 0)
			st = error_set(LOMAS_ENOTSUP, "perf_event_open of %s: %s",
			               m->ptab.ev[i].name, strerror(-c.fd[i]));
		else if (sys->read(sys->ctx, c.fd[i], &c.raw0[i], sizeof c.raw0[i]) < 0)
			st = error_set(LOMAS_ENOTSUP, "cannot read the counter of %s",
			               m->ptab.ev[i].name);
		ledger_init(&c.led[i]);
	}
	c.injected = mon_injected_into(t->tid);
	if (!st)
		st = phases(&c, &saved);
	if (mon_ptrace(PTRACE_SETREGS, t->tid, NULL, &saved) < 0 && !st)
		st = error_set(LOMAS_ETARGET, "calibration: PTRACE_SETREGS: %s", strerror(errno));
	for (unsigned i = 0; i < PMU_MAX_EVENTS; i++)
		if (c.fd[i] >= 0)
			sys->close(sys->ctx, c.fd[i]);
	if (st)
		return error_prefix(st, "calibrating the counters");
	for (unsigned i = 0; i < m->ptab.n; i++)
		memcpy(m->pcalib[i], c.led[i].per_event, sizeof m->pcalib[i]);
	m->pcalibrated = true;
	return LOMAS_OK;
}

/*
 * The replay kernel: the pmu clock's function table answered by a fake
 * kernel, so every part of the clock but the perf system calls runs where
 * no PMU exists (all our machines). The target is real; the fake runs it
 * as a CPU would, one single step at a time that the monitor never sees:
 * a thread resumed with PMU_RUN is stepped inside the fake's wait, each
 * instruction decoded before it runs (lib/decode) and its loads and stores
 * counted when it retires, until a stop a real kernel reports under
 * PTRACE_SYSCALL comes (a signal, a system call's entry or exit: the fake
 * meets a syscall instruction with PTRACE_SYSCALL, a ptrace event, the
 * exit). The monitor's own single steps (PMU_STEP) are counted too, and
 * each one perturbs the counters. The fake behaves as perf_event_open(2)
 * documents and as the seed measured real counters do:
 *   - a counter per thread (pid = tid, cpu = -1), counting the references of
 *     the kinds its attr.config stands for (conf: load, store, both);
 *   - it overflows each sample_period counts; the overflow is reported late
 *     by a random skid of 0..max_skid counts, at an instruction boundary, as
 *     F_SETSIG's signal to the F_SETOWN_EX thread when O_ASYNC is set (sent
 *     here with tgkill, so the monitor meets a real signal stop);
 *   - PERF_EVENT_IOC_PERIOD applies at once (Linux >= 3.14) or at the next
 *     overflow (2.6.36, the seed's), as configured;
 *   - counts are perturbed as real ones are: every single-step of the clock,
 *     SIGSEGV stop, trap (int3, the overflow interrupt) and injected system
 *     call adds a configured amount, which the clock must calibrate and
 *     its ledger subtract;
 *   - with precise sampling (PEBS, IBS op) each overflow also writes a
 *     PERF_RECORD_SAMPLE with the exact ip and data address into the ring;
 *   - an AMD IBS op counter (conf.ibs_type) counts ops, not references,
 *     and tags whichever op its count reaches: a memory op, another op, or
 *     a kernel op of the monitor's perturbations (pmu.h, pmu_replay_conf).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock/clock.h"
#include "decode/decode.h"
#include "pmu.h"

#define FAKE_FD0 1000
#define FAKE_MAX 256
#define FAKE_THREADS 256

typedef struct fake_ctr {
	bool used;
	pid_t tid;
	unsigned kinds;
	skid_counter k; /* k.count is the raw count */
	int sig;
	pid_t owner;
	bool async;
	uint64_t inflight; /* signals sent and not yet taken for an overflow */
	bool precise;
	uint64_t sample_type;
	struct perf_event_mmap_page *ring;
	size_t ring_len;
	uint64_t lost;       /* records dropped since the last one written */
	uint32_t pmu_type;   /* a hybrid core PMU's type: counts on that kind only; 0 any */
	bool ibs;            /* an IBS op counter: counts ops, records every overflow */
	bool ibs_user;       /* ... whose kernel-mode samples the kernel drops (swfilt) */
	uint64_t ibs_period; /* IBS: its period (IbsOpMaxCnt << 4) */
	uint64_t ibs_tag;    /* ... the count whose op it tags next */
} fake_ctr;

/* Where a thread stands toward a system call the fake let it reach (PTRACE_SYSCALL). */
enum { SYS_NONE, SYS_TO_ENTRY, SYS_AT_ENTRY, SYS_TO_EXIT };

typedef struct fake_thread {
	pid_t tid;
	int how;   /* how it was last resumed */
	int sys;   /* SYS_*: toward or inside a call */
	bool have; /* insn: the instruction its step in flight runs */
	decode_insn insn;
	uint64_t injected; /* injected calls already counted */
	uint64_t retired;  /* instructions, for its moves between core kinds */
	bool resumed;      /* by the fake, and not reported yet */
	unsigned core;     /* the kind it runs on (index into core_types) */
} fake_thread;

struct pmu_replay {
	pmu_replay_conf conf;
	pmu_sys_ops ops;
	rng skid;
	fake_ctr c[FAKE_MAX];
	fake_thread th[FAKE_THREADS];
	pmu_replay_stats stats;
	decoder *dec; /* the fake CPU's: what each instruction loads and stores */
};

static fake_ctr *ctr(pmu_replay *r, int fd)
{
	int i = fd - FAKE_FD0;
	return i >= 0 && i < FAKE_MAX && r->c[i].used ? &r->c[i] : NULL;
}

static fake_thread *thread_of(pmu_replay *r, pid_t tid)
{
	for (int i = 0; i < FAKE_THREADS; i++)
		if (r->th[i].tid == tid)
			return &r->th[i];
	for (int i = 0; i < FAKE_THREADS; i++)
		if (!r->th[i].tid) {
			r->th[i].tid = tid;
			return &r->th[i];
		}
	return NULL;
}

/* What an overflowing count was, for its record (count(), ring_write()). */
enum {
	OP_KERNEL = -1, /* a perturbation: the monitor's trap, fault, call (kernel ops) */
	OP_OTHER = -2,  /* an IBS op of the target that references no memory */
};

/* Where the fake's kernel ops are (any kernel text address will do). */
#define FAKE_KERNEL_IP 0xffffffff81000000ull

/*
 * A precise record for the overflow of c at the reference (pc, addr) of
 * kind (0 load, 1 store; OP_* for an IBS op with no reference), as a PEBS
 * assist or IBS writes it when the counter overflows: before the
 * interrupt, which comes later by the skid. A full ring drops it and, once
 * there is room, says so with PERF_RECORD_LOST
 * (kernel/events/ring_buffer.c, perf_output_begin()).
 */
static void ring_write(pmu_replay *r, fake_ctr *c, uint64_t pc, uint64_t addr, int kind)
{
	struct perf_event_mmap_page *pg = c->ring;
	union perf_mem_data_src src = {.val = 0};
	pmu_record rec = {.type = PERF_RECORD_SAMPLE,
	                  .misc = PERF_RECORD_MISC_USER | PERF_RECORD_MISC_EXACT_IP,
	                  .ip = pc,
	                  .addr = addr,
	                  .pid = (uint32_t)c->tid,
	                  .tid = (uint32_t)c->tid};
	unsigned char buf[256], lost[64];
	size_t n, nl = 0;
	uint64_t size, head;
	unsigned char *data;
	if (!pg)
		return;
	src.mem_op = kind == LOMAS_REF_STORE ? PERF_MEM_OP_STORE
	             : kind >= 0             ? PERF_MEM_OP_LOAD
	                                     : PERF_MEM_OP_NA;
	rec.data_src = src.val;
	if (kind == OP_KERNEL) {
		rec.ip = FAKE_KERNEL_IP;
		rec.misc = PERF_RECORD_MISC_KERNEL | PERF_RECORD_MISC_EXACT_IP;
	}
	n = pmu_record_layout(&rec, c->sample_type, buf, sizeof buf);
	if (c->lost) {
		pmu_record l = {.type = PERF_RECORD_LOST, .lost = c->lost};
		nl = pmu_record_layout(&l, 0, lost, sizeof lost);
	}
	size = pg->data_size;
	head = pg->data_head;
	if (!n || head - pg->data_tail + nl + n > size) {
		c->lost++;
		r->stats.lost++;
		return;
	}
	data = (unsigned char *)pg + pg->data_offset;
	for (size_t i = 0; i < nl; i++)
		data[(head + i) % size] = lost[i];
	for (size_t i = 0; i < n; i++)
		data[(head + nl + i) % size] = buf[i];
	c->lost = 0;
	/* The bytes first, then the head (the reader loads it with acquire). */
	__atomic_store_n(&pg->data_head, head + nl + n, __ATOMIC_RELEASE);
	r->stats.records++;
}

/* Send c's overflow signal to its owner (F_SETSIG, F_SETOWN_EX, O_ASYNC). */
static void signal_owner(pmu_replay *r, fake_ctr *c)
{
	if (c->async && c->sig && c->owner > 0) {
		c->inflight++;
		r->stats.signals++;
		/* tkill: si_code SI_TKILL, si_pid ours (a fake cannot send POLL_IN). */
		syscall(SYS_tkill, c->owner, c->sig);
	}
}

/*
 * IBS op counts from a random start: the hardware preloads the low 7 bits
 * of IbsOpCurCnt with random bits each time it starts counting
 * (arch/x86/include/asm/perf_event.h, IBS_OP_CUR_CNT_RAND), so the op it
 * tags lies period - U ops on, U uniform in 0..127: no 16-op grain lines
 * up with the program's loops.
 */
static void ibs_arm(pmu_replay *r, fake_ctr *c, uint64_t period)
{
	uint64_t u = rng_next(&r->skid) % 128;
	c->ibs_period = period;
	c->ibs_tag = c->k.count + (period > u ? period - u : 1);
}

/*
 * n ops of kind on IBS counter c: the op its count reaches is tagged, its
 * record written (a kernel op's only where the kernel does not filter
 * them) and the interrupt raised; the signal comes late by the skid, and
 * the count starts again (the kernel re-enables it with the same period).
 */
static void ibs_count(pmu_replay *r, fake_ctr *c, uint64_t n, uint64_t pc, uint64_t addr, int kind)
{
	uint32_t skid =
	    r->conf.max_skid ? (uint32_t)(rng_next(&r->skid) % (r->conf.max_skid + 1ull)) : 0;
	uint64_t end = c->k.count + n;
	r->stats.ibs_ops += n;
	while (c->ibs_tag <= end) {
		uint64_t at = c->ibs_tag;
		if (kind != OP_KERNEL || !c->ibs_user) {
			ring_write(r, c, pc, addr, kind);
			r->stats.overflows++;
			r->stats.skid_total += skid;
			if (!c->k.pending)
				c->k.report_at = at + skid;
			c->k.pending++;
		} else {
			/* swfilt: dropped in the interrupt, no sample, no signal. */
			r->stats.unrecorded++;
		}
		c->k.count = at;
		ibs_arm(r, c, c->ibs_period);
	}
	c->k.count = end;
	if (c->k.pending && c->k.count >= c->k.report_at) {
		c->k.pending = 0;
		signal_owner(r, c);
	}
}

/* Count n of kind (-1: a perturbation) on c; raise its overflow signal when the report is due. */
static void count(pmu_replay *r, fake_ctr *c, uint64_t n, uint64_t pc, uint64_t addr, int kind)
{
	uint32_t skid =
	    r->conf.max_skid ? (uint32_t)(rng_next(&r->skid) % (r->conf.max_skid + 1ull)) : 0;
	uint64_t before = c->k.count, at = c->k.overflow_at;
	if (!n)
		return;
	if (c->ibs) {
		ibs_count(r, c, n, pc, addr, kind);
		return;
	}
	/*
	 * A precise record names the reference that overflowed, not a later
	 * one; an overflow among counts that are no reference (the monitor's
	 * perturbations) has no reference to name: no record.
	 */
	if (c->precise && at != UINT64_MAX && at > before && at <= before + n) {
		if (kind >= 0)
			ring_write(r, c, pc, addr, kind);
		else
			r->stats.unrecorded++;
	}
	if (skid_counter_advance(&c->k, n, skid)) {
		uint64_t due = c->k.pending;
		r->stats.overflows += due;
		r->stats.skid_total += skid;
		while (c->k.pending)
			skid_counter_ack(&c->k);
		signal_owner(r, c);
	}
}

/* Does c count now: any kind, or its thread runs on c's kind? */
static bool counting(pmu_replay *r, const fake_ctr *c)
{
	fake_thread *t;
	if (!c->pmu_type)
		return true;
	t = thread_of(r, c->tid);
	return t && r->conf.core_types[t->core] == c->pmu_type;
}

/* Perturb every counter of tid by amount (the event's worth). */
static void perturb(pmu_replay *r, pid_t tid, int64_t amount)
{
	if (amount <= 0)
		return;
	for (int i = 0; i < FAKE_MAX; i++)
		if (r->c[i].used && r->c[i].tid == tid && counting(r, &r->c[i])) {
			r->stats.perturbations += (uint64_t)amount;
			count(r, &r->c[i], (uint64_t)amount, 0, 0, OP_KERNEL);
		}
}

/* The system calls injected into tid since last seen. */
static void catch_up(pmu_replay *r, pid_t tid)
{
	fake_thread *t = thread_of(r, tid);
	uint64_t now;
	if (!t || !r->conf.injected)
		return;
	now = r->conf.injected(r->conf.arg, tid);
	if (now > t->injected)
		perturb(r, tid, r->conf.per_syscall * (int64_t)(now - t->injected));
	t->injected = now;
}

/* A free counter slot for tid, counting kinds with attr's period: its fd, or -EMFILE. */
static int ctr_new(pmu_replay *r, const struct perf_event_attr *attr, pid_t tid, unsigned kinds)
{
	catch_up(r, tid); /* calls made before it opened are not its to count */
	for (int i = 0; i < FAKE_MAX; i++) {
		fake_ctr *c = &r->c[i];
		if (c->used)
			continue;
		memset(c, 0, sizeof *c);
		c->used = true;
		c->tid = tid;
		c->kinds = kinds;
		c->precise = attr->precise_ip > 0;
		c->pmu_type = attr->type == PERF_TYPE_RAW ? 0 : attr->type;
		c->sample_type = attr->sample_type;
		skid_counter_open(&c->k,
		                  r->conf.next_overflow ? SKID_PERIOD_NEXT_OVERFLOW
		                                        : SKID_PERIOD_IMMEDIATE,
		                  0, attr->sample_period);
		thread_of(r, tid);
		r->stats.opened++;
		return FAKE_FD0 + i;
	}
	return -EMFILE;
}

/*
 * An IBS op counter, as arch/x86/events/amd/ibs.c takes one: per thread
 * only where the kernel has task contexts for it; no exclude_* but with
 * swfilt; the period's low nibble masked (0x10 at least).
 */
static int ibs_open(pmu_replay *r, const struct perf_event_attr *attr, pid_t tid)
{
	struct perf_event_attr a = *attr;
	bool excl = attr->exclude_kernel || attr->exclude_hv;
	int fd;
	if (!r->conf.ibs_per_task)
		return -EINVAL; /* perf_invalid_context before Linux 6.2 */
	if ((excl || attr->exclude_user) && !(r->conf.ibs_swfilt && (attr->config2 & 1)))
		return -EINVAL; /* PERF_PMU_CAP_NO_EXCLUDE */
	if (attr->freq || attr->inherit || attr->exclude_user || attr->precise_ip > 2)
		return -EINVAL; /* (user mode is what the clock samples) */
	a.sample_period &= ~0xfull;
	if (!a.sample_period)
		a.sample_period = 0x10;
	a.precise_ip = 1;       /* ctr_new: a counter whose overflows write records */
	a.type = PERF_TYPE_RAW; /* ... of no hybrid core kind: it counts everywhere */
	if ((fd = ctr_new(r, &a, tid, PMU_KIND_REFS)) < 0)
		return fd;
	r->c[fd - FAKE_FD0].ibs = true;
	r->c[fd - FAKE_FD0].ibs_user = excl;
	ibs_arm(r, &r->c[fd - FAKE_FD0], a.sample_period);
	return fd;
}

static int f_open(void *ctx, struct perf_event_attr *attr, pid_t tid, int cpu, int group,
                  unsigned long flags)
{
	pmu_replay *r = ctx;
	unsigned kinds;
	if (!attr || tid <= 0 || cpu != -1)
		return -EINVAL; /* the clock opens per-thread counters only */
	if (r->conf.ibs_type && attr->type == r->conf.ibs_type)
		return ibs_open(r, attr, tid);
	if (attr->type != PERF_TYPE_RAW && (!attr->type || (attr->type != r->conf.core_types[0] &&
	                                                    attr->type != r->conf.core_types[1])))
		return -ENOENT;
	if (attr->config == r->conf.load_config)
		kinds = PMU_KIND_LOADS;
	else if (attr->config == r->conf.store_config)
		kinds = PMU_KIND_STORES;
	else if (attr->config == r->conf.refs_config)
		kinds = PMU_KIND_REFS;
	else
		return -ENOENT;
	if (!attr->exclude_kernel)
		return -EACCES; /* as at perf_event_paranoid 2 */
	if (attr->freq || attr->inherit)
		return -EINVAL;
	if (attr->precise_ip && !r->conf.precise)
		return -EOPNOTSUPP;
	return ctr_new(r, attr, tid, kinds);
}

static int f_ioctl(void *ctx, int fd, unsigned long req, unsigned long arg)
{
	pmu_replay *r = ctx;
	fake_ctr *c = ctr(r, fd);
	if (!c)
		return -EBADF;
	switch (req) {
	case PERF_EVENT_IOC_PERIOD: {
		uint64_t p;
		catch_up(r, c->tid); /* a real counter counted the calls already */
		memcpy(&p, (const void *)arg, sizeof p);
		if (!p || (int64_t)p < 0 || (c->ibs && (p & 0xf)))
			return -EINVAL; /* IBS: perf_ibs_check_period() */
		if (c->ibs)
			ibs_arm(r, c, p);
		else
			skid_counter_set_period(&c->k, p);
		return 0;
	}
	case PERF_EVENT_IOC_ENABLE:
	case PERF_EVENT_IOC_DISABLE:
	case PERF_EVENT_IOC_REFRESH: return 0;
	default: return -ENOTTY;
	}
}

static ssize_t f_read(void *ctx, int fd, void *buf, size_t len)
{
	pmu_replay *r = ctx;
	fake_ctr *c = ctr(r, fd);
	if (!c)
		return -EBADF;
	if (len < sizeof(uint64_t))
		return -ENOSPC;
	catch_up(r, c->tid);
	memcpy(buf, &c->k.count, sizeof(uint64_t));
	return sizeof(uint64_t);
}

static int f_fcntl(void *ctx, int fd, int cmd, unsigned long arg)
{
	pmu_replay *r = ctx;
	fake_ctr *c = ctr(r, fd);
	if (!c)
		return -EBADF;
	switch (cmd) {
	case F_SETOWN_EX: {
		const struct f_owner_ex *o = (const struct f_owner_ex *)arg;
		if (o->type != F_OWNER_TID)
			return -EINVAL; /* the clock routes each overflow to its thread */
		c->owner = o->pid;
		return 0;
	}
	case F_SETSIG: c->sig = (int)arg; return 0;
	case F_SETFL: c->async = (arg & O_ASYNC) != 0; return 0;
	case F_GETFL: return O_RDWR | (c->async ? O_ASYNC : 0);
	default: return -EINVAL;
	}
}

static void *f_mmap(void *ctx, int fd, size_t len)
{
	pmu_replay *r = ctx;
	fake_ctr *c = ctr(r, fd);
	long ps = sysconf(_SC_PAGESIZE);
	void *p;
	if (!c || ps <= 0 || len < 2 * (size_t)ps || c->ring) {
		errno = EINVAL;
		return NULL;
	}
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	c->ring = p;
	c->ring_len = len;
	c->ring->data_offset = (uint64_t)ps;
	c->ring->data_size = len - (size_t)ps;
	return p;
}

static int f_munmap(void *ctx, void *addr, size_t len)
{
	pmu_replay *r = ctx;
	for (int i = 0; i < FAKE_MAX; i++)
		if (r->c[i].used && r->c[i].ring == addr)
			r->c[i].ring = NULL;
	return munmap(addr, len) < 0 ? -errno : 0;
}

static int f_close(void *ctx, int fd)
{
	pmu_replay *r = ctx;
	fake_ctr *c = ctr(r, fd);
	if (!c)
		return -EBADF;
	c->used = false;
	return 0;
}

static bool f_is_overflow(void *ctx, int fd, const siginfo_t *si)
{
	pmu_replay *r = ctx;
	fake_ctr *c = ctr(r, fd);
	if (!c || !c->inflight || si->si_signo != c->sig || si->si_code != SI_TKILL ||
	    si->si_pid != getpid())
		return false;
	c->inflight--;
	return true;
}

/* ------------------------------------------------- the fake CPU: stepping */

/* Instructions a PMU_RUN thread runs inside one WNOHANG wait before the others get a turn. */
#define RUN_BATCH 64

/* The instruction at regs' rip, as the CPU will run it (no cache: code changes under us). */
static void fetch(pmu_replay *r, pid_t tid, const struct user_regs_struct *regs, decode_insn *in)
{
	uint8_t code[16];
	size_t len = 0;
	struct iovec l = {code, sizeof code}, rm = {(void *)(uintptr_t)regs->rip, sizeof code};
	memset(in, 0, sizeof *in);
	in->pc = regs->rip;
	if (process_vm_readv(tid, &l, 1, &rm, 1, 0) == (ssize_t)sizeof code)
		len = sizeof code;
	for (; len < sizeof code; len += 8) { /* a page we made PROT_NONE: ptrace reads it */
		long w;
		errno = 0;
		w = ptrace(PTRACE_PEEKDATA, tid, (void *)(uintptr_t)(regs->rip + len), NULL);
		if (errno)
			break;
		memcpy(code + len, &w, 8);
	}
	if (!len || decode_bytes(r->dec, code, len, regs->rip, regs, in)) {
		/* Not readable or not decodable: it faults, or counts nothing we model. */
		memset(in, 0, sizeof *in);
		in->pc = regs->rip;
		error_clear();
		return;
	}
	if (decode_has_opmask(in)) {
		uint64_t k[8];
		if (decode_read_opmask(tid, k)) {
			memset(k, 0xff, sizeof k);
			error_clear();
		}
		decode_apply_opmask(in, k);
	}
}

/*
 * Does a system call run when the thread goes on from this stop? A call
 * interrupted by a signal shows -ERESTART* in rax until it restarts
 * (include/linux/errno.h, arch_do_signal_or_restart()).
 */
static bool restarting(const struct user_regs_struct *regs)
{
	long ax = (long)regs->rax;
	return (long)regs->orig_rax >= 0 && (ax == -512 || ax == -513 || ax == -514 || ax == -516);
}

/*
 * t's step ended (refs: its instruction retired, the CPU counts its
 * references); step: the monitor's, whose trap perturbs the counters.
 */
static void retire(pmu_replay *r, fake_thread *t, bool refs, bool step)
{
	const decode_insn *in = &t->insn;
	catch_up(r, t->tid);
	for (int i = 0; i < FAKE_MAX; i++) {
		fake_ctr *c = &r->c[i];
		if (!c->used || c->tid != t->tid || !counting(r, c))
			continue;
		/* IBS: an op per reference (one if none); a record names its op. */
		if (c->ibs && refs && !in->nrefs)
			count(r, c, 1, in->pc, 0, OP_OTHER);
		/* One reference at a time: an overflow's record names its own reference. */
		for (unsigned j = 0; refs && j < in->nrefs; j++)
			if (c->kinds & (in->refs[j].kind == LOMAS_REF_STORE ? PMU_KIND_STORES
			                                                    : PMU_KIND_LOADS))
				count(r, c, 1, in->pc, in->refs[j].addr, in->refs[j].kind);
	}
	if (step)
		perturb(r, t->tid, r->conf.per_step);
	/* The scheduler moves it to the other kind of core (after the perturbation). */
	if (r->conf.migrate_every && ++t->retired % r->conf.migrate_every == 0)
		t->core ^= 1;
}

/*
 * Run t one step on: a single step of the instruction at its rip, or, for a
 * free-running thread at a syscall instruction, PTRACE_SYSCALL, so that the
 * call's entry stops it as a real kernel's PTRACE_SYSCALL does.
 */
static int step_on(pmu_replay *r, fake_thread *t, int sig)
{
	struct user_regs_struct regs;
	bool call;
	t->have = false;
	if (ptrace(PTRACE_GETREGS, t->tid, NULL, &regs) < 0)
		return -errno;
	call = restarting(&regs);
	if (!call) {
		fetch(r, t->tid, &regs, &t->insn);
		t->have = true;
		call = t->insn.syscall;
	}
	if (call && t->how == PMU_RUN && !sig) {
		t->have = false;
		t->sys = SYS_TO_ENTRY;
		return ptrace(PTRACE_SYSCALL, t->tid, NULL, NULL) < 0 ? -errno : 0;
	}
	/*
	 * CPUID of a free-running thread: run here, as the monitor runs it
	 * (decode_cpuid.c: a hypervisor may lose its step trap, and the step
	 * would run the next instruction unseen). It retires with no
	 * references; the thread goes on to the next one.
	 */
	if (t->have && t->how == PMU_RUN && !sig && decode_is_cpuid(&t->insn)) {
		if (decode_run_cpuid(t->tid, &t->insn) == LOMAS_OK) {
			r->stats.cpuid_run++;
			retire(r, t, false, false);
			return step_on(r, t, 0);
		}
		error_clear();
	}
	return ptrace(PTRACE_SINGLESTEP, t->tid, NULL, (void *)(long)sig) < 0 ? -errno : 0;
}

static int f_resume(void *ctx, pid_t tid, int how, int sig)
{
	pmu_replay *r = ctx;
	fake_thread *t = thread_of(r, tid);
	if (!t)
		return -ENOMEM;
	t->how = how;
	t->resumed = true;
	if (t->sys == SYS_AT_ENTRY) {
		/* Stopped at a call's entry: the call runs, its exit stops the thread. */
		t->sys = SYS_TO_EXIT;
		t->have = false;
		return ptrace(PTRACE_SYSCALL, tid, NULL, (void *)(long)sig) < 0 ? -errno : 0;
	}
	t->sys = SYS_NONE;
	return step_on(r, t, sig);
}

/*
 * A signal stop the kernel reports: what it costs the counters. A fault
 * counts the faulting access and then again (per_fault); a trap (int3, the
 * overflow interrupt) its own amount.
 */
static void signal_seen(pmu_replay *r, pid_t tid, const siginfo_t *si)
{
	bool ours = false;
	for (int i = 0; i < FAKE_MAX; i++)
		if (r->c[i].used && r->c[i].tid == tid && r->c[i].inflight &&
		    si->si_signo == r->c[i].sig && si->si_code == SI_TKILL)
			ours = true;
	catch_up(r, tid);
	if (si->si_signo == SIGSEGV)
		perturb(r, tid, r->conf.per_fault);
	else if (ours || (si->si_signo == SIGTRAP && si->si_code == SI_KERNEL))
		perturb(r, tid, r->conf.per_trap);
}

/*
 * waitpid for tid, as the kernel would report it: the steps of a PMU_RUN
 * thread are the fake's own (counted and stepped on here); a step's trap
 * with si_code TRAP_TRACE is an instruction retired (x86 exc_debug_user,
 * DR_STEP), TRAP_BRKPT a step that ended in a system call's exit
 * (user_single_step_report: nothing of user mode ran, or the syscall
 * instruction, which references nothing), SIGTRAP a handler entered.
 */
static pid_t f_wait(void *ctx, pid_t tid, int *status, int flags)
{
	pmu_replay *r = ctx;
	bool nohang = (flags & WNOHANG) != 0;
	for (unsigned n = 0;; n++) {
		pid_t got = waitpid(tid, status, flags);
		fake_thread *t;
		siginfo_t si;
		int sig;
		if (got != tid || !(t = thread_of(r, tid)))
			return got;
		if (!WIFSTOPPED(*status)) {
			memset(t, 0, sizeof *t); /* gone: the slot is free */
			return got;
		}
		sig = WSTOPSIG(*status);
		if (sig == (SIGTRAP | 0x80)) {
			t->sys = t->sys == SYS_TO_ENTRY ? SYS_AT_ENTRY : SYS_NONE;
			t->have = t->resumed = false;
			return got;
		}
		if ((*status >> 16) != 0 || ptrace(PTRACE_GETSIGINFO, tid, NULL, &si) < 0) {
			t->have = t->resumed = false; /* an event; a group-stop: on from its rip */
			return got;
		}
		if (sig != SIGTRAP || (si.si_code != TRAP_TRACE && si.si_code != TRAP_BRKPT &&
		                       si.si_code != SIGTRAP)) {
			/* A signal stop, ours to resume or not (an injected call's: the monitor's).
			 */
			t->have = t->resumed = false;
			signal_seen(r, tid, &si);
			return got;
		}
		if (!t->resumed)
			return got; /* a step the monitor made itself (an injected call) */
		if (si.si_code != SIGTRAP && t->have)
			retire(r, t, si.si_code == TRAP_TRACE, t->how == PMU_STEP);
		t->have = false;
		if (t->how == PMU_STEP) {
			t->resumed = false;
			return got; /* the monitor's step */
		}
		/* Running freely: on to the next instruction, unseen by the monitor. */
		if (step_on(r, t, 0) < 0) {
			t->resumed = false;
			return got;
		}
		if (n >= RUN_BATCH && nohang)
			return 0;  /* its next report wakes the monitor (SIGCHLD) */
		flags &= ~WNOHANG; /* a step's trap is a few microseconds away */
	}
}

lomas_status pmu_replay_new(const pmu_replay_conf *conf, pmu_replay **out)
{
	pmu_replay *r = calloc(1, sizeof *r);
	if (!r)
		return error_set(LOMAS_ENOMEM, "out of memory");
	r->conf = *conf;
	rng_seed(&r->skid, conf->seed);
	if (decoder_new(&r->dec)) {
		free(r);
		return error_set(LOMAS_ENOMEM, "out of memory");
	}
	r->ops = (pmu_sys_ops){
	    .open = f_open,
	    .ioctl = f_ioctl,
	    .read = f_read,
	    .fcntl = f_fcntl,
	    .mmap = f_mmap,
	    .munmap = f_munmap,
	    .close = f_close,
	    .resume = f_resume,
	    .wait = f_wait,
	    .is_overflow = f_is_overflow,
	    .ctx = r,
	};
	*out = r;
	return LOMAS_OK;
}

void pmu_replay_free(pmu_replay *r)
{
	if (!r)
		return;
	for (int i = 0; i < FAKE_MAX; i++)
		if (r->c[i].used && r->c[i].ring)
			munmap(r->c[i].ring, r->c[i].ring_len);
	decoder_free(r->dec);
	free(r);
}

const pmu_sys_ops *pmu_replay_ops(pmu_replay *r)
{
	return &r->ops;
}

void pmu_replay_get_stats(const pmu_replay *r, pmu_replay_stats *out)
{
	*out = r->stats;
}

/*
 * The replay kernel: the pmu clock's function table answered by a fake
 * kernel, so every part of the clock but the perf system calls runs where
 * no PMU exists (all our machines). The target is real; it runs under
 * single steps, and the monitor shows the fake each retired instruction's
 * references (what a real CPU sees without telling). The fake behaves as
 * perf_event_open(2) documents and as the seed measured real counters do:
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
 *     PERF_RECORD_SAMPLE with the exact ip and data address into the ring.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "clock/clock.h"
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
	uint64_t lost;     /* records dropped since the last one written */
	uint32_t pmu_type; /* a hybrid core PMU's type: counts on that kind only; 0 any */
} fake_ctr;

typedef struct fake_thread {
	pid_t tid;
	int how;           /* how it was last resumed */
	uint64_t injected; /* injected calls already counted */
	uint64_t retired;  /* instructions, for its moves between core kinds */
	unsigned core;     /* the kind it runs on (index into core_types) */
} fake_thread;

struct pmu_replay {
	pmu_replay_conf conf;
	pmu_sys_ops ops;
	rng skid;
	fake_ctr c[FAKE_MAX];
	fake_thread th[FAKE_THREADS];
	pmu_replay_stats stats;
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

/*
 * A precise record for the overflow of c at the reference (pc, addr) of
 * kind (0 load, 1 store), as a PEBS assist writes it when the counter
 * overflows: before the interrupt, which comes later by the skid. A full
 * ring drops it and, once there is room, says so with PERF_RECORD_LOST
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
	src.mem_op = kind ? PERF_MEM_OP_STORE : PERF_MEM_OP_LOAD;
	rec.data_src = src.val;
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

/* Count n of kind (-1: a perturbation) on c; raise its overflow signal when the report is due. */
static void count(pmu_replay *r, fake_ctr *c, uint64_t n, uint64_t pc, uint64_t addr, int kind)
{
	uint32_t skid =
	    r->conf.max_skid ? (uint32_t)(rng_next(&r->skid) % (r->conf.max_skid + 1ull)) : 0;
	uint64_t before = c->k.count, at = c->k.overflow_at;
	if (!n)
		return;
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
		if (c->async && c->sig && c->owner > 0) {
			c->inflight++;
			r->stats.signals++;
			/* tkill: si_code SI_TKILL, si_pid ours (a fake cannot send POLL_IN). */
			syscall(SYS_tkill, c->owner, c->sig);
		}
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
			count(r, &r->c[i], (uint64_t)amount, 0, 0, -1);
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

static int f_open(void *ctx, struct perf_event_attr *attr, pid_t tid, int cpu, int group,
                  unsigned long flags)
{
	pmu_replay *r = ctx;
	unsigned kinds;
	if (!attr || tid <= 0 || cpu != -1)
		return -EINVAL; /* the clock opens per-thread counters only */
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

static int f_ioctl(void *ctx, int fd, unsigned long req, unsigned long arg)
{
	pmu_replay *r = ctx;
	fake_ctr *c = ctr(r, fd);
	if (!c)
		return -EBADF;
	switch (req) {
	case PERF_EVENT_IOC_PERIOD: {
		uint64_t p;
		memcpy(&p, (const void *)arg, sizeof p);
		if (!p || (int64_t)p < 0)
			return -EINVAL;
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

/* Both ways of running are single steps here: the fake must see every instruction. */
static int f_resume(void *ctx, pid_t tid, int how, int sig)
{
	pmu_replay *r = ctx;
	fake_thread *t = thread_of(r, tid);
	if (t)
		t->how = how;
	return ptrace(PTRACE_SINGLESTEP, tid, NULL, (void *)(long)sig) < 0 ? -errno : 0;
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

static void f_retired(void *ctx, pid_t tid, uint64_t pc, unsigned nrefs, const uint8_t *kinds,
                      const uint64_t *addrs)
{
	pmu_replay *r = ctx;
	fake_thread *t = thread_of(r, tid);
	catch_up(r, tid);
	for (int i = 0; i < FAKE_MAX; i++) {
		fake_ctr *c = &r->c[i];
		if (!c->used || c->tid != tid || !counting(r, c))
			continue;
		/* One reference at a time: an overflow's record names its own reference. */
		for (unsigned j = 0; j < nrefs; j++)
			if (c->kinds & (kinds[j] ? PMU_KIND_STORES : PMU_KIND_LOADS))
				count(r, c, 1, pc, addrs[j], kinds[j]);
	}
	if (t && t->how == PMU_STEP) {
		perturb(r, tid, r->conf.per_step);
		t->how = PMU_RUN;
	}
	/* The scheduler moves it to the other kind of core (after the perturbation). */
	if (t && r->conf.migrate_every && ++t->retired % r->conf.migrate_every == 0)
		t->core ^= 1;
}

static void f_stopped(void *ctx, pid_t tid, const siginfo_t *si)
{
	pmu_replay *r = ctx;
	bool ours = false;
	catch_up(r, tid);
	for (int i = 0; i < FAKE_MAX; i++)
		if (r->c[i].used && r->c[i].tid == tid && r->c[i].inflight &&
		    si->si_signo == r->c[i].sig && si->si_code == SI_TKILL)
			ours = true;
	if (si->si_signo == SIGSEGV)
		perturb(r, tid, r->conf.per_fault);
	else if (ours || (si->si_signo == SIGTRAP && si->si_code == SI_KERNEL))
		perturb(r, tid, r->conf.per_trap);
}

lomas_status pmu_replay_new(const pmu_replay_conf *conf, pmu_replay **out)
{
	pmu_replay *r = calloc(1, sizeof *r);
	if (!r)
		return error_set(LOMAS_ENOMEM, "out of memory");
	r->conf = *conf;
	rng_seed(&r->skid, conf->seed);
	r->ops = (pmu_sys_ops){
	    .open = f_open,
	    .ioctl = f_ioctl,
	    .read = f_read,
	    .fcntl = f_fcntl,
	    .mmap = f_mmap,
	    .munmap = f_munmap,
	    .close = f_close,
	    .resume = f_resume,
	    .is_overflow = f_is_overflow,
	    .retired = f_retired,
	    .stopped = f_stopped,
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

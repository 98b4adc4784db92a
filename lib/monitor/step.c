/*
 * The step clock (docs/architecture.md, the clocks): every thread is single-stepped; each
 * instruction is decoded before it runs and its references are counted when
 * it retires (the step report). Samples start at the points the sampler
 * chooses; the sampled line is watched by the mprotect engine, and REUSE IS
 * DETECTED BY THE FAULT: the target's next touch of the page faults, the
 * fault lifts the page for that one step, and when the faulting instruction
 * retires its decoded references say which reference (its clock) touched
 * the line ("reuse by fault"). The reports themselves are handled in
 * stops.c; the target's signal state that faults must not change, in
 * sigstate.c.
 *
 * Where a watched page is not PROT_NONE while an instruction runs (a system
 * call or signal delivery lifted the protections, another thread is stepping
 * over a fault on it, the sample started in this very instruction, or the
 * page is one the kernel writes behind the target's back: TCB, rseq, vdso),
 * the retired instruction's decoded references are checked against the table
 * instead ("reuse by decode" in the profile's metadata), so the distances stay
 * exact.
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "monitor.h"

struct rseq_conf {
	uint64_t rseq_abi_pointer;
	uint32_t rseq_abi_size;
	uint32_t signature;
	uint32_t flags;
	uint32_t pad;
};

/* The thread injections run in (set by step_handle before any engine call). */
static mon_thread *cur_thread(monitor *m)
{
	return mon_thread_of(m, m->cur_tid);
}

static int eng_mprotect(void *ctx, uint64_t addr, uint64_t len, int prot)
{
	monitor *m = ctx;
	mon_thread *t = cur_thread(m);
	uint64_t args[6] = {addr, len, (uint64_t)prot, 0, 0, 0};
	long ret = 0;
	if (!t || t->state == MT_GONE || t->state == MT_EXITING)
		return -ESRCH;
	/*
	 * Not from a thread in a group-stop: the injected call's step would end
	 * its stop, PTRACE_LISTEN would then fail and the thread sit in a
	 * ptrace-stop nobody resumes (SIGCONT was lost so, and the target hung).
	 */
	if (t->state == MT_LISTEN || t->group_stop)
		return MPROT_DEFER;
	if (mon_inject(m, t, SYS_mprotect, args, &ret))
		return t->group_stop ? MPROT_DEFER : MPROT_UNKNOWN; /* group-stop: nothing ran */
	return (int)ret;
}

static int eng_page_prot(void *ctx, uint64_t page)
{
	monitor *m = ctx;
	const map_range *r = maps_find(&m->maps, page);
	return r ? r->prot : -1;
}

static bool eng_may_protect(void *ctx, uint64_t page)
{
	monitor *m = ctx;
	const map_range *r = maps_find(&m->maps, page);
	uint64_t ps = m->page_size;
	if (!r || r->special)
		return false;
	if (m->scratch && page == m->scratch)
		return false;
	for (size_t i = 0; i < m->threads.n; i++) {
		const mon_thread *t = &m->threads.items[i];
		uint64_t tcb = t->fs_base & ~(ps - 1);
		if (t->state == MT_GONE)
			continue;
		/* struct pthread (tid cleared at exit, robust list) sits above fs_base. */
		if (t->fs_base && page >= tcb && page < tcb + 2 * ps)
			return false;
		if (t->rseq_addr && page + ps > t->rseq_addr && page < t->rseq_addr + t->rseq_len)
			return false;
	}
	return true;
}

lomas_status step_init(monitor *m, const struct lomas_config *cfg)
{
	mprot_ops ops = {eng_mprotect, eng_page_prot, eng_may_protect, m};
	lomas_status st;
	long ps = sysconf(_SC_PAGESIZE);
	m->cfg = *cfg;
	m->page_size = ps > 0 ? (uint64_t)ps : 4096;
	m->period = cfg->period_refs == CONFIG_AUTO ? 1000.0 : (double)cfg->period_refs;
	m->window_refs =
	    cfg->window_refs == CONFIG_AUTO ? (uint64_t)(256.0 * m->period) : cfg->window_refs;
	if (!m->window_refs)
		m->window_refs = 1;
	if (cfg->watch == WATCH_DEBUGREG) {
		if (cfg->clock == CLOCK_PMU)
			return error_set(LOMAS_ENOTSUP,
			                 "the debugreg watch engine runs with the step clock only "
			                 "(not yet with the pmu clock): use --watch mprotect");
		if ((st = dwatch_init(m)))
			return st;
	}
	if ((st = decoder_new(&m->dec)))
		return st;
	decoder_set_mem_ops(m->dec, &mon_decode_mem_ops);
	if ((st = mprot_init(&m->eng, &ops, cfg->line_size, (uint32_t)m->page_size,
	                     cfg->max_samples_live)))
		return st;
	m->eng_ready = true;
	return LOMAS_OK;
}

void step_free(monitor *m)
{
	if (m->eng_ready)
		mprot_free(&m->eng);
	m->eng_ready = false;
	decoder_free(m->dec);
	m->dec = NULL;
	free(m->samples.items);
	m->samples.items = NULL;
	m->samples.n = m->samples.cap = 0;
}

void step_thread_init(monitor *m, mon_thread *t)
{
	lomas_status st;
	if (m->dreg_mode)
		dwatch_thread_init(m, t);
	if (m->pmu_mode) {
		/* Its counters, or the session ends: a thread we cannot count is not measured. */
		if ((st = pmu_thread_start(m, t)))
			mon_fail(m, st);
		return;
	}
	/* Each thread its own sample stream, reproducible from the seed. */
	step_sampler_init(&t->sampler, m->cfg.seed + 0x9e3779b97f4a7c15ull * t->index, m->period,
	                  m->cfg.max_skid);
}

/*
 * Learn where the kernel writes behind t's back (TCB above fs_base, rseq
 * area); pages there are never protected, so re-pin when they move.
 */
static void refresh_tcb(monitor *m, mon_thread *t, const struct user_regs_struct *r)
{
	struct rseq_conf rc;
	uint64_t old_fs = t->fs_base, old_rseq = t->rseq_addr;
	t->fs_base = r->fs_base;
	if (mon_ptrace(PTRACE_GET_RSEQ_CONFIGURATION, t->tid, (void *)sizeof rc, &rc) > 0 &&
	    rc.rseq_abi_pointer) {
		t->rseq_addr = rc.rseq_abi_pointer;
		t->rseq_len = rc.rseq_abi_size ? rc.rseq_abi_size : 32;
	}
	if (t->fs_base != old_fs || t->rseq_addr != old_rseq) {
		mprot_maps_changed(&m->eng);
		m->sync_needed = true;
	}
}

/* ------------------------------------------------------------ sample ends */

void step_end_sample(monitor *m, uint64_t id, uint64_t clock, uint64_t pc, bool by_fault)
{
	lomas_sample *s = &m->samples.items[id];
	if (s->state != LOMAS_SAMPLE_DANGLING || clock <= s->start)
		return;
	s->state = LOMAS_SAMPLE_REUSED;
	s->end = clock;
	s->end_pc = pc;
	if (by_fault)
		m->stats.reuse_by_fault++;
	else
		m->stats.reuse_by_decode++;
}

static void mark_cross(monitor *m, uint64_t line, uint32_t thread)
{
	uint64_t ids[8];
	size_t n = watch_table_others(&m->eng.table, line, thread, ids, 8);
	for (size_t i = 0; i < n && i < 8; i++) {
		m->samples.items[ids[i]].flags |= LOMAS_SAMPLE_CROSS_THREAD;
		m->stats.cross_thread++;
	}
}

/* The lines [first, last] a reference touches. */
static void ref_lines(const monitor *m, const decode_ref *r, uint64_t *l0, uint64_t *l1)
{
	uint64_t mask = m->eng.table.line_mask;
	*l0 = r->addr & mask;
	*l1 = (r->addr + (r->size ? r->size - 1 : 0)) & mask;
	if (*l1 - *l0 > m->cfg.line_size)
		*l1 = *l0 + m->cfg.line_size; /* at most two lines per reference */
}

static void start_sample(monitor *m, mon_thread *t, const decode_insn *in, unsigned j, uint64_t c0)
{
	const decode_ref *r = &in->refs[j];
	uint64_t clock = c0 + j, pc = in->pc;
	lomas_sample s = {.start = clock,
	                  .end = LOMAS_CLOCK_NONE,
	                  .addr = r->addr,
	                  .start_pc = pc,
	                  .weight = m->period,
	                  .thread = t->index,
	                  .kind = r->kind,
	                  .state = LOMAS_SAMPLE_DANGLING};
	watch_entry old;
	bool displaced = false;
	uint64_t id = m->samples.n;
	lomas_status st;
	if (vec_reserve(&m->samples, m->samples.n + 1)) {
		mon_fail(m, error_set(LOMAS_ENOMEM, "the step clock ran out of memory"));
		return;
	}
	m->samples.items[m->samples.n++] = s;
	if (m->dreg_mode) {
		dwatch_start(m, t, id, in, j, c0);
		return;
	}
	st = mprot_watch(&m->eng, r->addr, t->index, id, &old, &displaced);
	if (st) {
		/* Not mapped (a bad decode) or out of memory: record, never drop. */
		lomas_sample *x = &m->samples.items[id];
		x->state = LOMAS_SAMPLE_CENSORED;
		x->end = clock + 1;
		error_clear();
		return;
	}
	if (mprot_is_pinned(&m->eng, r->addr))
		m->stats.unwatchable++;
	m->sync_needed = true;
	if (displaced) {
		lomas_sample *o = &m->samples.items[old.sample];
		if (old.thread == t->index && old.line == (r->addr & m->eng.table.line_mask)) {
			step_end_sample(m, old.sample, clock, pc, false);
		} else if (o->state == LOMAS_SAMPLE_DANGLING) {
			/* Evicted for lack of a slot: censored, end = its thread's clock now. */
			uint64_t now =
			    old.thread < m->threads.n ? m->threads.items[old.thread].clock : clock;
			o->state = LOMAS_SAMPLE_CENSORED;
			o->end = now > o->start ? now : o->start + 1;
		}
	}
}

void step_start_at(monitor *m, mon_thread *t, uint64_t clock, uint64_t pc, uint64_t addr,
                   uint8_t kind)
{
	decode_insn in;
	memset(&in, 0, sizeof in);
	in.pc = pc;
	in.nrefs = 1;
	in.refs[0] = (decode_ref){.addr = addr, .size = 1, .kind = kind};
	start_sample(m, t, &in, 0, clock);
}

/* The pending instruction retired: count its references, end and start samples. */
void step_commit(monitor *m, mon_thread *t)
{
	const decode_insn *in = &t->pending;
	uint64_t c0 = t->pending_c0;
	unsigned idx[DECODE_MAX_REFS], nidx, si = 0;
	bool relaxed = m->eng.lift_events != t->resume_epoch || m->eng.lift_depth > 0;
	if (m->dreg_mode)
		dwatch_commit(m, t, in, c0);
	nidx = m->pmu_mode ? pmu_commit(m, t, in, c0, idx)
	                   : step_sampler_commit(&t->sampler, c0, in->nrefs, idx);
	for (unsigned j = 0; j < in->nrefs; j++) {
		const decode_ref *r = &in->refs[j];
		uint64_t l0, l1;
		ref_lines(m, r, &l0, &l1);
		for (uint64_t l = l0;; l = l1) {
			watch_entry e;
			if (watch_table_page_count(&m->eng.table, l) &&
			    (relaxed || !mprot_is_certain(&m->eng, l))) {
				if (watch_table_remove(&m->eng.table, l, t->index, &e)) {
					bool by_fault =
					    t->fault_page &&
					    (l & m->eng.table.page_mask) == t->fault_page;
					step_end_sample(m, e.sample, c0 + j, in->pc, by_fault);
					m->sync_needed = true;
				}
				mark_cross(m, l, t->index);
			}
			if (l == l1)
				break;
		}
		if (si < nidx && idx[si] == j) {
			si++;
			start_sample(m, t, in, j, c0);
		}
	}
	t->clock = c0 + in->nrefs;
	t->have_pending = false;
	t->fault_page = 0;
}

/*
 * A fault on a page we protected: lift the page for one step of t. The
 * samples it reuses end when the instruction retires (step_commit(), which checks
 * the lifted page's lines against the decoded references), not here: an
 * instruction that faults may still never retire (a genuine fault behind
 * ours: a write to the program's own read-only page, whose handler
 * siglongjmps away), and a reference that never happened ends nothing.
 */
void step_our_fault(monitor *m, mon_thread *t, uint64_t addr)
{
	uint64_t page = addr & m->eng.table.page_mask;
	bool watched = false;
	if (t->have_pending) {
		const decode_insn *in = &t->pending;
		for (unsigned j = 0; j < in->nrefs; j++) {
			uint64_t l0, l1;
			ref_lines(m, &in->refs[j], &l0, &l1);
			for (uint64_t l = l0;; l = l1) {
				if ((l & m->eng.table.page_mask) == page &&
				    watch_table_find(&m->eng.table, l, t->index, NULL))
					watched = true;
				if (l == l1)
					break;
			}
		}
	}
	/*
	 * No decoded reference of the instruction touches a line of the page t
	 * watches: an instruction fetch, a touch of another line (false
	 * positive), or an access the decoder does not model. The clock counts
	 * decoded references only, so the last is not a reuse point either.
	 */
	if (!watched)
		m->eng.stats.false_positives++;
	t->fault_page = page;
	mprot_fault_lift(&m->eng, addr, t->index);
	m->sync_needed = true;
}

static bool is_mem_syscall(long nr)
{
	return nr == SYS_mmap || nr == SYS_munmap || nr == SYS_mprotect || nr == SYS_mremap ||
	       nr == SYS_brk || nr == SYS_shmat || nr == SYS_shmdt || nr == SYS_pkey_mprotect ||
	       nr == SYS_arch_prctl || nr == SYS_rseq || nr == SYS_clone || nr == SYS_clone3 ||
	       nr == SYS_set_tid_address || nr == SYS_madvise;
}

/* Drop the lifts t holds and the pages it stepped over (t is stopped). */
void step_release(monitor *m, mon_thread *t, bool syscall_done)
{
	if (t->delivering) {
		/* The handler's mask is in force now: SIGSEGV may be blocked in it. */
		sig_guard_thread(m, t);
		t->delivering = false;
		if (m->eng.lift_depth > 0)
			m->eng.lift_depth--;
		m->sync_needed = true;
	}
	if (t->in_syscall && syscall_done) {
		struct user_regs_struct r;
		if (is_mem_syscall(t->sysno)) {
			/* Still lifted: /proc/PID/maps shows the target's own protections. */
			if (maps_read(&m->maps, m->pid) == LOMAS_OK)
				mprot_maps_changed(&m->eng);
			decoder_invalidate(m->dec, 0, UINT64_MAX);
			if (mon_ptrace(PTRACE_GETREGS, t->tid, NULL, &r) == 0)
				refresh_tcb(m, t, &r);
			mprot_maps_changed(&m->eng);
		}
		/* Before this call's lift goes: its mask or disposition may need one. */
		sig_guard_thread(m, t);
		if (t->sysno == SYS_rt_sigaction)
			sig_refresh_ignored(m);
		t->in_syscall = false;
		if (m->eng.lift_depth > 0)
			m->eng.lift_depth--;
		m->sync_needed = true;
	}
	mprot_fault_done(&m->eng, t->index);
}

/*
 * Is t stopped inside a system call that will restart when it runs on? The
 * -ERESTART* values are never returned to the program; they show only while
 * the call's signal is being handled (include/linux/errno.h).
 */
static bool restarting(const struct user_regs_struct *r)
{
	long ax = (long)r->rax;
	return (long)r->orig_rax >= 0 &&
	       (ax == -512 || ax == -513 || ax == -514 || ax == -516); /* ERESTARTSYS...BLOCK */
}

/* Decode the instruction at t's rip into t->pending. */
static lomas_status decode_next(monitor *m, mon_thread *t)
{
	struct user_regs_struct r;
	lomas_status st;
	/* After a free run the clock is the counters' (the pmu clock): read it first. */
	if (m->pmu_mode && t->pmu.ran_free)
		pmu_sync(m, t);
	if (mon_ptrace(PTRACE_GETREGS, t->tid, NULL, &r) < 0)
		return error_set(LOMAS_ETARGET, "PTRACE_GETREGS(%d): %s", (int)t->tid,
		                 strerror(errno));
	if (t->fs_base != r.fs_base)
		refresh_tcb(m, t, &r);
	if (restarting(&r)) {
		/*
		 * A system call interrupted by a signal (reported to us even when
		 * the program ignores it), a group-stop or an interrupt: when t
		 * runs on without a handler, the kernel restarts it (rip - 2, or
		 * restart_syscall; arch_do_signal_or_restart()). What runs next is
		 * that call, which references nothing we count and must run lifted
		 * like any call; a handler's entry would end the step unretired.
		 */
		memset(&t->pending, 0, sizeof t->pending);
		t->pending.pc = r.rip - 2;
		t->pending.len = 2;
		t->pending.syscall = true;
		r.rax = r.orig_rax;
		st = LOMAS_OK;
	} else {
		st = decoder_at(m->dec, t->tid, &r, &t->pending);
	}
	if (st && (mprot_is_ours(&m->eng, r.rip) || mprot_is_ours(&m->eng, r.rip + 14))) {
		/* Code on a page we protected: the fetch itself touches the page. */
		uint64_t a = mprot_is_ours(&m->eng, r.rip) ? r.rip : r.rip + 14;
		m->eng.stats.false_positives++;
		mprot_fault_lift(&m->eng, a, t->index);
		st = decoder_at(m->dec, t->tid, &r, &t->pending);
	}
	if (st) {
		/* Not an instruction we can decode: it will fault (SIGILL) or run uncounted. */
		memset(&t->pending, 0, sizeof t->pending);
		t->pending.pc = r.rip;
		/*
		 * The vsyscall page (execute-only, unreadable): the kernel emulates
		 * gettimeofday, time or getcpu there and writes the caller's buffer;
		 * a page of ours there would earn the program a SIGSEGV
		 * (arch/x86/entry/vsyscall/vsyscall_64.c). Lifted like a call.
		 */
		t->pending.syscall =
		    r.rip >= 0xffffffffff600000ull && r.rip < 0xffffffffff601000ull;
		error_clear();
	}
	if (decode_has_opmask(&t->pending)) {
		/* An AVX-512 masked move touches only the elements its mask selects
		 * (decode_mask.c); unread, it keeps its full size. */
		uint64_t k[8];
		if (decode_read_opmask(t->tid, k) == LOMAS_OK) {
			m->stats.masked++;
		} else {
			memset(k, 0xff, sizeof k);
			m->stats.mask_unread++;
			error_clear();
		}
		decode_apply_opmask(&t->pending, k);
	}
	t->pending_c0 = t->clock;
	t->have_pending = true;
	if (t->pending.syscall && !t->in_syscall) {
		t->in_syscall = true;
		t->sysno = (long)r.rax;
		mprot_lift(&m->eng);
	}
	return LOMAS_OK;
}

lomas_status step_decode(monitor *m, mon_thread *t)
{
	return t->have_pending ? LOMAS_OK : decode_next(m, t);
}

lomas_status step_run_cpuid(monitor *m, mon_thread *t)
{
	lomas_status st;
	while (t->have_pending && decode_is_cpuid(&t->pending)) {
		if ((st = decode_run_cpuid(t->tid, &t->pending)))
			return st;
		m->stats.cpuid_run++;
		if (m->pmu_mode)
			t->pmu.clock_step = false; /* nothing stepped: no trap to note */
		step_commit(m, t);                 /* no references: the clock stays */
		if ((st = decode_next(m, t)))
			return st;
	}
	return LOMAS_OK;
}

/* A signal t could not be resumed with: held again, first (the next resume or detach). */
static void keep_signal(monitor *m, mon_thread *t, int sig, const siginfo_t *si)
{
	siginfo_t plain;
	if (!sig)
		return;
	if (!si) {
		memset(&plain, 0, sizeof plain);
		plain.si_signo = sig;
		si = &plain;
	}
	sig_hold_first(m, t, si);
}

/*
 * The held signal to deliver at this resume into *h (0: none). The
 * monitor's own (the counter's overflow, a breakpoint's) are taken, one per
 * resume. Only a signal-delivery-stop delivers one: elsewhere the program's
 * are queued to the kernel again, to come back as signal-delivery-stops (a
 * blocking call they should interrupt sees them pending).
 */
static int held_signal(monitor *m, mon_thread *t, mon_held *h)
{
	while (sig_held_take(t, h)) {
		int sig = h->si.si_signo;
		if ((m->pmu_mode && pmu_take_signal(m, t, sig, &h->si, h->noted)) ||
		    (m->dreg_mode && dwatch_take_signal(m, t, sig, &h->si)))
			return 0;
		if (t->at_sigstop)
			return sig;
		sig_resend(m, t, &h->si);
	}
	return 0;
}

/* Resume t with a single-step, delivering sig (with its siginfo) if non-zero. */
lomas_status step_resume(monitor *m, mon_thread *t, int sig, siginfo_t *si)
{
	lomas_status st;
	mon_held held;
	bool step = true;
	if (m->pmu_mode) {
		/*
		 * The pmu clock decodes only what it steps: a signal to deliver,
		 * an instruction the monitor must step, a point near; else the
		 * thread runs free (pmu_resume).
		 */
		bool need = sig || t->held.n || t->pmu.force_step;
		if (need && !t->have_pending && (st = decode_next(m, t)))
			return keep_signal(m, t, sig, si), st;
		step = pmu_wants_step(m, t, need);
	}
	if (step && !t->have_pending && (st = decode_next(m, t)))
		return keep_signal(m, t, sig, si), st;
	if (m->sync_needed) {
		m->sync_needed = false;
		mprot_sync(&m->eng);
	}
	/*
	 * A signal that arrived during an injection is delivered now, before the
	 * thread runs on, so the kernel still sees an interrupted call's
	 * -ERESTART* value and fixes it up as it would have.
	 */
	if (!sig && (sig = held_signal(m, t, &held)))
		si = &held.si;
	/*
	 * CPUID runs here, not stepped: its step trap may be lost
	 * (decode_cpuid.c). After the queued signal: an overflow taken there
	 * leaves a plain step of the pending instruction.
	 */
	if (step && !sig && (st = step_run_cpuid(m, t)))
		return st;
	if (sig) {
		/* No signal frame may land on a page we protected: lift all until the next stop. */
		t->delivering = true;
		mprot_lift(&m->eng);
		if (si)
			mon_ptrace(PTRACE_SETSIGINFO, t->tid, NULL, si);
		m->stats.signals++;
	}
	if (t->group_stop) {
		/* A call injected from t met a group-stop (ptrace.c): t takes part in it. */
		keep_signal(m, t, sig, si);
		if (sig) {
			t->delivering = false;
			if (m->eng.lift_depth > 0)
				m->eng.lift_depth--;
		}
		return step_group_stop(m, t, false);
	}
	t->resume_epoch = m->eng.lift_events;
	if (m->pmu_mode ? pmu_resume(m, t, sig, step) < 0
	                : mon_ptrace(PTRACE_SINGLESTEP, t->tid, NULL, (void *)(long)sig) < 0) {
		st = error_set(LOMAS_ETARGET, "%s(%d): %s",
		               m->pmu_mode && !t->pmu.clock_step ? "resume" : "PTRACE_SINGLESTEP",
		               (int)t->tid, strerror(errno));
		keep_signal(m, t, sig, si);
		return st;
	}
	if (!m->pmu_mode || t->pmu.clock_step)
		m->stats.steps++;
	t->state = MT_RUNNING;
	return LOMAS_OK;
}

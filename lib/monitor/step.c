/*
 * The step clock (DESIGN §3): every thread is single-stepped; each
 * instruction is decoded before it runs and its references are counted when
 * it retires (the step report). Samples start at the points the sampler
 * chooses; the sampled line is watched by the mprotect engine, and REUSE IS
 * DETECTED BY THE FAULT: the fault's page and the faulting instruction's
 * decoded references say which reference (its clock) touched the line.
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

#ifndef TRAP_TRACE
#define TRAP_TRACE 2
#endif
#ifndef TRAP_BRKPT
#define TRAP_BRKPT 1
#endif

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
	if (mon_inject(m, t, SYS_mprotect, args, &ret))
		return -EIO;
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
	if (cfg->watch == WATCH_DEBUGREG)
		return error_set(LOMAS_ENOTSUP, "the debugreg watch engine is not built yet; use "
		                                "watch=mprotect with the step clock");
	if ((st = decoder_new(&m->dec)))
		return st;
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

static void thread_clock_init(monitor *m, mon_thread *t)
{
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
	if (ptrace(PTRACE_GET_RSEQ_CONFIGURATION, t->tid, (void *)sizeof rc, &rc) > 0 &&
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

static void end_sample(monitor *m, uint64_t id, uint64_t clock, uint64_t pc, bool by_fault)
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

static void start_sample(monitor *m, mon_thread *t, uint64_t clock, const decode_ref *r,
                         uint64_t pc)
{
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
		m->error = LOMAS_ENOMEM;
		return;
	}
	m->samples.items[m->samples.n++] = s;
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
			end_sample(m, old.sample, clock, pc, false);
		} else if (o->state == LOMAS_SAMPLE_DANGLING) {
			/* Evicted for lack of a slot: censored, end = its thread's clock now. */
			uint64_t now =
			    old.thread < m->threads.n ? m->threads.items[old.thread].clock : clock;
			o->state = LOMAS_SAMPLE_CENSORED;
			o->end = now > o->start ? now : o->start + 1;
		}
	}
}

/* The pending instruction retired: count its references, end and start samples. */
static void commit(monitor *m, mon_thread *t)
{
	const decode_insn *in = &t->pending;
	uint64_t c0 = t->pending_c0;
	unsigned idx[DECODE_MAX_REFS], nidx, si = 0;
	bool relaxed = m->eng.lift_events != t->resume_epoch || m->eng.lift_depth > 0;
	nidx = step_sampler_commit(&t->sampler, c0, in->nrefs, idx);
	for (unsigned j = 0; j < in->nrefs; j++) {
		const decode_ref *r = &in->refs[j];
		uint64_t l0, l1;
		ref_lines(m, r, &l0, &l1);
		for (uint64_t l = l0;; l = l1) {
			watch_entry e;
			if (watch_table_page_count(&m->eng.table, l) &&
			    (relaxed || !mprot_is_ours(&m->eng, l))) {
				if (watch_table_remove(&m->eng.table, l, t->index, &e)) {
					bool by_fault =
					    t->fault_page &&
					    (l & m->eng.table.page_mask) == t->fault_page;
					end_sample(m, e.sample, c0 + j, in->pc, by_fault);
					m->sync_needed = true;
				}
				mark_cross(m, l, t->index);
			}
			if (l == l1)
				break;
		}
		if (si < nidx && idx[si] == j) {
			si++;
			start_sample(m, t, c0 + j, r, in->pc);
		}
	}
	t->clock = c0 + in->nrefs;
	t->have_pending = false;
	t->fault_page = 0;
}

/*
 * A fault on a page we protected: lift the page for one step of t. The
 * samples it reuses end when the instruction retires (commit(), which checks
 * the lifted page's lines against the decoded references), not here: an
 * instruction that faults may still never retire (a genuine fault behind
 * ours: a write to the program's own read-only page, whose handler
 * siglongjmps away), and a reference that never happened ends nothing.
 */
static void our_fault(monitor *m, mon_thread *t, uint64_t addr)
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
static void release(monitor *m, mon_thread *t, bool syscall_done)
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
			if (ptrace(PTRACE_GETREGS, t->tid, NULL, &r) == 0)
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

/* Decode the instruction at t's rip into t->pending. */
static lomas_status decode_next(monitor *m, mon_thread *t)
{
	struct user_regs_struct r;
	lomas_status st;
	if (ptrace(PTRACE_GETREGS, t->tid, NULL, &r) < 0)
		return error_set(LOMAS_ETARGET, "PTRACE_GETREGS(%d): %s", (int)t->tid,
		                 strerror(errno));
	if (t->fs_base != r.fs_base)
		refresh_tcb(m, t, &r);
	st = decoder_at(m->dec, t->tid, &r, &t->pending);
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
		error_clear();
	}
	t->pending_c0 = t->clock;
	t->have_pending = true;
	if (t->pending.syscall && !t->in_syscall) {
		t->in_syscall = true;
		t->sysno = (long)r.orig_rax == -1 ? (long)r.rax : (long)r.rax;
		mprot_lift(&m->eng);
	}
	return LOMAS_OK;
}

/* Resume t with a single-step, delivering sig (with its siginfo) if non-zero. */
static lomas_status resume_step(monitor *m, mon_thread *t, int sig, siginfo_t *si)
{
	lomas_status st;
	if (!t->have_pending && (st = decode_next(m, t)))
		return st;
	if (m->sync_needed) {
		m->sync_needed = false;
		mprot_sync(&m->eng);
	}
	/*
	 * A signal that arrived during an injection is delivered now, before the
	 * thread runs on, so the kernel still sees an interrupted call's
	 * -ERESTART* value and fixes it up as it would have.
	 */
	if (!sig && t->queued_sig) {
		t->queued_sig = false;
		sig = t->queued.si_signo;
		si = &t->queued;
	}
	if (sig) {
		/* No signal frame may land on a page we protected: lift all until the next stop. */
		t->delivering = true;
		mprot_lift(&m->eng);
		if (si)
			ptrace(PTRACE_SETSIGINFO, t->tid, NULL, si);
		m->stats.signals++;
	}
	t->resume_epoch = m->eng.lift_events;
	if (ptrace(PTRACE_SINGLESTEP, t->tid, NULL, (void *)(long)sig) < 0)
		return error_set(LOMAS_ETARGET, "PTRACE_SINGLESTEP(%d): %s", (int)t->tid,
		                 strerror(errno));
	m->stats.steps++;
	t->state = MT_RUNNING;
	return LOMAS_OK;
}

static void handle_exec(monitor *m, mon_thread *t)
{
	for (size_t i = 0; i < m->threads.n; i++) {
		mon_thread *o = &m->threads.items[i];
		if (o != t && o->state != MT_GONE)
			o->state = MT_GONE; /* exec ended every other thread */
		o->in_syscall = o->delivering = o->queued_sig = o->segv_lift = false;
	}
	m->segv_ignored = false;
	t->have_pending = false;
	t->fs_base = 0;
	t->rseq_addr = 0;
	mprot_forget_all(&m->eng);
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

lomas_status step_begin(monitor *m)
{
	lomas_status st;
	if ((st = maps_read(&m->maps, m->pid)))
		return st;
	sig_refresh_ignored(m);
	for (size_t i = 0; i < m->threads.n; i++) {
		mon_thread *t = &m->threads.items[i];
		thread_clock_init(m, t);
		if (t->state == MT_STOPPED)
			sig_guard_thread(m, t);
	}
	for (size_t i = 0; i < m->threads.n; i++) {
		mon_thread *t = &m->threads.items[i];
		if (t->state != MT_STOPPED)
			continue;
		m->cur_tid = t->tid;
		if ((st = resume_step(m, t, 0, NULL)))
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
 * killed under it hung so, once in twenty kills).
 */
lomas_status step_handle(monitor *m, mon_thread *t, int status, bool detaching)
{
	pid_t tid = t->tid;
	lomas_status st = handle_stop(m, t, status, detaching);
	mon_thread *u;
	if (st == LOMAS_ETARGET && !detaching && (u = mon_thread_of(m, tid)) &&
	    u->state == MT_STOPPED)
		u->state = MT_RUNNING;
	return st;
}

static lomas_status handle_stop(monitor *m, mon_thread *t, int status, bool detaching)
{
	pid_t tid = t->tid;
	int sig, ev;
	siginfo_t si;
	m->cur_tid = tid;
	if (WIFEXITED(status) || WIFSIGNALED(status)) {
		if (t->delivering && m->eng.lift_depth > 0)
			m->eng.lift_depth--;
		if (t->in_syscall && m->eng.lift_depth > 0)
			m->eng.lift_depth--;
		t->delivering = t->in_syscall = false;
		sig_forget_thread(m, t);
		mon_reap(m, t, status);
		m->sync_needed = true;
		return LOMAS_OK;
	}
	if (!WIFSTOPPED(status))
		return LOMAS_OK;
	sig = WSTOPSIG(status);
	ev = status >> 16;
	t->state = MT_STOPPED;
	switch (ev) {
	case PTRACE_EVENT_EXIT:
		/* Keep its lifts: the kernel still writes clear_child_tid while it exits. */
		t->have_pending = false;
		t->state = MT_EXITING;
		if (!detaching)
			ptrace(PTRACE_CONT, tid, NULL, NULL);
		return LOMAS_OK;
	case PTRACE_EVENT_CLONE: {
		unsigned long nt = 0;
		mon_thread *n;
		if (ptrace(PTRACE_GETEVENTMSG, tid, NULL, &nt) == 0 && nt &&
		    !mon_thread_of(m, (pid_t)nt)) {
			if (mon_add_thread(m, (pid_t)nt, &n))
				return m->error = LOMAS_ENOMEM;
			thread_clock_init(m, n);
			t = mon_thread_of(m, tid); /* the array may have moved */
		}
		return detaching ? LOMAS_OK : resume_step(m, t, 0, NULL);
	}
	case PTRACE_EVENT_EXEC:
		handle_exec(m, t);
		return detaching ? LOMAS_OK : resume_step(m, t, 0, NULL);
	case PTRACE_EVENT_STOP:
		if (is_stop_signal(sig)) {
			/* Group-stop: stay stopped until SIGCONT (PTRACE_LISTEN), as natively. */
			t->have_pending = false;
			release(m, t, true);
			if (m->sync_needed && !detaching) {
				m->sync_needed = false;
				mprot_sync(&m->eng);
			}
			t->state = MT_LISTEN;
			if (!detaching)
				ptrace(PTRACE_LISTEN, tid, NULL, NULL);
			return LOMAS_OK;
		}
		/* An interrupt, a new thread's first stop, or the end of a group-stop. */
		if (detaching)
			return LOMAS_OK;
		sig_guard_thread(m, t);
		return resume_step(m, t, 0, NULL);
	default: break;
	}
	if (ptrace(PTRACE_GETSIGINFO, tid, NULL, &si) < 0)
		memset(&si, 0, sizeof si);
	if (sig == SIGTRAP &&
	    (si.si_code == TRAP_TRACE || si.si_code == TRAP_BRKPT || si.si_code == SIGTRAP)) {
		/* Our step report: the pending instruction retired (or a handler was entered). */
		bool retired = si.si_code != SIGTRAP && t->have_pending;
		t->segv_retry = 0;
		if (retired)
			commit(m, t);
		t->have_pending = false;
		t->fault_page = 0;
		release(m, t, true);
		return detaching ? LOMAS_OK : resume_step(m, t, 0, NULL);
	}
	if (sig == SIGSEGV && si.si_code > 0 && mprot_is_ours(&m->eng, (uint64_t)si.si_addr)) {
		our_fault(m, t, (uint64_t)si.si_addr);
		if (detaching)
			return LOMAS_OK;
		/* Step the same instruction again, now that the page is lifted. */
		if (m->sync_needed) {
			m->sync_needed = false;
			mprot_sync(&m->eng);
		}
		t->resume_epoch = m->eng.lift_events - 1; /* the fault lifted a page: relaxed */
		if (ptrace(PTRACE_SINGLESTEP, tid, NULL, NULL) < 0)
			return error_set(LOMAS_ETARGET, "PTRACE_SINGLESTEP(%d): %s", (int)tid,
			                 strerror(errno));
		m->stats.steps++;
		t->state = MT_RUNNING;
		return LOMAS_OK;
	}
	if (sig == SIGSEGV && si.si_code > 0 && !detaching && t->have_pending &&
	    t->segv_retry != (uint64_t)si.si_addr + 1 &&
	    mprot_is_lifted(&m->eng, (uint64_t)si.si_addr)) {
		/*
		 * The page was ours when the access faulted, but another thread lifted
		 * it since: run the instruction again; if it still faults, it is genuine.
		 */
		t->segv_retry = (uint64_t)si.si_addr + 1;
		m->eng.stats.faults++;
		t->resume_epoch = m->eng.lift_events - 1;
		if (ptrace(PTRACE_SINGLESTEP, tid, NULL, NULL) < 0)
			return error_set(LOMAS_ETARGET, "PTRACE_SINGLESTEP(%d): %s", (int)tid,
			                 strerror(errno));
		m->stats.steps++;
		t->state = MT_RUNNING;
		return LOMAS_OK;
	}
	t->segv_retry = 0;
	/* A genuine signal: the pending instruction did not run; deliver it unchanged. */
	t->have_pending = false;
	t->fault_page = 0;
	release(m, t, true);
	if (detaching) {
		t->queued = si;
		t->queued_sig = true;
		return LOMAS_OK;
	}
	return resume_step(m, t, sig, &si);
}

lomas_status step_restore(monitor *m, mon_thread *t)
{
	lomas_status st;
	m->cur_tid = t->tid;
	m->eng.lift_depth = 0;
	st = mprot_restore_all(&m->eng);
	mon_drop_scratch(m, t);
	return st;
}

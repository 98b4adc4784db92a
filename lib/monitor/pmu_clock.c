/*
 * The pmu clock (docs/architecture.md, the clocks, issue 20): each thread's load/store counters
 * (perf_event, libpfm4 encodings) overflow at exponentially distributed
 * sample points; the overflow, routed to the thread (F_SETOWN_EX with
 * F_OWNER_TID, F_SETSIG, O_ASYNC), arrives as a signal stop that the
 * monitor swallows. Skid compensation: the shared planner arms the overflow
 * pmargin counts early; at the stop the thread is single-stepped, reading
 * the counter after each step, until the count reaches the point; the
 * decoded instruction there holds the sampled reference. Every count read
 * goes through the thread's ledgers, which subtract what the monitor's own
 * steps, faults, traps and injected calls added (calibrated at start,
 * pmu_calib.c). Reuse is found by the mprotect engine as under the step
 * clock, at clocks read from the counters.
 *
 * All perf system calls go through pmu_sys() (lib/pmu), so the replay
 * kernel can stand in for a PMU. A thread's shadow counter (skid_counter in
 * raw counts, no skid) mirrors what the kernel was told: an overflow signal
 * whose overflow the shadow has not reached is stale (a period changed
 * after the interrupt was raised) and ignored; an overflow the shadow has
 * reached while the clock was stepping is taken when stepping ends
 * (2.6.36's period semantics arm one overflow ahead).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <sys/ptrace.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "monitor.h"

/* The seed's Nehalem skid was 5-10 references; leave room beyond it. */
#define PMU_DEFAULT_SKID 16

static skid_semantics kernel_semantics(void)
{
	struct utsname u;
	int maj = 0, min = 0;
	if (uname(&u) == 0 && sscanf(u.release, "%d.%d", &maj, &min) == 2 &&
	    (maj < 3 || (maj == 3 && min < 14)))
		return SKID_PERIOD_NEXT_OVERFLOW; /* perf_event_open(2): since Linux 3.14 */
	return SKID_PERIOD_IMMEDIATE;
}

lomas_status pmu_clock_init(monitor *m, const struct lomas_config *cfg)
{
	lomas_status st;
	if ((st = pmu_table_get(NULL, cfg->events, &m->ptab)))
		return st;
	m->pmu_mode = true;
	m->psys = pmu_sys();
	m->psig = SIGRTMAX;
	m->pmargin = (cfg->max_skid ? cfg->max_skid : PMU_DEFAULT_SKID) + DECODE_MAX_REFS;
	m->psem = cfg->period_sem == PERIOD_SEM_NEXT_OVERFLOW ? SKID_PERIOD_NEXT_OVERFLOW
	          : cfg->period_sem == PERIOD_SEM_IMMEDIATE   ? SKID_PERIOD_IMMEDIATE
	                                                      : kernel_semantics();
	if (cfg->pmu_sample == PMU_SAMPLE_DOUBLE_TRAP) {
		if (m->psem != SKID_PERIOD_IMMEDIATE)
			return error_set(LOMAS_ENOTSUP,
			                 "pmu_sample=double_trap arms each point again after the "
			                 "monitor's perturbations, which needs "
			                 "PERF_EVENT_IOC_PERIOD to apply at once (Linux >= 3.14, "
			                 "period_semantics=immediate); use pmu_sample=skid");
		m->pmargin = 0;
	}
	if (cfg->pmu_sample == PMU_SAMPLE_PRECISE) {
		/* AMD: IBS op, where it counts ops (sampling by cycles would favour slow ones). */
		m->pibs = pmu_precise_ibs(&m->ptab);
		if (!m->ptab.pebs_addr && !m->pibs)
			return error_set(
			    LOMAS_ENOTSUP,
			    "pmu_sample=precise: %s has no PEBS with the data address%s; "
			    "use pmu_sample=skid",
			    m->ptab.pmu,
			    m->ptab.ibs_op
			        ? " and its IBS op counts cycles only (no cnt_ctl format)"
			        : " nor IBS op");
		if (m->psem != SKID_PERIOD_IMMEDIATE)
			return error_set(LOMAS_ENOTSUP,
			                 "pmu_sample=precise arms each point again after the "
			                 "monitor's perturbations, which needs "
			                 "PERF_EVENT_IOC_PERIOD to apply at once (Linux >= 3.14, "
			                 "period_semantics=immediate); use pmu_sample=skid");
		m->pmargin = 0; /* the record names the point itself: no approach */
	}
	return LOMAS_OK;
}

void pmu_clock_free(monitor *m)
{
	for (size_t i = 0; i < m->threads.n; i++)
		pmu_thread_end(m, &m->threads.items[i]);
}

/* Is signal sig pending for thread tid and not blocked there (/proc status)? */
static bool deliverable(pid_t pid, pid_t tid, int sig)
{
	char path[96], line[256];
	unsigned long long pnd = 0, blk = 0, bit = 1ull << (sig - 1);
	FILE *f;
	snprintf(path, sizeof path, "/proc/%d/task/%d/status", (int)pid, (int)tid);
	if (!(f = fopen(path, "re")))
		return false;
	while (fgets(line, sizeof line, f)) {
		if (!strncmp(line, "SigPnd:", 7))
			pnd = strtoull(line + 7, NULL, 16);
		else if (!strncmp(line, "SigBlk:", 7))
			blk = strtoull(line + 7, NULL, 16);
	}
	fclose(f);
	return (pnd & bit) && !(blk & bit);
}

/* A held overflow (noted when held), or any SIGRTMAX the kernel or a counter sent. */
static bool overflow_signal(monitor *m, mon_thread *t, const mon_held *h)
{
	(void)t;
	return h->noted ||
	       (h->si.si_signo == m->psig &&
	        (h->si.si_code <= 0 || h->si.si_code == POLL_IN || h->si.si_code == POLL_HUP));
}

/*
 * Before the monitor lets the target go: close every counter (no overflow
 * may signal a program we no longer trace: its default action ends it),
 * take the overflow signals already sent to stopped threads (a
 * signal-delivery-stop, then nothing is delivered) and drop those kept from
 * an injected call. A signal the thread blocks cannot be taken: it stays
 * pending (README, pmu clock limits).
 */
void pmu_detach(monitor *m)
{
	pmu_dtrap_detach(m);
	pmu_clock_free(m);
	for (size_t i = 0; i < m->threads.n; i++) {
		mon_thread *t = &m->threads.items[i];
		int status;
		sig_held_drop(m, t, overflow_signal);
		/*
		 * A realtime overflow signal queues once per overflow (F_SETSIG):
		 * each is taken in turn, while the thread has one pending.
		 */
		for (int n = 0; n < 4096; n++) {
			if (t->state != MT_STOPPED || !deliverable(m->pid, t->tid, m->psig))
				break;
			if (mon_ptrace(PTRACE_CONT, t->tid, NULL, NULL) < 0)
				break;
			if (mon_wait_tid(m, t->tid, 2000, &status) != 1)
				break;
			if (WIFEXITED(status) || WIFSIGNALED(status)) {
				step_thread_gone(m, t);
				mon_reap(m, t, status);
			} else if (WSTOPSIG(status) != m->psig && (status >> 16) == 0) {
				/* Another signal came first: delivered again at detach. */
				siginfo_t si;
				if (mon_ptrace(PTRACE_GETSIGINFO, t->tid, NULL, &si) == 0)
					sig_hold(m, t, &si);
			}
		}
	}
}

/* Program the counter as the planner says (and the shadow with it). */
static void apply(monitor *m, pmu_stream *s, const skid_program *prog)
{
	const pmu_sys_ops *sys = m->psys;
	uint64_t v = prog->has_reload ? prog->reload : prog->period;
	if (prog->step_now)
		return; /* arm nothing: the clock steps to the point */
	sys->ioctl(sys->ctx, s->fd, PERF_EVENT_IOC_PERIOD, (unsigned long)&v);
	skid_counter_set_period(&s->shadow, v);
	s->xarm = s->xraw;
}

/*
 * Hybrid, skid mode: what the thread did on the other kinds of core since
 * a counter was armed was not counted by it, so its overflow would come
 * late. Before it runs, each counter is armed again for what is left to
 * its arm point (Linux >= 3.14 semantics), or stepped to its point when
 * that is within the margin; every point passed there is lost
 * (pmu.overshoots) and the first one ahead of the count aimed at (one
 * within the margin of the count is stepped to; one passed is not).
 */
static void hybrid_rearm(monitor *m, mon_thread *t)
{
	bool moved = false;
	for (unsigned i = 0; i < m->ptab.n; i++)
		moved |= !t->pmu.s[i].approaching;
	if (!moved)
		return;
	pmu_sync(m, t);
	if (t->have_pending)
		t->pending_c0 = t->clock;
	for (unsigned i = 0; i < m->ptab.n; i++) {
		pmu_stream *s = &t->pmu.s[i];
		uint64_t at;
		if (s->fd < 0 || s->approaching || s->xraw == s->xarm || s->shadow.pending)
			continue;
		while (s->plan.target <= s->count) {
			skid_program prog = skid_plan_next(
			    &s->plan, s->count, s->plan.next_target + rng_gap(&s->gaps, m->period));
			m->pstats.overshoots++;
			apply(m, s, &prog);
		}
		at = s->plan.target > m->pmargin ? s->plan.target - m->pmargin : 0;
		if (at <= s->count) {
			s->approaching = true; /* within the margin: step to it */
			s->plan.overflow = UINT64_MAX;
		} else {
			skid_program prog = {.period = at - s->count};
			apply(m, s, &prog);
		}
	}
}

lomas_status pmu_thread_start(monitor *m, mon_thread *t)
{
	const pmu_sys_ops *sys = m->psys;
	pmu_thread *pt = &t->pmu;
	uint64_t seed = m->cfg.seed + 0x9e3779b97f4a7c15ull * t->index;
	memset(pt, 0, sizeof *pt);
	pt->injected_noted = mon_injected_into(t->tid);
	for (unsigned i = 0; i < PMU_MAX_EVENTS; i++)
		pt->s[i].fd = -1;
	pt->ibs.fd = -1;
	for (unsigned i = 0; i < m->ptab.n; i++) {
		pmu_stream *s = &pt->s[i];
		struct perf_event_attr a = m->ptab.ev[i].attr;
		uint64_t sp0, sp1;
		lomas_status st;
		skid_program prog;
		int fd;
		/* Stream 0 draws the step clock's points (the replay test compares them). */
		rng_seed(&s->gaps, i ? seed ^ (0x2545f4914f6cdd1dull * i) : seed);
		s->kinds = m->ptab.ev[i].kinds;
		ledger_init(&s->led);
		memcpy(s->led.per_event, m->pcalib[i], sizeof s->led.per_event);
		sp0 = rng_gap(&s->gaps, m->period);
		sp1 = sp0 + rng_gap(&s->gaps, m->period);
		prog = skid_plan_start(&s->plan, m->pmargin, m->psem, 0, sp0, sp1);
		if (m->ptab.ntypes > 1) /* hybrid: sampling on the first core PMU */
			pmu_attr_for_type(&m->ptab.ev[i], m->ptab.types[0].type, &a);
		a.size = sizeof a;
		/* IBS samples: these only count, the clock's references. */
		a.sample_period = m->pibs ? 0 : prog.step_now ? (1ull << 62) : prog.period;
		a.exclude_kernel = 1;
		a.exclude_hv = 1;
		a.disabled = 0;
		a.inherit = 0;
		a.wakeup_events = 1;
		if (m->cfg.pmu_sample != PMU_SAMPLE_SKID && !m->pibs) {
			/* PEBS: 2 = zero skid requested; the record names the overflowing
			 * instruction. */
			a.precise_ip = 2;
			a.sample_type = PMU_RING_SAMPLE_TYPE;
		}
		fd = sys->open(sys->ctx, &a, t->tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
		if (fd < 0)
			return error_set(LOMAS_ENOTSUP, "perf_event_open of %s for thread %d: %s",
			                 m->ptab.ev[i].name, (int)t->tid, strerror(-fd));
		s->fd = fd;
		if (m->cfg.pmu_sample != PMU_SAMPLE_SKID && !m->pibs &&
		    (st = pmu_precise_open(m, s)))
			return st;
		skid_counter_open(&s->shadow, m->psem, 0, a.sample_period);
		/* Hybrid: the same event counted on the other core PMUs, summed in pmu_sync. */
		for (unsigned k = 1; k < m->ptab.ntypes && k < PMU_MAX_TYPES; k++) {
			struct perf_event_attr x;
			int xfd;
			pmu_attr_for_type(&m->ptab.ev[i], m->ptab.types[k].type, &x);
			x.size = sizeof x;
			x.exclude_kernel = 1;
			x.exclude_hv = 1;
			xfd = sys->open(sys->ctx, &x, t->tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
			if (xfd < 0)
				return error_set(
				    LOMAS_ENOTSUP,
				    "perf_event_open of %s on core PMU %s for thread %d: %s",
				    m->ptab.ev[i].name, m->ptab.types[k].name, (int)t->tid,
				    strerror(-xfd));
			s->xfd[s->nx++] = xfd;
		}
		if (m->pibs)
			continue;
		if (prog.has_reload)
			apply(m, s, &prog);
		s->approaching = prog.step_now;
		if ((st = pmu_route(m, fd, t->tid)))
			return st;
	}
	return m->pibs ? pmu_ibs_open(m, t, seed) : LOMAS_OK;
}

lomas_status pmu_route(monitor *m, int fd, pid_t tid)
{
	const pmu_sys_ops *sys = m->psys;
	struct f_owner_ex own = {.type = F_OWNER_TID, .pid = tid};
	if (sys->fcntl(sys->ctx, fd, F_SETOWN_EX, (unsigned long)&own) < 0 ||
	    sys->fcntl(sys->ctx, fd, F_SETSIG, (unsigned long)m->psig) < 0 ||
	    sys->fcntl(sys->ctx, fd, F_SETFL, O_ASYNC | O_NONBLOCK) < 0)
		return error_set(LOMAS_ENOTSUP,
		                 "cannot route the overflow of thread %d to it (fcntl)", (int)tid);
	return LOMAS_OK;
}

static void stream_close(const pmu_sys_ops *sys, pmu_stream *s)
{
	if (s->ring)
		sys->munmap(sys->ctx, s->ring, s->ring_len);
	s->ring = NULL;
	if (s->fd >= 0)
		sys->close(sys->ctx, s->fd);
	s->fd = -1;
	for (unsigned k = 0; k < s->nx; k++)
		sys->close(sys->ctx, s->xfd[k]);
	s->nx = 0;
}

/* Does s aim at sample points (IBS samples elsewhere: its streams only count)? */
static bool planned(const monitor *m, const pmu_stream *s)
{
	return s->fd >= 0 && !m->pibs && (m->cfg.pmu_sample == PMU_SAMPLE_SKID || s->ring);
}

/*
 * t's counters close (it exited, or we let go of it): a point its count
 * passed whose overflow was never signalled names no sample. The signal
 * comes late by the skid, so a thread that exits within the skid of its
 * last point (t_loop: a point in its last references before exit_group;
 * hybrid: one reached before the thread moved to the other kind of core,
 * whose counter then stood still until the exit) never reports it. Those
 * points are lost like any other the clock could not take, and counted
 * (pmu.overshoots), the later points the count passed with them. read:
 * the thread is stopped (its exit event, or we let go of it), its counters
 * read now; else (gone) the counts of its last stop stand. Called again for
 * a thread, it counts nothing twice (the plan has moved past the count).
 */
void pmu_points_end(monitor *m, mon_thread *t, bool read)
{
	bool any = false;
	for (unsigned i = 0; i < m->ptab.n; i++)
		any |= planned(m, &t->pmu.s[i]);
	if (!any)
		return;
	if (read)
		pmu_sync(m, t);
	for (unsigned i = 0; i < m->ptab.n; i++) {
		pmu_stream *s = &t->pmu.s[i];
		if (!planned(m, s))
			continue;
		while (s->plan.target <= s->count) {
			m->pstats.overshoots++;
			skid_plan_next(&s->plan, s->count,
			               s->plan.next_target + rng_gap(&s->gaps, m->period));
		}
	}
}

void pmu_thread_end(monitor *m, mon_thread *t)
{
	const pmu_sys_ops *sys = m->psys;
	if (!sys)
		return;
	pmu_points_end(m, t, t->state == MT_STOPPED);
	for (unsigned i = 0; i < PMU_MAX_EVENTS; i++)
		stream_close(sys, &t->pmu.s[i]);
	stream_close(sys, &t->pmu.ibs);
}

/*
 * Is si the overflow of one of t's counters (the IBS sampler's too)? One
 * signal is one counter's overflow: asked of each in turn until one owns it.
 */
static bool overflow_of(monitor *m, mon_thread *t, const siginfo_t *si)
{
	const pmu_sys_ops *sys = m->psys;
	for (unsigned i = 0; i < m->ptab.n; i++)
		if (t->pmu.s[i].fd >= 0 && sys->is_overflow(sys->ctx, t->pmu.s[i].fd, si))
			return true;
	return t->pmu.ibs.fd >= 0 && sys->is_overflow(sys->ctx, t->pmu.ibs.fd, si);
}

/* Note an event the counters saw in every ledger of t. */
static void note(monitor *m, mon_thread *t, ledger_kind k)
{
	for (unsigned i = 0; i < m->ptab.n; i++)
		ledger_note(&t->pmu.s[i].led, k, 1);
}

void pmu_sync(monitor *m, mon_thread *t)
{
	const pmu_sys_ops *sys = m->psys;
	uint64_t inj = mon_injected_into(t->tid), total = 0;
	for (unsigned i = 0; i < m->ptab.n; i++) {
		pmu_stream *s = &t->pmu.s[i];
		uint64_t raw = 0, xsum = 0;
		if (s->fd < 0)
			continue;
		if (inj > t->pmu.injected_noted)
			ledger_note(&s->led, LEDGER_SYSCALL, inj - t->pmu.injected_noted);
		if (sys->read(sys->ctx, s->fd, &raw, sizeof raw) != (ssize_t)sizeof raw)
			raw = s->shadow.count; /* unreadable: assume nothing counted */
		if (raw > s->shadow.count)
			skid_counter_advance(&s->shadow, raw - s->shadow.count, 0);
		/* Hybrid: what the thread did on the other kinds of core counts too. */
		for (unsigned k = 0; k < s->nx; k++) {
			uint64_t x = 0;
			if (sys->read(sys->ctx, s->xfd[k], &x, sizeof x) == (ssize_t)sizeof x)
				xsum += x;
		}
		if (s->nx)
			s->xraw = xsum > s->xraw ? xsum : s->xraw;
		s->count = ledger_correct(&s->led, raw + s->xraw);
		total += s->count;
	}
	t->pmu.injected_noted = inj;
	t->pmu.ran_free = false;
	m->pstats.syncs++;
	t->clock = total;
}

/* Does the reference of kind belong to stream s? */
static bool of_stream(const pmu_stream *s, uint8_t kind)
{
	return (s->kinds & (kind == LOMAS_REF_STORE ? PMU_KIND_STORES : PMU_KIND_LOADS)) != 0;
}

/*
 * s's counter overflowed (the shadow reached it): approach its point, or,
 * when the count is already there, lose it (the instruction has retired:
 * skid beyond the margin) and aim at the next one.
 */
static void take_overflow(monitor *m, pmu_stream *s)
{
	while (s->shadow.pending)
		skid_counter_ack(&s->shadow);
	for (;;) {
		skid_action a = skid_plan_overflow(&s->plan, s->count);
		skid_program prog;
		if (!a.overshot && a.remaining > 0) {
			s->approaching = true;
			return;
		}
		m->pstats.overshoots++;
		prog = skid_plan_next(&s->plan, s->count,
		                      s->plan.next_target + rng_gap(&s->gaps, m->period));
		apply(m, s, &prog);
		if (prog.step_now) {
			s->approaching = true;
			return;
		}
		if (!s->shadow.pending)
			return;
		while (s->shadow.pending)
			skid_counter_ack(&s->shadow);
	}
}

unsigned pmu_commit(monitor *m, mon_thread *t, const decode_insn *in, uint64_t c0, unsigned *idx)
{
	uint64_t before[PMU_MAX_EVENTS];
	bool any = false, clock_step = t->pmu.clock_step;
	unsigned k = 0;
	t->pmu.clock_step = false;
	t->pmu.vsys_retry = false;
	if (m->cfg.pmu_sample != PMU_SAMPLE_SKID) {
		/* Records name the points: a step here is one the monitor needed. */
		if (clock_step) {
			note(m, t, LEDGER_STEP);
			m->pstats.retry_steps++;
		}
		return m->cfg.pmu_sample == PMU_SAMPLE_DOUBLE_TRAP ? pmu_dtrap_commit(m, t, in, idx)
		                                                   : 0;
	}
	for (unsigned i = 0; i < m->ptab.n; i++)
		any |= t->pmu.s[i].approaching;
	if (!clock_step)
		return 0;
	if (!any) {
		/* A step the monitor needed (a fault retried): it counts all the same. */
		note(m, t, LEDGER_STEP);
		m->pstats.retry_steps++;
		return 0;
	}
	/* The step's trap counts (as the replay kernel's does when the step retires). */
	note(m, t, LEDGER_STEP);
	m->pstats.clock_steps++;
	for (unsigned i = 0; i < m->ptab.n; i++)
		before[i] = t->pmu.s[i].count;
	/*
	 * The counters have the last word; where they and the decoder disagree
	 * on what the step retired (a perturbation not compensated, a reference
	 * the decoder does not model), pmu.clock_mismatches says so.
	 */
	pmu_sync(m, t);
	if (t->clock != c0 + in->nrefs)
		m->pstats.mismatches++;
	for (unsigned i = 0; i < m->ptab.n; i++) {
		pmu_stream *s = &t->pmu.s[i];
		while (s->approaching && s->plan.target <= s->count) {
			skid_program prog;
			uint64_t want = s->plan.target - before[i]; /* 1-based among s's refs */
			if (s->plan.target > before[i]) {
				for (unsigned j = 0, seen = 0; j < in->nrefs; j++)
					if (of_stream(s, in->refs[j].kind) && ++seen == want) {
						idx[k++] = j;
						break;
					}
			} else {
				m->pstats.overshoots++;
			}
			prog = skid_plan_next(&s->plan, s->count,
			                      s->plan.next_target + rng_gap(&s->gaps, m->period));
			apply(m, s, &prog);
			if (prog.step_now)
				continue;
			s->approaching = false;
			if (s->shadow.pending) /* its overflow came while we stepped */
				take_overflow(m, s);
		}
	}
	/* Indices in increasing order, each once (two streams may pick one reference). */
	for (unsigned a = 1; a < k; a++)
		for (unsigned b = a; b > 0 && idx[b - 1] > idx[b]; b--) {
			unsigned x = idx[b];
			idx[b] = idx[b - 1];
			idx[b - 1] = x;
		}
	if (k > 1) {
		unsigned w = 1;
		for (unsigned a = 1; a < k; a++)
			if (idx[a] != idx[w - 1])
				idx[w++] = idx[a];
		k = w;
	}
	return k;
}

bool pmu_take_signal(monitor *m, mon_thread *t, int sig, const siginfo_t *si, bool noted)
{
	/* Noted already (pmu_hold): an overflow held from an injected call. */
	bool overflow = noted || overflow_of(m, t, si);
	if (sig == SIGSEGV) {
		note(m, t, LEDGER_PAGE_FAULT);
		pmu_sync(m, t);
		if (t->have_pending)
			t->pending_c0 = t->clock; /* the faulting instruction starts here */
		return false;
	}
	if (sig == SIGTRAP && si->si_code == SI_KERNEL) {
		note(m, t, LEDGER_TRAP);
		return m->cfg.pmu_sample == PMU_SAMPLE_DOUBLE_TRAP &&
		       pmu_dtrap_signal(m, t, sig, si);
	}
	if (!overflow)
		return false;
	if (!noted)
		note(m, t, LEDGER_TRAP);
	pmu_sync(m, t);
	if (t->have_pending)
		t->pending_c0 = t->clock;
	m->pstats.overflows++;
	if (m->cfg.pmu_sample != PMU_SAMPLE_SKID) {
		pmu_precise_overflow(m, t);
		return true;
	}
	for (unsigned i = 0; i < m->ptab.n; i++) {
		pmu_stream *s = &t->pmu.s[i];
		if (s->approaching)
			continue; /* stepping anyway; a reached overflow waits in the shadow */
		if (!s->shadow.pending) {
			m->pstats.stale++;
			continue;
		}
		take_overflow(m, s);
	}
	return true;
}

bool pmu_hold(monitor *m, mon_thread *t, mon_held *h)
{
	/*
	 * An overflow met during an injected call: its trap is in the counts
	 * already (the stop came), so it is noted now and taken later without
	 * noting it again. One is held; a second only counts.
	 */
	if (!overflow_of(m, t, &h->si))
		return true;
	note(m, t, LEDGER_TRAP);
	for (size_t i = 0; i < t->held.n; i++)
		if (t->held.items[i].noted) {
			m->pstats.stale++;
			return false;
		}
	h->noted = true;
	return true;
}

int pmu_signal(monitor *m, mon_thread *t, int sig, const siginfo_t *si, bool detaching)
{
	lomas_status st;
	if (!pmu_take_signal(m, t, sig, si, false))
		return 0;
	if (detaching)
		return 1;
	st = step_resume(m, t, 0, NULL);
	return st ? st : 1;
}

int pmu_resume(monitor *m, mon_thread *t, int sig, bool step)
{
	const pmu_sys_ops *sys = m->psys;
	int r;
	if (m->cfg.pmu_sample == PMU_SAMPLE_SKID && m->ptab.ntypes > 1 &&
	    m->psem == SKID_PERIOD_IMMEDIATE)
		hybrid_rearm(m, t);
	/*
	 * IBS: a record written before this stop (a fault, a step, a call,
	 * the program's own signal within the skid of the tag) is taken now,
	 * before the watches are synced: the stop that ends the run it was
	 * written in (pmu_ibs_poll). The overflow's signal then finds nothing.
	 */
	if (m->pibs && pmu_ibs_waiting(t)) {
		pmu_sync(m, t);
		if (t->have_pending)
			t->pending_c0 = t->clock;
		pmu_ibs_poll(m, t);
	}
	step |= sig != 0;
	/*
	 * A thread runs free only when a fault can end every sample it may
	 * reuse: every watched page protected (no watch change waiting for its
	 * mprotect) and no overflow held back from an injected call (its
	 * sample starts at the next stop, and a free run may be long). Either
	 * arises here: the queued overflow taken after the resume's protections
	 * were synced (step_resume, its new sample's page not protected yet),
	 * or the sync's injected calls meeting the overflow signal. Then the
	 * thread is stepped, decoding (a reuse on a page not protected is found
	 * by decode), and the next stop syncs and takes what is held.
	 */
	if (!step && (pmu_wants_step(m, t, false) || m->sync_needed || t->held.n)) {
		if (m->sync_needed || t->held.n)
			m->pstats.held_steps++;
		step = true;
		if (step_decode(m, t) == LOMAS_OK && step_run_cpuid(m, t) == LOMAS_OK &&
		    m->sync_needed) {
			m->sync_needed = false;
			mprot_sync(&m->eng);
		}
		error_clear();
	}
	/*
	 * Armed again last, after the injected calls of the resume (they count
	 * too). A step that delivers a signal ends at the handler's first
	 * instruction: nothing retires, the trap adds nothing to move past.
	 */
	if (m->cfg.pmu_sample != PMU_SAMPLE_SKID)
		pmu_precise_rearm(m, t, step && !sig);
	/*
	 * Between samples the thread runs (PMU_RUN: PTRACE_SYSCALL), nothing
	 * decoded; the counters say where it is at its next stop. A step is
	 * the clock's near a point, or one the monitor needs (a fault retried
	 * with its page lifted, a system call stepped over lifted, a signal
	 * delivered with every page lifted until the handler's first
	 * instruction): both count (the ledger's steps).
	 */
	t->pmu.clock_step = step;
	t->pmu.force_step = false;
	if (!step) {
		t->have_pending = false;
		t->pmu.ran_free = true;
		m->pstats.runs++;
	}
	r = sys->resume(sys->ctx, t->tid, step ? PMU_STEP : PMU_RUN, sig);
	if (r < 0)
		errno = -r;
	return r;
}

lomas_status pmu_profile_meta(monitor *m, lomas_profile *p)
{
	lomas_status st;
	static const char *const sem[] = {"immediate", "next_overflow"};
	static const char *const mode[] = {"skid", "precise", "double_trap"};
	char events[600] = "";
	for (unsigned i = 0; i < m->ptab.n; i++) {
		size_t n = strlen(events);
		snprintf(events + n, sizeof events - n, "%s%s", i ? "," : "", m->ptab.ev[i].name);
	}
	if ((st = profile_meta_setf(p, "clock", "pmu")) ||
	    (st = profile_meta_setf(p, "pmu", "%s", m->ptab.pmu)) ||
	    (st = profile_meta_setf(p, "pmu.events", "%s", events)) ||
	    (st = profile_meta_setf(p, "pmu.streams", "%s",
	                            m->ptab.n == 1 ? "one counter for loads and stores"
	                                           : "loads and stores sampled separately")) ||
	    (st =
	         profile_meta_setf(p, "pmu.approximate", "%s",
	                           m->ptab.approximate ? "yes (dispatched, not retired)" : "no")) ||
	    (st = profile_meta_setf(p, "pmu.sample", "%s", mode[m->cfg.pmu_sample % 3])) ||
	    (st = profile_meta_setf(p, "pmu.period_semantics", "%s", sem[m->psem & 1])) ||
	    (st = profile_meta_setf(p, "pmu.margin", "%u", m->pmargin)) ||
	    (st = profile_meta_setf(p, "pmu.calibrated", "%s", m->pcalibrated ? "yes" : "no")) ||
	    (st = profile_meta_setf(p, "pmu.overflows", "%llu",
	                            (unsigned long long)m->pstats.overflows)) ||
	    (st = profile_meta_setf(p, "pmu.stale_overflows", "%llu",
	                            (unsigned long long)m->pstats.stale)) ||
	    (st = profile_meta_setf(p, "pmu.clock_steps", "%llu",
	                            (unsigned long long)m->pstats.clock_steps)) ||
	    (st = profile_meta_setf(p, "pmu.overshoots", "%llu",
	                            (unsigned long long)m->pstats.overshoots)) ||
	    (st = profile_meta_setf(p, "pmu.retry_steps", "%llu",
	                            (unsigned long long)m->pstats.retry_steps)) ||
	    (st = profile_meta_setf(p, "pmu.runs", "%llu", (unsigned long long)m->pstats.runs)) ||
	    (st = profile_meta_setf(p, "pmu.calls_stepped", "%llu",
	                            (unsigned long long)m->pstats.calls)) ||
	    (st = profile_meta_setf(p, "pmu.held_steps", "%llu",
	                            (unsigned long long)m->pstats.held_steps)) ||
	    (m->cfg.pmu_sample != PMU_SAMPLE_SKID && (st = pmu_precise_meta(m, p))) ||
	    (st = profile_meta_setf(p, "pmu.clock_mismatches", "%llu",
	                            (unsigned long long)m->pstats.mismatches)))
		return st;
	for (unsigned i = 0; i < m->ptab.n; i++)
		for (int k = 0; k < LEDGER_NKINDS; k++) {
			char key[96];
			snprintf(key, sizeof key, "pmu.%s.%s",
			         i                ? "store"
			         : m->ptab.n == 1 ? "ref"
			                          : "load",
			         ledger_kind_name((ledger_kind)k));
			if ((st = profile_set_calib(p, key, (double)m->pcalib[i][k])))
				return st;
		}
	return LOMAS_OK;
}

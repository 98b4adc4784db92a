/*
 * The pmu clock's precise mode (pmu_sample=precise; docs/pmu-clock.md): the
 * CPU's precise sampling unit (Intel PEBS with the data address, precise_ip
 * 2; AMD IBS op) writes, when the counter overflows, a record of the
 * instruction that overflowed it, its exact ip and data address, into the
 * counter's ring (PERF_RECORD_SAMPLE). The overflow signal, late by the
 * skid, only wakes the monitor: it drains the ring and starts the watch on
 * the record's (ip, address) at once, with no single-step to the point and
 * no decoding of the path to it. The cost: a reuse between the sampled
 * reference and the signal (the skid window) is not seen; the sample ends
 * at the next one (the replay test counts them).
 *
 * The points are the planner's with no margin: each counter is armed to
 * overflow on the sample point itself. So that the raw counter reaches it
 * at that reference and not at one the monitor's own perturbations moved
 * it to, the counter is armed again, for the references left, whenever
 * the ledger has noted a perturbation since it was armed (a fault, a trap,
 * an injected call, a step): PERF_EVENT_IOC_PERIOD restarts the period at
 * once since Linux 3.14, which precise mode therefore needs.
 *
 * Records are matched to points by arming: each time a counter is armed
 * its ring is emptied, so the first record at the next signal is the
 * overflow at the point, provided the point was reached (the corrected
 * count says so); later ones are the period firing again before the
 * signal came (pmu.stale_records). A point passed with no record (a
 * counter armed too late, within the skid of the last point) is lost:
 * pmu.overshoots.
 *
 * AMD IBS op (monitor.pibs) samples ops, not references, and its count
 * cannot be read: the load/store counters only count (the clock) and the
 * IBS sampler is armed for a random number of ops (ibs_gap). Its record is
 * taken at the stop that ends the run it was written in (the overflow's
 * signal, or a fault, step or call that came first: pmu_ibs_poll): a
 * user-mode memory op with its data address starts a sample at the clock's
 * count then (the last reference counted; the sampled one lies up to the
 * skid before it, so its distance is short by as much); another op (IBS
 * tags every op) or a kernel-mode one (kernels before swfilt cannot drop
 * them) starts none, counted. Each memory op is sampled at 1/period per op,
 * so the references keep the period's rate; the sampler is not armed again
 * at the monitor's perturbations (they shift which op is tagged, not how
 * likely each is). docs/pmu-clock.md, "AMD: IBS op".
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "monitor.h"

/* IBS op's shortest period: longer than the random start of its count (0..127). */
#define IBS_MIN_PERIOD 0x90
/* Records read per drain; a drain happens at every overflow signal. */
#define PRECISE_BATCH 16
/* Data pages of each ring (1 + 2^n pages mapped): room for ~200 records between two drains. */
#define PRECISE_RING_PAGES 2

/* Read and drop what s's ring holds: records of overflows before the point now armed. */
static void discard(monitor *m, pmu_stream *s)
{
	pmu_record rec[PRECISE_BATCH];
	unsigned n;
	do {
		n = pmu_ring_read(s->ring, s->ring_len, PMU_RING_SAMPLE_TYPE, rec, PRECISE_BATCH,
		                  &m->pring);
		m->pstats.stale_records += n;
	} while (n == PRECISE_BATCH);
}

/*
 * Program s to overflow when its count reaches the point, v references
 * from now. The ring is emptied first, so that the first record in it at
 * the next signal is this overflow's.
 */
static void arm(monitor *m, pmu_stream *s, uint64_t v)
{
	const pmu_sys_ops *sys = m->psys;
	discard(m, s);
	sys->ioctl(sys->ctx, s->fd, PERF_EVENT_IOC_PERIOD, (unsigned long)&v);
	skid_counter_set_period(&s->shadow, v);
	s->armed_bias = ledger_bias(&s->led);
	s->xarm = s->xraw;
}

/* The point of s was taken or lost: aim at the next one not yet passed. */
static void next_point(monitor *m, pmu_stream *s)
{
	for (;;) {
		skid_program prog = skid_plan_next(
		    &s->plan, s->count, s->plan.next_target + rng_gap(&s->gaps, m->period));
		if (!prog.step_now) {
			arm(m, s, prog.period);
			return;
		}
		/* Passed already, within the skid of the last one: no record will name it. */
		m->pstats.overshoots++;
	}
}

lomas_status pmu_precise_open(monitor *m, pmu_stream *s)
{
	const pmu_sys_ops *sys = m->psys;
	long ps = sysconf(_SC_PAGESIZE);
	size_t len = (size_t)ps * (1 + PRECISE_RING_PAGES);
	void *p = sys->mmap(sys->ctx, s->fd, len);
	if (!p)
		return error_set(LOMAS_ENOTSUP,
		                 "cannot map the sample ring of a precise counter: %s",
		                 strerror(errno));
	s->ring = p;
	s->ring_len = len;
	s->armed_bias = 0;
	return LOMAS_OK;
}

/* The stream's share of the thread's clock: the other streams' counts now (two streams). */
static uint64_t others(const monitor *m, const mon_thread *t, unsigned i)
{
	uint64_t c = 0;
	for (unsigned k = 0; k < m->ptab.n; k++)
		if (k != i)
			c += t->pmu.s[k].count;
	return c;
}

/* Which kind the record's reference is: the stream's, or the data source's for one counting both.
 */
static int record_kind(const pmu_stream *s, const pmu_record *r)
{
	union perf_mem_data_src src = {.val = r->data_src};
	if (s->kinds == PMU_KIND_LOADS)
		return LOMAS_REF_LOAD;
	if (s->kinds == PMU_KIND_STORES)
		return LOMAS_REF_STORE;
	if (src.mem_op & PERF_MEM_OP_STORE)
		return LOMAS_REF_STORE;
	if (src.mem_op & PERF_MEM_OP_LOAD)
		return LOMAS_REF_LOAD;
	return -1; /* not a memory op (IBS tags every op): no reference to sample */
}

/*
 * The period that puts the next IBS point a gap of the planner's draw in
 * ops on: IBS counts from a random start of 0..127 (the hardware preloads
 * IbsOpCurCnt's low 7 bits), 63.5 on average, so the draw is lengthened by
 * that much, then put on the 16-op grain of IbsOpMaxCnt with a random
 * remainder (Hermite's identity: the mean kept), 0x90 at least (the shortest
 * period whose count cannot start past it): mean gaps below ~80 ops cannot
 * be had.
 */
static uint64_t ibs_gap(monitor *m, pmu_stream *s)
{
	uint64_t g = (rng_gap(&s->gaps, m->period) + 64 + rng_next(&s->gaps) % 16) & ~15ull;
	return g > IBS_MIN_PERIOD ? g : IBS_MIN_PERIOD;
}

lomas_status pmu_ibs_open(monitor *m, mon_thread *t, uint64_t seed)
{
	const pmu_sys_ops *sys = m->psys;
	pmu_stream *s = &t->pmu.ibs;
	struct perf_event_attr a;
	lomas_status st;
	uint64_t period;
	int fd = -EINVAL;
	rng_seed(&s->gaps, seed ^ 0x6a09e667f3bcc909ull);
	s->kinds = PMU_KIND_REFS; /* the data source says which */
	period = ibs_gap(m, s);
	/* The kernel drops kernel-mode samples where it can (swfilt); else we do. */
	for (int user = 1; user >= 0 && fd == -EINVAL; user--) {
		pmu_ibs_attr(&m->ptab, user, &a);
		if (user && !a.exclude_kernel)
			continue; /* no swfilt: the same attr as without */
		a.sample_period = period;
		a.wakeup_events = 1;
		fd = sys->open(sys->ctx, &a, t->tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
	}
	if (fd < 0)
		return error_set(LOMAS_ENOTSUP,
		                 "perf_event_open of IBS op (ibs_op) for thread %d: %s%s; use "
		                 "pmu_sample=skid",
		                 (int)t->tid, strerror(-fd),
		                 fd == -EINVAL ? " (IBS per thread needs Linux >= 6.2)" : "");
	s->fd = fd;
	m->pibs_user = a.exclude_kernel;
	if ((st = pmu_precise_open(m, s)))
		return st;
	return pmu_route(m, fd, t->tid);
}

bool pmu_ibs_waiting(const mon_thread *t)
{
	const struct perf_event_mmap_page *pg = t->pmu.ibs.ring;
	return pg && __atomic_load_n(&pg->data_head, __ATOMIC_ACQUIRE) != pg->data_tail;
}

/*
 * IBS, at a stop of t (t->clock read): the first record in the ring, a
 * sample when it names a memory op of the target. The stop may come
 * before the overflow's signal (a fault, a step within the skid): the
 * record is taken there, at the stop that ends the run it was written in,
 * and the signal finds nothing. A record met while t blocks the signal was
 * written at some unknown time before (the program blocks it in a handler,
 * or around a critical section, and no stop came since: a free run stops
 * at every system call, so at the one that unblocks it at the latest): its
 * clock is unknown, it starts no sample (pmu.late_records).
 */
void pmu_ibs_poll(monitor *m, mon_thread *t)
{
	pmu_stream *s = &t->pmu.ibs;
	pmu_record rec;
	int kind;
	if (s->fd < 0 || !pmu_ibs_waiting(t) ||
	    !pmu_ring_read(s->ring, s->ring_len, PMU_RING_SAMPLE_TYPE, &rec, 1, &m->pring))
		return;
	if (rec.tid != (uint32_t)t->tid)
		m->pstats.stale_records++;
	else if (sig_blocked(t->tid) & (1ull << (m->psig - 1))) /* unreadable: late too */
		m->pstats.late_records++;
	else if ((rec.misc & PERF_RECORD_MISC_CPUMODE_MASK) != PERF_RECORD_MISC_USER)
		m->pstats.kernel_records++;
	else if ((kind = record_kind(s, &rec)) < 0 || !rec.addr)
		m->pstats.not_memory++;
	else {
		step_start_at(m, t, t->clock ? t->clock - 1 : 0, rec.ip, rec.addr, (uint8_t)kind);
		m->pstats.records++;
	}
	t->pmu.ibs_due = true; /* armed again at the resume, the rest of the ring dropped */
}

void pmu_precise_overflow(monitor *m, mon_thread *t)
{
	if (m->pibs) {
		pmu_ibs_poll(m, t); /* none: a re-fire's, dropped at the last arm: still armed */
		return;
	}
	for (unsigned i = 0; i < m->ptab.n; i++) {
		pmu_stream *s = &t->pmu.s[i];
		pmu_record point;
		bool reached;
		int kind;
		if (s->fd < 0 || !s->ring)
			continue;
		while (s->shadow.pending)
			skid_counter_ack(&s->shadow);
		reached = s->plan.target <= s->count;
		if (!reached) {
			/* An overflow among the monitor's counts, armed again since: not the point.
			 */
			discard(m, s);
			continue;
		}
		if (s->xraw != s->xarm) {
			/*
			 * Hybrid: the thread ran on another kind of core since the
			 * counter was armed, whose references this one did not count:
			 * its overflow came late, on a reference after the point.
			 */
			m->pstats.moved_kind++;
			m->pstats.overshoots++;
			next_point(m, s);
			continue;
		}
		/* The first record since the point was armed is the point's; later ones re-fired.
		 */
		if (pmu_ring_read(s->ring, s->ring_len, PMU_RING_SAMPLE_TYPE, &point, 1,
		                  &m->pring) &&
		    point.tid == (uint32_t)t->tid) {
			if (m->cfg.pmu_sample == PMU_SAMPLE_DOUBLE_TRAP) {
				/* The seed's way: a trap at the ip, the sample at its next run. */
				pmu_dtrap_plant(m, t, i, point.ip, record_kind(s, &point));
			} else if ((kind = record_kind(s, &point)) >= 0) {
				step_start_at(m, t, s->plan.target - 1 + others(m, t, i), point.ip,
				              point.addr, (uint8_t)kind);
				m->pstats.records++;
			} else {
				m->pstats.not_memory++;
				m->pstats.overshoots++;
			}
		} else {
			m->pstats.overshoots++; /* the point passed and no record names it */
		}
		next_point(m, s); /* drops the rest of the ring */
	}
}

void pmu_precise_rearm(monitor *m, mon_thread *t, bool must_step)
{
	/* Hybrid: other kinds may have counted since (read to know): always armed again. */
	bool moved = mon_injected_into(t->tid) != t->pmu.injected_noted || m->ptab.ntypes > 1;
	if (m->pibs) {
		/*
		 * IBS is armed last, after the monitor's own calls: its points lie
		 * on a 16-op grain from the arm, and the ops just after it must be
		 * the target's, not a burst of ours at a fixed offset that the
		 * short gaps would always land in. The arm drops the re-fires.
		 */
		if (t->pmu.ibs_due && t->pmu.ibs.fd >= 0)
			arm(m, &t->pmu.ibs, ibs_gap(m, &t->pmu.ibs));
		t->pmu.ibs_due = false;
		return;
	}
	for (unsigned i = 0; i < m->ptab.n; i++)
		moved |=
		    t->pmu.s[i].fd >= 0 && ledger_bias(&t->pmu.s[i].led) != t->pmu.s[i].armed_bias;
	if (!moved && !must_step)
		return;
	pmu_sync(m, t);
	if (t->have_pending)
		t->pending_c0 = t->clock;
	for (unsigned i = 0; i < m->ptab.n; i++) {
		pmu_stream *s = &t->pmu.s[i];
		uint64_t left, refs = 0;
		if (s->fd < 0)
			continue;
		if (s->plan.target <= s->count) {
			/*
			 * Reached: its overflow's signal is on its way (late by the
			 * skid) and the record waits in the ring; the signal takes it.
			 * Only when the counter did not overflow there (the shadow
			 * says so) will nothing come: aim at the next point.
			 */
			if (!s->shadow.pending) {
				m->pstats.overshoots++;
				next_point(m, s);
			}
			continue;
		}
		left = s->plan.target - s->count;
		if (must_step && t->have_pending) {
			/*
			 * A counted step adds its perturbation after the instruction's
			 * references: a point beyond them is moved past it, so the
			 * overflow still falls on a reference (armed again after the step).
			 */
			for (unsigned j = 0; j < t->pending.nrefs; j++)
				refs += (s->kinds & (t->pending.refs[j].kind == LOMAS_REF_STORE
				                         ? PMU_KIND_STORES
				                         : PMU_KIND_LOADS)) != 0;
			if (left > refs && m->pcalib[i][LEDGER_STEP] > 0)
				left += (uint64_t)m->pcalib[i][LEDGER_STEP];
		} else if (!moved) {
			continue;
		}
		arm(m, s, left);
	}
}

/* Precise mode and the double trap in the profile's metadata (what the rings held). */
lomas_status pmu_precise_meta(monitor *m, lomas_profile *p)
{
	lomas_status st;
	if ((st = profile_meta_setf(p, "pmu.records", "%llu",
	                            (unsigned long long)m->pstats.records)) ||
	    (st = profile_meta_setf(p, "pmu.stale_records", "%llu",
	                            (unsigned long long)m->pstats.stale_records)) ||
	    (st = profile_meta_setf(p, "pmu.not_memory_records", "%llu",
	                            (unsigned long long)m->pstats.not_memory)) ||
	    (st =
	         profile_meta_setf(p, "pmu.precise_by", "%s",
	                           !m->pibs       ? "PEBS"
	                           : m->pibs_user ? "IBS op (kernel samples filtered by the kernel)"
	                                          : "IBS op (kernel samples dropped by us)")) ||
	    (m->pibs && (st = profile_meta_setf(p, "pmu.kernel_records", "%llu",
	                                        (unsigned long long)m->pstats.kernel_records))) ||
	    (m->pibs && (st = profile_meta_setf(p, "pmu.late_records", "%llu",
	                                        (unsigned long long)m->pstats.late_records))) ||
	    (st = profile_meta_setf(p, "pmu.ring_lost", "%llu",
	                            (unsigned long long)m->pring.lost)) ||
	    (st = profile_meta_setf(p, "pmu.ring_throttles", "%llu",
	                            (unsigned long long)m->pring.throttles)) ||
	    (st = profile_meta_setf(p, "pmu.ring_corrupt", "%llu",
	                            (unsigned long long)m->pring.corrupt)) ||
	    (m->ptab.ntypes > 1 &&
	     (st = profile_meta_setf(p, "pmu.moved_kind", "%llu",
	                             (unsigned long long)m->pstats.moved_kind))))
		return st;
	if (m->cfg.pmu_sample == PMU_SAMPLE_DOUBLE_TRAP &&
	    ((st = profile_meta_setf(p, "pmu.dtrap_planted", "%llu",
	                             (unsigned long long)m->pstats.dtrap_planted)) ||
	     (st = profile_meta_setf(p, "pmu.dtrap_taken", "%llu",
	                             (unsigned long long)m->pstats.dtrap_taken)) ||
	     (st = profile_meta_setf(p, "pmu.dtrap_lost", "%llu",
	                             (unsigned long long)m->pstats.dtrap_lost))))
		return st;
	return LOMAS_OK;
}

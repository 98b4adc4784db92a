/*
 * The seed's double trap (pmu_sample=double_trap; docs/pmu-clock.md): the
 * PEBS record of an overflow gives the exact ip of the instruction that
 * overflowed the counter but (on the seed's Nehalem) no data address. The
 * seed planted an int3 at that ip; the next time the thread runs it, the
 * trap stops the thread at a known instruction with its registers, whose
 * reference is decoded and sampled. No single-step through the skid, but
 * the sample is not the overflow's reference: it is the next dynamic
 * execution of the same instruction, later by however long the program
 * takes to come back to it (a loop's iteration, or never). The replay test
 * measures that delay and what it does to the distances.
 *
 * Counters, rings and points are precise mode's (pmu_precise.c); only what
 * a record becomes differs. Breakpoints are the process's (one text):
 * another thread that meets one first has it removed and the point is
 * lost (pmu.dtrap_lost); all are removed before we let go.
 */
#include <errno.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/user.h>

#include "monitor.h"

/* Replace the byte at addr with b in the stopped thread tid; *old gets the byte. */
static bool poke_byte(monitor *m, pid_t tid, uint64_t addr, uint8_t b, uint8_t *old)
{
	long word;
	errno = 0;
	word = mon_ptrace(PTRACE_PEEKTEXT, tid, (void *)addr, NULL);
	if (errno)
		return false;
	if (old)
		*old = (uint8_t)(word & 0xff);
	word = (long)(((unsigned long)word & ~0xfful) | b);
	if (mon_ptrace(PTRACE_POKETEXT, tid, (void *)addr, (void *)word) < 0)
		return false;
	decoder_invalidate(m->dec, addr, addr + 1);
	/*
	 * A stopped thread may hold the instruction there decoded, to run next:
	 * decoded again when it resumes, or it would be counted as the int3 it
	 * no longer is (or the reverse), and the clocks drift.
	 */
	for (size_t i = 0; i < m->threads.n; i++) {
		mon_thread *o = &m->threads.items[i];
		if (o->have_pending && o->state != MT_RUNNING && addr >= o->pending.pc &&
		    addr < o->pending.pc + (o->pending.len ? o->pending.len : 1))
			o->have_pending = false;
	}
	return true;
}

static pmu_bp *find(monitor *m, uint64_t ip)
{
	for (unsigned i = 0; i < PMU_MAX_BPS; i++)
		if (m->pbp[i].used && m->pbp[i].ip == ip)
			return &m->pbp[i];
	return NULL;
}

void pmu_dtrap_plant(monitor *m, mon_thread *t, unsigned stream, uint64_t ip, int kind)
{
	pmu_bp *b = NULL;
	/* One point of a stream waits at a time: a newer overflow replaces it. */
	for (unsigned i = 0; i < PMU_MAX_BPS; i++)
		if (m->pbp[i].used && m->pbp[i].tid == t->tid && m->pbp[i].stream == stream) {
			if (poke_byte(m, t->tid, m->pbp[i].ip, m->pbp[i].orig, NULL))
				m->pbp[i].used = false;
			m->pstats.dtrap_lost++;
		}
	if (t->pmu.dt_wait[stream]) {
		t->pmu.dt_wait[stream] = false;
		m->pstats.dtrap_lost++;
	}
	if (find(m, ip)) {
		m->pstats.dtrap_lost++; /* another thread's or stream's waits there */
		return;
	}
	for (unsigned i = 0; i < PMU_MAX_BPS && !b; i++)
		if (!m->pbp[i].used)
			b = &m->pbp[i];
	if (!b || !poke_byte(m, t->tid, ip, 0xcc, &b->orig)) {
		m->pstats.dtrap_lost++;
		return;
	}
	b->used = true;
	b->ip = ip;
	b->tid = t->tid;
	b->stream = stream;
	b->kind = kind;
	m->pstats.dtrap_planted++;
}

bool pmu_dtrap_signal(monitor *m, mon_thread *t, int sig, const siginfo_t *si)
{
	struct user_regs_struct r;
	pmu_bp *b;
	if (sig != SIGTRAP || si->si_code != SI_KERNEL ||
	    mon_ptrace(PTRACE_GETREGS, t->tid, NULL, &r) < 0 || !(b = find(m, r.rip - 1)))
		return false;
	/* Ours: the instruction is put back and run again, now for real. */
	poke_byte(m, t->tid, b->ip, b->orig, NULL);
	r.rip = b->ip;
	mon_ptrace(PTRACE_SETREGS, t->tid, NULL, &r);
	b->used = false;
	t->have_pending = false;
	if (b->tid == t->tid) {
		t->pmu.dt_wait[b->stream] = true;
		t->pmu.dt_pc[b->stream] = b->ip;
		t->pmu.dt_kind[b->stream] = b->kind;
	} else {
		m->pstats.dtrap_lost++;
	}
	return true;
}

unsigned pmu_dtrap_commit(monitor *m, mon_thread *t, const decode_insn *in, unsigned *idx)
{
	unsigned k = 0;
	for (unsigned i = 0; i < m->ptab.n; i++) {
		pmu_thread *pt = &t->pmu;
		if (!pt->dt_wait[i] || pt->dt_pc[i] != in->pc)
			continue;
		pt->dt_wait[i] = false;
		/* The instruction's first reference of the record's kind (a load for a RMW's load).
		 */
		for (unsigned j = 0; j < in->nrefs; j++)
			if (pt->dt_kind[i] < 0 || in->refs[j].kind == pt->dt_kind[i]) {
				bool dup = false;
				for (unsigned x = 0; x < k; x++)
					dup |= idx[x] == j;
				if (!dup)
					idx[k++] = j;
				m->pstats.dtrap_taken++;
				break;
			}
	}
	if (k == 2 && idx[0] > idx[1]) {
		unsigned x = idx[0];
		idx[0] = idx[1];
		idx[1] = x;
	}
	return k;
}

void pmu_dtrap_detach(monitor *m)
{
	pid_t tid = 0;
	for (size_t i = 0; i < m->threads.n && !tid; i++)
		if (m->threads.items[i].state == MT_STOPPED)
			tid = m->threads.items[i].tid;
	for (unsigned i = 0; i < PMU_MAX_BPS; i++) {
		pmu_bp *b = &m->pbp[i];
		long word;
		if (!b->used || !tid)
			continue;
		/* Only where our int3 still is (an exec may have replaced the text). */
		errno = 0;
		word = mon_ptrace(PTRACE_PEEKTEXT, tid, (void *)b->ip, NULL);
		if (!errno && (word & 0xff) == 0xcc)
			poke_byte(m, tid, b->ip, b->orig, NULL);
		b->used = false;
	}
}

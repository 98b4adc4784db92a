/*
 * The step clock with the debug-register engine (lib/watch/debugreg.c)
 * instead of the mprotect engine: each sample arms a hardware breakpoint on
 * its word in its thread, and REUSE IS DETECTED BY THE TRAP. A data
 * breakpoint traps after the accessing instruction retired, so under the
 * step clock the trap belongs to the instruction whose step report came
 * last: its signal stop comes before the next instruction runs (the kernel
 * delivers pending signals when the thread is resumed from the step
 * report, before it returns to user mode). The reference that reused the
 * word is the first of that instruction's decoded references touching it;
 * its clock is the reuse time (the count at the trap is that instruction's
 * first clock + its references, one past the reuse when it was the last).
 * A trap that no decoded reference explains is counted
 * (debugreg.unexplained_traps) and ends nothing (end_fired()).
 *
 * THE DECODED REFERENCES DECIDE, the trap confirms. The clock counts the
 * decoder's references, and the decoder gives a masked vector access its
 * full operand size (lib/decode/decode.c, "Documented choices"); the CPU
 * touches only the elements the mask selects, so a data breakpoint on a
 * masked-out word does not fire. Seen in CI: glibc's memset tail
 * (__memset_avx512_unaligned_erms, vmovdqu8 zmm16, [rax]{k1} with a bzhi
 * mask, reached through malloc's MALLOC_PERTURB_ fill) counted as a
 * 64-byte store over a sampled word its mask left out, a reuse at distance
 * 4 that the breakpoint ended at 111. So every instruction's decoded
 * references are checked against the armed words, trap or not: a touch
 * with no trap ends the sample exactly and is counted
 * (debugreg.decoded_only_reuses), as a trap with no touch is.
 *
 * Nothing is protected and nothing injected: system calls and signal
 * deliveries need no lifts (the kernel's own accesses are excluded), and
 * the mprotect engine (m->eng) stays empty, so step.c's table checks find
 * nothing. Samples of other threads' words are not seen (per-thread
 * breakpoints): cross-thread touches are not recorded by this engine.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>

#include "monitor.h"

lomas_status dwatch_init(monitor *m)
{
	lomas_status st;
	if ((st = dreg_probe()))
		return st;
	/* SIGRTMAX, as the pmu clock's overflow: only si_code POLL_IN with our si_fd is ours. */
	dreg_init(&m->dreg, SIGRTMAX);
	m->dreg_mode = true;
	return LOMAS_OK;
}

void dwatch_thread_init(monitor *m, mon_thread *t)
{
	(void)m;
	dreg_thread_init(&t->dreg, t->tid);
	t->have_last = false;
}

void dwatch_thread_end(monitor *m, mon_thread *t)
{
	(void)m;
	dreg_thread_close(&t->dreg);
}

/* Does reference r touch the word at word? */
static bool touches(const decode_ref *r, uint64_t word)
{
	uint64_t last = r->addr + (r->size ? r->size - 1 : 0);
	return r->addr < word + DREG_WORD && last >= word;
}

/* The first of in's references that touches word, or -1. */
static int first_touch(const decode_insn *in, uint64_t word)
{
	for (unsigned k = 0; k < in->nrefs; k++)
		if (touches(&in->refs[k], word))
			return (int)k;
	return -1;
}

/*
 * Slot s (fired) of t: its sample ends at the first reference of t's last
 * instruction that touches the word. false when none does: an access the
 * decoder does not model (an EVEX vector compare in glibc's strcmp, say).
 * The clock counts decoded references only, so that is no reuse point
 * either (as for the mprotect engine's faults there): counted, and the
 * breakpoint stays armed.
 */
static bool end_fired(monitor *m, mon_thread *t, const dreg_slot *s)
{
	int k = t->have_last ? first_touch(&t->last, s->word) : -1;
	if (k >= 0) {
		step_end_sample(m, s->sample, t->last_c0 + (unsigned)k, t->last.pc, true);
		return true;
	}
	m->dreg_unexplained++;
	return false;
}

void dwatch_commit(monitor *m, mon_thread *t, const decode_insn *in, uint64_t c0)
{
	t->last = *in;
	t->last_c0 = c0;
	t->have_last = true;
	/*
	 * Read the armed counters after every instruction, signal or not: the
	 * count moves in the #DB handler, within the step that made the access,
	 * but the overflow signal comes through perf's irq_work and may arrive
	 * later. A read costs ~1 us against a step's ~85 us; the signal is then
	 * a hint (stale when the read took it first), and the only path while
	 * the thread blocks it.
	 */
	for (unsigned i = 0; i < DREG_SLOTS; i++) {
		dreg_slot *s = &t->dreg.s[i];
		bool fired;
		int k;
		if (!s->armed)
			continue;
		m->dreg.stats.polls++;
		fired = dreg_fired(&m->dreg, &t->dreg, i);
		if ((k = first_touch(in, s->word)) < 0) {
			if (fired)
				m->dreg_unexplained++; /* stays armed (end_fired()) */
			continue;
		}
		/*
		 * A decoded touch: the reuse, trap or not. Without a trap the CPU
		 * did not access the word (a masked vector access whose mask
		 * leaves it out, counted full-size by the decoder): the clock's
		 * reference stream still has it, and the sample ends there.
		 */
		if (!fired)
			m->dreg_decoded_only++;
		step_end_sample(m, s->sample, c0 + (unsigned)k, in->pc, fired);
		dreg_disarm(&m->dreg, &t->dreg, i);
	}
}

void dwatch_start(monitor *m, mon_thread *t, uint64_t id, const decode_insn *in, unsigned j,
                  uint64_t c0)
{
	uint64_t word = in->refs[j].addr & ~(uint64_t)(DREG_WORD - 1);
	dreg_slot old;
	bool evicted, fired;
	lomas_sample *x;
	/*
	 * A later reference of this same instruction reuses the word: the
	 * breakpoint, armed once the instruction retired, cannot see it; its
	 * decoded references can (as the mprotect engine's commit does).
	 */
	for (unsigned k = j + 1; k < in->nrefs; k++)
		if (touches(&in->refs[k], word)) {
			step_end_sample(m, id, c0 + k, in->pc, false);
			return;
		}
	if (dreg_arm(&m->dreg, &t->dreg, in->refs[j].addr, id, &old, &evicted, &fired)) {
		/* No debug register for it: recorded as censored, never dropped. */
		x = &m->samples.items[id];
		x->state = LOMAS_SAMPLE_CENSORED;
		x->end = c0 + j + 1;
		error_clear();
	}
	if (!evicted)
		return;
	/*
	 * dwatch_commit() read every counter after this instruction and ended
	 * what its references touch: a count moved since is no reuse.
	 */
	if (fired)
		m->dreg_unexplained++;
	/* Four slots: the oldest sample is censored (its distance is at least its age). */
	x = &m->samples.items[old.sample];
	if (x->state == LOMAS_SAMPLE_DANGLING) {
		x->state = LOMAS_SAMPLE_CENSORED;
		x->end = c0 + in->nrefs > x->start ? c0 + in->nrefs : x->start + 1;
	}
}

bool dwatch_take_signal(monitor *m, mon_thread *t, int sig, const siginfo_t *si)
{
	int i = dreg_signal_slot(&m->dreg, &t->dreg, sig, si);
	if (i == -1)
		return false;
	m->dreg.stats.signals++;
	if (i >= 0 && dreg_fired(&m->dreg, &t->dreg, (unsigned)i)) {
		if (end_fired(m, t, &t->dreg.s[i]))
			dreg_disarm(&m->dreg, &t->dreg, (unsigned)i);
	} else {
		m->dreg.stats.stale++; /* taken already (an eviction read it), or closed since */
	}
	return true;
}

int dwatch_signal(monitor *m, mon_thread *t, int sig, const siginfo_t *si, bool detaching)
{
	lomas_status st;
	if (!dwatch_take_signal(m, t, sig, si))
		return 0;
	if (detaching)
		return 1;
	st = step_resume(m, t, 0, NULL);
	return st ? st : 1;
}

void dwatch_mask(monitor *m, mon_thread *t, uint64_t mask)
{
	dreg_set_quiet(&m->dreg, &t->dreg, (mask >> (m->dreg.sig - 1)) & 1);
}

void dwatch_exec(monitor *m)
{
	for (size_t i = 0; i < m->threads.n; i++) {
		dreg_thread_close(&m->threads.items[i].dreg);
		m->threads.items[i].have_last = false;
	}
}

/* Is our signal pending for thread tid and not blocked there (/proc status)? */
static bool sig_pending(pid_t pid, pid_t tid, int sig)
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

/* A held signal that is one of our breakpoints'. */
static bool dreg_ours(monitor *m, mon_thread *t, const mon_held *h)
{
	return dreg_signal_slot(&m->dreg, &t->dreg, h->si.si_signo, &h->si) != -1;
}

/*
 * Before the monitor lets the target go (every thread stopped): close every
 * breakpoint, so that none signals a program we no longer trace (SIGRTMAX's
 * default action ends it), and take the signals already sent: a stopped
 * thread with one pending is let run into its signal-delivery-stop, where
 * it is not delivered. The program's own SIGRTMAX (not POLL_IN with one of
 * our descriptors) is kept for delivery at detach, unlike the pmu clock's
 * drain, which drops any SIGRTMAX.
 */
void dwatch_detach(monitor *m)
{
	for (size_t i = 0; i < m->threads.n; i++) {
		mon_thread *t = &m->threads.items[i];
		sig_held_drop(m, t, dreg_ours);
		dreg_thread_close(&t->dreg);
	}
	for (size_t i = 0; i < m->threads.n; i++) {
		mon_thread *t = &m->threads.items[i];
		siginfo_t si;
		int status;
		/* A few rounds: another signal may come first (it is kept and sent again). */
		for (int k = 0;
		     k < 4 && t->state == MT_STOPPED && sig_pending(m->pid, t->tid, m->dreg.sig);
		     k++) {
			if (mon_ptrace(PTRACE_CONT, t->tid, NULL, NULL) < 0 ||
			    mon_wait_tid(m, t->tid, 2000, &status) != 1)
				break;
			if (WIFEXITED(status) || WIFSIGNALED(status)) {
				step_thread_gone(m, t);
				mon_reap(m, t, status);
				break;
			}
			if ((status >> 16) != 0 ||
			    mon_ptrace(PTRACE_GETSIGINFO, t->tid, NULL, &si) < 0)
				break;
			if (dreg_signal_slot(&m->dreg, &t->dreg, WSTOPSIG(status), &si) != -1)
				continue;    /* ours: taken, the thread stays in its stop */
			sig_hold(m, t, &si); /* delivered again at detach */
		}
	}
}

lomas_status dwatch_profile_meta(monitor *m, lomas_profile *p)
{
	const dreg_stats *s = &m->dreg.stats;
	lomas_status st;
	if ((st = profile_meta_setf(p, "watch.granularity", "%s",
	                            "word (8-byte hardware breakpoints): a reuse is the next "
	                            "touch of the sampled word, not of its line")) ||
	    (st = profile_meta_setf(p, "debugreg.slots", "%s",
	                            "4 per thread (DR0-DR3); a fifth live sample takes the "
	                            "oldest's slot, which is censored")) ||
	    (st = profile_meta_setf(p, "debugreg.rearm", "%s",
	                            m->dreg.no_modify ? "close and open"
	                                              : "PERF_EVENT_IOC_MODIFY_ATTRIBUTES")) ||
	    (st = profile_meta_setf(p, "debugreg.amd_bpext", "%s",
	                            dreg_cpu_has_bpext() ? "present (not used: 8-byte words)"
	                                                 : "absent")) ||
	    (st = profile_meta_setf(p, "debugreg.arms", "%llu", (unsigned long long)s->arms)) ||
	    (st = profile_meta_setf(p, "debugreg.traps", "%llu", (unsigned long long)s->fired)) ||
	    (st = profile_meta_setf(p, "debugreg.signals", "%llu",
	                            (unsigned long long)s->signals)) ||
	    (st = profile_meta_setf(p, "debugreg.stale_signals", "%llu",
	                            (unsigned long long)s->stale)) ||
	    (st = profile_meta_setf(p, "debugreg.evictions", "%llu",
	                            (unsigned long long)s->evictions)) ||
	    (st = profile_meta_setf(p, "debugreg.refused", "%llu",
	                            (unsigned long long)s->refused)) ||
	    (st = profile_meta_setf(p, "debugreg.polls", "%llu", (unsigned long long)s->polls)) ||
	    (st = profile_meta_setf(p, "debugreg.unexplained_traps", "%llu",
	                            (unsigned long long)m->dreg_unexplained)) ||
	    (st = profile_meta_setf(p, "debugreg.decoded_only_reuses", "%llu",
	                            (unsigned long long)m->dreg_decoded_only)))
		return st;
	return LOMAS_OK;
}

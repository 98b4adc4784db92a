/*
 * Skid compensation (docs/architecture.md, the clocks): the counter interrupt lands a variable
 * number of references after the overflow, so arm the overflow max_skid
 * references early (Sp' = Sp - max_skid) and, at the stop, single-step the
 * remaining Sp - C references. Two kernel behaviours of PERF_EVENT_IOC_PERIOD
 * (perf_event_open(2)): since Linux 3.14 the new period applies at once; on
 * 2.6.36 (the seed) it is loaded only at the next overflow, so the planner
 * programs one overflow ahead: the reload is the distance between two
 * consecutive overflow points, which the skid offset cancels out of.
 *
 * The simulated counter below follows the same rules; tests and the step
 * clock drive the planner with it.
 */
#include "clock.h"

static uint64_t arm_point(uint64_t sp, uint32_t max_skid, uint64_t floor_)
{
	uint64_t o = sp > max_skid ? sp - max_skid : 0;
	return o > floor_ ? o : floor_;
}

skid_program skid_plan_start(skid_planner *p, uint32_t max_skid, skid_semantics sem, uint64_t now,
                             uint64_t sp0, uint64_t sp1)
{
	skid_program prog = {0};
	p->max_skid = max_skid;
	p->sem = sem;
	p->target = sp0;
	p->next_target = sp1;
	if (sem == SKID_PERIOD_IMMEDIATE && sp0 <= now + max_skid) {
		prog.step_now = true;
		p->overflow = UINT64_MAX;
		return prog;
	}
	p->overflow = arm_point(sp0, max_skid, now + 1);
	prog.period = p->overflow - now;
	if (sem == SKID_PERIOD_NEXT_OVERFLOW) {
		p->after = arm_point(sp1, max_skid, p->overflow + 1);
		prog.reload = p->after - p->overflow;
		prog.has_reload = true;
	}
	return prog;
}

skid_action skid_plan_overflow(const skid_planner *p, uint64_t c)
{
	skid_action a = {.target = p->target};
	if (c <= p->target)
		a.remaining = p->target - c;
	else
		a.overshot = true;
	return a;
}

skid_program skid_plan_next(skid_planner *p, uint64_t now, uint64_t sp_next_next)
{
	skid_program prog = {0};
	p->target = p->next_target;
	p->next_target = sp_next_next;
	if (p->sem == SKID_PERIOD_IMMEDIATE) {
		if (p->target <= now + p->max_skid) {
			prog.step_now = true;
			p->overflow = UINT64_MAX;
			return prog;
		}
		p->overflow = arm_point(p->target, p->max_skid, now + 1);
		prog.period = p->overflow - now;
		return prog;
	}
	/* NEXT_OVERFLOW: the overflow for target was fixed one stop ago. */
	p->overflow = p->after;
	p->after = arm_point(sp_next_next, p->max_skid, p->overflow + 1);
	prog.reload = p->after - p->overflow;
	prog.has_reload = true;
	return prog;
}

void skid_counter_open(skid_counter *k, skid_semantics sem, uint64_t now, uint64_t period)
{
	*k = (skid_counter){.sem = sem, .count = now, .period = period};
	k->overflow_at = period ? now + period : UINT64_MAX;
}

void skid_counter_set_period(skid_counter *k, uint64_t period)
{
	if (k->sem == SKID_PERIOD_IMMEDIATE) {
		k->period = period;
		k->overflow_at = k->count + period;
		k->pending = 0;
	} else {
		k->reload = period;
		k->has_reload = true;
	}
}

bool skid_counter_advance(skid_counter *k, uint64_t n, uint32_t skid)
{
	uint64_t end = k->count + n;
	while (k->overflow_at != UINT64_MAX && k->overflow_at <= end) {
		if (!k->pending)
			k->report_at = k->overflow_at + skid;
		k->pending++;
		if (k->has_reload) {
			k->period = k->reload;
			k->has_reload = false;
		}
		k->overflow_at = k->period ? k->overflow_at + k->period : UINT64_MAX;
	}
	k->count = end;
	return k->pending && k->count >= k->report_at;
}

void skid_counter_ack(skid_counter *k)
{
	if (k->pending) {
		k->pending--;
		/* Later overflows already raised are reported at once. */
		k->report_at = k->count;
	}
}

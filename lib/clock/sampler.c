/*
 * The step clock's per-thread sampler. Sample points are exponentially
 * distributed (rng_gap with the configured mean); each is reached the way
 * the pmu clock reaches it: a counter armed max_skid references early
 * overflows, the overflow is reported a random 0..max_skid references late
 * (simulated skid), and the planner says how many references remain to the
 * point. Reports arrive only at instruction boundaries, so an instruction with
 * several references can carry the count past the point; the point then lies
 * in that same instruction, whose references the step clock has decoded.
 */
#include "clock.h"

void step_sampler_init(step_sampler *s, uint64_t seed, double period, uint32_t max_skid)
{
	skid_program prog;
	*s = (step_sampler){0};
	rng_seed(&s->gaps, seed);
	rng_seed(&s->skid, seed ^ 0x5bd1e9955bd1e995ull);
	s->period = period;
	s->max_skid = max_skid;
	s->sp = rng_gap(&s->gaps, period);
	s->sp_next = s->sp + rng_gap(&s->gaps, period);
	prog = skid_plan_start(&s->plan, max_skid, SKID_PERIOD_IMMEDIATE, 0, s->sp, s->sp_next);
	s->cur_skid = max_skid ? (uint32_t)(rng_next(&s->skid) % (max_skid + 1ull)) : 0;
	if (prog.step_now) {
		s->stepping = true;
		skid_counter_open(&s->counter, SKID_PERIOD_IMMEDIATE, 0, 0);
	} else {
		skid_counter_open(&s->counter, SKID_PERIOD_IMMEDIATE, 0, prog.period);
	}
}

unsigned step_sampler_commit(step_sampler *s, uint64_t c0, unsigned n, unsigned *idx)
{
	uint64_t end = c0 + n;
	unsigned k = 0;
	if (!s->stepping &&
	    skid_counter_advance(&s->counter, end - s->counter.count, s->cur_skid)) {
		skid_action a;
		skid_counter_ack(&s->counter);
		s->overflows++;
		a = skid_plan_overflow(&s->plan, end);
		if (a.overshot)
			s->overshoots++;
		else
			s->skid_steps += a.remaining;
		s->stepping = true;
	}
	s->counter.count = end;
	while (s->stepping && s->plan.target <= end) {
		skid_program prog;
		/* The report came no later than the point, so the point is >= c0 + 1. */
		if (s->plan.target > c0 && k < n)
			idx[k++] = (unsigned)(s->plan.target - 1 - c0);
		else
			s->lost++;
		s->sp = s->sp_next;
		s->sp_next = s->sp + rng_gap(&s->gaps, s->period);
		prog = skid_plan_next(&s->plan, end, s->sp_next);
		if (prog.step_now)
			continue;
		s->stepping = false;
		s->cur_skid =
		    s->max_skid ? (uint32_t)(rng_next(&s->skid) % (s->max_skid + 1ull)) : 0;
		skid_counter_set_period(&s->counter, prog.period);
	}
	return k;
}

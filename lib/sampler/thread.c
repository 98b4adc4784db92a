/*
 * The sampler core's per-thread state machine: what an in-process clock does
 * with a reference it is shown. A reference to a watched line ends that
 * line's sample (a reuse); the reference at the due clock starts a sample,
 * and the next one is drawn an exponential gap later (rng_gap, docs/architecture.md, the clocks);
 * with period auto the threads of a process share one budget that doubles
 * the period (sampler_thin_to). It is the inline runtime's slow path
 * (lib/inline/runtime.c: thread_attach, slow_visit, auto_budget,
 * rt_key_destructor) without its locks, TLS and trace buffer, in the same
 * order of random draws, so the two make the same samples from the same
 * references (tests/dbi/sampler_stream.c feeds the same streams to both: one
 * thread, or threads one after another). The dbi tool drives it from its
 * Valgrind helper: no libc here but memset.
 */
#include <string.h>

#include "sampler.h"

/* x * 2^n, exactly as ldexp (n <= AUTO_MAX_LEVEL): the tool has no libm. */
static double times_pow2(double x, unsigned n)
{
	return x * (double)(1ull << n);
}

static void push(sampler_thread *t, const inline_alloc *a, const isample *s)
{
	if (!store_push(&t->done, a, s))
		t->lost++;
}

void sampler_thread_to_level(sampler_thread *t, uint32_t level, const inline_alloc *a)
{
	if (level > AUTO_MAX_LEVEL)
		level = AUTO_MAX_LEVEL;
	if (t->level >= level)
		return;
	t->level = (uint8_t)level;
	sampler_thin_to(&t->done, &t->wt, &t->thin, level, a);
}

void sampler_thread_init(sampler_thread *t, const sampler_settings *s, uint32_t index, void *wt_mem,
                         uint8_t *filter, const sampler_budget *b, const inline_alloc *a)
{
	memset(t, 0, sizeof *t);
	t->index = index;
	wt_init(&t->wt, wt_mem, s->max_live, s->line_shift, filter);
	/* The inline runtime's seeds for a thread of this creation order. */
	rng_seed(&t->gaps, s->seed ^ (0x9e3779b97f4a7c15ull * index));
	rng_seed(&t->thin, ~s->seed ^ (0xd1b54a32d192ed03ull * (index + 1)));
	t->adaptive = s->period == 0;
	t->done.fates = t->adaptive ? &t->thin : NULL;
	t->base_period = t->adaptive ? AUTO_START_PERIOD : (double)s->period;
	/* A thread joining a running process samples at the process's current rate. */
	if (t->adaptive)
		sampler_thread_to_level(t, b->level, a);
	if (s->phase_guided && (t->phase = a->alloc(sizeof *t->phase)))
		phase_tracker_init(t->phase, &s->phase);
	t->phase_window = s->window;
	t->gap_log = rng_gap_log(times_pow2(t->base_period, t->level));
	/* The first reference has clock 0. */
	t->next_sample = rng_gap_with(&t->gaps, t->gap_log) - 1;
	t->next_gap = rng_gap_with(&t->gaps, t->gap_log);
}

/* After a level change: sampling is memoryless, so draw the next gap afresh at the new rate. */
static void redraw_gap(sampler_thread *t, uint64_t clock)
{
	t->gap_log = rng_gap_log(times_pow2(t->base_period, t->level + t->pshift));
	t->next_sample = clock + rng_gap_with(&t->gaps, t->gap_log);
	t->next_gap = rng_gap_with(&t->gaps, t->gap_log);
}

/*
 * Period auto after a sample start: add the thread's samples to the
 * process's count (in steps of AUTO_PUBLISH), raise the process's level when
 * the count says so, and bring the thread to it.
 */
static void auto_publish(sampler_thread *t, sampler_budget *b)
{
	uint32_t want;
	b->taken += t->unpublished;
	want = auto_level_at(b->taken);
	t->unpublished = 0;
	if (b->level < want)
		b->level = want;
}

static void auto_budget(sampler_thread *t, sampler_budget *b, const inline_alloc *a, uint64_t clock)
{
	if (++t->unpublished >= AUTO_PUBLISH)
		auto_publish(t, b);
	if (t->level < b->level) {
		sampler_thread_to_level(t, b->level, a);
		redraw_gap(t, clock);
	}
}

bool sampler_touch(sampler_thread *t, const inline_alloc *a, uint64_t addr, uint64_t clock,
                   uint64_t pc)
{
	isample s;
	if (!wt_touch(&t->wt, addr, clock, pc, &s))
		return false;
	push(t, a, &s);
	return true;
}

void sampler_visit(sampler_thread *t, sampler_budget *b, const inline_alloc *a, uint64_t addr,
                   uint64_t clock, uint64_t pc, lomas_ref_kind kind)
{
	isample s;
	/* A sampled reference ends the previous sample on its line first. */
	sampler_touch(t, a, addr, clock, pc);
	if (clock < t->next_sample)
		return;
	/* Drawn at the phase's rate: it weighs 2^pshift more (phase.c). */
	if (wt_start(&t->wt, addr, clock, pc, kind, (uint8_t)(t->level + t->pshift), &s))
		push(t, a, &s); /* the table was full: its oldest sample, censored */
	/* The gap drawn at the last start (or redraw), as the inline runtime does. */
	t->next_sample = clock + t->next_gap;
	t->next_gap = rng_gap_with(&t->gaps, t->gap_log);
	if (t->adaptive)
		auto_budget(t, b, a, clock);
	if (t->phase &&
	    phase_on_sample(t->phase, clock,
	                    phase_window_refs(t->phase_window, times_pow2(t->base_period, t->level),
	                                      t->phase->set.shift),
	                    addr >> t->wt.line_shift, pc)) {
		t->pshift = t->phase->shift_now;
		redraw_gap(t, clock);
	}
}

void sampler_thread_finish(sampler_thread *t, sampler_budget *b, const inline_alloc *a)
{
	/* As the inline runtime's exit path (rt_key_destructor), in its order:
	 * the last samples count toward the budget (a short thread may never
	 * take AUTO_PUBLISH of them), the thread follows the process's level
	 * (its open samples thinned with the rest), and only then are its open
	 * samples kept as dangling. */
	if (t->adaptive) {
		if (t->unpublished)
			auto_publish(t, b);
		sampler_thread_to_level(t, b->level, a);
	}
	if (!wt_collect(&t->wt, &t->done, a))
		t->lost += t->wt.live;
	if (t->phase) {
		a->release(t->phase, sizeof *t->phase);
		t->phase = NULL;
	}
}

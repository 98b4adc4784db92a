/*
 * The helper the generated code calls (tool_instrument.c): a reference whose
 * run holds a due sample, or whose filter byte is set, or every reference in
 * full-trace mode. It is the inline runtime's slow path (slow_entry and
 * slow_visit in lib/inline/runtime.c) for a tool that Valgrind runs one
 * thread at a time and never interrupts: no locks, no re-entry. gs is the
 * running thread's guest state, where its countdown is (tool.h).
 */
#include "tool.h"

/* One reference of the thread t, after references of its run after it. */
static void visit(tool_thread *t, int64_t *cd, Addr addr, const ref_desc *rd, uint64_t after,
                  Bool store)
{
	int64_t due = *cd + (int64_t)after;
	uint64_t clock = t->zero_clock - (uint64_t)due, k;
	Bool starts;
	if (due > 0 && !lt_tracing) {
		/* Not the due reference: a filter hit, a reuse or an alias. */
		if (t->burst.on)
			lt_burst_step(t, addr, clock);
		sampler_touch(&t->s, &lt_alloc, addr, clock, rd->pc);
		return;
	}
	if (lt_tracing)
		lt_trace_put(t, addr, rd->info, store, rd->pc);
	if (t->burst.on)
		lt_burst_step(t, addr, clock);
	starts = clock >= t->s.next_sample;
	sampler_visit(&t->s, &lt_budget, &lt_alloc, addr, clock, rd->pc,
	              store ? LOMAS_REF_STORE : LOMAS_REF_LOAD);
	/* A sample started here: maybe follow it exactly (tool_burst.c). */
	if (starts)
		lt_burst_maybe_start(t, addr, clock, rd->pc);
	/* The next visit: the next sample's reference (every one when tracing
	 * or while a burst runs). */
	k = lt_tracing || t->burst.on ? 1 : t->s.next_sample - clock;
	*cd = (int64_t)k - (int64_t)after;
	t->zero_clock = clock + k;
}

VG_REGPARM(3) void lt_visit(UChar *gs, Addr addr, ULong d)
{
	int64_t *cd = (int64_t *)(void *)(gs + lt_cd_offset);
	const ref_desc *rd = &lt_descs[d];
	uint64_t after = rd->info >> INFO_AFTER_SHIFT;
	if (!lt_cur) {
		*cd = TOOL_NEVER; /* not sampling (a forked child, after a detach) */
		return;
	}
	if (rd->info & INFO_MODIFY) {
		visit(lt_cur, cd, addr, rd, after + 1, False);
		visit(lt_cur, cd, addr, rd, after, True);
	} else {
		visit(lt_cur, cd, addr, rd, after, (rd->info & INFO_STORE) != 0);
	}
}

VG_REGPARM(3) void lt_count(UChar *gs, Addr addr, ULong d)
{
	int64_t *cd = (int64_t *)(void *)(gs + lt_cd_offset);
	if (--*cd <= 0 || lt_filter[filter_index(addr)])
		lt_visit(gs, addr, d);
}

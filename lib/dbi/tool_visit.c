/*
 * The helper the generated code calls (tool_instrument.c): a reference whose
 * run holds a due sample, or whose filter byte is set, or every reference in
 * full-trace mode. It is the inline runtime's slow path (slow_entry and
 * slow_visit in lib/inline/runtime.c) for a tool that Valgrind runs one
 * thread at a time and never interrupts: no locks, no re-entry.
 */
#include "tool.h"

VG_REGPARM(3) void lt_visit(Addr addr, ULong info, Addr pc)
{
	tool_thread *t = lt_cur;
	uint64_t after = info >> INFO_AFTER_SHIFT, clock, k;
	int64_t due = lt_fast.countdown + (int64_t)after;
	if (!t)
		return; /* not sampling (a forked child, after a detach) */
	clock = lt_fast.zero_clock - (uint64_t)due;
	if (due > 0 && !lt_tracing) {
		/* Not the due reference: a filter hit, a reuse or an alias. */
		sampler_touch(&t->s, &lt_alloc, addr, clock, pc);
		return;
	}
	if (lt_tracing)
		lt_trace_put(t, addr, info, pc);
	sampler_visit(&t->s, &lt_budget, &lt_alloc, addr, clock, pc,
	              (info & INFO_STORE) ? LOMAS_REF_STORE : LOMAS_REF_LOAD);
	/* The next visit: the next sample's reference (every one when tracing). */
	k = lt_tracing ? 1 : t->s.next_sample - clock;
	lt_fast.countdown = (int64_t)k - (int64_t)after;
	lt_fast.zero_clock = clock + k;
}

VG_REGPARM(3) void lt_count(Addr addr, ULong info, Addr pc)
{
	if (--lt_fast.countdown <= 0 || lt_filter[filter_index(addr)])
		lt_visit(addr, info, pc);
}

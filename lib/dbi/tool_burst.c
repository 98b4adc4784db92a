/*
 * Exact stack distances for a subset of the dbi clock's samples: the inline
 * clock's bursts (lib/inline/burst.c, docs/inline-clock.md "Exact bursts")
 * in the Valgrind tool. Near an LRU cliff the model's estimate of a reuse's
 * stack distance is a few percent off, and whole classes of reuses land on
 * the wrong side of the cache size (a 5-point stencil over 1024-double rows:
 * its row reuses at 511 lines of 512, +2.8 points at 32 KiB); a few exact
 * distances per kind of reuse correct them (lib/model/exact_sd.c, donors.c).
 *
 * When a sample starts on a thread with no burst running, and the thread's
 * bursts so far have taken at most lt_exact_budget of its references (or
 * the process's first TB_FLOOR_REFS of bursts are not spent), one sample in
 * TB_PICK is followed: every reference of the thread then calls the helper
 * (the countdown comes due at each, as in full-trace mode) and puts its line
 * into a set; when the sample's line is touched again, the set holds the
 * distinct other lines touched strictly between the two references, the
 * sample's exact stack distance as the trace clock defines it (the set:
 * sampler/burst_set.h, the inline clock's). Past
 * BURST_SET_BLOCKS blocks of 64 lines or TB_MAX_REFS references the burst gives
 * up (no distance); past TB_SHORT_REFS it goes on only while within its
 * allowance. A start pc whose bursts only gave up starts none after two.
 * Nothing of the sampling changes: the same samples, the same ends.
 *
 * Valgrind runs one thread at a time: no locks. The distances go to one
 * table (lt_exact), keyed by the thread's index and the sample's clocks,
 * written after the maps of the hand-over file (dump.h, DUMP_FLAG_EXACT).
 */
#include "pub_tool_libcbase.h"
#include "pub_tool_mallocfree.h"

#include "tool.h"

#define TB_PICK 8u
#define TB_MAX_REFS (512u * 1024u)
#define TB_SHORT_REFS (32u * 1024u)
#define TB_FLOOR_REFS (1024u * 1024u)
#define TB_LONG_PER_PC 3u

double lt_exact_budget = 0.05;
dump_exact_rec *lt_exact;
uint64_t lt_nexact, lt_bursts, lt_burst_refs;
static uint64_t exact_cap, floor_refs;

static void exact_push(const dump_exact_rec *r)
{
	if (lt_nexact == exact_cap) {
		uint64_t cap = exact_cap ? 2 * exact_cap : 4096;
		lt_exact = VG_(realloc)("lomas.exact", lt_exact, cap * sizeof *lt_exact);
		exact_cap = cap;
	}
	lt_exact[lt_nexact++] = *r;
}

/* End the running burst; found: it found its distance; too_long: it gave up past TB_SHORT_REFS. */
static void burst_stop(tool_burst *b, Bool found, Bool too_long)
{
	burst_pc_count(b->pcs, b->pc, found, b->refs > TB_SHORT_REFS, too_long);
	lt_bursts++;
	lt_burst_refs += b->refs;
	if (b->floor_run) {
		b->floor_total += b->refs;
		floor_refs += b->refs;
	}
	burst_set_clear(&b->set);
	b->on = False;
}

/* Are the thread's bursts (less the floor's) within the budget's share of its clock? */
static Bool within_share(const tool_burst *b, uint64_t clock)
{
	return (double)(b->total - b->floor_total) <= lt_exact_budget * (double)clock;
}

void lt_burst_step(tool_thread *t, Addr addr, uint64_t clock)
{
	tool_burst *b = &t->burst;
	uint64_t line = (uint64_t)addr / lt_line_size;
	if (clock <= b->start)
		return;
	b->refs++;
	b->total++;
	if (line == b->line) {
		dump_exact_rec r = {.index = t->s.index,
		                    .sd = b->set.nlines < 0xffffffffull ? (uint32_t)b->set.nlines
		                                                        : 0xffffffffu,
		                    .start = b->start,
		                    .end = clock};
		exact_push(&r);
		burst_stop(b, True, False);
		return;
	}
	if (b->refs > TB_SHORT_REFS &&
	    !(b->may_long &&
	      (b->floor_run ? floor_refs + b->refs <= TB_FLOOR_REFS : within_share(b, clock)))) {
		burst_stop(b, False, False);
		return;
	}
	if (!burst_set_insert(&b->set, line) || b->refs >= TB_MAX_REFS)
		burst_stop(b, False, b->refs > TB_SHORT_REFS);
}

void lt_burst_maybe_start(tool_thread *t, Addr addr, uint64_t clock, Addr pc)
{
	tool_burst *b = &t->burst;
	unsigned i = burst_pc_slot(pc);
	Bool floor = False;
	if (b->on || !(lt_exact_budget > 0.0))
		return;
	if (!within_share(b, clock)) {
		if (floor_refs >= TB_FLOOR_REFS)
			return;
		floor = True;
	}
	/* A start pc whose bursts only gave up (a sweep longer than a burst may run). */
	if (b->pcs[i].pc == pc && b->pcs[i].gave_up >= 2 && !b->pcs[i].found)
		return;
	if (!b->set.slots) {
		void *m = lt_alloc.alloc(BURST_SET_BYTES);
		if (!m)
			return;
		burst_set_init(&b->set, m);
		rng_seed(&b->pick, lt_settings.seed ^ (0xa0761d6478bd642full * (t->s.index + 1)));
	}
	/* One of the samples the budget allows at random, not the first: a loop
	 * whose period divides the budget's spacing would give one phase of it. */
	if (rng_next(&b->pick) % TB_PICK)
		return;
	b->on = True;
	b->floor_run = floor;
	b->may_long = !(b->pcs[i].pc == pc && ((b->pcs[i].long_gave_up && !b->pcs[i].long_found) ||
	                                       b->pcs[i].long_found >= TB_LONG_PER_PC));
	b->pc = pc;
	b->line = (uint64_t)addr / lt_line_size;
	b->start = clock;
	b->refs = 0;
}

void lt_burst_release(tool_thread *t)
{
	if (t->burst.set.slots)
		lt_alloc.release(t->burst.set.slots, BURST_SET_BYTES);
	t->burst.set.slots = NULL;
	t->burst.set.used = NULL;
	t->burst.on = False;
}

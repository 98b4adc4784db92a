/*
 * Exact stack distances for a subset of the inline clock's samples
 * ("bursts", docs/inline-clock.md "Exact bursts", docs/model.md "Knife
 * edges").
 *
 * When a sample starts on a thread with no burst running, and the thread's
 * bursts so far have taken at most LOMAS_EXACT_BUDGET percent of its
 * references, the sample is tracked exactly: every reference of the thread
 * visits the slow path (as in full-trace mode) and puts its line into a set;
 * when the sample's line is touched again, the set holds the distinct other
 * lines touched strictly between the two references: the sample's exact
 * stack distance, as the trace clock defines it (lib/trace/stack_dist.c).
 * The set keeps blocks of 64 lines (a key and a bitmap,
 * sampler/burst_set.h), so a sweep fills it 64 times more slowly than lines
 * touched at random. Past BURST_SET_BLOCKS blocks or BURST_MAX_REFS
 * references the burst gives up (no distance), so one burst never costs
 * much.
 *
 * Nothing of the sampling changes: which references are sampled, the
 * samples' ends, the period and its thinning are those of a run without
 * bursts (the gaps are drawn as before; a burst only makes the countdown
 * come due at every reference). The distances found go to a process-wide
 * table (rt.exact), keyed by the thread's index and the sample's start and
 * end; the profile's writer gives each surviving sample its distance
 * (EXACTSD). Memory: mmap (the slow path never calls malloc).
 */
#include <stdlib.h>
#include <string.h>

#include "inline.h"

static void exact_push(const exact_rec *r)
{
	rt_spin_lock(&rt.exact_lock);
	if (rt.nexact == rt.exact_cap) {
		size_t cap = rt.exact_cap ? 2 * rt.exact_cap : 4096, old = rt.exact_cap;
		exact_rec *m = rt.exact
		                   ? rt_map_alloc.grow(rt.exact, old * sizeof *m, cap * sizeof *m)
		                   : rt_map_alloc.alloc(cap * sizeof *m);
		if (!m) {
			rt_spin_unlock(&rt.exact_lock); /* no memory: this distance is lost */
			return;
		}
		rt.exact = m;
		rt.exact_cap = cap;
	}
	rt.exact[rt.nexact++] = *r;
	rt_spin_unlock(&rt.exact_lock);
}

/* End the running burst; found: it found its sample's distance; too_long:
 * it gave up past BURST_SHORT_REFS at the set's or BURST_MAX_REFS's limit. */
static void burst_stop(burst_state *b, bool found, bool too_long)
{
	burst_pc_count(b->pcs, b->pc, found, b->refs > BURST_SHORT_REFS, too_long);
	atomic_fetch_add_explicit(&rt.bursts, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&rt.burst_refs, b->refs, memory_order_relaxed);
	if (b->novel_run) {
		b->novel_total += b->refs;
		atomic_fetch_add_explicit(&rt.burst_novel_refs, b->refs, memory_order_relaxed);
	}
	if (b->floor_run) {
		b->floor_total += b->refs;
		atomic_fetch_add_explicit(&rt.burst_floor_refs, b->refs, memory_order_relaxed);
		if (b->refs > BURST_SHORT_REFS)
			atomic_fetch_add_explicit(&rt.burst_long_floor_refs,
			                          b->refs - BURST_SHORT_REFS, memory_order_relaxed);
	}
	burst_set_clear(&b->set);
	b->on = false;
}

/* Are the thread's bursts the budget allowed within its share of clock? */
static bool burst_within_share(const burst_state *b, uint64_t clock)
{
	return (double)(b->total - b->floor_total - b->novel_total) <=
	       rt.set.exact_budget * (double)clock;
}

/*
 * May the running burst go on past BURST_SHORT_REFS? Only where what it
 * spends is still within its allowance: a run the floor allowed, while the
 * process's floor holds it and the floor's long parts stay within
 * BURST_LONG_FLOOR_REFS (a short run keeps a quarter of the floor for short
 * bursts; the phases workload's sweep needs four long distances, 624k
 * references); a run the budget allowed, while the thread's
 * bursts stay within the budget's share. A burst is let start when the
 * budget allows, so a long one could end far over it (a sweep of 512k
 * references at 2 % is the share of 26M): syrk's early long bursts left the
 * rest of its run no burst at all (0 exact distances after its first fifth,
 * LRU -4.85 pp at 11.3K). Checked this way, no burst overruns its allowance
 * by more than BURST_SHORT_REFS, as before long bursts existed.
 */
static bool burst_may_go_on(const burst_state *b, uint64_t clock)
{
	if (!b->may_long)
		return false;
	if (b->floor_run)
		return atomic_load_explicit(&rt.burst_floor_refs, memory_order_relaxed) + b->refs <=
		           BURST_FLOOR_REFS &&
		       atomic_load_explicit(&rt.burst_long_floor_refs, memory_order_relaxed) +
		               b->refs - BURST_SHORT_REFS <=
		           BURST_LONG_FLOOR_REFS;
	return burst_within_share(b, clock);
}

void rt_burst_step(inline_thread *t, uint64_t addr, uint64_t clock)
{
	burst_state *b = &t->burst;
	uint64_t line = addr >> t->wt.line_shift;
	if (clock <= b->start)
		return;
	b->refs++;
	b->total++;
	if (line == b->line) {
		exact_rec r = {.epoch = t->epoch,
		               .start = b->start,
		               .end = clock,
		               .index = t->index,
		               .sd = (uint32_t)b->set.nlines};
		exact_push(&r);
		burst_stop(b, true, false);
		return;
	}
	if (b->refs > BURST_SHORT_REFS && !burst_may_go_on(b, clock)) {
		burst_stop(b, false, false);
		return;
	}
	if (!burst_set_insert(&b->set, line) || b->refs >= BURST_MAX_REFS) {
		/* Longer than any burst may follow: the pc's next bursts stop at
		 * BURST_SHORT_REFS unless one of its long bursts found a distance
		 * (rt_burst_maybe_start, may_long). */
		burst_stop(b, false, b->refs > BURST_SHORT_REFS);
	}
}

void rt_burst_maybe_start(inline_thread *t, uint64_t addr, uint64_t clock, uintptr_t pc)
{
	burst_state *b = &t->burst;
	unsigned i = burst_pc_slot(pc);
	if (b->on || !(rt.set.exact_budget > 0.0))
		return;
	/* The thread's share, or the process's first BURST_FLOOR_REFS: at 2 %
	 * a run of 3M references had 15 distances, too few to lend any. The
	 * floor comes on top of the share: counted against it, the floor spent
	 * in a run's first loops left the rest of the run no burst until the
	 * share caught up (2mm: none after its first 1M, its knife edge in the
	 * second loop nest -8.05 pp at 13.4K). */
	bool paced = burst_within_share(b, clock), floor = false, novel = false;
	if (!paced)
		floor = atomic_load_explicit(&rt.burst_floor_refs, memory_order_relaxed) <
		        BURST_FLOOR_REFS;
	/* Past both, a start pc with too few distances to lend (donors.c) may
	 * still run short bursts, within the process's BURST_NOVEL_REFS: a
	 * phase that begins after the floor is spent had none at 2 % for its
	 * kinds (deriche: 14 % of its reuses, stack distance 1440 lines
	 * against a cliff at 1448, no exact distance in three seeds; one seed
	 * put a fifth of them past it, LRU +6.7 pp at 90.5K). */
	if (!paced && !floor) {
		novel = (b->pcs[i].pc != pc ||
		         (b->pcs[i].found < BURST_NOVEL_FOUND && b->pcs[i].gave_up < 2)) &&
		        atomic_load_explicit(&rt.burst_novel_refs, memory_order_relaxed) <
		            BURST_NOVEL_REFS;
		if (!novel)
			return;
	}
	/* A start pc whose bursts only gave up (a sweep far longer than a
	 * burst may run) starts none after two: each spent BURST_MAX_REFS of
	 * the budget for nothing (the alternating program's 7.5 MiB sweep left
	 * its 16 KiB array 3 distances). Its short reuses keep the estimate;
	 * the kinds that do get distances are drawn as before. */
	if (b->pcs[i].pc == pc && b->pcs[i].gave_up >= 2 && !b->pcs[i].found)
		return;
	if (!b->set.slots) {
		void *m = rt_map_alloc.alloc(BURST_SET_BYTES);
		if (!m)
			return;
		burst_set_init(&b->set, m);
		rng_seed(&b->pick, rt.set.seed ^ (0xa0761d6478bd642full * (t->index + 1)));
	}
	/* Not the first sample the budget allows, but one of them at random
	 * (1 in BURST_PICK): a program whose period divides the budget's
	 * spacing had its bursts all start at one phase of its loop (a biased
	 * subset: the cliff test's class split 24 pp off at 2 %). */
	if (rng_next(&b->pick) % BURST_PICK)
		return;
	b->on = true;
	b->floor_run = floor;
	b->novel_run = novel;
	b->may_long =
	    !novel && !(b->pcs[i].pc == pc && ((b->pcs[i].long_gave_up && !b->pcs[i].long_found) ||
	                                       b->pcs[i].long_found >= BURST_LONG_PER_PC));
	b->pc = pc;
	b->line = addr >> t->wt.line_shift;
	b->start = clock;
	b->refs = 0;
	b->tracked++;
}

void rt_burst_release(inline_thread *t)
{
	if (t->burst.set.slots)
		rt_map_alloc.release(t->burst.set.slots, BURST_SET_BYTES);
	memset(&t->burst, 0, sizeof t->burst);
}

static int by_thread_start(const void *a, const void *b)
{
	const exact_rec *x = a, *y = b;
	if (x->index != y->index)
		return x->index < y->index ? -1 : 1;
	return (x->start > y->start) - (x->start < y->start);
}

exact_rec *rt_exact_sorted(size_t *n)
{
	uint64_t epoch = atomic_load(&rt.epoch);
	exact_rec *r;
	size_t k = 0;
	*n = 0;
	/* Bounded: the copy of the process that writes the profile on a fatal
	 * signal may have been made while a thread held it (no distances then). */
	if (!rt_spin_lock_bounded(&rt.exact_lock))
		return NULL;
	if (!rt.nexact || !(r = malloc(rt.nexact * sizeof *r))) {
		rt_spin_unlock(&rt.exact_lock);
		return NULL;
	}
	for (size_t i = 0; i < rt.nexact; i++)
		if (rt.exact[i].epoch == epoch)
			r[k++] = rt.exact[i];
	rt_spin_unlock(&rt.exact_lock);
	if (!k) {
		free(r);
		return NULL;
	}
	qsort(r, k, sizeof *r, by_thread_start);
	*n = k;
	return r;
}

int64_t rt_exact_find(const exact_rec *r, size_t n, uint32_t index, uint64_t start, uint64_t end)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (r[mid].index < index || (r[mid].index == index && r[mid].start < start))
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo < n && r[lo].index == index && r[lo].start == start && r[lo].end == end)
		return r[lo].sd;
	return -1;
}

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
 * Past BURST_MAX_LINES distinct lines or BURST_MAX_REFS references the burst
 * gives up (no distance), so one burst never costs much.
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

#define BURST_HASH_K 0x9e3779b97f4a7c15ull
#define BURST_FLUSH_REFS                                                         \
	4096u /* a running burst adds its references to rt.burst_refs by so many \
	       */

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

/* Empty the set: only the slots used (a burst is often far smaller than the set). */
static void set_clear(burst_state *b)
{
	for (uint32_t i = 0; i < b->nused; i++) {
		b->keys[b->used[i]] = 0;
		b->own[b->used[i]] = 0;
	}
	b->nused = 0;
}

/* The slot of a start pc in the thread's give-up memory. */
static unsigned pc_slot(uintptr_t pc)
{
	return (unsigned)(((uint64_t)pc * BURST_HASH_K) >> 58) & (BURST_PCS - 1);
}

/* Whether the set keeps line at the burst's present rate (1 / 2^shift). */
static bool selected(const burst_state *b, uint64_t line)
{
	uint64_t h = (line ^ b->salt) * BURST_HASH_K;
	h ^= h >> 29;
	h *= 0xbf58476d1ce4e5b9ull;
	h ^= h >> 32;
	return !b->shift || !(h >> (64 - b->shift));
}

/* The home slot of a key (line + 1). */
static uint32_t slot_home(uint64_t key)
{
	return (uint32_t)((key * BURST_HASH_K) >> 47) & (BURST_SLOTS - 1);
}

/* The slot of line: its own, or the empty one where it would go. */
static uint32_t set_slot(const burst_state *b, uint64_t line)
{
	uint64_t key = line + 1;
	uint32_t i = slot_home(key);
	while (b->keys[i] && b->keys[i] != key)
		i = (i + 1) & (BURST_SLOTS - 1);
	return i;
}

static void set_put(burst_state *b, uint32_t i, uint64_t line, uint64_t last, uint16_t own)
{
	b->keys[i] = line + 1;
	b->last[i] = last;
	b->own[i] = own;
	b->used[b->nused++] = i;
}

/* Tracked sample j is done: found, with stack distance sd, or gave up. */
static void sample_done(inline_thread *t, unsigned j, uint64_t clock, bool found, uint64_t sd,
                        bool counts)
{
	burst_state *b = &t->burst;
	burst_sample *s = &b->trk[j];
	unsigned i = pc_slot(s->pc);
	if (found) {
		exact_rec r = {.epoch = t->epoch,
		               .start = s->start,
		               .end = clock,
		               .index = t->index,
		               .sd = sd > UINT32_MAX ? UINT32_MAX : (uint32_t)sd};
		exact_push(&r);
	}
	if (b->pcs[i].pc != s->pc) {
		b->pcs[i].pc = s->pc;
		b->pcs[i].gave_up = b->pcs[i].found = 0;
	}
	if (found && b->pcs[i].found < UINT16_MAX)
		b->pcs[i].found++;
	else if (!found && counts && b->pcs[i].gave_up < UINT16_MAX)
		b->pcs[i].gave_up++;
	atomic_fetch_add_explicit(&rt.bursts, 1, memory_order_relaxed);
	b->live &= (uint16_t) ~(1u << j);
	b->exact &= (uint16_t) ~(1u << j);
	b->lng &= (uint16_t) ~(1u << j);
	if (!b->live) { /* the burst ends with its last tracked sample */
		atomic_fetch_add_explicit(&rt.burst_refs, b->refs, memory_order_relaxed);
		set_clear(b);
		b->on = false;
		b->refs = 0;
	}
}

/* Remove slot i's line, moving the later lines of its probe chain back (linear probing). */
static void slot_delete(burst_state *b, uint32_t i)
{
	for (uint32_t j = (i + 1) & (BURST_SLOTS - 1); b->keys[j];
	     j = (j + 1) & (BURST_SLOTS - 1)) {
		uint32_t k = slot_home(b->keys[j]);
		/* j's line may fill the hole when i lies on its path from k to j */
		if (((j - k) & (BURST_SLOTS - 1)) >= ((j - i) & (BURST_SLOTS - 1))) {
			b->keys[i] = b->keys[j];
			b->last[i] = b->last[j];
			b->own[i] = b->own[j];
			i = j;
		}
	}
	b->keys[i] = 0;
	b->own[i] = 0;
}

/* Whether slot i's line stays in the set: a tracked sample's own line, a
 * line touched since recent (the oldest exact sample's start), or one the
 * hash selects touched since oldest (the oldest tracked start). */
static bool slot_kept(const burst_state *b, uint32_t i, uint64_t oldest, uint64_t recent)
{
	return b->own[i] || b->last[i] > recent ||
	       (b->last[i] > oldest && selected(b, b->keys[i] - 1));
}

/* The start of the oldest tracked sample of mask (UINT64_MAX: none). */
static uint64_t oldest_of(const burst_state *b, uint16_t mask, unsigned *which)
{
	uint64_t o = UINT64_MAX;
	for (uint16_t m = mask; m; m &= (uint16_t)(m - 1)) {
		unsigned j = (unsigned)__builtin_ctz(m);
		if (b->trk[j].start < o) {
			o = b->trk[j].start;
			*which = j;
		}
	}
	return o;
}

/* The lines in the set touched after clock c. */
static uint32_t lines_after(const burst_state *b, uint64_t c)
{
	uint32_t n = 0;
	for (uint32_t u = 0; u < b->nused; u++)
		n += b->last[b->used[u]] > c;
	return n;
}

/*
 * The set is full. The youngest tracked samples stay exact (every line
 * touched since their starts is kept) as long as those lines fill at most a
 * quarter of the set; the older ones are estimated from the lines the hash
 * selects, the rate halving until the set is at most 7/8 full. Lines older
 * than every tracked start count for no sample and go. (At most half full,
 * a 23.7k-line sweep was estimated at 1/4, +-1.1 %, and once 2 % low.)
 */
static void set_thin(burst_state *b)
{
	unsigned j = 0;
	uint64_t oldest = oldest_of(b, b->live, &j), recent;
	uint32_t e = 0, keep, shift = b->shift;
	uint16_t exact = b->exact;
	for (;;) {
		recent = oldest_of(b, b->exact, &j);
		if (recent == UINT64_MAX || lines_after(b, recent) <= BURST_MAX_LINES / 4)
			break;
		b->exact &= (uint16_t) ~(1u << j); /* estimated from now on */
	}
	for (;;) {
		keep = 0;
		for (uint32_t u = 0; u < b->nused; u++)
			keep += slot_kept(b, b->used[u], oldest, recent);
		if (keep <= BURST_MAX_LINES / 8 * 7 || b->shift >= BURST_MAX_SHIFT)
			break;
		b->shift++;
	}
	/* From an empty slot round the table (no probe chain wraps past it),
	 * removing the lines not kept; a slot a removal refilled is looked at
	 * again. Then the list of the slots used, anew. */
	while (b->keys[e])
		e++;
	for (uint32_t n = 0, i = (e + 1) & (BURST_SLOTS - 1); n < BURST_SLOTS - 1;) {
		if (b->keys[i] && !slot_kept(b, i, oldest, recent)) {
			slot_delete(b, i);
			continue;
		}
		i = (i + 1) & (BURST_SLOTS - 1);
		n++;
	}
	b->nused = 0;
	for (uint32_t i = 0; i < BURST_SLOTS; i++)
		if (b->keys[i])
			b->used[b->nused++] = i;
	/* The counts of the samples estimated from now on, and of all the
	 * estimated ones at a new rate: the selected lines since their starts
	 * (the lines that went were not selected or older than every start). */
	for (uint16_t m =
	         b->live & (uint16_t) ~(b->shift == shift ? b->exact | (uint16_t)~exact : b->exact);
	     m; m &= (uint16_t)(m - 1)) {
		burst_sample *s = &b->trk[__builtin_ctz(m)];
		s->count = 0;
		for (uint32_t u = 0; u < b->nused; u++) {
			uint32_t i = b->used[u];
			s->count += b->last[i] > s->start && selected(b, b->keys[i] - 1);
		}
	}
}

/* The thread's share of the budget, or the process's first
 * BURST_FLOOR_REFS: at 2 % a run of 3M references had 15 distances, too few
 * to lend any. */
static bool burst_allowed(const inline_thread *t, uint64_t clock)
{
	const burst_state *b = &t->burst;
	return (double)b->total <= rt.set.exact_budget * (double)clock ||
	       atomic_load_explicit(&rt.burst_refs, memory_order_relaxed) + b->refs <
	           BURST_FLOOR_REFS;
}

void rt_burst_step(inline_thread *t, uint64_t addr, uint64_t clock)
{
	burst_state *b = &t->burst;
	uint64_t line = addr >> t->wt.line_shift, old = 0;
	uint32_t i;
	bool sel;
	b->total++;
	if (++b->refs == BURST_FLUSH_REFS) { /* the process's count, in chunks */
		atomic_fetch_add_explicit(&rt.burst_refs, b->refs, memory_order_relaxed);
		b->refs = 0;
	}
	i = set_slot(b, line);
	if (b->keys[i]) {
		old = b->last[i];
		/* Tracked samples of this line are back: their counts are their
		 * distances (the rate's multiple for the estimated ones). */
		for (uint16_t m = b->own[i]; m; m &= (uint16_t)(m - 1)) {
			unsigned j = (unsigned)__builtin_ctz(m);
			if (b->trk[j].start < clock) {
				uint64_t sd = b->trk[j].count;
				if (!((b->exact >> j) & 1))
					sd <<= b->shift;
				b->own[i] &= (uint16_t) ~(1u << j);
				sample_done(t, j, clock, true, sd, true);
				if (!b->on)
					return;
			}
		}
	} else if (b->nused >= BURST_MAX_LINES && (b->exact || selected(b, line))) {
		set_thin(b); /* before it is counted: the counts set_thin makes are complete */
		i = set_slot(b, line);
	}
	/* A line new to each sample started after its last touch: every one
	 * for the exact samples, the selected ones for the estimated. */
	sel = selected(b, line);
	for (uint16_t m = sel ? b->live : b->exact; m; m &= (uint16_t)(m - 1)) {
		unsigned j = (unsigned)__builtin_ctz(m);
		b->trk[j].count += old < b->trk[j].start;
	}
	if (b->keys[i])
		b->last[i] = clock;
	else if (sel || b->exact)
		set_put(b, i, line, clock, 0);
	/* Samples not back within BURST_MAX_REFS give up; past BURST_SHORT_REFS
	 * a sample is long, and at most BURST_LONG are: the others give up then
	 * (not held against their pc), so a long sweep's samples do not fill
	 * every slot for their whole reuse (bench/phased-accuracy.sh's
	 * alternating program had its 16 KiB array's samples shut out). */
	for (uint16_t m = b->live; m; m &= (uint16_t)(m - 1)) {
		unsigned j = (unsigned)__builtin_ctz(m);
		uint64_t age = clock - b->trk[j].start;
		bool drop = age >= BURST_MAX_REFS;
		/* A long sample runs on only within the budget: one that never
		 * comes back held the burst for 1M references whatever it said
		 * (bench/inline.sh's phases 0.92x -> 2.79x). */
		if (!drop && age >= BURST_SHORT_REFS && !burst_allowed(t, clock))
			drop = true;
		if (!drop && age >= BURST_SHORT_REFS && !((b->lng >> j) & 1)) {
			if (__builtin_popcount(b->lng) >= (int)BURST_LONG)
				drop = true;
			else
				b->lng |= (uint16_t)(1u << j);
		}
		if (drop) {
			uint32_t k = set_slot(b, b->trk[j].line);
			if (b->keys[k])
				b->own[k] &= (uint16_t) ~(1u << j);
			sample_done(t, j, clock, false, 0, age >= BURST_MAX_REFS);
			if (!b->on)
				return;
		}
	}
}

void rt_burst_maybe_start(inline_thread *t, uint64_t addr, uint64_t clock, uintptr_t pc)
{
	burst_state *b = &t->burst;
	double budget = rt.set.exact_budget;
	unsigned i = pc_slot(pc), j;
	uint64_t line = addr >> t->wt.line_shift;
	uint32_t k;
	if (!(budget > 0.0) || b->live == (uint16_t)((1u << BURST_TRACK) - 1))
		return;
	if (!burst_allowed(t, clock))
		return;
	/* A start pc whose tracked samples gave up twice and never found a
	 * distance (a sweep far longer than BURST_MAX_REFS) is tracked no more:
	 * each kept the burst running for nothing. Its short reuses keep the
	 * estimate; the kinds that do get distances are drawn as before. */
	if (b->pcs[i].pc == pc && b->pcs[i].gave_up >= 2 && !b->pcs[i].found)
		return;
	if (!b->keys) {
		void *m = rt_map_alloc.alloc(BURST_BYTES);
		if (!m)
			return;
		b->keys = m;
		b->last = b->keys + BURST_SLOTS;
		b->used = (uint32_t *)(void *)(b->last + BURST_SLOTS);
		b->own = (uint16_t *)(void *)(b->used + BURST_SLOTS);
		rng_seed(&b->pick, rt.set.seed ^ (0xa0761d6478bd642full * (t->index + 1)));
	}
	/* Not the first sample the budget allows, but one of them at random
	 * (1 in BURST_PICK): a program whose period divides the budget's
	 * spacing had its bursts all start at one phase of its loop (a biased
	 * subset: the cliff test's class split 24 pp off at 2 %). */
	if (rng_next(&b->pick) % BURST_PICK)
		return;
	if (!b->on) { /* a new burst: an empty set, every line kept, its own hash */
		b->on = true;
		b->refs = 0;
		b->shift = 0;
		b->salt = rng_next(&b->pick);
	}
	j = (unsigned)__builtin_ctz((unsigned)(uint16_t)~b->live);
	b->trk[j] = (burst_sample){.line = line, .start = clock, .count = 0, .pc = pc};
	b->live |= (uint16_t)(1u << j);
	b->exact |= (uint16_t)(1u << j);
	/* Its line is in the set whatever the rate (to see it come back),
	 * touched now: rt_burst_step ran on this reference before, if the
	 * burst was on. */
	k = set_slot(b, line);
	if (!b->keys[k])
		set_put(b, k, line, clock, 0);
	b->last[k] = clock;
	b->own[k] |= (uint16_t)(1u << j);
	b->tracked++;
}

void rt_burst_release(inline_thread *t)
{
	if (t->burst.keys)
		rt_map_alloc.release(t->burst.keys, BURST_BYTES);
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

/*
 * The set of distinct lines a burst has seen, and the memory of the start
 * pcs whose bursts gave up: shared by the inline clock's bursts
 * (lib/inline/burst.c) and the dbi clock's (lib/dbi/tool_burst.c).
 *
 * The set keeps blocks of 64 lines (a key, line / 64 + 1, 0 for an empty
 * slot, and a bitmap of its lines) in open addressing, at most two thirds
 * filled: a sweep over 32 MiB of 64-byte lines fills 8192 entries, as 8192
 * lines touched at random do. Past BURST_SET_BLOCKS blocks it is full (the
 * burst gives up). Emptied slot by slot (only the slots used: a burst is
 * often far smaller than the set).
 *
 * Header only, no libc: the Valgrind tool includes it. The callers own the
 * memory (BURST_SET_BYTES: the slots, then the list of the slots used) and
 * any atomics.
 */
#ifndef LOMAS_SAMPLER_BURST_SET_H
#define LOMAS_SAMPLER_BURST_SET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BURST_SET_BLOCKS 8192u
#define BURST_SET_SLOTS (BURST_SET_BLOCKS + BURST_SET_BLOCKS / 2u)
#define BURST_SET_HASH_K 0x9e3779b97f4a7c15ull
#define BURST_SET_PCS 64u /* start pcs remembered a thread */
_Static_assert(BURST_SET_SLOTS <= 65536u, "used[] holds 16-bit slot numbers");

/* A block of 64 lines in the set: its key (line / 64 + 1; 0: empty) and which of its lines are in.
 */
typedef struct burst_slot {
	uint64_t key, bits;
} burst_slot;

#define BURST_SET_BYTES \
	((size_t)BURST_SET_SLOTS * sizeof(burst_slot) + BURST_SET_BLOCKS * sizeof(uint16_t))

typedef struct burst_set {
	burst_slot *slots; /* BURST_SET_SLOTS, or NULL (not mapped yet) */
	uint16_t *used;    /* the slots filled, to empty them (BURST_SET_BLOCKS) */
	uint32_t nused;    /* slots filled */
	uint64_t nlines;   /* distinct lines in the set */
} burst_set;

/* Per start pc (hashed): the bursts that found a distance and that gave up. */
typedef struct burst_pc {
	uint64_t pc;
	uint16_t found, gave_up;
	uint16_t long_found, long_gave_up; /* of those, the long ones */
} burst_pc;

/* The set on mem (BURST_SET_BYTES, zeroed), empty. */
static inline void burst_set_init(burst_set *s, void *mem)
{
	s->slots = (burst_slot *)mem;
	s->used = (uint16_t *)(void *)(s->slots + BURST_SET_SLOTS);
	s->nused = 0;
	s->nlines = 0;
}

/* Empty the set (only the slots used). */
static inline void burst_set_clear(burst_set *s)
{
	for (uint32_t i = 0; i < s->nused; i++)
		s->slots[s->used[i]].key = s->slots[s->used[i]].bits = 0;
	s->nused = 0;
	s->nlines = 0;
}

/* Put line into the set; false when the set is full (BURST_SET_BLOCKS). */
static inline bool burst_set_insert(burst_set *s, uint64_t line)
{
	uint64_t key = (line >> 6) + 1, bit = 1ull << (line & 63);
	uint32_t i = (uint32_t)((((key * BURST_SET_HASH_K) >> 32) * BURST_SET_SLOTS) >> 32);
	while (s->slots[i].key && s->slots[i].key != key)
		if (++i == BURST_SET_SLOTS)
			i = 0;
	if (!s->slots[i].key) {
		if (s->nused >= BURST_SET_BLOCKS)
			return false;
		s->slots[i].key = key;
		s->used[s->nused++] = (uint16_t)i;
	}
	if (!(s->slots[i].bits & bit)) {
		s->slots[i].bits |= bit;
		s->nlines++;
	}
	return true;
}

/* The slot of start pc pc in a thread's BURST_SET_PCS. */
static inline unsigned burst_pc_slot(uint64_t pc)
{
	return (unsigned)((pc * BURST_SET_HASH_K) >> 58) & (BURST_SET_PCS - 1);
}

/*
 * Count the end of a burst started at pc: found, it found its distance;
 * long_run, it ran past the short length; too_long, it gave up there.
 */
static inline void burst_pc_count(burst_pc *pcs, uint64_t pc, bool found, bool long_run,
                                  bool too_long)
{
	burst_pc *e = &pcs[burst_pc_slot(pc)];
	if (e->pc != pc) {
		e->pc = pc;
		e->found = e->gave_up = e->long_found = e->long_gave_up = 0;
	}
	if (found && long_run && e->long_found < UINT16_MAX)
		e->long_found++;
	if (too_long && e->long_gave_up < UINT16_MAX)
		e->long_gave_up++;
	if (found && e->found < UINT16_MAX)
		e->found++;
	else if (!found && e->gave_up < UINT16_MAX)
		e->gave_up++;
}

#endif

/*
 * lib/trace internal interface: the trace clock (exact forward reuse of
 * sampled references in a recorded reference stream) and the Valgrind lackey
 * reader that feeds it.
 *
 * The clock keeps, per thread, the number of references made so far (the
 * thread's clock). A global countdown of geometric gaps (rng_gap) picks the
 * sampled references; each sample watches its line until the same thread
 * touches that line again. Watched lines sit in an open-addressing hash
 * table (linear probing, backward-shift deletion) behind a byte filter
 * indexed by the same hash, so an unwatched reference costs one filter load.
 */
#ifndef LOMAS_TRACE_H
#define LOMAS_TRACE_H

#include <stdio.h>

#include "../core/core.h"

#define TRACE_NONE UINT32_MAX

/* Auto period: thin (double the period, keep each sample with p = 1/2) here. */
#define TRACE_AUTO_MAX_SAMPLES 40000u

/* Lines of a lackey file longer than this (other than Valgrind's own) are malformed. */
#define LACKEY_MAX_LINE 512

/* An open sample: the line it watches, its sample index, its thread. */
typedef struct trace_watch {
	uint64_t line;
	uint64_t sample; /* index into trace.samples */
	uint32_t thread; /* profile thread index */
	uint32_t next;   /* next watch on the same line, or next free; TRACE_NONE ends */
} trace_watch;

/* A slot of the watched-line table: line → first watch on it. */
typedef struct trace_slot {
	uint64_t line; /* UINT64_MAX = empty (lines are addr >> 3 at least) */
	uint32_t head;
	uint32_t reserved;
} trace_slot;

/* A line of a thread's stack-distance tracker and the position of its last touch. */
typedef struct sd_slot {
	uint64_t line; /* UINT64_MAX = empty */
	uint32_t pos;  /* 1..cap; 0 only between sd_tracker_find and _mark of a new line */
	uint32_t reserved;
} sd_slot;

/*
 * Exact stack distances of one thread's references (stack_dist.c): a mark
 * at each line's last touch, on a line of time positions; the lines touched
 * after position p are the marks after p. Marks are bits, counted per block
 * of 512 positions and per superblock of 32768: a touch moves one mark in
 * O(1), a query (once per sampled reuse) sums counts. All zeros is an empty
 * tracker.
 */
#define SD_BLOCK_SHIFT 9
#define SD_SUPER_SHIFT 15

typedef struct sd_tracker {
	sd_slot *slots; /* lines, open addressing; never deleted */
	size_t mask, used;
	unsigned shift;
	uint64_t *bits; /* bit p: a mark at position p (1 <= p < cap) */
	uint16_t *blk;  /* marks per block */
	uint32_t *sup;  /* marks per superblock */
	uint64_t *at;   /* at[p]: the slot marked at p (meaningful while bit p is set) */
	size_t cap, next, marks;
} sd_tracker;

#define SD_HASH_K 0x9e3779b97f4a7c15ull
#define SD_EMPTY UINT64_MAX

/* sd_tracker_reserve's slow path: make the table or renumber the positions. */
lomas_status sd_tracker_grow(sd_tracker *tr);

/* Room for one more touch (may grow or renumber); the only call that can fail. */
static inline lomas_status sd_tracker_reserve(sd_tracker *tr)
{
	if (tr->next && tr->next < tr->cap && (tr->used + 1) * 2 <= tr->mask + 1 && tr->slots)
		return LOMAS_OK;
	return sd_tracker_grow(tr);
}

/* The slot of line (added if new) and its mark's position, 0 for a new line. */
static inline uint32_t sd_tracker_find(sd_tracker *tr, uint64_t line, size_t *slot)
{
	size_t i = (size_t)((line * SD_HASH_K) >> tr->shift);
	for (;;) {
		uint64_t l = tr->slots[i].line;
		if (l == line)
			break;
		if (l == SD_EMPTY) {
			tr->slots[i].line = line;
			tr->slots[i].pos = 0;
			tr->used++;
			break;
		}
		i = (i + 1) & tr->mask;
	}
	*slot = i;
	return tr->slots[i].pos;
}

/* Distinct lines touched after position pos: the stack distance of a reuse of its line. */
uint64_t sd_tracker_after(const sd_tracker *tr, uint32_t pos);

/* Move the line at slot (its mark at pos, 0 if none) to a new position, now. */
static inline void sd_tracker_mark(sd_tracker *tr, size_t slot, uint32_t pos)
{
	size_t p = tr->next++;
	if (pos) {
		tr->bits[pos >> 6] &= ~(UINT64_C(1) << (pos & 63));
		tr->blk[pos >> SD_BLOCK_SHIFT]--;
		tr->sup[pos >> SD_SUPER_SHIFT]--;
	} else {
		tr->marks++;
	}
	tr->bits[p >> 6] |= UINT64_C(1) << (p & 63);
	tr->blk[p >> SD_BLOCK_SHIFT]++;
	tr->sup[p >> SD_SUPER_SHIFT]++;
	tr->at[p] = slot;
	tr->slots[slot].pos = (uint32_t)p;
}

void sd_tracker_free(sd_tracker *tr);

typedef struct trace_thread {
	uint64_t tid;
	uint64_t refs; /* the thread's clock: references made so far */
	sd_tracker sd; /* its exact stack distances */
} trace_thread;

/* A slot of the thread-id map (tid → index into threads). */
typedef struct trace_tslot {
	uint64_t tid;
	uint32_t idx; /* TRACE_NONE = empty */
	uint32_t reserved;
} trace_tslot;

struct lomas_trace {
	/* hot state */
	uint64_t countdown; /* references until the next sample (1 = this one) */
	uint8_t *filter;    /* saturating count of watches per hash bucket; 255 sticks */
	unsigned filter_shift;
	unsigned line_shift;
	unsigned table_shift;
	uint64_t last_tid; /* one-entry thread cache */
	uint32_t last_idx; /* TRACE_NONE = cache empty */
	bool finished;

	struct lomas_config cfg;
	bool auto_period;
	uint64_t period; /* mean period in force */
	double gap_log;  /* rng_gap_log(period) */
	rng rng;

	VEC(trace_thread) threads;
	trace_tslot *tmap; /* capacity tmap_mask + 1, power of two */
	size_t tmap_mask;

	VEC(lomas_sample) samples; /* creation order; open (DANGLING): reserved = watch + 1 */
	size_t oldest;             /* no open sample below this index */

	trace_slot *table;
	size_t table_mask;
	size_t table_used; /* distinct watched lines */

	trace_watch *watches;
	size_t watches_cap;
	uint32_t free_watch; /* free list head */
	size_t open;         /* open samples */
	uint64_t censored;   /* samples censored by max_samples_live */
};

/*
 * Feed one reference without argument checks (the caller guarantees t is
 * live and unfinished and kind is LOMAS_REF_LOAD or LOMAS_REF_STORE).
 */
lomas_status trace_ref_fast(struct lomas_trace *t, uint64_t thread, uint64_t addr, uint64_t pc,
                            unsigned kind);

/*
 * The lackey reader over a stream with a read buffer of buf_bytes (clamped
 * to at least 2 * LACKEY_MAX_LINE); the public functions use a large one,
 * tests use small ones to exercise lines split across reads.
 */
lomas_status lackey_read_stream(const lomas_config *cfg, FILE *in, const char *name,
                                size_t buf_bytes, lomas_profile **out);

/*
 * The traced program's map, rebuilt from the log's "Command:" line (or,
 * with valgrind -v, its first "Reading syms from" path) and Valgrind's
 * placement of executables, recorded in p only when the sampled pcs agree
 * with it; the metadata key "maps" says what was recorded or why nothing
 * was (lackey_maps.c). Fails only for lack of memory.
 */
lomas_status lackey_record_maps(lomas_profile *p, const char *syms, const char *command);

#endif

/*
 * lib/model internal: the finite samples' entries while model_data_build
 * (data.c) prepares them, and the step that sorts them into each group's
 * distinct distances with their prefix sums (groups.c).
 */
#ifndef LOMAS_MODEL_ENTRIES_H
#define LOMAS_MODEL_ENTRIES_H

#include "model.h"

/*
 * The finite samples while sorting, as two arrays: k[i] = d << 2 | INSIDE
 * | FIXED, and their weights w[i], or none while every weight is wu (a
 * fixed period's profile: 8 bytes a sample, not 16, and half the sort's
 * traffic). The keys are 32 bits (k32) while every key fits and every
 * weight is wu, as in most profiles (d < 2^30): 4 bytes a sample, half the
 * memory to map and to move again; else 64 (k).
 */
typedef struct ents {
	uint64_t *k;   /* NULL while narrow */
	uint32_t *k32; /* NULL while wide */
	double *w;     /* NULL: every weight is wu */
	double wu;
} ents;

static inline double ent_w(const ents *e, size_t i)
{
	return e->w ? e->w[i] : e->wu;
}

static inline uint64_t ent_key(const ents *e, size_t i)
{
	return e->k32 ? e->k32[i] : e->k[i];
}

/* key fits the width (the caller widened e first where it did not). */
static inline void ent_set(ents *e, size_t i, uint64_t key)
{
	if (e->k32)
		e->k32[i] = (uint32_t)key;
	else
		e->k[i] = key;
}

#define E_INSIDE 1u /* the reuse ends inside the group */
#define E_FIXED 2u  /* ... and is in a corrected class (StatCache's F, not StatStack's) */
#define E_DMAX ((UINT64_C(1) << 62) - 1)

/*
 * Distances below DENSE_D in a group of at least DENSE_MIN finite samples
 * are summed in a table indexed by distance (1 MiB) rather than sorted:
 * most reuses are short, and the sort of a million entries was most of a
 * curve's time. Sums per distance in sample order either way. One
 * distance's sums share a 16-byte cell: the distances come in random
 * order, and a cell is one cache miss where separate arrays were two. The
 * cell holds the weight and the one partial sum the policy reads (LRU: wl;
 * random: wi), half the table of keeping both (the table is in the cache
 * or not by its size).
 */
#define DENSE_D 65536
#define DENSE_MIN 16384

typedef struct dense_cell {
	double w, x; /* all the weight; wl (lru) or wi (random) */
} dense_cell;

typedef struct dense {
	/* [DENSE_D]: the long distances' spare cell. n: counts, where sums are counts times wu. */
	union {
		dense_cell c[DENSE_D + 1];
		uint32_t n[DENSE_D + 1][2]; /* entries outside x's sum; in it */
	};
	uint8_t used[DENSE_D + 1]; /* zeroed per group: 64 KiB, not the 1 MiB of sums */
} dense;

/*
 * Sort and deduplicate each group's entries [off, cur[g]); the arrays and
 * prefix sums the policy needs (lru: wl, pw, pwd; random: wi, and with
 * moments pwi, pwdi, pwd2i for the per-size solver); random's group
 * moments. tmp holds the largest group (and weights if e has); count
 * 2048; h the dense table. bound: at least the distinct distances of all
 * groups (the arrays' length). The arrays go in reuse (reuse_bytes, dead
 * scratch of the caller's) when they fit; m->arrays is then reuse.
 */
lomas_status model_finish_groups(model_data *m, ents *e, const size_t *cur, const ents *tmp,
                                 size_t *count, dense *h, bool lru, bool moments, size_t bound,
                                 void *reuse, size_t reuse_bytes);

#endif

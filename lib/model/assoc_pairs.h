/*
 * Pairs (reuse, sampled reference inside it), shared by the set-associative
 * LRU (assoc_lru.c) and random-replacement (assoc_random.c) models: what
 * the sampled references inside sampled reuses show of how busy a reuse's
 * set is in between (assoc_pairs.c).
 */
#ifndef LOMAS_MODEL_ASSOC_PAIRS_H
#define LOMAS_MODEL_ASSOC_PAIRS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model.h"

/* For at most this many reuses, evenly spaced, up to this many references inside. */
#define PAIRS_PER_REUSE 16
#define REUSES_MAX 262144u

/* A sample's index in (thread, start) order (assoc_pairs.c, assoc_spread.c). */
typedef struct assoc_ts_key {
	uint32_t thread;
	uint64_t start;
	uint32_t ix;
} assoc_ts_key;

/* qsort order of assoc_ts_key: thread, then start, then index. */
int assoc_ts_cmp(const void *a, const void *b);
/* The first key of thread t at or after clock c in k[lo, hi). */
size_t assoc_ts_lower(const assoc_ts_key *k, size_t lo, size_t hi, uint32_t t, uint64_t c);

/* Sample ri is a reuse, rj a sampled reference inside it standing for om of the weight. */
typedef struct assoc_pair {
	uint32_t ri, rj;
	double om;
} assoc_pair;

/*
 * The pairs of the reuses for which is_reuse(ctx, i) holds (of the samples
 * of positive weight), inside each one up to PAIRS_PER_REUSE of the
 * references (at random, from seed, where there are more), each weighted
 * si.w sj.w (count inside) / (count taken). last_only: only the references
 * that are their line's last touch before the reuse's end.
 */
lomas_status assoc_pairs(const lomas_profile *p, bool (*is_reuse)(const void *ctx, size_t i),
                         const void *ctx, uint64_t seed, bool last_only, assoc_pair **out,
                         size_t *nout);

#endif

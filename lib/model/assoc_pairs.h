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

/*
 * How evenly the sparsely sampled and unnamed lines of a window spread over
 * the sets (assoc_spread.c), for set-associative LRU (assoc_lru.c): pairs
 * of sampled references close in time show whether a window's lines lie
 * on a strided progression, and how much of its span they fill.
 */
#ifndef LOMAS_MODEL_ASSOC_SPREAD_H
#define LOMAS_MODEL_ASSOC_SPREAD_H

#include <stddef.h>
#include <stdint.h>

#include "assoc_touch.h"
#include "model.h"

/* Per band of window length, up to 3 progressions its pairs show (band h's at 3h..3h+2). */
typedef struct assoc_spread {
	uint64_t *stride; /* sigma: the lines' common step (0: no more found) */
	double *share;    /* p: the weighted share of the band's pairs on it */
	double *span;     /* R: the steps a window's lines on it span */
	size_t nb;
} assoc_spread;

/*
 * The progressions of the bands h < nb with dh[h] > 0 (their window
 * length in references), from pairs of sampled references of one thread
 * less than dh[h] apart, of distinct lines with fewer than WELL_SAMPLED
 * samples each.
 */
lomas_status assoc_spread_build(const lomas_profile *p, const al_lines *L, const double *dh,
                                size_t nb, uint64_t seed, assoc_spread *out);
void assoc_spread_free(assoc_spread *sp);
/*
 * The per-set count's variance over its mean, relative to lines placed at
 * random (1; 0 for an even spread), of D sparsely sampled and unnamed
 * lines of a window of band h at S sets.
 */
double assoc_spread_phi(const assoc_spread *sp, size_t h, uint64_t S, double D);

#endif

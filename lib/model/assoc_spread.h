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

/*
 * Up to 3 progressions (at 3j..3j+2) per band of window length (j = h) and
 * per group of reuses (j = nb + g), the commonest first.
 */
typedef struct assoc_spread {
	uint64_t *stride; /* sigma: the lines' common step (0: no more found) */
	double *share;    /* p: the weighted share of the pairs on it */
	double *span;     /* R: the steps a window's lines on it span */
	size_t nb;        /* bands */
	size_t ng;        /* groups */
	double *wshare;   /* per group: its windows' lines' well sampled share (< 0: unknown) */
} assoc_spread;

/*
 * The progressions of the bands h < nb with dh[h] > 0 (their window
 * length in references), from pairs of sampled references of one thread
 * less than dh[h] apart, of distinct lines with fewer than WELL_SAMPLED
 * samples each; and of the ng groups of reuses (group[i]: sample i's, or
 * UINT32_MAX for none), from pairs inside the reuses' own windows, and
 * the share of those windows' lines that are well sampled (wshare).
 */
lomas_status assoc_spread_build(const lomas_profile *p, const al_lines *L, const double *dh,
                                size_t nb, const uint32_t *group, size_t ng, uint64_t seed,
                                assoc_spread *out);
void assoc_spread_free(assoc_spread *sp);
/*
 * The per-set count's variance over its mean, relative to lines placed at
 * random (1; 0 for an even spread), of the sparsely sampled and unnamed
 * lines of a window at S sets: of a reuse of group g (UINT32_MAX: none),
 * Dg of them, by the group's progressions where its pairs show any; else
 * of band h's window, Dh of them, by the band's.
 */
double assoc_spread_phi(const assoc_spread *sp, uint32_t g, double Dg, size_t h, double Dh,
                        uint64_t S);

#endif

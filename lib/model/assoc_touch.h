/*
 * Set-associative LRU (assoc_lru.c): the distinct sampled lines and each
 * one's chance to be touched in a window of d references (assoc_touch.c).
 */
#ifndef LOMAS_MODEL_ASSOC_TOUCH_H
#define LOMAS_MODEL_ASSOC_TOUCH_H

#include <stddef.h>
#include <stdint.h>

#include "model.h"

/* A line with fewer samples than this has no Bernoulli of its own. */
#define WELL_SAMPLED 8

/* The distinct sampled lines and what p_y(d) needs of each. */
typedef struct al_lines {
	uint64_t *u; /* ascending */
	size_t n;
	size_t *off;         /* line k's gaps: g[off[k] .. off[k + 1]), ascending */
	double *g;           /* gaps */
	double *cw, *cwg;    /* prefix sums of w and w g over g (one longer) */
	double *edge;        /* per line: weight of its dangling and censored samples */
	double *nw;          /* per line: all its samples' weight (its references) */
	uint32_t *cnt;       /* per line: its samples */
	double *s2;          /* per line: sum of (w g)^2 over its gaps, for their noise */
	double *span;        /* per line: from its first sample's start to its last touch seen */
	double T;            /* the run's references: all the weight */
	double unseen;       /* expected lines no sample names */
	double unseen_floor; /* as many as the reuses' stack distances imply (assoc_unseen_floor) */
	double unseen_rel;   /* unseen's relative sampling noise (the dangling samples') */
} al_lines;

lomas_status al_lines_build(const lomas_profile *p, al_lines *L);
void al_lines_free(al_lines *L);
/* The index of v in the sorted, distinct u[n] (present). */
size_t al_find(const uint64_t *u, size_t n, uint64_t v);
/*
 * p_k(d): the chance that line k is touched in a window of d references,
 * Tx of the run's references not to the reused line.
 */
double al_touch(const al_lines *L, size_t k, double d, double Tx);

#endif

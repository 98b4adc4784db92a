/*
 * Samples in (thread, start) order, shared by the set-associative LRU
 * (assoc.c) and random-replacement (assoc_random.c) models.
 */
#ifndef LOMAS_MODEL_ASSOC_KEYS_H
#define LOMAS_MODEL_ASSOC_KEYS_H

#include <stddef.h>
#include <stdint.h>

/* A sample's index in (thread, start) order. */
typedef struct ts_key {
	uint32_t thread;
	uint64_t start;
	uint32_t ix;
} ts_key;

static inline int ts_cmp(const void *a, const void *b)
{
	const ts_key *x = a, *y = b;
	if (x->thread != y->thread)
		return x->thread < y->thread ? -1 : 1;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->ix < y->ix ? -1 : x->ix > y->ix;
}

/* The first key of thread t at or after clock c in k[lo, hi). */
static inline size_t ts_lower(const ts_key *k, size_t lo, size_t hi, uint32_t t, uint64_t c)
{
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (k[mid].thread < t || (k[mid].thread == t && k[mid].start < c))
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

#endif

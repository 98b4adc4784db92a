/*
 * Reuse classes for StatStack's correction: reuses of one thread with the
 * same start and end instruction and about the same distance (1/8 octave)
 * are one kind of reuse, with about the same stack distance. A class of at
 * least MODEL_CLASS_MIN samples is large enough to estimate, from the
 * reuses' own intervals (interval.c), how far the distribution-based
 * stack distance is off for that kind (statstack.c).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

/* A slot of the class table: a 64-bit hash of the key (0 = empty), its count and id. */
typedef struct cslot {
	uint64_t key;
	uint32_t count;
	uint32_t id; /* class index + 1 once numbered */
} cslot;

typedef struct ctable {
	cslot *s;
	size_t cap, used;
} ctable;

static uint64_t mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/*
 * The class key of a reuse, hashed to 64 bits (two keys colliding would
 * merge two classes: at 2^-64 per pair, never): thread, start and end pc,
 * and the distance's 1/8 octave (the octave and the 3 bits after its
 * leading one).
 */
static uint64_t class_key(const lomas_sample *s, uint32_t thread)
{
	uint64_t v = sample_distance(s) + 1, h;
	unsigned k = v ? 63u - (unsigned)__builtin_clzll(v) : 64u;
	unsigned sub = k >= 3 ? (unsigned)(v >> (k - 3)) & 7u : (unsigned)(v << (3 - k)) & 7u;
	h = mix64(s->start_pc ^ 0x9e3779b97f4a7c15ull);
	h = mix64(h ^ s->end_pc);
	h = mix64(h ^ ((uint64_t)thread << 16 | (8u * k + sub)));
	return h ? h : 1;
}

static cslot *ctable_find(ctable *t, uint64_t key)
{
	size_t h = (size_t)key & (t->cap - 1);
	while (t->s[h].key && t->s[h].key != key)
		h = (h + 1) & (t->cap - 1);
	return &t->s[h];
}

/* Count key; false when out of memory. Grows at half full. */
static bool ctable_add(ctable *t, uint64_t key)
{
	cslot *x;
	if (2 * (t->used + 1) > t->cap) {
		ctable n = {calloc(2 * t->cap, sizeof *n.s), 2 * t->cap, t->used};
		if (!n.s)
			return false;
		for (size_t i = 0; i < t->cap; i++)
			if (t->s[i].key)
				*ctable_find(&n, t->s[i].key) = t->s[i];
		free(t->s);
		*t = n;
	}
	x = ctable_find(t, key);
	if (!x->key) {
		x->key = key;
		t->used++;
	}
	x->count++;
	return true;
}

/*
 * A filter before the exact count: two rows of 2^18 saturating byte
 * counters indexed by different bits of the key; a key counted fewer than
 * MODEL_CLASS_MIN times in either row cannot make a class. Most keys of a
 * program with few instructions pass (and are counted exactly), most of a
 * profile with scattered instructions do not, and then the exact table stays
 * small (hashing every key of a million samples into it cost 300 ms, in
 * cache misses).
 */
#define SKETCH_BITS 18

static uint8_t *sketch_counts(const uint64_t *key, size_t n)
{
	uint8_t *c = calloc(2u << SKETCH_BITS, 1);
	const size_t mask = ((size_t)1 << SKETCH_BITS) - 1;
	if (!c)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		uint8_t *a = &c[key[i] & mask],
		        *b = &c[(1u << SKETCH_BITS) + (key[i] >> 40 & mask)];
		if (!key[i])
			continue;
		*a += *a < 255;
		*b += *b < 255;
	}
	return c;
}

static bool sketch_may_reach(const uint8_t *c, uint64_t key)
{
	const size_t mask = ((size_t)1 << SKETCH_BITS) - 1;
	return c[key & mask] >= MODEL_CLASS_MIN &&
	       c[(1u << SKETCH_BITS) + (key >> 40 & mask)] >= MODEL_CLASS_MIN;
}

lomas_status model_classes(const lomas_profile *p, const uint32_t *start_group,
                           const uint32_t *end_group, model_data *m, uint8_t *fixed)
{
	size_t n = p->samples.n, nfix = 0, ncls = 0;
	ctable tab = {calloc(4096, sizeof(cslot)), 4096, 0};
	uint64_t *key = malloc((n ? n : 1) * sizeof *key);
	uint32_t *thread = malloc((n ? n : 1) * sizeof *thread), *cls = NULL, *slot = NULL;
	uint8_t *sketch = NULL;
	double *ht = NULL, *in = NULL;
	lomas_status st = LOMAS_OK;
	memset(fixed, 0, n);
	if (!tab.s || !key || !thread) {
		st = error_set(LOMAS_ENOMEM, "out of memory classifying reuses");
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		const lomas_sample *s = &p->samples.items[i];
		thread[i] = m->groups[start_group[i]].thread;
		key[i] = 0;
		/* Reuses inside one group only: a crossing one's interval mixes groups. */
		if (s->state != LOMAS_SAMPLE_REUSED || end_group[i] != start_group[i])
			continue;
		key[i] = class_key(s, thread[i]);
	}
	if (!(sketch = sketch_counts(key, n))) {
		st = error_set(LOMAS_ENOMEM, "out of memory classifying reuses");
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		if (!key[i])
			continue;
		if (!sketch_may_reach(sketch, key[i])) {
			key[i] = 0;
			continue;
		}
		if (!ctable_add(&tab, key[i])) {
			st = error_set(LOMAS_ENOMEM, "out of memory classifying reuses");
			goto out;
		}
	}
	/* cls[i] reuses key's storage: the class of each fixed sample. */
	cls = (uint32_t *)(void *)key;
	for (size_t i = 0; i < n; i++) {
		cslot *x;
		uint64_t k = key[i];
		cls[i] = UINT32_MAX;
		if (!k)
			continue;
		x = ctable_find(&tab, k);
		if (x->count < MODEL_CLASS_MIN)
			continue;
		fixed[i] = 1;
		nfix++;
		if (!x->id)
			x->id = (uint32_t)++ncls;
		cls[i] = x->id - 1;
	}
	m->fix = malloc((nfix ? nfix : 1) * sizeof *m->fix);
	ht = malloc((nfix ? nfix : 1) * sizeof *ht);
	in = malloc((nfix ? nfix : 1) * sizeof *in);
	/* slot[i]: 1 + sample i's place among the fixed ones . */
	slot = malloc((n ? n : 1) * sizeof *slot);
	if (!m->fix || !ht || !in || !slot) {
		st = error_set(LOMAS_ENOMEM, "out of memory classifying reuses");
		goto out;
	}
	for (size_t i = 0, k = 0; i < n; i++)
		slot[i] = fixed[i] ? (uint32_t)++k : 0;
	if (nfix && (st = model_interval_counts(p, thread, slot, ht, in)))
		goto out;
	for (size_t i = 0; i < n; i++) {
		const lomas_sample *s = &p->samples.items[i];
		if (!fixed[i])
			continue;
		m->fix[m->nfix] = (model_fix){.s = s->start,
		                              .e = s->end,
		                              .w = s->weight,
		                              .ht = ht[m->nfix],
		                              .in = in[m->nfix],
		                              .d = (double)sample_distance(s),
		                              .g0 = start_group[i],
		                              .g1 = end_group[i],
		                              .cls = cls[i]};
		m->nfix++;
	}
	m->nclass = ncls;
out:
	free(sketch);
	free(tab.s);
	free(key);
	free(thread);
	free(ht);
	free(in);
	free(slot);
	return st;
}

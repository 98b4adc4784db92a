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

static uint64_t rotl64(uint64_t x, unsigned r)
{
	return x << r | x >> (64 - r);
}

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
 * leading one). The three parts are mixed apart and combined by xor with
 * rotations (two keys that differ in one part only cannot collide; mix64
 * is a bijection): one multiplication chain's latency per sample where
 * mixing them one after another was three.
 */
uint64_t model_class_key(const lomas_sample *s, uint32_t thread)
{
	uint64_t h =
	    mix64(s->start_pc ^ 0x9e3779b97f4a7c15ull) ^
	    rotl64(mix64(s->end_pc ^ 0x6a09e667f3bcc909ull), 21) ^
	    rotl64(mix64(((uint64_t)thread << 16 | model_class_octave(s)) ^ 0xbb67ae8584caa73bull),
	           42);
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

#define KEY_AHEAD 8

/*
 * Whether a hint may reach MODEL_CLASS_MIN samples (model_sketch_add): its
 * first row's counter as a bit of rowa, its second's in the sketch.
 */
static bool sketch_may_reach(const uint64_t *rowa, const uint8_t *c, uint32_t hint)
{
	size_t a = MODEL_SKETCH_A(hint);
	return (rowa[a / 64] >> (a % 64) & 1) && c[MODEL_SKETCH_B(hint)] >= MODEL_CLASS_MIN;
}

lomas_status model_classes(const lomas_profile *p, const uint32_t *sample_piece,
                           const uint32_t *hint, const uint8_t *sketch, bool one, model_data *m,
                           uint32_t **fixed, size_t *nfixed)
{
	size_t n = p->samples.n, nfix = 0, npass = 0, cap = 0, ncls = 0;
	ctable tab = {calloc(4096, sizeof(cslot)), 4096, 0};
	uint32_t *thread = NULL, *pass = NULL, *cls = NULL;
	uint64_t *key = NULL, *rowa = malloc(((size_t)1 << MODEL_SKETCH_BITS) / 8);
	double *ht = NULL, *in = NULL;
	lomas_status st = LOMAS_OK;
	*fixed = NULL;
	*nfixed = 0;
	if (!tab.s || !rowa) {
		st = error_set(LOMAS_ENOMEM, "out of memory classifying reuses");
		goto out;
	}
	/*
	 * The samples whose hint may reach a class, listed in pass. The first
	 * row's test is a bit of a 32 KiB map (in the first-level cache; most
	 * hints fail it), the second row's a byte of the sketch.
	 */
	for (size_t i = 0; i < ((size_t)1 << MODEL_SKETCH_BITS); i += 64) {
		uint64_t b = 0;
		for (size_t j = 0; j < 64; j++)
			b |= (uint64_t)(sketch[i + j] >= MODEL_CLASS_MIN) << j;
		rowa[i / 64] = b;
	}
	for (size_t i = 0; i < n; i++) {
		uint32_t h = hint[i];
		if (!h || !sketch_may_reach(rowa, sketch, h))
			continue;
		if (npass == cap) {
			uint32_t *q = realloc(pass, (cap = cap ? 2 * cap : 1024) * sizeof *pass);
			if (!q) {
				st = error_set(LOMAS_ENOMEM, "out of memory classifying reuses");
				goto out;
			}
			pass = q;
		}
		pass[npass++] = (uint32_t)i;
	}
	/*
	 * Their keys, counted. They are a few percent of the samples, each on
	 * its own cache line: fetched KEY_AHEAD samples ahead (in turn, each
	 * was a miss to memory, the step's largest cost).
	 */
	key = malloc((npass ? npass : 1) * sizeof *key);
	if (!key) {
		st = error_set(LOMAS_ENOMEM, "out of memory classifying reuses");
		goto out;
	}
	for (size_t j = 0; j < npass; j++) {
		if (j + KEY_AHEAD < npass) {
			__builtin_prefetch(&p->samples.items[pass[j + KEY_AHEAD]]);
			__builtin_prefetch(&sample_piece[pass[j + KEY_AHEAD]]);
		}
		key[j] = model_class_key(&p->samples.items[pass[j]],
		                         m->pieces.items[sample_piece[pass[j]]].thread);
		if (!ctable_add(&tab, key[j])) {
			st = error_set(LOMAS_ENOMEM, "out of memory classifying reuses");
			goto out;
		}
	}
	cls = malloc((npass ? npass : 1) * sizeof *cls);
	if (!cls) {
		st = error_set(LOMAS_ENOMEM, "out of memory classifying reuses");
		goto out;
	}
	for (size_t j = 0; j < npass; j++) {
		cslot *x = ctable_find(&tab, key[j]);
		if (x->count < MODEL_CLASS_MIN)
			continue;
		if (!x->id)
			x->id = (uint32_t)++ncls;
		pass[nfix] = pass[j];
		cls[nfix++] = x->id - 1;
	}
	if (nfix == 0)
		goto out;
	m->fix = malloc(nfix * sizeof *m->fix);
	ht = malloc(nfix * sizeof *ht);
	in = malloc(nfix * sizeof *in);
	*fixed = malloc(nfix * sizeof **fixed);
	if (!one)
		thread = malloc((n ? n : 1) * sizeof *thread);
	if (!m->fix || !ht || !in || !*fixed || (!one && !thread)) {
		st = error_set(LOMAS_ENOMEM, "out of memory classifying reuses");
		goto out;
	}
	memcpy(*fixed, pass, nfix * sizeof *pass);
	*nfixed = nfix;
	for (size_t i = 0; thread && i < n; i++)
		thread[i] = m->pieces.items[sample_piece[i]].thread;
	if ((st = model_interval_counts(p, thread, *fixed, nfix, ht, in)))
		goto out;
	for (size_t j = 0; j < nfix; j++) {
		const lomas_sample *s = &p->samples.items[(*fixed)[j]];
		if (j + KEY_AHEAD < nfix) {
			__builtin_prefetch(&p->samples.items[(*fixed)[j + KEY_AHEAD]]);
			__builtin_prefetch(&sample_piece[(*fixed)[j + KEY_AHEAD]]);
		}
		/* Only reuses inside one group have a key: they end in g0 too. */
		uint32_t g0 = m->piece_group[sample_piece[(*fixed)[j]]];
		m->fix[m->nfix++] = (model_fix){.s = s->start,
		                                .e = s->end,
		                                .w = s->weight,
		                                .ht = ht[j],
		                                .in = in[j],
		                                .d = (double)sample_distance(s),
		                                .g0 = g0,
		                                .g1 = g0,
		                                .cls = cls[j]};
	}
	m->nclass = ncls;
out:
	free(pass);
	free(key);
	free(rowa);
	free(tab.s);
	free(thread);
	free(ht);
	free(in);
	free(cls);
	if (st) {
		free(*fixed);
		*fixed = NULL;
		*nfixed = 0;
	}
	return st;
}

/*
 * Which instructions miss: the per-sample miss probabilities of
 * attribution.c summed per pc (UMI's delinquent loads, done the StatCache
 * way: docs/model.md). Pure: no symbols here (lib/sym names the pcs).
 */
#include <stdlib.h>
#include <string.h>

#include "model.h"

/* An open-addressing table pc -> index into the pcs array. */
typedef struct pc_table {
	uint64_t *keys;
	uint32_t *vals; /* index + 1; 0 = empty */
	size_t cap;
} pc_table;

static uint64_t mix(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* The entry of pc in h->pcs, appended if new; NULL when out of memory. */
static model_hot_pc *entry_of(model_hot *h, size_t *cap, pc_table *t, uint64_t pc)
{
	size_t i = mix(pc) & (t->cap - 1);
	while (t->vals[i] && t->keys[i] != pc)
		i = (i + 1) & (t->cap - 1);
	if (t->vals[i])
		return &h->pcs[t->vals[i] - 1];
	if (h->n == *cap) {
		size_t nc = *cap ? *cap * 2 : 256;
		model_hot_pc *np = realloc(h->pcs, nc * sizeof *np);
		if (!np)
			return NULL;
		h->pcs = np;
		*cap = nc;
	}
	memset(&h->pcs[h->n], 0, sizeof h->pcs[h->n]);
	h->pcs[h->n].pc = pc;
	t->keys[i] = pc;
	t->vals[i] = (uint32_t)++h->n;
	return &h->pcs[h->n - 1];
}

static int by_misses(const void *a, const void *b)
{
	const model_hot_pc *x = a, *y = b;
	if (x->misses != y->misses)
		return x->misses > y->misses ? -1 : 1;
	return (x->pc > y->pc) - (x->pc < y->pc);
}

void model_hot_free(model_hot *h)
{
	free(h->pcs);
	memset(h, 0, sizeof *h);
}

lomas_status model_hot_build(const lomas_profile *p, lomas_policy policy, double lines,
                             unsigned flags, model_hot *out)
{
	model_attr at = {0};
	double cum = 0.0;
	pc_table t = {0};
	size_t cap = 0;
	lomas_status st;
	memset(out, 0, sizeof *out);
	/* Every sample names at most two pcs: a table of 4 n slots stays half empty. */
	if (p->samples.n > UINT32_MAX / 4)
		return error_set(LOMAS_ERANGE, "too many samples to attribute (%zu)", p->samples.n);
	for (t.cap = 64; t.cap < 4 * p->samples.n; t.cap *= 2)
		;
	at.prob = malloc((p->samples.n ? p->samples.n : 1) * sizeof *at.prob);
	at.mscale = malloc((p->samples.n ? p->samples.n : 1) * sizeof *at.mscale);
	at.rscale = malloc((p->samples.n ? p->samples.n : 1) * sizeof *at.rscale);
	t.keys = malloc(t.cap * sizeof *t.keys);
	t.vals = calloc(t.cap, sizeof *t.vals);
	if (!at.prob || !at.mscale || !at.rscale || !t.keys || !t.vals) {
		st = error_set(LOMAS_ENOMEM, "out of memory attributing misses");
		goto out;
	}
	if ((st = model_sample_miss_probs(p, policy, lines, flags, &at)))
		goto out;
	for (size_t i = 0; i < p->samples.n; i++) {
		const lomas_sample *s = &p->samples.items[i];
		double w = s->weight * at.rscale[i], mw = s->weight * at.mscale[i] * at.prob[i];
		bool reused = s->state == LOMAS_SAMPLE_REUSED;
		model_hot_pc *a = entry_of(out, &cap, &t, s->start_pc), *b;
		if (!a) {
			st = error_set(LOMAS_ENOMEM, "out of memory attributing misses");
			goto out;
		}
		a->refs += w;
		a->started++;
		if (!reused) {
			/* Cold or censored: the reusing instruction is not known. */
			a->misses += mw;
			a->unseen += mw;
			continue;
		}
		if (!(b = entry_of(out, &cap, &t, s->end_pc))) {
			st = error_set(LOMAS_ENOMEM, "out of memory attributing misses");
			goto out;
		}
		b->misses += mw;
		b->reuses += w;
		b->ended++;
	}
	qsort(out->pcs, out->n, sizeof *out->pcs, by_misses);
	for (size_t i = 0; i < out->n; i++)
		out->misses += out->pcs[i].misses;
	out->refs = at.total;
	/* The smallest set covering 90 %: the largest first until they do. The
	 * relative slack keeps rounding in the sums from adding one more pc. */
	for (size_t i = 0; i < out->n && out->misses > 0.0; i++) {
		if (cum >= MODEL_DELINQUENT_COVER * out->misses * (1 - 1e-12))
			break;
		cum += out->pcs[i].misses;
		out->delinquent = i + 1;
	}
	out->cover90 = out->delinquent;
	/* And every pc with 1 % of the misses (UMI's threshold): where three
	 * loads cover 90 %, a fourth with 8 % is no less worth looking at. */
	while (out->delinquent < out->n &&
	       out->pcs[out->delinquent].misses >= MODEL_DELINQUENT_SHARE * out->misses &&
	       out->misses > 0.0)
		out->delinquent++;
	st = LOMAS_OK;
out:
	free(at.prob);
	free(at.mscale);
	free(at.rscale);
	free(t.keys);
	free(t.vals);
	if (st)
		model_hot_free(out);
	return st;
}

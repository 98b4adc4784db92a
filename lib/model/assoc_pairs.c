/*
 * The set-associative models' walk over the samples in (thread, start)
 * order (assoc_pairs.h): for each reuse looked into, the sampled
 * references of the same thread between its ends.
 */
#include <stdlib.h>

#include "assoc_pairs.h"

int assoc_ts_cmp(const void *a, const void *b)
{
	const assoc_ts_key *x = a, *y = b;
	if (x->thread != y->thread)
		return x->thread < y->thread ? -1 : 1;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->ix < y->ix ? -1 : x->ix > y->ix;
}

size_t assoc_ts_lower(const assoc_ts_key *k, size_t lo, size_t hi, uint32_t t, uint64_t c)
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

lomas_status assoc_pairs(const lomas_profile *p, bool (*is_reuse)(const void *ctx, size_t i),
                         const void *ctx, uint64_t seed, bool last_only, assoc_pair **out,
                         size_t *nout)
{
	size_t ns = p->samples.n, nk = 0, nreused = 0, step, np = 0;
	assoc_ts_key *keys = malloc((ns ? ns : 1) * sizeof *keys);
	assoc_pair *pr;
	rng g;
	if (!keys)
		return error_set(LOMAS_ENOMEM, "out of memory");
	for (size_t i = 0; i < ns; i++) {
		const lomas_sample *s = &p->samples.items[i];
		if (!(s->weight > 0.0))
			continue;
		keys[nk++] = (assoc_ts_key){s->thread, s->start, (uint32_t)i};
		nreused += is_reuse(ctx, i);
	}
	step = nreused > REUSES_MAX ? (nreused + REUSES_MAX - 1) / REUSES_MAX : 1;
	/* At most ceil(nreused / step) <= REUSES_MAX reuses are looked into. */
	pr = malloc(((nreused + step - 1) / step * PAIRS_PER_REUSE + 1) * sizeof *pr);
	if (!pr) {
		free(keys);
		return error_set(LOMAS_ENOMEM, "out of memory");
	}
	qsort(keys, nk, sizeof *keys, assoc_ts_cmp);
	rng_seed(&g, seed);
	for (size_t q = 0, seen = 0; q < nk; q++) {
		const lomas_sample *si = &p->samples.items[keys[q].ix];
		size_t lo = q + 1, hi, take;
		if (!is_reuse(ctx, keys[q].ix) || seen++ % step)
			continue;
		hi = assoc_ts_lower(keys, lo, nk, si->thread, si->end);
		if (hi <= lo)
			continue;
		take = hi - lo < PAIRS_PER_REUSE ? hi - lo : PAIRS_PER_REUSE;
		for (size_t t = 0; t < take; t++) {
			size_t at =
			    take == hi - lo ? lo + t : lo + (size_t)(rng_next(&g) % (hi - lo));
			const lomas_sample *sj = &p->samples.items[keys[at].ix];
			/* A last touch before e: its line's next touch is after e, or never. */
			if (last_only && sj->state == LOMAS_SAMPLE_REUSED && sj->end <= si->end)
				continue;
			pr[np++] = (assoc_pair){keys[q].ix, keys[at].ix,
			                        si->weight * sj->weight * (double)(hi - lo) /
			                            (double)take};
		}
	}
	free(keys);
	*out = pr;
	*nout = np;
	return LOMAS_OK;
}

/*
 * Exact stack distances lent to the samples without one (docs/model.md
 * "Knife edges", "Donors").
 *
 * A clock that knows the exact distance of only a subset of its samples
 * (the inline clock's bursts, lib/inline/burst.c) leaves a cliff where it
 * was: a class of reuses whose exact distances straddle a size (2mm: 46 %
 * at 214 lines, 50 % at 215) is placed by its estimate, all on one side.
 * Here a reused sample without a distance takes its "kind's" exact samples
 * as donors: those with the same start and end pc whose reuse distance is
 * within DONOR_TOL of its own, the DONOR_MAX (MODEL_DONORS_MAX) nearest. With at least
 * DONOR_MIN of them, its miss probability at L lines is the weighted share
 * of donors whose distance, scaled by the ratio of reuse distances (a
 * triangular loop's distances grow with its reuse distances), is >= L: a
 * class is split as its donors are, instead of by a hard step. Fewer
 * donors: the estimate decides, as before.
 */
#include <math.h>
#include <stdlib.h>

#include "model.h"

#define DONOR_TOL 0.10 /* reuse distances within 10 % */
/* Three: a short run's floor of burst references (BURST_FLOOR_REFS) holds three
 * or four bursts over a long sweep (the phases workload's 188k references). */
#define DONOR_MIN 3u
#define DONOR_MAX MODEL_DONORS_MAX

typedef struct donor {
	uint64_t start_pc, end_pc;
	double rd, sd, w;
} donor;

static int donor_cmp(const void *a, const void *b)
{
	const donor *x = a, *y = b;
	if (x->start_pc != y->start_pc)
		return x->start_pc < y->start_pc ? -1 : 1;
	if (x->end_pc != y->end_pc)
		return x->end_pc < y->end_pc ? -1 : 1;
	return (x->rd > y->rd) - (x->rd < y->rd);
}

static bool is_exact(const lomas_sample *s)
{
	return s->state == LOMAS_SAMPLE_REUSED && (s->flags & LOMAS_SAMPLE_EXACT_SD);
}

lomas_status model_donors_build(const lomas_profile *p, model_donors *d)
{
	size_t k = 0;
	d->items = NULL;
	d->n = 0;
	for (size_t i = 0; i < p->samples.n; i++)
		k += is_exact(&p->samples.items[i]);
	if (!k)
		return LOMAS_OK;
	if (!(d->items = malloc(k * sizeof(donor))))
		return error_set(LOMAS_ENOMEM, "out of memory for the exact donors");
	for (size_t i = 0; i < p->samples.n; i++) {
		const lomas_sample *s = &p->samples.items[i];
		if (!is_exact(s))
			continue;
		((donor *)d->items)[d->n++] =
		    (donor){s->start_pc, s->end_pc, (double)sample_distance(s) + 1.0,
		            (double)s->reserved, s->weight};
	}
	qsort(d->items, d->n, sizeof(donor), donor_cmp);
	return LOMAS_OK;
}

void model_donors_free(model_donors *d)
{
	free(d->items);
	d->items = NULL;
	d->n = 0;
}

size_t model_donors_of(const model_donors *d, const lomas_sample *s, double *sd, double *w)
{
	const donor *x = d->items;
	donor key;
	size_t lo = 0, hi = d->n, at, a, b, got = 0;
	double wsum = 0.0;
	if (!d->n || s->state != LOMAS_SAMPLE_REUSED || (s->flags & LOMAS_SAMPLE_EXACT_SD))
		return 0;
	key = (donor){s->start_pc, s->end_pc, (double)sample_distance(s) + 1.0, 0.0, 0.0};
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (donor_cmp(&x[mid], &key) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	at = lo;
	/* The nearest reuse distances of the same kind, outward from at. */
	a = at; /* next candidate below: a - 1 */
	b = at; /* next candidate above: b */
	while (got < DONOR_MAX) {
		bool lok = a > 0 && x[a - 1].start_pc == s->start_pc &&
		           x[a - 1].end_pc == s->end_pc &&
		           key.rd <= x[a - 1].rd * (1.0 + DONOR_TOL);
		bool hok = b < d->n && x[b].start_pc == s->start_pc && x[b].end_pc == s->end_pc &&
		           x[b].rd <= key.rd * (1.0 + DONOR_TOL);
		const donor *y;
		if (!lok && !hok)
			break;
		if (lok && (!hok || key.rd - x[a - 1].rd <= x[b].rd - key.rd))
			y = &x[--a];
		else
			y = &x[b++];
		sd[got] = y->sd * key.rd / y->rd;
		w[got] = y->w;
		wsum += y->w;
		got++;
	}
	if (got < DONOR_MIN || !(wsum > 0.0))
		return 0;
	for (size_t i = 0; i < got; i++)
		w[i] /= wsum;
	return got;
}

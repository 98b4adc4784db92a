/* Grouping and sorting the samples once per model call. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

typedef struct entry {
	uint64_t d;
	double w;
} entry;

static void entry_isort(entry *a, size_t n)
{
	for (size_t i = 1; i < n; i++) {
		entry x = a[i];
		size_t j = i;
		while (j > 0 && a[j - 1].d > x.d) {
			a[j] = a[j - 1];
			j--;
		}
		a[j] = x;
	}
}

/* Quicksort by distance (median of three, insertion sort for short runs). */
static void entry_sort(entry *a, size_t n)
{
	while (n > 24) {
		size_t i = 0, j = n - 1, mid = n / 2;
		uint64_t x, y, z, piv;
		x = a[0].d;
		y = a[mid].d;
		z = a[n - 1].d;
		piv = x < y ? (y < z ? y : (x < z ? z : x)) : (x < z ? x : (y < z ? z : y));
		for (;;) {
			while (a[i].d < piv)
				i++;
			while (a[j].d > piv)
				j--;
			if (i >= j)
				break;
			entry t = a[i];
			a[i] = a[j];
			a[j] = t;
			i++;
			j--;
		}
		/* [0, j] <= piv <= [j + 1, n): recurse on the smaller side. */
		if (j + 1 < n - j - 1) {
			entry_sort(a, j + 1);
			a += j + 1;
			n -= j + 1;
		} else {
			entry_sort(a + j + 1, n - j - 1);
			n = j + 1;
		}
	}
	entry_isort(a, n);
}

void model_data_free(model_data *m)
{
	free(m->groups);
	free(m->dist);
	free(m->d);
	free(m->w);
	free(m->pw);
	free(m->pwd);
	free(m->pwd2);
	memset(m, 0, sizeof *m);
}

lomas_status model_data_build(const struct lomas_profile *p, bool per_window, model_data *m)
{
	size_t ng = per_window ? p->windows.n : 1;
	size_t *count = NULL, *pos = NULL;
	entry *e = NULL;
	double total = 0.0;
	lomas_status st = LOMAS_OK;

	memset(m, 0, sizeof *m);
	for (size_t i = 0; i < p->samples.n; i++) {
		const lomas_sample *s = &p->samples.items[i];
		if (s->window >= p->windows.n)
			return error_set(LOMAS_EFORMAT, "sample %zu names window %u of %zu", i,
					 s->window, p->windows.n);
		if (s->state > LOMAS_SAMPLE_CENSORED || !(s->weight >= 0.0) ||
		    !isfinite(s->weight))
			return error_set(LOMAS_EFORMAT, "sample %zu: bad state %u or weight %g", i,
					 s->state, s->weight);
		if (s->state == LOMAS_SAMPLE_REUSED && s->end <= s->start)
			return error_set(LOMAS_EFORMAT, "sample %zu: end %llu not after start %llu",
					 i, (unsigned long long)s->end,
					 (unsigned long long)s->start);
		total += s->weight;
	}
	if (!(total > 0.0))
		return error_set(LOMAS_ERANGE, "the profile has no samples to model");

	m->ngroups = ng;
	m->groups = calloc(ng ? ng : 1, sizeof *m->groups);
	count = calloc(ng + 1, sizeof *count);
	pos = calloc(ng + 1, sizeof *pos);
	if (!m->groups || !count || !pos) {
		st = error_set(LOMAS_ENOMEM, "out of memory preparing the model");
		goto out;
	}
	for (size_t i = 0; i < p->samples.n; i++) {
		const lomas_sample *s = &p->samples.items[i];
		model_group *g = &m->groups[per_window ? s->window : 0];
		g->S += s->weight;
		if (s->state == LOMAS_SAMPLE_REUSED) {
			g->W += s->weight;
			count[per_window ? s->window : 0]++;
		} else if (s->state == LOMAS_SAMPLE_DANGLING) {
			g->D += s->weight;
		} else {
			g->C += s->weight;
		}
	}
	/* Counting sort by group, then sort each group by distance. */
	size_t nfin = 0;
	for (size_t g = 0; g < ng; g++) {
		pos[g] = nfin;
		nfin += count[g];
	}
	e = malloc((nfin ? nfin : 1) * sizeof *e);
	if (!e) {
		st = error_set(LOMAS_ENOMEM, "out of memory preparing the model");
		goto out;
	}
	memcpy(count, pos, ng * sizeof *count); /* count[] = write cursors */
	for (size_t i = 0; i < p->samples.n; i++) {
		const lomas_sample *s = &p->samples.items[i];
		if (s->state != LOMAS_SAMPLE_REUSED)
			continue;
		entry *x = &e[count[per_window ? s->window : 0]++];
		x->d = sample_distance(s);
		x->w = s->weight;
	}
	/* Deduplicate in place; entries shrink, groups keep their order. */
	size_t out_n = 0;
	for (size_t g = 0; g < ng; g++) {
		size_t a = pos[g], b = count[g], start = out_n;
		entry_sort(e + a, b - a);
		for (size_t i = a; i < b; i++) {
			if (out_n > start && e[out_n - 1].d == e[i].d)
				e[out_n - 1].w += e[i].w;
			else
				e[out_n++] = e[i];
		}
		m->groups[g].off = start;
		m->groups[g].n = out_n - start;
		m->groups[g].pre = start + g;
	}
	m->n = out_n;
	m->dist = malloc((out_n ? out_n : 1) * sizeof *m->dist);
	m->d = malloc((out_n ? out_n : 1) * sizeof *m->d);
	m->w = malloc((out_n ? out_n : 1) * sizeof *m->w);
	m->pw = malloc((out_n + ng + 1) * sizeof *m->pw);
	m->pwd = malloc((out_n + ng + 1) * sizeof *m->pwd);
	m->pwd2 = malloc((out_n + ng + 1) * sizeof *m->pwd2);
	if (!m->dist || !m->d || !m->w || !m->pw || !m->pwd || !m->pwd2) {
		st = error_set(LOMAS_ENOMEM, "out of memory preparing the model");
		goto out;
	}
	for (size_t g = 0; g < ng; g++) {
		model_group *gr = &m->groups[g];
		double a = 0, b = 0, c = 0;
		gr->refs = per_window ? (double)p->windows.items[g].refs : 1.0;
		for (size_t i = 0; i < gr->n; i++) {
			size_t k = gr->off + i;
			double d = (double)e[k].d, w = e[k].w;
			m->dist[k] = e[k].d;
			m->d[k] = d;
			m->w[k] = w;
			m->pw[gr->pre + i] = a;
			m->pwd[gr->pre + i] = b;
			m->pwd2[gr->pre + i] = c;
			a += w;
			b += w * d;
			c += w * d * d;
		}
		m->pw[gr->pre + gr->n] = a;
		m->pwd[gr->pre + gr->n] = b;
		m->pwd2[gr->pre + gr->n] = c;
	}
out:
	free(e);
	free(count);
	free(pos);
	if (st)
		model_data_free(m);
	return st;
}

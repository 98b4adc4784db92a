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

/*
 * Sort a group's entries by distance: LSD radix sort on the bytes the
 * largest key uses (windows hold a few hundred samples, where comparison
 * sorts lose most of their time to mispredicted branches). tmp holds n.
 */
static void entry_sort(entry *a, size_t n, entry *tmp)
{
	uint64_t max = 0;
	entry *src = a, *dst = tmp;
	if (n <= 32) {
		entry_isort(a, n);
		return;
	}
	for (size_t i = 0; i < n; i++)
		max |= a[i].d;
	for (int shift = 0; shift < 64 && (max >> shift) != 0; shift += 8) {
		size_t count[256] = {0}, sum = 0;
		for (size_t i = 0; i < n; i++)
			count[(src[i].d >> shift) & 0xff]++;
		for (int b = 0; b < 256; b++) {
			size_t c = count[b];
			count[b] = sum;
			sum += c;
		}
		for (size_t i = 0; i < n; i++)
			dst[count[(src[i].d >> shift) & 0xff]++] = src[i];
		entry *t = src;
		src = dst;
		dst = t;
	}
	if (src != a)
		memcpy(a, src, n * sizeof *a);
}

void model_data_free(model_data *m)
{
	free(m->groups);
	free(m->d);
	free(m->w);
	free(m->pw);
	free(m->pwd);
	free(m->pwd2);
	memset(m, 0, sizeof *m);
}

/*
 * Map each window to its group: blocks of `block` consecutive windows of the
 * same thread, or one group when block is 0. Returns the group count.
 */
static size_t group_map(const struct lomas_profile *p, size_t block, uint32_t *map, size_t *nth,
                        uint32_t *cur_group)
{
	size_t ng = 0;
	if (block == 0) {
		for (size_t w = 0; w < p->windows.n; w++)
			map[w] = 0;
		return 1;
	}
	for (size_t w = 0; w < p->windows.n; w++) {
		uint32_t t = p->windows.items[w].thread;
		if (t >= p->threads.n) {
			/* Unknown thread: a group of its own. */
			map[w] = (uint32_t)ng++;
			continue;
		}
		if (nth[t]++ % block == 0)
			cur_group[t] = (uint32_t)ng++;
		map[w] = cur_group[t];
	}
	return ng;
}

lomas_status model_data_build(const struct lomas_profile *p, size_t block, bool moments,
                              model_data *m)
{
	size_t ng = 0;
	size_t *cur = NULL, nfin = 0, out_n = 0, maxg = 0, *nth = NULL;
	uint32_t *map = NULL, *cur_group = NULL;
	entry *e = NULL, *tmp = NULL;
	double total = 0.0;
	lomas_status st = LOMAS_OK;

	memset(m, 0, sizeof *m);
	map = malloc((p->windows.n ? p->windows.n : 1) * sizeof *map);
	nth = calloc(p->threads.n + 1, sizeof *nth);
	cur_group = calloc(p->threads.n + 1, sizeof *cur_group);
	if (!map || !nth || !cur_group) {
		st = error_set(LOMAS_ENOMEM, "out of memory preparing the model");
		goto out;
	}
	ng = group_map(p, block, map, nth, cur_group);
	m->ngroups = ng;
	m->groups = calloc(ng ? ng : 1, sizeof *m->groups);
	cur = calloc(ng + 1, sizeof *cur);
	if (!m->groups || !cur) {
		st = error_set(LOMAS_ENOMEM, "out of memory preparing the model");
		goto out;
	}
	/* Check every sample and count the finite ones per group. */
	for (size_t i = 0; i < p->samples.n; i++) {
		const lomas_sample *s = &p->samples.items[i];
		model_group *g;
		if (s->window >= p->windows.n) {
			st = error_set(LOMAS_EFORMAT, "sample %zu names window %u of %zu", i,
			               s->window, p->windows.n);
			goto out;
		}
		if (s->state > LOMAS_SAMPLE_CENSORED || !(s->weight >= 0.0) ||
		    !isfinite(s->weight)) {
			st = error_set(LOMAS_EFORMAT, "sample %zu: bad state %u or weight %g", i,
			               s->state, s->weight);
			goto out;
		}
		g = &m->groups[map[s->window]];
		g->S += s->weight;
		total += s->weight;
		if (s->state == LOMAS_SAMPLE_REUSED) {
			if (s->end <= s->start) {
				st = error_set(
				    LOMAS_EFORMAT, "sample %zu: end %llu not after start %llu", i,
				    (unsigned long long)s->end, (unsigned long long)s->start);
				goto out;
			}
			g->W += s->weight;
			g->off++; /* count for now */
		} else if (s->state == LOMAS_SAMPLE_DANGLING) {
			g->D += s->weight;
		} else {
			g->C += s->weight;
		}
	}
	if (!(total > 0.0)) {
		st = error_set(LOMAS_ERANGE, "the profile has no samples to model");
		goto out;
	}
	/* Counting sort by group, then sort each group by distance. */
	for (size_t g = 0; g < ng; g++) {
		size_t c = m->groups[g].off;
		m->groups[g].off = cur[g] = nfin;
		nfin += c;
		maxg = c > maxg ? c : maxg;
	}
	e = malloc((nfin ? nfin : 1) * sizeof *e);
	tmp = malloc((maxg ? maxg : 1) * sizeof *tmp);
	if (!e || !tmp) {
		st = error_set(LOMAS_ENOMEM, "out of memory preparing the model");
		goto out;
	}
	for (size_t i = 0; i < p->samples.n; i++) {
		const lomas_sample *s = &p->samples.items[i];
		if (s->state != LOMAS_SAMPLE_REUSED)
			continue;
		entry *x = &e[cur[map[s->window]]++];
		x->d = sample_distance(s);
		x->w = s->weight;
	}
	/* Deduplicate in place; groups keep their order. */
	for (size_t g = 0; g < ng; g++) {
		size_t a = m->groups[g].off, b = cur[g], start = out_n;
		entry_sort(e + a, b - a, tmp);
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
	m->d = malloc((out_n ? out_n : 1) * sizeof *m->d);
	m->w = malloc((out_n ? out_n : 1) * sizeof *m->w);
	m->pw = malloc((out_n + ng + 1) * sizeof *m->pw);
	if (moments) {
		m->pwd = malloc((out_n + ng + 1) * sizeof *m->pwd);
		m->pwd2 = malloc((out_n + ng + 1) * sizeof *m->pwd2);
	}
	if (!m->d || !m->w || !m->pw || (moments && (!m->pwd || !m->pwd2))) {
		st = error_set(LOMAS_ENOMEM, "out of memory preparing the model");
		goto out;
	}
	for (size_t g = 0; g < ng; g++) {
		model_group *gr = &m->groups[g];
		double a = 0, b = 0, c = 0;
		gr->W0 = gr->n > 0 && e[gr->off].d == 0 ? e[gr->off].w : 0.0;
		for (size_t i = 0; i < gr->n; i++) {
			size_t k = gr->off + i;
			double d = (double)e[k].d, w = e[k].w;
			m->d[k] = d;
			m->w[k] = w;
			m->pw[gr->pre + i] = a;
			if (moments) {
				m->pwd[gr->pre + i] = b;
				m->pwd2[gr->pre + i] = c;
			}
			a += w;
			b += w * d;
			c += w * d * d;
		}
		m->pw[gr->pre + gr->n] = a;
		if (moments) {
			m->pwd[gr->pre + gr->n] = b;
			m->pwd2[gr->pre + gr->n] = c;
		}
		gr->Wd = b;
		gr->Wd2 = c;
	}
	for (size_t w = 0; w < p->windows.n; w++)
		m->groups[map[w]].refs += (double)p->windows.items[w].refs;
out:
	free(map);
	free(nth);
	free(cur_group);
	free(e);
	free(tmp);
	free(cur);
	if (st)
		model_data_free(m);
	return st;
}

model_mean model_mean_of(const model_data *m)
{
	double refs = 0.0, sw = 0.0;
	for (size_t gi = 0; gi < m->ngroups; gi++) {
		if (m->groups[gi].S > 0.0) {
			refs += m->groups[gi].refs;
			sw += m->groups[gi].S;
		}
	}
	return (model_mean){.by_refs = refs > 0.0, .total = refs > 0.0 ? refs : sw};
}

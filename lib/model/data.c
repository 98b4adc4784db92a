/*
 * Grouping and sorting the samples once per model call: windows in clock
 * order per thread, pooled into groups (segment.c), each group's distances
 * sorted and deduplicated with prefix sums, and the reuses that cross into
 * a later group listed apart.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

/*
 * A finite sample while sorting: key = d << 2 | INSIDE | FIXED (16 bytes,
 * half the radix sort's traffic of keeping three weights per entry).
 */
typedef struct entry {
	uint64_t key;
	double w;
} entry;

#define E_INSIDE 1u /* the reuse ends inside the group */
#define E_FIXED 2u  /* ... and is in a corrected class (StatCache's F, not StatStack's) */
#define E_DMAX ((UINT64_C(1) << 62) - 1)

static void entry_isort(entry *a, size_t n)
{
	for (size_t i = 1; i < n; i++) {
		entry x = a[i];
		size_t j = i;
		while (j > 0 && a[j - 1].key > x.key) {
			a[j] = a[j - 1];
			j--;
		}
		a[j] = x;
	}
}

/*
 * Sort a group's entries by key: LSD radix sort on the bytes the keys use
 * (windows hold a few hundred samples, where comparison sorts lose most of
 * their time to mispredicted branches). tmp holds n.
 */
static void entry_sort(entry *a, size_t n, entry *tmp)
{
	uint64_t max = 0;
	entry *src = a, *dst = tmp;
	size_t *count;
	if (n <= 32) {
		entry_isort(a, n);
		return;
	}
	for (size_t i = 0; i < n; i++)
		max |= a[i].key;
	/* 11-bit digits: a 30-bit key (distances under 2^28) in 3 passes, not 4. */
	count = malloc(2048 * sizeof *count);
	if (!count) {
		/* Out of memory for 16 KiB: sort with the stack's 8-bit digits. */
		for (int shift = 0; shift < 64 && (max >> shift) != 0; shift += 8) {
			size_t c8[256] = {0}, sum = 0;
			for (size_t i = 0; i < n; i++)
				c8[(src[i].key >> shift) & 0xff]++;
			for (int b = 0; b < 256; b++) {
				size_t c = c8[b];
				c8[b] = sum;
				sum += c;
			}
			for (size_t i = 0; i < n; i++)
				dst[c8[(src[i].key >> shift) & 0xff]++] = src[i];
			entry *t = src;
			src = dst;
			dst = t;
		}
	} else {
		for (int shift = 0; shift < 64 && (max >> shift) != 0; shift += 11) {
			size_t sum = 0;
			memset(count, 0, 2048 * sizeof *count);
			for (size_t i = 0; i < n; i++)
				count[(src[i].key >> shift) & 0x7ff]++;
			for (int b = 0; b < 2048; b++) {
				size_t c = count[b];
				count[b] = sum;
				sum += c;
			}
			for (size_t i = 0; i < n; i++)
				dst[count[(src[i].key >> shift) & 0x7ff]++] = src[i];
			entry *t = src;
			src = dst;
			dst = t;
		}
		free(count);
	}
	if (src != a)
		memcpy(a, src, n * sizeof *a);
}

void model_data_free(model_data *m)
{
	free(m->groups);
	free(m->thread_first);
	free(m->dangling);
	free(m->dangling_w2);
	free(m->d);
	free(m->w);
	free(m->wi);
	free(m->wl);
	free(m->fix);
	free(m->piece_group);
	free(m->distinct);
	model_pieces_free(&m->pieces);
	free(m->pw);
	free(m->pwd);
	free(m->pwi);
	free(m->pwdi);
	free(m->pwd2i);
	free(m->cross);
	free(m->sample_g0);
	free(m->sample_g1);
	free(m->sample_fixed);
	memset(m, 0, sizeof *m);
}

/* A copy of base's pieces (a bootstrap replicate's profile has the same windows). */
static lomas_status pieces_copy(const model_pieces *b, size_t nw, model_pieces *pc)
{
	pc->n = b->n;
	pc->nthreads = b->nthreads;
	pc->items = malloc((b->n ? b->n : 1) * sizeof *pc->items);
	pc->wfirst = malloc((nw + 1) * sizeof *pc->wfirst);
	pc->wcount = malloc((nw + 1) * sizeof *pc->wcount);
	pc->wthread = malloc((nw + 1) * sizeof *pc->wthread);
	pc->toff = malloc((b->nthreads + 1) * sizeof *pc->toff);
	if (!pc->items || !pc->wfirst || !pc->wcount || !pc->wthread || !pc->toff) {
		model_pieces_free(pc);
		return error_set(LOMAS_ENOMEM, "out of memory preparing the model");
	}
	memcpy(pc->items, b->items, b->n * sizeof *pc->items);
	memcpy(pc->wfirst, b->wfirst, nw * sizeof *pc->wfirst);
	memcpy(pc->wcount, b->wcount, nw * sizeof *pc->wcount);
	memcpy(pc->wthread, b->wthread, nw * sizeof *pc->wthread);
	memcpy(pc->toff, b->toff, (b->nthreads + 1) * sizeof *pc->toff);
	return LOMAS_OK;
}

/* The group of thread clock e among groups [lo, hi) of one thread (spans ascending). */
static size_t group_at(const model_group *g, size_t lo, size_t hi, uint64_t e)
{
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;
		if (g[mid].a <= e)
			lo = mid;
		else
			hi = mid;
	}
	return lo;
}

static lomas_status check_sample(const struct lomas_profile *p, size_t i, const lomas_sample *s)
{
	if (s->window >= p->windows.n)
		return error_set(LOMAS_EFORMAT, "sample %zu names window %u of %zu", i, s->window,
		                 p->windows.n);
	if (s->state > LOMAS_SAMPLE_CENSORED || !(s->weight >= 0.0) || !isfinite(s->weight))
		return error_set(LOMAS_EFORMAT, "sample %zu: bad state %u or weight %g", i,
		                 s->state, s->weight);
	if (s->state == LOMAS_SAMPLE_REUSED && s->end <= s->start)
		return error_set(LOMAS_EFORMAT, "sample %zu: end %llu not after start %llu", i,
		                 (unsigned long long)s->end, (unsigned long long)s->start);
	return LOMAS_OK;
}

/* Number the groups: piece k joins piece_group[k]; fill spans, threads, refs. */
static lomas_status make_groups(const model_opts *o, const uint32_t *sample_piece,
                                const uint8_t *sample_bin, size_t ns, model_data *m)
{
	const model_pieces *pc = &m->pieces;
	size_t np = pc->n, ng = 0, nt = pc->nthreads;
	uint32_t *pg = m->piece_group;
	lomas_status st;
	if (o->base) {
		memcpy(pg, o->base->piece_group, np * sizeof *pg);
		ng = o->base->ngroups;
	} else if (o->grouping == MODEL_GROUP_SEGMENT) {
		/* Each adjacent pair at MODEL_SEG_ALPHA / pieces: family-wise MODEL_SEG_ALPHA. */
		double alpha = MODEL_SEG_ALPHA / (double)(np > 1 ? np : 1);
		if ((st = model_segment(sample_piece, sample_bin, ns, pc, alpha, pg, &ng)))
			return st;
	} else if (o->grouping == MODEL_GROUP_WINDOW) {
		/* One group per window: its pieces together. */
		for (size_t k = 0; k < np; k++)
			pg[k] = (uint32_t)(k > 0 && pc->items[k].window == pc->items[k - 1].window
			                       ? ng - 1
			                       : ng++);
	} else {
		for (size_t k = 0; k < np; k++)
			pg[k] = 0;
		ng = np ? 1 : 0;
	}
	m->ngroups = ng;
	m->groups = calloc(ng ? ng : 1, sizeof *m->groups);
	m->nthreads = o->grouping == MODEL_GROUP_GLOBAL ? 1 : nt;
	m->thread_first = calloc(m->nthreads + 1, sizeof *m->thread_first);
	m->dangling = calloc(m->nthreads + 1, sizeof *m->dangling);
	m->dangling_w2 = calloc(m->nthreads + 1, sizeof *m->dangling_w2);
	if (!m->groups || !m->thread_first || !m->dangling || !m->dangling_w2)
		return error_set(LOMAS_ENOMEM, "out of memory preparing the model");
	for (size_t g = 0; g < ng; g++)
		m->groups[g].a = UINT64_MAX;
	for (size_t k = 0; k < np; k++) {
		const model_piece *x = &pc->items[k];
		model_group *g = &m->groups[pg[k]];
		uint64_t end = x->start + x->refs < x->start ? UINT64_MAX : x->start + x->refs;
		g->thread = o->grouping == MODEL_GROUP_GLOBAL ? 0 : x->thread;
		g->a = x->start < g->a ? x->start : g->a;
		g->b = end > g->b ? end : g->b;
		g->refs += (double)x->refs;
	}
	/* Groups are numbered in (thread, clock) order: each thread's are consecutive. */
	for (size_t g = 0; g < ng; g++)
		m->thread_first[m->groups[g].thread + 1]++;
	for (size_t t = 0; t < m->nthreads; t++)
		m->thread_first[t + 1] += m->thread_first[t];
	return LOMAS_OK;
}

/*
 * Sort and deduplicate each group's entries; the arrays and prefix sums the
 * policy needs (lru: w, wl, pw, pwd; random: wi, and with moments pwi,
 * pwdi, pwd2i for the per-size solver); group moments.
 */
static lomas_status finish_groups(model_data *m, entry *e, const size_t *cur, size_t maxg, bool lru,
                                  bool moments)
{
	size_t ng = m->ngroups, out_n = 0, nfin = 0;
	entry *tmp = malloc((maxg ? maxg : 1) * sizeof *tmp);
	bool ok = tmp != NULL;
	for (size_t g = 0; g < ng; g++)
		nfin += cur[g] - m->groups[g].off;
	size_t np = nfin + ng + 1, nd = nfin ? nfin : 1;
#define ALLOC(f, k, want) \
	if (want)         \
	ok = ok && (m->f = malloc((k) * sizeof *m->f)) != NULL
	ALLOC(d, nd, true);
	ALLOC(w, nd, lru);
	ALLOC(wl, nd, lru);
	ALLOC(pw, np, lru);
	ALLOC(pwd, np, lru);
	ALLOC(wi, nd, !lru);
	ALLOC(pwi, np, !lru && moments);
	ALLOC(pwdi, np, !lru && moments);
	ALLOC(pwd2i, np, !lru && moments);
#undef ALLOC
	if (!ok) {
		free(tmp);
		return error_set(LOMAS_ENOMEM, "out of memory preparing the model");
	}
	for (size_t g = 0; g < ng; g++) {
		model_group *gr = &m->groups[g];
		size_t a = gr->off, b = cur[g], start = out_n;
		double pa = 0, pb = 0, pai = 0, pbi = 0, pci = 0, w0i = 0;
		entry_sort(e + a, b - a, tmp);
		gr->pre = start + g;
		for (size_t i = a; i < b; i++) {
			uint64_t d = e[i].key >> 2;
			double w = e[i].w, wi = e[i].key & E_INSIDE ? w : 0.0;
			if (out_n == start || m->d[out_n - 1] != (double)d) {
				size_t q = gr->pre + (out_n - start);
				m->d[out_n] = (double)d;
				if (lru) {
					m->w[out_n] = m->wl[out_n] = 0.0;
					m->pw[q] = pa;
					m->pwd[q] = pb;
				} else {
					m->wi[out_n] = 0.0;
					if (moments) {
						m->pwi[q] = pai;
						m->pwdi[q] = pbi;
						m->pwd2i[q] = pci;
					}
				}
				out_n++;
			}
			if (lru) {
				m->w[out_n - 1] += w;
				m->wl[out_n - 1] +=
				    (e[i].key & (E_INSIDE | E_FIXED)) == E_INSIDE ? w : 0.0;
			} else {
				m->wi[out_n - 1] += wi;
			}
			w0i += d == 0 ? wi : 0.0;
			pa += w;
			pb += w * (double)d;
			pai += wi;
			pbi += wi * (double)d;
			pci += wi * (double)d * (double)d;
		}
		gr->off = start;
		gr->n = out_n - start;
		size_t q = gr->pre + gr->n;
		if (lru) {
			m->pw[q] = pa;
			m->pwd[q] = pb;
		} else if (moments) {
			m->pwi[q] = pai;
			m->pwdi[q] = pbi;
			m->pwd2i[q] = pci;
		}
		gr->W0i = w0i;
		gr->dmax = gr->n > 0 ? m->d[out_n - 1] : 0.0;
		gr->Wdi = pbi;
		gr->Wd2i = pci;
	}
	free(tmp);
	m->n = out_n;
	return LOMAS_OK;
}

static int cross_cmp(const void *a, const void *b)
{
	const model_cross *x = a, *y = b;
	if (x->g1 != y->g1)
		return x->g1 < y->g1 ? -1 : 1;
	return x->e < y->e ? -1 : x->e > y->e;
}

lomas_status model_data_build(const struct lomas_profile *p, const model_opts *o, model_data *m)
{
	size_t nfin = 0, maxg = 0, ncross = 0, ns = p->samples.n;
	size_t *cur = NULL;
	uint32_t *sample_piece = NULL, *start_group = NULL, *end_group = NULL;
	uint8_t *fixed = NULL, *sample_bin = NULL;
	entry *e = NULL;
	double total = 0.0;
	lomas_status st = LOMAS_OK;

	memset(m, 0, sizeof *m);
	m->profile = p;
	if (p->windows.n > 0 &&
	    (st = o->base ? pieces_copy(&o->base->pieces, p->windows.n, &m->pieces)
	                  : model_pieces_build(p, &m->pieces)))
		goto out;
	m->piece_group = malloc((m->pieces.n ? m->pieces.n : 1) * sizeof *m->piece_group);
	sample_piece = malloc((ns ? ns : 1) * sizeof *sample_piece);
	sample_bin = malloc(ns ? ns : 1);
	end_group = malloc((ns ? ns : 1) * sizeof *end_group);
	if (!m->piece_group || !sample_piece || !sample_bin || !end_group) {
		st = error_set(LOMAS_ENOMEM, "out of memory preparing the model");
		goto out;
	}
	/* One pass to check the samples, place them in pieces and bin them. */
	for (size_t i = 0; i < ns; i++) {
		const lomas_sample *s = &p->samples.items[i];
		if ((st = check_sample(p, i, s)))
			goto out;
		sample_piece[i] = (uint32_t)model_piece_of(&m->pieces, &p->windows.items[s->window],
		                                           s->window, s->start);
		sample_bin[i] = model_seg_bin(s);
	}
	if ((st = make_groups(o, sample_piece, sample_bin, ns, m)))
		goto out;
	cur = calloc(m->ngroups + 1, sizeof *cur);
	start_group = malloc((ns ? ns : 1) * sizeof *start_group);
	if (!cur || !start_group) {
		st = error_set(LOMAS_ENOMEM, "out of memory preparing the model");
		goto out;
	}
	/* Sums per group; the group each reuse ends in; count the finite ones. */
	for (size_t i = 0; i < p->samples.n; i++) {
		const lomas_sample *s = &p->samples.items[i];
		uint32_t g0 = start_group[i] = m->piece_group[sample_piece[i]];
		model_group *g = &m->groups[g0];
		g->S += s->weight;
		total += s->weight;
		end_group[i] = g0;
		if (s->state == LOMAS_SAMPLE_REUSED) {
			size_t hi = m->thread_first[g->thread + 1];
			if (o->time_aware && s->end >= g->b && g0 + 1 < hi) {
				size_t g1 = group_at(m->groups, g0 + 1, hi, s->end);
				if (m->groups[g1].a <= s->end)
					end_group[i] = (uint32_t)g1;
			}
			g->W += s->weight;
			m->groups[end_group[i]].E += s->weight;
			if (end_group[i] != g0)
				ncross++;
			g->off++; /* count for now */
		} else if (s->state == LOMAS_SAMPLE_DANGLING) {
			g->D += s->weight;
			m->dangling[g->thread] += s->weight;
			m->dangling_w2[g->thread] += s->weight * (s->weight - 1.0);
		} else {
			g->C += s->weight;
		}
	}
	if (!(total > 0.0)) {
		st = error_set(LOMAS_ERANGE, "the profile has no samples to model");
		goto out;
	}
	for (size_t g = 0; g < m->ngroups; g++) {
		size_t c = m->groups[g].off;
		m->groups[g].off = cur[g] = nfin;
		nfin += c;
		maxg = c > maxg ? c : maxg;
	}
	e = malloc((nfin ? nfin : 1) * sizeof *e);
	m->cross = malloc((ncross ? ncross : 1) * sizeof *m->cross);
	fixed = calloc(p->samples.n ? p->samples.n : 1, 1);
	if (!e || !m->cross || !fixed) {
		st = error_set(LOMAS_ENOMEM, "out of memory preparing the model");
		goto out;
	}
	if (o->classes && o->grouping != MODEL_GROUP_GLOBAL &&
	    (st = model_classes(p, start_group, end_group, m, fixed)))
		goto out;
	for (size_t i = 0; i < p->samples.n; i++) {
		const lomas_sample *s = &p->samples.items[i];
		uint32_t g0 = start_group[i];
		if (s->state != LOMAS_SAMPLE_REUSED)
			continue;
		entry *x = &e[cur[g0]++];
		uint64_t d = sample_distance(s);
		x->key = (d < E_DMAX ? d : E_DMAX) << 2 | (fixed[i] ? E_FIXED : 0u);
		x->w = s->weight;
		if (end_group[i] == g0) {
			x->key |= E_INSIDE;
			m->groups[g0].Wi += s->weight;
		} else {
			m->cross[m->ncross++] = (model_cross){s->start,     s->end,   s->weight, g0,
			                                      end_group[i], fixed[i], 0};
		}
	}
	qsort(m->cross, m->ncross, sizeof *m->cross, cross_cmp);
	st = finish_groups(m, e, cur, maxg, o->lru, o->moments);
out:
	if (!st) {
		if (!(m->distinct = malloc((m->nthreads + 1) * sizeof *m->distinct)))
			st = error_set(LOMAS_ENOMEM, "out of memory preparing the model");
		for (size_t t = 0; st == LOMAS_OK && t <= m->nthreads; t++)
			m->distinct[t] = -1.0;
	}
	if (!st && o->per_sample) {
		m->sample_g0 = start_group;
		m->sample_g1 = end_group;
		m->sample_fixed = fixed;
		start_group = end_group = NULL;
		fixed = NULL;
	}
	free(sample_piece);
	free(sample_bin);
	free(start_group);
	free(end_group);
	free(fixed);
	free(cur);
	free(e);
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

double model_stack_sum(const model_data *m, const model_group *g, double x)
{
	/* G(x) = x - (1/S) sum_{d_i < x} w_i (x - d_i) (DESIGN.md section 5). */
	size_t lo = g->off, hi = g->off + g->n;
	if (!(x > 0.0) || !(g->S > 0.0))
		return 0.0;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (m->d[mid] < x)
			lo = mid + 1;
		else
			hi = mid;
	}
	size_t q = g->pre + (lo - g->off);
	return x - (x * m->pw[q] - m->pwd[q]) / g->S;
}

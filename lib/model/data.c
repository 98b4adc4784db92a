/*
 * Grouping the samples once per model call: one pass over the samples
 * feeds every structure below; windows in clock order per thread, pooled
 * into groups (segment.c), the reuses that cross into a later group listed
 * apart, and each group's distances sorted and deduplicated with prefix
 * sums (groups.c).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "entries.h"

void model_data_free(model_data *m)
{
	free(m->groups);
	free(m->thread_first);
	free(m->dangling);
	free(m->dangling_w2);
	if (m->arrays) {
		big_free(m->arrays);
	} else {
		big_free(m->d);
		big_free(m->wi);
		big_free(m->wl);
		big_free(m->pw);
		big_free(m->pwd);
		big_free(m->pwi);
		big_free(m->pwdi);
		big_free(m->pwd2i);
	}
	free(m->fix);
	free(m->piece_group);
	free(m->distinct);
	free(m->sdfloor);
	free(m->once);
	free(m->sampled);
	model_pieces_free(&m->pieces);
	free(m->cross);
	big_free(m->sample_g0);
	big_free(m->sample_g1);
	big_free(m->sample_fixed);
	memset(m, 0, sizeof *m);
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

/* The finite samples (bins below 128) among [i, to): eight bins per step. */
static size_t count_finite(const uint8_t *bin, size_t i, size_t to)
{
	size_t c = 0;
	for (; i < to && (i & 7); i++)
		c += bin[i] < 128;
	for (; i + 8 <= to; i += 8) {
		uint64_t x;
		memcpy(&x, bin + i, 8);
		c += 8 - (size_t)__builtin_popcountll(x & UINT64_C(0x8080808080808080));
	}
	for (; i < to; i++)
		c += bin[i] < 128;
	return c;
}

static int cross_cmp(const void *a, const void *b)
{
	const model_cross *x = a, *y = b;
	if (x->g1 != y->g1)
		return x->g1 < y->g1 ? -1 : 1;
	return x->e < y->e ? -1 : x->e > y->e;
}

/* Sums over one piece's samples, gathered in the one pass over the samples. */
typedef struct piece_sum {
	double S, W, D, C, Dw2; /* as in model_group; Dw2: sum w (w - 1) of dangling */
	double Wi;              /* reuses that end before the piece does */
	uint32_t fin, n;        /* finite samples; all samples */
	uint32_t lng;           /* finite samples at DENSE_D or more (finish_groups' bound) */
} piece_sum;

/* A reuse that ends at or after its piece's end: it may cross into a later group. */
typedef struct cand {
	uint64_t end;           /* its end (so placing it reads no sample) */
	uint32_t sample, entry; /* its index among the samples, and among the entries */
} cand;

/* model_data_build's scratch holds a cand per sample, then a key and a weight per finite one. */
_Static_assert(sizeof(cand) >= sizeof(uint64_t) + sizeof(double), "a cand's memory holds both");

/* Keys to 64 bits (into *kwide, allocated for ns) from here: the first n are copied. */
static bool ent_widen(ents *e, uint64_t **kwide, size_t ns, size_t n)
{
	if (!e->k32)
		return true;
	if (!(*kwide = big_alloc((ns ? ns : 1) * sizeof **kwide)))
		return false;
	for (size_t j = 0; j < n; j++)
		(*kwide)[j] = e->k32[j];
	e->k = *kwide;
	e->k32 = NULL;
	return true;
}

#define SKETCH_LAG 16
#define FIX_AHEAD 16
#define SAMPLE_AHEAD 16

/*
 * The one pass over the samples (64 bytes each: every pass costs the
 * memory traffic of the whole profile): check each, place it in its piece
 * and histogram bin, add it to its piece's sums, write its entry (in
 * sample order, as inside its group for now) and, for StatStack, its reuse
 * class hint (model_class_hint). A reuse that ends before its piece does ends inside its group
 * (groups are unions of whole pieces); the others are listed in cd and
 * placed once the groups are known. *in_order: the pieces never go back in
 * sample order (then so do the groups); *one: one thread, starts ascending.
 */
static lomas_status sample_pass(const lomas_profile *p, model_data *m, uint32_t *sample_piece,
                                uint8_t *sample_bin, piece_sum *ps, ents *e, uint64_t **kwide,
                                double **wmem, size_t *nfin, cand *cd, size_t *ncand,
                                uint32_t *hint, uint8_t *sketch, bool *in_order, bool *one)
{
	const model_pieces *pc = &m->pieces;
	size_t nf = 0, nc = 0, last = 0, first = 0, k = 0;
	uint64_t last_start = 0, wstart = 0, cut[MODEL_PIECES_PER_WINDOW] = {0};
	uint32_t window = UINT32_MAX;
	bool ord = true, single = true;
	size_t nexact = 0;
	/*
	 * The sketch's counters are two random bytes in 512 KiB per reuse: a
	 * cache miss each, a fifth of the pass when taken in turn. Each hint's
	 * counters are prefetched when it is made and counted SKETCH_LAG hints
	 * later, so that the misses overlap.
	 */
	uint32_t lag[SKETCH_LAG];
	size_t nlag = 0, cur = SIZE_MAX;
	/*
	 * The sums of the current piece, in registers while its samples come
	 * (through memory, each sum was a store-to-load chain across samples);
	 * loaded and stored back when the piece changes, the additions in the
	 * same order.
	 */
	piece_sum acc = {0};
	for (size_t i = 0; i < p->samples.n; i++) {
		const lomas_sample *s = &p->samples.items[i];
		lomas_status st = check_sample(p, i, s);
		if (st)
			return st;
		/* The samples stream by: fetch ahead across page boundaries too. */
		__builtin_prefetch(s + SAMPLE_AHEAD);
		if (s->window != window) {
			/*
			 * The window's pieces start where floor(off k / refs) steps
			 * (model_piece_of): at off = ceil(j refs / k). Samples come
			 * window by window, so this is once per window.
			 */
			const lomas_window *w = &p->windows.items[s->window];
			window = s->window;
			wstart = w->start;
			first = pc->wfirst[window];
			k = w->refs > 0 ? pc->wcount[window] : 1;
			for (size_t j = 1; j < k; j++)
				cut[j] = (uint64_t)(((unsigned __int128)j * w->refs + k - 1) / k);
		}
		uint64_t off = s->start > wstart ? s->start - wstart : 0;
		size_t kk = first;
		for (size_t j = 1; j < k; j++)
			kk += off >= cut[j];
		const model_piece *x = &pc->items[kk];
		piece_sum *q = &acc;
		if (kk != cur) {
			if (cur != SIZE_MAX)
				ps[cur] = acc;
			acc = ps[kk];
			cur = kk;
		}
		uint8_t bin = model_seg_bin(s);
		sample_piece[i] = (uint32_t)kk;
		sample_bin[i] = bin;
		ord = ord && kk >= last;
		single = single && x->thread == pc->items[0].thread && s->start >= last_start;
		last = kk;
		last_start = s->start;
		q->S += s->weight;
		q->n++;
		if (hint)
			hint[i] = 0;
		if (s->state == LOMAS_SAMPLE_REUSED) {
			uint64_t d = sample_distance(s), end = x->start + x->refs;
			end = end < x->start ? UINT64_MAX : end;
			uint64_t key = (d < E_DMAX ? d : E_DMAX) << 2 | E_INSIDE;
			if (e->w) {
				e->w[nf] = s->weight;
			} else if (nf == 0) {
				e->wu = s->weight;
			} else if (memcmp(&s->weight, &e->wu, sizeof e->wu) != 0) {
				/* The first weight that differs: the weights are kept from here. */
				if (!ent_widen(e, kwide, p->samples.n, nf) ||
				    !(*wmem = big_alloc(p->samples.n * sizeof **wmem)))
					return error_set(LOMAS_ENOMEM,
					                 "out of memory preparing the model");
				e->w = *wmem;
				for (size_t j = 0; j < nf; j++)
					e->w[j] = e->wu;
				e->w[nf] = s->weight;
			}
			if (key > UINT32_MAX && !ent_widen(e, kwide, p->samples.n, nf))
				return error_set(LOMAS_ENOMEM, "out of memory preparing the model");
			ent_set(e, nf, key);
			q->W += s->weight;
			q->fin++;
			q->lng += d >= DENSE_D;
			nexact += (s->flags & LOMAS_SAMPLE_EXACT_SD) != 0;
			/*
			 * Written always, kept when it may cross: which reuses do is
			 * random, and a branch on it was mispredicted a third of the
			 * time. Wi adds 0.0 otherwise (it is never -0.0: the same sum).
			 */
			bool may_cross = s->end >= end;
			cd[nc] = (cand){s->end, (uint32_t)i, (uint32_t)nf};
			nc += may_cross;
			q->Wi += may_cross ? 0.0 : s->weight;
			if (hint) {
				uint32_t h = model_class_hint(s, x->thread);
				hint[i] = h;
				model_sketch_prefetch(sketch, h);
				if (nlag >= SKETCH_LAG)
					model_sketch_add(sketch, lag[nlag % SKETCH_LAG]);
				lag[nlag++ % SKETCH_LAG] = h;
			}
			nf++;
		} else if (s->state == LOMAS_SAMPLE_DANGLING) {
			q->D += s->weight;
			q->Dw2 += s->weight * (s->weight - 1.0);
		} else {
			q->C += s->weight;
		}
	}
	if (cur != SIZE_MAX)
		ps[cur] = acc;
	for (size_t j = nlag > SKETCH_LAG ? nlag - SKETCH_LAG : 0; j < nlag; j++)
		model_sketch_add(sketch, lag[j % SKETCH_LAG]);
	*nfin = nf;
	*ncand = nc;
	m->nexact = nexact;
	*in_order = ord;
	*one = single;
	return LOMAS_OK;
}

/*
 * Place the candidates of sample_pass: each reuse that ends in a later
 * group of its thread becomes a crossing one (its entry no longer inside,
 * no reuse class); the others end inside their group after all. From the
 * candidates and entries alone: a gather of the samples cost as much as a
 * pass over them.
 */
static lomas_status place_crossings(const lomas_profile *p, const model_opts *o, model_data *m,
                                    const uint32_t *sample_piece, const cand *cd, size_t nc,
                                    ents *e, uint32_t *hint)
{
	m->cross = malloc((nc ? nc : 1) * sizeof *m->cross);
	if (!m->cross)
		return error_set(LOMAS_ENOMEM, "out of memory preparing the model");
	for (size_t c = 0; c < nc; c++) {
		uint64_t end = cd[c].end;
		size_t x = cd[c].entry;
		double w = ent_w(e, x);
		uint32_t g0 = m->piece_group[sample_piece[cd[c].sample]], g1 = g0;
		model_group *g = &m->groups[g0];
		size_t hi = m->thread_first[g->thread + 1];
		if (o->time_aware && end >= g->b && g0 + 1 < hi) {
			size_t gg = group_at(m->groups, g0 + 1, hi, end);
			if (m->groups[gg].a <= end)
				g1 = (uint32_t)gg;
		}
		if (m->sample_g1)
			m->sample_g1[cd[c].sample] = g1;
		if (g1 == g0) {
			g->Wi += w;
			g->E += w;
			continue;
		}
		m->groups[g1].E += w;
		uint64_t key = ent_key(e, x) & ~(uint64_t)E_INSIDE;
		ent_set(e, x, key);
		if (hint)
			hint[cd[c].sample] = 0; /* a crossing reuse's interval mixes groups */
		uint64_t d = key >> 2;
		uint64_t start = d < E_DMAX ? end - d - 1 : p->samples.items[cd[c].sample].start;
		m->cross[m->ncross++] = (model_cross){start, end, w, g0, g1, 0, 0};
	}
	qsort(m->cross, m->ncross, sizeof *m->cross, cross_cmp);
	return LOMAS_OK;
}

/* A profile of a program attached mid-run (meta start=attached): its caches were warm. */
static bool profile_attached(const lomas_profile *p)
{
	for (size_t i = 0; i < p->meta.n; i++)
		if (!strcmp(p->meta.items[i].key, "start") &&
		    !strcmp(p->meta.items[i].value, "attached"))
			return true;
	return false;
}

lomas_status model_data_build(const struct lomas_profile *p, const model_opts *o, model_data *m)
{
	size_t nfin = 0, ncand = 0, ns = p->samples.n, np;
	size_t *cur = NULL, *count = NULL, *lng = NULL, bound = 0;
	uint32_t *sample_piece = NULL, *blk = NULL;
	uint8_t *sample_bin = NULL, *sketch = NULL;
	uint32_t *fixed = NULL;
	uint32_t *hint = NULL;
	piece_sum *ps = NULL;
	cand *cd = NULL;
	ents e = {0}, tmp = {0};
	uint64_t *k_mem = NULL;
	uint32_t *k32_mem = NULL;
	double *w_mem = NULL;
	unsigned char *scr = NULL;
	dense *h = NULL;
	double total = 0.0;
	bool in_order = true, one = true, classes = o->classes && o->grouping != MODEL_GROUP_GLOBAL;
	lomas_status st = LOMAS_OK;

	memset(m, 0, sizeof *m);
	m->profile = p;
	m->cold_start = o->footprint && !profile_attached(p);
	if (p->windows.n > 0 &&
	    (st = o->base ? model_pieces_copy(&o->base->pieces, p->windows.n, &m->pieces)
	                  : model_pieces_build(p, &m->pieces)))
		goto out;
	np = m->pieces.n;
	m->piece_group = malloc((np ? np : 1) * sizeof *m->piece_group);
	ps = calloc(np ? np : 1, sizeof *ps);
	/*
	 * Each sample's piece and (for the reuse classes) hint, in one block:
	 * both are dead once the classes are known, and the block (its pages
	 * mapped, where fresh memory costs ~0.4 ms a megabyte in page faults)
	 * then holds finish_groups' arrays when they fit.
	 */
	blk = big_alloc((classes ? 2 : 1) * (ns ? ns : 1) * sizeof *blk);
	sample_piece = blk;
	sample_bin = big_alloc(ns ? ns : 1);
	/*
	 * The keys' 64-bit array and the weights' are allocated only if the
	 * keys widen or the weights differ: less memory in use at once, so
	 * less that malloc returns to the system and maps again a call later.
	 */
	e.k32 = k32_mem = big_alloc((ns ? ns : 1) * sizeof *e.k32);
	/*
	 * Scratch: the candidates of sample_pass, then (their memory already
	 * mapped, where fresh memory costs ~0.4 ms a megabyte in page faults)
	 * the dense table and the sort's buffers of finish_groups.
	 */
	scr = big_alloc(sizeof(dense) + (ns ? ns : 1) * sizeof(cand));
	cd = (cand *)scr;
	hint = classes && blk ? blk + (ns ? ns : 1) : NULL;
	sketch = classes ? big_calloc((size_t)2 << MODEL_SKETCH_BITS, 1) : NULL;
	count = malloc(2048 * sizeof *count);
	if (!m->piece_group || !ps || !blk || !sample_bin || !k32_mem || !scr || !count ||
	    (classes && (!hint || !sketch))) {
		st = error_set(LOMAS_ENOMEM, "out of memory preparing the model");
		goto out;
	}
	if ((st = sample_pass(p, m, sample_piece, sample_bin, ps, &e, &k_mem, &w_mem, &nfin, cd,
	                      &ncand, hint, sketch, &in_order, &one)))
		goto out;
	if ((st = make_groups(o, sample_piece, sample_bin, ns, m)))
		goto out;
	m->sampled = calloc(m->nthreads + 1, sizeof *m->sampled);
	cur = calloc(m->ngroups + 1, sizeof *cur);
	lng = calloc(m->ngroups + 1, sizeof *lng);
	if (!m->sampled || !cur || !lng) {
		st = error_set(LOMAS_ENOMEM, "out of memory preparing the model");
		goto out;
	}
	/* The groups' sums from their pieces'; cur[g]: the group's finite samples. */
	for (size_t k = 0; k < np; k++) {
		const piece_sum *q = &ps[k];
		model_group *g = &m->groups[m->piece_group[k]];
		g->S += q->S;
		g->W += q->W;
		g->D += q->D;
		g->C += q->C;
		g->Wi += q->Wi;
		g->E += q->Wi;
		m->dangling[g->thread] += q->D;
		m->dangling_w2[g->thread] += q->Dw2;
		m->sampled[g->thread] += q->n;
		cur[m->piece_group[k]] += q->fin;
		lng[m->piece_group[k]] += q->lng;
		total += q->S;
	}
	if (!(total > 0.0)) {
		st = error_set(LOMAS_ERANGE, "the profile has no samples to model");
		goto out;
	}
	/* Exact stack distances replace StatStack's per sample (exact_sd.c). */
	if (o->per_sample || (o->lru && m->nexact)) {
		/* Each sample's groups (attribution.c): its start's, and its end's
		 * where place_crossings finds a later one. */
		m->sample_g0 = big_alloc((ns ? ns : 1) * sizeof *m->sample_g0);
		m->sample_g1 = big_alloc((ns ? ns : 1) * sizeof *m->sample_g1);
		m->sample_fixed = big_calloc(ns ? ns : 1, 1);
		if (!m->sample_g0 || !m->sample_g1 || !m->sample_fixed) {
			st = error_set(LOMAS_ENOMEM, "out of memory preparing the model");
			goto out;
		}
		for (size_t i = 0; i < ns; i++)
			m->sample_g0[i] = m->sample_g1[i] = m->piece_group[sample_piece[i]];
	}
	if ((st = place_crossings(p, o, m, sample_piece, cd, ncand, &e, hint)))
		goto out;
	cd = NULL;
	h = (dense *)scr;
	tmp.k = e.k ? (uint64_t *)(scr + sizeof(dense)) : NULL;
	tmp.k32 = e.k32 ? (uint32_t *)(scr + sizeof(dense)) : NULL;
	tmp.w = e.w ? (double *)(scr + sizeof(dense) + ns * sizeof *tmp.k) : NULL;
	tmp.wu = e.wu;
	for (size_t g = 0, off = 0; g < m->ngroups; g++) {
		size_t c = cur[g];
		m->groups[g].off = cur[g] = off;
		off += c;
	}
	if (classes) {
		size_t nfixed = 0;
		if ((st = model_classes(p, sample_piece, hint, sketch, one, m, &fixed, &nfixed)))
			goto out;
		for (size_t j = 0; m->sample_fixed && j < nfixed; j++)
			m->sample_fixed[fixed[j]] = 1;
		/*
		 * Entries are the finite samples in sample order (bins below 128),
		 * fixed ones among them: the finite samples between two fixed ones
		 * are counted eight bins at a time (a branch per sample
		 * mispredicted on every non-finite one), each fixed one's entry
		 * index replacing its sample index. Then the entries are marked,
		 * fetched ahead: a few percent of them, each a cache miss in turn.
		 */
		for (size_t i = 0, k = 0, j = 0; j < nfixed; j++) {
			size_t to = fixed[j];
			k += count_finite(sample_bin, i, to);
			fixed[j] = (uint32_t)k++;
			i = to + 1;
		}
		for (size_t j = 0; j < nfixed; j++) {
			if (j + FIX_AHEAD < nfixed)
				__builtin_prefetch(e.k32 ? (void *)&e.k32[fixed[j + FIX_AHEAD]]
				                         : (void *)&e.k[fixed[j + FIX_AHEAD]],
				                   1);
			ent_set(&e, fixed[j], ent_key(&e, fixed[j]) | E_FIXED);
		}
	}
	if (in_order) {
		/* Each group's entries already follow the previous group's. */
		for (size_t g = 0; g < m->ngroups; g++)
			cur[g] = g + 1 < m->ngroups ? m->groups[g + 1].off : nfin;
	} else {
		/* Threads interleave in sample order: a stable scatter by group. */
		for (size_t i = 0, k = 0; i < ns; i++) {
			if (sample_bin[i] >= 128)
				continue;
			size_t to = cur[m->piece_group[sample_piece[i]]]++;
			ent_set(&tmp, to, ent_key(&e, k));
			if (e.w)
				tmp.w[to] = e.w[k];
			k++;
		}
		ents t = e;
		e = tmp;
		tmp = t;
	}
	/*
	 * A bound on the distinct distances finish_groups writes: a group in
	 * the dense table has at most DENSE_D short ones.
	 */
	for (size_t g = 0; g < m->ngroups; g++) {
		size_t c = cur[g] - m->groups[g].off, sh = c - lng[g];
		bound += c >= DENSE_MIN && sh > DENSE_D ? DENSE_D + lng[g] : c;
	}
	st = model_finish_groups(m, &e, cur, &tmp, count, h, o->lru, o->moments, bound, blk,
	                         (classes ? 2 : 1) * (ns ? ns : 1) * sizeof *blk);
	if (m->arrays == blk)
		blk = NULL; /* finish_groups' arrays are in it: model_data_free frees it */
out:
	if (!st) {
		m->distinct = malloc((m->nthreads + 1) * sizeof *m->distinct);
		m->once = calloc(m->nthreads + 1, sizeof *m->once);
		m->sdfloor = malloc((m->nthreads + 1) * sizeof *m->sdfloor);
		if (!m->distinct || !m->once || !m->sdfloor)
			st = error_set(LOMAS_ENOMEM, "out of memory preparing the model");
		for (size_t t = 0; st == LOMAS_OK && t <= m->nthreads; t++)
			m->distinct[t] = m->sdfloor[t] = -1.0;
	}
	big_free(blk);
	free(lng);
	big_free(sample_bin);
	free(ps);
	big_free(scr);
	big_free(sketch);
	free(fixed);
	free(cur);
	free(count);
	big_free(k_mem);
	big_free(k32_mem);
	big_free(w_mem);
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

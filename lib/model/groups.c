/*
 * Each group's finite samples, as model_data_build (data.c) leaves them in
 * sample order, sorted into the group's distinct distances with the sums
 * and prefix sums the policies read: short distances of large groups
 * summed in a table indexed by distance, the others radix-sorted.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "entries.h"

static void ent_isort(uint64_t *k, double *w, size_t n)
{
	for (size_t i = 1; i < n; i++) {
		uint64_t x = k[i];
		double y = w ? w[i] : 0.0;
		size_t j = i;
		while (j > 0 && k[j - 1] > x) {
			k[j] = k[j - 1];
			if (w)
				w[j] = w[j - 1];
			j--;
		}
		k[j] = x;
		if (w)
			w[j] = y;
	}
}

/* ent_sort for 32-bit keys without weights (a narrow ents): the same order. */
static void ent_sort32(uint32_t *k, size_t n, uint32_t *tk, size_t *count)
{
	uint32_t all_or = 0, all_and = UINT32_MAX, *src = k, *dst = tk;
	int bits = n < 4096 ? 8 : 11;
	size_t nb = (size_t)1 << bits, mask = nb - 1;
	if (n <= 32) {
		for (size_t i = 1; i < n; i++) {
			uint32_t x = k[i];
			size_t j = i;
			for (; j > 0 && k[j - 1] > x; j--)
				k[j] = k[j - 1];
			k[j] = x;
		}
		return;
	}
	for (size_t i = 0; i < n; i++) {
		all_or |= k[i];
		all_and &= k[i];
	}
	for (int shift = 0; shift < 32 && ((all_or ^ all_and) >> shift) != 0; shift += bits) {
		size_t sum = 0;
		if ((((all_or ^ all_and) >> shift) & mask) == 0)
			continue;
		memset(count, 0, nb * sizeof *count);
		for (size_t i = 0; i < n; i++)
			count[(src[i] >> shift) & mask]++;
		for (size_t b = 0; b < nb; b++) {
			size_t c = count[b];
			count[b] = sum;
			sum += c;
		}
		for (size_t i = 0; i < n; i++)
			dst[count[(src[i] >> shift) & mask]++] = src[i];
		uint32_t *t = src;
		src = dst;
		dst = t;
	}
	if (src != k)
		memcpy(k, src, n * sizeof *k);
}

/*
 * Sort a group's keys k[0..n) by value, their weights w (if any) with
 * them: LSD radix sort on the digits where the keys differ (windows hold a
 * few hundred samples, where comparison sorts lose most of their time to
 * mispredicted branches). 8-bit digits for small groups, 11-bit ones for
 * large (a 30-bit key in 3 passes, not 4). tk and tw hold n; count holds
 * 2048.
 */
static void ent_sort(uint64_t *k, double *w, size_t n, uint64_t *tk, double *tw, size_t *count)
{
	uint64_t all_or = 0, all_and = UINT64_MAX;
	uint64_t *src = k, *dst = tk;
	double *srcw = w, *dstw = tw;
	int bits = n < 4096 ? 8 : 11;
	size_t nb = (size_t)1 << bits, mask = nb - 1;
	if (n <= 32) {
		ent_isort(k, w, n);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		all_or |= k[i];
		all_and &= k[i];
	}
	for (int shift = 0; shift < 64 && ((all_or ^ all_and) >> shift) != 0; shift += bits) {
		size_t sum = 0;
		if ((((all_or ^ all_and) >> shift) & mask) == 0)
			continue; /* every key has the same digit here */
		memset(count, 0, nb * sizeof *count);
		for (size_t i = 0; i < n; i++)
			count[(src[i] >> shift) & mask]++;
		for (size_t b = 0; b < nb; b++) {
			size_t c = count[b];
			count[b] = sum;
			sum += c;
		}
		if (w) {
			for (size_t i = 0; i < n; i++) {
				size_t to = count[(src[i] >> shift) & mask]++;
				dst[to] = src[i];
				dstw[to] = srcw[i];
			}
			double *t = srcw;
			srcw = dstw;
			dstw = t;
		} else {
			for (size_t i = 0; i < n; i++)
				dst[count[(src[i] >> shift) & mask]++] = src[i];
		}
		uint64_t *t = src;
		src = dst;
		dst = t;
	}
	if (src != k) {
		memcpy(k, src, n * sizeof *k);
		if (w)
			memcpy(w, srcw, n * sizeof *w);
	}
}

/* The running sums of one group while its distances are written out in order. */
typedef struct fin_acc {
	size_t start, out_n;
	double pa, pb, pai, pbi, pci, w0i;
	bool lru, moments;
} fin_acc;

/* Add weight w (wi of it inside, wl inside and in no corrected class) at distance d. */
static inline void fin_put(model_data *m, const model_group *gr, fin_acc *f, uint64_t d, double w,
                           double wi, double wl)
{
	if (f->out_n == f->start || m->d[f->out_n - 1] != (double)d) {
		size_t q = gr->pre + (f->out_n - f->start);
		m->d[f->out_n] = (double)d;
		if (f->lru) {
			m->wl[f->out_n] = 0.0;
			m->pw[q] = f->pa;
			m->pwd[q] = f->pb;
		} else {
			m->wi[f->out_n] = 0.0;
			if (f->moments) {
				m->pwi[q] = f->pai;
				m->pwdi[q] = f->pbi;
				m->pwd2i[q] = f->pci;
			}
		}
		f->out_n++;
	}
	f->pa += w;
	f->pb += w * (double)d;
	if (f->lru) {
		m->wl[f->out_n - 1] += wl;
		return; /* the moments of wi are random replacement's (W0i, Wdi, Wd2i) */
	}
	m->wi[f->out_n - 1] += wi;
	f->w0i += d == 0 ? wi : 0.0;
	f->pai += wi;
	f->pbi += wi * (double)d;
	f->pci += wi * (double)d * (double)d;
}

static inline void fin_put_key(model_data *m, const model_group *gr, fin_acc *f, uint64_t key,
                               double w)
{
	double wi = key & E_INSIDE ? w : 0.0;
	double wl = (key & (E_INSIDE | E_FIXED)) == E_INSIDE ? w : 0.0;
	fin_put(m, gr, f, key >> 2, w, wi, wl);
}

/*
 * Whether k additions of w in turn are all exact (each partial sum j w is
 * a double): w's significant bits and k's together at most 53, w normal
 * and far from overflow. Then the sum is k w, bit for bit.
 */
static bool sums_exact(double w, size_t k)
{
	int ex;
	if (w == 0.0)
		return !signbit(w); /* -0.0: the sums in turn are +0.0, count times it -0.0 */
	if (!(w >= 0x1p-1022 && w <= 0x1p900))
		return false;
	uint64_t mant = (uint64_t)ldexp(frexp(w, &ex), 53);
	int bits = 53 - __builtin_ctzll(mant), kbits = 0;
	while (kbits < 64 && (k >> kbits) != 0)
		kbits++;
	return bits + kbits <= 53;
}

/*
 * A large group's entries [a, b): the short distances summed in the table
 * h and written out in order; the long ones kept in order at [a, nl) (nl
 * returned) for the sort. Without a branch on which: short and long come
 * in random order (a branch was mispredicted on a third of them). Every
 * key is written to the long list, which keeps it only if long; a long
 * one's weight goes to the spare cell DENSE_D, never read.
 */
static size_t dense_group(model_data *m, const model_group *gr, fin_acc *f, ents *e, size_t a,
                          size_t b, dense *h, uint64_t xmask)
{
	size_t nl = a;
	memset(h->used, 0, sizeof h->used);
	if (!e->w && b - a < UINT32_MAX && sums_exact(e->wu, b - a)) {
		/*
		 * One weight, and its sums exact: each cell's sums are its counts
		 * times it, the same doubles. An integer increment a sample, not
		 * two floating-point additions in a chain through memory (the
		 * short distances' few hottest cells are hit again and again).
		 */
		for (size_t i = a; i < b; i++) {
			uint64_t key = ent_key(e, i), d = key >> 2;
			bool lng = d >= DENSE_D;
			ent_set(e, nl, key);
			nl += lng;
			d = lng ? DENSE_D : d;
			if (!h->used[d]) {
				h->used[d] = 1;
				h->n[d][0] = h->n[d][1] = 0;
			}
			h->n[d][(key & xmask) == E_INSIDE]++;
		}
		for (uint64_t d = 0; d < DENSE_D; d++) {
			if (h->used[d]) {
				double x = (double)h->n[d][1] * e->wu;
				fin_put(m, gr, f, d, (double)(h->n[d][0] + h->n[d][1]) * e->wu, x,
				        x);
			}
		}
		return nl;
	}
	for (size_t i = a; i < b; i++) {
		uint64_t key = ent_key(e, i), d = key >> 2;
		bool lng = d >= DENSE_D;
		double w = ent_w(e, i);
		if (e->w)
			e->w[nl] = w;
		ent_set(e, nl, key);
		nl += lng;
		d = lng ? DENSE_D : d;
		dense_cell *c = &h->c[d];
		if (!h->used[d]) {
			h->used[d] = 1;
			*c = (dense_cell){0.0, 0.0};
		}
		c->w += w;
		c->x += (key & xmask) == E_INSIDE ? w : 0.0;
	}
	for (uint64_t d = 0; d < DENSE_D; d++)
		if (h->used[d])
			fin_put(m, gr, f, d, h->c[d].w, h->c[d].x, h->c[d].x);
	return nl;
}

lomas_status model_finish_groups(model_data *m, ents *e, const size_t *cur, const ents *tmp,
                                 size_t *count, dense *h, bool lru, bool moments, size_t bound,
                                 void *reuse, size_t reuse_bytes)
{
	size_t ng = m->ngroups;
	size_t np = bound + ng + 1, nd = bound ? bound : 1;
	bool ok = true;
	/* The arrays the policy reads: how many of each size. */
	size_t nnd = 2, nnp = lru ? 2 : moments ? 3 : 0;
	if (reuse && (nnd * nd + nnp * np) * sizeof(double) <= reuse_bytes) {
		/* All in the caller's block, whose pages are mapped already. */
		double *x = reuse;
		m->arrays = reuse;
		m->d = x;
		x += nd;
		if (lru) {
			m->wl = x;
			m->pw = x + nd;
			m->pwd = x + nd + np;
		} else {
			m->wi = x;
			if (moments) {
				m->pwi = x + nd;
				m->pwdi = x + nd + np;
				m->pwd2i = x + nd + 2 * np;
			}
		}
	} else {
#define ALLOC(f, k, want) \
	if (want)         \
	ok = ok && (m->f = big_alloc((k) * sizeof *m->f)) != NULL
		ALLOC(d, nd, true);
		ALLOC(wl, nd, lru);
		ALLOC(pw, np, lru);
		ALLOC(pwd, np, lru);
		ALLOC(wi, nd, !lru);
		ALLOC(pwi, np, !lru && moments);
		ALLOC(pwdi, np, !lru && moments);
		ALLOC(pwd2i, np, !lru && moments);
#undef ALLOC
	}
	if (!ok)
		return error_set(LOMAS_ENOMEM, "out of memory preparing the model");
	fin_acc f = {.lru = lru, .moments = moments};
	/* The entries in the cell's partial sum: inside (random), and in no corrected class (lru).
	 */
	const uint64_t xmask = lru ? E_INSIDE | E_FIXED : E_INSIDE;
	for (size_t g = 0; g < ng; g++) {
		model_group *gr = &m->groups[g];
		size_t a = gr->off, b = cur[g];
		f = (fin_acc){.start = f.out_n, .out_n = f.out_n, .lru = lru, .moments = moments};
		gr->pre = f.start + g;
		if (b - a >= DENSE_MIN) {
			/* Short distances into the table; the long ones kept, in order, and sorted.
			 */
			size_t nl = dense_group(m, gr, &f, e, a, b, h, xmask);
			b = nl;
		}
		if (e->k32)
			ent_sort32(e->k32 + a, b - a, tmp->k32, count);
		else
			ent_sort(e->k + a, e->w ? e->w + a : NULL, b - a, tmp->k, tmp->w, count);
		for (size_t i = a; i < b; i++)
			fin_put_key(m, gr, &f, ent_key(e, i), ent_w(e, i));
		gr->off = f.start;
		gr->n = f.out_n - f.start;
		size_t q = gr->pre + gr->n;
		if (lru) {
			m->pw[q] = f.pa;
			m->pwd[q] = f.pb;
		} else if (moments) {
			m->pwi[q] = f.pai;
			m->pwdi[q] = f.pbi;
			m->pwd2i[q] = f.pci;
		}
		gr->W0i = f.w0i; /* random replacement's only: 0 with lru */
		gr->dmax = gr->n > 0 ? m->d[f.out_n - 1] : 0.0;
		gr->Wdi = f.pbi;
		gr->Wd2i = f.pci;
	}
	m->n = f.out_n;
	return LOMAS_OK;
}

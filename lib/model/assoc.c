/*
 * Set-associative caches (docs/model.md): an A-way cache of S sets
 * (L = A S lines; a line's set is its line number modulo S).
 *
 * LRU: a reuse with stack distance D misses when at least A of the D
 * distinct lines touched in between map to its own set. How many do
 * depends on how the program's lines spread over sets, which the samples
 * show: for a sampled reuse (s, e) of line x, the sampled references
 * inside (s, e) whose own reuse lies beyond e are last touches, i.e.
 * members of the D intervening lines; the weighted share of them in x's
 * set, pooled over the reuses of one half octave of distance, estimates
 * rho, the chance that an intervening line shares the reuse's set. Uniform
 * placement gives 1/S; a power-of-two stride that folds onto few sets gives
 * up to 1 (a column walk's whole column sits in one set). rho is kept per
 * class of load of the reuse's own set (crowded sets see more set-mates)
 * and shrunk towards uniform placement where it does not stand out of its
 * sampling noise. The count X of set-mates among the D intervening lines
 * is hypergeometric: D drawn from the F - 1 other lines of the region the
 * reuse's segment touches, rho (F - 1) of them in its set (D = F - 1, a
 * sweep, gives exactly that many: the even spread of an array). A set
 * whose load is at most A lines never misses (one set's footprint bound).
 *
 * Random replacement is per set, in assoc_random.c.
 *
 * The LRU model is stationary per segment. The fully associative model
 * (lomas_model_curve) is better than that (crossing reuses, reuse classes,
 * footprint bound), so the result is that curve plus the difference this
 * file's model makes between A ways and full associativity, computed on the
 * same stack distances and roots: the associativity effect, not a second
 * model of the whole.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "assoc_keys.h"
#include "model.h"

#define NBANDS 128          /* half octaves of d + 1 */
#define PAIRS_PER_REUSE 16  /* sampled references looked at inside each reuse */
#define REUSES_MAX 262144u  /* reuses whose intervals are looked into */
#define DBINS_PER_OCTAVE 64 /* the binomial part's stack distance resolution */

static unsigned band_of(double d)
{
	unsigned b = (unsigned)(2.0 * log2(d + 1.0));
	return b < NBANDS ? b : NBANDS - 1;
}

/* One reused sample, prepared. */
typedef struct as_reuse {
	uint32_t u; /* its line, as an index into as_lines.u */
	double d;   /* reuse distance */
	double sd;  /* expected stack distance (time-aware, footprint-capped) */
	double w;   /* its sample weight */
	double wt;  /* its weight in the curve's mean (w x group weight / S) */
	double F;   /* distinct lines of its group's span */
	uint32_t group;
	uint16_t band;
} as_reuse;

/* The group of thread clock e among groups [lo, hi) of one thread (spans ascending). */
static uint32_t group_at(const model_data *m, size_t lo, size_t hi, uint64_t e)
{
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;
		if (m->groups[mid].a <= e)
			lo = mid;
		else
			hi = mid;
	}
	return (uint32_t)lo;
}

static double lchoose(double n, double k)
{
	return lgamma(n + 1.0) - lgamma(k + 1.0) - lgamma(n - k + 1.0);
}

/*
 * P(X >= A) for X ~ Hypergeometric: D draws from N lines of which K share
 * the set (real arguments through lgamma). D = N: X = K, an even spread.
 */
static double hyper_tail(double N, double K, double D, double A)
{
	double lt, below = 0.0;
	D = fmin(D, N);
	if (!(K >= A) || !(D >= A))
		return 0.0;
	if (D >= N)
		return 1.0; /* every line of the region: X = K >= A */
	lt = lchoose(N, D);
	for (double x = fmax(0.0, ceil(D - (N - K))); x < A; x += 1.0)
		below += exp(lchoose(K, x) + lchoose(N - K, D - x) - lt);
	return below >= 1.0 ? 0.0 : 1.0 - below;
}

/*
 * Set loads. A set whose lines all fit in its ways has no capacity misses
 * (the footprint bound of one set); and a reuse whose set holds many lines
 * sees more of them in between than one in a quiet set, so rho is kept per
 * class of the reuse's set's load. A set's load is the distinct sampled
 * lines in it plus its share of the lines no sample touched (the
 * Horvitz-Thompson footprint, sum of dangling weights, less the distinct
 * sampled lines, spread evenly): lines a program touches many times are all
 * sampled, so the loads of sweeps and strides are exact.
 */
#define NCLASS 40

static unsigned class_of(double f)
{
	unsigned c = (unsigned)(2.0 * log2(1.0 + f));
	return c < NCLASS ? c : NCLASS - 1;
}

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* The index of v in the sorted, distinct u[n] (present). */
static size_t u64_find(const uint64_t *u, size_t n, uint64_t v)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (u[mid] < v)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The distinct sampled lines, and the expected number of lines no sample names. */
typedef struct as_lines {
	uint64_t *u;
	size_t n;
	double unseen;
	double *load; /* per distinct line, for one set count: its set's load */
	uint64_t *tmp;
} as_lines;

static lomas_status lines_build(const lomas_profile *p, as_lines *L)
{
	size_t n = 0;
	double dang = 0.0;
	L->u = malloc((p->samples.n ? p->samples.n : 1) * sizeof *L->u);
	L->tmp = malloc((p->samples.n ? p->samples.n : 1) * sizeof *L->tmp);
	L->load = malloc((p->samples.n ? p->samples.n : 1) * sizeof *L->load);
	if (!L->u || !L->tmp || !L->load)
		return error_set(LOMAS_ENOMEM, "out of memory");
	for (size_t i = 0; i < p->samples.n; i++) {
		const lomas_sample *s = &p->samples.items[i];
		if (!(s->weight > 0.0))
			continue;
		L->u[n++] = s->addr / p->line_size;
		if (s->state == LOMAS_SAMPLE_DANGLING)
			dang += s->weight;
	}
	qsort(L->u, n, sizeof *L->u, u64_cmp);
	L->n = 0;
	for (size_t i = 0; i < n; i++)
		if (L->n == 0 || L->u[L->n - 1] != L->u[i])
			L->u[L->n++] = L->u[i];
	L->unseen = dang > (double)L->n ? dang - (double)L->n : 0.0;
	return LOMAS_OK;
}

/* L->load[u] for S sets: the distinct lines of u's set, plus unseen / S. */
static void lines_load(as_lines *L, uint64_t S)
{
	double extra = L->unseen / (double)S;
	for (size_t i = 0; i < L->n; i++)
		L->tmp[i] = L->u[i] % S;
	qsort(L->tmp, L->n, sizeof *L->tmp, u64_cmp);
	for (size_t i = 0; i < L->n; i++) {
		uint64_t set = L->u[i] % S;
		size_t a = u64_find(L->tmp, L->n, set), b = a;
		while (b < L->n && L->tmp[b] == set)
			b++;
		L->load[i] = (double)(b - a) + extra;
	}
}

static void lines_free(as_lines *L)
{
	free(L->u);
	free(L->tmp);
	free(L->load);
}

/* A sampled reference inside a sampled reuse that is a last touch before its end. */
typedef struct as_pair {
	uint64_t lj; /* its line */
	uint32_t ui; /* the reuse's line, as an index into as_lines.u */
	uint16_t band;
	double om; /* its weight */
} as_pair;

/*
 * Pairs (reuse, last touch inside it): for at most REUSES_MAX reuses,
 * evenly spaced, up to PAIRS_PER_REUSE of the sampled references inside,
 * each weighted to stand for all of them.
 */
static lomas_status collect_pairs(const lomas_profile *p, const as_lines *L, as_pair **out,
                                  size_t *nout)
{
	size_t ns = p->samples.n, nk = 0, nreused = 0, step, np = 0;
	ts_key *keys = malloc((ns ? ns : 1) * sizeof *keys);
	as_pair *pr = malloc((size_t)REUSES_MAX * PAIRS_PER_REUSE * sizeof *pr);
	rng r;
	if (!keys || !pr) {
		free(keys);
		free(pr);
		return error_set(LOMAS_ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < ns; i++) {
		const lomas_sample *s = &p->samples.items[i];
		if (!(s->weight > 0.0))
			continue;
		keys[nk++] = (ts_key){s->thread, s->start, (uint32_t)i};
		nreused += s->state == LOMAS_SAMPLE_REUSED;
	}
	qsort(keys, nk, sizeof *keys, ts_cmp);
	rng_seed(&r, 0x5e7a55);
	step = nreused > REUSES_MAX ? (nreused + REUSES_MAX - 1) / REUSES_MAX : 1;
	for (size_t q = 0, seen = 0; q < nk; q++) {
		const lomas_sample *si = &p->samples.items[keys[q].ix];
		size_t lo, hi, take;
		uint32_t ui;
		unsigned band;
		if (si->state != LOMAS_SAMPLE_REUSED || seen++ % step)
			continue;
		lo = q + 1;
		hi = ts_lower(keys, lo, nk, si->thread, si->end);
		if (hi <= lo)
			continue;
		band = band_of((double)sample_distance(si));
		ui = (uint32_t)u64_find(L->u, L->n, si->addr / p->line_size);
		take = hi - lo < PAIRS_PER_REUSE ? hi - lo : PAIRS_PER_REUSE;
		for (size_t t = 0; t < take; t++) {
			size_t at =
			    take == hi - lo ? lo + t : lo + (size_t)(rng_next(&r) % (hi - lo));
			const lomas_sample *sj = &p->samples.items[keys[at].ix];
			/* A last touch before e: its line's next touch is after e, or never. */
			if (sj->state == LOMAS_SAMPLE_REUSED && sj->end <= si->end)
				continue;
			pr[np++] =
			    (as_pair){sj->addr / p->line_size, ui, (uint16_t)band,
			              si->weight * sj->weight * (double)(hi - lo) / (double)take};
		}
	}
	free(keys);
	*out = pr;
	*nout = np;
	return LOMAS_OK;
}

/* Shrink the estimate same/tot towards prior by how far it stands out of its noise. */
double assoc_shrink(double same, double tot, double tot2, double prior)
{
	double rho, neff, var0, dev2;
	if (!(tot > 0.0))
		return prior;
	rho = same / tot;
	neff = tot * tot / tot2;
	var0 = prior * (1.0 - prior) / neff;
	dev2 = (rho - prior) * (rho - prior);
	return dev2 > var0 ? prior + (rho - prior) * (dev2 - var0) / dev2 : prior;
}

/*
 * rho[band * NCLASS + class] for S sets: per band, shrunk towards uniform (an
 * empirical Bayes weight: uniform data stays at 1/S, a stride's fold
 * stands out); per class of the reuse's set, towards its band's value.
 */
static lomas_status estimate_rho(const as_pair *pr, size_t np, const as_lines *L, uint64_t S,
                                 double *rho)
{
	double *acc = calloc((size_t)NBANDS * (NCLASS + 1) * 3, sizeof *acc);
	/*
	 * Uniform placement: of the other F - 1 lines, F / S - 1 share a
	 * line's set (1/S would count the line itself: one line too many in
	 * every set, +3 points at 8 ways on random addresses).
	 */
	double F = (double)L->n + L->unseen;
	double u = F > 1.0 ? fmax(0.0, (F / (double)S - 1.0) / (F - 1.0)) : 1.0 / (double)S;
	if (!acc)
		return error_set(LOMAS_ENOMEM, "out of memory");
	for (size_t i = 0; i < np; i++) {
		const as_pair *x = &pr[i];
		unsigned c = class_of(L->load[x->ui]);
		bool same = x->lj % S == L->u[x->ui] % S;
		/* [band][class or NCLASS for the whole band][tot, tot2, same] */
		for (unsigned k = 0; k < 2; k++) {
			double *a = acc + ((size_t)x->band * (NCLASS + 1) + (k ? NCLASS : c)) * 3;
			a[0] += x->om;
			a[1] += x->om * x->om;
			a[2] += same ? x->om : 0.0;
		}
	}
	for (unsigned b = 0; b < NBANDS; b++) {
		const double *ab = acc + ((size_t)b * (NCLASS + 1) + NCLASS) * 3;
		double rb = S == 1 ? 1.0 : assoc_shrink(ab[2], ab[0], ab[1], u);
		for (unsigned c = 0; c < NCLASS; c++) {
			const double *a = acc + ((size_t)b * (NCLASS + 1) + c) * 3;
			rho[b * NCLASS + c] = S == 1 ? 1.0 : assoc_shrink(a[2], a[0], a[1], rb);
		}
	}
	free(acc);
	return LOMAS_OK;
}

/* A cell of LRU's reuses: one band, class, 1/8 octave of F and 1/64 octave of SD. */
typedef struct as_cell {
	uint64_t key;
	double w, wsd, wf; /* sum of wt; of wt sd; of wt F */
} as_cell;

static int cell_cmp(const void *a, const void *b)
{
	const as_cell *x = a, *y = b;
	return x->key < y->key ? -1 : x->key > y->key;
}

/* Whether a set of this load holds all its lines (half a line of slack). */
static bool fits(double load, double A)
{
	return load < A + 0.5;
}

/*
 * LRU: the A-way less the fully associative capacity misses for the sizes
 * j of one set count, into delta[j]. The count of intervening lines in the
 * reuse's set is hypergeometric: D draws from the F - 1 other lines of the
 * region, rho (F - 1) of them in the set (a draw of the whole region gives
 * exactly that many: the even spread of a sweep).
 */
static lomas_status lru_delta(const as_reuse *r, size_t nr, const as_lines *L, const double *rho,
                              const double *lines, const size_t *js, size_t nj, double A,
                              double total, as_cell *cells, double *delta)
{
	size_t nc = 0, m = 0;
	double sa = 0.0;
	for (size_t i = 0; i < nr; i++) {
		double sd = r[i].sd, load = L->load[r[i].u], F = fmax(r[i].F, sd + 1.0);
		unsigned c = class_of(load);
		uint64_t db = sd > 0.0 ? (uint64_t)(log2(sd + 1.0) * DBINS_PER_OCTAVE) : 0;
		uint64_t fb = (uint64_t)(log2(F + 1.0) * 8.0);
		if (fits(load, A) || sd < A - 0.5)
			continue;
		cells[nc++] = (as_cell){(uint64_t)(r[i].band * NCLASS + c) << 32 | fb << 16 | db,
		                        r[i].wt, r[i].wt * sd, r[i].wt * F};
	}
	qsort(cells, nc, sizeof *cells, cell_cmp);
	for (size_t i = 0; i < nc; i++) {
		if (m > 0 && cells[m - 1].key == cells[i].key) {
			cells[m - 1].w += cells[i].w;
			cells[m - 1].wsd += cells[i].wsd;
			cells[m - 1].wf += cells[i].wf;
		} else {
			cells[m++] = cells[i];
		}
	}
	for (size_t c = 0; c < m; c++) {
		double rh = rho[cells[c].key >> 32], sd = cells[c].wsd / cells[c].w;
		double F = cells[c].wf / cells[c].w, N = F - 1.0;
		sa += cells[c].w * hyper_tail(N, rh * N, sd, A);
	}
	for (size_t q = 0; q < nj; q++) {
		double fa = 0.0, Lj = lines[js[q]];
		/* StatStack's rounding: a whole line (statstack.c). */
		for (size_t i = 0; i < nr; i++)
			if (r[i].sd >= Lj - 0.5)
				fa += r[i].wt;
		delta[js[q]] = (sa - fa) / total;
	}
	return LOMAS_OK;
}

static int reuse_group_cmp(const void *a, const void *b)
{
	const as_reuse *x = a, *y = b;
	return x->group < y->group ? -1 : x->group > y->group;
}

/* The reused samples with their groups, weights, stack distances and phi. */
static lomas_status prepare_reuses(const lomas_profile *p, model_data *m, const as_lines *L,
                                   as_reuse **out, size_t *nout)
{
	model_mean mean = model_mean_of(m);
	size_t nr = 0;
	double *top = malloc((m->nthreads + 1) * sizeof *top), *F;
	as_reuse *r = malloc((p->samples.n ? p->samples.n : 1) * sizeof *r);
	F = malloc((m->ngroups + 1) * sizeof *F);
	if (!top || !r || !F) {
		free(top);
		free(r);
		free(F);
		return error_set(LOMAS_ENOMEM, "out of memory");
	}
	for (size_t t = 0; t < m->nthreads; t++)
		top[t] = model_footprint_upper(m, t, 0.025) - 1.0;
	/*
	 * The region a group's reuses draw from: the distinct lines among its
	 * longest reuse's worth of references (past that, G grows only by the
	 * group's dangling fraction, the lines it never touches again).
	 */
	for (size_t gi = 0; gi < m->ngroups; gi++)
		F[gi] = model_stack_sum(m, &m->groups[gi], m->groups[gi].dmax + 1.0);
	for (size_t i = 0; i < p->samples.n; i++) {
		const lomas_sample *s = &p->samples.items[i];
		const lomas_window *win;
		uint32_t g0, g1, t;
		double wt, sd, d;
		if (s->state != LOMAS_SAMPLE_REUSED || !(s->weight > 0.0))
			continue;
		win = &p->windows.items[s->window];
		g0 = m->piece_group[model_piece_of(&m->pieces, win, s->window, s->start)];
		t = m->groups[g0].thread;
		g1 = group_at(m, g0, m->thread_first[t + 1], s->end);
		wt = model_mean_weight(&mean, &m->groups[g0]);
		if (!(m->groups[g0].S > 0.0) || !(wt > 0.0))
			continue;
		d = (double)sample_distance(s);
		sd = fmin(model_reuse_sd(m, s->start, s->end, g0, g1), top[t]);
		sd = sd > 0.0 ? sd : 0.0;
		r[nr].u = (uint32_t)u64_find(L->u, L->n, s->addr / p->line_size);
		r[nr].d = d;
		r[nr].sd = sd;
		r[nr].w = s->weight;
		r[nr].wt = s->weight * wt / m->groups[g0].S;
		r[nr].F = F[g0];
		r[nr].group = g0;
		r[nr].band = (uint16_t)band_of(d);
		nr++;
	}
	free(top);
	free(F);
	qsort(r, nr, sizeof *r, reuse_group_cmp);
	*out = r;
	*nout = nr;
	return LOMAS_OK;
}

/* delta[j]: the A-way LRU model less the fully associative one, sizes ascending in lines. */
static lomas_status assoc_lru_delta(const lomas_profile *p, const double *lines, size_t n,
                                    unsigned ways, double *delta)
{
	model_opts o = model_default_opts(LOMAS_POLICY_LRU);
	model_data m;
	as_lines L = {0};
	as_reuse *r = NULL;
	as_pair *pr = NULL;
	as_cell *cells = NULL;
	size_t nr = 0, np = 0, *js = malloc((n ? n : 1) * sizeof *js);
	double *rho = malloc((size_t)NBANDS * NCLASS * sizeof *rho), A = (double)ways;
	model_mean mean;
	lomas_status st;
	o.classes = false;
	o.lru = true;
	if ((st = model_data_build(p, &o, &m))) {
		free(js);
		free(rho);
		return st;
	}
	mean = model_mean_of(&m);
	if (!js || !rho) {
		st = error_set(LOMAS_ENOMEM, "out of memory");
		goto out;
	}
	if ((st = lines_build(p, &L)) || (st = collect_pairs(p, &L, &pr, &np)) ||
	    (st = prepare_reuses(p, &m, &L, &r, &nr)))
		goto out;
	if (!(cells = malloc((nr ? nr : 1) * sizeof *cells))) {
		st = error_set(LOMAS_ENOMEM, "out of memory");
		goto out;
	}
	memset(delta, 0, n * sizeof *delta);
	if (!(mean.total > 0.0))
		goto out;
	/* The sizes of one set count at a time: the set loads and rho are per set count. */
	for (size_t j0 = 0, j1; j0 < n; j0 = j1) {
		uint64_t S = (uint64_t)lines[j0] / ways;
		size_t nj = 0;
		for (j1 = j0; j1 < n && (uint64_t)lines[j1] / ways == S; j1++)
			if (S > 1)
				js[nj++] = j1;
		if (nj == 0)
			continue;
		lines_load(&L, S);
		if ((st = estimate_rho(pr, np, &L, S, rho)) ||
		    (st = lru_delta(r, nr, &L, rho, lines, js, nj, A, mean.total, cells, delta)))
			goto out;
	}
out:
	free(r);
	free(pr);
	free(cells);
	free(js);
	free(rho);
	lines_free(&L);
	model_data_free(&m);
	return st;
}

lomas_status lomas_model_curve_assoc(const lomas_profile *p, lomas_policy policy,
                                     const uint64_t *cache_bytes, size_t n, uint32_t line_bytes,
                                     unsigned ways, unsigned flags, double *ratios)
{
	error_clear();
	uint32_t line = 0;
	size_ix *ord = NULL;
	double *lines = NULL, *delta = NULL;
	lomas_status st =
	    model_check_args(p, policy, cache_bytes, n, line_bytes, flags, ratios, &line);
	if (st)
		return st;
	if (ways == 0)
		return lomas_model_curve(p, policy, cache_bytes, n, line_bytes, flags, ratios);
	for (size_t i = 0; i < n; i++)
		if (cache_bytes[i] % ((uint64_t)line * ways) != 0)
			return error_set(
			    LOMAS_EINVAL,
			    "cache size %llu bytes is not a whole number of sets of %u "
			    "ways of %u-byte lines",
			    (unsigned long long)cache_bytes[i], ways, line);
	if ((st = lomas_model_curve(p, policy, cache_bytes, n, line_bytes, flags, ratios)) ||
	    n == 0)
		return st;
	if ((st = model_sort_sizes(cache_bytes, n, line, &ord, &lines)))
		return st;
	if (!(delta = malloc(n * sizeof *delta))) {
		st = error_set(LOMAS_ENOMEM, "out of memory");
		goto done;
	}
	if ((st = policy == LOMAS_POLICY_LRU ? assoc_lru_delta(p, lines, n, ways, delta)
	                                     : assoc_random_delta(p, lines, n, ways, delta)))
		goto done;
	for (size_t j = 0; j < n; j++) {
		double r = ratios[ord[j].ix];
		/* One set is a fully associative cache: no difference to add. */
		if ((uint64_t)lines[j] / ways > 1)
			r += delta[j];
		ratios[ord[j].ix] = r < 0.0 ? 0.0 : (r > 1.0 ? 1.0 : r);
	}
	error_clear();
done:
	free(ord);
	free(lines);
	free(delta);
	return st;
}

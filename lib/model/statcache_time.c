/*
 * Time-aware StatCache: a line survives the interval (s, e) of its reuse
 * if none of the misses in between evicts it. The misses in between are
 * those of the groups the interval crosses, each for its share:
 *   M(s, e) = sum_g (R_g + c_g) |g ∩ (s, e)|,   P(miss) = f_L(M),
 * with R_g the group's (non-cold) miss ratio and c_g its cold-miss rate
 * (model_cold_rates): first touches miss and evict lines too, but for the
 * first L of a thread, which fill an empty cache (c_g then stands for c_g
 * kappa_g, model_evicting_cold). The miss
 * happens at e, so it counts in e's group:
 *   R_g S_g = sum_{inside g} w f_L((R_g + c_g) d) + C_g
 *             + sum_{crossing reuses ending in g} w f_L(M),
 * which for one group is the stationary equation (statcache.c). The
 * crossing sums depend on other groups' ratios: a fixed point, found by
 * forward sweeps over each thread's groups in clock order, each group's own
 * ratio solved exactly (Brent, or the tabulated grid for many sizes) with
 * its crossing misses computed from this sweep's ratios of the groups
 * before it. The first sweep leaves the crossing reuses out (a lower bound:
 * every term is non-negative and increasing in every ratio), so the sweeps
 * rise to the least fixed point above it; measured, 3 to 7 sweeps bring
 * every ratio within 1e-7.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <gsl/gsl_errno.h>
#include <gsl/gsl_roots.h>

#include "model.h"

#define SWEEPS_MAX 60
#define INNER_MAX 2
#define SWEEP_TOL 1e-7

/*
 * Pool-adjacent-violators: the nondecreasing sequence closest (least
 * squares) to y[0..n), in place; val/len are scratch of n entries.
 */
static void isotonic(double *y, size_t n, double *val, size_t *len)
{
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		val[k] = y[i];
		len[k] = 1;
		while (k > 0 && val[k - 1] > val[k]) {
			val[k - 1] = (val[k - 1] * (double)len[k - 1] + val[k] * (double)len[k]) /
			             (double)(len[k - 1] + len[k]);
			len[k - 1] += len[k];
			k--;
		}
		k++;
	}
	for (size_t b = 0, i = 0; b < k; b++)
		for (size_t r = 0; r < len[b]; r++)
			y[i++] = val[b];
}

lomas_status model_cold_rates(const model_data *m, double *c)
{
	size_t ng = m->ngroups;
	double *y = malloc((ng + 1) * sizeof *y), *val = malloc((ng + 1) * sizeof *val);
	size_t *len = malloc((ng + 1) * sizeof *len);
	if (!y || !val || !len) {
		free(y);
		free(val);
		free(len);
		return error_set(LOMAS_ENOMEM, "out of memory");
	}
	/*
	 * Every reference is a first touch or the end of one reuse, so a
	 * thread's first touches up to the end of its group k are its samples
	 * so far less the reuses ended so far: y_k = sum_{g<=k} (S - E - C)
	 * (a censored reuse ends in an unknown group: left out). That count
	 * never falls; its estimate does, by sampling noise at every boundary
	 * (a group's S and E differ by the reuses crossing its ends): the
	 * nondecreasing least-squares fit keeps the rises of real first touches
	 * (initialisation, a new data set) and flattens the noise of steady
	 * phases. With one group, c = D / S: the seed's cold-miss equation.
	 */
	for (size_t t = 0; t < m->nthreads; t++) {
		size_t k0 = m->thread_first[t], k1 = m->thread_first[t + 1], n = k1 - k0;
		double acc = 0.0;
		y[0] = 0.0;
		for (size_t k = 0; k < n; k++) {
			const model_group *gr = &m->groups[k0 + k];
			acc += gr->S - gr->E - gr->C;
			y[k + 1] = acc;
		}
		isotonic(y, n + 1, val, len);
		for (size_t k = 0; k < n; k++) {
			const model_group *gr = &m->groups[k0 + k];
			double lo = y[k] > 0.0 ? y[k] : 0.0, hi = y[k + 1] > 0.0 ? y[k + 1] : 0.0;
			c[k0 + k] = gr->S > 0.0 ? (hi - lo) / gr->S : 0.0;
		}
	}
	free(y);
	free(val);
	free(len);
	return LOMAS_OK;
}

/*
 * model_evicting_cold: the share of group g's first touches that evict. A
 * profile that starts with the program starts with an empty cache, and a
 * random cache's miss then fills a free line: the first L distinct lines
 * of a thread evict nothing (no other miss can happen before, the cache
 * holding every line touched). Uniformly random reads of 98304 lines,
 * 600k references: the curve had 31.6 % at 4 MiB for the exact 21.9 %.
 * The distinct lines so far are the first touches so far, counted as
 * model_cold_rates counts them per group (samples less reuses ended,
 * nondecreasing), but over up to FILL_BINS even bins of the thread's clock: a
 * group is as long as a phase and a cache fills at its start, and so does
 * a window (a list of 20000 lines walked 12 times in one window: every
 * first touch is in the first pass, a twelfth of it). Within a bin the
 * count rises evenly.
 */
#define FILL_BINS 1024

lomas_status model_evicting_cold(const model_data *m, const double *lines, size_t n, double *kappa)
{
	const lomas_profile *p = m->profile;
	const model_pieces *pc = &m->pieces;
	size_t ng = m->ngroups, nb = 0, *len = NULL;
	double *net = NULL, *y = NULL, *val = NULL, wid = 1.0;
	double *tot = calloc(ng + 1, sizeof *tot);
	lomas_status st = LOMAS_OK;
	if (!tot)
		goto nomem;
	for (size_t i = 0; i < ng * n; i++)
		kappa[i] = 1.0;
	if (!m->cold_start || pc->nthreads == 0 || pc->toff[1] == pc->toff[0])
		goto done;
	for (size_t i = 0; i < ng * n; i++)
		kappa[i] = 0.0;
	/*
	 * The threads share the cache, and their clocks do not say when each
	 * began: the first thread (the program's start) fills it; a thread
	 * started later finds it filled by the first's data (its groups keep
	 * kappa 1). Two threads summing their own matrices after the main
	 * thread filled both: each filling a cache of its own took 512 KiB
	 * -0.42 -> -0.79 pp. Thread 0's bins: at most 4 a piece, of one width
	 * (its clock's end over their number).
	 */
	{
		size_t np = pc->toff[1] - pc->toff[0];
		uint64_t end = 1;
		nb = 4 * np < FILL_BINS ? 4 * np : FILL_BINS;
		for (size_t k = pc->toff[0]; k < pc->toff[1]; k++)
			if (pc->items[k].start + pc->items[k].refs > end)
				end = pc->items[k].start + pc->items[k].refs;
		wid = (double)end / (double)(nb ? nb : 1);
	}
	net = calloc(nb + 1, sizeof *net);
	y = malloc((nb + 1) * sizeof *y);
	val = malloc((nb + 1) * sizeof *val);
	len = malloc((nb + 1) * sizeof *len);
	if (!net || !y || !val || !len)
		goto nomem;
	for (size_t i = 0; i < p->samples.n; i++) {
		const lomas_sample *s = &p->samples.items[i];
		size_t k;
		if (!(s->weight > 0.0) || s->state == LOMAS_SAMPLE_CENSORED)
			continue; /* a censored reuse ends in an unknown bin: left out */
		k = model_piece_of(pc, &p->windows.items[s->window], s->window, s->start);
		if (pc->items[k].thread != 0)
			continue;
		net[(size_t)fmin((double)s->start / wid, (double)nb - 1)] += s->weight;
		if (s->state == LOMAS_SAMPLE_REUSED)
			net[(size_t)fmin((double)s->end / wid, (double)nb - 1)] -= s->weight;
	}
	y[0] = 0.0;
	for (size_t b = 0; b < nb; b++)
		y[b + 1] = y[b] + net[b];
	isotonic(y, nb + 1, val, len);
	for (size_t k = pc->toff[0]; k < pc->toff[1]; k++) {
		const model_piece *pk = &pc->items[k];
		double x0 = (double)pk->start / wid;
		double x1 = (double)(pk->start + pk->refs) / wid;
		uint32_t g = m->piece_group[k];
		/* The bins the piece covers, each for its overlap. */
		for (size_t b = (size_t)x0; b < nb && (double)b < x1; b++) {
			double o0 = fmax(x0, (double)b), o1 = fmin(x1, (double)b + 1.0);
			double a = fmax(y[b], 0.0), c = fmax(y[b + 1], 0.0);
			if (!(o1 > o0) || !(c > a))
				continue;
			tot[g] += (c - a) * (o1 - o0);
			for (size_t j = 0; j < n; j++) {
				/* Where in the bin the count passes lines[j] (0..1). */
				double at = a >= lines[j]   ? 0.0
				            : c <= lines[j] ? 1.0
				                            : (lines[j] - a) / (c - a);
				kappa[g * n + j] +=
				    (c - a) * fmax(0.0, o1 - fmax(o0, (double)b + at));
			}
		}
	}
	/* A group without first touches counted (a later thread's) evicts at c_g. */
	for (size_t g = 0; g < ng; g++)
		for (size_t j = 0; j < n; j++)
			kappa[g * n + j] =
			    tot[g] > 0.0 ? fmin(1.0, kappa[g * n + j] / tot[g]) : 1.0;
	goto done;
nomem:
	st = error_set(LOMAS_ENOMEM, "out of memory");
done:
	free(net);
	free(y);
	free(val);
	free(tot);
	free(len);
	return st;
}

/*
 * 1 - e^-y for y >= 0, to a relative 1e-6 (these terms are averaged over
 * samples; this is the model's innermost loop): saturated above 40, the
 * series to y^4 below 0.01 (error < y^5/120), else with the single-precision
 * exponential, several times cheaper than expm1 (error 6e-8 / y <= 6e-6).
 */
static inline double one_minus_exp(double y)
{
	if (y < 0.01)
		return y * (1.0 - y * (0.5 - y * (1.0 / 6.0 - y * (1.0 / 24.0))));
	if (y > 40.0)
		return 1.0;
	return 1.0 - (double)expf((float)-y);
}

/*
 * X[j]: the expected misses at size j of the crossing reuses ending in group
 * g (those are cross[i0..i1)): M = P_g - P_{g0+1} + (R_g0 + c_g0 k_g0) in0
 * + (R_g + c_g k_g) in1, with P_k the expected evicting misses of the
 * thread before group k, k_g the share of group g's first touches that
 * evict (model_evicting_cold).
 * Only the sizes act[0..na) still moving are recomputed.
 */
static void crossing_misses(const model_data *m, size_t i0, size_t i1, const double *R,
                            const double *c, const double *kap, const double *P, const double *lgs,
                            size_t n, const uint32_t *act, size_t na, double *X)
{
	for (size_t a = 0; a < na; a++)
		X[act[a]] = 0.0;
	for (size_t i = i0; i < i1; i++) {
		const model_cross *x = &m->cross[i];
		const model_group *g0 = &m->groups[x->g0], *g1 = &m->groups[x->g1];
		double in0 = (double)(g0->b - x->s - 1), in1 = (double)(x->e - g1->a);
		const double *r0 = R + x->g0 * n, *r1 = R + x->g1 * n;
		const double *p0 = P + (x->g0 + 1) * n, *p1 = P + x->g1 * n;
		const double *k0 = kap + x->g0 * n, *k1 = kap + x->g1 * n;
		double c0 = c[x->g0], c1 = c[x->g1], w = x->w;
		for (size_t a = 0; a < na; a++) {
			size_t j = act[a];
			double y = -lgs[j] * (p1[j] - p0[j] + (r0[j] + c0 * k0[j]) * in0 +
			                      (r1[j] + c1 * k1[j]) * in1);
			X[j] += w * one_minus_exp(y);
		}
	}
}

/*
 * Solve group g's own ratio for every size, the other groups' held fixed;
 * its cold misses evict at c kap[j] (model_evicting_cold), cj holds those.
 */
static void solve_group(const model_data *m, size_t g, bool grid, const sc_tables *T,
                        gsl_root_fsolver *solver, const double *lines, const double *lams, size_t n,
                        const double *ex, double c, const double *kap, double *cj, double *r)
{
	for (size_t j = 0; j < n; j++)
		cj[j] = c * kap[j];
	if (grid) {
		sc_table_solve(T, m, g, lines, lams, n, ex, cj, r);
		return;
	}
	double hi = 1.0;
	for (size_t j = 0; j < n; j++) {
		r[j] = statcache_group_ratio(m, g, lines[j], ex[j], cj[j], hi, solver);
		/* R falls as L grows, unless the crossing misses grew. */
		hi = j + 1 < n && ex[j + 1] <= ex[j] && cj[j + 1] <= cj[j] ? r[j] : 1.0;
	}
}

lomas_status statcache_solve_time(const model_data *m, const double *lines, size_t n, bool grid,
                                  double *R, double *c)
{
	size_t ng = m->ngroups, nn = ng * n;
	double *X = calloc(nn ? nn : 1, sizeof *X);
	double *moved = malloc((n ? n : 1) * sizeof *moved);
	uint32_t *act = malloc((n ? n : 1) * sizeof *act);
	size_t na = n;
	double *P = malloc((nn ? nn : 1) * sizeof *P);
	double *lams = malloc((n ? n : 1) * sizeof *lams), *lgs = malloc((n ? n : 1) * sizeof *lgs);
	double *ex = malloc((n ? n : 1) * sizeof *ex), *prev = malloc((n ? n : 1) * sizeof *prev);
	double *cur = malloc((n ? n : 1) * sizeof *cur), *cj = malloc((n ? n : 1) * sizeof *cj);
	double *kap = malloc((nn ? nn : 1) * sizeof *kap);
	size_t *cstart = malloc((ng + 1) * sizeof *cstart);
	gsl_root_fsolver *solver = grid ? NULL : gsl_root_fsolver_alloc(gsl_root_fsolver_brent);
	sc_tables T = {0};
	lomas_status st = LOMAS_OK;

	for (size_t i = 0; i < nn; i++)
		R[i] = 0.0;
	if (!X || !P || !lams || !lgs || !ex || !prev || !cur || !cstart || !moved || !act || !cj ||
	    !kap || (!grid && !solver)) {
		st = error_set(LOMAS_ENOMEM, "out of memory solving StatCache");
		goto out;
	}
	for (size_t j = 0; j < n; j++) {
		lams[j] = -log1p(-1.0 / lines[j]);
		lgs[j] = log1p(-1.0 / lines[j]);
	}
	if ((st = model_cold_rates(m, c)) || (st = model_evicting_cold(m, lines, n, kap)))
		goto out;
	if (grid && (st = sc_tables_build(m, lams, n, &T)))
		goto out;
	for (size_t g = 0, i = 0; g < ng; g++) {
		cstart[g] = i;
		while (i < m->ncross && m->cross[i].g1 == g)
			i++;
		cstart[g + 1] = i;
	}
	/* Each size is a fixed point of its own: one that has settled is done. */
	for (size_t j = 0; j < n; j++)
		act[j] = (uint32_t)j;
	/*
	 * Forward sweeps: each thread's groups in clock order, so a group's
	 * crossing reuses see this sweep's ratios of every earlier group; only
	 * their share inside the group itself lags, and a few inner rounds
	 * settle that.
	 */
	for (int sweep = 0; sweep < SWEEPS_MAX && na > 0; sweep++) {
		for (size_t j = 0; j < n; j++)
			moved[j] = 0.0;
		for (size_t t = 0; t < m->nthreads; t++) {
			for (size_t g = m->thread_first[t]; g < m->thread_first[t + 1]; g++) {
				const model_group *gr = &m->groups[g];
				double *r = R + g * n, *p = P + g * n, *x = X + g * n;
				size_t i0 = cstart[g], i1 = cstart[g + 1];
				bool first = g == m->thread_first[t];
				double prior = first ? 0.0 : (double)(gr[-1].b - gr[-1].a);
				/* The thread's previous group's rows (g - 1), when there is one. */
				const double *pp = first ? p : P + (g - 1) * n;
				const double *rp = first ? r : R + (g - 1) * n;
				const double *kp = first ? kap : kap + (g - 1) * n;
				for (size_t j = 0; j < n; j++) {
					p[j] = first ? 0.0
					             : pp[j] + (rp[j] + c[g - 1] * kp[j]) * prior;
					prev[j] = r[j];
				}
				for (int inner = 0; inner < (sweep == 0 ? 1 : INNER_MAX); inner++) {
					double step = 0.0;
					if (sweep > 0 || inner > 0)
						crossing_misses(m, i0, i1, R, c, kap, P, lgs, n,
						                act, na, x);
					for (size_t j = 0; j < n; j++) {
						ex[j] = gr->C + x[j];
						cur[j] = r[j];
					}
					solve_group(m, g, grid, &T, solver, lines, lams, n, ex,
					            c[g], kap + g * n, cj, r);
					for (size_t j = 0; j < n; j++)
						step = fmax(step, fabs(r[j] - cur[j]));
					if (i1 == i0 || step <= SWEEP_TOL)
						break;
				}
				for (size_t j = 0; j < n; j++)
					moved[j] = fmax(moved[j], fabs(r[j] - prev[j]));
			}
		}
		if (m->ncross == 0)
			break;
		/* Sweep 0 left the crossing reuses out: every size moves in sweep 1. */
		if (sweep > 0) {
			size_t k = 0;
			for (size_t a = 0; a < na; a++)
				if (moved[act[a]] > SWEEP_TOL)
					act[k++] = act[a];
			na = k;
		}
	}
out:
	sc_tables_free(&T);
	if (solver)
		gsl_root_fsolver_free(solver);
	free(X);
	free(P);
	free(lams);
	free(lgs);
	free(ex);
	free(prev);
	free(cur);
	free(cj);
	free(kap);
	free(cstart);
	free(moved);
	free(act);
	return st;
}

lomas_status statcache_curve_time(const model_data *m, const double *lines, size_t n, bool grid,
                                  double *cap, double *cold)
{
	size_t nn = m->ngroups * n;
	double *R = malloc((nn ? nn : 1) * sizeof *R);
	double *c = malloc((m->ngroups ? m->ngroups : 1) * sizeof *c);
	lomas_status st;
	if (!R || !c)
		st = error_set(LOMAS_ENOMEM, "out of memory solving StatCache");
	else if (!(st = statcache_solve_time(m, lines, n, grid, R, c)))
		model_group_misses(m, R, n, cap, cold);
	free(R);
	free(c);
	return st;
}

/*
 * Fast StatCache curve for many cache sizes.
 *
 * With x = (R + c) lambda, lambda = -log1p(-1/L), the group equation
 * g(R) = F((R + c) lambda) + extra - R S = 0 (statcache.c) becomes
 *   phi(x) = F(x) + extra + c S - x S / lambda = 0,  F(x) = sum_s w_s (1 - e^{-x d_s}),
 * where F does not depend on L. So F and F' are tabulated once per group
 * on a geometric grid x_j = 2^(j/K - X0) and every size is solved on the
 * table: the root is bracketed between two grid points (it decreases as L
 * grows, so a pointer walks down the grid) and found on the cubic Hermite
 * interpolant of F, whose error is ~1e-5 of the window's weight at K = 4.
 *
 * Filling the table needs no exponential per grid point: for a fixed
 * sample, e^{-2xd} = (e^{-xd})^2, so with u = expm1(-xd) one octave up is
 * u' = u (2 + u) (exact in relative terms; each chain starts from a short
 * series). A sample takes part only where 0.05 <= x d <= 22: below, its
 * share is the series x d - (x d)^2/2 + (x d)^3/6 - (x d)^4/24 (error
 * < 6e-8 of its share, 3e-7 in F'), gathered in moment sums; above,
 * e^{-x d} < 3e-10 and it counts w.
 *
 * Measured against the exact per-size roots (statcache.c) the curve agrees
 * within 1.2e-5 on single-distance windows (the worst case) and within 1e-6
 * on mixed ones; tests/unit/test_model.c holds it to 2e-5.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

#define K 4            /* grid points per octave (grid_ceil knows the steps) */
#define X0 80          /* x_0 = 2^-80 */
#define NGRID (82 * K) /* up to x = 2^2 */
#define Y_LO 5e-2
#define Y_HI 22.0
#define BIN_REL 1e-3 /* distances merged into one chain (fill) */

/* Grid index of the first x_j >= v (clamped to [0, NGRID]), without log2. */
static int grid_ceil(double v)
{
	static const double step[K] = {1.0, 1.189207115002721, 1.414213562373095,
	                               1.681792830507429};
	int e, q = 0;
	double f;
	if (!(v > 0.0))
		return 0;
	f = 2.0 * frexp(v, &e); /* v = f 2^(e-1), 1 <= f < 2 */
	while (q < K && step[q] < f)
		q++;
	long j = (long)K * (e - 1 + X0) + q;
	return j < 0 ? 0 : (j > NGRID ? NGRID : (int)j);
}

typedef struct grid {
	double x[NGRID + 2];
	/* Per group (reused): F, F', and moment coefficients. */
	double F[NGRID + 2], Fp[NGRID + 2];
	double dA[NGRID + 3], dB[NGRID + 3], dC[NGRID + 3], dD[NGRID + 3], dW[NGRID + 3];
} grid;

/*
 * Root in [lo, hi] of the quartic c0 + c1 t + ... + c4 t^4, positive at lo
 * and negative at hi, from t: Newton steps kept inside the bracket,
 * bisection when a step leaves it.
 */
static double poly_root(const double c[5], double lo, double hi, double t)
{
	if (!(t > lo && t < hi))
		t = 0.5 * (lo + hi);
	for (int it = 0; it < 100; it++) {
		double p = c[0] + t * (c[1] + t * (c[2] + t * (c[3] + t * c[4])));
		double dp = c[1] + t * (2 * c[2] + t * (3 * c[3] + t * 4 * c[4]));
		if (p >= 0)
			lo = t;
		else
			hi = t;
		double nt = dp < 0 ? t - p / dp : 0.5 * (lo + hi);
		if (!(nt > lo && nt < hi))
			nt = 0.5 * (lo + hi);
		/* Newton converges quadratically: after a step of 1e-7, t is exact. */
		if (fabs(nt - t) <= 1e-7 * fabs(t) || hi - lo <= 1e-13 * fabs(hi))
			return nt;
		t = nt;
	}
	return t;
}

/*
 * Root of phi(x) = F(x) + extra - slope x between grid points j and j + 1,
 * with F the cubic Hermite interpolant from F and F' at both ends.
 */
static double solve_interval(const double *x, const double *F, const double *Fp, int j,
                             double extra, double slope)
{
	double a = x[j], h = x[j + 1] - a;
	double f0 = F[j], f1 = F[j + 1], m0 = Fp[j] * h, m1 = Fp[j + 1] * h;
	double c[5];
	c[0] = f0 + extra - slope * a;
	c[1] = m0 - slope * h;
	c[2] = -3 * f0 - 2 * m0 + 3 * f1 - m1;
	c[3] = 2 * f0 + m0 - 2 * f1 + m1;
	c[4] = 0.0;
	double pa = c[0], pb = c[0] + c[1] + c[2] + c[3];
	/* Start from the chord. */
	double t = pa > pb ? pa / (pa - pb) : 0.5;
	return a + h * poly_root(c, 0.0, 1.0, t);
}

/*
 * Root below x_jl, where every sample is in the series:
 * x A - x^2 B/2 + x^3 C/6 - x^4 D/24 + extra - slope x = 0 on (0, hi].
 */
static double solve_series(const double mom[4], double extra, double slope, double hi)
{
	double c[5] = {extra, (mom[0] - slope) * hi, -mom[1] / 2 * hi * hi,
	               mom[2] / 6 * hi * hi * hi, -mom[3] / 24 * hi * hi * hi * hi};
	return hi * poly_root(c, 0.0, 1.0, 0.5);
}

/*
 * Add one sample's exponential share to F and F' on [js, je): the K
 * sub-grids are independent squaring chains, run side by side.
 */
static void chain(grid *G, double d, double w, int js, int je)
{
	static const double inv[11] = {0,       1,       1.0 / 2, 1.0 / 3, 1.0 / 4, 1.0 / 5,
	                               1.0 / 6, 1.0 / 7, 1.0 / 8, 1.0 / 9, 1.0 / 10};
	double u[K], wd = w * d;
	int j;
	double y[K], v[K];
	/*
	 * js is the first grid point with x d >= Y_LO, so here y = x d < 2 Y_LO
	 * and expm1(-y) is its series to y^10 (the next term is below 1e-15
	 * relative): no exponential needed. The K chains run side by side.
	 */
	for (int m = 0; m < K; m++) {
		y[m] = G->x[js + m] * d;
		v[m] = 1.0;
	}
	for (int k = 10; k > 1; k--)
		for (int m = 0; m < K; m++)
			v[m] = 1.0 - y[m] * inv[k] * v[m];
	for (int m = 0; m < K; m++)
		u[m] = js + m < je ? -y[m] * v[m] : 0.0;
	for (j = js; j + K <= je; j += K) {
		for (int m = 0; m < K; m++) {
			G->F[j + m] -= w * u[m];
			G->Fp[j + m] += wd * (1.0 + u[m]);
			u[m] *= 2.0 + u[m];
		}
	}
	for (int m = 0; j + m < je; m++) {
		G->F[j + m] -= w * u[m];
		G->Fp[j + m] += wd * (1.0 + u[m]);
	}
}

/* Fill G->F and G->Fp for grid indices [jl, jh] from the group's samples. */
static void fill(grid *G, const model_data *m, const model_group *g, int jl, int jh)
{
	int span = jh - jl + 1;
	memset(G->F + jl, 0, span * sizeof(double));
	memset(G->Fp + jl, 0, span * sizeof(double));
	memset(G->dA + jl, 0, (span + 1) * sizeof(double));
	memset(G->dB + jl, 0, (span + 1) * sizeof(double));
	memset(G->dC + jl, 0, (span + 1) * sizeof(double));
	memset(G->dD + jl, 0, (span + 1) * sizeof(double));
	memset(G->dW + jl, 0, (span + 1) * sizeof(double));
	for (size_t i = g->off, end = g->off + g->n, k; i < end; i = k) {
		double d = m->d[i], w = m->wi[i], lim = d * (1.0 + BIN_REL);
		int js, je;
		/*
		 * Distances within a factor 1 + BIN_REL of each other share one
		 * chain at their weighted mean: F's error is second order in the
		 * spread, (x d)^2 e^{-x d} BIN_REL^2 / 8 <= 7e-8 of their weight,
		 * far below the interpolation's, and a group of a million samples
		 * has a few thousand chains, not a few hundred thousand.
		 */
		for (k = i + 1; k < end && m->d[k] <= lim; k++)
			w += m->wi[k];
		if (k > i + 1 && w > 0.0) {
			double wd = 0.0;
			for (size_t q = i; q < k; q++)
				wd += m->wi[q] * m->d[q];
			d = wd / w;
		}
		if (d <= 0.0 || !(w > 0.0))
			continue;
		js = grid_ceil(Y_LO / d); /* first index in the exponential band */
		je = grid_ceil(Y_HI / d); /* first saturated index */
		if (js < jl)
			js = jl;
		if (js > jh + 1)
			js = jh + 1;
		if (je < js)
			je = js;
		if (je > jh + 1)
			je = jh + 1;
		/*
		 * Series below js, exponential chain in [js, je), saturated from
		 * je. Only additions here: differences of these sums would cancel
		 * catastrophically (w d^2 spans 40 orders of magnitude).
		 */
		G->dA[js] += w * d;
		G->dB[js] += w * d * d;
		G->dC[js] += w * d * d * d;
		G->dD[js] += w * d * d * d * d;
		G->dW[je] += w;
		if (js < je)
			chain(G, d, w, js, je);
	}
	double A = G->dA[jh + 1], B = G->dB[jh + 1], C = G->dC[jh + 1], D = G->dD[jh + 1];
	double W = 0;
	for (int j = jl; j <= jh; j++) {
		W += G->dW[j];
		G->F[j] += W;
	}
	for (int j = jh; j >= jl; j--) {
		/* A, B, C: moments of the samples with js > j (still in the series). */
		double x = G->x[j];
		G->F[j] += x * (A - x * (B / 2 - x * (C / 6 - x * D / 24)));
		G->Fp[j] += A - x * (B - x * (C / 2 - x * D / 6));
		A += G->dA[j];
		B += G->dB[j];
		C += G->dC[j];
		D += G->dD[j];
	}
}

void sc_tables_free(sc_tables *T)
{
	free(T->t);
	free(T->mem);
	free(T->x);
	T->t = NULL;
	T->mem = NULL;
	T->x = NULL;
}

lomas_status sc_tables_build(const model_data *m, const double *lams, size_t n, sc_tables *T)
{
	grid *G = malloc(sizeof *G);
	size_t total = 0, used = 0;
	double lam0 = 0.0;
	T->t = calloc(m->ngroups ? m->ngroups : 1, sizeof *T->t);
	T->x = malloc((NGRID + 2) * sizeof *T->x);
	T->mem = NULL;
	if (!G || !T->t || !T->x) {
		free(G);
		sc_tables_free(T);
		return error_set(LOMAS_ENOMEM, "out of memory");
	}
	for (int j = 0; j <= NGRID + 1; j++)
		T->x[j] = G->x[j] = exp2((double)j / K - X0);
	/* The largest lambda of a size of two lines or more (one line is solved apart). */
	for (size_t j = 0; j < n && lam0 == 0.0; j++)
		if (lams[j] < 0.69314718055994 + 1e-9)
			lam0 = lams[j];
	/* Ranges first: x* = (R + c) lambda <= 2 lambda, and below x_jl all is series. */
	for (size_t gi = 0; gi < m->ngroups; gi++) {
		const model_group *g = &m->groups[gi];
		sc_table *t = &T->t[gi];
		int jh = grid_ceil(2.0 * lam0), jl;
		if (jh >= NGRID)
			jh = NGRID - 1;
		jl = g->dmax > 0.0 ? grid_ceil(Y_LO / g->dmax) - 1 : jh;
		if (jl < 0)
			jl = 0;
		if (jl > jh)
			jl = jh;
		t->jl = jl;
		t->jh = jh;
		if (g->S > 0.0 && lam0 > 0.0)
			total += 2 * (size_t)(jh - jl + 2);
	}
	T->mem = malloc((total ? total : 1) * sizeof *T->mem);
	if (!T->mem) {
		free(G);
		sc_tables_free(T);
		return error_set(LOMAS_ENOMEM, "out of memory");
	}
	for (size_t gi = 0; gi < m->ngroups; gi++) {
		const model_group *g = &m->groups[gi];
		sc_table *t = &T->t[gi];
		size_t span = (size_t)(t->jh - t->jl + 2);
		t->mom[0] = g->Wdi;
		t->mom[1] = g->Wd2i;
		t->mom[2] = t->mom[3] = 0.0;
		if (!(g->S > 0.0) || !(lam0 > 0.0)) {
			t->F = t->Fp = NULL;
			continue;
		}
		fill(G, m, g, t->jl, t->jh + 1);
		/* Indexed by j directly: the pointers start jl entries early. */
		t->F = T->mem + used - t->jl;
		t->Fp = T->mem + used + span - t->jl;
		memcpy(T->mem + used, G->F + t->jl, span * sizeof(double));
		memcpy(T->mem + used + span, G->Fp + t->jl, span * sizeof(double));
		used += 2 * span;
		for (size_t i = g->off; i < g->off + g->n; i++) {
			double d3 = m->d[i] * m->d[i] * m->d[i];
			t->mom[2] += m->wi[i] * d3;
			t->mom[3] += m->wi[i] * d3 * m->d[i];
		}
	}
	free(G);
	return LOMAS_OK;
}

void sc_table_solve(const sc_tables *T, const model_data *m, size_t gi, const double *lines,
                    const double *lams, size_t n, const double *extra, const double *cs, double *R)
{
	const model_group *g = &m->groups[gi];
	const sc_table *t = &T->t[gi];
	int jl = t->jl, jh = t->jh, jp = jh + 1;
	for (size_t j = 0; j < n; j++) {
		double lam = lams[j], c = cs[j], slope, E, x, r;
		if (!(g->S > 0.0)) {
			R[j] = 0.0;
			continue;
		}
		if (lines[j] < 2.0 || !t->F) {
			/* One line: every reuse with anything between misses. */
			r = (g->Wi - g->W0i + extra[j]) / g->S;
			R[j] = r < 1.0 ? r : 1.0;
			continue;
		}
		slope = g->S / lam;
		E = extra[j] + c * g->S;
		if (E <= 0.0 && !(lam * t->mom[0] - g->S > 0.0)) {
			R[j] = 0.0; /* g'(0) <= 0: no positive root */
			continue;
		}
		/* The root moves down the grid as L grows, up if extra grew. */
		while (jp <= jh && T->x[jp + 1] * slope <= t->F[jp + 1] + E)
			jp++;
		while (jp >= jl && t->F[jp] + E - T->x[jp] * slope < 0.0)
			jp--;
		if (jp == jh + 1)
			x = 2.0 * lam; /* everything misses */
		else if (jp >= jl)
			x = solve_interval(T->x, t->F, t->Fp, jp, E, slope);
		else
			x = solve_series(t->mom, E, slope, T->x[jl]);
		if (jp < jl)
			jp = jl - 1;
		r = x / lam - c;
		R[j] = r < 0.0 ? 0.0 : (r > 1.0 ? 1.0 : r);
	}
}

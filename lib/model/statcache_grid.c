/*
 * Fast StatCache curve for many cache sizes.
 *
 * With x = R * lambda, lambda = -log1p(-1/L), the window equation
 * g(R) = F(R lambda) + extra - R S = 0 becomes
 *   phi(x) = F(x) + extra - x S / lambda = 0,  F(x) = sum_s w_s (1 - e^{-x d_s}),
 * where F does not depend on L. So F and F' are tabulated once per window
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
	double x[NGRID + 1];
	/* Per window (reused): F, F', and moment coefficients. */
	double F[NGRID + 1], Fp[NGRID + 1];
	double dA[NGRID + 2], dB[NGRID + 2], dC[NGRID + 2], dD[NGRID + 2], dW[NGRID + 2];
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
static double solve_interval(const grid *G, int j, double extra, double slope)
{
	double a = G->x[j], h = G->x[j + 1] - a;
	double f0 = G->F[j], f1 = G->F[j + 1], m0 = G->Fp[j] * h, m1 = G->Fp[j + 1] * h;
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
	for (size_t i = g->off; i < g->off + g->n; i++) {
		double d = m->d[i], w = m->w[i];
		int js, je;
		if (d <= 0.0)
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

lomas_status statcache_curve_grid(const model_data *m, const double *lines, size_t n, bool cold,
                                  double *ratios)
{
	grid *G = malloc(sizeof *G);
	double *lams = malloc((n ? n : 1) * sizeof *lams);
	model_mean mean;
	if (!G || !lams) {
		free(G);
		free(lams);
		return error_set(LOMAS_ENOMEM, "out of memory");
	}
	for (size_t j = 0; j < n; j++)
		lams[j] = -log1p(-1.0 / lines[j]);
	for (int j = 0; j <= NGRID; j++)
		G->x[j] = exp2((double)j / K - X0);
	for (size_t j = 0; j < n; j++)
		ratios[j] = 0.0;
	mean = model_mean_of(m);
	for (size_t gi = 0; gi < m->ngroups; gi++) {
		const model_group *g = &m->groups[gi];
		double wt = model_mean_weight(&mean, g);
		double extra = g->C + (cold ? g->D : 0.0);
		double mom[4] = {g->Wd, g->Wd2, 0.0, 0.0}, dmax;
		size_t j0 = 0;
		int jl, jh, jp;
		if (!(g->S > 0.0) || !(wt > 0.0))
			continue;
		/* Sizes of one line: every reuse with anything between misses. */
		while (j0 < n && lines[j0] < 2.0) {
			double r = (g->W - g->W0 + extra) / g->S;
			ratios[j0++] += wt * (r < 1.0 ? r : 1.0);
		}
		if (j0 == n)
			continue;
		dmax = g->n ? m->d[g->off + g->n - 1] : 0.0;
		/* Below x_jl every sample is in the series; x* <= lambda <= x_jh. */
		jh = grid_ceil(lams[j0]);
		jl = dmax > 0.0 ? grid_ceil(Y_LO / dmax) - 1 : jh;
		if (jl < 0)
			jl = 0;
		if (jl > jh)
			jl = jh;
		if (jh == NGRID)
			jh--;
		fill(G, m, g, jl, jh + 1);
		for (size_t i = g->off; i < g->off + g->n; i++) {
			double d3 = m->d[i] * m->d[i] * m->d[i];
			mom[2] += m->w[i] * d3;
			mom[3] += m->w[i] * d3 * m->d[i];
		}
		jp = jh + 1;
		for (size_t j = j0; j < n; j++) {
			double lam = lams[j], slope = g->S / lam, x;
			if (extra <= 0.0 && !(lam * mom[0] - g->S > 0.0))
				break; /* g'(0) <= 0 here and for every larger cache */
			/* Walk down to the first grid point with phi >= 0. */
			while (jp >= jl && G->F[jp] + extra - G->x[jp] * slope < 0.0)
				jp--;
			if (jp == jh + 1) {
				x = lam; /* everything misses */
			} else if (jp >= jl) {
				x = solve_interval(G, jp, extra, slope);
			} else {
				x = solve_series(mom, extra, slope, G->x[jl]);
				jp = jl; /* the next size starts from the bottom of the grid */
			}
			double r = x / lam;
			r = r < 0.0 ? 0.0 : (r > 1.0 ? 1.0 : r);
			ratios[j] += wt * r;
		}
	}
	for (size_t j = 0; j < n; j++)
		ratios[j] /= mean.total;
	free(G);
	free(lams);
	return LOMAS_OK;
}

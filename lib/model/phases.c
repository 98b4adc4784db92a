/*
 * Program phases from cache-access signatures (issue 21 item 1; the
 * phase-detection paper's cache access signature vectors, the basic-block
 * vector idea for code).
 *
 * Each window gets two signatures:
 *  - data: N buckets (default 1024), the set index of a cache of N sets
 *    (line number mod N) of each sampled reference's line, counted;
 *  - code: the sampled reference's pc hashed into 32 buckets.
 * Similarity is the mean of the two cosines (the cosine of the two unit
 * vectors concatenated); a profile without pcs (all 0) compares data alone.
 *
 * A window holds a few hundred samples (window = 256 x period) spread over
 * up to 1024 buckets: most counts are 0 or 1, and the plain cosine of two
 * windows of one phase is then near 0.5, not 1 (the Poisson noise of
 * sampling adds the count to each squared norm). So the norms are the
 * unbiased estimates of the underlying rates' norms: for a mean m of k
 * windows' counts (S their sum), E|m|^2 = |lambda|^2 + sum(lambda)/k, hence
 * |lambda|^2 ~ |m|^2 - sum(S)/k^2, floored at the flattest distribution
 * with that many counts, (sum m)^2 / N (Cauchy-Schwarz). The dot product of
 * two independent windows is already unbiased. The cosine is clamped to
 * [0, 1].
 *
 * A window's data signature can fill at most as many buckets as the window
 * touches distinct lines, U (estimated from its samples that are their
 * line's last touch in it: each line once). A slow sweep, whose windows
 * each touch a different U < N lines of a large array, fills a different
 * part of the buckets every window: two of its windows are near
 * orthogonal at N buckets (line mod 1024 of 512-line windows alternates
 * halves, and the sweep fell into two phases that alternated), though its
 * code and its behaviour are one phase. So where the profile has code
 * signatures, two data signatures are compared at no finer a resolution
 * than the smaller of their footprints: N' buckets, the largest power of
 * two at most U that divides N (bucket b folded onto b mod N', which is
 * line mod N'). Without code the data signature is all there is to tell
 * phases apart, and it keeps its N buckets (a 256-line loop and a
 * 4096-line one are both flat at 256).
 *
 * Clustering (the paper's online scheme): a window joins the stored phase
 * it is most similar to if that similarity reaches the threshold (default
 * 0.8), and the phase's representative (the running mean of its windows)
 * takes it in. Otherwise it is phase 0, a transition, and it joins (or
 * starts) a candidate the same way; a candidate seen transition_threshold
 * times (default 2) becomes a new phase, from that window on.
 */
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "sampler/phase_sig.h" /* the code hash and the norm, shared with the online detection */

#define CODE_BUCKETS PHASE_CODE_BUCKETS
#define MAX_CANDIDATES 64

typedef struct sig {
	double *data; /* sum of the counts of k windows, nbuckets */
	double code[CODE_BUCKETS];
	double k;      /* windows summed */
	double u;      /* sum of the k windows' distinct lines, estimated */
	uint64_t seen; /* times matched (candidates) */
	uint64_t windows, refs;
} sig;

/* Estimated squared norm of the rates behind a sum v of k windows' counts
 * (phase_rate_norm2). */
static double rate_norm2(const double *v, size_t n, double k)
{
	double s = 0.0, s2 = 0.0;
	for (size_t i = 0; i < n; i++) {
		s += v[i];
		s2 += v[i] * v[i];
	}
	return phase_rate_norm2(s, s2, k, (uint32_t)n);
}

static double cosine(const double *a, double ka, const double *b, double kb, size_t n)
{
	double dot = 0.0, na, nb, c;
	for (size_t i = 0; i < n; i++)
		dot += a[i] * b[i];
	dot /= ka * kb;
	na = rate_norm2(a, n, ka);
	nb = rate_norm2(b, n, kb);
	if (!(na > 0.0) || !(nb > 0.0))
		return 0.0;
	c = dot / sqrt(na * nb);
	return c < 0.0 ? 0.0 : c > 1.0 ? 1.0 : c;
}

/* Buckets at least, for a folded comparison; fewer say too little of the sets used. */
#define FOLD_MIN 16

/* The resolution two signatures compare at: see the top of the file. */
static size_t fold_of(const sig *a, const sig *b, size_t nb)
{
	double u = a->u / a->k < b->u / b->k ? a->u / a->k : b->u / b->k;
	size_t f = FOLD_MIN;
	if (!(u < (double)nb) || u < FOLD_MIN || nb % FOLD_MIN)
		return nb;
	while (2 * f <= u && nb % (2 * f) == 0)
		f *= 2;
	return f;
}

/* v (nb buckets) folded onto nf: bucket b onto b mod nf. */
static const double *fold(const double *v, size_t nb, size_t nf, double *tmp)
{
	if (nf == nb)
		return v;
	memset(tmp, 0, nf * sizeof *tmp);
	for (size_t i = 0; i < nb; i++)
		tmp[i % nf] += v[i];
	return tmp;
}

/* tmp: 2 nb scratch doubles. */
static double similarity(const sig *a, const sig *b, size_t nb, bool code, double *tmp)
{
	size_t nf = code ? fold_of(a, b, nb) : nb;
	double d =
	    cosine(fold(a->data, nb, nf, tmp), a->k, fold(b->data, nb, nf, tmp + nb), b->k, nf);
	if (!code)
		return d;
	return 0.5 * (d + cosine(a->code, a->k, b->code, b->k, CODE_BUCKETS));
}

static void sig_add(sig *dst, const sig *w, size_t nb)
{
	for (size_t i = 0; i < nb; i++)
		dst->data[i] += w->data[i];
	for (size_t i = 0; i < CODE_BUCKETS; i++)
		dst->code[i] += w->code[i];
	dst->k += 1.0;
	dst->u += w->u;
	dst->windows++;
	dst->refs += w->refs;
}

/* The index of the most similar of n signatures, -1 if none reaches threshold. */
static long best_match(const sig *set, size_t n, const sig *w, size_t nb, bool code, double thr,
                       double *tmp)
{
	long best = -1;
	double bs = -1.0;
	for (size_t i = 0; i < n; i++) {
		double s = similarity(&set[i], w, nb, code, tmp);
		if (s >= thr && s > bs) {
			bs = s;
			best = (long)i;
		}
	}
	return best;
}

static void sigs_free(sig *s, size_t n)
{
	for (size_t i = 0; s && i < n; i++)
		free(s[i].data);
	free(s);
}

lomas_status lomas_profile_phases(const lomas_profile *p, uint32_t buckets, double threshold,
                                  unsigned transition_threshold, uint32_t *window_phase,
                                  size_t nwindows, lomas_phase_info *phases, size_t cap,
                                  size_t *nphases)
{
	error_clear();
	sig *win = NULL, *ph = NULL, *cand = NULL, trans;
	double *tmp = NULL;
	size_t nw, nph = 0, ncand = 0;
	bool code = false;
	lomas_status st = LOMAS_OK;
	memset(&trans, 0, sizeof trans);
	if (!p || !nphases || (cap > 0 && !phases))
		return error_set(LOMAS_EINVAL, "lomas_profile_phases: NULL argument");
	nw = p->windows.n;
	if (nwindows < nw || (nw > 0 && !window_phase))
		return error_set(LOMAS_EINVAL,
		                 "lomas_profile_phases: window_phase holds %zu entries, the "
		                 "profile has %zu windows",
		                 nwindows, nw);
	if (buckets == 0)
		buckets = 1024;
	if (buckets > (1u << 24))
		return error_set(LOMAS_EINVAL, "lomas_profile_phases: %u buckets (at most 2^24)",
		                 buckets);
	if (threshold == 0.0)
		threshold = 0.8;
	if (!(threshold > 0.0 && threshold <= 1.0))
		return error_set(LOMAS_EINVAL, "lomas_profile_phases: threshold %g not in (0, 1]",
		                 threshold);
	if (transition_threshold == 0)
		transition_threshold = 2;
	/* One signature per window, from the samples that started in it. */
	win = calloc(nw ? nw : 1, sizeof *win);
	ph = calloc(nw + 1, sizeof *ph);
	cand = calloc(MAX_CANDIDATES, sizeof *cand);
	trans.data = calloc(buckets, sizeof *trans.data);
	tmp = malloc(2 * (size_t)buckets * sizeof *tmp);
	if (!win || !ph || !cand || !trans.data || !tmp)
		goto nomem;
	for (size_t i = 0; i < nw; i++) {
		if (!(win[i].data = calloc(buckets, sizeof *win[i].data)))
			goto nomem;
		win[i].k = 1.0;
		win[i].windows = 1;
		win[i].refs = p->windows.items[i].refs;
	}
	for (size_t i = 0; i < p->samples.n; i++) {
		const lomas_sample *s = &p->samples.items[i];
		const lomas_window *w;
		if (s->window >= nw)
			continue;
		w = &p->windows.items[s->window];
		win[s->window].data[(s->addr / p->line_size) % buckets] += 1.0;
		/* Its line's last touch in the window: one of the window's distinct lines. */
		if (s->state != LOMAS_SAMPLE_REUSED || s->end >= w->start + w->refs)
			win[s->window].u += s->weight > 0.0 ? s->weight : 0.0;
		if (s->start_pc) {
			win[s->window].code[phase_code_bucket(s->start_pc)] += 1.0;
			code = true;
		}
	}
	/* Phase 0 (transitions) is ph[0]; ids 1.. follow. */
	ph[0] = trans;
	trans.data = NULL;
	nph = 1;
	for (size_t i = 0; i < nw; i++) {
		long m;
		window_phase[i] = 0;
		if (win[i].refs == 0 || rate_norm2(win[i].data, buckets, 1.0) <= 0.0) {
			sig_add(&ph[0], &win[i], buckets); /* no samples: nothing to match */
			continue;
		}
		m = best_match(ph + 1, nph - 1, &win[i], buckets, code, threshold, tmp);
		if (m >= 0) {
			window_phase[i] = (uint32_t)(m + 1);
			sig_add(&ph[m + 1], &win[i], buckets);
			continue;
		}
		m = best_match(cand, ncand, &win[i], buckets, code, threshold, tmp);
		if (m < 0) {
			/* A new candidate; the oldest goes when there is no room. */
			if (ncand == MAX_CANDIDATES) {
				free(cand[0].data);
				memmove(cand, cand + 1, (MAX_CANDIDATES - 1) * sizeof *cand);
				ncand--;
			}
			memset(&cand[ncand], 0, sizeof cand[ncand]);
			if (!(cand[ncand].data = calloc(buckets, sizeof *cand[ncand].data)))
				goto nomem;
			m = (long)ncand++;
		}
		sig_add(&cand[m], &win[i], buckets);
		if (++cand[m].seen >= transition_threshold) {
			/* Promoted: this window is the phase's first; earlier ones stay
			 * transitions. */
			sig *c = &cand[m];
			window_phase[i] = (uint32_t)nph;
			ph[nph] = *c;
			ph[nph].windows = 1;
			ph[nph].refs = win[i].refs;
			memmove(c, c + 1, (ncand - (size_t)m - 1) * sizeof *c);
			ncand--;
			nph++;
		} else {
			sig_add(&ph[0], &win[i], buckets);
		}
	}
	*nphases = nph;
	for (size_t k = 0; k < nph && k < cap; k++) {
		uint32_t demand = 0;
		/* The promoted candidate's windows before promotion count in phase 0;
		 * its signature keeps them (they are the same behaviour). */
		for (uint32_t b = 0; b < buckets; b++)
			demand += ph[k].data[b] > 0.0;
		phases[k].phase = (uint32_t)k;
		phases[k].reserved = 0;
		phases[k].windows = ph[k].windows;
		phases[k].refs = ph[k].refs;
		phases[k].demand = demand;
	}
	goto out;
nomem:
	st = error_set(LOMAS_ENOMEM, "out of memory");
out:
	sigs_free(win, nw);
	sigs_free(ph, nph);
	sigs_free(cand, ncand);
	free(trans.data);
	free(tmp);
	return st;
}

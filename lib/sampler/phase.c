/*
 * Phase-guided sampling (docs/architecture.md; the model: docs/model.md): the in-process clocks
 * recognise the running program's phase online, with the signatures and the
 * clustering of the offline phase detection (lib/model/phases.c), and lower
 * the sampling rate inside a phase that already has enough samples.
 *
 * Per running window (the sampler's window: 256 x the mean period, or the
 * window asked for), a data signature (PHASE_BUCKETS buckets: the set index
 * of each sampled line, line mod PHASE_BUCKETS, counted) and a code
 * signature (the sampled pc hashed into PHASE_CODE_BUCKETS buckets, with
 * phases.c's hash: phase_sig.h). Similarity is the mean of the two noise-corrected
 * cosines (see phases.c: the window's Poisson noise is taken off the norms).
 * When a sample starts in a new window, the window that ended joins the most
 * similar stored phase at or above PHASE_THRESHOLD, and that phase counts
 * its samples; else it is a transition and joins (or starts) a candidate,
 * which becomes a phase once seen PHASE_TRANSITION times.
 *
 * The rate decision: while the last window's phase holds at least
 * min_samples samples, the period is multiplied by 2^shift (the level of the
 * samples taken rises by shift, so each weighs 2^shift times more: the
 * profile's per-sample weight is base period x 2^level, no new field). The
 * decision is taken from the past only, and the gaps are exponential
 * (memoryless), so every reference is sampled with the probability its
 * sample's weight says: Horvitz-Thompson, the model stays unbiased whatever
 * the phase guess; a wrong guess costs variance, not bias.
 *
 * No libc but memset and no libm (the dbi tool has neither): the square
 * root is Newton's.
 */
#include <string.h>

#include "sampler.h"

/* A representative stops growing at this many windows (then it halves):
 * sums stay exact in a float and the phase follows slow drift. */
#define PHASE_K_MAX 64.0f

/* sqrt(x) for x >= 0 by Newton's iteration from the exponent halved. */
static double newton_sqrt(double x)
{
	double r = 1.0;
	if (!(x > 0.0))
		return 0.0;
	/* Bring r within a factor of 2 of the root: 2^(e/2) for x = m 2^e. */
	for (double y = x; y >= 4.0; y *= 0.25)
		r *= 2.0;
	for (double y = x; y < 0.25; y *= 4.0)
		r *= 0.5;
	for (int i = 0; i < 8; i++)
		r = 0.5 * (r + x / r);
	return r;
}

/* Estimated squared norm of the rates behind a sum v of k windows' counts
 * (phase_rate_norm2, phase_sig.h: the Poisson noise taken off, floored at
 * the flattest distribution with that many counts). */
static double rate_norm2(const float *v, uint32_t n, double k)
{
	double s = 0.0, s2 = 0.0;
	for (uint32_t i = 0; i < n; i++) {
		s += v[i];
		s2 += (double)v[i] * v[i];
	}
	return phase_rate_norm2(s, s2, k, n);
}

static double cosine(const float *a, double ka, const float *b, double kb, uint32_t n)
{
	double dot = 0.0, na, nb, c;
	for (uint32_t i = 0; i < n; i++)
		dot += (double)a[i] * b[i];
	dot /= ka * kb;
	na = rate_norm2(a, n, ka);
	nb = rate_norm2(b, n, kb);
	if (!(na > 0.0) || !(nb > 0.0))
		return 0.0;
	c = dot / newton_sqrt(na * nb);
	return c < 0.0 ? 0.0 : c > 1.0 ? 1.0 : c;
}

double phase_similarity(const phase_sig *a, const phase_sig *b)
{
	double d = cosine(a->data, a->k, b->data, b->k, PHASE_BUCKETS);
	/* A profile without pcs compares data alone (phases.c). */
	if (a->code_seen == 0 || b->code_seen == 0)
		return d;
	return 0.5 * (d + cosine(a->code, a->k, b->code, b->k, PHASE_CODE_BUCKETS));
}

/* The index of the most similar of n signatures, -1 if none reaches the threshold. */
static int best_match(const phase_sig *set, uint32_t n, const phase_sig *w)
{
	int best = -1;
	double bs = -1.0;
	for (uint32_t i = 0; i < n; i++) {
		double s = phase_similarity(&set[i], w);
		if (s >= PHASE_THRESHOLD && s > bs) {
			bs = s;
			best = (int)i;
		}
	}
	return best;
}

/* dst takes in the window w (its representative: the sum of its windows). */
static void sig_add(phase_sig *dst, const phase_sig *w)
{
	if (dst->k >= PHASE_K_MAX) {
		for (uint32_t i = 0; i < PHASE_BUCKETS; i++)
			dst->data[i] *= 0.5f;
		for (uint32_t i = 0; i < PHASE_CODE_BUCKETS; i++)
			dst->code[i] *= 0.5f;
		dst->k *= 0.5f;
	}
	for (uint32_t i = 0; i < PHASE_BUCKETS; i++)
		dst->data[i] += w->data[i];
	for (uint32_t i = 0; i < PHASE_CODE_BUCKETS; i++)
		dst->code[i] += w->code[i];
	dst->k += 1.0f;
	dst->samples += w->samples;
	dst->code_seen += w->code_seen;
}

void phase_tracker_init(phase_tracker *pt, const phase_settings *s)
{
	memset(pt, 0, sizeof *pt);
	pt->set = *s;
	if (pt->set.min_samples == 0)
		pt->set.min_samples = PHASE_DEFAULT_SAMPLES;
	if (pt->set.shift == 0 || pt->set.shift > PHASE_MAX_SHIFT)
		pt->set.shift = PHASE_DEFAULT_SHIFT;
	pt->win.k = 1.0f;
}

void phase_add(phase_tracker *pt, uint64_t line, uint64_t pc)
{
	pt->win.data[line % PHASE_BUCKETS] += 1.0f;
	if (pc) {
		pt->win.code[phase_code_bucket(pc)] += 1.0f;
		pt->win.code_seen++;
	}
	pt->win.samples++;
}

uint32_t phase_close(phase_tracker *pt)
{
	phase_sig *w = &pt->win;
	uint32_t id = 0;
	int m;
	pt->windows++;
	if (w->samples == 0)
		goto out; /* nothing to match (phases.c: phase 0) */
	if ((m = best_match(pt->phases, pt->nphases, w)) >= 0) {
		id = (uint32_t)m + 1;
		sig_add(&pt->phases[m], w);
		goto out;
	}
	if ((m = best_match(pt->cand, pt->ncand, w)) < 0) {
		/* A new candidate; the oldest goes when there is no room. */
		if (pt->ncand == PHASE_CANDIDATES) {
			memmove(pt->cand, pt->cand + 1, (PHASE_CANDIDATES - 1) * sizeof *pt->cand);
			pt->ncand--;
		}
		memset(&pt->cand[pt->ncand], 0, sizeof pt->cand[pt->ncand]);
		m = (int)pt->ncand++;
	}
	sig_add(&pt->cand[m], w);
	if (++pt->cand[m].seen >= PHASE_TRANSITION && pt->nphases < PHASE_MAX) {
		/* Promoted: a phase from this window on, with the samples its
		 * windows have (they are the same behaviour). */
		id = pt->nphases + 1;
		pt->phases[pt->nphases++] = pt->cand[m];
		memmove(&pt->cand[m], &pt->cand[m + 1],
		        (pt->ncand - (uint32_t)m - 1) * sizeof *pt->cand);
		pt->ncand--;
	}
out:
	memset(w, 0, sizeof *w);
	w->k = 1.0f;
	pt->current = id;
	return id;
}

unsigned phase_shift(const phase_tracker *pt)
{
	if (pt->current == 0 || pt->phases[pt->current - 1].samples < pt->set.min_samples)
		return 0;
	return pt->set.shift;
}

bool phase_on_sample(phase_tracker *pt, uint64_t clock, uint64_t window_refs, uint64_t line,
                     uint64_t pc)
{
	unsigned was = pt->shift_now;
	if (window_refs == 0)
		window_refs = 1;
	if (clock >= pt->window_end) {
		/* The windows in between (if any) had no sample: nothing to match. */
		if (pt->window_end)
			phase_close(pt);
		pt->window_end = (clock / window_refs + 1) * window_refs;
		pt->shift_now = (uint8_t)phase_shift(pt);
		if (pt->shift_now)
			pt->reduced_windows++;
	}
	phase_add(pt, line, pc);
	/* This sample was drawn at the rate in force before the decision. */
	pt->samples++;
	if (was)
		pt->reduced_samples++;
	return pt->shift_now != was;
}

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
 * Three rules keep the savings on real runs (docs/model.md, "Phase-guided
 * sampling"; measured on the phases workload under the dbi clock, where
 * MALLOC_PERTURB_'s memset and the environment's size move the phase
 * boundaries off the window grid):
 *  - count-aware leniency: a window that matches no phase at the threshold
 *    stays in the last phase if its similarity reaches the threshold less
 *    PHASE_NOISE / sqrt(its samples) (a window of 64 samples at the lower
 *    rate falls under 0.8 by noise alone); its samples count there, its
 *    signature is left out;
 *  - mixtures: a window that straddles the boundary of the last phase and
 *    another (its nearest non-negative mixture of the two reaches that
 *    lenient threshold) is a transition of known behaviour: no candidate
 *    (so never a phase of its own), and the rate stays low when both have
 *    their samples. Neither lenient rule applies to two windows in a row:
 *    a new behaviour is judged at the full threshold by its second window;
 *  - early return: at the lower rate, PHASE_FOREIGN_RUN samples in a row by
 *    pcs outside the main code buckets of the phases that have their samples
 *    bring the full rate back at once, not at the window's end; and a phase
 *    whose full-rate windows fell PHASE_TRIES times on another phase (it is
 *    shorter than the decision's one-window lag) stops asking for them.
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

/* The lenient threshold for a window of n samples: the threshold less the
 * noise of a cosine of so few samples, PHASE_NOISE / sqrt(n) (at most
 * PHASE_NOISE_MAX): 0.6 at 64 samples (the lower rate's window), 0.75 at
 * 1024 (the full rate's). */
static double lenient_threshold(uint64_t n)
{
	double m = n ? PHASE_NOISE / newton_sqrt((double)n) : PHASE_NOISE_MAX;
	return PHASE_THRESHOLD - (m < PHASE_NOISE_MAX ? m : PHASE_NOISE_MAX);
}

static double dot(const float *a, const float *b, uint32_t n)
{
	double d = 0.0;
	for (uint32_t i = 0; i < n; i++)
		d += (double)a[i] * b[i];
	return d;
}

/*
 * The cosine of a window w (k = 1) with the nearest non-negative mixture
 * x a + y b of two representatives' rates (a, b: sums of ka, kb windows),
 * norms noise-corrected as in cosine(). With G = [|a|^2, a.b; a.b, |b|^2]
 * and r = (w.a, w.b), the nearest vector of the plane gives cos^2 =
 * r' G^-1 r / |w|^2; when its x or y is negative, the nearest mixture is a
 * or b alone.
 */
static double mixture_cosine(const float *w, const float *a, double ka, const float *b, double kb,
                             uint32_t n)
{
	double nw = rate_norm2(w, n, 1.0), na = rate_norm2(a, n, ka), nb = rate_norm2(b, n, kb);
	double ab = dot(a, b, n) / (ka * kb), wa = dot(w, a, n) / ka, wb = dot(w, b, n) / kb;
	double det = na * nb - ab * ab, c2 = 0.0, x, y;
	if (!(nw > 0.0) || !(na > 0.0) || !(nb > 0.0))
		return 0.0;
	x = (nb * wa - ab * wb), y = (na * wb - ab * wa); /* G^-1 r, times det */
	if (det > 1e-9 * na * nb && x >= 0.0 && y >= 0.0)
		c2 = (wa * x + wb * y) / det / nw;
	else {
		double ca = wa > 0.0 ? wa * wa / na / nw : 0.0,
		       cb = wb > 0.0 ? wb * wb / nb / nw : 0.0;
		c2 = ca > cb ? ca : cb;
	}
	return c2 >= 1.0 ? 1.0 : c2 > 0.0 ? newton_sqrt(c2) : 0.0;
}

/* Similarity of the window w with the nearest mixture of phases a and b:
 * data and code as phase_similarity. */
static double mixture_similarity(const phase_sig *w, const phase_sig *a, const phase_sig *b)
{
	double d = mixture_cosine(w->data, a->data, a->k, b->data, b->k, PHASE_BUCKETS);
	if (w->code_seen == 0 || a->code_seen == 0 || b->code_seen == 0)
		return d;
	return 0.5 *
	       (d + mixture_cosine(w->code, a->code, a->k, b->code, b->k, PHASE_CODE_BUCKETS));
}

/* Phase id has its samples, or has stopped asking for them (PHASE_TRIES). */
static bool sampled(const phase_tracker *pt, uint32_t id)
{
	const phase_sig *p;
	if (id == 0)
		return false;
	p = &pt->phases[id - 1];
	return p->samples >= pt->set.min_samples || p->misses >= PHASE_TRIES;
}

/* The code buckets the phases that have their samples use, each at least
 * PHASE_KNOWN_RATIO of that phase's busiest bucket. Relative, not absolute:
 * a phase of many pcs knows them all, and a phase that began with a window
 * straddling another behaviour (the first windows of the phases workload's
 * rounds: 17 % of a phase's samples by the other loop's pc) does not count
 * that behaviour's pc as its own, so the other behaviour, while it has no
 * sampled phase, still brings the full rate back. */
static uint32_t known_code(const phase_tracker *pt)
{
	uint32_t mask = 0;
	for (uint32_t i = 0; i < pt->nphases; i++) {
		const phase_sig *p = &pt->phases[i];
		float top = 0.0f;
		if (!sampled(pt, i + 1))
			continue;
		for (uint32_t b = 0; b < PHASE_CODE_BUCKETS; b++)
			top = p->code[b] > top ? p->code[b] : top;
		for (uint32_t b = 0; b < PHASE_CODE_BUCKETS; b++)
			if (p->code[b] > 0.0f && p->code[b] >= PHASE_KNOWN_RATIO * top)
				mask |= 1u << b;
	}
	return mask;
}

uint32_t phase_close(phase_tracker *pt)
{
	phase_sig *w = &pt->win;
	uint32_t id = 0, last = pt->last;
	bool mixed = false, lenient_ok = !pt->lenient;
	int m;
	pt->windows++;
	pt->lenient = false;
	if (w->samples == 0)
		goto out; /* nothing to match (phases.c: phase 0) */
	if ((m = best_match(pt->phases, pt->nphases, w)) >= 0) {
		id = (uint32_t)m + 1;
		sig_add(&pt->phases[m], w);
		goto out;
	}
	if (last && lenient_ok) {
		/* Not significantly unlike the last phase for its sample count: it
		 * stays there (its samples count, its signature is left out). */
		double thr = lenient_threshold(w->samples);
		phase_sig *lp = &pt->phases[last - 1];
		if (phase_similarity(lp, w) >= thr) {
			id = last;
			lp->samples += w->samples;
			pt->stayed++;
			pt->lenient = true;
			goto out;
		}
		/* A window across the boundary of the last phase and another:
		 * a transition, but of known behaviour, and no candidate. */
		for (uint32_t j = 0; j < pt->nphases; j++)
			if (j + 1 != last && mixture_similarity(w, lp, &pt->phases[j]) >= thr) {
				mixed = sampled(pt, last) && sampled(pt, j + 1);
				pt->mixtures++;
				pt->lenient = true;
				goto out;
			}
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
	/* The last window's phase asked for this window at the full rate for
	 * its samples, and this window is not in it: a miss. */
	if (pt->current && pt->current != id && pt->shift_now == 0 && !sampled(pt, pt->current))
		pt->phases[pt->current - 1].misses++;
	memset(w, 0, sizeof *w);
	w->k = 1.0f;
	pt->current = id;
	pt->mixed = mixed;
	if (id)
		pt->last = id;
	pt->known_code = known_code(pt);
	return id;
}

unsigned phase_shift(const phase_tracker *pt)
{
	if (pt->current == 0)
		return pt->mixed ? pt->set.shift : 0;
	return sampled(pt, pt->current) ? pt->set.shift : 0;
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
	/* At the lower rate, PHASE_FOREIGN_RUN samples in a row by code that
	 * no sampled phase runs: a new behaviour has begun, the full rate
	 * comes back now rather than at the window's end (decided from past
	 * samples only, as the window's decision: unbiased all the same). */
	if (pc && pt->shift_now) {
		if (pt->known_code >> phase_code_bucket(pc) & 1u)
			pt->foreign_run = 0;
		else if (++pt->foreign_run >= PHASE_FOREIGN_RUN) {
			pt->shift_now = 0;
			pt->foreign_run = 0;
			pt->returns++;
		}
	}
	return pt->shift_now != was;
}

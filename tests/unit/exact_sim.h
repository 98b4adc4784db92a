/*
 * Ground truth for the model tests, independent of liblomas: a splitmix64
 * generator, exact fully associative LRU (stack distances with a Fenwick
 * tree) and random replacement (direct simulation), exact forward reuse,
 * and a sampler that records a profile the way the trace clock would
 * (each reference sampled with probability 1/period, windows of 256 x
 * period references). Traces are dense line ids. Header-only (static
 * functions) for the test programs that include it.
 */
#ifndef LOMAS_TEST_EXACT_SIM_H
#define LOMAS_TEST_EXACT_SIM_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

#define SIM_LINE 64

static inline uint64_t sm_next(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static inline uint64_t sm_below(uint64_t *x, uint64_t n)
{
	return (uint64_t)(((unsigned __int128)sm_next(x) * n) >> 64);
}

static inline double sm_unit(uint64_t *x) /* (0, 1] */
{
	return ((double)(sm_next(x) >> 11) + 1.0) * 0x1.0p-53;
}

/* A growable trace of line ids; k is one more than the largest id. */
typedef struct sim_trace {
	uint32_t *t;
	size_t n, cap;
	uint32_t k;
} sim_trace;

static inline void sim_push(sim_trace *tr, uint32_t id)
{
	if (tr->n == tr->cap) {
		tr->cap = tr->cap ? 2 * tr->cap : 1 << 16;
		tr->t = realloc(tr->t, tr->cap * sizeof *tr->t);
		if (!tr->t)
			abort();
	}
	tr->t[tr->n++] = id;
	if (id + 1 > tr->k)
		tr->k = id + 1;
}

/*
 * LRU stack-distance histogram: hist[d] references with d distinct lines
 * since their line's previous touch (k + 1 entries); *cold = first touches.
 */
static inline uint64_t *sim_lru_hist(const sim_trace *tr, uint64_t *cold)
{
	size_t n = tr->n;
	int64_t *last = malloc(tr->k * sizeof *last);
	int32_t *fen = calloc(n + 1, sizeof *fen);
	uint64_t *hist = calloc((size_t)tr->k + 1, sizeof *hist);
	if (!last || !fen || !hist)
		abort();
	for (uint32_t i = 0; i < tr->k; i++)
		last[i] = -1;
	*cold = 0;
	for (size_t i = 0; i < n; i++) {
		uint32_t id = tr->t[i];
		if (last[id] < 0) {
			(*cold)++;
		} else {
			int64_t c = 0;
			for (size_t j = i; j > 0; j -= j & -j)
				c += fen[j];
			for (size_t j = (size_t)last[id] + 1; j > 0; j -= j & -j)
				c -= fen[j];
			hist[c]++;
			for (size_t j = (size_t)last[id] + 1; j <= n; j += j & -j)
				fen[j]--;
		}
		for (size_t j = i + 1; j <= n; j += j & -j)
			fen[j]++;
		last[id] = (int64_t)i;
	}
	free(last);
	free(fen);
	return hist;
}

/* Non-cold LRU misses of a cache of `lines` from the histogram. */
static inline double sim_lru_misses(const uint64_t *hist, uint32_t k, uint64_t lines)
{
	uint64_t m = 0;
	for (uint64_t d = lines; d < k; d++)
		m += hist[d];
	return (double)m;
}

/*
 * Non-cold misses of a random-replacement cache of `lines`, simulated; with
 * tag (one byte per reference), each miss is also added to by_tag[tag[i]] (the
 * misses of each instruction).
 */
static inline double sim_random_misses_by(const sim_trace *tr, uint64_t lines, uint64_t seed,
                                          const uint8_t *tag, double *by_tag)
{
	int32_t *slot_of = malloc(tr->k * sizeof *slot_of);
	uint32_t *slots = malloc(lines * sizeof *slots);
	uint8_t *seen = calloc(tr->k, 1);
	uint64_t used = 0, misses = 0, x = seed;
	if (!slot_of || !slots || !seen)
		abort();
	memset(slot_of, 0xff, tr->k * sizeof *slot_of);
	for (size_t i = 0; i < tr->n; i++) {
		uint32_t id = tr->t[i];
		if (slot_of[id] >= 0)
			continue;
		misses += seen[id];
		if (tag)
			by_tag[tag[i]] += seen[id];
		seen[id] = 1;
		if (used < lines) {
			slots[used] = id;
			slot_of[id] = (int32_t)used++;
		} else {
			uint64_t v = sm_below(&x, lines);
			slot_of[slots[v]] = -1;
			slots[v] = id;
			slot_of[id] = (int32_t)v;
		}
	}
	free(slot_of);
	free(slots);
	free(seen);
	return (double)misses;
}

/* Non-cold misses of a random-replacement cache of `lines`, simulated. */
static inline double sim_random_misses(const sim_trace *tr, uint64_t lines, uint64_t seed)
{
	return sim_random_misses_by(tr, lines, seed, NULL, NULL);
}

/* Distinct lines of a trace (its footprint). */
static inline uint32_t sim_footprint(const sim_trace *tr)
{
	uint8_t *seen = calloc(tr->k, 1);
	uint32_t f = 0;
	if (!seen)
		abort();
	for (size_t i = 0; i < tr->n; i++) {
		f += !seen[tr->t[i]];
		seen[tr->t[i]] = 1;
	}
	free(seen);
	return f;
}

/* next[i]: the index of the next reference to tr->t[i]'s line, UINT32_MAX if none (malloc'd). */
static inline uint32_t *sim_next_uses(const sim_trace *tr)
{
	uint32_t *next = malloc((tr->n ? tr->n : 1) * sizeof *next);
	uint32_t *last = malloc(tr->k * sizeof *last);
	if (!next || !last)
		abort();
	memset(last, 0xff, tr->k * sizeof *last);
	for (size_t i = tr->n; i-- > 0;) {
		next[i] = last[tr->t[i]];
		last[tr->t[i]] = (uint32_t)i;
	}
	free(last);
	return next;
}

/* Thread th's windows of wlen references over n, from the profile's next window index. */
static inline void sim_add_windows(lomas_profile *p, uint32_t th, uint64_t n, uint64_t wlen)
{
	for (uint64_t s = 0; s < n; s += wlen) {
		lomas_window w = {.start = s, .refs = n - s < wlen ? n - s : wlen, .thread = th};
		if (profile_add_window(p, &w))
			abort();
	}
}

/* The sample of reference i of thread th (exact forward reuse from next), window unset. */
static inline lomas_sample sim_sample_at(const sim_trace *tr, const uint32_t *next, uint64_t i,
                                         uint32_t th, double weight, const uint64_t *pc_of)
{
	lomas_sample s;
	memset(&s, 0, sizeof s);
	s.start = i;
	s.addr = (uint64_t)tr->t[i] * SIM_LINE;
	s.start_pc = pc_of ? pc_of[i] : 0;
	s.weight = weight;
	s.thread = th;
	if (next[i] != UINT32_MAX) {
		s.state = LOMAS_SAMPLE_REUSED;
		s.end = next[i];
		s.end_pc = pc_of ? pc_of[next[i]] : 0;
	} else {
		s.state = LOMAS_SAMPLE_DANGLING;
		s.end = LOMAS_CLOCK_NONE;
	}
	return s;
}

/*
 * Add thread th's trace to profile p as the trace clock would record it:
 * windows of 256 x period references, each reference sampled with
 * probability 1/period (geometric gaps from seed), exact forward reuse.
 * pc_of (may be NULL) gives each reference's instruction. Returns the
 * number of samples.
 */
static inline size_t sim_sample(lomas_profile *p, uint32_t th, const sim_trace *tr, double period,
                                uint64_t seed, const uint64_t *pc_of)
{
	lomas_thread thr = {.tid = th + 1, .refs = tr->n};
	uint64_t wlen = (uint64_t)(256 * period), x = seed, w0 = p->windows.n;
	uint32_t *next = sim_next_uses(tr);
	double lq = log1p(-1.0 / period);
	size_t ns = 0;
	if (profile_add_thread(p, &thr))
		abort();
	sim_add_windows(p, th, tr->n, wlen);
	for (uint64_t i = period <= 1.0 ? 0 : (uint64_t)floor(log(sm_unit(&x)) / lq); i < tr->n;
	     i += period <= 1.0 ? 1 : (uint64_t)floor(log(sm_unit(&x)) / lq) + 1) {
		lomas_sample s =
		    sim_sample_at(tr, next, i, th, period <= 1.0 ? 1.0 : period, pc_of);
		s.window = (uint32_t)(w0 + i / wlen);
		if (profile_add_sample(p, &s))
			abort();
		ns++;
	}
	free(next);
	return ns;
}

/*
 * Add thread th's trace to p as period auto records it (lib/sampler): the
 * period starts at period0 and doubles after the first `first` samples, then
 * every `step` samples; each sample weighs the period it was taken at; the
 * windows are 256 x the mean period long (refs / samples), so the early
 * windows hold many more samples than the late ones. Returns the samples.
 */
static inline size_t sim_sample_rising(lomas_profile *p, uint32_t th, const sim_trace *tr,
                                       double period0, size_t first, size_t step, uint64_t seed)
{
	lomas_thread thr = {.tid = th + 1, .refs = tr->n};
	uint64_t x = seed, w0 = p->windows.n, wlen;
	uint32_t *next = sim_next_uses(tr);
	lomas_sample *ss = malloc((tr->n ? tr->n : 1) * sizeof *ss);
	double period = period0;
	size_t ns = 0;
	if (!ss || profile_add_thread(p, &thr))
		abort();
	for (uint64_t i = (uint64_t)floor(log(sm_unit(&x)) / log1p(-1.0 / period)); i < tr->n;) {
		ss[ns++] = sim_sample_at(tr, next, i, th, period, NULL);
		if (ns == first || (ns > first && (ns - first) % step == 0))
			period *= 2; /* sampling is memoryless: the next gap at the new rate */
		i += (uint64_t)floor(log(sm_unit(&x)) / log1p(-1.0 / period)) + 1;
	}
	wlen = (uint64_t)(256.0 * (double)tr->n / (double)(ns ? ns : 1));
	sim_add_windows(p, th, tr->n, wlen);
	for (size_t k = 0; k < ns; k++) {
		ss[k].window = (uint32_t)(w0 + ss[k].start / wlen);
		if (profile_add_sample(p, &ss[k]))
			abort();
	}
	free(ss);
	free(next);
	return ns;
}

/* The default sizes from 4 KiB to 64 MiB (57 of them): bytes and lines. */
static inline size_t sim_sizes(uint64_t *bytes, uint64_t *lines)
{
	size_t n = 0;
	for (int k = 8; k <= 64; k++) {
		double l = floor(exp2(10.0 + k / 4.0) / SIM_LINE + 0.5);
		bytes[n] = (uint64_t)l * SIM_LINE;
		lines[n++] = (uint64_t)l;
	}
	return n;
}

#endif

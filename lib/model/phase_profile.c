/*
 * The profile of one phase: the windows lomas_profile_phases gave that
 * phase and the samples that started in them, as if the program had made
 * only those references (so that the normal model gives the phase's own
 * curve). Each thread's clock is closed up over the windows left out: a
 * clock c in a kept window moves back by the references of the left-out
 * windows before it. A reuse that ends in a left-out window is not a reuse
 * of the phase's own references (another phase touched the line); its next
 * touch within the phase is later than the next kept clock, so it becomes
 * a censored sample ending there (a lower bound, as the format means).
 * Where no kept window of its thread follows (it ends after the phase's
 * last window), nothing of the phase touches the line again: dangling. As
 * censored, an initialisation phase's last touches, reused by the work
 * after it, counted as misses: its curve 12.4 points high at every size.
 */
#include <stdlib.h>
#include <string.h>

#include "model.h"

typedef struct wref {
	uint64_t start, refs, before; /* before: references left out before this window */
	uint32_t thread;
	bool kept;
} wref;

static int wref_cmp(const void *a, const void *b)
{
	const wref *x = a, *y = b;
	if (x->thread != y->thread)
		return x->thread < y->thread ? -1 : 1;
	return x->start < y->start ? -1 : x->start > y->start;
}

/* The closed-up clock of c in thread t (ws sorted by thread, start); *kept: c is in a kept window.
 */
static uint64_t close_up(const wref *ws, size_t n, uint32_t t, uint64_t c, bool *kept)
{
	size_t lo = 0, hi = n;
	/* The last window of thread t starting at or before c. */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (ws[mid].thread < t || (ws[mid].thread == t && ws[mid].start <= c))
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0 || ws[lo - 1].thread != t) {
		*kept = false;
		return 0;
	}
	const wref *w = &ws[lo - 1];
	if (w->kept && c < w->start + w->refs) {
		*kept = true;
		return c - w->before;
	}
	/* Left out (or past the thread's last window): the next kept clock. */
	*kept = false;
	if (c >= w->start + w->refs)
		return w->start + w->refs - w->before - (w->kept ? 0 : w->refs);
	return w->start - w->before;
}

lomas_status lomas_profile_phase_select(const lomas_profile *p, const uint32_t *window_phase,
                                        size_t nwindows, uint32_t phase, lomas_profile **out)
{
	error_clear();
	lomas_profile *q = NULL;
	wref *ws = NULL;
	uint32_t *order = NULL;
	uint64_t *kept_refs = NULL, *last_end = NULL; /* per thread: the last kept window's end */
	size_t nw, nt;
	lomas_status st;
	if (!p || !out || (!window_phase && p->windows.n > 0))
		return error_set(LOMAS_EINVAL, "lomas_profile_phase_select: NULL argument");
	*out = NULL;
	nw = p->windows.n;
	nt = p->threads.n;
	if (nwindows < nw)
		return error_set(LOMAS_EINVAL,
		                 "lomas_profile_phase_select: window_phase holds %zu entries, the "
		                 "profile has %zu windows",
		                 nwindows, nw);
	if ((st = lomas_profile_new(p->line_size, &q)))
		return st;
	ws = malloc((nw ? nw : 1) * sizeof *ws);
	order = malloc((nw ? nw : 1) * sizeof *order);
	kept_refs = calloc(nt ? nt : 1, sizeof *kept_refs);
	last_end = calloc(nt ? nt : 1, sizeof *last_end);
	if (!ws || !order || !kept_refs || !last_end)
		goto nomem;
	for (size_t i = 0; i < nw; i++) {
		const lomas_window *w = &p->windows.items[i];
		ws[i] = (wref){w->start, w->refs, 0, w->thread, window_phase[i] == phase};
		if (window_phase[i] == phase && w->thread < nt &&
		    w->start + w->refs > last_end[w->thread])
			last_end[w->thread] = w->start + w->refs;
	}
	qsort(ws, nw, sizeof *ws, wref_cmp);
	for (size_t i = 0; i < nw; i++) {
		uint64_t left = i > 0 && ws[i - 1].thread == ws[i].thread
		                    ? ws[i - 1].before + (ws[i - 1].kept ? 0 : ws[i - 1].refs) +
		                          (ws[i].start - ws[i - 1].start - ws[i - 1].refs)
		                    : ws[i].start;
		ws[i].before = left;
	}
	for (size_t t = 0; t < nt; t++) {
		lomas_thread th = p->threads.items[t];
		th.refs = 0;
		if ((st = profile_add_thread(q, &th)))
			goto out;
	}
	/* Kept windows, renumbered in their order in p. */
	for (size_t i = 0, k = 0; i < nw; i++) {
		lomas_window w = p->windows.items[i];
		bool in;
		order[i] = UINT32_MAX;
		if (window_phase[i] != phase)
			continue;
		w.start = close_up(ws, nw, w.thread, w.start, &in);
		if (w.thread < nt)
			kept_refs[w.thread] += w.refs;
		if ((st = profile_add_window(q, &w)))
			goto out;
		order[i] = (uint32_t)k++;
	}
	for (size_t t = 0; t < nt; t++)
		q->threads.items[t].refs = kept_refs[t];
	for (size_t i = 0; i < p->samples.n; i++) {
		lomas_sample s = p->samples.items[i];
		bool in;
		if (s.window >= nw || order[s.window] == UINT32_MAX)
			continue;
		s.window = order[s.window];
		s.start = close_up(ws, nw, s.thread, s.start, &in);
		if (s.state != LOMAS_SAMPLE_DANGLING && s.thread < nt &&
		    s.end >= last_end[s.thread]) {
			s.state = LOMAS_SAMPLE_DANGLING;
			s.end = LOMAS_CLOCK_NONE;
		}
		if (s.state != LOMAS_SAMPLE_DANGLING) {
			s.end = close_up(ws, nw, s.thread, s.end, &in);
			if (!in)
				s.state = LOMAS_SAMPLE_CENSORED;
			if (s.end <= s.start)
				s.end = s.start + 1;
		}
		/* An exact stack distance counts the lines of the whole run in between:
		 * where left-out references were in between, the phase alone has
		 * another, and the estimate decides (exact_sd.c). */
		if ((s.flags & LOMAS_SAMPLE_EXACT_SD) &&
		    (s.state != LOMAS_SAMPLE_REUSED ||
		     s.end - s.start != p->samples.items[i].end - p->samples.items[i].start)) {
			s.flags &= (uint16_t)~LOMAS_SAMPLE_EXACT_SD;
			s.reserved = 0;
		}
		if ((st = profile_add_sample(q, &s)))
			goto out;
	}
	for (size_t i = 0; i < p->meta.n; i++)
		if ((st = lomas_profile_meta_set(q, p->meta.items[i].key, p->meta.items[i].value)))
			goto out;
	for (size_t i = 0; i < p->maps.n; i++)
		if ((st = profile_add_map(q, &p->maps.items[i])))
			goto out;
	error_clear();
	*out = q;
	q = NULL;
	goto out;
nomem:
	st = error_set(LOMAS_ENOMEM, "out of memory");
out:
	lomas_profile_free(q);
	free(ws);
	free(order);
	free(kept_refs);
	free(last_end);
	return st;
}

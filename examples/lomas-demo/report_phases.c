/*
 * lomas-demo report: the phase timeline, a strip of phase ids over each
 * thread's run (lomas_profile_phases with its defaults), and per phase its
 * share of the references and its cache demand (the data signature's
 * non-zero sets of 1024).
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "demo.h"

#define STRIP_W 64    /* columns of the strip */
#define MAX_PHASES 36 /* phases listed (and named 1-9, a-z) */
#define MAX_STRIPS 8  /* threads drawn */

static char phase_char(uint32_t k)
{
	if (k == 0)
		return '.';
	if (k < 10)
		return (char)('0' + k);
	if (k < MAX_PHASES)
		return (char)('a' + k - 10);
	return '+';
}

/* One thread's strip: each column the phase holding most of its references. */
static void print_strip(const lomas_window *w, const uint32_t *wp, size_t nw, uint32_t thread,
                        uint64_t refs, size_t nph)
{
	char strip[STRIP_W + 1];
	uint64_t *share = calloc((size_t)STRIP_W * (nph + 1), sizeof *share);
	if (!share)
		return;
	for (size_t i = 0; i < nw; i++) {
		uint64_t mid;
		int col;
		if (w[i].thread != thread || !w[i].refs)
			continue;
		mid = w[i].start + w[i].refs / 2;
		col = (int)((double)mid / (double)refs * STRIP_W);
		col = col < 0 ? 0 : col >= STRIP_W ? STRIP_W - 1 : col;
		share[(size_t)col * (nph + 1) + (wp[i] < nph ? wp[i] : nph)] += w[i].refs;
	}
	for (int c = 0; c < STRIP_W; c++) {
		size_t best = 0;
		uint64_t most = 0;
		for (size_t k = 0; k <= nph; k++)
			if (share[(size_t)c * (nph + 1) + k] > most) {
				most = share[(size_t)c * (nph + 1) + k];
				best = k;
			}
		strip[c] = most ? phase_char((uint32_t)best) : ' ';
	}
	strip[STRIP_W] = '\0';
	printf("  thread %-4" PRIu32 " |%s|\n", thread, strip);
	free(share);
}

int report_phases(const char *path, const lomas_profile *p)
{
	lomas_profile_info info = LOMAS_PROFILE_INFO_INIT;
	lomas_phase_info ph[MAX_PHASES];
	lomas_window *w = NULL;
	lomas_thread *th = NULL;
	uint32_t *wp = NULL;
	size_t nph = 0, copied, nt;
	lomas_status st;
	int rc = 0;
	if ((st = lomas_profile_info_get(p, &info)))
		return demo_fail_lomas("report", st, "cannot read '%s'", path);
	if (info.windows == 0 || info.samples == 0)
		return 0;
	w = calloc(info.windows, sizeof *w);
	wp = calloc(info.windows, sizeof *wp);
	th = calloc(info.threads ? info.threads : 1, sizeof *th);
	if (!w || !wp || !th) {
		rc = demo_fail("report", "out of memory");
		goto out;
	}
	if ((st = lomas_profile_phases(p, 0, 0, 0, wp, info.windows, ph, MAX_PHASES, &nph)) ||
	    (st = lomas_profile_windows(p, 0, info.windows, w, &copied)) ||
	    (st = lomas_profile_threads(p, 0, info.threads, th, &nt))) {
		rc = demo_fail_lomas("report", st, "cannot find the phases of '%s'", path);
		goto out;
	}
	printf("\nphases (%zu found; '.' a transition; see 'lomas-demo phases'):\n",
	       nph > 0 ? nph - 1 : 0);
	for (size_t t = 0; t < nt && t < MAX_STRIPS; t++)
		if (th[t].refs)
			print_strip(w, wp, copied, (uint32_t)t, th[t].refs, nph);
	if (nt > MAX_STRIPS)
		printf("  (%zu more threads)\n", nt - MAX_STRIPS);
	for (size_t k = 0; k < nph && k < MAX_PHASES; k++)
		printf("  %c %-10s %6" PRIu64 " windows %6.1f%% of references, demand %" PRIu32
		       " of 1024 sets\n",
		       phase_char((uint32_t)k), k ? "phase" : "transition", ph[k].windows,
		       info.refs ? 100.0 * (double)ph[k].refs / (double)info.refs : 0.0,
		       ph[k].demand);
out:
	free(w);
	free(wp);
	free(th);
	return rc;
}

/*
 * Replays a full-rate profile's samples through the online phase tracker
 * (lib/sampler/phase.c) as phase-guided sampling would have taken them: a
 * sample drawn while the tracker asks for shift s is kept with probability
 * 2^-s. The sampler's gaps are geometric per reference (memoryless), so a
 * Bernoulli(2^-s) thinning of the full-rate starts has the distribution of
 * the starts the lower rate draws. Prints the samples kept, the ratio, and
 * the phase of each window the tracker closed (one character per window:
 * '.' a transition, 'a'.. the phases; upper case: the window was sampled at
 * the lower rate).
 *
 * REPLAY_VERBOSE set: each window's samples and its similarity to every
 * phase (and candidate) before it closes.
 *
 *   phase_replay PROFILE PERIOD [SEED [WINDOW]]
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "lomas/lomas.h"
#include "sampler/sampler.h"

static int by_start(const void *a, const void *b)
{
	const lomas_sample *x = a, *y = b;
	return x->start < y->start ? -1 : x->start > y->start;
}

int main(int argc, char **argv)
{
	lomas_profile *p;
	lomas_profile_info info = LOMAS_PROFILE_INFO_INIT;
	lomas_sample *s;
	phase_tracker *pt;
	phase_settings set = {.min_samples = PHASE_DEFAULT_SAMPLES, .shift = PHASE_DEFAULT_SHIFT};
	uint64_t draw, kept = 0, window;
	double period;
	size_t got, n = 0;
	char *line;
	size_t nline = 0, cap;
	bool verbose;
	if (argc < 3 || argc > 5) {
		fprintf(stderr, "usage: phase_replay PROFILE PERIOD [SEED [WINDOW]]\n");
		return 2;
	}
	verbose = getenv("REPLAY_VERBOSE") != NULL;
	period = strtod(argv[2], NULL);
	draw = argc > 3 ? strtoull(argv[3], NULL, 10) * 0x9e3779b97f4a7c15ull + 1 : 1;
	window = phase_window_refs(argc > 4 ? strtoull(argv[4], NULL, 10) : 0, period, set.shift);
	if (lomas_profile_load(argv[1], &p) || lomas_profile_info_get(p, &info)) {
		fprintf(stderr, "phase_replay: %s\n", lomas_error_message());
		return 1;
	}
	s = calloc(info.samples + 1, sizeof *s);
	pt = calloc(1, sizeof *pt);
	cap = info.samples + 16;
	line = calloc(cap, 1);
	if (!s || !pt || !line || lomas_profile_samples(p, 0, info.samples, s, &got))
		return 1;
	/* Thread 0's samples, in clock order. */
	for (size_t i = 0; i < got; i++)
		if (s[i].thread == 0)
			s[n++] = s[i];
	qsort(s, n, sizeof *s, by_start);
	phase_tracker_init(pt, &set);
	for (size_t i = 0; i < n; i++) {
		uint64_t before = pt->windows;
		if (pt->shift_now) {
			draw ^= draw << 13, draw ^= draw >> 7, draw ^= draw << 17;
			if ((draw >> 11) % (1u << pt->shift_now))
				continue; /* not drawn at the lower rate */
		}
		kept++;
		if (verbose && pt->window_end && s[i].start >= pt->window_end) {
			/* The running window is about to close: its similarities. */
			printf("w%" PRIu64 " end %" PRIu64 " n %" PRIu64 " shift %u:", pt->windows,
			       pt->window_end, pt->win.samples, pt->shift_now);
			for (uint32_t k = 0; k < pt->nphases; k++)
				printf(" %c%.2f/%" PRIu64, 'a' + k,
				       phase_similarity(&pt->phases[k], &pt->win),
				       pt->phases[k].samples);
			for (uint32_t k = 0; k < pt->ncand; k++)
				printf(" c%.2f", phase_similarity(&pt->cand[k], &pt->win));
			printf("\n");
		}
		uint64_t returns = pt->returns;
		phase_on_sample(pt, s[i].start, window, s[i].addr >> 6, s[i].start_pc);
		if (verbose && pt->returns != returns)
			printf("return at %" PRIu64 " (window %" PRIu64 ", pc %" PRIx64 ")\n",
			       s[i].start, pt->windows, s[i].start_pc);
		if (pt->windows != before && nline + 1 < cap) {
			uint32_t c = pt->current;
			char ch = c == 0 ? '.' : c <= 26 ? (char)('a' + c - 1) : '+';
			if (pt->shift_now && ch >= 'a')
				ch = (char)(ch - 'a' + 'A');
			line[nline++] = ch;
		}
	}
	printf("samples %zu kept %" PRIu64 " ratio %.2f windows %" PRIu64
	       " phases %u window %" PRIu64 " returns %" PRIu64 "\n%s\n",
	       n, kept, (double)n / (double)kept, pt->windows, pt->nphases, window, pt->returns,
	       line);
	free(line);
	free(pt);
	free(s);
	lomas_profile_free(p);
	return 0;
}

/*
 * lomas-demo phases: each window's phase (lomas_profile_phases) as CSV
 * window,thread,start_ref,refs,phase (phase 0: a transition), and the
 * helpers that `curve --phase` and `report`'s phase timeline share.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "demo.h"

enum { OPT_BUCKETS = 256, OPT_THRESHOLD, OPT_TRANSITION };

int demo_phases_of(const char *cmd, const lomas_profile *p, uint32_t buckets, double threshold,
                   unsigned transition, uint32_t **window_phase, size_t *nwindows, size_t *nphases)
{
	lomas_profile_info info = LOMAS_PROFILE_INFO_INIT;
	lomas_status st;
	uint32_t *wp;
	*window_phase = NULL;
	if ((st = lomas_profile_info_get(p, &info)))
		return demo_fail_lomas(cmd, st, "cannot read the profile");
	wp = calloc(info.windows ? info.windows : 1, sizeof *wp);
	if (!wp)
		return demo_fail(cmd, "out of memory");
	if ((st = lomas_profile_phases(p, buckets, threshold, transition, wp, info.windows, NULL, 0,
	                               nphases))) {
		free(wp);
		return demo_fail_lomas(cmd, st, "cannot find the phases");
	}
	*window_phase = wp;
	*nwindows = info.windows;
	return 0;
}

lomas_profile *demo_phase_profile(const char *cmd, const lomas_profile *p, uint32_t phase)
{
	uint32_t *wp = NULL;
	size_t nw = 0, nph = 0;
	lomas_profile *q = NULL;
	lomas_status st;
	if (demo_phases_of(cmd, p, 0, 0, 0, &wp, &nw, &nph))
		return NULL;
	if (phase >= nph) {
		demo_fail(cmd, "--phase %" PRIu32 ": the profile has phases 0 to %zu", phase,
		          nph - 1);
	} else if ((st = lomas_profile_phase_select(p, wp, nw, phase, &q))) {
		demo_fail_lomas(cmd, st, "cannot select phase %" PRIu32, phase);
		q = NULL;
	}
	free(wp);
	return q;
}

static bool parse_unsigned(const char *s, unsigned long max, unsigned long *out)
{
	char *end;
	unsigned long v;
	if (!s || !*s || *s == '-')
		return false;
	v = strtoul(s, &end, 10);
	if (*end || v > max)
		return false;
	*out = v;
	return true;
}

/* phases's options: its getopt table and its help. */
const struct demo_opt phases_opts[] = {
    {"buckets", OPT_BUCKETS, required_argument, "N", "sets of the signature's cache (default 1024)",
     NULL},
    {"threshold", OPT_THRESHOLD, required_argument, "S",
     "the similarity (cosine) that joins a phase (default 0.8)", NULL},
    {"transition", OPT_TRANSITION, required_argument, "N",
     "windows alike that make a new phase (default 2)", NULL},
    {"help", 'h', no_argument, NULL, NULL, NULL},
    {NULL, 0, 0, NULL, NULL, NULL},
};

int cmd_phases(int argc, char **argv)
{
	unsigned long buckets = 0, transition = 0;
	double threshold = 0.0;
	lomas_profile *p;
	lomas_window *wins = NULL;
	uint32_t *wp = NULL;
	size_t nw = 0, nph = 0, copied;
	lomas_status st;
	int c, rc = 0;

	opterr = 0;
	optind = 1;
	while ((c = demo_getopt(argc, argv, phases_opts, false)) != -1) {
		switch (c) {
		case OPT_BUCKETS:
			if (!parse_unsigned(optarg, 1ul << 24, &buckets) || buckets == 0)
				return demo_fail("phases", "--buckets: '%s' is not 1 to 2^24",
				                 optarg);
			break;
		case OPT_THRESHOLD: {
			char *end;
			threshold = strtod(optarg, &end);
			if (*end || end == optarg || !(threshold > 0.0 && threshold <= 1.0))
				return demo_fail("phases", "--threshold: '%s' is not in (0, 1]",
				                 optarg);
			break;
		}
		case OPT_TRANSITION:
			if (!parse_unsigned(optarg, 1000000, &transition) || transition == 0)
				return demo_fail(
				    "phases", "--transition: '%s' is not a positive count", optarg);
			break;
		case 'h': return demo_help("phases");
		default: return demo_bad_option("phases", argv, c);
		}
	}
	if (optind >= argc)
		return demo_fail("phases", "missing PROFILE (see 'lomas-demo help phases')");
	if (optind + 1 < argc)
		return demo_fail("phases", "unexpected argument '%s'", argv[optind + 1]);
	p = demo_load("phases", argv[optind]);
	if (!p)
		return EXIT_USAGE;
	rc = demo_phases_of("phases", p, (uint32_t)buckets, threshold, (unsigned)transition, &wp,
	                    &nw, &nph);
	if (rc)
		goto out;
	wins = calloc(nw ? nw : 1, sizeof *wins);
	if (!wins) {
		rc = demo_fail("phases", "out of memory");
		goto out;
	}
	if ((st = lomas_profile_windows(p, 0, nw, wins, &copied))) {
		rc = demo_fail_lomas("phases", st, "cannot read the windows");
		goto out;
	}
	printf("window,thread,start_ref,refs,phase\n");
	for (size_t i = 0; i < copied; i++)
		printf("%zu,%" PRIu32 ",%" PRIu64 ",%" PRIu64 ",%" PRIu32 "\n", i, wins[i].thread,
		       wins[i].start, wins[i].refs, wp[i]);
	rc = demo_finish_stdout("phases");
out:
	free(wins);
	free(wp);
	lomas_profile_free(p);
	return rc;
}

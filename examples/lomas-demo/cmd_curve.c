/* lomas-demo curve and compare --csv: miss-ratio curves as CSV or JSON. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "demo.h"

enum {
	OPT_SIZES = 256,
	OPT_COLD,
	OPT_JSON,
	OPT_POLICY,
	OPT_CI,
	OPT_CI_LEVEL,
	OPT_CI_RESAMPLES,
	OPT_SEED,
	OPT_WAYS,
	OPT_PHASE
};

enum { WANT_RANDOM = 1, WANT_LRU = 2 };

/* Model one policy's curve into ratios[n] (ways 0: fully associative); reports failure for cmd. */
static int model_ways(const char *cmd, const char *path, const lomas_profile *p,
                      lomas_policy policy, const uint64_t *sizes, size_t n, unsigned ways,
                      unsigned flags, double *ratios)
{
	lomas_status st = lomas_model_curve_assoc(p, policy, sizes, n, 0, ways, flags, ratios);
	if (st != LOMAS_OK)
		return demo_fail_lomas(cmd, st, "cannot model '%s' (%s)", path,
		                       policy == LOMAS_POLICY_RANDOM ? "random" : "lru");
	return demo_check_ratios(cmd, path, ratios, n);
}

static int model(const char *cmd, const char *path, const lomas_profile *p, lomas_policy policy,
                 const uint64_t *sizes, size_t n, unsigned flags, double *ratios)
{
	return model_ways(cmd, path, p, policy, sizes, n, 0, flags, ratios);
}

/*
 * The default sizes for an A-way cache: each rounded up to whole sets
 * (ways x line bytes), duplicates dropped. Given sizes must be whole sets.
 */
static int sizes_for_ways(uint64_t *sizes, size_t *n, uint32_t line, unsigned ways, bool given)
{
	uint64_t set = (uint64_t)line * ways;
	size_t m = 0;
	for (size_t i = 0; i < *n; i++) {
		uint64_t b = sizes[i];
		if (given && b % set)
			return demo_fail(
			    "curve",
			    "--sizes: %" PRIu64 " bytes is not a whole number of %u-way "
			    "sets of %" PRIu32 "-byte lines (a multiple of %" PRIu64 ")",
			    b, ways, line, set);
		b = (b + set - 1) / set * set;
		if (m == 0 || sizes[m - 1] != b)
			sizes[m++] = b;
	}
	*n = m;
	return 0;
}

/* Confidence intervals of a curve (--ci). */
typedef struct ci_opts {
	bool on;
	double level;
	unsigned resamples;
	uint64_t seed;
} ci_opts;

/* The same with a confidence interval per size into lo[n] and hi[n]. */
static int model_ci(const char *path, const lomas_profile *p, lomas_policy policy,
                    const uint64_t *sizes, size_t n, unsigned flags, const ci_opts *ci,
                    double *ratios, double *lo, double *hi)
{
	lomas_status st = lomas_model_curve_ci(p, policy, sizes, n, 0, flags, ci->level,
	                                       ci->resamples, ci->seed, ratios, lo, hi);
	if (st != LOMAS_OK)
		return demo_fail_lomas("curve", st, "cannot model '%s' (%s)", path,
		                       policy == LOMAS_POLICY_RANDOM ? "random" : "lru");
	int rc = demo_check_ratios("curve", path, ratios, n);
	if (!rc)
		rc = demo_check_ratios("curve", path, lo, n);
	if (!rc)
		rc = demo_check_ratios("curve", path, hi, n);
	return rc;
}

/* Parse a number for option name into *v (double or unsigned); 0 or a failure. */
static int parse_num(const char *name, const char *arg, double lo, double hi, double *v)
{
	char *end;
	double x = strtod(arg, &end);
	if (end == arg || *end || !(x >= lo && x <= hi))
		return demo_fail("curve", "%s: '%s' is not a number from %g to %g", name, arg, lo,
		                 hi);
	*v = x;
	return 0;
}

static int line_size_of(const char *cmd, const lomas_profile *p, uint32_t *line)
{
	lomas_profile_info info = LOMAS_PROFILE_INFO_INIT;
	lomas_status st = lomas_profile_info_get(p, &info);
	if (st != LOMAS_OK)
		return demo_fail_lomas(cmd, st, "cannot read the profile");
	*line = info.line_bytes;
	return 0;
}

/* Bounds [0] lo and [1] hi per policy [0] random, [1] lru; NULL without --ci. */
static int json_bounds(json_t *o, double *const b[2][2], size_t i)
{
	static const char *names[2][2] = {{"random_lo", "random_hi"}, {"lru_lo", "lru_hi"}};
	for (int pol = 0; pol < 2; pol++)
		for (int k = 0; k < 2; k++)
			if (b[pol][k] &&
			    json_object_set_new(o, names[pol][k], json_real(b[pol][k][i])))
				return -1;
	return 0;
}

static int print_json(const uint64_t *sizes, size_t n, const double *rnd, const double *lru,
                      double *const b[2][2])
{
	json_t *arr = json_array();
	char *text;
	if (!arr)
		return demo_fail("curve", "out of memory");
	for (size_t i = 0; i < n; i++) {
		/* Every key or none: json_real(NaN) is NULL, and a NULL value drops its key. */
		json_t *o = json_object();
		if (!o ||
		    json_object_set_new(o, "size_bytes", json_integer((json_int_t)sizes[i])) ||
		    (rnd && json_object_set_new(o, "random", json_real(rnd[i]))) ||
		    (lru && json_object_set_new(o, "lru", json_real(lru[i]))) ||
		    json_bounds(o, b, i) || json_array_append_new(arr, o)) {
			json_decref(arr);
			return demo_fail("curve", "cannot build the JSON for %" PRIu64 " bytes",
			                 sizes[i]);
		}
	}
	text = json_dumps(arr, JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(10));
	json_decref(arr);
	if (!text)
		return demo_fail("curve", "out of memory");
	fputs(text, stdout);
	fputc('\n', stdout);
	free(text);
	return 0;
}

/* curve's options: its getopt table and its help. */
const struct demo_opt curve_opts[] = {
    {"sizes", OPT_SIZES, required_argument, "B1,B2,...",
     "cache sizes in bytes; K/KiB, M/MiB, G/GiB allowed\n"
     "(default: 1 KiB to 1 GiB, 4 per octave)",
     NULL},
    {"policy", OPT_POLICY, required_argument, "random|lru|both",
     "replacement policies to model (default both)", NULL},
    {"cold", OPT_COLD, no_argument, NULL, "count cold misses (excluded by default)", NULL},
    {"json", OPT_JSON, no_argument, NULL, "a JSON array of {size_bytes, random, lru}", NULL},
    {"ci", OPT_CI, no_argument, NULL,
     "a confidence interval per size: the columns (and JSON\n"
     "fields) random_lo,random_hi,lru_lo,lru_hi, from a\n"
     "Poisson bootstrap of the samples (sampling noise only)",
     NULL},
    {"ci-level", OPT_CI_LEVEL, required_argument, "L", "its level (default 0.95; implies --ci)",
     NULL},
    {"ci-resamples", OPT_CI_RESAMPLES, required_argument, "N",
     "bootstrap replicates (default 200; implies --ci)", NULL},
    {"seed", OPT_SEED, required_argument, "S",
     "the bootstrap's seed (default 1): same seed, same bounds", NULL},
    {"ways", OPT_WAYS, required_argument, "W",
     "W-way set-associative caches (0: fully associative, the\n"
     "default); sizes whole sets (the default sizes rounded\n"
     "up); a line's set is its line number modulo the sets",
     NULL},
    {"phase", OPT_PHASE, required_argument, "K",
     "the curve of phase K's windows alone (see 'phases')", NULL},
    {"help", 'h', no_argument, NULL, NULL, NULL},
    {NULL, 0, 0, NULL, NULL, NULL},
};

int cmd_curve(int argc, char **argv)
{
	const char *list = NULL, *path;
	unsigned flags = 0, want = WANT_RANDOM | WANT_LRU, ways = 0;
	long long phase = -1;
	bool json = false;
	ci_opts ci = {false, 0.95, 200, 1};
	lomas_profile *p = NULL;
	uint64_t *sizes = NULL;
	double *rnd = NULL, *lru = NULL, *b[2][2] = {{NULL, NULL}, {NULL, NULL}}, v = 0.0;
	size_t n = 0;
	uint32_t line = 0;
	int c, rc;

	opterr = 0;
	optind = 1;
	while ((c = demo_getopt(argc, argv, curve_opts, false)) != -1) {
		switch (c) {
		case OPT_SIZES: list = optarg; break;
		case OPT_COLD: flags |= LOMAS_MODEL_COLD; break;
		case OPT_JSON: json = true; break;
		case OPT_POLICY:
			if (strcmp(optarg, "random") == 0)
				want = WANT_RANDOM;
			else if (strcmp(optarg, "lru") == 0)
				want = WANT_LRU;
			else if (strcmp(optarg, "both") == 0)
				want = WANT_RANDOM | WANT_LRU;
			else
				return demo_fail(
				    "curve", "--policy: '%s' is not random, lru or both", optarg);
			break;
		case OPT_CI: ci.on = true; break;
		case OPT_CI_LEVEL:
			if (parse_num("--ci-level", optarg, 1e-9, 1.0 - 1e-9, &v))
				return EXIT_USAGE;
			ci.level = v;
			ci.on = true;
			break;
		case OPT_CI_RESAMPLES:
			if (parse_num("--ci-resamples", optarg, 2, 100000, &v))
				return EXIT_USAGE;
			ci.resamples = (unsigned)v;
			ci.on = true;
			break;
		case OPT_SEED: {
			char *end;
			errno = 0;
			ci.seed = strtoull(optarg, &end, 0);
			if (errno || end == optarg || *end || optarg[0] == '-')
				return demo_fail("curve", "--seed: '%s' is not an integer", optarg);
			break;
		}
		case OPT_WAYS:
			if (parse_num("--ways", optarg, 0, 1 << 20, &v))
				return EXIT_USAGE;
			if (v != floor(v))
				return demo_fail("curve", "--ways: '%s' is not a whole number",
				                 optarg);
			ways = (unsigned)v;
			break;
		case OPT_PHASE:
			if (parse_num("--phase", optarg, 0, 4294967295.0, &v))
				return EXIT_USAGE;
			if (v != floor(v))
				return demo_fail("curve", "--phase: '%s' is not a whole number",
				                 optarg);
			phase = (long long)v;
			break;
		case 'h': return demo_help("curve");
		default: return demo_bad_option("curve", argv, c);
		}
	}
	if (optind >= argc)
		return demo_fail("curve", "missing PROFILE (see 'lomas-demo help curve')");
	if (ways && ci.on)
		return demo_fail("curve", "--ci is for fully associative caches: not with --ways");
	if (optind + 1 < argc)
		return demo_fail("curve", "unexpected argument '%s'", argv[optind + 1]);
	path = argv[optind];
	p = demo_load("curve", path);
	if (!p)
		return EXIT_USAGE;
	if (phase >= 0) {
		lomas_profile *q = demo_phase_profile("curve", p, (uint32_t)phase);
		lomas_profile_free(p);
		if (!q)
			return EXIT_USAGE;
		p = q;
	}
	rc = line_size_of("curve", p, &line);
	if (rc == 0)
		rc = demo_sizes("curve", list, line, &sizes, &n);
	if (rc == 0 && ways)
		rc = sizes_for_ways(sizes, &n, line, ways, list != NULL);
	if (rc != 0)
		goto out;
	rnd = calloc(n ? n : 1, sizeof *rnd);
	lru = calloc(n ? n : 1, sizeof *lru);
	if (!rnd || !lru) {
		rc = demo_fail("curve", "out of memory");
		goto out;
	}
	for (int pol = 0; pol < 2 && ci.on; pol++) {
		if (!(want & (pol == 0 ? WANT_RANDOM : WANT_LRU)))
			continue;
		for (int k = 0; k < 2; k++) {
			b[pol][k] = calloc(n ? n : 1, sizeof(double));
			if (!b[pol][k]) {
				rc = demo_fail("curve", "out of memory");
				goto out;
			}
		}
	}
	for (int pol = 0; pol < 2 && rc == 0; pol++) {
		double *r = pol == 0 ? rnd : lru;
		if (!(want & (pol == 0 ? WANT_RANDOM : WANT_LRU)))
			continue;
		if (ci.on)
			rc = model_ci(path, p, (lomas_policy)pol, sizes, n, flags, &ci, r,
			              b[pol][0], b[pol][1]);
		else
			rc = model_ways("curve", path, p, (lomas_policy)pol, sizes, n, ways, flags,
			                r);
	}
	if (rc != 0)
		goto out;
	if (json) {
		rc = print_json(sizes, n, want & WANT_RANDOM ? rnd : NULL,
		                want & WANT_LRU ? lru : NULL, b);
	} else {
		printf("size_bytes%s%s%s%s\n", want & WANT_RANDOM ? ",random" : "",
		       want & WANT_LRU ? ",lru" : "",
		       ci.on && (want & WANT_RANDOM) ? ",random_lo,random_hi" : "",
		       ci.on && (want & WANT_LRU) ? ",lru_lo,lru_hi" : "");
		for (size_t i = 0; i < n && !ferror(stdout); i++) {
			printf("%" PRIu64, sizes[i]);
			if (want & WANT_RANDOM)
				printf(",%.6f", rnd[i]);
			if (want & WANT_LRU)
				printf(",%.6f", lru[i]);
			for (int pol = 0; pol < 2; pol++)
				if (b[pol][0])
					printf(",%.6f,%.6f", b[pol][0][i], b[pol][1][i]);
			putchar('\n');
		}
	}
	if (rc == 0)
		rc = demo_finish_stdout("curve");
out:
	free(rnd);
	free(lru);
	for (int pol = 0; pol < 2; pol++) {
		free(b[pol][0]);
		free(b[pol][1]);
	}
	free(sizes);
	lomas_profile_free(p);
	return rc;
}

int compare_csv(int argc, char **argv)
{
	static const struct option longopts[] = {
	    {"sizes", required_argument, NULL, OPT_SIZES},
	    {"cold", no_argument, NULL, OPT_COLD},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	const char *list = NULL, *path[2];
	unsigned flags = 0;
	lomas_profile *p[2] = {NULL, NULL};
	uint64_t *sizes = NULL;
	double *r[2][2] = {{NULL, NULL}, {NULL, NULL}}; /* [profile][policy] */
	size_t n = 0;
	uint32_t line[2] = {0, 0};
	int c, rc = 0;

	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
		switch (c) {
		case OPT_SIZES: list = optarg; break;
		case OPT_COLD: flags |= LOMAS_MODEL_COLD; break;
		case 'h': return demo_help("compare");
		default: return demo_bad_option("compare", argv, c);
		}
	}
	if (argc - optind != 2)
		return demo_fail("compare", "need two profiles, A and B (see 'lomas-demo help "
		                            "compare')");
	for (int i = 0; i < 2 && rc == 0; i++) {
		path[i] = argv[optind + i];
		p[i] = demo_load("compare", path[i]);
		rc = p[i] ? line_size_of("compare", p[i], &line[i]) : EXIT_USAGE;
	}
	/* Line sizes are powers of two: multiples of the larger suit both profiles. */
	if (rc == 0)
		rc = demo_sizes("compare", list, line[0] > line[1] ? line[0] : line[1], &sizes, &n);
	for (int i = 0; i < 2 && rc == 0; i++) {
		for (int pol = 0; pol < 2 && rc == 0; pol++) {
			r[i][pol] = calloc(n ? n : 1, sizeof(double));
			if (!r[i][pol])
				rc = demo_fail("compare", "out of memory");
			else
				rc = model("compare", path[i], p[i], (lomas_policy)pol, sizes, n,
				           flags, r[i][pol]);
		}
	}
	if (rc == 0) {
		printf("size_bytes,random_a,random_b,lru_a,lru_b,random_diff,lru_diff\n");
		for (size_t k = 0; k < n && !ferror(stdout); k++)
			printf("%" PRIu64 ",%.6f,%.6f,%.6f,%.6f,%+.6f,%+.6f\n", sizes[k],
			       r[0][0][k], r[1][0][k], r[0][1][k], r[1][1][k],
			       r[1][0][k] - r[0][0][k], r[1][1][k] - r[0][1][k]);
		rc = demo_finish_stdout("compare");
	}
	for (int i = 0; i < 2; i++) {
		free(r[i][0]);
		free(r[i][1]);
		lomas_profile_free(p[i]);
	}
	free(sizes);
	return rc;
}

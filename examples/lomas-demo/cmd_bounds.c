/*
 * lomas-demo bounds: the miss ratio of an LRU cache shared with other
 * programs, between the warm cache (lower) and a cache emptied of this
 * program's lines every quantum (upper), as CSV quantum_refs,lower,upper.
 */
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "demo.h"

enum { OPT_CACHE = 256, OPT_QUANTUM, OPT_COLD };

/* The default table: quanta of 10^3 to 10^9 references, 2 per decade. */
static const uint64_t default_quanta[] = {
    1000,    3000,     10000,    30000,     100000,    300000,     1000000,
    3000000, 10000000, 30000000, 100000000, 300000000, 1000000000,
};

/* bounds's options: its getopt table and its help. */
const struct demo_opt bounds_opts[] = {
    {"cache-size", OPT_CACHE, required_argument, "B",
     "the cache (default: this machine's L1d, from sysfs)", NULL},
    {"quantum", OPT_QUANTUM, required_argument, "N", "one quantum of N of the program's references",
     NULL},
    {"cold", OPT_COLD, no_argument, NULL, "count cold misses (excluded by default)", NULL},
    {"help", 'h', no_argument, NULL, NULL, NULL},
    {NULL, 0, 0, NULL, NULL, NULL},
};

int cmd_bounds(int argc, char **argv)
{
	uint64_t cache = 0, quantum = 0;
	const uint64_t *quanta = default_quanta;
	size_t nq = sizeof default_quanta / sizeof *default_quanta;
	unsigned flags = 0;
	const char *source = "--cache-size";
	double lower = 0.0, *upper = NULL;
	lomas_profile *p;
	lomas_profile_info info = LOMAS_PROFILE_INFO_INIT;
	lomas_status st;
	int c, rc = 0;

	opterr = 0;
	optind = 1;
	while ((c = demo_getopt(argc, argv, bounds_opts, false)) != -1) {
		switch (c) {
		case OPT_CACHE:
			if (!demo_parse_bytes(optarg, &cache) || cache == 0)
				return demo_fail("bounds", "--cache-size: '%s' is not a size",
				                 optarg);
			break;
		case OPT_QUANTUM:
			if (!demo_parse_count(optarg, &quantum) || quantum == 0)
				return demo_fail(
				    "bounds",
				    "--quantum: '%s' is not a positive number of references",
				    optarg);
			quanta = &quantum;
			nq = 1;
			break;
		case OPT_COLD: flags |= LOMAS_MODEL_COLD; break;
		case 'h': return demo_help("bounds");
		default: return demo_bad_option("bounds", argv, c);
		}
	}
	if (optind >= argc)
		return demo_fail("bounds", "missing PROFILE (see 'lomas-demo help bounds')");
	if (optind + 1 < argc)
		return demo_fail("bounds", "unexpected argument '%s'", argv[optind + 1]);
	if (!cache) {
		cache = machine_l1d_bytes(&source);
		fprintf(stderr, "lomas-demo: bounds: cache size %" PRIu64 " bytes: %s\n", cache,
		        source);
	}
	p = demo_load("bounds", argv[optind]);
	if (!p)
		return EXIT_USAGE;
	if ((st = lomas_profile_info_get(p, &info))) {
		rc = demo_fail_lomas("bounds", st, "cannot read the profile");
		goto out;
	}
	if (cache % info.line_bytes) {
		rc = demo_fail("bounds",
		               "--cache-size: %" PRIu64 " is not a multiple of the %" PRIu32
		               "-byte line size",
		               cache, info.line_bytes);
		goto out;
	}
	if (!(upper = calloc(nq, sizeof *upper))) {
		rc = demo_fail("bounds", "out of memory");
		goto out;
	}
	st = lomas_model_thrash_bounds(p, cache, 0, quanta, nq, flags, &lower, upper);
	if (st) {
		rc = demo_fail_lomas("bounds", st, "cannot model '%s'", argv[optind]);
		goto out;
	}
	if ((rc = demo_check_ratios("bounds", argv[optind], &lower, 1)) ||
	    (rc = demo_check_ratios("bounds", argv[optind], upper, nq)))
		goto out;
	printf("quantum_refs,lower,upper\n");
	for (size_t i = 0; i < nq && !ferror(stdout); i++)
		printf("%" PRIu64 ",%.6f,%.6f\n", quanta[i], lower, upper[i]);
	rc = demo_finish_stdout("bounds");
out:
	free(upper);
	lomas_profile_free(p);
	return rc;
}

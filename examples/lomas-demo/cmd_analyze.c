/* lomas-demo analyze: a Valgrind lackey trace through the trace clock into a profile. */
#include <getopt.h>
#include <inttypes.h>
#include <string.h>

#include "demo.h"

enum { OPT_LACKEY = DEMO_OPT_LONG, OPT_PERIOD, OPT_SEED, OPT_LINE_SIZE, OPT_WINDOW };

/* analyze's options: its getopt table, its help, and the config keys they set. */
const struct demo_opt analyze_opts[] = {
    {"lackey", OPT_LACKEY, required_argument, "FILE|-", "the lackey output to read (required)",
     NULL},
    {"output", 'o', required_argument, "OUT", "the profile to write (required)", NULL},
    {"period", OPT_PERIOD, required_argument, "N|auto",
     "mean sampling period in references (default auto)", "period"},
    {"seed", OPT_SEED, required_argument, "S", "seed of the sampling generator (default 1)",
     "seed"},
    {"line-size", OPT_LINE_SIZE, required_argument, "B", "cache line size in bytes (default 64)",
     "line_bytes"},
    {"window", OPT_WINDOW, required_argument, "N|auto",
     "window length in references (default auto)", "window"},
    {"help", 'h', no_argument, NULL, NULL, NULL},
    {NULL, 0, 0, NULL, NULL, NULL},
};

/* Set the config key of option o from its value, naming the option if the value is bad. */
static int set_option(lomas_config *cfg, const struct demo_opt *o, const char *value)
{
	lomas_status st = lomas_config_set(cfg, o->key_name, value);
	if (st != LOMAS_OK)
		return demo_fail_lomas("analyze", st, "bad value '%s' for --%s", value, o->name);
	return 0;
}

/* The period the profile records, else what was asked for. */
static void describe_period(const lomas_profile *p, const lomas_config *cfg, char *buf, size_t len)
{
	const char *v = NULL;
	if (lomas_profile_meta_get(p, "period", &v) == LOMAS_OK && v) {
		snprintf(buf, len, "%s", v);
		return;
	}
	if (lomas_config_get(cfg, "period", buf, len) != LOMAS_OK)
		snprintf(buf, len, "?");
}

int cmd_analyze(int argc, char **argv)
{
	const char *lackey = NULL, *output = NULL;
	lomas_config *cfg = NULL;
	lomas_profile *p = NULL;
	lomas_profile_info info = LOMAS_PROFILE_INFO_INIT;
	lomas_status st;
	char period[64];
	int c, rc = 0;

	st = lomas_config_new(&cfg);
	if (st != LOMAS_OK)
		return demo_fail_lomas("analyze", st, "cannot create a config");
	optind = 1;
	while (rc == 0 && (c = demo_getopt(argc, argv, analyze_opts, false)) != -1) {
		const struct demo_opt *o = demo_opt_find(analyze_opts, c);
		if (o && o->key_name) {
			rc = set_option(cfg, o, optarg);
			continue;
		}
		switch (c) {
		case OPT_LACKEY: lackey = optarg; break;
		case 'o': output = optarg; break;
		case 'h': lomas_config_free(cfg); return demo_help("analyze");
		default: rc = demo_bad_option("analyze", argv, c); break;
		}
	}
	if (rc == 0 && optind < argc)
		rc =
		    demo_fail("analyze", "unexpected argument '%s' (the trace goes after --lackey)",
		              argv[optind]);
	if (rc == 0 && !lackey)
		rc = demo_fail("analyze", "missing --lackey FILE (or '-' for standard input)");
	if (rc == 0 && !output)
		rc = demo_fail("analyze", "missing -o OUT.lomas");
	if (rc != 0) {
		lomas_config_free(cfg);
		return rc;
	}

	st = lomas_trace_analyze_lackey(cfg, lackey, &p);
	if (st != LOMAS_OK) {
		rc = demo_names_path(lackey)
		         ? demo_fail_lomas("analyze", st, "cannot analyze")
		         : demo_fail_lomas("analyze", st, "cannot analyze '%s'", lackey);
		goto out;
	}
	/* Say where the profile came from unless the trace reader already did. */
	{
		const char *v;
		if (lomas_profile_meta_get(p, "source", &v) != LOMAS_OK)
			lomas_profile_meta_set(
			    p, "source", strcmp(lackey, "-") == 0 ? "lackey:<stdin>" : lackey);
	}
	st = lomas_profile_save(p, output);
	if (st != LOMAS_OK) {
		/* The library's message names the path, the step and errno. */
		rc = demo_fail_lomas("analyze", st, "cannot save the profile");
		goto out;
	}
	st = lomas_profile_info_get(p, &info);
	if (st != LOMAS_OK) {
		rc = demo_fail_lomas("analyze", st, "cannot summarize the profile");
		goto out;
	}
	describe_period(p, cfg, period, sizeof period);
	{
		char safe_period[256], safe_out[4096];
		fprintf(stderr,
		        "lomas-demo: analyze: %" PRIu64 " samples (%" PRIu64 " reused, %" PRIu64
		        " dangling, %" PRIu64 " censored) of %" PRIu64
		        " references, period %s -> %s\n",
		        info.samples, info.reused, info.dangling, info.censored, info.refs,
		        demo_escape(period, safe_period, sizeof safe_period),
		        demo_escape(output, safe_out, sizeof safe_out));
	}
out:
	lomas_profile_free(p);
	lomas_config_free(cfg);
	return rc;
}

/* lomas-demo export: the whole profile as JSON or CSV on standard output. */
#include <getopt.h>

#include "demo.h"

enum { OPT_JSON = 256, OPT_CSV };

/* export's options: its getopt table and its help. */
const struct demo_opt export_opts[] = {
    {"json", OPT_JSON, no_argument, NULL, "one JSON document: metadata, threads, windows, samples",
     NULL},
    {"csv", OPT_CSV, no_argument, NULL, "one row per sample, with a header line", NULL},
    {"help", 'h', no_argument, NULL, NULL, NULL},
    {NULL, 0, 0, NULL, NULL, NULL},
};

int cmd_export(int argc, char **argv)
{
	int format = -1, c, rc;
	lomas_profile *p;
	lomas_status st;

	opterr = 0;
	optind = 1;
	while ((c = demo_getopt(argc, argv, export_opts, false)) != -1) {
		switch (c) {
		case OPT_JSON:
		case OPT_CSV: {
			int f = c == OPT_JSON ? LOMAS_EXPORT_JSON : LOMAS_EXPORT_CSV;
			if (format >= 0 && format != f)
				return demo_fail("export", "--json and --csv exclude each other");
			format = f;
			break;
		}
		case 'h': return demo_help("export");
		default: return demo_bad_option("export", argv, c);
		}
	}
	if (format < 0)
		return demo_fail("export", "say --json or --csv");
	if (optind >= argc)
		return demo_fail("export", "missing PROFILE (see 'lomas-demo help export')");
	if (optind + 1 < argc)
		return demo_fail("export", "unexpected argument '%s'", argv[optind + 1]);
	p = demo_load("export", argv[optind]);
	if (!p)
		return EXIT_USAGE;
	st = lomas_profile_export(p, (lomas_export_format)format, stdout);
	lomas_profile_free(p);
	if (st != LOMAS_OK) {
		/* A reader that went away is not worth a message. */
		if (demo_stdout_gone())
			return EXIT_USAGE;
		return demo_fail_lomas("export", st, "cannot export '%s'", argv[optind]);
	}
	rc = demo_finish_stdout("export");
	return rc;
}

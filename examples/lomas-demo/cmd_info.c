/*
 * lomas-demo info: what this machine offers, as perf users expect from
 * `perf list`: the clocks that work here and why the others do not, the
 * detected PMU's load/store events with their perf encodings (--pmu NAME
 * shows any libpfm4 PMU's; --pmu list names them), and the caches.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "demo.h"

static void print_text(json_t *root, const struct cache_level *c, size_t nc)
{
	json_t *v, *p = json_object_get(root, "pmu"), *pmus = json_object_get(root, "pmus");
	size_t i;
	if (pmus) {
		printf("PMUs libpfm4 knows (* = this machine's):\n");
		json_array_foreach(pmus, i, v) printf(
		    "  %c %-24s %s\n", json_is_true(json_object_get(v, "present")) ? '*' : ' ',
		    json_string_value(json_object_get(v, "name")),
		    json_string_value(json_object_get(v, "desc")));
		return;
	}
	printf("clocks:\n");
	json_array_foreach(json_object_get(root, "clocks"), i, v)
	{
		bool ok = json_is_true(json_object_get(v, "works"));
		const char *why = json_string_value(json_object_get(v, "why"));
		printf("  %-7s %s%s%s\n", json_string_value(json_object_get(v, "name")),
		       ok ? "works" : "no", ok || !why ? "" : ": ", ok || !why ? "" : why);
	}
	printf("perf: perf_event_paranoid %lld, ptrace_scope %lld, hardware breakpoints %s "
	       "(--watch debugreg)\n",
	       json_integer_value(json_object_get(root, "perf_event_paranoid")),
	       json_integer_value(json_object_get(root, "ptrace_scope")),
	       json_is_true(json_object_get(root, "breakpoints")) ? "yes" : "no");
	if (p) {
		printf("PMU %s (%s)%s, family %s; PEBS data address %s, AMD IBS op %s%s; "
		       "--pmu-sample precise: %s\n",
		       json_string_value(json_object_get(p, "name")),
		       json_string_value(json_object_get(p, "desc")),
		       json_is_true(json_object_get(p, "forced")) ? " [--pmu]" : "",
		       json_string_value(json_object_get(p, "family")),
		       json_is_true(json_object_get(p, "pebs_address")) ? "yes" : "no",
		       json_is_true(json_object_get(p, "ibs_op")) ? "yes" : "no",
		       json_is_true(json_object_get(p, "approximate"))
		           ? " (dispatched, not retired: approximate)"
		           : "",
		       json_string_value(json_object_get(p, "precise")));
		json_array_foreach(json_object_get(p, "events"), i, v)
		    printf("  %-10s %-32s type %lld config %s  perf: %s\n",
		           json_string_value(json_object_get(v, "kind")),
		           json_string_value(json_object_get(v, "name")),
		           json_integer_value(json_object_get(v, "type")),
		           json_string_value(json_object_get(v, "config")),
		           json_string_value(json_object_get(v, "perf")));
		/* A hybrid CPU: each counter is opened on every core PMU (a thread moves). */
		if (json_array_size(json_object_get(p, "core_pmus")) > 1) {
			json_t *cp, *e;
			size_t k, j;
			json_array_foreach(json_object_get(p, "core_pmus"), k, cp)
			{
				printf("  core PMU %s (perf type %lld):",
				       json_string_value(json_object_get(cp, "name")),
				       json_integer_value(json_object_get(cp, "type")));
				json_array_foreach(json_object_get(cp, "events"), j, e)
				    printf(" %s type %lld config %s;",
				           json_string_value(json_object_get(e, "name")),
				           json_integer_value(json_object_get(e, "type")),
				           json_string_value(json_object_get(e, "config")));
				printf("\n");
			}
		}
	}
	printf("caches:");
	for (i = 0; i < nc; i++)
		printf(" %s %llu KiB%s", c[i].name, (unsigned long long)(c[i].bytes >> 10),
		       i + 1 < nc ? "," : "");
	printf(nc ? "\n" : " none known (no sysfs cache entries)\n");
}

enum { OPT_JSON = DEMO_OPT_LONG, OPT_PMU };

/* info's options: its getopt table and its help. */
const struct demo_opt info_opts[] = {
    {"json", OPT_JSON, no_argument, NULL, "the same as one JSON document", NULL},
    {"pmu", OPT_PMU, required_argument, "NAME",
     "the tables of any PMU libpfm4 knows (nhm, snb, skl, spr,\n"
     "amd64_fam19h_zen3, ...) instead of this machine's; 'list' names them",
     NULL},
    {"help", 'h', no_argument, NULL, NULL, NULL},
    {NULL, 0, 0, NULL, NULL, NULL},
};

int cmd_info(int argc, char **argv)
{
	const char *pmu = NULL;
	bool as_json = false;
	struct cache_level c[MAX_CACHES];
	size_t nc;
	char *text = NULL;
	json_t *root;
	lomas_status st;
	int opt;
	optind = 1;
	while ((opt = demo_getopt(argc, argv, info_opts, false)) != -1) {
		switch (opt) {
		case OPT_JSON: as_json = true; break;
		case OPT_PMU: pmu = optarg; break;
		case 'h': return demo_help("info");
		default: return demo_bad_option("info", argv, opt);
		}
	}
	if (optind < argc)
		return demo_fail("info", "unknown argument '%s' (see 'lomas-demo help info')",
		                 argv[optind]);
	if ((st = lomas_machine_info(pmu, &text)))
		return demo_fail_lomas("info", st, "--pmu %s", pmu ? pmu : "");
	root = json_loads(text, 0, NULL);
	lomas_string_free(text);
	if (!root)
		return demo_fail("info", "the library's answer is not JSON");
	nc = machine_caches(c, MAX_CACHES);
	if (as_json) {
		json_t *caches = json_array();
		for (size_t i = 0; i < nc; i++)
			json_array_append_new(caches,
			                      json_pack("{s:s, s:I}", "name", c[i].name,
			                                "size_bytes", (json_int_t)c[i].bytes));
		json_object_set_new(root, "caches", caches);
		char *out = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
		if (out)
			printf("%s\n", out);
		free(out);
	} else {
		print_text(root, c, nc);
	}
	json_decref(root);
	return demo_finish_stdout("info");
}

/*
 * lomas-demo hot: the instructions (or source lines, or functions) that
 * miss most in a cache of a given size, as CSV or JSON, largest first.
 */
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "demo.h"

enum { OPT_CACHE = 256, OPT_POLICY, OPT_TOP, OPT_JSON, OPT_BY, OPT_COLD, OPT_DEBUG };

/* A CSV field: quoted when it holds a comma or a quote (RFC 4180). */
static void csv_field(const char *s)
{
	if (!strpbrk(s, ",\"")) {
		fputs(s, stdout);
		return;
	}
	putchar('"');
	for (; *s; s++) {
		if (*s == '"')
			putchar('"');
		putchar(*s);
	}
	putchar('"');
}

static const char *sym_name(lomas_sym_status s)
{
	switch (s) {
	case LOMAS_SYM_OK: return "ok";
	case LOMAS_SYM_NONE: return "none";
	case LOMAS_SYM_NO_MAPS: return "no_maps";
	case LOMAS_SYM_NO_MAP: return "no_map";
	case LOMAS_SYM_NO_FILE: return "no_file";
	case LOMAS_SYM_CHANGED: return "changed";
	case LOMAS_SYM_NO_SYMBOL: return "no_symbol";
	}
	return "?";
}

/* Raw bytes that are not UTF-8 cannot go into a JSON string: escape them first. */
static json_t *jtext(const char *s)
{
	char buf[4096];
	if (!s)
		return json_null();
	return json_string(demo_escape(s, buf, sizeof buf));
}

static json_t *row_json(const lomas_hot_list *l, const struct demo_hot_row *r, enum demo_hot_by by)
{
	json_t *o = json_object(), *chain = json_array();
	char pc[32], loc[4200];
	lomas_hot_pc e = LOMAS_HOT_PC_INIT;
	demo_hot_location(r, false, loc, sizeof loc);
	snprintf(pc, sizeof pc, "0x%" PRIx64, r->pc);
	json_object_set_new(o, "pc", json_string(pc));
	json_object_set_new(o, "function", jtext(r->function));
	json_object_set_new(o, "location", json_string(loc));
	json_object_set_new(o, "file", jtext(r->file));
	json_object_set_new(o, "line", r->line ? json_integer(r->line) : json_null());
	json_object_set_new(o, "module", jtext(r->module));
	json_object_set_new(o, "misses", json_real(r->misses));
	json_object_set_new(o, "refs", json_real(r->refs));
	json_object_set_new(o, "miss_ratio", json_real(r->miss_ratio));
	json_object_set_new(o, "share", json_real(r->share));
	json_object_set_new(o, "delinquent", json_boolean(r->delinquent));
	json_object_set_new(o, "pcs", json_integer((json_int_t)r->pcs));
	if (by == DEMO_BY_PC && lomas_hot_list_get(l, r->first, &e) == LOMAS_OK) {
		snprintf(pc, sizeof pc, "0x%" PRIx64, e.module_offset);
		json_object_set_new(o, "module_offset", e.module ? json_string(pc) : json_null());
		json_object_set_new(o, "column", e.column ? json_integer(e.column) : json_null());
		json_object_set_new(o, "unseen_misses", json_real(e.unseen_misses));
		json_object_set_new(o, "samples_started",
		                    json_integer((json_int_t)e.samples_started));
		json_object_set_new(o, "samples_ended", json_integer((json_int_t)e.samples_ended));
		json_object_set_new(o, "symbolized", json_string(sym_name(e.sym)));
		json_object_set_new(o, "sym_detail", jtext(e.sym_detail));
		for (size_t j = 0; j < e.inlined; j++) {
			lomas_hot_frame f;
			json_t *fo = json_object();
			if (lomas_hot_list_frame(l, r->first, j, &f) != LOMAS_OK)
				break;
			json_object_set_new(fo, "function", jtext(f.function));
			json_object_set_new(fo, "file", jtext(f.file));
			json_object_set_new(fo, "line",
			                    f.line ? json_integer(f.line) : json_null());
			json_array_append_new(chain, fo);
		}
		json_object_set_new(o, "inlined_at", chain);
	} else {
		json_decref(chain);
	}
	return o;
}

static int print_json(const lomas_hot_list *l, const struct demo_hot_row *rows, size_t n,
                      enum demo_hot_by by, const char *source)
{
	static const char *const bys[] = {"pc", "line", "function"};
	lomas_hot_info info = LOMAS_HOT_INFO_INIT;
	json_t *root = json_object(), *arr = json_array();
	char *text;
	int rc = 0;
	lomas_hot_list_info(l, &info);
	json_object_set_new(root, "cache_bytes", json_integer((json_int_t)info.cache_bytes));
	json_object_set_new(root, "cache_size_from", json_string(source));
	json_object_set_new(root, "line_bytes", json_integer(info.line_bytes));
	json_object_set_new(root, "policy",
	                    json_string(info.policy == LOMAS_POLICY_LRU ? "lru" : "random"));
	json_object_set_new(root, "cold", json_boolean(info.flags & LOMAS_MODEL_COLD));
	json_object_set_new(root, "by", json_string(bys[by]));
	json_object_set_new(root, "misses", json_real(info.misses));
	json_object_set_new(root, "refs", json_real(info.refs));
	json_object_set_new(root, "miss_ratio",
	                    json_real(info.refs > 0 ? info.misses / info.refs : 0.0));
	json_object_set_new(root, "pcs", json_integer((json_int_t)info.count));
	json_object_set_new(root, "delinquent_pcs", json_integer((json_int_t)info.delinquent));
	json_object_set_new(root, "cover90_pcs", json_integer((json_int_t)info.cover90));
	json_object_set_new(root, "has_maps", json_boolean(info.has_maps));
	for (size_t i = 0; i < n; i++)
		json_array_append_new(arr, row_json(l, &rows[i], by));
	json_object_set_new(root, "entries", arr);
	text = json_dumps(root, JSON_ENSURE_ASCII | JSON_INDENT(1));
	json_decref(root);
	if (!text)
		return demo_fail("hot", "out of memory");
	puts(text);
	free(text);
	return rc;
}

static void print_csv(const struct demo_hot_row *rows, size_t n, enum demo_hot_by by)
{
	if (by == DEMO_BY_PC)
		printf("pc,function,location,misses,miss_ratio,share\n");
	else if (by == DEMO_BY_LINE)
		printf("location,function,misses,miss_ratio,share,pcs\n");
	else
		printf("function,location,misses,miss_ratio,share,pcs\n");
	for (size_t i = 0; i < n && !ferror(stdout); i++) {
		char fn[2048], loc[4200];
		const struct demo_hot_row *r = &rows[i];
		demo_hot_function(r, fn, sizeof fn);
		demo_hot_location(r, false, loc, sizeof loc);
		if (by == DEMO_BY_PC) {
			printf("0x%" PRIx64 ",", r->pc);
			csv_field(fn);
			putchar(',');
			csv_field(loc);
		} else if (by == DEMO_BY_LINE) {
			csv_field(loc);
			putchar(',');
			csv_field(fn);
		} else {
			csv_field(fn);
			putchar(',');
			csv_field(loc);
		}
		printf(",%.1f,%.6f,%.6f", r->misses, r->miss_ratio, r->share);
		if (by != DEMO_BY_PC)
			printf(",%zu", r->pcs);
		putchar('\n');
	}
}

/* hot's options: its getopt table and its help. */
const struct demo_opt hot_opts[] = {
    {"cache-size", OPT_CACHE, required_argument, "B",
     "the cache size (default: this machine's L1d, from sysfs)", NULL},
    {"policy", OPT_POLICY, required_argument, "random|lru",
     "replacement policy of the model (default random)", NULL},
    {"top", OPT_TOP, required_argument, "N", "print the N largest (default 20; 0 = all)", NULL},
    {"by", OPT_BY, required_argument, "pc|line|function",
     "one row per instruction (default), per source line\n"
     "(location,function,misses,miss_ratio,share,pcs) or per\n"
     "function (function,location,...)",
     NULL},
    {"json", OPT_JSON, no_argument, NULL, "one JSON object with the totals and the entries", NULL},
    {"cold", OPT_COLD, no_argument, NULL, "count cold misses (excluded by default)", NULL},
    {"debug-dir", OPT_DEBUG, required_argument, "DIR",
     "separate debug files under DIR (default /usr/lib/debug)", NULL},
    {"help", 'h', no_argument, NULL, NULL, NULL},
    {NULL, 0, 0, NULL, NULL, NULL},
};

int cmd_hot(int argc, char **argv)
{
	uint64_t cache = 0, top = 20;
	lomas_policy policy = LOMAS_POLICY_RANDOM;
	enum demo_hot_by by = DEMO_BY_PC;
	const char *debug_dir = NULL, *source = "--cache-size";
	unsigned flags = 0;
	bool json = false;
	int c, rc;
	lomas_profile *p;
	lomas_hot_list *l = NULL;
	struct demo_hot_row *rows = NULL;
	size_t n = 0;

	opterr = 0;
	optind = 1;
	while ((c = demo_getopt(argc, argv, hot_opts, false)) != -1) {
		switch (c) {
		case OPT_CACHE:
			if (!demo_parse_bytes(optarg, &cache) || cache == 0)
				return demo_fail("hot", "bad cache size '%s'", optarg);
			break;
		case OPT_POLICY:
			if (!demo_parse_policy(optarg, &policy))
				return demo_fail("hot", "policy must be random or lru, not '%s'",
				                 optarg);
			break;
		case OPT_TOP:
			if (!demo_parse_count(optarg, &top))
				return demo_fail("hot", "bad --top '%s' (a count; 0 = all)",
				                 optarg);
			break;
		case OPT_JSON: json = true; break;
		case OPT_BY:
			if (!demo_parse_by(optarg, &by))
				return demo_fail(
				    "hot", "--by must be pc, line or function, not '%s'", optarg);
			break;
		case OPT_COLD: flags |= LOMAS_MODEL_COLD; break;
		case OPT_DEBUG: debug_dir = optarg; break;
		case 'h': return demo_help("hot");
		default: return demo_bad_option("hot", argv, c);
		}
	}
	if (optind >= argc)
		return demo_fail("hot", "missing PROFILE (see 'lomas-demo help hot')");
	if (optind + 1 < argc)
		return demo_fail("hot", "unexpected argument '%s'", argv[optind + 1]);
	if (!cache)
		cache = machine_l1d_bytes(&source);
	if (!(p = demo_load("hot", argv[optind])))
		return EXIT_USAGE;
	{
		lomas_profile_info info = LOMAS_PROFILE_INFO_INIT;
		if (lomas_profile_info_get(p, &info) == LOMAS_OK && info.line_bytes &&
		    cache % info.line_bytes) {
			lomas_profile_free(p);
			return demo_fail("hot",
			                 "cache size %" PRIu64
			                 " is not a multiple of the profile's %u-byte lines",
			                 cache, info.line_bytes);
		}
	}
	rc = demo_hot_make("hot", argv[optind], p, policy, cache, flags, debug_dir, false, &l);
	if (rc == 0)
		rc = demo_hot_rows(l, by, &rows, &n);
	if (rc == 0) {
		if (top && n > top)
			n = (size_t)top;
		if (json)
			rc = print_json(l, rows, n, by, source);
		else
			print_csv(rows, n, by);
		if (rc == 0)
			rc = demo_finish_stdout("hot");
	}
	free(rows);
	lomas_hot_list_free(l);
	lomas_profile_free(p);
	return rc;
}

/*
 * lomas-demo compare: what changed between two runs of a program (after a
 * code change, another input, another build): both curves side by side
 * with their difference, at every other octave and at each of this
 * machine's caches, and the source lines whose estimated misses changed
 * most. Lines are matched by function, file name and line number, since
 * addresses move between builds. --csv prints the curves alone as before
 * (compare_csv in cmd_curve.c).
 */
#include <getopt.h>
#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "demo.h"

enum { OPT_CSV = 256, OPT_SIZES, OPT_COLD, OPT_CACHE, OPT_POLICY, OPT_TOP, OPT_JSON, OPT_DEBUG };

/* One row of the size table. */
struct size_row {
	uint64_t bytes;
	const char *cache; /* a machine cache's name, or NULL */
	double r[2][2];    /* [profile][policy] */
};

/* One source line present in either run. */
struct line_change {
	const struct demo_hot_row *a, *b; /* NULL where the run has no such line */
	double change;                    /* misses of b - misses of a */
};

static const char *base_name(const char *path)
{
	const char *s = path ? strrchr(path, '/') : NULL;
	return s ? s + 1 : path;
}

/* Same function and source line, in whichever directory each build had it. */
static bool same_line(const struct demo_hot_row *x, const struct demo_hot_row *y)
{
	if (!x->file || !y->file || x->line != y->line)
		return false;
	if ((x->function == NULL) != (y->function == NULL))
		return false;
	if (x->function && strcmp(x->function, y->function) != 0)
		return false;
	return strcmp(base_name(x->file), base_name(y->file)) == 0;
}

static int by_change(const void *p, const void *q)
{
	const struct line_change *x = p, *y = q;
	double a = fabs(x->change), b = fabs(y->change);
	return (a < b) - (a > b);
}

/* Pair the rows of a and b by source line; rows without a line stay alone. */
static struct line_change *match_lines(const struct demo_hot_row *a, size_t na,
                                       const struct demo_hot_row *b, size_t nb, size_t *n)
{
	struct line_change *c = calloc(na + nb + 1, sizeof *c);
	bool *used = calloc(nb + 1, sizeof *used);
	size_t k = 0;
	if (!c || !used) {
		free(c);
		free(used);
		return NULL;
	}
	for (size_t i = 0; i < na; i++) {
		c[k].a = &a[i];
		for (size_t j = 0; j < nb && !c[k].b; j++)
			if (!used[j] && same_line(&a[i], &b[j])) {
				c[k].b = &b[j];
				used[j] = true;
			}
		k++;
	}
	for (size_t j = 0; j < nb; j++)
		if (!used[j])
			c[k++].b = &b[j];
	for (size_t i = 0; i < k; i++)
		c[i].change = (c[i].b ? c[i].b->misses : 0.0) - (c[i].a ? c[i].a->misses : 0.0);
	qsort(c, k, sizeof *c, by_change);
	free(used);
	*n = k;
	return c;
}

/* The table's sizes: every other octave from 1 KiB to 1 GiB, and the nc caches c. */
static size_t table_sizes(uint32_t line, const struct cache_level *c, size_t nc,
                          struct size_row *rows, size_t cap)
{
	size_t n = 0;
	for (int o = 10; o <= 30 && n < cap; o += 2)
		rows[n++] = (struct size_row){.bytes = 1ull << o};
	for (size_t i = 0; i < nc && n < cap; i++) {
		uint64_t b = c[i].bytes / line * line;
		bool merged = false;
		for (size_t k = 0; k < n && !merged; k++)
			if (rows[k].bytes == (b ? b : line)) {
				rows[k].cache = c[i].name;
				merged = true;
			}
		if (!merged)
			rows[n++] = (struct size_row){.bytes = b ? b : line, .cache = c[i].name};
	}
	/* Insertion sort: a dozen rows. */
	for (size_t i = 1; i < n; i++)
		for (size_t k = i; k > 0 && rows[k].bytes < rows[k - 1].bytes; k--) {
			struct size_row t = rows[k];
			rows[k] = rows[k - 1];
			rows[k - 1] = t;
		}
	return n;
}

static void print_text(char **path, struct size_row *rows, size_t nrows,
                       const struct line_change *c, size_t nc, size_t top, uint64_t cache,
                       const char *cache_name, lomas_policy policy, unsigned flags)
{
	char esc[2][1024], size[32];
	printf("A  %s\nB  %s\n\n", demo_escape(path[0], esc[0], sizeof esc[0]),
	       demo_escape(path[1], esc[1], sizeof esc[1]));
	printf("miss ratio (fully associative; cold misses %s; B-A in percentage points)\n",
	       flags & LOMAS_MODEL_COLD ? "included" : "excluded");
	printf("  %8s %-5s  %-25s   %-25s\n", "", "", "--------- random --------",
	       "---------- LRU ----------");
	printf("  %8s %-5s %8s %8s %7s   %8s %8s %7s\n", "size", "cache", "A", "B", "B-A", "A", "B",
	       "B-A");
	for (size_t i = 0; i < nrows; i++) {
		const struct size_row *r = &rows[i];
		demo_format_bytes(r->bytes, size, sizeof size);
		printf("  %8s %-5s %7.2f%% %7.2f%% %+7.2f   %7.2f%% %7.2f%% %+7.2f\n", size,
		       r->cache ? r->cache : "", 100 * r->r[0][0], 100 * r->r[1][0],
		       100 * (r->r[1][0] - r->r[0][0]), 100 * r->r[0][1], 100 * r->r[1][1],
		       100 * (r->r[1][1] - r->r[0][1]));
	}
	demo_format_bytes(cache, size, sizeof size);
	printf("\nsource lines whose estimated misses changed most at %s%s%s (%s "
	       "replacement),\nmatched by function and line:\n",
	       cache_name ? cache_name : "", cache_name ? " " : "", size,
	       policy == LOMAS_POLICY_LRU ? "LRU" : "random");
	printf("  %12s %12s %12s %7s %7s  %-20s %s\n", "change", "misses A", "misses B", "share A",
	       "share B", "function", "location");
	for (size_t i = 0; i < nc && i < top; i++) {
		const struct demo_hot_row *r = c[i].a ? c[i].a : c[i].b;
		char fn[256], loc[1024];
		if (fabs(c[i].change) < 0.5)
			break; /* no change worth a line (they are sorted) */
		demo_hot_function(r, fn, sizeof fn);
		demo_hot_location(r, true, loc, sizeof loc);
		printf("  %+12.0f %12.0f %12.0f %6.1f%% %6.1f%%  %-20s %s\n", c[i].change,
		       c[i].a ? c[i].a->misses : 0.0, c[i].b ? c[i].b->misses : 0.0,
		       c[i].a ? 100 * c[i].a->share : 0.0, c[i].b ? 100 * c[i].b->share : 0.0,
		       fn[0] ? fn : "?", loc[0] ? loc : "?");
	}
}

static json_t *jtext(const char *s)
{
	char buf[4096];
	return s ? json_string(demo_escape(s, buf, sizeof buf)) : json_null();
}

static int print_json(char **path, struct size_row *rows, size_t nrows, const struct line_change *c,
                      size_t nc, size_t top, uint64_t cache, lomas_policy policy, unsigned flags)
{
	json_t *root = json_object(), *sizes = json_array(), *lines = json_array();
	char *text;
	json_object_set_new(root, "a", jtext(path[0]));
	json_object_set_new(root, "b", jtext(path[1]));
	json_object_set_new(root, "cold", json_boolean(flags & LOMAS_MODEL_COLD));
	for (size_t i = 0; i < nrows; i++) {
		json_t *o = json_object();
		json_object_set_new(o, "size_bytes", json_integer((json_int_t)rows[i].bytes));
		json_object_set_new(o, "cache",
		                    rows[i].cache ? json_string(rows[i].cache) : json_null());
		json_object_set_new(o, "random_a", json_real(rows[i].r[0][0]));
		json_object_set_new(o, "random_b", json_real(rows[i].r[1][0]));
		json_object_set_new(o, "lru_a", json_real(rows[i].r[0][1]));
		json_object_set_new(o, "lru_b", json_real(rows[i].r[1][1]));
		json_array_append_new(sizes, o);
	}
	json_object_set_new(root, "sizes", sizes);
	json_object_set_new(root, "cache_bytes", json_integer((json_int_t)cache));
	json_object_set_new(root, "policy",
	                    json_string(policy == LOMAS_POLICY_LRU ? "lru" : "random"));
	for (size_t i = 0; i < nc && i < top; i++) {
		const struct demo_hot_row *r = c[i].a ? c[i].a : c[i].b;
		json_t *o = json_object();
		json_object_set_new(o, "function", jtext(r->function));
		json_object_set_new(o, "file", jtext(r->file));
		json_object_set_new(o, "line", r->line ? json_integer(r->line) : json_null());
		json_object_set_new(o, "misses_a", json_real(c[i].a ? c[i].a->misses : 0.0));
		json_object_set_new(o, "misses_b", json_real(c[i].b ? c[i].b->misses : 0.0));
		json_object_set_new(o, "share_a", json_real(c[i].a ? c[i].a->share : 0.0));
		json_object_set_new(o, "share_b", json_real(c[i].b ? c[i].b->share : 0.0));
		json_object_set_new(o, "change", json_real(c[i].change));
		json_array_append_new(lines, o);
	}
	json_object_set_new(root, "lines", lines);
	text = json_dumps(root, JSON_ENSURE_ASCII | JSON_PRESERVE_ORDER | JSON_INDENT(1));
	json_decref(root);
	if (!text)
		return demo_fail("compare", "out of memory");
	puts(text);
	free(text);
	return 0;
}

/* compare's options: its getopt table and its help. */
const struct demo_opt compare_opts[] = {
    {"cache-size", OPT_CACHE, required_argument, "B",
     "the cache of the line comparison (default: L1d, sysfs)", NULL},
    {"policy", OPT_POLICY, required_argument, "random|lru",
     "its replacement policy (default random)", NULL},
    {"top", OPT_TOP, required_argument, "N", "lines to show (default 10; 0 = all)", NULL},
    {"cold", OPT_COLD, no_argument, NULL, "count cold misses (excluded by default)", NULL},
    {"json", OPT_JSON, no_argument, NULL, "the same as one JSON object", NULL},
    {"debug-dir", OPT_DEBUG, required_argument, "DIR",
     "separate debug files under DIR (default /usr/lib/debug)", NULL},
    {"csv", OPT_CSV, no_argument, NULL,
     "only the curves, as CSV: size_bytes,random_a,random_b,\n"
     "lru_a,lru_b,random_diff,lru_diff (diff = b - a)",
     NULL},
    {"sizes", OPT_SIZES, required_argument, "B1,B2,...",
     "with --csv: cache sizes (default: 1 KiB to 1 GiB, 4 per\n"
     "octave)",
     NULL},
    {"help", 'h', no_argument, NULL, NULL, NULL},
    {NULL, 0, 0, NULL, NULL, NULL},
};

int cmd_compare(int argc, char **argv)
{
	const char *debug_dir = NULL, *source, *cache_name = NULL;
	uint64_t cache = 0, top = 10;
	lomas_policy policy = LOMAS_POLICY_RANDOM;
	unsigned flags = 0;
	bool json = false;
	int c, rc = 0;
	lomas_profile *p[2] = {NULL, NULL};
	lomas_hot_list *l[2] = {NULL, NULL};
	struct demo_hot_row *hr[2] = {NULL, NULL};
	size_t nh[2] = {0, 0}, nrows, nc = 0;
	struct size_row rows[32];
	struct cache_level mc[MAX_CACHES];
	size_t nmc;
	struct line_change *changes = NULL;
	uint32_t line = 8;

	/* --csv (or the curve options alone): the curves as CSV, as compare always printed. */
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--csv") == 0) {
			memmove(argv + i, argv + i + 1, (size_t)(argc - i) * sizeof *argv);
			return compare_csv(argc - 1, argv);
		}
	opterr = 0;
	optind = 1;
	while ((c = demo_getopt(argc, argv, compare_opts, false)) != -1) {
		switch (c) {
		case OPT_SIZES:
			return demo_fail("compare",
			                 "--sizes goes with --csv (the table's sizes are "
			                 "every other octave and this machine's caches)");
		case OPT_COLD: flags |= LOMAS_MODEL_COLD; break;
		case OPT_CACHE:
			if (!demo_parse_bytes(optarg, &cache) || cache == 0)
				return demo_fail("compare", "bad cache size '%s'", optarg);
			break;
		case OPT_POLICY:
			if (!demo_parse_policy(optarg, &policy))
				return demo_fail("compare",
				                 "policy must be random or lru, not '%s'", optarg);
			break;
		case OPT_TOP:
			if (!demo_parse_count(optarg, &top))
				return demo_fail("compare", "bad --top '%s'", optarg);
			if (top == 0)
				top = SIZE_MAX;
			break;
		case OPT_JSON: json = true; break;
		case OPT_DEBUG: debug_dir = optarg; break;
		case 'h': return demo_help("compare");
		default: return demo_bad_option("compare", argv, c);
		}
	}
	if (argc - optind != 2)
		return demo_fail("compare", "need two profiles, A and B (see 'lomas-demo help "
		                            "compare')");
	for (int i = 0; i < 2 && rc == 0; i++) {
		lomas_profile_info info = LOMAS_PROFILE_INFO_INIT;
		if (!(p[i] = demo_load("compare", argv[optind + i])))
			rc = EXIT_USAGE;
		else if (lomas_profile_info_get(p[i], &info) != LOMAS_OK)
			rc = demo_fail_lomas("compare", LOMAS_EINVAL, "cannot read '%s'",
			                     argv[optind + i]);
		else if (info.line_bytes > line)
			line = info.line_bytes;
	}
	if (rc)
		goto out;
	nmc = machine_caches(mc, MAX_CACHES);
	nrows = table_sizes(line, mc, nmc, rows, sizeof rows / sizeof rows[0]);
	for (int i = 0; i < 2 && rc == 0; i++)
		for (int pol = 0; pol < 2 && rc == 0; pol++)
			for (size_t k = 0; k < nrows && rc == 0; k++) {
				lomas_status st =
				    lomas_model_miss_ratio(p[i], (lomas_policy)pol, rows[k].bytes,
				                           0, flags, &rows[k].r[i][pol]);
				if (st != LOMAS_OK)
					rc = demo_fail_lomas("compare", st, "cannot model '%s'",
					                     argv[optind + i]);
				else
					rc = demo_check_ratios("compare", argv[optind + i],
					                       &rows[k].r[i][pol], 1);
			}
	if (rc)
		goto out;
	if (!cache) {
		cache = machine_l1d_bytes(&source) / line * line;
		for (size_t k = 0; k < nmc && !cache_name; k++)
			if (strncmp(mc[k].name, "L1", 2) == 0)
				cache_name = mc[k].name;
	}
	if (cache % line)
		cache = (cache / line + 1) * line;
	for (int i = 0; i < 2 && rc == 0; i++) {
		rc = demo_hot_make("compare", argv[optind + i], p[i], policy, cache, flags,
		                   debug_dir, false, &l[i]);
		if (rc == 0)
			rc = demo_hot_rows(l[i], DEMO_BY_LINE, &hr[i], &nh[i]);
	}
	if (rc == 0 && !(changes = match_lines(hr[0], nh[0], hr[1], nh[1], &nc)))
		rc = demo_fail("compare", "out of memory");
	if (rc == 0) {
		if (json)
			rc = print_json(argv + optind, rows, nrows, changes, nc, top, cache, policy,
			                flags);
		else
			print_text(argv + optind, rows, nrows, changes, nc, top, cache, cache_name,
			           policy, flags);
		if (rc == 0)
			rc = demo_finish_stdout("compare");
	}
out:
	free(changes);
	for (int i = 0; i < 2; i++) {
		free(hr[i]);
		lomas_hot_list_free(l[i]);
		lomas_profile_free(p[i]);
	}
	return rc;
}

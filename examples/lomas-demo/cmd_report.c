/*
 * lomas-demo report: a profile's summary and its working-set graph in the
 * terminal (80 columns), with this machine's data caches marked.
 */
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "demo.h"

enum { OPT_COLD = 256, OPT_COLOR, OPT_NO_COLOR, OPT_CI, OPT_NO_CI };

/* Confidence bands by default up to this many samples (a bootstrap costs ~100 curves). */
#define CI_AUTO_MAX_SAMPLES 200000
#define CI_RESAMPLES 100

/* The graph: x = log2(cache bytes) from 2^LOG_MIN to 2^LOG_MAX, COLS_PER_OCTAVE per octave. */
#define LOG_MIN 10
#define LOG_MAX 30
#define COLS_PER_OCTAVE 3
#define GRAPH_W ((LOG_MAX - LOG_MIN) * COLS_PER_OCTAVE + 1) /* 61 */
#define GRAPH_H 17                                          /* rows; labels every 4 */
#define MARGIN 9 /* columns before the plot, plus one: "100.0% |" */
struct paint {
	bool on;
	const char *random, *lru, *both, *cache, *reset;
	const char *band; /* the 95 % bands' shading */
};

/* 95 % confidence bands: [policy 0 random, 1 lru][0 lo, 1 hi], or NULL. */
typedef double *const bands[2][2];

/* The column of a cache size on the graph's log2 axis, or -1 outside it. */
static int column_of(uint64_t bytes)
{
	double c = (log2((double)bytes) - LOG_MIN) * COLS_PER_OCTAVE;
	if (c < -0.5 || c > GRAPH_W - 0.5)
		return -1;
	return (int)lround(c);
}

/* The cache size of column c, rounded to a positive multiple of the line size. */
static uint64_t size_of_column(int c, uint32_t line)
{
	double b = exp2(LOG_MIN + (double)c / COLS_PER_OCTAVE);
	uint64_t lines = (uint64_t)llround(b / line);
	return (lines ? lines : 1) * line;
}

/* A round upper bound for the y axis: 1, 2 or 5 times a power of ten, at most 1. */
static double y_top(double max)
{
	static const double steps[] = {0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0};
	for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++)
		if (max <= steps[i] * (1 + 1e-9))
			return steps[i];
	return 1.0;
}

static int row_of(double v, double top)
{
	double r = (1.0 - v / top) * (GRAPH_H - 1);
	if (!(r >= 0)) /* also NaN */
		r = 0;
	if (r > GRAPH_H - 1)
		r = GRAPH_H - 1;
	return (int)lround(r);
}

/* Print text from the profile (or a path) escaped: it is not ours to send to a terminal. */
static void put_escaped(const char *fmt, const char *text)
{
	size_t cap = 4 * strlen(text) + 1; /* an escape is at most 4 bytes a byte */
	char *buf = malloc(cap);
	printf(fmt, buf ? demo_escape(text, buf, cap) : "?");
	free(buf);
}

static void print_summary(const char *path, const lomas_profile *p, const lomas_profile_info *in)
{
	size_t nmeta = lomas_profile_meta_count(p);
	double s = in->samples ? (double)in->samples : 1;
	put_escaped("profile %s\n", path);
	for (size_t i = 0; i < nmeta; i++) {
		const char *k, *v;
		if (lomas_profile_meta_at(p, i, &k, &v) == LOMAS_OK) {
			put_escaped("  %-12s ", k);
			put_escaped("%s\n", v);
		}
	}
	printf("  %-12s %" PRIu32 " bytes\n", "line size", in->line_bytes);
	printf("  %-12s %" PRIu64 " in %" PRIu64 " thread%s, %" PRIu64 " window%s\n", "references",
	       in->refs, in->threads, in->threads == 1 ? "" : "s", in->windows,
	       in->windows == 1 ? "" : "s");
	printf("  %-12s %" PRIu64 ": %" PRIu64 " reused (%.1f%%), %" PRIu64
	       " dangling (%.1f%%), %" PRIu64 " censored (%.1f%%)\n",
	       "samples", in->samples, in->reused, 100.0 * (double)in->reused / s, in->dangling,
	       100.0 * (double)in->dangling / s, in->censored, 100.0 * (double)in->censored / s);
	if (in->samples)
		printf("  %-12s %.1f references per sample\n", "mean weight",
		       in->sample_weight / (double)in->samples);
}

/* The x axis: a rule, size labels every two octaves, cache marks with names. */
static void print_axis(const struct cache_level *caches, size_t ncaches, const struct paint *pt)
{
	char labels[GRAPH_W + 8], marks[GRAPH_W + 8], names[2][GRAPH_W + 16];
	int used[2] = {0, 0};
	printf("%*s+", MARGIN - 2, "");
	for (int c = 0; c < GRAPH_W; c++)
		putchar((c % (2 * COLS_PER_OCTAVE)) == 0 ? '+' : '-');
	putchar('\n');
	memset(labels, ' ', sizeof labels);
	for (int o = LOG_MIN; o <= LOG_MAX; o += 2) {
		char b[16];
		int c = (o - LOG_MIN) * COLS_PER_OCTAVE;
		demo_format_bytes(1ull << o, b, sizeof b);
		memcpy(labels + c, b, strlen(b));
	}
	labels[GRAPH_W + 3] = '\0';
	for (int c = GRAPH_W + 2; c >= 0 && labels[c] == ' '; c--)
		labels[c] = '\0';
	printf("%*s%s  bytes\n", MARGIN - 1, "", labels);
	if (!ncaches)
		return;
	/* Marks on one row, names on up to two rows so that they do not collide. */
	memset(marks, ' ', sizeof marks);
	memset(names, ' ', sizeof names);
	for (size_t i = 0; i < ncaches; i++) {
		char b[16], text[32];
		int c = column_of(caches[i].bytes), len, row;
		if (c < 0)
			continue;
		marks[c] = '^';
		demo_format_bytes(caches[i].bytes, b, sizeof b);
		len = snprintf(text, sizeof text, "%s %s", caches[i].name, b);
		row = c >= used[0] ? 0 : 1;
		if (c < used[row] || c + len > GRAPH_W + 14)
			continue;
		memcpy(names[row] + c, text, (size_t)len);
		used[row] = c + len + 1;
	}
	marks[GRAPH_W] = '\0';
	for (int c = GRAPH_W - 1; c >= 0 && marks[c] == ' '; c--)
		marks[c] = '\0';
	printf("%*s%s%s%s\n", MARGIN - 1, "", pt->on ? pt->cache : "", marks,
	       pt->on ? pt->reset : "");
	for (int r = 0; r < 2; r++) {
		if (!used[r])
			continue;
		names[r][used[r] - 1] = '\0';
		printf("%*s%s\n", MARGIN - 1, "", names[r]);
	}
}

static void print_graph(const double *rnd, const double *lru, bands band,
                        const struct cache_level *caches, size_t ncaches, bool cold,
                        const struct paint *pt)
{
	char grid[GRAPH_H][GRAPH_W];
	bool cache_col[GRAPH_W] = {false};
	double max = 0, top;
	for (int c = 0; c < GRAPH_W; c++) {
		max = fmax(max, rnd[c]);
		max = fmax(max, lru[c]);
		for (int pol = 0; pol < 2; pol++)
			if (band[pol][1])
				max = fmax(max, band[pol][1][c]);
	}
	top = y_top(max);
	for (size_t i = 0; i < ncaches; i++) {
		int c = column_of(caches[i].bytes);
		if (c >= 0)
			cache_col[c] = true;
	}
	for (int r = 0; r < GRAPH_H; r++)
		for (int c = 0; c < GRAPH_W; c++)
			grid[r][c] = cache_col[c] ? ':' : ' ';
	/* The bands first, as '.', under the curves and the cache marks. */
	for (int pol = 0; pol < 2; pol++)
		for (int c = 0; band[pol][0] && c < GRAPH_W; c++)
			for (int r = row_of(band[pol][1][c], top);
			     r <= row_of(band[pol][0][c], top); r++)
				grid[r][c] = '.';
	for (int c = 0; c < GRAPH_W; c++) {
		int rr = row_of(rnd[c], top), rl = row_of(lru[c], top);
		grid[rr][c] = '*';
		grid[rl][c] = rr == rl ? '#' : 'o';
	}
	printf("\nworking-set graph (fully associative; cold misses %s)\n",
	       cold ? "included" : "excluded");
	for (int r = 0; r < GRAPH_H; r++) {
		if (r % 4 == 0) {
			double v = top * (double)(GRAPH_H - 1 - r) / (GRAPH_H - 1);
			printf("%*.*f%% |", MARGIN - 4, top < 0.01 ? 2 : 1, 100 * v);
		} else {
			printf("%*s|", MARGIN - 2, "");
		}
		int last = GRAPH_W - 1;
		while (last >= 0 && grid[r][last] == ' ')
			last--;
		for (int c = 0; c <= last; c++) {
			const char *color = NULL;
			switch (grid[r][c]) {
			case '*': color = pt->random; break;
			case 'o': color = pt->lru; break;
			case '#': color = pt->both; break;
			case ':': color = pt->cache; break;
			case '.': color = pt->band; break;
			}
			if (pt->on && color)
				printf("%s%c%s", color, grid[r][c], pt->reset);
			else
				putchar(grid[r][c]);
		}
		putchar('\n');
	}
	print_axis(caches, ncaches, pt);
	printf("%*s", MARGIN - 1, "");
	if (pt->on)
		printf("%s*%s random replacement   %so%s LRU   %s#%s both   %s:%s a cache of this "
		       "machine\n",
		       pt->random, pt->reset, pt->lru, pt->reset, pt->both, pt->reset, pt->cache,
		       pt->reset);
	else
		printf("* random replacement   o LRU   # both   : a cache of this machine\n");
	if (band[0][0] || band[1][0])
		printf("%*s%s.%s 95%% confidence band (sampling noise, %d bootstrap replicates)\n",
		       MARGIN - 1, "", pt->on ? pt->band : "", pt->on ? pt->reset : "",
		       CI_RESAMPLES);
}

/* Both policies' curves at sizes, with 95 % bands into b when b[0][0] is not NULL. */
static lomas_status model_curves(const lomas_profile *p, const uint64_t *sizes, size_t n,
                                 unsigned flags, double *rnd, double *lru, bands b)
{
	lomas_status st;
	if (!b[0][0])
		return (st = lomas_model_curve(p, LOMAS_POLICY_RANDOM, sizes, n, 0, flags, rnd))
		           ? st
		           : lomas_model_curve(p, LOMAS_POLICY_LRU, sizes, n, 0, flags, lru);
	st = lomas_model_curve_ci(p, LOMAS_POLICY_RANDOM, sizes, n, 0, flags, 0.95, CI_RESAMPLES, 1,
	                          rnd, b[0][0], b[0][1]);
	if (st == LOMAS_OK)
		st = lomas_model_curve_ci(p, LOMAS_POLICY_LRU, sizes, n, 0, flags, 0.95,
		                          CI_RESAMPLES, 1, lru, b[1][0], b[1][1]);
	return st;
}

/* One policy's miss ratio at one cache (ways 0: fully associative) into *r. */
static int cache_ratio(const lomas_profile *p, const struct cache_level *c, lomas_policy policy,
                       uint64_t bytes, unsigned ways, unsigned flags, double *r)
{
	lomas_status st = lomas_model_curve_assoc(p, policy, &bytes, 1, 0, ways, flags, r);
	if (st != LOMAS_OK)
		return demo_fail_lomas("report", st, "cannot model %s", c->name);
	return demo_check_ratios("report", "the profile", r, 1);
}

/*
 * Both policies' miss ratios at this machine's cache sizes: fully
 * associative, and with each cache's own associativity (sysfs) where its
 * size is a whole number of sets.
 */
static int print_cache_table(const lomas_profile *p, const struct cache_level *caches,
                             size_t ncaches, uint32_t line, unsigned flags)
{
	if (!ncaches)
		return 0;
	printf("\nat this machine's caches (cpu0): fully associative, and with their ways (W):\n");
	printf("  %-6s %8s %5s %9s %9s %9s %9s\n", "cache", "size", "ways", "random", "lru",
	       "random/W", "lru/W");
	for (size_t i = 0; i < ncaches; i++) {
		char b[16], w[16];
		double r = NAN, l = NAN, ra = NAN, la = NAN;
		uint64_t bytes = caches[i].bytes / line * line;
		unsigned ways = caches[i].ways;
		if (bytes == 0)
			bytes = line;
		if (ways && bytes % ((uint64_t)ways * line))
			ways = 0;
		if (cache_ratio(p, &caches[i], LOMAS_POLICY_RANDOM, bytes, 0, flags, &r) ||
		    cache_ratio(p, &caches[i], LOMAS_POLICY_LRU, bytes, 0, flags, &l) ||
		    (ways &&
		     (cache_ratio(p, &caches[i], LOMAS_POLICY_RANDOM, bytes, ways, flags, &ra) ||
		      cache_ratio(p, &caches[i], LOMAS_POLICY_LRU, bytes, ways, flags, &la))))
			return EXIT_USAGE;
		demo_format_bytes(caches[i].bytes, b, sizeof b);
		snprintf(w, sizeof w, "%u", ways);
		printf("  %-6s %8s %5s %8.2f%% %8.2f%%", caches[i].name, b, ways ? w : "-", 100 * r,
		       100 * l);
		if (ways)
			printf(" %8.2f%% %8.2f%%\n", 100 * ra, 100 * la);
		else
			printf(" %9s %9s\n", "-", "-");
	}
	return 0;
}

/* report's options: its getopt table and its help. */
const struct demo_opt report_opts[] = {
    {"cold", OPT_COLD, no_argument, NULL, "count cold misses (excluded by default)", NULL},
    {"color", OPT_COLOR, no_argument, NULL,
     "colour the graph even when standard output is not a terminal", NULL},
    {"no-color", OPT_NO_COLOR, no_argument, NULL, "never colour the graph", NULL},
    {"ci", OPT_CI, no_argument, NULL,
     "shade 95% confidence bands (a bootstrap of the samples; the\n"
     "default for profiles of up to 200000 samples)",
     NULL},
    {"no-ci", OPT_NO_CI, no_argument, NULL, "no bands", NULL},
    {"colour", OPT_COLOR, no_argument, NULL, NULL, NULL},
    {"help", 'h', no_argument, NULL, NULL, NULL},
    {NULL, 0, 0, NULL, NULL, NULL},
};

int cmd_report(int argc, char **argv)
{
	struct paint pt = {false,     "\033[1;31m", "\033[1;36m", "\033[1;35m",
	                   "\033[2m", "\033[0m",    "\033[2;33m"};
	struct cache_level caches[MAX_CACHES];
	unsigned flags = 0;
	int color = -1, c, rc = 0;
	lomas_profile *p;
	lomas_profile_info info = LOMAS_PROFILE_INFO_INIT;
	lomas_status st;
	uint64_t sizes[GRAPH_W];
	double rnd[GRAPH_W], lru[GRAPH_W], lo[2][GRAPH_W], hi[2][GRAPH_W];
	int ci = -1;
	size_t ncaches;

	opterr = 0;
	optind = 1;
	while ((c = demo_getopt(argc, argv, report_opts, false)) != -1) {
		switch (c) {
		case OPT_COLD: flags |= LOMAS_MODEL_COLD; break;
		case OPT_COLOR: color = 1; break;
		case OPT_NO_COLOR: color = 0; break;
		case OPT_CI: ci = 1; break;
		case OPT_NO_CI: ci = 0; break;
		case 'h': return demo_help("report");
		default: return demo_bad_option("report", argv, c);
		}
	}
	if (optind >= argc)
		return demo_fail("report", "missing PROFILE (see 'lomas-demo help report')");
	if (optind + 1 < argc)
		return demo_fail("report", "unexpected argument '%s'", argv[optind + 1]);
	if (color < 0) {
		const char *nc = getenv("NO_COLOR");
		color = isatty(STDOUT_FILENO) && !(nc && *nc);
	}
	pt.on = color == 1;
	p = demo_load("report", argv[optind]);
	if (!p)
		return EXIT_USAGE;
	st = lomas_profile_info_get(p, &info);
	if (st != LOMAS_OK) {
		rc = demo_fail_lomas("report", st, "cannot read '%s'", argv[optind]);
		goto out;
	}
	print_summary(argv[optind], p, &info);
	ncaches = machine_caches(caches, MAX_CACHES);
	for (int k = 0; k < GRAPH_W; k++)
		sizes[k] = size_of_column(k, info.line_bytes);
	if (ci < 0)
		ci = info.samples <= CI_AUTO_MAX_SAMPLES;
	double *const band[2][2] = {{ci ? lo[0] : NULL, ci ? hi[0] : NULL},
	                            {ci ? lo[1] : NULL, ci ? hi[1] : NULL}};
	st = model_curves(p, sizes, GRAPH_W, flags, rnd, lru, band);
	if (st == LOMAS_ERANGE && ci && info.samples > 0) {
		/* Too few samples for a bootstrap: the graph without bands. */
		double *const none[2][2] = {{NULL, NULL}, {NULL, NULL}};
		st = model_curves(p, sizes, GRAPH_W, flags, rnd, lru, none);
		ci = 0;
	}
	if (st == LOMAS_OK && (demo_check_ratios("report", argv[optind], rnd, GRAPH_W) ||
	                       demo_check_ratios("report", argv[optind], lru, GRAPH_W))) {
		rc = EXIT_USAGE;
		goto out;
	}
	if (st != LOMAS_OK && info.samples == 0) {
		printf("\nno working-set graph: the profile has no samples\n");
	} else if (st != LOMAS_OK) {
		fflush(stdout);
		rc = demo_fail_lomas("report", st, "cannot model '%s'", argv[optind]);
		goto out;
	} else {
		double *const shown[2][2] = {{ci ? lo[0] : NULL, ci ? hi[0] : NULL},
		                             {ci ? lo[1] : NULL, ci ? hi[1] : NULL}};
		print_graph(rnd, lru, shown, caches, ncaches, flags & LOMAS_MODEL_COLD, &pt);
		rc = print_cache_table(p, caches, ncaches, info.line_bytes, flags);
		if (rc == 0)
			rc = report_delinquent(argv[optind], p, caches, ncaches, info.line_bytes,
			                       flags);
		if (rc == 0)
			rc = report_phases(argv[optind], p);
	}
	if (rc == 0)
		rc = demo_finish_stdout("report");
out:
	lomas_profile_free(p);
	return rc;
}

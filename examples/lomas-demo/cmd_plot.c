/*
 * lomas-demo plot: the working-set graph as an SVG document for a report:
 * miss ratio against cache size on a log2 axis with binary units, random
 * replacement solid and LRU dashed, one colour per profile with a legend,
 * this machine's caches marked, and a shaded confidence band around a curve
 * where the model gives one. Written with our own small writer (svg.c).
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <libgen.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "demo.h"
#include "svg.h"

enum { OPT_COLD = 256, OPT_SIZES, OPT_POLICY, OPT_TITLE, OPT_NO_BANDS };

#define WIDTH 880.0
#define LEFT 78.0 /* the plot area */
#define RIGHT 850.0
#define TOP 78.0
#define BOTTOM 460.0
#define MAX_PROFILES 8

/* Okabe & Ito's palette: told apart with any colour vision, and in grey. */
static const char *const colors[MAX_PROFILES] = {"#0072B2", "#D55E00", "#009E73", "#CC79A7",
                                                 "#E69F00", "#56B4E9", "#000000", "#999999"};

/* One curve: a profile under one policy, with its band where there is one. */
struct series {
	const char *label; /* the profile's name in the legend */
	lomas_policy policy;
	const char *color;
	double *ratio;   /* n values */
	double *lo, *hi; /* the band, or NULL */
};

/* The axes' mapping from data to the page. */
struct axes {
	double lx0, lx1; /* log2 of the sizes at the left and right edges */
	double ytop;     /* the miss ratio at the top edge */
};

static double px_x(const struct axes *a, double bytes)
{
	return LEFT + (log2(bytes) - a->lx0) / (a->lx1 - a->lx0) * (RIGHT - LEFT);
}

static double px_y(const struct axes *a, double ratio)
{
	return BOTTOM - ratio / a->ytop * (BOTTOM - TOP);
}

/*
 * The confidence band of a curve: the 95 % interval of lomas_model_curve_ci
 * from BAND_RESAMPLES bootstrap replicates (as report draws it), with a
 * fixed seed so that the same profile gives the same picture. False where
 * the model gives none (too few samples), and then the curve has no band.
 */
#define BAND_RESAMPLES 100

static bool curve_band(const lomas_profile *p, lomas_policy policy, const uint64_t *sizes, size_t n,
                       unsigned flags, double *lo, double *hi)
{
	double *r = malloc(n * sizeof *r);
	bool ok = r && lomas_model_curve_ci(p, policy, sizes, n, 0, flags, 0.95, BAND_RESAMPLES, 1,
	                                    r, lo, hi) == LOMAS_OK;
	for (size_t i = 0; ok && i < n; i++)
		ok = isfinite(lo[i]) && isfinite(hi[i]) && lo[i] <= hi[i];
	free(r);
	return ok;
}

/* "1 KiB", "256 MiB": binary units for the size axis. */
static void size_label(double bytes, char *buf, size_t cap)
{
	static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
	int u = 0;
	while (bytes >= 1024 && u < 5) {
		bytes /= 1024;
		u++;
	}
	if (bytes == floor(bytes))
		snprintf(buf, cap, "%.0f %s", bytes, units[u]);
	else
		snprintf(buf, cap, "%.3g %s", bytes, units[u]);
}

/* A round top for the y axis: 1, 2 or 5 times a power of ten, at most 1. */
static double round_top(double max)
{
	double t = 1e-4;
	while (t < 1.0) {
		if (max <= t * (1 + 1e-9))
			return t;
		if (max <= 2 * t * (1 + 1e-9))
			return 2 * t;
		if (max <= 5 * t * (1 + 1e-9))
			return 5 * t;
		t *= 10;
	}
	return 1.0;
}

static void draw_axes(svg *s, const struct axes *a)
{
	char lab[64], attrs[512];
	int step = a->lx1 - a->lx0 > 12 ? 2 : 1;
	snprintf(attrs, sizeof attrs,
	         "id=\"axes\" data-x-log2-min=\"%.6f\" data-x-log2-max=\"%.6f\" "
	         "data-px-left=\"%.2f\" data-px-right=\"%.2f\" data-y-max=\"%.9g\" "
	         "data-px-top=\"%.2f\" data-px-bottom=\"%.2f\"",
	         a->lx0, a->lx1, LEFT, RIGHT, a->ytop, TOP, BOTTOM);
	svg_group(s, attrs);
	svg_rect(s, LEFT, TOP, RIGHT - LEFT, BOTTOM - TOP, "fill=\"none\" stroke=\"#444\"");
	/* x: a grid line and a tick every octave, a label every `step`. */
	for (int o = (int)ceil(a->lx0); o <= (int)floor(a->lx1); o++) {
		double x = px_x(a, exp2(o));
		bool major = (o - (int)ceil(a->lx0)) % step == 0;
		svg_line(s, x, TOP, x, BOTTOM, major ? "stroke=\"#ddd\"" : "stroke=\"#eee\"");
		svg_line(s, x, BOTTOM, x, BOTTOM + (major ? 6 : 3), "stroke=\"#444\"");
		if (major) {
			size_label(exp2(o), lab, sizeof lab);
			svg_text(s, x, BOTTOM + 20, "middle", 0, "class=\"xtick\"", lab);
		}
	}
	/* y: five intervals, in percent. */
	for (int k = 0; k <= 5; k++) {
		double v = a->ytop * k / 5.0, y = px_y(a, v);
		if (k > 0 && k < 5)
			svg_line(s, LEFT, y, RIGHT, y, "stroke=\"#ddd\"");
		svg_line(s, LEFT - 6, y, LEFT, y, "stroke=\"#444\"");
		snprintf(lab, sizeof lab, "%.*f%%", a->ytop < 0.05 ? 2 : (a->ytop < 0.5 ? 1 : 0),
		         100 * v);
		svg_text(s, LEFT - 10, y + 4, "end", 0, "class=\"ytick\"", lab);
	}
	svg_text(s, (LEFT + RIGHT) / 2, BOTTOM + 44, "middle", 0, "font-size=\"13\"",
	         "cache size (fully associative, log scale)");
	svg_text(s, 22, (TOP + BOTTOM) / 2, "middle", -90, "font-size=\"13\"", "miss ratio");
	svg_group_end(s);
}

/* This machine's caches: dashed verticals with their names above the plot. */
static void draw_caches(svg *s, const struct axes *a)
{
	struct cache_level c[MAX_CACHES];
	size_t n = machine_caches(c, MAX_CACHES);
	double last_x = -1e9;
	int row = 0;
	svg_group(s, "id=\"caches\"");
	for (size_t i = 0; i < n; i++) {
		char size[32], text[64];
		double x, lx = log2((double)c[i].bytes);
		if (lx < a->lx0 || lx > a->lx1)
			continue;
		x = px_x(a, (double)c[i].bytes);
		svg_line(s, x, TOP, x, BOTTOM,
		         "stroke=\"#777\" stroke-width=\"1.2\" stroke-dasharray=\"2,3\"");
		size_label((double)c[i].bytes, size, sizeof size);
		snprintf(text, sizeof text, "%s %s", c[i].name, size);
		/* Two rows, so that close caches' names do not overlap. */
		row = x - last_x < 90 ? !row : 0;
		svg_text(s, x, TOP - 8 - 14 * row, "middle", 0, "fill=\"#555\" class=\"cache\"",
		         text);
		last_x = x;
	}
	svg_group_end(s);
}

static void draw_series(svg *s, const struct axes *a, const struct series *se, size_t ns,
                        const uint64_t *sizes, size_t n)
{
	double *x = malloc((2 * n + 1) * sizeof *x), *y = malloc((2 * n + 1) * sizeof *y);
	if (!x || !y) {
		free(x);
		free(y);
		return;
	}
	/* Bands first, under every line. */
	for (size_t k = 0; k < ns; k++) {
		char style[256];
		if (!se[k].lo || !se[k].hi)
			continue;
		for (size_t i = 0; i < n; i++) {
			x[i] = x[2 * n - 1 - i] = px_x(a, (double)sizes[i]);
			y[i] = px_y(a, se[k].hi[i]);
			y[2 * n - 1 - i] = px_y(a, se[k].lo[i]);
		}
		snprintf(style, sizeof style,
		         "fill=\"%s\" fill-opacity=\"0.18\" stroke=\"none\" class=\"band\" "
		         "data-policy=\"%s\" data-series=\"%zu\"",
		         se[k].color, se[k].policy == LOMAS_POLICY_LRU ? "lru" : "random", k);
		svg_polygon(s, x, y, 2 * n, style);
	}
	for (size_t k = 0; k < ns; k++) {
		char style[160], attrs[1024], lab[600];
		for (size_t i = 0; i < n; i++) {
			x[i] = px_x(a, (double)sizes[i]);
			y[i] = px_y(a, se[k].ratio[i]);
		}
		snprintf(style, sizeof style, "stroke=\"%s\" stroke-width=\"2\"%s", se[k].color,
		         se[k].policy == LOMAS_POLICY_LRU ? " stroke-dasharray=\"7,4\"" : "");
		snprintf(attrs, sizeof attrs,
		         "class=\"curve\" data-label=\"%s\" data-policy=\"%s\" data-series=\"%zu\"",
		         svg_escape(se[k].label, lab, sizeof lab),
		         se[k].policy == LOMAS_POLICY_LRU ? "lru" : "random", k);
		svg_polyline(s, x, y, n, style, attrs);
	}
	free(x);
	free(y);
}

/*
 * The legend, below the plot where it can hide no curve: one entry per
 * profile (its colour as a solid and a dashed stroke, the two policies),
 * left to right, wrapped at the plot's width, then the bands' note. Text
 * widths are estimated at LEGEND_CHAR px a character (12 px DejaVu Sans
 * averages 7; the estimate errs wide). Returns the height it takes; with
 * draw false it only measures.
 */
#define LEGEND_CHAR 7.4
#define LEGEND_ROW 18.0
#define LEGEND_TOP (BOTTOM + 62.0)

static double draw_legend(svg *s, const struct series *se, size_t ns, bool bands, bool draw)
{
	double x = LEFT, y = LEGEND_TOP, max_text = RIGHT - LEFT - 70.0;
	if (draw)
		svg_group(s, "id=\"legend\"");
	for (size_t k = 0; k <= ns; k++) {
		const char *text = k < ns ? se[k].label : "shaded: 95 % confidence band";
		double tw;
		/* One entry per profile: its first series (the next, if any, is its LRU). */
		if (k < ns && k > 0 && se[k].label == se[k - 1].label)
			continue;
		if (k == ns && !bands)
			break;
		/* A label wider than a row (a long path) shows its end. */
		if ((double)strlen(text) * LEGEND_CHAR > max_text)
			text += strlen(text) - (size_t)(max_text / LEGEND_CHAR) + 1;
		tw = (double)strlen(text) * LEGEND_CHAR;
		if (x > LEFT && x + 70.0 + tw > RIGHT) {
			x = LEFT;
			y += LEGEND_ROW;
		}
		if (draw && k < ns) {
			char style[160];
			for (int d = 0; d < 2; d++) {
				snprintf(style, sizeof style, "stroke=\"%s\" stroke-width=\"2\"%s",
				         se[k].color, d ? " stroke-dasharray=\"7,4\"" : "");
				svg_line(s, x + 30.0 * d, y - 4, x + 30.0 * d + 24, y - 4, style);
			}
			svg_text(s, x + 62, y, "start", 0, NULL, text);
		} else if (draw) {
			svg_rect(s, x, y - 10, 54, 12,
			         "fill=\"#777\" fill-opacity=\"0.18\" stroke=\"none\"");
			svg_text(s, x + 62, y, "start", 0, "fill=\"#555\"", text);
		}
		x += 70.0 + tw + 18.0;
	}
	if (draw)
		svg_group_end(s);
	return y - LEGEND_TOP + LEGEND_ROW;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

/* The legend's name of profile i: its file's base name, or the path when two collide. */
static const char *label_of(char **paths, int np, int i)
{
	const char *b = strrchr(paths[i], '/') ? strrchr(paths[i], '/') + 1 : paths[i];
	for (int j = 0; j < np; j++) {
		const char *o = strrchr(paths[j], '/') ? strrchr(paths[j], '/') + 1 : paths[j];
		if (j != i && strcmp(o, b) == 0)
			return paths[i];
	}
	return b;
}

static int write_svg(const char *out_path, const char *title, const struct series *se, size_t ns,
                     const uint64_t *sizes, size_t n, bool cold, bool bands)
{
	struct axes a;
	double max = 0.0;
	FILE *f = strcmp(out_path, "-") ? fopen(out_path, "w") : stdout;
	svg s;
	char sub[256];
	if (!f)
		return demo_fail("plot", "cannot write '%s': %s", out_path, strerror(errno));
	a.lx0 = floor(log2((double)sizes[0]));
	a.lx1 = ceil(log2((double)sizes[n - 1]));
	if (a.lx1 <= a.lx0)
		a.lx1 = a.lx0 + 1;
	for (size_t k = 0; k < ns; k++)
		for (size_t i = 0; i < n; i++) {
			max = fmax(max, se[k].ratio[i]);
			if (se[k].hi)
				max = fmax(max, se[k].hi[i]);
		}
	/* A little room above the highest curve. */
	a.ytop = round_top(max * 1.05 > 0 ? max * 1.05 : 0.01);
	svg_begin(&s, f, WIDTH, LEGEND_TOP + draw_legend(NULL, se, ns, bands, false), title);
	svg_text(&s, LEFT, 26, "start", 0, "font-size=\"16\" font-weight=\"bold\"", title);
	snprintf(sub, sizeof sub,
	         "fully associative caches, cold misses %s; solid: random replacement, dashed: LRU",
	         cold ? "included" : "excluded");
	svg_text(&s, LEFT, 44, "start", 0, "fill=\"#444\"", sub);
	draw_axes(&s, &a);
	draw_caches(&s, &a);
	svg_group(&s, "id=\"curves\"");
	draw_series(&s, &a, se, ns, sizes, n);
	svg_group_end(&s);
	draw_legend(&s, se, ns, bands, true);
	if (svg_end(&s) != 0 || (f != stdout && fclose(f) != 0)) {
		if (f != stdout)
			remove(out_path);
		return demo_fail("plot", "cannot write '%s'", out_path);
	}
	return 0;
}

/* plot's options: its getopt table and its help. */
const struct demo_opt plot_opts[] = {
    {"output", 'o', required_argument, "FILE",
     "the SVG file to write ('-' for standard output; required)", NULL},
    {"sizes", OPT_SIZES, required_argument, "B1,B2,...",
     "cache sizes (default: 1 KiB to 1 GiB, 4 per octave)", NULL},
    {"policy", OPT_POLICY, required_argument, "random|lru|both",
     "the curves to draw (default both)", NULL},
    {"cold", OPT_COLD, no_argument, NULL, "count cold misses (excluded by default)", NULL},
    {"title", OPT_TITLE, required_argument, "TEXT", "the graph's title", NULL},
    {"no-bands", OPT_NO_BANDS, no_argument, NULL, "no confidence bands (faster on large profiles)",
     NULL},
    {"help", 'h', no_argument, NULL, NULL, NULL},
    {NULL, 0, 0, NULL, NULL, NULL},
};

int cmd_plot(int argc, char **argv)
{
	const char *out = NULL, *list = NULL, *title = "Working-set graph";
	unsigned flags = 0;
	int want = 3, c, rc = 0, np;
	bool no_bands = false, any_band = false;
	lomas_profile *p[MAX_PROFILES] = {NULL};
	struct series se[2 * MAX_PROFILES];
	size_t ns = 0, n = 0;
	uint64_t *sizes = NULL;
	uint32_t line = 8;

	memset(se, 0, sizeof se);
	opterr = 0;
	optind = 1;
	while ((c = demo_getopt(argc, argv, plot_opts, false)) != -1) {
		switch (c) {
		case 'o': out = optarg; break;
		case OPT_COLD: flags |= LOMAS_MODEL_COLD; break;
		case OPT_SIZES: list = optarg; break;
		case OPT_POLICY:
			if (strcmp(optarg, "random") == 0)
				want = 1;
			else if (strcmp(optarg, "lru") == 0)
				want = 2;
			else if (strcmp(optarg, "both") == 0)
				want = 3;
			else
				return demo_fail(
				    "plot", "policy must be random, lru or both, not '%s'", optarg);
			break;
		case OPT_TITLE: title = optarg; break;
		case OPT_NO_BANDS: no_bands = true; break;
		case 'h': return demo_help("plot");
		default: return demo_bad_option("plot", argv, c);
		}
	}
	np = argc - optind;
	if (!out)
		return demo_fail("plot", "missing -o FILE.svg (see 'lomas-demo help plot')");
	if (np < 1)
		return demo_fail("plot", "missing PROFILE (see 'lomas-demo help plot')");
	if (np > MAX_PROFILES)
		return demo_fail("plot", "at most %d profiles in one graph", MAX_PROFILES);
	for (int i = 0; i < np && rc == 0; i++) {
		lomas_profile_info info = LOMAS_PROFILE_INFO_INIT;
		if (!(p[i] = demo_load("plot", argv[optind + i])))
			rc = EXIT_USAGE;
		else if (lomas_profile_info_get(p[i], &info) != LOMAS_OK)
			rc = demo_fail_lomas("plot", LOMAS_EINVAL, "cannot read '%s'",
			                     argv[optind + i]);
		else if (info.line_bytes > line)
			line = info.line_bytes;
	}
	/* Line sizes are powers of two: multiples of the largest suit every profile. */
	if (rc == 0)
		rc = demo_sizes("plot", list, line, &sizes, &n);
	if (rc == 0 && n < 2)
		rc = demo_fail("plot", "a graph needs at least two cache sizes");
	if (rc == 0)
		qsort(sizes, n, sizeof *sizes, cmp_u64); /* the curves run left to right */
	for (int i = 0; i < np && rc == 0; i++) {
		for (int pol = 0; pol < 2 && rc == 0; pol++) {
			struct series *x;
			lomas_status st;
			if (!(want & (1 << pol)))
				continue;
			x = &se[ns++];
			x->label = label_of(argv + optind, np, i);
			x->policy = (lomas_policy)pol;
			x->color = colors[i];
			x->ratio = calloc(n, sizeof *x->ratio);
			x->lo = calloc(n, sizeof *x->lo);
			x->hi = calloc(n, sizeof *x->hi);
			if (!x->ratio || !x->lo || !x->hi) {
				rc = demo_fail("plot", "out of memory");
				break;
			}
			st = lomas_model_curve(p[i], x->policy, sizes, n, 0, flags, x->ratio);
			if (st != LOMAS_OK) {
				rc = demo_fail_lomas("plot", st, "cannot model '%s'",
				                     argv[optind + i]);
				break;
			}
			if ((rc = demo_check_ratios("plot", argv[optind + i], x->ratio, n)))
				break;
			if (no_bands ||
			    !curve_band(p[i], x->policy, sizes, n, flags, x->lo, x->hi)) {
				free(x->lo);
				free(x->hi);
				x->lo = x->hi = NULL;
			}
			any_band |= x->lo != NULL;
		}
	}
	if (rc == 0)
		rc = write_svg(out, title, se, ns, sizes, n, flags & LOMAS_MODEL_COLD, any_band);
	for (size_t k = 0; k < ns; k++) {
		free(se[k].ratio);
		free(se[k].lo);
		free(se[k].hi);
	}
	for (int i = 0; i < np; i++)
		lomas_profile_free(p[i]);
	free(sizes);
	return rc;
}

/*
 * lomas-demo report, the instructions part: the delinquent instructions
 * (the fewest that cover 90 % of the estimated misses, and every one with
 * 1 % of them) at this machine's
 * first two cache levels, with their source lines. Kept apart from
 * cmd_report.c, which draws the curves.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "demo.h"

#define REPORT_TOP 10

#define REPORT_WIDTH 80 /* report's lines fit a terminal of 80 columns */

/* Fit text (escaped already) into width columns: cut on the left, marked "...". */
static const char *fit_left(const char *text, size_t width)
{
	size_t n = strlen(text);
	static char buf[1024];
	if (n <= width || width < 4)
		return text;
	snprintf(buf, sizeof buf, "...%s", text + n - (width - 3));
	return buf;
}

static void print_rows(const lomas_hot_list *l, const struct demo_hot_row *rows, size_t n)
{
	printf("  %6s %10s %6s  %-20s %s\n", "share", "misses", "ratio", "function", "location");
	for (size_t i = 0; i < n; i++) {
		const struct demo_hot_row *r = &rows[i];
		char fn[256], loc[1024], where[300] = "", head[128];
		const char *place;
		size_t room;
		lomas_hot_pc e = LOMAS_HOT_PC_INIT;
		demo_hot_function(r, fn, sizeof fn);
		demo_hot_location(r, true, loc, sizeof loc);
		if (!fn[0])
			snprintf(fn, sizeof fn, "?");
		if (strlen(fn) > 20)
			snprintf(fn + 17, sizeof fn - 17, "...");
		if (!loc[0])
			snprintf(loc, sizeof loc, "0x%" PRIx64, r->pc);
		snprintf(head, sizeof head, "  %5.1f%% %10.0f %5.1f%%  %-20s ", 100 * r->share,
		         r->misses, 100 * r->miss_ratio, fn);
		room = REPORT_WIDTH > strlen(head) ? REPORT_WIDTH - strlen(head) : 8;
		/* A long path: its last part, where the file name and line are. */
		place = fit_left(loc, room);
		/* Where the innermost function was inlined: the line a reader looks for. */
		if (lomas_hot_list_get(l, r->first, &e) == LOMAS_OK && e.inlined > 0) {
			lomas_hot_frame f;
			if (lomas_hot_list_frame(l, r->first, 0, &f) == LOMAS_OK && f.function) {
				char cf[128];
				snprintf(where, sizeof where, " (in %s:%" PRIu32 ")",
				         demo_escape(f.function, cf, sizeof cf), f.line);
				if (strlen(where) + strlen(place) > room)
					where[0] = '\0';
			}
		}
		printf("%s%s%s\n", head, place, where);
	}
}

int report_delinquent(const char *path, const lomas_profile *p, const struct cache_level *caches,
                      size_t ncaches, uint32_t line, unsigned flags)
{
	struct cache_level fallback = {"cache", 32 * 1024, 0}; /* no sysfs here */
	size_t levels = ncaches < 2 ? ncaches : 2;
	if (levels == 0) {
		caches = &fallback;
		levels = 1;
	}
	for (size_t c = 0; c < levels; c++) {
		lomas_hot_list *l = NULL;
		struct demo_hot_row *rows = NULL;
		lomas_hot_info info = LOMAS_HOT_INFO_INIT;
		size_t n = 0, show;
		char size[32];
		uint64_t bytes = caches[c].bytes / line * line;
		int rc;
		if (!bytes)
			bytes = line;
		/* Notes about unsymbolized files once, with the first level. */
		rc = demo_hot_make("report", path, p, LOMAS_POLICY_RANDOM, bytes, flags, NULL,
		                   c > 0, &l);
		if (rc == 0)
			rc = demo_hot_rows(l, DEMO_BY_PC, &rows, &n);
		if (rc) {
			lomas_hot_list_free(l);
			return rc;
		}
		lomas_hot_list_info(l, &info);
		demo_format_bytes(caches[c].bytes, size, sizeof size);
		show = info.delinquent < REPORT_TOP ? info.delinquent : REPORT_TOP;
		printf("\ndelinquent instructions at %s %s (random replacement): ", caches[c].name,
		       size);
		if (info.misses <= 0.0) {
			printf("no misses\n");
		} else {
			printf("%zu of %zu pcs\n", info.delinquent, info.count);
			/* The definition (lomas.h): the fewest covering 90 %, and any with 1 %. */
			printf("(the first %zu: 90%% of %.0f estimated misses; then each pc "
			       "with 1%% or more)%s\n",
			       info.cover90, info.misses,
			       show < info.delinquent ? "; the largest:" : ":");
		}
		print_rows(l, rows, show);
		free(rows);
		lomas_hot_list_free(l);
	}
	return 0;
}

/*
 * What hot, annotate, report and compare share about per-instruction
 * attribution: making the list (with notes on what could not be
 * symbolized), grouping it by source line or function, and naming a row.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "demo.h"

/* Say once per file why its pcs have no names. */
static void notes(const char *cmd, const char *path, const lomas_hot_list *l)
{
	lomas_hot_info info = LOMAS_HOT_INFO_INIT;
	size_t n = lomas_hot_list_count(l);
	const char **seen = calloc(n ? n : 1, sizeof *seen);
	size_t nseen = 0;
	if (lomas_hot_list_info(l, &info) != LOMAS_OK)
		info.has_maps = 1;
	if (!info.has_maps && n > 0) {
		char safe[1024];
		fprintf(stderr,
		        "lomas-demo: %s: note: %s records no memory maps (a lackey trace has "
		        "none unless analyze found the traced program): pcs are shown as "
		        "addresses\n",
		        cmd, demo_escape(path, safe, sizeof safe));
	}
	for (size_t i = 0; i < n && seen; i++) {
		lomas_hot_pc e = LOMAS_HOT_PC_INIT;
		bool dup = false;
		if (lomas_hot_list_get(l, i, &e) != LOMAS_OK || !e.module ||
		    (e.sym != LOMAS_SYM_CHANGED && e.sym != LOMAS_SYM_NO_FILE))
			continue;
		for (size_t k = 0; k < nseen && !dup; k++)
			dup = strcmp(seen[k], e.module) == 0;
		if (dup)
			continue;
		seen[nseen++] = e.module;
		{
			char safe[2048];
			fprintf(stderr, "lomas-demo: %s: note: not symbolized: %s\n", cmd,
			        demo_escape(e.sym_detail, safe, sizeof safe));
		}
	}
	free(seen);
}

int demo_hot_make(const char *cmd, const char *path, const lomas_profile *p, lomas_policy policy,
                  uint64_t cache_bytes, unsigned flags, const char *debug_dir, bool quiet,
                  lomas_hot_list **out)
{
	lomas_status st = lomas_profile_hot_pcs(
	    p, policy, cache_bytes, 0, flags | (debug_dir ? LOMAS_HOT_NO_SYMBOLS : 0), out);
	if (st == LOMAS_OK && debug_dir)
		st = lomas_hot_list_symbolize(*out, p, debug_dir);
	if (st != LOMAS_OK) {
		lomas_hot_list_free(*out);
		*out = NULL;
		return demo_fail_lomas(cmd, st, "cannot attribute the misses of '%s'", path);
	}
	if (!quiet)
		notes(cmd, path, *out);
	return 0;
}

/* Whether entries a and b fall in the same row when grouped by `by`. */
static bool same_group(const lomas_hot_pc *a, const lomas_hot_pc *b, enum demo_hot_by by)
{
	if (by == DEMO_BY_LINE) {
		if (!a->file || !b->file)
			return false;
		return a->line == b->line && strcmp(a->file, b->file) == 0;
	}
	if (!a->function || !b->function)
		return false;
	return strcmp(a->function, b->function) == 0 &&
	       (a->module == b->module ||
	        (a->module && b->module && !strcmp(a->module, b->module)));
}

static int by_row_misses(const void *x, const void *y)
{
	const struct demo_hot_row *a = x, *b = y;
	if (a->misses != b->misses)
		return a->misses > b->misses ? -1 : 1;
	return (a->first > b->first) - (a->first < b->first);
}

int demo_hot_rows(const lomas_hot_list *l, enum demo_hot_by by, struct demo_hot_row **rows,
                  size_t *nrows)
{
	size_t n = lomas_hot_list_count(l), nr = 0;
	struct demo_hot_row *r = calloc(n ? n : 1, sizeof *r);
	lomas_hot_pc *e = calloc(n ? n : 1, sizeof *e);
	double total = 0.0;
	if (!r || !e) {
		free(r);
		free(e);
		return demo_fail("hot", "out of memory");
	}
	for (size_t i = 0; i < n; i++) {
		e[i].size = sizeof e[i];
		lomas_hot_list_get(l, i, &e[i]);
	}
	for (size_t i = 0; i < n; i++) {
		struct demo_hot_row *g = NULL;
		total += e[i].misses;
		/* Entries come largest first: a group's first entry names it. Linear
		 * search: lists are a few thousand pcs at most. */
		if (by != DEMO_BY_PC)
			for (size_t k = 0; k < nr && !g; k++)
				if (same_group(&e[r[k].first], &e[i], by))
					g = &r[k];
		if (!g) {
			g = &r[nr++];
			g->first = i;
			g->pc = e[i].pc;
			g->function = e[i].function;
			g->file = e[i].file;
			g->line = by == DEMO_BY_FUNCTION ? 0 : e[i].line;
			g->module = e[i].module;
			g->module_offset = e[i].module_offset;
			g->sym = e[i].sym;
			g->ratio_fallback = e[i].miss_ratio;
		}
		g->misses += e[i].misses;
		g->refs += e[i].refs;
		g->pcs++;
		g->delinquent |= e[i].delinquent;
	}
	for (size_t k = 0; k < nr; k++) {
		double ratio = r[k].refs > 0.0 ? r[k].misses / r[k].refs : r[k].ratio_fallback;
		r[k].miss_ratio = ratio > 1.0 ? 1.0 : ratio;
		r[k].share = total > 0.0 ? r[k].misses / total : 0.0;
	}
	qsort(r, nr, sizeof *r, by_row_misses);
	free(e);
	*rows = r;
	*nrows = nr;
	return 0;
}

/* path without the current directory in front, when it is under it. */
static const char *short_path(const char *path)
{
	static char cwd[4096];
	static bool have;
	size_t n;
	if (!have) {
		if (!getcwd(cwd, sizeof cwd))
			cwd[0] = '\0';
		have = true;
	}
	n = strlen(cwd);
	if (n > 1 && strncmp(path, cwd, n) == 0 && path[n] == '/')
		return path + n + 1;
	return path;
}

void demo_hot_location(const struct demo_hot_row *r, bool shorten, char *buf, size_t cap)
{
	char raw[4200];
	if (r->file && r->line)
		snprintf(raw, sizeof raw, "%s:%" PRIu32, shorten ? short_path(r->file) : r->file,
		         r->line);
	else if (r->file)
		snprintf(raw, sizeof raw, "%s", shorten ? short_path(r->file) : r->file);
	else if (r->module)
		snprintf(raw, sizeof raw, "%s+0x%" PRIx64,
		         shorten ? short_path(r->module) : r->module, r->module_offset);
	else if (r->pc)
		snprintf(raw, sizeof raw, "0x%" PRIx64, r->pc); /* no map holds it */
	else
		raw[0] = '\0';
	demo_escape(raw, buf, cap);
}

void demo_hot_function(const struct demo_hot_row *r, char *buf, size_t cap)
{
	demo_escape(r->function ? r->function : "", buf, cap);
}

bool demo_parse_by(const char *s, enum demo_hot_by *by)
{
	if (strcmp(s, "pc") == 0)
		*by = DEMO_BY_PC;
	else if (strcmp(s, "line") == 0)
		*by = DEMO_BY_LINE;
	else if (strcmp(s, "function") == 0)
		*by = DEMO_BY_FUNCTION;
	else
		return false;
	return true;
}

bool demo_parse_policy(const char *s, lomas_policy *policy)
{
	if (strcmp(s, "random") == 0)
		*policy = LOMAS_POLICY_RANDOM;
	else if (strcmp(s, "lru") == 0)
		*policy = LOMAS_POLICY_LRU;
	else
		return false;
	return true;
}

bool demo_parse_count(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	if (!*s || *s < '0' || *s > '9')
		return false;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end)
		return false;
	*out = v;
	return true;
}

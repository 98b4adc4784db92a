/*
 * lomas-demo annotate: a source file with each line's estimated misses at
 * one cache size, as cg_annotate shows Cachegrind's counts. A line's misses
 * are those of the instructions whose innermost source line it is.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "demo.h"

enum { OPT_CACHE = 256, OPT_POLICY, OPT_COLD, OPT_DEBUG };

struct line_stat {
	double misses, refs;
	bool seen;
};

/* Whether the debug info's file name names the file the user gave (real: its realpath). */
static bool same_file(const char *dwarf_name, const char *given, const char *real)
{
	char r[PATH_MAX], a[PATH_MAX], b[PATH_MAX];
	if (realpath(dwarf_name, r))
		return strcmp(r, real) == 0;
	/* The source moved since the build: the same base name will do. */
	snprintf(a, sizeof a, "%s", dwarf_name);
	snprintf(b, sizeof b, "%s", given);
	return strcmp(basename(a), basename(b)) == 0;
}

/* Source text for a terminal: tabs expanded (8 columns), the rest escaped. */
static void print_source(const char *text, size_t len)
{
	char exp[4096], safe[16384];
	size_t o = 0, col = 0;
	for (size_t i = 0; i < len && o + 9 < sizeof exp; i++) {
		if (text[i] == '\t') {
			do
				exp[o++] = ' ';
			while (++col % 8);
		} else {
			exp[o++] = text[i];
			col++;
		}
	}
	exp[o] = '\0';
	puts(demo_escape(exp, safe, sizeof safe));
}

/* "1,234,567" for an estimated count. */
static void commas(double v, char *buf, size_t cap)
{
	char raw[64];
	size_t n, o = 0;
	snprintf(raw, sizeof raw, "%.0f", v);
	n = strlen(raw);
	for (size_t i = 0; i < n && o + 2 < cap; i++) {
		buf[o++] = raw[i];
		if ((n - i - 1) % 3 == 0 && i + 1 < n)
			buf[o++] = ',';
	}
	buf[o] = '\0';
}

static int annotate(const char *path, const lomas_hot_list *l, const char *src, FILE *f,
                    const char *real)
{
	size_t n = lomas_hot_list_count(l), cap = 0, maxline = 0;
	struct line_stat *st = NULL;
	lomas_hot_info info = LOMAS_HOT_INFO_INIT;
	double in_file = 0.0;
	char *text = NULL, cbuf[64], pbuf[1024];
	size_t tlen = 0;
	ssize_t got;
	unsigned long lineno = 0;
	lomas_hot_list_info(l, &info);
	for (size_t i = 0; i < n; i++) {
		lomas_hot_pc e = LOMAS_HOT_PC_INIT;
		if (lomas_hot_list_get(l, i, &e) != LOMAS_OK || !e.file || !e.line ||
		    !same_file(e.file, src, real))
			continue;
		if (e.line >= cap) {
			size_t nc = e.line + 1024;
			struct line_stat *ns = realloc(st, nc * sizeof *ns);
			if (!ns) {
				free(st);
				return demo_fail("annotate", "out of memory");
			}
			memset(ns + cap, 0, (nc - cap) * sizeof *ns);
			st = ns;
			cap = nc;
		}
		st[e.line].misses += e.misses;
		st[e.line].refs += e.refs;
		st[e.line].seen = true;
		in_file += e.misses;
		maxline = e.line > maxline ? e.line : maxline;
	}
	demo_format_bytes(info.cache_bytes, cbuf, sizeof cbuf);
	printf("-- %s, %s replacement, %s cache, %u-byte lines, cold misses %s\n",
	       demo_escape(path, pbuf, sizeof pbuf),
	       info.policy == LOMAS_POLICY_LRU ? "LRU" : "random", cbuf, info.line_bytes,
	       info.flags & LOMAS_MODEL_COLD ? "included" : "excluded");
	{
		char a[64], b[64];
		commas(in_file, a, sizeof a);
		commas(info.misses, b, sizeof b);
		printf("-- estimated misses in %s: %s of %s (%.1f%%)\n",
		       demo_escape(src, pbuf, sizeof pbuf), a, b,
		       info.misses > 0 ? 100.0 * in_file / info.misses : 0.0);
	}
	printf("--   misses  share  ratio  line\n");
	while ((got = getline(&text, &tlen, f)) >= 0) {
		size_t len = (size_t)got;
		lineno++;
		while (len && (text[len - 1] == '\n' || text[len - 1] == '\r'))
			len--;
		if (lineno < cap && st[lineno].seen) {
			const struct line_stat *s = &st[lineno];
			char m[64];
			double ratio = s->refs > 0 ? s->misses / s->refs : 0.0;
			commas(s->misses, m, sizeof m);
			printf("%10s %5.1f%% %5.1f%% %5lu  ", m,
			       info.misses > 0 ? 100.0 * s->misses / info.misses : 0.0,
			       100.0 * (ratio > 1.0 ? 1.0 : ratio), lineno);
		} else {
			printf("%10s %6s %6s %5lu  ", ".", ".", ".", lineno);
		}
		print_source(text, len);
	}
	free(text);
	if (maxline > lineno)
		printf("-- note: the debug info names lines up to %zu; the file has %lu (it "
		       "changed since the build?)\n",
		       maxline, lineno);
	if (in_file == 0.0 && info.has_maps)
		printf("-- note: no sampled instruction of the profile is in this file (a "
		       "header? another name in the debug info? see 'lomas-demo hot --by line')\n");
	free(st);
	return 0;
}

/* annotate's options: its getopt table and its help. */
const struct demo_opt annotate_opts[] = {
    {"cache-size", OPT_CACHE, required_argument, "B",
     "the cache size (default: this machine's L1d, from sysfs)", NULL},
    {"policy", OPT_POLICY, required_argument, "random|lru",
     "replacement policy of the model (default random)", NULL},
    {"cold", OPT_COLD, no_argument, NULL, "count cold misses (excluded by default)", NULL},
    {"debug-dir", OPT_DEBUG, required_argument, "DIR",
     "separate debug files under DIR (default /usr/lib/debug)", NULL},
    {"help", 'h', no_argument, NULL, NULL, NULL},
    {NULL, 0, 0, NULL, NULL, NULL},
};

int cmd_annotate(int argc, char **argv)
{
	uint64_t cache = 0;
	lomas_policy policy = LOMAS_POLICY_RANDOM;
	const char *debug_dir = NULL, *source;
	unsigned flags = 0;
	char real[PATH_MAX];
	int c, rc;
	lomas_profile *p;
	lomas_hot_list *l = NULL;
	FILE *f;

	opterr = 0;
	optind = 1;
	while ((c = demo_getopt(argc, argv, annotate_opts, false)) != -1) {
		switch (c) {
		case OPT_CACHE:
			if (!demo_parse_bytes(optarg, &cache) || cache == 0)
				return demo_fail("annotate", "bad cache size '%s'", optarg);
			break;
		case OPT_POLICY:
			if (!demo_parse_policy(optarg, &policy))
				return demo_fail("annotate",
				                 "policy must be random or lru, not '%s'", optarg);
			break;
		case OPT_COLD: flags |= LOMAS_MODEL_COLD; break;
		case OPT_DEBUG: debug_dir = optarg; break;
		case 'h': return demo_help("annotate");
		default: return demo_bad_option("annotate", argv, c);
		}
	}
	if (argc - optind != 2)
		return demo_fail("annotate", "need PROFILE and SOURCE (see 'lomas-demo help "
		                             "annotate')");
	if (!(f = fopen(argv[optind + 1], "r")) || !realpath(argv[optind + 1], real)) {
		if (f)
			fclose(f);
		return demo_fail("annotate", "cannot open '%s': %s", argv[optind + 1],
		                 strerror(errno));
	}
	if (!cache)
		cache = machine_l1d_bytes(&source);
	if (!(p = demo_load("annotate", argv[optind]))) {
		fclose(f);
		return EXIT_USAGE;
	}
	rc = demo_hot_make("annotate", argv[optind], p, policy, cache, flags, debug_dir, false, &l);
	if (rc == 0)
		rc = annotate(argv[optind], l, argv[optind + 1], f, real);
	if (rc == 0)
		rc = demo_finish_stdout("annotate");
	fclose(f);
	lomas_hot_list_free(l);
	lomas_profile_free(p);
	return rc;
}

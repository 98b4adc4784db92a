/*
 * exactsim: exact fully associative cache simulators over a Valgrind lackey
 * --trace-mem=yes trace, the ground truth the model is tested against. It is
 * deliberately independent of liblomas (it links nothing of it).
 *
 *   exactsim [--line-size B] [--sizes B1,B2,...] [--cold] [--seed S] [--runs K]
 *            [--ways W] [--per-pc] FILE|-
 *
 * Prints CSV "size_bytes,random,lru": miss ratios (misses per reference).
 * With --per-pc, the misses attributed to instructions instead: each
 * reference that misses is charged to its own pc (the address of the I
 * line before it), as CSV "size_bytes,policy,pc,misses,refs" (random: the
 * mean over the K runs), one row per size, policy and pc that made a
 * reference.
 * LRU is exact via stack distances (a Fenwick tree over time); random
 * replacement is simulated directly per size and averaged over K seeds.
 * Cold misses (first touch of a line) are excluded unless --cold.
 * With --ways W (W > 0) the caches are W-way set-associative instead: a
 * size of B bytes has B / (line size x W) sets, a line's set is its line
 * number (address / line size) modulo the number of sets, and each set is
 * simulated directly, LRU or random replacement within the set.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void die(const char *msg)
{
	fprintf(stderr, "exactsim: %s\n", msg);
	exit(2);
}

static void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p)
		die("out of memory");
	return p;
}

/* ---- the trace as dense line ids ---- */

typedef struct {
	uint32_t *ids;
	uint64_t *pcs; /* per reference, with --per-pc */
	bool want_pcs;
	size_t n, cap;
	uint64_t *keys; /* open-addressing map line -> id + 1 */
	uint32_t *vals;
	size_t mcap, distinct;
	uint64_t *line_of; /* id -> line number */
	size_t lcap;
} trace;

static uint64_t mix64(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void map_grow(trace *t)
{
	size_t ncap = t->mcap ? t->mcap * 2 : 1024;
	uint64_t *nk = xmalloc(ncap * sizeof *nk);
	uint32_t *nv = calloc(ncap, sizeof *nv);
	if (!nv)
		die("out of memory");
	for (size_t i = 0; i < t->mcap; i++) {
		if (!t->vals[i])
			continue;
		size_t h = mix64(t->keys[i]) & (ncap - 1);
		while (nv[h])
			h = (h + 1) & (ncap - 1);
		nk[h] = t->keys[i];
		nv[h] = t->vals[i];
	}
	free(t->keys);
	free(t->vals);
	t->keys = nk;
	t->vals = nv;
	t->mcap = ncap;
}

static void trace_ref(trace *t, uint64_t line, uint64_t pc)
{
	size_t h;
	if ((t->distinct + 1) * 2 > t->mcap)
		map_grow(t);
	h = mix64(line) & (t->mcap - 1);
	while (t->vals[h] && t->keys[h] != line)
		h = (h + 1) & (t->mcap - 1);
	if (!t->vals[h]) {
		if (t->distinct >= UINT32_MAX - 1)
			die("too many distinct lines");
		t->keys[h] = line;
		t->vals[h] = (uint32_t)++t->distinct;
		if (t->distinct > t->lcap) {
			t->lcap = t->lcap ? t->lcap * 2 : 1024;
			if (!(t->line_of = realloc(t->line_of, t->lcap * sizeof *t->line_of)))
				die("out of memory");
		}
		t->line_of[t->distinct - 1] = line;
	}
	if (t->n == t->cap) {
		t->cap = t->cap ? t->cap * 2 : 1 << 20;
		t->ids = realloc(t->ids, t->cap * sizeof *t->ids);
		if (!t->ids)
			die("out of memory");
		if (t->want_pcs && !(t->pcs = realloc(t->pcs, t->cap * sizeof *t->pcs)))
			die("out of memory");
	}
	if (t->want_pcs)
		t->pcs[t->n] = pc;
	t->ids[t->n++] = t->vals[h] - 1;
}

static void read_lackey(FILE *in, uint64_t line_size, trace *t)
{
	char buf[4096];
	unsigned long lineno = 0;
	uint64_t pc = 0;
	while (fgets(buf, sizeof buf, in)) {
		char *s = buf, *end;
		char kind;
		uint64_t addr;
		lineno++;
		if (!strncmp(buf, "==", 2) || !strncmp(buf, "--", 2) || !strncmp(buf, "**", 2) ||
		    !strncmp(buf, "###", 3))
			continue;
		while (*s == ' ' || *s == '\t')
			s++;
		if (*s == 'I') {
			pc = strtoull(s + 1, NULL, 16);
			continue;
		}
		if (*s == '\n' || *s == '\0')
			continue;
		kind = *s++;
		if (kind != 'L' && kind != 'S' && kind != 'M') {
			fprintf(stderr, "exactsim: line %lu: unexpected record\n", lineno);
			exit(1);
		}
		while (*s == ' ')
			s++;
		errno = 0;
		addr = strtoull(s, &end, 16);
		if (end == s || *end != ',' || errno) {
			fprintf(stderr, "exactsim: line %lu: bad address\n", lineno);
			exit(1);
		}
		trace_ref(t, addr / line_size, pc);
		if (kind == 'M')
			trace_ref(t, addr / line_size, pc);
	}
	if (ferror(in))
		die("read error");
}

/* ---- LRU: stack distance histogram ---- */

/*
 * hist[k] = references with stack distance k (k < distinct); *cold = first
 * touches. dist (n entries, or NULL): each reference's distance, UINT32_MAX
 * for a first touch.
 */
static uint64_t *lru_histogram(const trace *t, uint64_t *cold, uint32_t *dist)
{
	size_t n = t->n;
	uint64_t *hist = calloc(t->distinct + 1, sizeof *hist);
	int64_t *last = xmalloc(t->distinct * sizeof *last);
	int32_t *fen = calloc(n + 1, sizeof *fen);
	if (!hist || !fen)
		die("out of memory");
	for (size_t i = 0; i < t->distinct; i++)
		last[i] = -1;
	*cold = 0;
	for (size_t i = 0; i < n; i++) {
		uint32_t id = t->ids[i];
		if (last[id] < 0) {
			(*cold)++;
			if (dist)
				dist[i] = UINT32_MAX;
		} else {
			/* Distinct lines touched strictly between: marks in (last, i). */
			int64_t cnt = 0;
			for (size_t k = i; k > 0; k -= k & -k)
				cnt += fen[k];
			for (size_t k = (size_t)last[id] + 1; k > 0; k -= k & -k)
				cnt -= fen[k];
			hist[cnt]++;
			if (dist)
				dist[i] = (uint32_t)cnt;
			for (size_t k = (size_t)last[id] + 1; k <= n; k += k & -k)
				fen[k]--;
		}
		for (size_t k = i + 1; k <= n; k += k & -k)
			fen[k]++;
		last[id] = (int64_t)i;
	}
	free(last);
	free(fen);
	return hist;
}

/* ---- random replacement: direct simulation ---- */

static uint64_t rng_state;
static uint64_t rng_next(void)
{
	return mix64(rng_state += 0x9e3779b97f4a7c15ull);
}

/*
 * Non-cold misses of a random-replacement cache of lines lines; with
 * by_ref (n entries), also whether each reference missed (+1 per run).
 */
static uint64_t random_misses(const trace *t, uint64_t lines, uint64_t seed, uint32_t *by_ref)
{
	int32_t *slot_of = xmalloc(t->distinct * sizeof *slot_of);
	uint32_t *slots = xmalloc(lines * sizeof *slots);
	bool *seen = calloc(t->distinct, 1);
	uint64_t used = 0, misses = 0;
	if (!seen)
		die("out of memory");
	memset(slot_of, 0xff, t->distinct * sizeof *slot_of);
	rng_state = seed;
	for (size_t i = 0; i < t->n; i++) {
		uint32_t id = t->ids[i];
		if (slot_of[id] >= 0)
			continue;
		if (seen[id]) {
			misses++;
			if (by_ref)
				by_ref[i]++;
		}
		seen[id] = true;
		if (used < lines) {
			slots[used] = id;
			slot_of[id] = (int32_t)used++;
		} else {
			uint64_t v = (uint64_t)(((unsigned __int128)rng_next() * lines) >> 64);
			slot_of[slots[v]] = -1;
			slots[v] = id;
			slot_of[id] = (int32_t)v;
		}
	}
	free(slot_of);
	free(slots);
	free(seen);
	return misses;
}

/* ---- set-associative caches: each set simulated directly ---- */

/*
 * Non-cold misses of a cache of sets x ways lines, a line's set its line
 * number modulo sets; LRU (each set's ways kept most recent first) or
 * random replacement (a uniformly drawn way of the set).
 */
static uint64_t assoc_misses(const trace *t, uint64_t sets, uint64_t ways, bool lru, uint64_t seed)
{
	uint32_t *way = xmalloc(sets * ways * sizeof *way);
	uint64_t *fill = calloc(sets, sizeof *fill);
	bool *seen = calloc(t->distinct, 1);
	uint64_t misses = 0;
	if (!fill || !seen)
		die("out of memory");
	rng_state = seed;
	for (size_t i = 0; i < t->n; i++) {
		uint32_t id = t->ids[i];
		uint64_t s = t->line_of[id] % sets, f = fill[s], at = f;
		uint32_t *set = way + s * ways;
		for (uint64_t k = 0; k < f; k++)
			if (set[k] == id) {
				at = k;
				break;
			}
		if (at == f) {
			misses += seen[id];
			seen[id] = true;
			if (f < ways) {
				at = fill[s]++;
			} else if (lru) {
				at = ways - 1; /* the least recently used goes */
			} else {
				set[((unsigned __int128)rng_next() * ways) >> 64] = id;
				continue;
			}
		} else if (!lru) {
			continue;
		}
		/* LRU: to the front. */
		for (uint64_t k = at; k > 0; k--)
			set[k] = set[k - 1];
		set[0] = id;
	}
	free(way);
	free(fill);
	free(seen);
	return misses;
}

/* ---- per-instruction attribution ---- */

typedef struct {
	uint64_t pc;
	double misses, refs;
} pc_count;

static int pc_count_cmp(const void *a, const void *b)
{
	const pc_count *x = a, *y = b;
	return (x->pc > y->pc) - (x->pc < y->pc);
}

/* Sum a per-reference miss weight per pc and print the rows of one size and policy. */
static void print_pcs(const trace *t, uint64_t size, const char *policy, const double *miss,
                      pc_count *tmp)
{
	size_t n = 0;
	for (size_t i = 0; i < t->n; i++)
		tmp[i] = (pc_count){t->pcs[i], miss[i], 1.0};
	qsort(tmp, t->n, sizeof *tmp, pc_count_cmp);
	for (size_t i = 0; i < t->n; i++) {
		if (n && tmp[n - 1].pc == tmp[i].pc) {
			tmp[n - 1].misses += tmp[i].misses;
			tmp[n - 1].refs += tmp[i].refs;
		} else {
			tmp[n++] = tmp[i];
		}
	}
	for (size_t i = 0; i < n; i++)
		printf("%" PRIu64 ",%s,0x%" PRIx64 ",%.6f,%.0f\n", size, policy, tmp[i].pc,
		       tmp[i].misses, tmp[i].refs);
}

/*
 * The exact misses of each instruction: LRU from each reference's stack
 * distance (a miss when it is at least the cache's lines), random
 * replacement simulated runs times; cold misses (first touches) only with
 * cold. A reference's miss is charged to the instruction that made it.
 */
static void per_pc_report(const trace *t, const uint64_t *sizes, size_t nsizes, uint64_t line_size,
                          bool cold, uint64_t seed, uint64_t runs)
{
	uint64_t cold_n;
	uint32_t *dist = xmalloc(t->n * sizeof *dist), *by_ref = xmalloc(t->n * sizeof *by_ref);
	double *miss = xmalloc(t->n * sizeof *miss);
	pc_count *tmp = xmalloc(t->n * sizeof *tmp);
	free(lru_histogram(t, &cold_n, dist));
	printf("size_bytes,policy,pc,misses,refs\n");
	for (size_t k = 0; k < nsizes; k++) {
		uint64_t lines = sizes[k] / line_size;
		for (size_t i = 0; i < t->n; i++)
			miss[i] = dist[i] == UINT32_MAX ? (cold ? 1.0 : 0.0)
			                                : (dist[i] >= lines ? 1.0 : 0.0);
		print_pcs(t, sizes[k], "lru", miss, tmp);
		memset(by_ref, 0, t->n * sizeof *by_ref);
		for (uint64_t r = 0; r < runs; r++)
			random_misses(t, lines, seed + r * 7919, by_ref);
		for (size_t i = 0; i < t->n; i++)
			miss[i] = dist[i] == UINT32_MAX ? (cold ? 1.0 : 0.0)
			                                : (double)by_ref[i] / (double)runs;
		print_pcs(t, sizes[k], "random", miss, tmp);
	}
	free(dist);
	free(by_ref);
	free(miss);
	free(tmp);
}

static uint64_t parse_u64(const char *s, const char *what)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 0);
	if (errno || end == s || *end || s[0] == '-') {
		fprintf(stderr, "exactsim: bad %s '%s'\n", what, s);
		exit(2);
	}
	return v;
}

static void usage(void)
{
	fprintf(stderr, "usage: exactsim [--line-size B] [--sizes B1,B2,...] [--cold] "
	                "[--seed S] [--runs K] [--ways W] [--per-pc] FILE|-\n");
	exit(2);
}

int main(int argc, char **argv)
{
	uint64_t line_size = 64, seed = 1, runs = 3, ways = 0, cold_n;
	uint64_t *sizes = NULL;
	size_t nsizes = 0;
	const char *sizes_arg = NULL, *path = NULL;
	bool cold = false, per_pc = false;
	trace t = {0};
	FILE *in;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--line-size") && i + 1 < argc)
			line_size = parse_u64(argv[++i], "line size");
		else if (!strcmp(argv[i], "--sizes") && i + 1 < argc)
			sizes_arg = argv[++i];
		else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
			seed = parse_u64(argv[++i], "seed");
		else if (!strcmp(argv[i], "--runs") && i + 1 < argc)
			runs = parse_u64(argv[++i], "runs");
		else if (!strcmp(argv[i], "--ways") && i + 1 < argc)
			ways = parse_u64(argv[++i], "ways");
		else if (!strcmp(argv[i], "--cold"))
			cold = true;
		else if (!strcmp(argv[i], "--per-pc"))
			per_pc = true;
		else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))
			usage();
		else if (argv[i][0] == '-' && argv[i][1] != '\0')
			usage();
		else if (!path)
			path = argv[i];
		else
			usage();
	}
	if (!path)
		usage();
	if (line_size == 0 || (line_size & (line_size - 1)))
		die("line size must be a power of two");
	if (runs == 0)
		die("runs must be at least 1");
	if (ways && per_pc)
		die("--ways does not combine with --per-pc");
	if (ways > 4096)
		die("ways must be at most 4096");

	if (sizes_arg) {
		char *copy = strdup(sizes_arg), *save = NULL;
		if (!copy)
			die("out of memory");
		sizes = xmalloc((strlen(sizes_arg) / 2 + 2) * sizeof *sizes);
		for (char *tok = strtok_r(copy, ",", &save); tok;
		     tok = strtok_r(NULL, ",", &save)) {
			sizes[nsizes] = parse_u64(tok, "size");
			if (sizes[nsizes] == 0 || sizes[nsizes] % line_size)
				die("sizes must be positive multiples of the line size");
			if (ways && sizes[nsizes] % (line_size * ways))
				die("with --ways, sizes must be whole sets (multiples of line size "
				    "x ways)");
			nsizes++;
		}
		free(copy);
		if (!nsizes)
			usage();
	} else if (ways) {
		die("--ways needs --sizes");
	} else {
		/* 1 KiB .. 1 GiB, 4 per octave, nearest whole line (at least one). */
		nsizes = 81;
		sizes = xmalloc(nsizes * sizeof *sizes);
		for (size_t k = 0; k < nsizes; k++) {
			double lines = floor(pow(2.0, 10.0 + k * 0.25) / (double)line_size + 0.5);
			sizes[k] = (uint64_t)(lines < 1 ? 1 : lines) * line_size;
		}
	}

	in = strcmp(path, "-") ? fopen(path, "r") : stdin;
	if (!in) {
		fprintf(stderr, "exactsim: cannot open %s: %s\n", path, strerror(errno));
		return 1;
	}
	t.want_pcs = per_pc;
	read_lackey(in, line_size, &t);
	if (in != stdin)
		fclose(in);

	if (per_pc) {
		per_pc_report(&t, sizes, nsizes, line_size, cold, seed, runs);
		free(sizes);
		free(t.ids);
		free(t.pcs);
		free(t.keys);
		free(t.vals);
		free(t.line_of);
		return 0;
	}
	if (ways) {
		/* The first touches are the cold misses whatever the geometry. */
		cold_n = t.distinct;
		printf("size_bytes,random,lru\n");
		for (size_t i = 0; i < nsizes; i++) {
			uint64_t sets = sizes[i] / line_size / ways;
			double lru = 0, rnd = 0;
			if (t.n > 0) {
				for (uint64_t r = 0; r < runs; r++)
					rnd += (double)assoc_misses(&t, sets, ways, false,
					                            seed + r * 7919);
				rnd = (rnd / (double)runs + (cold ? (double)cold_n : 0.0)) /
				      (double)t.n;
				lru = (double)(assoc_misses(&t, sets, ways, true, 0) +
				               (cold ? cold_n : 0)) /
				      (double)t.n;
			}
			printf("%" PRIu64 ",%.6f,%.6f\n", sizes[i], rnd, lru);
		}
		free(sizes);
		free(t.ids);
		free(t.keys);
		free(t.vals);
		free(t.line_of);
		return 0;
	}
	uint64_t *hist = lru_histogram(&t, &cold_n, NULL);
	/* tail[k] = references with stack distance >= k. */
	uint64_t *tail = xmalloc((t.distinct + 1) * sizeof *tail);
	tail[t.distinct] = 0;
	for (size_t k = t.distinct; k > 0; k--)
		tail[k - 1] = tail[k] + hist[k - 1];

	printf("size_bytes,random,lru\n");
	for (size_t i = 0; i < nsizes; i++) {
		uint64_t lines = sizes[i] / line_size;
		double lru = 0, rnd = 0;
		if (t.n > 0) {
			uint64_t m = lines < t.distinct ? tail[lines] : 0;
			lru = (double)(m + (cold ? cold_n : 0)) / (double)t.n;
			if (lines < t.distinct) {
				double sum = 0;
				for (uint64_t r = 0; r < runs; r++)
					sum +=
					    (double)random_misses(&t, lines, seed + r * 7919, NULL);
				rnd = sum / (double)runs;
			}
			rnd = (rnd + (cold ? (double)cold_n : 0.0)) / (double)t.n;
		}
		printf("%" PRIu64 ",%.6f,%.6f\n", sizes[i], rnd, lru);
	}
	free(hist);
	free(tail);
	free(sizes);
	free(t.ids);
	free(t.keys);
	free(t.vals);
	free(t.line_of);
	return 0;
}

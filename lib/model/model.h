/*
 * lib/model internal interface: the prepared sample data shared by the
 * StatCache (random replacement) and StatStack (LRU) models.
 *
 * Samples are pooled into groups: segments of a thread's consecutive windows
 * whose distance histograms agree (segment.c), or single windows, or the
 * whole profile. A group's distribution P(RD > k) is estimated from the
 * samples that start in it. A reuse whose interval (start, end) lies inside
 * its group is judged by that distribution alone (the stationary equations
 * of docs/model.md); one that ends in a later group of its thread is a
 * "crossing" reuse, judged by every group its interval crosses, each for its
 * share of the interval (statstack.c, statcache_time.c).
 */
#ifndef LOMAS_MODEL_H
#define LOMAS_MODEL_H

#include <math.h>

#include "../core/core.h"

/*
 * f_L(n) = 1 - (1 - 1/L)^n: the probability that a line is evicted from a
 * random-replacement cache of L lines after n misses. lg = log1p(-1/L).
 */
static inline double model_f(double n, double lg)
{
	if (!(n > 0.0))
		return 0.0;
	return -expm1(n * lg);
}

/* One group of samples: a segment of windows, one window, or the whole profile. */
typedef struct model_group {
	size_t off, n; /* entries [off, off + n): distinct distances, ascending */
	size_t pre;    /* prefix sums at [pre, pre + n]: pre = off + group index */
	double S;      /* total sample weight (every state) */
	double W;      /* weight of finite (reused) samples */
	double D;      /* dangling weight */
	double C;      /* censored weight */
	double refs;   /* weight of the group in the mean (its windows' references) */
	/* The same sums over the finite samples whose reuse ends inside the group
	 * (W0i, Wdi, Wd2i: random replacement's, 0 in model_opts.lru's data). */
	double Wi, W0i, Wdi, Wd2i;
	double E;        /* weight of the reuses (from any group) that end in this one */
	double dmax;     /* largest finite distance (0 if none) */
	uint64_t a, b;   /* the thread clock span [a, b) of its windows */
	uint32_t thread; /* index into model_data.thread_first */
} model_group;

/* A finite sample whose reuse ends in a later group of its thread. */
typedef struct model_cross {
	uint64_t s, e; /* start and end clocks */
	double w;
	uint32_t g0, g1; /* the groups of s and of e */
	uint32_t fixed;  /* also in model_data.fix (StatStack takes it from there) */
	uint32_t reserved;
} model_cross;

/* A finite sample of a reuse class large enough to correct (classes.c). */
typedef struct model_fix {
	uint64_t s, e;
	double w;
	double ht;       /* its own interval's count of last touches (interval.c) */
	double in;       /* ... of all the samples that start in it */
	double d;        /* its distance */
	uint32_t g0, g1; /* the groups of s and of e (equal: a reuse inside g0) */
	uint32_t cls;    /* class index */
} model_fix;

#define MODEL_CLASS_MIN 32

/* How model_data_build groups the samples. */
typedef enum model_grouping {
	MODEL_GROUP_SEGMENT = 0, /* segments of similar windows (the default) */
	MODEL_GROUP_WINDOW,      /* one group per window */
	MODEL_GROUP_GLOBAL,      /* one group for the whole profile */
} model_grouping;

/* A time bin of one thread: a window or a piece of one (pieces.c). */
typedef struct model_piece {
	uint64_t start, refs;
	uint32_t thread; /* (pseudo-)thread index */
	uint32_t window;
} model_piece;

#define MODEL_PIECES_PER_WINDOW 3

/* A profile's pieces, in (thread, clock) order. */
typedef struct model_pieces {
	model_piece *items;
	size_t n;
	size_t *wfirst, *wcount; /* per window: its first piece and how many */
	uint32_t *wthread;       /* per window: its (pseudo-)thread */
	size_t *toff;            /* thread t's pieces: [toff[t], toff[t + 1]) */
	size_t nthreads;
} model_pieces;

lomas_status model_pieces_build(const lomas_profile *p, model_pieces *pc);
void model_pieces_free(model_pieces *pc);
/* A copy of base's pieces, nw windows (a bootstrap replicate's profile has the same). */
lomas_status model_pieces_copy(const model_pieces *base, size_t nw, model_pieces *pc);
/* The piece of window `window` (w) holding thread clock start. */
size_t model_piece_of(const model_pieces *pc, const lomas_window *w, uint32_t window,
                      uint64_t start);

struct model_data;

typedef struct model_opts {
	model_grouping grouping;
	bool time_aware; /* crossing reuses judged by the groups they cross */
	bool moments;    /* also the prefix sums pwdi and pwd2i (statcache.c) */
	bool classes;    /* reuse classes for StatStack's correction (classes.c) */
	bool footprint;  /* the footprint bound (footprint.c) */
	bool lru;        /* for StatStack (wl, pw, pwd), else StatCache (wi) */
	bool per_sample; /* keep each sample's groups in model_data (attribution.c) */
	/* Pieces and groups taken from base (a bootstrap keeps the original's). */
	const struct model_data *base;
} model_opts;

/*
 * The family-wise level of the segmentation's tests: each adjacent pair is
 * tested at MODEL_SEG_ALPHA / windows, so a stationary run of 4000 windows
 * stays one segment (at 1e-3 per test it split into 5 by chance).
 */
#define MODEL_SEG_ALPHA 0.01

/* Samples grouped and sorted once per curve call. */
typedef struct model_data {
	size_t ngroups;
	model_group *groups;  /* each thread's groups consecutive, in clock order */
	size_t nthreads;      /* threads (and windows of unknown threads, one each) */
	size_t *thread_first; /* groups of thread t: [thread_first[t], thread_first[t+1]) */
	double *dangling;     /* per thread: dangling weight (its footprint in lines) */
	double *dangling_w2;  /* per thread: sum of w (w - 1) over dangling samples */
	size_t n;
	double *d;     /* distinct distances per group, ascending */
	double *wi;    /* summed weight of the samples with that distance whose reuse ends
	                  inside the group (random) */
	double *wl;    /* ... of those, the ones in no corrected class (lru) */
	double *pw;    /* exclusive prefix sums within the group of the weight of all the
	                  samples with each distance (lru) */
	double *pwd;   /* ... of that weight times d (lru) */
	double *pwi;   /* ... of wi (only with moments) */
	double *pwdi;  /* ... of wi * d (only with moments) */
	double *pwd2i; /* ... of wi * d * d (only with moments) */
	void *arrays;  /* when not NULL, the one block d .. pwd2i lie in (freed once) */
	size_t ncross;
	model_cross *cross; /* crossing reuses, by end group */
	size_t nfix, nclass;
	model_fix *fix;               /* samples of the corrected classes */
	model_pieces pieces;          /* the time bins */
	uint32_t *piece_group;        /* each piece's group */
	const lomas_profile *profile; /* the samples (the footprint floor reads them) */
	double *distinct;             /* per thread: distinct sampled lines, -1 until counted */
	double *once;                 /* per thread: of those, the lines sampled only once */
	double *sampled;              /* per thread: samples (a bound on distinct) */
	double *sdfloor;              /* per thread: lines its reuses see, -1 until counted */
	/*
	 * Only with model_opts.per_sample (else NULL), per sample of the
	 * profile: the groups of its start and of its end (the start's for
	 * samples not reused), and 1 if its reuse class is corrected (it is
	 * then in fix, in sample order).
	 */
	uint32_t *sample_g0, *sample_g1;
	uint8_t *sample_fixed;
	size_t nexact; /* reused samples with LOMAS_SAMPLE_EXACT_SD (then LRU keeps the above) */
	/* The profile starts with the program (model_opts.footprint): a random
	 * cache evicts nothing until it is full (model_evicting_cold). */
	bool cold_start;
} model_data;

/*
 * Build model data from p. LOMAS_EFORMAT for samples naming unknown windows
 * or states; LOMAS_ERANGE when no sample has weight.
 */
lomas_status model_data_build(const struct lomas_profile *p, const model_opts *o, model_data *m);
void model_data_free(model_data *m);

/*
 * Segment the pieces (segment.c): sample i is in piece sample_piece[i] and
 * histogram bin sample_bin[i] (model_seg_bin); consecutive pieces of a
 * thread whose histograms agree at level alpha share a segment.
 * piece_group[k] gets piece k's segment, numbered in piece order; *ngroups
 * the count.
 */
lomas_status model_segment(const uint32_t *sample_piece, const uint8_t *sample_bin, size_t n,
                           const model_pieces *pc, double alpha, uint32_t *piece_group,
                           size_t *ngroups);
#define MODEL_BIN_DANGLING 129
#define MODEL_BIN_CENSORED 130

/*
 * The segmentation's histogram bin of sample s: floor(2 log2(d + 1))
 * without a logarithm (the octave, and whether past sqrt(2) in it), or
 * MODEL_BIN_DANGLING or MODEL_BIN_CENSORED. Inline: it is made for every
 * sample in model_data_build's one pass.
 */
static inline uint8_t model_seg_bin(const lomas_sample *s)
{
	uint64_t v, half;
	unsigned k;
	if (s->state == LOMAS_SAMPLE_DANGLING)
		return MODEL_BIN_DANGLING;
	if (s->state == LOMAS_SAMPLE_CENSORED)
		return MODEL_BIN_CENSORED;
	v = sample_distance(s) + 1;
	if (v == 0)
		return 127; /* d = 2^64 - 1 */
	k = 63u - (unsigned)__builtin_clzll(v);
	/* floor(sqrt(2) 2^k) from sqrt(2) 2^63 = 0xb504f333f9de6484.8...; never equal to v > 1. */
	half = 0xb504f333f9de6484ull >> (63 - k);
	return (uint8_t)(2 * k + (v > half));
}

/* The reuse class key of the reused sample s of (pseudo-)thread thread, never 0 (classes.c). */
uint64_t model_class_key(const lomas_sample *s, uint32_t thread);

/*
 * Classify p's finite samples (classes.c): *fixed (malloc'd) lists, in
 * sample order, the *nfixed samples of classes of at least
 * MODEL_CLASS_MIN; m->fix gets them with their own interval counts.
 * sample_piece: each sample's piece; hint: each sample's class hint
 * (model_class_hint), 0 for the samples that have none (not reused, or
 * reused across groups). sketch: the hints counted (model_sketch_add). one:
 * the samples are of one thread, in start order. Only the samples whose
 * hint passes the sketch get their class key (a few percent of them).
 */
lomas_status model_classes(const lomas_profile *p, const uint32_t *sample_piece,
                           const uint32_t *hint, const uint8_t *sketch, bool one, model_data *m,
                           uint32_t **fixed, size_t *nfixed);

/*
 * A filter before the exact count of the classes: two rows of
 * 2^MODEL_SKETCH_BITS saturating byte counters indexed by different bits
 * of a 32-bit hint of the key (2 << MODEL_SKETCH_BITS bytes, zeroed); a
 * hint counted fewer than MODEL_CLASS_MIN times in either row cannot make
 * a class. Most keys of a program with few instructions pass (and are
 * counted exactly), most of a profile with scattered instructions do not,
 * and then the exact table stays small (hashing every key of a million
 * samples into it cost 300 ms, in cache misses). Counted as the samples
 * are read.
 *
 * The hint is a function of the key's parts (thread, start and end pc,
 * the distance's 1/8 octave), so a class's samples share it and a class
 * always passes; it is cheaper than the key (three independent
 * multiplications, no chain of them) and half its size, and the full key
 * is computed only for the samples that pass (2 % of bench_model's): the
 * keys of every sample were a sixth of an LRU curve's time.
 */
#define MODEL_SKETCH_BITS 18
#define MODEL_SKETCH_A(h) ((size_t)(h) & (((size_t)1 << MODEL_SKETCH_BITS) - 1))
#define MODEL_SKETCH_B(h) \
	(((size_t)1 << MODEL_SKETCH_BITS) + ((size_t)(h) >> (32 - MODEL_SKETCH_BITS)))

/* The distance's 1/8 octave (the octave and the 3 bits after its leading one), 0..519. */
static inline unsigned model_class_octave(const lomas_sample *s)
{
	uint64_t v = sample_distance(s) + 1;
	unsigned k = v ? 63u - (unsigned)__builtin_clzll(v) : 64u;
	unsigned sub = k >= 3 ? (unsigned)(v >> (k - 3)) & 7u : (unsigned)(v << (3 - k)) & 7u;
	return 8u * k + sub;
}

/* The class hint of the reused sample s of (pseudo-)thread thread, never 0. */
static inline uint32_t model_class_hint(const lomas_sample *s, uint32_t thread)
{
	uint64_t h = s->start_pc * 0x9e3779b97f4a7c15ull + s->end_pc * 0xc2b2ae3d27d4eb4full +
	             ((uint64_t)thread << 16 | model_class_octave(s)) * 0x165667b19e3779f9ull;
	uint32_t r = (uint32_t)(h >> 32);
	return r ? r : 1;
}

static inline void model_sketch_add(uint8_t *c, uint32_t hint)
{
	uint8_t *a = &c[MODEL_SKETCH_A(hint)], *b = &c[MODEL_SKETCH_B(hint)];
	*a += *a < 255;
	*b += *b < 255;
}

/* Bring hint's two counters towards the cache (model_sketch_add's addresses). */
static inline void model_sketch_prefetch(const uint8_t *c, uint32_t hint)
{
	__builtin_prefetch(&c[MODEL_SKETCH_A(hint)], 1);
	__builtin_prefetch(&c[MODEL_SKETCH_B(hint)], 1);
}

/*
 * For the samples list[0..nlist) (ascending indices), into ht[k] for
 * list[k]: the Horvitz-Thompson count of references strictly inside
 * (start, end) whose reuse ends beyond end, from the samples of the same
 * thread[] (NULL: all of one thread, in start order), and into in[k] that
 * of all the references inside (interval.c).
 */
lomas_status model_interval_counts(const lomas_profile *p, const uint32_t *thread,
                                   const uint32_t *list, size_t nlist, double *ht, double *in);

/*
 * How the curves average their per-group miss ratios: weighted by the
 * groups' reference counts when the profile has them, else by sample weight.
 * total is the denominator, summed over the groups that have samples.
 */
typedef struct model_mean {
	bool by_refs;
	double total;
} model_mean;

model_mean model_mean_of(const model_data *m);

/* A group's weight in that mean. */
static inline double model_mean_weight(const model_mean *w, const model_group *g)
{
	return w->by_refs ? g->refs : g->S;
}

/* First index in [lo, hi) of the ascending d with d[i] >= v (or hi). */
static inline size_t model_lower_bound(const double *d, size_t lo, size_t hi, double v)
{
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (d[mid] < v)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The same over ascending uint64_t (lines, clocks). */
static inline size_t model_lower_bound_u64(const uint64_t *d, size_t lo, size_t hi, uint64_t v)
{
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (d[mid] < v)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/*
 * G(x) = sum_{j<x} P(RD > j) of group g: the expected number of distinct
 * lines among x consecutive references (StatStack's SD(x) in one group).
 */
double model_stack_sum(const model_data *m, const model_group *g, double x);
/* Number of sizes (ascending lines) at most sd: the sizes a reuse with that stack distance misses.
 */
size_t model_sizes_missed(const double *lines, size_t n, double sd);

/*
 * The expected stack distance of the reuse (s, e) from group k0 to group
 * k1 >= k0 of one thread (statstack.c): time-aware.
 */
double model_reuse_sd(const model_data *m, uint64_t s, uint64_t e, uint32_t k0, uint32_t k1);

/*
 * The stack distance the curve places each reused sample by (statstack_curve,
 * exact_sd.c) into sd[i] (0 for the samples not reused): its exact one where
 * it has it (LOMAS_SAMPLE_EXACT_SD), else the estimate on its path (a
 * corrected class's, a crossing reuse's, its group's sum at its distance)
 * capped at its thread's footprint bound where bound. Needs
 * model_opts.per_sample. The donors (donors.c) are the caller's.
 */
lomas_status model_sample_sds(model_data *m, bool bound, double *sd);

/*
 * The cold-miss rate of each group (first touches per reference), which
 * evict lines like any miss, into c[ngroups] (statcache_time.c).
 */
lomas_status model_cold_rates(const model_data *m, double *c);
/*
 * kappa[g * n + j]: the share of group g's first touches that evict lines
 * in a random cache of lines[j] lines, those after its thread's first
 * lines[j] (statcache_time.c); 1 without m->cold_start.
 */
lomas_status model_evicting_cold(const model_data *m, const double *lines, size_t n, double *kappa);

/*
 * The policies' output, for n sizes: cap[t * n + j], thread t's capacity
 * (non-cold) misses at size j, and cold[j] the cold misses, both as sums of
 * group miss ratios times the groups' weights in the mean (model_mean);
 * the caller zeroes them.
 */

/*
 * The random-replacement model (StatCache, statcache_time.c) for n sizes in
 * lines (ascending). grid: solve on tabulated F (statcache_grid.c; many
 * sizes) instead of per size with Brent.
 */
lomas_status statcache_curve_time(const model_data *m, const double *lines, size_t n, bool grid,
                                  double *cap, double *cold);
/*
 * Its solution: R[g * n + j], group g's (non-cold) miss ratio at size j,
 * the fixed point above; c[g], the cold-miss rates it used
 * (model_cold_rates). statcache_curve_time is this and model_group_misses.
 */
lomas_status statcache_solve_time(const model_data *m, const double *lines, size_t n, bool grid,
                                  double *R, double *c);
#define MODEL_GRID_MIN 8

/* Per-group ratios R[g * n + j] into cap and cold (footprint.c). */
void model_group_misses(const model_data *m, const double *R, size_t n, double *cap, double *cold);

/*
 * The share of thread t's capacity misses that a cache of `lines` keeps
 * under the footprint bound: P(footprint > lines) (footprint.c).
 */
double model_footprint_keep(model_data *m, size_t t, double lines);

/*
 * The footprint of thread t that is exceeded with probability prob (an
 * upper credible bound; INFINITY when there is no estimate).
 */
double model_footprint_upper(model_data *m, size_t t, double prob);

/*
 * The curve from cap and cold: ratios[j] = (sum_t cap keep + cold if
 * with_cold) / total weight; bound: apply the footprint bound.
 */
lomas_status model_finish(model_data *m, const double *lines, size_t n, const double *cap,
                          const double *cold, bool with_cold, bool bound, double *ratios);

/*
 * StatCache root R of group gi for a cache of L lines (0 <= R <= 1) with
 * GSL's Brent solver (tolerance 1e-10): the root of
 * sum_inside w f_L((R + c) d) + extra - R S; hi: a known upper bound on R
 * (the root for a smaller cache, or 1); solver: a gsl_root_fsolver (Brent).
 */
double statcache_group_ratio(const model_data *m, size_t gi, double L, double extra, double c,
                             double hi, void *solver);

/*
 * F(x) = sum_inside w (1 - e^{-x d}) of every group tabulated on a geometric
 * grid of x (statcache_grid.c), to solve each group for many sizes and
 * extras: within ~1.2e-5 of the exact roots.
 */
typedef struct sc_table {
	int jl, jh;     /* grid points [jl, jh + 1] are tabulated */
	double *F, *Fp; /* F and F', indexed by grid point */
	double mom[4];  /* sum wi d^k, k = 1..4 (the series below the grid) */
} sc_table;

typedef struct sc_tables {
	sc_table *t; /* per group */
	double *mem;
	double *x; /* the grid */
} sc_tables;

/* lams: -log1p(-1/L) of the n sizes (ascending sizes: descending lams). */
lomas_status sc_tables_build(const model_data *m, const double *lams, size_t n, sc_tables *T);
void sc_tables_free(sc_tables *T);
/* Group gi's ratios R[n] for the sizes with extra[j] misses and evicting cold rate c[j]. */
void sc_table_solve(const sc_tables *T, const model_data *m, size_t gi, const double *lines,
                    const double *lams, size_t n, const double *extra, const double *c, double *R);

/*
 * The exact stack distance is an integer: the estimate is rounded to the
 * nearest one before it is compared with L (a reuse whose estimate is 255.6
 * lines misses in 256). Cyclic walks over 2^k lines put whole classes of
 * reuses at exactly L - 1 or L, where the unrounded comparison is a coin
 * toss for an estimate that is right to half a line. A reuse with expected
 * stack distance sd misses in L lines when L - MODEL_SD_ROUND <= sd.
 */
#define MODEL_SD_ROUND 0.5

/*
 * The stack distance of each reuse of the corrected classes, m->fix[i],
 * into sd[i]: its time-aware SD blended with its class's ratio estimate
 * (statstack.c), before the footprint cap.
 */
lomas_status model_fix_sds(const model_data *m, double *sd);

/*
 * The exact stack distances (LOMAS_SAMPLE_EXACT_SD) in StatStack's buckets
 * (exact_sd.c): each such sample's weight moves from the bucket of its
 * estimate (capped at top[thread]) to that of its distance. bucket[t (n +
 * 1) + k]: thread t's reuse weight that misses exactly the k smallest sizes.
 */
lomas_status model_exact_sd_adjust(const model_data *m, const model_mean *mean, const double *lines,
                                   size_t n, const double *top, double *bucket);

/*
 * The exact samples as donors for the samples without a distance
 * (donors.c): items (opaque) sorted by kind and reuse distance.
 */
typedef struct model_donors {
	void *items;
	size_t n;
} model_donors;
lomas_status model_donors_build(const lomas_profile *p, model_donors *d);
void model_donors_free(model_donors *d);
/*
 * The donors of reused sample s (none when it has its own distance): their
 * distances, scaled to s's reuse distance, into sd and their weights,
 * summing to 1, into w (room for MODEL_DONORS_MAX each); 0 when too few.
 */
size_t model_donors_of(const model_donors *d, const lomas_sample *s, double *sd, double *w);
#define MODEL_DONORS_MAX 256u

/* The LRU model (StatStack, statstack.c) for n sizes in lines (ascending). */
lomas_status statstack_curve(model_data *m, const double *lines, size_t n, bool bound, double *cap,
                             double *cold);

/*
 * The model with explicit options (curve.c), for the tests and benchmarks
 * that compare variants: sizes in bytes, any order.
 */
lomas_status model_curve_opts(const lomas_profile *p, lomas_policy policy,
                              const uint64_t *cache_bytes, size_t n, unsigned flags,
                              const model_opts *o, double *ratios);
/* The defaults of lomas_model_curve for policy. */
model_opts model_default_opts(lomas_policy policy);

/* The public calls' argument checks; *line gets the profile's line size. */
lomas_status model_check_args(const lomas_profile *p, lomas_policy policy,
                              const uint64_t *cache_bytes, size_t n, uint32_t line_bytes,
                              unsigned flags, const double *ratios, uint32_t *line);

/* A size in bytes and its place in the caller's order. */
typedef struct size_ix {
	uint64_t bytes;
	size_t ix;
} size_ix;

/* The sizes in lines, ascending (*lines), and where each came from (*ord); malloc'd. */
lomas_status model_sort_sizes(const uint64_t *cache_bytes, size_t n, uint32_t line, size_ix **ord,
                              double **lines);

/* The policy's curve from prepared data, n sizes in lines ascending, into out. */
lomas_status model_run(model_data *m, lomas_policy policy, const double *lines, size_t n,
                       unsigned flags, bool bound, double *out);

/* ------------------------------------------ per-instruction attribution */

/*
 * Per-sample miss probabilities (attribution.c), with the curves' model
 * (model_default_opts). The caller gives prob, mscale and rscale, one entry
 * per sample of the profile.
 */
typedef struct model_attr {
	double *prob;   /* the probability that the sample's reuse misses (censored:
	                   1; dangling: 1 with LOMAS_MODEL_COLD, else 0) */
	double *mscale; /* the references a unit of its weight stands for among the
	                   curve's misses (its group's refs / S, and under random
	                   replacement the footprint bound's share kept) */
	double *rscale; /* ... among the references (its start group's refs / S) */
	double total;   /* the curve's denominator (model_mean_of) */
	/* Random only (attribution.c): the largest |sum of a group's reuses'
	 * probabilities - (R_g S_g - C_g)| / S_g before they are scaled to it,
	 * over the groups whose ratio is below 1; the groups capped at 1. */
	double resid;
	size_t capped;
} model_attr;

/*
 * For a fully associative cache of `lines` lines (>= 1) under policy:
 * sum_i w_i prob_i mscale_i / total is lomas_model_miss_ratio's ratio for
 * the same size and flags (LOMAS_MODEL_COLD only).
 */
lomas_status model_sample_miss_probs(const lomas_profile *p, lomas_policy policy, double lines,
                                     unsigned flags, model_attr *out);

/*
 * Set-associative caches (assoc.c, assoc_random.c). assoc_shrink: the
 * estimate same / tot (tot2 the sum of squared weights) shrunk towards
 * prior by how far it stands out of z standard deviations of its sampling
 * noise.
 * assoc_random_delta: per size (lines ascending, whole sets of `ways`),
 * the A-way random-replacement ratio less the fully associative one
 * (delta), and that fully associative ratio (fa: the same model's, on the
 * same reuses; 0 where delta is 0 for want of sets).
 */
double assoc_shrink(double same, double tot, double tot2, double prior, double z);
/*
 * A set's expected lines from its K distinct sampled lines (assoc.c); ck,
 * cs: the sampled lines and count of the sets assoc_crowded says stand out.
 */
bool assoc_crowded(double K, double n, uint64_t S);
double assoc_set_load(double K, double n, double unseen, uint64_t S, double ck, double cs);
/*
 * The unseen lines (the footprint's lines no sample names) that the reuses'
 * stack distances alone imply (assoc.c): the 99th percentile (by weight) of
 * sd[i] + 1 over the reused samples (sd in sample order, model_sample_sds)
 * less the distinct sampled lines, at least 0, into *floor.
 */
lomas_status assoc_unseen_floor(const struct lomas_profile *p, const double *sd, double distinct,
                                double *floor);
/* assoc_lru_delta (assoc_lru.c): the same for LRU. */
lomas_status assoc_lru_delta(const struct lomas_profile *p, const double *lines, size_t n,
                             unsigned ways, double *delta, double *fa);
lomas_status assoc_random_delta(const struct lomas_profile *p, const double *lines, size_t n,
                                unsigned ways, double *delta, double *fa);

/* One instruction's share of the misses (hot.c). */
typedef struct model_hot_pc {
	uint64_t pc;
	double misses; /* estimated misses: sum of weight x probability x scale */
	double unseen; /* the part of misses from dangling (cold) or censored samples */
	double refs;   /* estimated references: weight x scale of the samples it started */
	double reuses; /* estimated reuses it made: weight x scale of samples it ended */
	uint64_t started, ended; /* samples started and ended here */
} model_hot_pc;

typedef struct model_hot {
	model_hot_pc *pcs; /* by misses, largest first (then by pc) */
	size_t n;
	size_t cover90;    /* the fewest pcs covering 90 % of the misses: the first cover90 */
	size_t delinquent; /* those and every pc with 1 % of the misses: the first `delinquent` */
	double misses;     /* all estimated misses */
	double refs;       /* the curves' denominator: misses / refs = the miss ratio */
} model_hot;

/*
 * Attribute the misses of a cache of `lines` lines to instructions: a
 * reused sample's miss to its end pc (the instruction that touched the line
 * again and missed); a dangling (with LOMAS_MODEL_COLD) or censored
 * sample's to its start pc (the last instruction seen to touch the line:
 * the one that reuses it is not known). The probabilities are scaled as
 * the curves weigh them (model_attr), so out->misses / out->refs is the
 * curve's miss ratio.
 */
lomas_status model_hot_build(const lomas_profile *p, lomas_policy policy, double lines,
                             unsigned flags, model_hot *out);
void model_hot_free(model_hot *h);

#define MODEL_DELINQUENT_COVER 0.9  /* the delinquent set's share of the misses */
#define MODEL_DELINQUENT_SHARE 0.01 /* and the share that makes any pc delinquent */

#endif

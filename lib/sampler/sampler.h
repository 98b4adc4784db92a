/*
 * lib/sampler internal interface: the sampler core that both in-process
 * clocks compile (the inline runtime, linked into instrumented programs, and
 * the dbi clock's Valgrind tool, which has no libc): the per-thread filter,
 * the watch table, the sample store and its thinning, the exited threads'
 * arena, windows, and the profile assembly the host side does from them.
 *
 * table.c, exited.c and thread.c use no libc beyond memset, memcpy and
 * memmove (the caller passes an allocator); assemble.c builds lomas_profile
 * objects (malloc) and is compiled only into liblomas and liblomas-inline.
 */
#ifndef LOMAS_SAMPLER_H
#define LOMAS_SAMPLER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/core.h"
#include "sampler/phase_sig.h" /* PHASE_CODE_BUCKETS, phase_code_bucket */

/* ------------------------------------------------------------ the filter */

/*
 * The per-thread filter: one byte per 64-byte block, indexed by the block
 * number modulo FILTER_SIZE (so 4 MiB of contiguous memory never alias). Zero
 * means no watched line covers a block that maps there; otherwise the byte is
 * the tag (FILTER_TAG: 0x80 | the next 7 bits of the block number) that all
 * such watched blocks share, or FILTER_ANY when their tags differ. The fast
 * path only tests the byte for non-zero; the slow path's first look compares
 * the tag, so a reference 4 MiB away from a watched line (an alias) costs no
 * watch-table lookup in 127 cases of 128. The watch table keeps the count of
 * watched blocks per byte beside it (wt.fst[].count; saturating at 255, then
 * never decremented) and the XOR of their tags (.tags): when a byte's blocks are
 * down to one, the XOR is that block's tag, and a FILTER_ANY byte becomes it
 * again (left "any", such a byte sent every reference to any block that maps
 * there to the watch table: 54% of the slow path's entries on the tiled
 * workload). The granularity is fixed (not the line size) so the fast
 * path uses constants. In the runtime the filter is the array lomas__filter
 * in the thread's initial-exec TLS, so the hooks test it at a constant
 * offset from %fs with no pointer load.
 */
#define FILTER_SHIFT 6
#define FILTER_BITS 16
#define FILTER_SIZE (1u << FILTER_BITS)
#define FILTER_MASK (FILTER_SIZE - 1u)
#define FILTER_ANY 1u
/* Bytes past the filter's end: the pass plugin's range test (see
 * lomas__range_clean) loads 8 filter bytes at any index with one load and
 * keeps only those inside the filter; the first pad byte mirrors byte 0, so
 * its 16-bit load of a group's two adjacent blocks works at the end too.
 * The rest read as zero. A filter given to the watch table has them. */
#define FILTER_PAD 8u

static inline uint32_t filter_index(uint64_t addr)
{
	return (uint32_t)(addr >> FILTER_SHIFT) & FILTER_MASK;
}

static inline uint8_t filter_tag(uint64_t addr)
{
	return (uint8_t)(0x80u | ((addr >> (FILTER_SHIFT + FILTER_BITS)) & 0x7fu));
}

/* Can a watched line cover addr, by its filter byte? (No means certainly not.) */
static inline bool filter_may_watch(uint8_t byte, uint64_t addr)
{
	return byte == FILTER_ANY || byte == filter_tag(addr);
}

/* ------------------------------------------------------------- samples */

/*
 * A finished (or, at collection, still open) sample in the thread's store: a
 * packed record (core.h). level: weight = base period x 2^level (adaptive
 * thinning); cross is never set (reuse is per thread).
 */
typedef packed_sample isample;

/*
 * Finished samples as packed records (about 12-20 bytes a sample
 * instead of 48), in STORE_FATES streams, each one growing allocation
 * whose unused tail is never touched (zero-fill pages stay unmapped). The
 * store has a level (the thinnings so far); a thinning drops each sample at
 * or below it with probability 1/2, independently, and the survivors' level
 * rises with the store's. A sample above the store's level is not touched.
 * Each sample's fate is drawn when it is pushed: how many of the thinnings
 * that reach it it outlives (F, with P(F >= k) = 2^-k, from the random bits
 * of *fates). It goes to the stream of the level whose thinning drops it
 * (its own level or the store's, whichever is greater, + F), so a thinning
 * drops one whole stream and reads no sample. The samples come out stream
 * by stream, each in the order it was pushed.
 */
#define STORE_FATES 32u
typedef struct store_stream {
	uint8_t *data; /* cap bytes, or NULL (no sample yet) */
	size_t len;    /* bytes of samples */
	size_t cap;    /* bytes allocated */
	uint64_t n;    /* samples */
	isample prev;  /* the newest sample: the next one is encoded relative to it */
} store_stream;

typedef struct sample_store {
	store_stream s[STORE_FATES]; /* by (level + fate) mod STORE_FATES */
	uint64_t n;                  /* samples */
	uint32_t level;              /* thinnings so far */
	rng *fates;                  /* random bits for the fates; NULL: never dropped */
	uint64_t bits;               /* unused bits drawn from *fates */
	unsigned nbits;
	/* Optional (store_reserve): the streams' first allocations, slice k for
	 * stream k, each handed out once (bit k of reserve_used). */
	uint8_t *reserve;
	uint32_t reserve_used;
} sample_store;

/* A stream's first allocation; a reserve holds STORE_FATES of them. */
#define STORE_FIRST_BYTES (256u * 1024u)
#define STORE_RESERVE_BYTES ((size_t)STORE_FATES * STORE_FIRST_BYTES)

/* Walks a store's samples: stream by stream, each in the order pushed. */
typedef struct store_iter {
	const sample_store *st;
	unsigned k; /* streams done */
	const uint8_t *p, *end;
	uint64_t left; /* samples left in stream k */
	isample prev;
} store_iter;

void store_iter_init(store_iter *it, const sample_store *st);
bool store_iter_next(store_iter *it, isample *out);

/* Allocation functions the pure code uses (mmap in the runtime, malloc in tests). */
typedef struct inline_alloc {
	void *(*alloc)(size_t bytes); /* zeroed memory or NULL */
	void (*release)(void *mem, size_t bytes);
	/* mem (old bytes) made bytes long, its contents kept (the rest need not
	 * be zeroed), maybe moved; NULL (mem still valid) when memory ran out. */
	void *(*grow)(void *mem, size_t old, size_t bytes);
} inline_alloc;

extern const inline_alloc inline_malloc_alloc; /* calloc/free/realloc (assemble.c) */

/*
 * Give the store mem (STORE_RESERVE_BYTES from the allocator's own kind of
 * memory: mmap in the runtime) for its streams' first allocations, so that a
 * thread makes one mmap for them, not one per stream (a thread of a
 * multithreaded program waited up to 3 ms on a single mmap while the others
 * took page faults). The allocator must take back and grow any
 * STORE_FIRST_BYTES slice of it on its own (munmap, mremap do). The store
 * gives back what it never handed out in store_free, or when taken.
 */
void store_reserve(sample_store *st, void *mem);
/* Append s; false when memory ran out (the sample is lost and counted by the caller). */
bool store_push(sample_store *st, const inline_alloc *a, const isample *s);
void store_free(sample_store *st, const inline_alloc *a);
/* Move from's samples to to; from is left empty, its fates kept. */
void store_take(sample_store *to, sample_store *from);
/*
 * The store as PSAMPLES blocks (its streams are blocks as they are): the
 * next non-empty stream after the *k done (0 at first), in store_iter's
 * order, as a block of thread's samples of weight base_period x 2^level;
 * false when none is left. The block points into the store.
 */
bool store_next_block(const sample_store *st, unsigned *k, uint32_t thread, double base_period,
                      profile_sample_block *out);
/* Add the store's samples, non-empty streams and their bytes to src's totals. */
void store_add_totals(const sample_store *st, profile_sample_source *src);
/*
 * The adaptive thinning step of period "auto": drop the samples whose fate
 * ends at the store's level (each sample at or below it with probability
 * 1/2, independently) and raise the store's level, and with it the level of
 * the others that were at or below it. It frees the dropped stream, so the
 * store's resident size follows its samples down, and reads no sample.
 */
void store_thin(sample_store *st, const inline_alloc *a);

/* ------------------------------------------------------ exited threads */

/* What the profile needs of an exited thread besides its samples. */
typedef struct exited_info {
	uint64_t tid, refs, lost;
	double base_period;
	uint32_t index;
	uint8_t level; /* period level (period auto) */
	bool adaptive; /* period auto: thinned with the process */
} exited_info;

/* A store's stream, copied: k streams past the store's level (its death
 * level, see store_push, is store_level + k). */
typedef struct exited_stream {
	uint64_t n, len;
	uint8_t k;
} exited_stream;

/* An exited thread: this header, nstreams exited_stream, their bytes. */
typedef struct exited_rec {
	uint64_t size; /* bytes of the record, a multiple of 8 */
	uint64_t tid, refs, lost, n;
	double base_period;
	uint32_t index, store_level;
	uint8_t level, adaptive, nstreams;
} exited_rec;

/*
 * The exited threads' records, one after another (exited.c: no libc but
 * memset, memcpy and memmove; the caller passes the allocator).
 */
typedef struct exited_arena {
	uint8_t *mem;
	size_t len, cap;
	uint64_t count;
	uint32_t thinned_level; /* the level of the last exited_thin */
} exited_arena;

/*
 * Append a thread (info) with the samples of its store st (NULL: none; st
 * is only read). Before the arena grows, every record is brought to level
 * and thinned to floor (exited_thin). False when memory ran out.
 */
bool exited_add(exited_arena *a, const inline_alloc *al, const exited_info *info,
                const sample_store *st, uint32_t level, uint32_t floor);
/* The record after prev (NULL: the first), or NULL. */
const exited_rec *exited_next(const exited_arena *a, const exited_rec *prev);
/* Bring every period-auto record to level and drop its streams below floor
 * (as sampler_thin_to does a thread's store), compacting the arena. */
void exited_thin(exited_arena *a, uint32_t level, uint32_t floor);
/* A read-only store over r's streams (for store_iter, store_next_block). */
void exited_view(const exited_rec *r, sample_store *view);
void exited_free(exited_arena *a, const inline_alloc *al);

/* ----------------------------------------------------------- watch table */

#define WT_NONE UINT32_MAX

/* One open sample: the watched line and what the sample will record. */
typedef struct wt_slot {
	uint64_t line;  /* addr >> line_shift */
	uint64_t start; /* clock of the sampled reference */
	uint64_t addr;
	uint64_t start_pc;
	uint32_t next;  /* next slot in the bucket chain, or in the free list */
	uint32_t older; /* age list: the slot started just before (WT_NONE = oldest) */
	uint32_t newer; /* age list: the slot started just after (WT_NONE = newest) */
	uint8_t kind;
	uint8_t level;
	uint8_t used;
	uint8_t reserved;
} wt_slot;

/*
 * Per filter byte: how many watched blocks map there (saturating at 255) and
 * the XOR of their tags, side by side (one cache line per visit, not two).
 */
typedef struct wt_fstate {
	uint8_t count;
	uint8_t tags;
} wt_fstate;

/*
 * The per-thread watch table: open samples keyed by line, at most capacity
 * of them, an age list (oldest first) for censoring when full, and the
 * filter bytes kept in step with it.
 */
typedef struct watch_table {
	uint32_t capacity;
	uint32_t nbuckets; /* power of two >= capacity */
	uint32_t live;
	uint32_t free_head; /* free list of slots used before (through next) */
	uint32_t bump;      /* slots [bump, capacity) were never used */
	uint32_t oldest, newest;
	unsigned line_shift;
	uint32_t *buckets; /* nbuckets chain heads, stored as ~index: 0 is empty, so
	                      zeroed memory is an empty table and is never written */
	wt_slot *slots;    /* capacity slots */
	wt_fstate *fst;    /* FILTER_SIZE: per filter byte, its blocks' count and tags */
	uint8_t *filter;   /* FILTER_SIZE bytes, or NULL (the table's thread has exited) */
} watch_table;

/* Bytes wt_init needs in mem (slots, buckets, then the filter counts and tags). */
size_t wt_bytes(uint32_t capacity);
/*
 * Lay the table out in mem (zeroed, wt_bytes(capacity) long) with the filter
 * (FILTER_SIZE + FILTER_PAD zeroed bytes, kept in step with the open samples;
 * NULL for none).
 */
void wt_init(watch_table *wt, void *mem, uint32_t capacity, unsigned line_shift, uint8_t *filter);
/* Forget every open sample and clear their filter bytes. */
void wt_clear(watch_table *wt);

/* Is the line of addr watched? (Read-only: no lock needed by the owner.) */
bool wt_watched(const watch_table *wt, uint64_t addr);

/* Where a watched line's sample is: its slot and the link to it. */
typedef struct wt_pos {
	uint32_t slot;
	uint32_t prev;   /* the slot before it in its bucket's chain, or WT_NONE */
	uint32_t bucket; /* its bucket */
} wt_pos;

/* wt_watched that also says where (read-only). */
bool wt_lookup(const watch_table *wt, uint64_t addr, wt_pos *pos);
/* Does pos (from wt_lookup) still hold addr's line? (The table may have
 * changed since: a signal handler's visit.) */
bool wt_pos_valid(const watch_table *wt, uint64_t addr, const wt_pos *pos);
/* wt_touch of the line at pos (valid): end its sample into *out. */
void wt_end(watch_table *wt, const wt_pos *pos, uint64_t clock, uint64_t pc, isample *out);

/*
 * A reference to addr at clock by the instruction pc: if its line is watched,
 * end that sample (REUSED, end = clock) into *out and return true.
 */
bool wt_touch(watch_table *wt, uint64_t addr, uint64_t clock, uint64_t pc, isample *out);

/*
 * Start watching the line of the sampled reference. When the table is full
 * the oldest open sample is dropped: it is written to *censored (CENSORED,
 * end = clock) and the function returns true. The line must not be watched
 * already (call wt_touch for the same reference first).
 */
bool wt_start(watch_table *wt, uint64_t addr, uint64_t clock, uint64_t pc, lomas_ref_kind kind,
              uint8_t level, isample *censored);

/* An open sample as it stands when the run ends: no end yet (DANGLING). */
void wt_slot_to_dangling(const wt_slot *s, isample *out);
/* Copy the open samples (oldest first) as DANGLING into st; false on lost memory. */
bool wt_collect(const watch_table *wt, sample_store *st, const inline_alloc *a);
/* Drop each open sample below level with probability 1/2 (thinning), raising the rest to level. */
void wt_thin(watch_table *wt, rng *r, uint8_t level);

/* ----------------------------------------------------- period auto */

/*
 * Period "auto" starts at 128: a program of a million references gets ~8k
 * samples (at 256, 4k, and up to 1.2 percentage points from exact simulation;
 * at 64 the bundled workloads ran 7% slower, geometric mean). The period
 * doubles (its level rises by one) when all threads together have taken
 * AUTO_FIRST samples at 128, then every AUTO_STEP samples. The samples keep
 * their weights (the period they were taken at) while they are within
 * AUTO_LEVELS - 1 levels of the period's: only older ones are thinned, each
 * halving giving the survivors twice the weight. Halving everything at each
 * doubling (the samples at one weight) kept the samples of only the last
 * level or two: the effective sample count ((sum w)^2 / sum w^2) at the end
 * is about the same, >= 20k, for 40-55% fewer samples taken on runs of
 * 20M-1G references (44k, 58k, 68k, 88k at 20M, 66M, 170M, 1G; with 32k at
 * 128 first, 56k, 70k, 80k, 100k, and the same effective count).
 */
#define AUTO_START_PERIOD 128.0
#define AUTO_FIRST 20000u
#define AUTO_STEP 7500u
#define AUTO_LEVELS 5u
#define AUTO_MAX_LEVEL 40u
#define AUTO_PUBLISH 128u      /* a thread's samples reach the process's count in steps of this */
#define DEFAULT_MAX_LIVE 8192u /* watch-table slots per thread */

/* The lowest level period auto keeps samples at, with the period at level. */
static inline uint32_t auto_floor(uint32_t level)
{
	return level < AUTO_LEVELS ? 0 : level - (AUTO_LEVELS - 1);
}

/* The period's level once all threads together have taken n samples. */
static inline uint32_t auto_level_at(uint64_t n)
{
	uint64_t l = n < AUTO_FIRST ? 0 : 1 + (n - AUTO_FIRST) / AUTO_STEP;
	return l > AUTO_MAX_LEVEL ? AUTO_MAX_LEVEL : (uint32_t)l;
}

/*
 * Bring a thread's samples, finished (done) and open (wt), to the period at
 * level: thin those older than the levels period auto keeps (auto_floor),
 * one level at a time, with the thread's thinning generator.
 */
void sampler_thin_to(sample_store *done, watch_table *wt, rng *thin, uint32_t level,
                     const inline_alloc *a);

/* ------------------------------------------- phase-guided sampling (phase.c) */

/*
 * The online phase tracker of phase-guided sampling (see phase.c): the
 * definitions of the offline detection (lib/model/phases.c): 1024 data
 * buckets, 32 code buckets, cosine threshold 0.8, transition threshold 2.
 * By default a phase with 2000 samples is sampled 16 (2^4) times less often.
 */
#define PHASE_BUCKETS 1024u
#define PHASE_THRESHOLD 0.8
#define PHASE_TRANSITION 2u
#define PHASE_MAX 16u       /* phases kept per thread (later ones stay transitions) */
#define PHASE_CANDIDATES 8u /* candidates kept (the oldest goes) */
#define PHASE_DEFAULT_SAMPLES 2000u
#define PHASE_DEFAULT_SHIFT 4u /* divide 16 */
#define PHASE_MAX_SHIFT 10u    /* divide 1024 */
/* The online tracker's leniency (phase.c): a window stays in the last phase,
 * or is a mixture of it and another, at a similarity of PHASE_THRESHOLD less
 * PHASE_NOISE / sqrt(its samples), at most PHASE_NOISE_MAX less; a run of
 * PHASE_FOREIGN_RUN samples in a row by code outside the sampled phases' main
 * buckets (those at PHASE_KNOWN_RATIO of a phase's busiest or more) bring the
 * full rate back. */
#define PHASE_NOISE 1.6
#define PHASE_NOISE_MAX 0.2
#define PHASE_FOREIGN_RUN 6u
#define PHASE_KNOWN_RATIO 0.25f
/* A phase under min_samples asks for the full rate in the window after each
 * of its windows; after PHASE_TRIES such windows in another phase (it is
 * shorter than the decision's lag) it stops asking (phase.c). */
#define PHASE_TRIES 2u

typedef struct phase_settings {
	uint32_t min_samples; /* a phase's samples before its rate drops (0: default) */
	uint8_t shift;        /* the rate is divided by 2^shift (0: default) */
} phase_settings;

/* A signature: the sum of k windows' bucket counts (a window: k = 1). */
typedef struct phase_sig {
	float data[PHASE_BUCKETS];
	float code[PHASE_CODE_BUCKETS];
	float k;
	uint32_t seen;      /* candidates: windows matched */
	uint32_t misses;    /* phases: full-rate windows asked for it that fell on another */
	uint64_t samples;   /* samples of the windows summed */
	uint64_t code_seen; /* samples with a pc */
} phase_sig;

typedef struct phase_tracker {
	phase_settings set;
	uint64_t window_end; /* clock at which the running window ends; 0 before the first */
	uint32_t current;    /* the last closed window's phase (0: transition) */
	uint32_t last;       /* the last phase a window was in (0: none yet) */
	bool mixed;          /* the last window: a mixture of two sampled phases (phase.c) */
	bool lenient;        /* the last window was judged by the lenient threshold */
	uint8_t shift_now;   /* the shift in force */
	uint32_t nphases, ncand;
	/* Code buckets that the phases with their samples use (bit b: bucket
	 * b), and the run of the latest samples outside them (phase.c). */
	uint32_t known_code, foreign_run;
	phase_sig win; /* the running window */
	phase_sig phases[PHASE_MAX];
	phase_sig cand[PHASE_CANDIDATES];
	/* Statistics: windows closed, those sampled at the lower rate, samples
	 * seen and those drawn at the lower rate; windows kept in the last
	 * phase by the count-aware test, mixtures, and mid-window returns to
	 * the full rate. */
	uint64_t windows, reduced_windows, samples, reduced_samples;
	uint64_t stayed, mixtures, returns;
} phase_tracker;

/* A fresh tracker with settings s (defaults filled in). */
void phase_tracker_init(phase_tracker *pt, const phase_settings *s);
/* Similarity of two signatures: the mean of the noise-corrected data and
 * code cosines (data alone when either has no pc), in [0, 1]. */
double phase_similarity(const phase_sig *a, const phase_sig *b);
/* A sampled reference to line (addr >> line shift) by pc joins the running window. */
void phase_add(phase_tracker *pt, uint64_t line, uint64_t pc);
/* The running window ends: its phase id (1.., 0 = transition), counted
 * there; the running window starts empty. */
uint32_t phase_close(phase_tracker *pt);
/* The shift the rate decision asks for now: the tracker's shift when the
 * last window's phase holds min_samples samples, else 0. */
unsigned phase_shift(const phase_tracker *pt);
/*
 * A sample starts at clock (line, pc), windows of window_refs references:
 * when it is past the running window, that window is closed and the rate
 * decided for the next (shift_now); then the sample joins the running
 * window. True when shift_now changed (the caller redraws its gap).
 */
bool phase_on_sample(phase_tracker *pt, uint64_t clock, uint64_t window_refs, uint64_t line,
                     uint64_t pc);

/* ------------------------------------------------ a thread's sampler (thread.c) */

/* Period auto's budget, one per process: what its threads have taken. */
typedef struct sampler_budget {
	uint64_t taken; /* samples all threads have published (in steps of AUTO_PUBLISH) */
	uint32_t level; /* the period's level: every thread follows at its next sample */
} sampler_budget;

typedef struct sampler_settings {
	uint64_t period; /* mean period in references; 0 = auto */
	uint64_t seed;
	uint32_t max_live; /* watch-table slots */
	unsigned line_shift;
	uint64_t window;   /* window length for phase-guided sampling; 0 = 256 x period */
	bool phase_guided; /* phase-guided sampling (phase.c) */
	phase_settings phase;
} sampler_settings;

/* One thread's sampler: its gaps, its finished samples and its watch table. */
typedef struct sampler_thread {
	uint32_t index; /* creation order: 0 = the first thread */
	bool adaptive;  /* period auto */
	uint8_t level;  /* the period is base_period x 2^level */
	uint32_t unpublished;
	double base_period;
	double gap_log;       /* rng_gap_log of the period in force */
	uint64_t next_sample; /* clock of the next sampled reference */
	uint64_t next_gap;    /* the gap after it, drawn at the period in force */
	uint64_t lost;        /* samples lost for want of memory */
	rng gaps, thin;
	sample_store done;
	watch_table wt;
	/* Phase-guided sampling: the tracker (NULL: off, or no memory for it),
	 * the window length asked for (0 = 256 x the period) and the shift in
	 * force (samples are taken at level + pshift). */
	phase_tracker *phase;
	uint64_t phase_window;
	uint8_t pshift;
} sampler_thread;

/*
 * Start thread index's sampler with settings s: its watch table laid out in
 * wt_mem (zeroed, wt_bytes(s->max_live)) with filter (see wt_init), its
 * generators seeded from s->seed and index as the inline runtime seeds them,
 * its period at the budget's level. Its first reference has clock 0.
 */
void sampler_thread_init(sampler_thread *t, const sampler_settings *s, uint32_t index, void *wt_mem,
                         uint8_t *filter, const sampler_budget *b, const inline_alloc *a);
/* A reference at clock that cannot be due (clock < next_sample): end the
 * sample watching its line, if any (true). */
bool sampler_touch(sampler_thread *t, const inline_alloc *a, uint64_t addr, uint64_t clock,
                   uint64_t pc);
/*
 * A reference at clock: end the sample watching its line, if any; if it is
 * due (clock >= next_sample), start a sample there and draw the next.
 */
void sampler_visit(sampler_thread *t, sampler_budget *b, const inline_alloc *a, uint64_t addr,
                   uint64_t clock, uint64_t pc, lomas_ref_kind kind);
/* Bring the thread to the period at level (auto), thinning its older samples. */
void sampler_thread_to_level(sampler_thread *t, uint32_t level, const inline_alloc *a);
/*
 * The thread has ended: with period auto its unpublished samples join the
 * budget and it is brought to the budget's level; then its open samples
 * join the finished ones, dangling (the table itself is left as it was:
 * the caller gives it back). A thread still running when the run ends is
 * not finished: the caller brings it to the level and reads its open
 * samples as they are.
 */
void sampler_thread_finish(sampler_thread *t, sampler_budget *b, const inline_alloc *a);

/*
 * The window of a phase-guided run, online and in its profile: the one
 * asked for, else PHASE_WINDOW_SAMPLES x 2^shift x the period in force
 * without the phase's shift (at least the default 256 x the period,
 * docs/model.md), so that a window sampled at the lower rate still holds
 * PHASE_WINDOW_SAMPLES samples on average. At 256 x the period a window at
 * 1/16 of the rate held 16: the model, which judges windows by their
 * samples, was 1-2 pp off on the phases workload (0.3-0.7 pp with 64);
 * the online match of so few samples was noisier too.
 */
#define PHASE_WINDOW_SAMPLES 64u
static inline uint64_t phase_window_refs(uint64_t asked, double period, unsigned shift)
{
	double k = (double)(PHASE_WINDOW_SAMPLES << shift), w;
	w = (k > 256.0 ? k : 256.0) * period;
	return asked ? asked : w < 1.0 ? 1 : (uint64_t)w;
}

/* ------------------------------------------------------------- windows */

/* Number of windows of window_refs references covering refs references (>= 1). */
uint64_t windows_count(uint64_t refs, uint64_t window_refs);
/* Window k of a thread with refs references: its start and reference count. */
lomas_window window_at(uint64_t refs, uint64_t window_refs, uint64_t k, uint32_t thread);

/* ----------------------------------------------------- profile assembly */

/* What one thread contributed, for inline_profile_add_thread. */
typedef struct inline_thread_data {
	uint64_t tid;
	uint64_t refs; /* the thread's final clock */
	double base_period;
	const sample_store *done; /* finished samples (any order) */
	const watch_table *open;  /* open samples become dangling (may be NULL) */
} inline_thread_data;

/*
 * Append a thread, its windows (window_refs each) and its samples (weight =
 * base_period x 2^level, window = start / window_refs) to p.
 */
lomas_status inline_profile_add_thread(lomas_profile *p, const inline_thread_data *td,
                                       uint64_t window_refs);

/* Where a thread's samples go in the profile: what turns an isample into a lomas_sample. */
typedef struct inline_sample_place {
	double base_period;
	uint64_t window_refs;
	uint32_t thread;
	uint64_t first_window, nwindows;
} inline_sample_place;

/*
 * inline_profile_add_thread less the samples (td->done and td->open are not
 * read): the thread and its windows, and in *pl where its samples go, for
 * inline_sample_to_profile (the exit path encodes them straight from the
 * store).
 */
lomas_status inline_profile_add_thread_head(lomas_profile *p, const inline_thread_data *td,
                                            uint64_t window_refs, inline_sample_place *pl);
void inline_sample_to_profile(const isample *is, const inline_sample_place *pl, lomas_sample *out);

#endif /* LOMAS_SAMPLER_H */

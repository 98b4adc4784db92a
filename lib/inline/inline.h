/*
 * lib/inline internal interface: the inline clock's pure parts (watch table,
 * sample store, windows, profile assembly) and the runtime's per-thread state
 * shared by the hooks (hooks.c, fast path) and the runtime (runtime.c).
 *
 * The hooks and the runtime live in liblomas-inline (linked into instrumented
 * programs); the pure parts are also compiled into liblomas so the unit tests
 * can drive them with synthetic references.
 */
#ifndef LOMAS_INLINE_INTERNAL_H
#define LOMAS_INLINE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/core.h"

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
 * Finished samples as packed records (table.c: about 12-20 bytes a sample
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

extern const inline_alloc inline_malloc_alloc; /* calloc/free/realloc */

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

/* The exited threads' records, one after another (exited.c). */
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
 * (as rt_thread_to_level does a thread's store), compacting the arena. */
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

/* Copy the open samples (oldest first) as DANGLING into st; false on lost memory. */
bool wt_collect(const watch_table *wt, sample_store *st, const inline_alloc *a);
/* Drop each open sample below level with probability 1/2 (thinning), raising the rest to level. */
void wt_thin(watch_table *wt, rng *r, uint8_t level);

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

/* ------------------------------------------------------ runtime (fast path) */

/*
 * The hooks' per-thread state, in initial-exec TLS: a countdown to the next
 * slow-path visit (here) and the filter (lomas__filter). The countdown is
 * read as signed: a visit is due when it reaches zero or below. The thread's
 * clock (references so far) is zero_clock - countdown: zero_clock is the
 * clock of the reference at which the countdown reaches zero.
 *
 * Two kinds of instrumentation drive it. The sanitizer-coverage hooks
 * (hooks.c) count each reference down by one. The pass plugin
 * (pass/lomas-pass.cpp) charges a whole run of k references (a basic block's
 * references with no call between them) when the run starts, and tells each
 * slow-path visit how many references of the run come after it (info >>
 * REF_AFTER_SHIFT): countdown + after is the countdown a per-reference
 * decrement would have left, so both give the same clock.
 */
struct inline_thread;
typedef struct inline_fast {
	uint64_t countdown; /* signed in effect (int64_t) */
	uint64_t zero_clock;
	struct inline_thread *state;
	uint32_t busy;  /* inside the slow path (a signal handler may re-enter) */
	uint32_t index; /* creation order (0 = the first thread), or UINT32_MAX */
} inline_fast;

/*
 * Reference info passed to the slow path: bits 0-7 the size in bytes, bit 8
 * store, bit 9 REF_NEXT_KNOWN, bits 16-31 "after" (the references of the run
 * after this one), bits 32-47 the next reference's offset. REF_NEXT_KNOWN
 * (pass plugin): the run's next reference, which nothing separates from this
 * one, is at this one's address plus the signed 16-bit offset (the store of
 * a read-modify-write after its load: 0; the next field of a structure,
 * element of an array...); when that lies in this reference's line, the
 * next reference is this one's reuse, at distance 0.
 */
#define REF_STORE_BIT 0x100u
#define REF_NEXT_KNOWN 0x200u
#define REF_AFTER_SHIFT 16
#define REF_NEXT_SHIFT 32

static inline uint64_t ref_after(uint64_t info)
{
	return (info >> REF_AFTER_SHIFT) & 0xffffu;
}

static inline int64_t ref_next_offset(uint64_t info)
{
	return (int16_t)(uint16_t)(info >> REF_NEXT_SHIFT);
}
/* A countdown that never comes due (an exited thread, the exit path). */
#define COUNTDOWN_NEVER ((uint64_t)INT64_MAX / 2)

/* The countdown as a per-reference decrement would have left it at a visit. */
static inline int64_t countdown_at(const inline_fast *f, uint64_t info)
{
	return (int64_t)f->countdown + (int64_t)ref_after(info);
}

/* ------------------------------------------------------ runtime (slow path) */

#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/types.h>

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
#define AUTO_PUBLISH 128u       /* a thread's samples reach rt.auto_taken in steps of this */
#define DEFAULT_MAX_LIVE 8192u  /* watch-table slots per thread */
#define DISABLED_RECHECK 65536u /* references between checks while idle */
#define TRACE_BUF (64u * 1024u)
#define LOCK_SPINS 10000000u /* bounded wait for a thread's lock at exit */

/* A thread's sampler (mmap'd; lives until the process ends or the session is freed). */
typedef struct inline_thread {
	struct inline_thread *next; /* in rt.threads (live) or rt.spare */
	atomic_flag lock;
	uint64_t epoch;
	uint32_t index;
	uint64_t tid;
	inline_fast *fast; /* the owner's TLS */
	rng gaps, thin;
	double base_period;
	double gap_log; /* rng_gap_log of the period in force (base x 2^level) */
	uint8_t level;
	bool adaptive;
	uint64_t next_sample;
	uint64_t next_gap; /* the gap after next_sample, drawn at the period in force */
	/* The least clock the next visit may have (see slow_visit). */
	uint64_t next_clock;
	uint64_t lost;
	uint32_t unpublished; /* period auto: samples taken, not yet added to rt.auto_taken */
	sample_store done;
	watch_table wt;
	void *wt_mem;
	size_t wt_size;
	char *trace;
	size_t trace_len;
} inline_thread;

/* A session's settings (from the environment or lomas_inline_start). */
typedef struct settings {
	uint64_t period; /* 0 = auto */
	uint64_t seed;
	uint32_t line_size;
	uint64_t window; /* 0 = 256 x mean period */
	uint32_t max_live;
} settings;

/* The process-wide state. */
typedef struct inline_runtime {
	pthread_once_t once;
	pthread_mutex_t mu; /* the thread lists, the session */
	pthread_key_t key;
	_Atomic uint64_t epoch;
	_Atomic bool active;
	settings set;
	settings env;
	bool explicit_mode; /* lomas_inline_start was called */
	bool secure;        /* secure execution (AT_SECURE): no LOMAS_*, nothing written */
	bool inherited;     /* LOMAS_OUTPUT/TRACE are an instrumented ancestor's: nothing written */
	bool output_set;    /* LOMAS_OUTPUT was given */
	bool output_ok;
	bool forked_child;
	bool written;
	char output[PATH_MAX];
	char env_error[512];
	char trace_path[PATH_MAX];
	int trace_fd;    /* ours, close-on-exec, checked (trace_id) before each write */
	dev_t trace_dev; /* the trace file's identity */
	ino_t trace_ino;
	bool trace_broken; /* the program took the descriptor and the file could not be reopened */
	atomic_flag trace_lock;
	/* What fd 2 was at start-up (err_ok: it was open): the runtime's
	 * messages go there only while it still is. */
	bool err_ok;
	int say_fd; /* 2 (a copy of it in the child that writes a profile on a signal) */
	dev_t err_dev;
	ino_t err_ino;
	dev_t err_rdev;
	_Atomic uint32_t next_index;
	/* Period auto, one budget for the process: the samples all threads
	 * have taken, and the level of the period (every thread is brought to
	 * it at its next sample). */
	_Atomic uint64_t auto_taken;
	_Atomic uint32_t auto_level;
	_Atomic uintptr_t mu_owner; /* &lomas__fast of the thread holding mu, or 0 */
	uint32_t mu_busy_was;       /* the holder's lomas__fast.busy before it locked */
	_Atomic int dumping;
	inline_thread *threads; /* live */
	inline_thread *spare;   /* exited threads' states, zeroed, for new threads */
	exited_arena exited;    /* exited threads' samples (exited.c) */
	uint64_t threads_lost;  /* exited threads left out of the profile (no memory) */
	/* signals.c: caught[sig] while the runtime's handler is installed for
	 * sig, and then view[sig] is the disposition the program set (SIG_DFL,
	 * its flags and mask): what its sigaction queries return. */
	atomic_flag sig_lock;
	struct sigaction view[NSIG];
	_Atomic bool caught[NSIG];
} inline_runtime;

#define RT_HIDDEN __attribute__((visibility("hidden")))
/* What instrumented code uses directly: the fast path's TLS and the slow path. */
#define RT_EXPORT __attribute__((visibility("default")))

/* runtime.c */
extern __thread inline_fast lomas__fast __attribute__((tls_model("initial-exec"))) RT_EXPORT;
extern inline_runtime rt RT_HIDDEN;
extern __thread uint8_t lomas__filter[FILTER_SIZE + FILTER_PAD]
    __attribute__((tls_model("initial-exec"))) RT_EXPORT;
extern const inline_alloc rt_map_alloc RT_HIDDEN;
RT_HIDDEN void rt_note_stderr(void);
RT_HIDDEN void rt_say(const char *fmt, ...) LOMAS_PRINTF(1, 2);
RT_HIDDEN void rt_env_problem(const char *var, const char *value, const char *what);
RT_HIDDEN void rt_parse_env_defaults(settings *s);
RT_HIDDEN void rt_parse_env(settings *s);
RT_HIDDEN void rt_setup_output(void);
RT_HIDDEN void rt_setup_trace(void);
/* Were LOMAS_OUTPUT/LOMAS_TRACE passed on by an instrumented ancestor? (See runtime_env.c.) */
RT_HIDDEN bool rt_settings_inherited(void);
RT_HIDDEN void rt_spin_lock(atomic_flag *l);
RT_HIDDEN bool rt_spin_lock_bounded(atomic_flag *l);
RT_HIDDEN void rt_spin_unlock(atomic_flag *l);
RT_HIDDEN void rt_filter_scrub(void);
RT_HIDDEN void rt_fast_idle(inline_fast *f);
RT_HIDDEN void rt_thread_release_data(inline_thread *t);
RT_HIDDEN void rt_trace_flush(inline_thread *t);
RT_HIDDEN uint64_t rt_thread_refs(const inline_thread *t);
/* Bring t to the period level (auto), thinning its samples older than the
 * levels kept; t locked, by its owner. */
RT_HIDDEN void rt_thread_to_level(inline_thread *t, uint32_t level);
RT_HIDDEN void rt_key_destructor(void *arg);
RT_HIDDEN uint32_t rt_auto_floor(uint32_t level);
/* The slow path: called by the hooks and by code the pass plugin instrumented. */
RT_EXPORT void lomas__slow(const void *addr, uint64_t info, uintptr_t pc_hint);
/* The plugin's entry (clang only: preserve_most; the plugin relies on it). */
#if defined(__clang__) && defined(__x86_64__) && __has_attribute(preserve_most)
#define LOMAS_HAVE_PRESERVE_MOST 1
RT_EXPORT __attribute__((preserve_most)) void lomas__slow_pm(const void *addr, uint64_t info);
#else
#define LOMAS_HAVE_PRESERVE_MOST 0
#endif
/*
 * Is no filter byte of the n 64-byte blocks from block number first (addr >>
 * FILTER_SHIFT) set? (1: none of them can be watched.) The pass plugin asks
 * at the entry of a loop whose references' address ranges it knows, when a
 * range spans more blocks than its inline test covers.
 */
RT_EXPORT int lomas__range_clean(uint64_t first, uint64_t n);
RT_HIDDEN uint32_t lomas__next_thread_index(void);
/* rt.mu, with its owner noted (a fatal signal's handler must not wait for itself). */
RT_HIDDEN void rt_lock(void);
RT_HIDDEN void rt_unlock(void);
/* runtime_output.c */
RT_HIDDEN void rt_global_init(void);
/* Flush the traces and write the profile, ended by ending (rt.mu held). */
RT_HIDDEN void rt_dump_locked(const char *ending);
/* signals.c */
RT_HIDDEN void rt_install_signal_handlers(void);

#endif /* LOMAS_INLINE_INTERNAL_H */

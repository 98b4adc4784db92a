/*
 * lib/inline internal interface: the runtime's per-thread state shared by the
 * hooks (hooks.c, fast path) and the runtime (runtime.c). The pure parts it
 * drives (filter, watch table, sample store, windows, profile assembly) are
 * the sampler core, lib/sampler/sampler.h, shared with the dbi clock.
 *
 * The hooks and the runtime live in liblomas-inline (linked into instrumented
 * programs); the sampler core is also compiled into liblomas so the unit
 * tests can drive it with synthetic references.
 */
#ifndef LOMAS_INLINE_INTERNAL_H
#define LOMAS_INLINE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/core.h"
#include "inline/contract.h"
#include "sampler/burst_set.h"
#include "sampler/sampler.h"

/* The filter the runtime keeps (lib/sampler) is the one the pass tests. */
_Static_assert(FILTER_SHIFT == LOMAS_ABI_FILTER_SHIFT && FILTER_BITS == LOMAS_ABI_FILTER_BITS &&
                   FILTER_SIZE == LOMAS_ABI_FILTER_SIZE && FILTER_ANY == LOMAS_ABI_FILTER_ANY &&
                   FILTER_PAD == LOMAS_ABI_FILTER_PAD,
               "lib/sampler's filter differs from lib/inline/contract.h's");

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
/* The pass reads and writes the countdown as the first 8 bytes of lomas__fast. */
_Static_assert(offsetof(inline_fast, countdown) == LOMAS_ABI_FAST_COUNTDOWN &&
                   sizeof(((inline_fast *)0)->countdown) == 8,
               "lomas__fast's countdown is not where lib/inline/contract.h puts it");

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
#define REF_STORE_BIT LOMAS_ABI_REF_STORE
#define REF_NEXT_KNOWN LOMAS_ABI_REF_NEXT_KNOWN
#define REF_AFTER_SHIFT LOMAS_ABI_REF_AFTER_SHIFT
#define REF_NEXT_SHIFT LOMAS_ABI_REF_NEXT_SHIFT

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

#define DISABLED_RECHECK 65536u /* references between checks while idle */
#define TRACE_BUF (64u * 1024u)
#define LOCK_SPINS 10000000u /* bounded wait for a thread's lock at exit */

/*
 * Exact stack distances for a subset of the samples (burst.c,
 * docs/inline-clock.md "Exact bursts"): while a burst runs every reference
 * of the thread visits the slow path and its line goes into a set; when the
 * tracked sample's line comes back, the set's size is its exact stack
 * distance (sampler/burst_set.h, shared with the dbi clock's bursts). Past
 * BURST_SET_BLOCKS blocks of 64 lines or BURST_MAX_REFS references the
 * burst gives up.
 */
#define EXACT_DEFAULT_BUDGET 2.0 /* percent */
#define BURST_PICK 8u
#define BURST_MAX_REFS (512u * 1024u)
/* Past BURST_SHORT_REFS a burst is long: it goes on only while its allowance
 * (the budget's share or the floor) holds it (burst.c, burst_may_go_on). */
#define BURST_SHORT_REFS (32u * 1024u)
/* References the process's bursts may take whatever the budget says: a short
 * program's 2 % is a few bursts (1M references cost ~30 ms in all). */
#define BURST_FLOOR_REFS (1024u * 1024u)
/* Of the floor, what long bursts may take past their first BURST_SHORT_REFS. */
#define BURST_LONG_FLOOR_REFS (BURST_FLOOR_REFS / 4u * 3u)
/* Long distances a start pc may find: as many as a kind needs to lend them (donors.c). */
#define BURST_LONG_PER_PC 3u
/*
 * A start pc with fewer than BURST_NOVEL_FOUND distances is new: its short
 * bursts may run past the share and the floor, within the process's
 * BURST_NOVEL_REFS (burst.c, rt_burst_maybe_start).
 */
#define BURST_NOVEL_FOUND 4u
#define BURST_NOVEL_REFS (512u * 1024u)
typedef struct burst_state {
	burst_set set;        /* the lines seen (slots NULL: not mapped yet) */
	bool on;              /* a burst is running */
	uint64_t line;        /* the tracked sample's line */
	uint64_t start;       /* its start clock */
	uint64_t refs;        /* references of the running burst */
	uint64_t total;       /* references of all the thread's bursts in the session */
	uint64_t floor_total; /* of those, in bursts the floor allowed (not the budget) */
	uint64_t novel_total; /* ... in bursts allowed for a new start pc (BURST_NOVEL_REFS) */
	bool floor_run;       /* the running burst is one the floor allowed */
	bool novel_run;       /* ... one allowed for a new start pc */
	bool may_long;        /* the running burst may go past BURST_SHORT_REFS */
	uint64_t tracked;     /* bursts started */
	uintptr_t pc;         /* the tracked sample's start pc */
	rng pick;             /* which eligible sample starts the next burst (its own stream) */
	/* Per start pc (hashed): bursts that gave up and that found a distance,
	 * long ones past BURST_SHORT_REFS; a pc whose bursts only give up
	 * starts none (see burst.c). */
	burst_pc pcs[BURST_SET_PCS];
} burst_state;

/* An exact distance found: the sample of thread index that started at start, ended at end. */
typedef struct exact_rec {
	uint64_t epoch, start, end;
	uint32_t index, sd;
} exact_rec;

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
	/* Phase-guided sampling (lib/sampler/phase.c): the tracker (NULL: off)
	 * and the shift in force (samples are taken at level + pshift). */
	phase_tracker *phase;
	uint64_t phase_window; /* the window asked for (0: 256 x the period) */
	uint8_t pshift;
	burst_state burst;
} inline_thread;

/* A session's settings (from the environment or lomas_inline_start). */
typedef struct settings {
	uint64_t period; /* 0 = auto */
	uint64_t seed;
	uint32_t line_size;
	uint64_t window; /* 0 = 256 x mean period */
	uint32_t max_live;
	bool phase_guided;    /* LOMAS_PHASE_GUIDED */
	phase_settings phase; /* LOMAS_PHASE_SAMPLES, LOMAS_PHASE_DIVIDE */
	double exact_budget;  /* LOMAS_EXACT_BUDGET / 100: bursts' share of references (0: off) */
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
	exited_arena exited;    /* exited threads' samples (lib/sampler/exited.c) */
	uint64_t threads_lost;  /* exited threads left out of the profile (no memory) */
	/* signals.c: caught[sig] while the runtime's handler is installed for
	 * sig, and then view[sig] is the disposition the program set (SIG_DFL,
	 * its flags and mask): what its sigaction queries return. */
	atomic_flag sig_lock;
	struct sigaction view[NSIG];
	_Atomic bool caught[NSIG];
	/* The exact distances the bursts found (burst.c), all threads'. */
	atomic_flag exact_lock;
	exact_rec *exact;
	size_t nexact, exact_cap;
	/* The session's bursts and their references (at each burst's end). */
	_Atomic uint64_t bursts, burst_refs;
	_Atomic uint64_t burst_floor_refs;      /* of those, in bursts the floor allowed */
	_Atomic uint64_t burst_long_floor_refs; /* of those, past BURST_SHORT_REFS */
	_Atomic uint64_t burst_novel_refs;      /* in bursts allowed for new start pcs */
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
/* burst.c */
/* A reference at clock while t's burst runs (t locked, by its owner). */
RT_HIDDEN void rt_burst_step(inline_thread *t, uint64_t addr, uint64_t clock);
/* A sample of addr's line started at clock: start a burst if none runs and the budget allows. */
RT_HIDDEN void rt_burst_maybe_start(inline_thread *t, uint64_t addr, uint64_t clock, uintptr_t pc);
RT_HIDDEN void rt_burst_release(inline_thread *t);
/*
 * The exact distances of the current session, sorted by (index, start) for
 * rt_exact_find; *n of them. rt.mu held. NULL when none (or no memory).
 */
RT_HIDDEN exact_rec *rt_exact_sorted(size_t *n);
/* The distance of thread index's sample start..end, or -1. */
RT_HIDDEN int64_t rt_exact_find(const exact_rec *r, size_t n, uint32_t index, uint64_t start,
                                uint64_t end);
/* runtime_output.c */
RT_HIDDEN void rt_global_init(void);
/* Flush the traces and write the profile, ended by ending (rt.mu held). */
RT_HIDDEN void rt_dump_locked(const char *ending);
/* signals.c */
RT_HIDDEN void rt_install_signal_handlers(void);

#endif /* LOMAS_INLINE_INTERNAL_H */

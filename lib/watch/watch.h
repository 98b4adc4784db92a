/*
 * lib/watch internal interface: the watch table (pure logic: watched lines →
 * samples, per-page counts, capacity with eviction of the oldest) and the
 * mprotect engine (docs/architecture.md, the watch engines), which reaches the target only through
 * a small ops vtable the monitor provides (injected mprotect, shadow page protections).
 */
#ifndef LOMAS_WATCH_H
#define LOMAS_WATCH_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/core.h"

/* A 64-bit mixer (murmur3's finalizer) for the open-addressing tables here. */
static inline size_t watch_hash64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return (size_t)x;
}

/* ---------------------------------------------------------------- page map */

/*
 * An open-addressing map keyed by page address; entries are esize bytes and
 * must begin with their uint64_t page (pagemap.c).
 */
typedef struct pagemap {
	unsigned char *items; /* cap entries */
	uint8_t *used;        /* cap flags */
	size_t cap, n, esize; /* cap is a power of two */
} pagemap;

lomas_status pagemap_init(pagemap *m, size_t esize);
void pagemap_free(pagemap *m);
void pagemap_clear(pagemap *m);
/* The entry of page, or NULL. */
void *pagemap_find(const pagemap *m, uint64_t page);
/* The entry of page, created zeroed (but for its page) when absent. */
lomas_status pagemap_insert(pagemap *m, uint64_t page, void **entry, bool *created);
void pagemap_remove(pagemap *m, uint64_t page);
/* Slot i (0 <= i < cap) when in use, else NULL: for iterating. */
void *pagemap_at(const pagemap *m, size_t i);

/* ------------------------------------------------------------- watch table */

typedef struct watch_entry {
	uint64_t line;   /* line address (aligned down to the line size) */
	uint64_t sample; /* the caller's sample id */
	uint64_t seq;    /* insertion order (eviction picks the smallest) */
	uint32_t thread; /* the thread whose reuse ends the sample */
	uint32_t used;   /* slot in use (internal) */
} watch_entry;

typedef struct watch_page_count {
	uint64_t page;  /* first: the page map's key */
	uint32_t count; /* watched lines on the page, all threads */
} watch_page_count;

typedef struct watch_table {
	watch_entry *slots;
	size_t cap, n;     /* cap is a power of two */
	pagemap pages;     /* watch_page_count by page */
	uint64_t capacity; /* most live entries; 0 = unlimited */
	uint64_t seq;
	uint64_t line_mask, page_mask; /* ~(size - 1) */
} watch_table;

/* line_size and page_size: powers of two; capacity 0 = unlimited. */
lomas_status watch_table_init(watch_table *t, uint32_t line_size, uint32_t page_size,
                              uint64_t capacity);
void watch_table_free(watch_table *t);
/* Forget every entry (keeps the allocation). */
void watch_table_clear(watch_table *t);

static inline uint64_t watch_line_of(const watch_table *t, uint64_t addr)
{
	return addr & t->line_mask;
}
static inline uint64_t watch_page_of(const watch_table *t, uint64_t addr)
{
	return addr & t->page_mask;
}

/*
 * Watch the line holding addr for thread, standing for sample. If (line,
 * thread) is already watched, the old entry is replaced and copied into
 * *displaced with *did_displace = true; if the table is full, the oldest entry
 * is evicted the same way (the caller censors it).
 */
lomas_status watch_table_add(watch_table *t, uint64_t addr, uint32_t thread, uint64_t sample,
                             watch_entry *displaced, bool *did_displace);
/* Is the line holding addr watched for thread? Copies the entry into *out (may be NULL). */
bool watch_table_find(const watch_table *t, uint64_t addr, uint32_t thread, watch_entry *out);
/* Remove the entry (line of addr, thread); false if absent. */
bool watch_table_remove(watch_table *t, uint64_t addr, uint32_t thread, watch_entry *out);
/* Number of threads watching the line holding addr other than thread. */
size_t watch_table_others(const watch_table *t, uint64_t addr, uint32_t thread, uint64_t *samples,
                          size_t max);
/* Watched lines on the page holding addr (all threads). */
uint32_t watch_table_page_count(const watch_table *t, uint64_t addr);
static inline size_t watch_table_size(const watch_table *t)
{
	return t->n;
}

/* ---------------------------------------------------------- mprotect engine */

/* mprot_ops.mprotect's answer when the call cannot be made now: retried at the next sync. */
#define MPROT_DEFER 1
/* ... when the call was attempted but whether it ran is unknown (redone at the next sync). */
#define MPROT_UNKNOWN 2

typedef struct mprot_ops {
	/*
	 * Run mprotect(addr, len, prot) in the target: 0, a negative errno, or
	 * MPROT_DEFER (no thread to run it in now, e.g. the process is in a
	 * group-stop that an injected call would end), or MPROT_UNKNOWN.
	 */
	int (*mprotect)(void *ctx, uint64_t addr, uint64_t len, int prot);
	/* The target's own protection of the page (PROT_* bits), -1 if unmapped. */
	int (*page_prot)(void *ctx, uint64_t page);
	/* May the page be protected? (not where the kernel writes behind the target's back) */
	bool (*may_protect)(void *ctx, uint64_t page);
	void *ctx;
} mprot_ops;

typedef struct mprot_page {
	uint64_t page;  /* first: the page map's key */
	int orig;       /* the target's protection (restored when not ours) */
	int temp_owner; /* thread lifting it for one step, or -1 */
	bool prot_none; /* currently PROT_NONE because of us */
	bool pinned;    /* never protected: reuse on it is found from decoded references */
	bool unsure;    /* the last call's outcome is unknown: prot_none is a guess, redo it */
} mprot_page;

typedef struct mprot_stats {
	uint64_t protects;   /* pages set PROT_NONE */
	uint64_t restores;   /* pages given their own protection back */
	uint64_t reprotects; /* pages protected again after a fault */
	uint64_t faults;     /* faults on pages we protected */
	uint64_t false_positives;
	uint64_t failures; /* injected mprotect calls that failed */
} mprot_stats;

typedef struct mprot_engine {
	watch_table table;
	mprot_ops ops;
	pagemap pages; /* mprot_page by page */
	uint32_t page_size;
	int lift_depth;       /* > 0: every page has its own protection (syscalls, signals) */
	uint64_t lift_events; /* times a watched page went back to its own protection */
	mprot_stats stats;
} mprot_engine;

lomas_status mprot_init(mprot_engine *e, const mprot_ops *ops, uint32_t line_size,
                        uint32_t page_size, uint64_t capacity);
void mprot_free(mprot_engine *e);

/*
 * Watch the line of addr for thread (see watch_table_add); the page is
 * protected at the next mprot_sync(). LOMAS_EPERM if the page cannot be
 * protected (unmapped, or the kernel refuses): the caller censors the sample.
 */
lomas_status mprot_watch(mprot_engine *e, uint64_t addr, uint32_t thread, uint64_t sample,
                         watch_entry *displaced, bool *did_displace);
/* Stop watching (line of addr, thread): the page is released at the next sync. */
bool mprot_unwatch(mprot_engine *e, uint64_t addr, uint32_t thread, watch_entry *out);
/* Is the page holding addr PROT_NONE because of us right now? */
bool mprot_is_ours(const mprot_engine *e, uint64_t addr);
/* ... and known to be so (not a guess after a failed call)? */
bool mprot_is_certain(const mprot_engine *e, uint64_t addr);
/* Is the page holding addr watched but currently readable (lifted)? */
bool mprot_is_lifted(const mprot_engine *e, uint64_t addr);
/* Is the page holding addr one we never protect? */
bool mprot_is_pinned(const mprot_engine *e, uint64_t addr);
/* A fault on our page: give it back its protection for thread's next step. */
lomas_status mprot_fault_lift(mprot_engine *e, uint64_t addr, uint32_t thread);
/*
 * The page holding addr (tracked) gets the program's own protection for
 * thread's next step, whatever other lifts come and go (a fault there that
 * may be a stale one of ours); mprot_fault_done ends it.
 */
lomas_status mprot_hold(mprot_engine *e, uint64_t addr, uint32_t thread);
/* Is the page holding addr held with its own protection for thread? */
bool mprot_held_by(const mprot_engine *e, uint64_t addr, uint32_t thread);
/* Is the page holding addr one the engine has state for (watched, or protected)? */
bool mprot_is_tracked(const mprot_engine *e, uint64_t addr);
/* thread's step is over: pages it lifted go back under watch. */
void mprot_fault_done(mprot_engine *e, uint32_t thread);
/* thread is gone: pages it lifted go back under watch at the next sync. */
void mprot_fault_forget(mprot_engine *e, uint32_t thread);
/* Lift every protection (nested); mprot_unlift() undoes one level. */
lomas_status mprot_lift(mprot_engine *e);
lomas_status mprot_unlift(mprot_engine *e);
/* Bring the real protections in line with the watches. */
lomas_status mprot_sync(mprot_engine *e);
/*
 * The target changed its mappings (call while lifted): re-read the original
 * protection of every page and whether it may be protected.
 */
void mprot_maps_changed(mprot_engine *e);
/* Give every page its own protection back and forget all watches. */
lomas_status mprot_restore_all(mprot_engine *e);
/* Forget everything without touching the target (exec replaced the address space). */
void mprot_forget_all(mprot_engine *e);
/* Pages currently PROT_NONE because of us. */
size_t mprot_protected_pages(const mprot_engine *e);
/*
 * Watched pages a sync leaves readable: pinned (TCB, rseq: they may become
 * so after their samples started), lifted (a system call, a signal frame,
 * another thread's fault retry) or unmapped. A touch there raises no fault:
 * only a decoder sees it (the pmu clock steps while any exists).
 */
size_t mprot_unfaulting_pages(const mprot_engine *e);

/* ---------------------------------------------------- debug-register engine */

/*
 * The debug-register engine (docs/architecture.md, debugreg.c): x86 data breakpoints,
 * as perf hardware breakpoints (PERF_TYPE_BREAKPOINT, HW_BREAKPOINT_RW, 8
 * bytes) on one thread of the target, one per DR0-DR3. A breakpoint watches
 * the aligned 8-byte word of the sampled reference, so reuse is found at
 * word granularity. Its overflow (sample_period 1) is routed to the thread
 * as a signal (F_SETOWN_EX F_OWNER_TID, F_SETSIG, O_ASYNC) that the monitor
 * swallows; the counter itself (read(2)) is what says a slot fired, so a
 * late or repeated signal is harmless.
 */
#define DREG_SLOTS 4 /* DR0-DR3 */
#define DREG_WORD 8  /* HW_BREAKPOINT_LEN_8 */

typedef struct dreg_slot {
	int fd;          /* -1: not open */
	bool armed;      /* watching word for sample */
	uint64_t word;   /* aligned to DREG_WORD */
	uint64_t sample; /* the caller's sample id */
	uint64_t seq;    /* arming order: eviction takes the oldest */
	uint64_t base;   /* the counter when armed (or last taken): more = it fired */
} dreg_slot;

typedef struct dreg_thread {
	int tid;
	bool quiet; /* the thread blocks the signal: no O_ASYNC, the counters are polled */
	dreg_slot s[DREG_SLOTS];
} dreg_thread;

typedef struct dreg_stats {
	uint64_t arms;      /* breakpoints armed */
	uint64_t opens;     /* perf_event_open calls */
	uint64_t modifies;  /* re-armed by PERF_EVENT_IOC_MODIFY_ATTRIBUTES */
	uint64_t reopens;   /* re-armed by close and open (no MODIFY_ATTRIBUTES) */
	uint64_t fired;     /* breakpoints that fired (the counter moved) */
	uint64_t signals;   /* overflow signals taken */
	uint64_t stale;     /* ... whose breakpoint had been taken already */
	uint64_t evictions; /* armed breakpoints taken for a newer sample (4 slots) */
	uint64_t refused;   /* breakpoints the kernel would not arm (the sample is censored) */
	uint64_t polls;     /* counter reads while the thread blocks the signal */
} dreg_stats;

#define DREG_FD_BITS 4096

typedef struct dreg_engine {
	int sig;        /* the overflow signal (F_SETSIG) */
	bool no_modify; /* MODIFY_ATTRIBUTES refused: re-arm by close and open */
	uint64_t seq;
	dreg_stats stats;
	/* descriptors that were ever a breakpoint: a late signal of a closed one is ours */
	uint64_t fds[DREG_FD_BITS / 64];
} dreg_engine;

/*
 * Can this process arm a data breakpoint on a thread (ourselves stands for
 * the target)? LOMAS_OK, or LOMAS_ENOTSUP with one line naming the cause
 * (perf_event_paranoid and CAP_PERFMON, no breakpoint support) and the
 * engine to use instead.
 */
lomas_status dreg_probe(void);
/* Does this CPU have AMD's breakpoint address-mask extension (64-byte lines)? */
bool dreg_cpu_has_bpext(void);
void dreg_init(dreg_engine *e, int sig);
void dreg_thread_init(dreg_thread *t, int tid);
/*
 * Watch the word of addr in t for sample. When every slot is armed, the
 * oldest is taken: *evicted gets its state and *evicted_fired whether it
 * fired since it was armed (a reuse whose signal has not come yet). On
 * LOMAS_ENOTSUP the kernel refused the breakpoint (no debug register free):
 * nothing is armed and the caller censors the sample.
 */
lomas_status dreg_arm(dreg_engine *e, dreg_thread *t, uint64_t addr, uint64_t sample,
                      dreg_slot *evicted, bool *did_evict, bool *evicted_fired);
/* Stop slot i (the sample ended otherwise): disabled, kept open for the next arm. */
void dreg_disarm(dreg_engine *e, dreg_thread *t, unsigned i);
/* The slot of t whose descriptor is fd, or -1. */
int dreg_slot_of_fd(const dreg_thread *t, int fd);
/* Did armed slot i fire since it was armed? (reads the counter; true once per firing) */
bool dreg_fired(dreg_engine *e, dreg_thread *t, unsigned i);
/*
 * Is si the overflow signal of one of t's slots? Its index; -2 when it is
 * the signal of a breakpoint closed or moved since (stale, ours all the
 * same); -1 when it is not ours.
 */
int dreg_signal_slot(const dreg_engine *e, const dreg_thread *t, int sig, const siginfo_t *si);
/* t blocks (quiet) or takes the signal: route it or not (O_ASYNC). */
void dreg_set_quiet(dreg_engine *e, dreg_thread *t, bool quiet);
/* Close every breakpoint of t (it is gone, exec'd, or we detach). */
void dreg_thread_close(dreg_thread *t);
/* Armed slots of t. */
unsigned dreg_armed(const dreg_thread *t);

#endif /* LOMAS_WATCH_H */

/*
 * The dbi clock's Valgrind tool ("lomas"): internal interface of its files.
 *
 *   tool_main.c        registration, options, threads, exit, fork, exec, the host's requests
 *   tool_instrument.c  the IR: a countdown per run of references, a filter test per reference
 *   tool_visit.c       the helper the IR calls (the sampler core, lib/sampler/thread.c)
 *   tool_dump.c        the hand-over file (dump.h) and the full trace
 *   tool_math.c        log and log1p (no libm)
 *
 * Valgrind runs one thread at a time. The running thread's filter lives at a
 * fixed address (lt_filter: the generated code reaches it without a
 * pointer); a thread switch (start_client_code) saves the old thread's into
 * its tool_thread and loads the new one's. Countdowns: see below.
 */
#ifndef LOMAS_DBI_TOOL_H
#define LOMAS_DBI_TOOL_H

#include "pub_tool_basics.h"
#include "pub_tool_tooliface.h"

#include "dump.h"
#include "sampler/burst_set.h"
#include "sampler/sampler.h"

/*
 * A thread's countdown (signed) lives in its guest state's first shadow
 * area (Valgrind's shadow1, unused by this tool), at lt_cd_offset from the
 * guest state: the generated code reaches it as a guest register (one
 * instruction, and Valgrind's optimizer keeps it in a host register across a
 * superblock), every thread has its own, and a thread switch moves nothing.
 * Each run of k references subtracts k when it starts; a reference whose run
 * left it at zero or below, or whose filter byte is set, calls the helper,
 * which is told how many references of the run come after it (its
 * descriptor's info >> INFO_AFTER_SHIFT): countdown + after is what a
 * per-reference decrement would have left, and the reference's clock is the
 * thread's zero_clock minus that (the inline runtime's convention,
 * lib/inline/inline.h). Valgrind saves a thread's shadow state in a
 * signal's frame and restores it at sigreturn: the tool puts the countdown
 * the handler left back (tool_main.c), so a handler's references count.
 */
/* A countdown that never comes due (no thread, or sampling stopped). */
#define TOOL_NEVER ((int64_t)1 << 62)

/* A reference's info (its descriptor's). */
#define INFO_SIZE_MASK 0xfffu /* bytes (clamped) */
#define INFO_STORE 0x1000u
#define INFO_MODIFY 0x800000u /* a load then a store of the same address (two references) */
#define INFO_ILEN_SHIFT 13    /* instruction length, for the full trace's I lines */
#define INFO_AFTER_SHIFT 24

/* What the generated code tells the helper about a reference (a constant index). */
typedef struct ref_desc {
	Addr pc;
	ULong info;
} ref_desc;

/*
 * Exact stack distances for a subset of the samples (tool_burst.c), as the
 * inline clock's bursts (lib/inline/burst.c): a burst follows one sample's
 * line through every reference of its thread, counting the distinct other
 * lines (blocks of 64 with a bitmap) until the line is touched again.
 */
typedef struct tool_burst {
	burst_set set; /* the lines seen (slots NULL: not allocated yet) */
	Bool on;
	Bool floor_run;       /* allowed by the process's floor, not the thread's share */
	Bool may_long;        /* may go past TB_SHORT_REFS */
	uint64_t line;        /* the sample's line */
	uint64_t start;       /* its clock */
	uint64_t pc;          /* its pc */
	uint64_t refs;        /* references since the start */
	uint64_t total;       /* references in all its bursts */
	uint64_t floor_total; /* ... in bursts the floor allowed */
	rng pick;
	burst_pc pcs[BURST_SET_PCS]; /* start pcs whose bursts found a distance or gave up */
} tool_burst;

typedef struct tool_thread {
	sampler_thread s;
	tool_burst burst;
	ThreadId tid; /* Valgrind's, while it lives */
	uint64_t os_tid;
	bool live;
	bool cd_pending;   /* its countdown is to be set before it first runs */
	bool sig_cd_valid; /* a sigreturn is under way: sig_cd is the handler's countdown */
	int64_t sig_cd;
	int64_t cd_init;     /* the countdown it starts with */
	int64_t stopped_cd;  /* its countdown when it last stopped running client code */
	uint64_t zero_clock; /* the clock at which its countdown reaches zero */
	uint64_t refs;       /* final clock, once it has exited */
	uint8_t *filter;     /* its filter while another thread runs (FILTER_SIZE + FILTER_PAD) */
	void *wt_mem;
	SizeT wt_size;
	/* Full-trace mode: its own file (lackey format) and buffer. */
	Int trace_fd;
	HChar *trace;
	SizeT trace_len;
	uint64_t trace_pc;
} tool_thread;

/* tool_main.c */
extern Int lt_cd_offset; /* the countdown's guest-state offset (shadow1's first word) */
extern ref_desc *lt_descs;
extern uint8_t lt_filter[FILTER_SIZE + FILTER_PAD];
extern tool_thread *lt_cur;
extern sampler_budget lt_budget;
extern const inline_alloc lt_alloc;
extern sampler_settings lt_settings;
extern uint32_t lt_line_size;
extern uint64_t lt_window_refs; /* 0 = auto */
extern Bool lt_tracing;         /* full-trace mode: every reference calls the helper */
extern Bool lt_sampling;        /* false in a forked child and after a detach */
extern const HChar *lt_trace_path;
extern const HChar *lt_out_path;
/* The live threads, in creation order (and an ended one whose samples the
 * arena had no room for). */
extern tool_thread **lt_threads;
extern UInt lt_nthreads;
extern exited_arena lt_exited; /* the ended threads' samples (lib/sampler/exited.c) */
/* The clock of a thread (references so far). */
uint64_t lt_thread_refs(const tool_thread *t);
/* A live thread's countdown, read and set in its guest state. */
int64_t lt_get_cd(const tool_thread *t);
void lt_set_cd(const tool_thread *t, int64_t cd);

/* tool_instrument.c */
extern Bool lt_helper_per_ref; /* --lomas-fastpath=helper */
IRSB *lt_instrument(VgCallbackClosure *closure, IRSB *in, const VexGuestLayout *layout,
                    const VexGuestExtents *vge, const VexArchInfo *archinfo_host, IRType gWordTy,
                    IRType hWordTy);

/* tool_visit.c */
/* gs: the running thread's guest state; d: the reference's descriptor. */
VG_REGPARM(3) void lt_visit(UChar *gs, Addr addr, ULong d);
/* The helper-call-per-reference variant: count down, test the filter, visit. */
VG_REGPARM(3) void lt_count(UChar *gs, Addr addr, ULong d);

/* tool_burst.c */
extern double lt_exact_budget;   /* bursts' share of references (0: off) */
extern dump_exact_rec *lt_exact; /* the distances found, all threads */
extern uint64_t lt_nexact, lt_bursts, lt_burst_refs;
/* The sampled reference at clock (a sample starts there): maybe follow it. */
void lt_burst_maybe_start(tool_thread *t, Addr addr, uint64_t clock, Addr pc);
/* A reference of t while its burst runs. */
void lt_burst_step(tool_thread *t, Addr addr, uint64_t clock);
/* t's burst memory given back (it ended). */
void lt_burst_release(tool_thread *t);

/* tool_dump.c */
/* Write the hand-over file (ended: DUMP_ENDED_*); False with a message logged on failure. */
Bool lt_dump(Int ended);
/* Full trace: open thread t's file, append a reference, write out what is buffered. */
void lt_trace_open(tool_thread *t);
void lt_trace_put(tool_thread *t, Addr addr, ULong info, Bool store, Addr pc);
void lt_trace_flush(tool_thread *t);

#endif /* LOMAS_DBI_TOOL_H */

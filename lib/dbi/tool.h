/*
 * The dbi clock's Valgrind tool ("lomas"): internal interface of its files.
 *
 *   tool_main.c        registration, options, threads, exit, fork, exec, the host's requests
 *   tool_instrument.c  the IR: a countdown per run of references, a filter test per reference
 *   tool_visit.c       the helper the IR calls (the sampler core, lib/sampler/thread.c)
 *   tool_dump.c        the hand-over file (dump.h) and the full trace
 *   tool_math.c        log and log1p (no libm)
 *
 * Valgrind runs one thread at a time. The running thread's countdown and
 * filter live at fixed addresses (lt_fast, lt_filter: the generated code
 * reaches them without a pointer); a thread switch (start_client_code)
 * saves the old thread's into its tool_thread and loads the new one's.
 */
#ifndef LOMAS_DBI_TOOL_H
#define LOMAS_DBI_TOOL_H

#include "pub_tool_basics.h"
#include "pub_tool_tooliface.h"

#include "sampler/sampler.h"

/*
 * The running thread's countdown (signed in effect): each run of k
 * references subtracts k when it starts; a reference whose run left it at
 * zero or below, or whose filter byte is set, calls the helper, which is told
 * how many references of the run come after it (info >> INFO_AFTER_SHIFT):
 * countdown + after is what a per-reference decrement would have left, and
 * the reference's clock is zero_clock minus that (the inline runtime's
 * convention, lib/inline/inline.h).
 */
typedef struct tool_fast {
	int64_t countdown;
	uint64_t zero_clock;
} tool_fast;

/* A countdown that never comes due (no thread, or sampling stopped). */
#define TOOL_NEVER ((int64_t)1 << 62)

/* Reference info passed to the helper (a constant in the generated code). */
#define INFO_SIZE_MASK 0xfffu /* bytes (clamped) */
#define INFO_STORE 0x1000u
#define INFO_ILEN_SHIFT 13 /* instruction length, for the full trace's I lines */
#define INFO_AFTER_SHIFT 24

typedef struct tool_thread {
	sampler_thread s;
	uint64_t os_tid;
	bool live;
	uint64_t refs;   /* final clock, once it has exited */
	tool_fast fast;  /* its countdown while another thread runs */
	uint8_t *filter; /* its filter while another thread runs (FILTER_SIZE + FILTER_PAD) */
	void *wt_mem;
	SizeT wt_size;
	/* Full-trace mode: its own file (lackey format) and buffer. */
	Int trace_fd;
	HChar *trace;
	SizeT trace_len;
	uint64_t trace_pc;
} tool_thread;

/* tool_main.c */
extern tool_fast lt_fast;
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
extern tool_thread **lt_threads; /* every thread, in creation order */
extern UInt lt_nthreads;
/* The clock of a thread (references so far). */
uint64_t lt_thread_refs(const tool_thread *t);

/* tool_instrument.c */
extern Bool lt_helper_per_ref; /* --lomas-fastpath=helper */
IRSB *lt_instrument(VgCallbackClosure *closure, IRSB *in, const VexGuestLayout *layout,
                    const VexGuestExtents *vge, const VexArchInfo *archinfo_host, IRType gWordTy,
                    IRType hWordTy);

/* tool_visit.c */
VG_REGPARM(3) void lt_visit(Addr addr, ULong info, Addr pc);
/* The helper-call-per-reference variant: count down, test the filter, visit. */
VG_REGPARM(3) void lt_count(Addr addr, ULong info, Addr pc);

/* tool_dump.c */
/* Write the hand-over file (ended: DUMP_ENDED_*); False with a message logged on failure. */
Bool lt_dump(Int ended);
/* Full trace: open thread t's file, append a reference, write out what is buffered. */
void lt_trace_open(tool_thread *t);
void lt_trace_put(tool_thread *t, Addr addr, ULong info, Addr pc);
void lt_trace_flush(tool_thread *t);

#endif /* LOMAS_DBI_TOOL_H */

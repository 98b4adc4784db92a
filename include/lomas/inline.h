/*
 * liblomas-inline — the inline clock, inside an instrumented program.
 *
 * Build the program with clang (>= 15) and the lomas-inline recipe:
 *
 *   clang-16 -O2 $(pkg-config --cflags lomas-inline) prog.c $(pkg-config --libs lomas-inline)
 *
 * (the lomas-pass clang plugin, which writes the fast path into the program,
 * and the static runtime; or, with clang other than 16, sanitizer coverage
 * -fsanitize-coverage=func,trace-loads,trace-stores with -flto, so the
 * runtime's hooks inline into the program). The program then samples itself
 * from its first reference and writes its profile at exit. lomas-demo
 * record and lomas_session_start (clock inline) run such a program with the
 * environment below set from their config; docs/inline-clock.md tells how
 * the runtime works.
 *
 * The environment (the LOMAS_ENV_* macros below name each variable; the
 * runtime reads them once, at start-up, with secure_getenv):
 *
 *   LOMAS_OUTPUT     profile path (default lomas-<pid>.lomas in the working
 *                    directory at start-up). Checked at start-up: a path
 *                    that cannot be written gives one line on stderr, and
 *                    nothing is written at exit.
 *   LOMAS_PERIOD     mean sampling period in references, an integer >= 1,
 *                    or auto (default: auto: from 128, doubling as the
 *                    process's samples grow, to keep about 20k-50k)
 *   LOMAS_SEED       seed of the threads' sampling generators, a 64-bit
 *                    unsigned integer (default 1; same seed, same program,
 *                    same input: same samples)
 *   LOMAS_LINE_SIZE  cache line size in bytes, a power of two 8..65536
 *                    (default 64; the config key line_bytes)
 *   LOMAS_WINDOW     window length in references, or auto (256 x the mean
 *                    period)
 *   LOMAS_MAX_LIVE   watch-table slots per thread (default 8192); when they
 *                    are full the oldest sample is censored
 *   LOMAS_TRACE      also write every reference to this file, Valgrind
 *                    lackey format (" L addr,size" / " S addr,size")
 *   LOMAS_EXACT_BUDGET  percent of each thread's references that may go to
 *                    exact stack distances for a subset of the samples
 *                    (bursts: every reference of the thread visits the
 *                    slow path while one runs; 0 = off; default 2)
 *   LOMAS_OUTPUT_PID the pid these settings are for (lomas-demo record sets
 *                    it): another process that inherits them writes nothing
 *   LOMAS_PHASE_GUIDED  1 or yes: phase-guided sampling (default off): once
 *                    the running window's phase has LOMAS_PHASE_SAMPLES
 *                    samples (default 2000), sample it LOMAS_PHASE_DIVIDE
 *                    times less often (a power of two 2..1024, default 16);
 *                    those samples weigh that much more; an auto window
 *                    is then 64 x that divisor x the period long
 *
 * An invalid value gives one line on stderr (while the program's fd 2 is
 * the one it started with) and the default. A child that inherited
 * LOMAS_OUTPUT or LOMAS_TRACE from an instrumented parent writes nothing; a
 * set-user-ID, set-group-ID or file-capability program ignores every
 * LOMAS_* variable and writes nothing (docs/inline-clock.md, README.md
 * "Limits").
 *
 * A harness that profiles one region calls lomas_inline_start() and
 * lomas_inline_stop(); then nothing is written at exit unless LOMAS_OUTPUT
 * is set. It links liblomas as well for the model (pkg-config lomas).
 *
 * Threads: the lomas_inline_* calls may be made from any thread; a start or
 * stop waits for one running on another thread. Stability: as lomas.h's.
 */
#ifndef LOMAS_INLINE_H
#define LOMAS_INLINE_H

#include "lomas/lomas.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The environment's variables (above); tests/inline/check_contract.py
 * checks that the runtime reads exactly these. */
#define LOMAS_ENV_OUTPUT "LOMAS_OUTPUT"
#define LOMAS_ENV_PERIOD "LOMAS_PERIOD"
#define LOMAS_ENV_SEED "LOMAS_SEED"
#define LOMAS_ENV_LINE_SIZE "LOMAS_LINE_SIZE"
#define LOMAS_ENV_WINDOW "LOMAS_WINDOW"
#define LOMAS_ENV_MAX_LIVE "LOMAS_MAX_LIVE"
#define LOMAS_ENV_TRACE "LOMAS_TRACE"
#define LOMAS_ENV_OUTPUT_PID "LOMAS_OUTPUT_PID"
#define LOMAS_ENV_PHASE_GUIDED "LOMAS_PHASE_GUIDED"
#define LOMAS_ENV_PHASE_SAMPLES "LOMAS_PHASE_SAMPLES"
#define LOMAS_ENV_PHASE_DIVIDE "LOMAS_PHASE_DIVIDE"
#define LOMAS_ENV_EXACT_BUDGET "LOMAS_EXACT_BUDGET"

#if defined(LOMAS_INLINE_BUILDING) && defined(__GNUC__)
#define LOMAS_INLINE_API __attribute__((visibility("default")))
#else
#define LOMAS_INLINE_API
#endif

/*
 * Start a new session, discarding what was collected so far: period, seed,
 * line_size, window and max_samples_live come from cfg (NULL = the
 * environment's settings). Each thread's clock starts at its next reference
 * (threads other than the caller join within 65536 of their references).
 */
LOMAS_INLINE_API lomas_status lomas_inline_start(const lomas_config *cfg);

/*
 * End the session. With out non-NULL, *out gets its profile (owned by the
 * caller): every thread of the session, exited or alive (other live threads
 * are read while they run: join them first for exact figures). Open samples
 * are dangling. LOMAS_ESTATE if no session is running.
 */
LOMAS_INLINE_API lomas_status lomas_inline_stop(lomas_profile **out);

/* 1 while a session is running (from start-up, or lomas_inline_start), else 0. */
LOMAS_INLINE_API int lomas_inline_active(void);

#ifdef __cplusplus
}
#endif

#endif /* LOMAS_INLINE_H */

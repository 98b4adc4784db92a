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
 * from its first reference and writes its profile at exit; the environment
 * controls it:
 *
 *   LOMAS_OUTPUT     profile path (default lomas-<pid>.lomas in the working
 *                    directory at start-up)
 *   LOMAS_PERIOD     mean sampling period in references, or auto (default:
 *                    auto: from 128, doubling as the process's samples grow;
 *                    see README.md)
 *   LOMAS_SEED       seed of the sampling generator (default 1)
 *   LOMAS_LINE_SIZE  cache line size in bytes (default 64)
 *   LOMAS_WINDOW     window length in references, or auto (256 x period)
 *   LOMAS_MAX_LIVE   watch-table slots per thread (default 8192)
 *   LOMAS_TRACE      also write every reference to this file, Valgrind
 *                    lackey format (" L addr,size" / " S addr,size")
 *   LOMAS_OUTPUT_PID the pid these settings are for (lomas-demo record sets
 *                    it): another process that inherits them writes nothing
 *
 * A child that inherited LOMAS_OUTPUT or LOMAS_TRACE from an instrumented
 * parent writes nothing; a set-user-ID or set-group-ID program ignores every
 * LOMAS_* variable and writes nothing (README.md, "The inline clock" and
 * "Limits").
 *
 * A harness that profiles one region calls lomas_inline_start() and
 * lomas_inline_stop(); then nothing is written at exit unless LOMAS_OUTPUT
 * is set. It links liblomas as well for the model (pkg-config lomas).
 */
#ifndef LOMAS_INLINE_H
#define LOMAS_INLINE_H

#include "lomas/lomas.h"

#ifdef __cplusplus
extern "C" {
#endif

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

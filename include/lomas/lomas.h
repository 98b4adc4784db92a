/*
 * liblomas — Low-Overhead Memory Access Sampler.
 *
 * The public C API: this header is the whole contract. docs/architecture.md
 * describes the code behind it; include/lomas/inline.h is the in-process API
 * (and the LOMAS_* environment) of programs built with the inline recipe.
 *
 * Conventions (they hold for every call below unless its comment says
 * otherwise):
 *
 *  - Status. Every fallible call returns a lomas_status: LOMAS_OK (0) or a
 *    negative LOMAS_E* code, and writes its results only through its
 *    out-parameters. A NULL pointer argument where an object or an
 *    out-parameter is expected gives LOMAS_EINVAL, and so does an unknown
 *    enum value or flag. LOMAS_ENOMEM can come from any call that allocates.
 *    On failure an object passed in is unchanged (unless the comment says
 *    what is left) and an out-parameter pointer (lomas_profile **out...) is
 *    NULL or untouched: never something to free.
 *  - Messages. lomas_error_message() describes the last error of the calling
 *    thread (a thread-local string); every call clears it on entry but
 *    lomas_error_message, lomas_strerror and the _free functions.
 *  - Never exits, aborts or prints: the library returns and reports; its
 *    warnings go to the log callback (lomas_set_log_callback) or nowhere.
 *  - Lifecycles. Every object made by a _new, _load, _start, _attach or
 *    a call returning a new object through **out is released with the
 *    matching _free: lomas_config_free, lomas_profile_free,
 *    lomas_hot_list_free, lomas_trace_free, lomas_session_free,
 *    lomas_string_free. Every _free of NULL is a harmless no-op, and no
 *    _free changes the calling thread's message.
 *  - Units are in the names: cache_bytes and line_bytes are bytes,
 *    *_refs and clocks count memory references, *_ns nanoseconds.
 *
 * Structs the library fills. lomas_profile_info, lomas_stats, lomas_hot_pc
 * and lomas_hot_info may gain fields at their end in later versions. Each
 * starts with `uint32_t size`, which the caller sets to sizeof the struct
 * (the LOMAS_*_INIT initializers do: `lomas_stats st = LOMAS_STATS_INIT;`)
 * before the call; the library then writes no more than size bytes, fills
 * what it knows of them, and sets size to the bytes it filled (smaller when
 * the library is older than the header the caller was built with: the
 * fields past it were not written). A size below 8 gives LOMAS_EINVAL.
 * The records copied out in arrays (lomas_sample, lomas_window,
 * lomas_thread, lomas_hot_frame, lomas_phase_info) have a fixed layout that
 * will not change (their `reserved` fields are padding: ignore them, but for
 * lomas_sample's under LOMAS_SAMPLE_EXACT_SD).
 *
 * Threads. The library keeps no global state a caller must lock for:
 *  - different objects may be used from different threads at the same time;
 *  - one object may be shared by threads for the calls that take it const
 *    (a lomas_profile given to lomas_model_*, lomas_profile_info_get,
 *    lomas_profile_samples, lomas_profile_hot_pcs, lomas_profile_save...;
 *    a lomas_config given to lomas_session_start or lomas_trace_new; a
 *    lomas_hot_list read by lomas_hot_list_get, _frame, _info), as long as no
 *    thread changes or frees it meanwhile;
 *  - calls that take an object non-const (lomas_config_set,
 *    lomas_profile_meta_set, lomas_profile_merge's dst, lomas_trace_ref,
 *    lomas_hot_list_symbolize) need the caller to make them exclusive: no
 *    other call on that object meanwhile;
 *  - a lomas_session is one thread's: every lomas_session_* call on it,
 *    lomas_session_stats included (it reads what poll updates), from one
 *    thread at a time, best always the same one (the session waits for its
 *    target with waitpid);
 *  - the log callback is process-wide: set it (lomas_set_log_callback)
 *    before other threads call the library, not while they do. It is called
 *    on the thread whose call logs, possibly on several threads at once, so
 *    it must be thread-safe, and it must not call liblomas (but
 *    lomas_strerror): a call would clear that thread's message.
 *
 * Stability. liblomas is at version 0.x: until 1.0 a minor version may
 * change any declaration below (the version macros say which one a program
 * was built against; lomas_version_number() which one it runs with). From
 * 1.0 on, what is outside the LOMAS_EXPERIMENTAL section keeps its names,
 * signatures and meaning across minor versions, and the sized structs above
 * only grow at their end. The declarations inside that section (near the
 * end of this header) are newer and may change or go in any release, 1.0
 * or later; a program sees them only if it defines LOMAS_EXPERIMENTAL
 * before including this header. The library exports them either way.
 */
#ifndef LOMAS_LOMAS_H
#define LOMAS_LOMAS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(LOMAS_BUILDING) && defined(__GNUC__)
#define LOMAS_API __attribute__((visibility("default")))
#else
#define LOMAS_API
#endif

/*
 * The initializer of a sized output struct (see "Structs the library
 * fills" above): its size set, every other field zero. Designated in C, so
 * -Wmissing-field-initializers stays quiet; C++ before C++20 has no
 * designators (there it is a value-initialized struct with size set).
 */
#ifdef __cplusplus
#define LOMAS_SIZED_INIT(type)                \
	([] {                                 \
		type lomas_t_{};              \
		lomas_t_.size = sizeof(type); \
		return lomas_t_;              \
	}())
#else
#define LOMAS_SIZED_INIT(type)       \
	{                            \
		.size = sizeof(type) \
	}
#endif

/* ---------------------------------------------------------------- version */

#define LOMAS_VERSION_MAJOR 0
#define LOMAS_VERSION_MINOR 1
#define LOMAS_VERSION_PATCH 0
#define LOMAS_VERSION_NUMBER \
	(LOMAS_VERSION_MAJOR * 10000 + LOMAS_VERSION_MINOR * 100 + LOMAS_VERSION_PATCH)
#define LOMAS_VERSION_STRING "0.1.0"

/* The version of the library actually loaded, as "MAJOR.MINOR.PATCH". */
LOMAS_API const char *lomas_version(void);
/* The same as LOMAS_VERSION_NUMBER of the library actually loaded. */
LOMAS_API unsigned lomas_version_number(void);

/* ----------------------------------------------------------------- errors */

typedef int lomas_status;

enum {
	LOMAS_OK = 0,
	LOMAS_EINVAL = -1,   /* an argument or option makes no sense */
	LOMAS_ENOMEM = -2,   /* out of memory */
	LOMAS_EIO = -3,      /* a file or stream could not be read or written */
	LOMAS_EFORMAT = -4,  /* input (profile, trace) is corrupt or malformed */
	LOMAS_ENOTSUP = -5,  /* not supported here (feature, clock, platform) */
	LOMAS_ENOENT = -6,   /* a file, program or key does not exist */
	LOMAS_EPERM = -7,    /* permission denied (ptrace, perf_event_paranoid) */
	LOMAS_ESTATE = -8,   /* call not valid in the object's current state */
	LOMAS_ERANGE = -9,   /* a value is out of range (e.g. empty profile) */
	LOMAS_ETARGET = -10, /* the target program failed or went away */
};

/*
 * A static, human-readable name for a status ("invalid argument"); an
 * unknown status gives a name too (never NULL). Does not touch the message.
 */
LOMAS_API const char *lomas_strerror(lomas_status status);

/*
 * The message describing the last error returned to the calling thread, with
 * details (file offsets, line numbers, option names). Every liblomas call
 * clears it on entry except lomas_error_message, lomas_strerror and the
 * _free functions (so that cleaning up before reporting loses nothing):
 * after a call that succeeds it is "". Valid until the next liblomas call on
 * this thread. Text it quotes from files, paths and arguments is escaped
 * (control characters, C1 and bidirectional controls and bytes that are not
 * UTF-8 as \n, \r, \t, \xHH or \uHHHH), so it is safe to print. Never NULL.
 */
LOMAS_API const char *lomas_error_message(void);

/* Optional log sink for warnings the library would otherwise drop. */
typedef enum lomas_log_level {
	LOMAS_LOG_DEBUG = 0,
	LOMAS_LOG_INFO = 1,
	LOMAS_LOG_WARN = 2,
} lomas_log_level;
typedef void (*lomas_log_fn)(lomas_log_level level, const char *message, void *user);
/*
 * Install (or with fn == NULL remove) the process-wide log callback; user
 * is passed back to it. message is valid only during the call, escaped as
 * lomas_error_message's is, and has no trailing newline. See "Threads" at
 * the top: set it before other threads use the library; it runs on the
 * logging thread and must not call liblomas.
 */
LOMAS_API void lomas_set_log_callback(lomas_log_fn fn, void *user);

/* ----------------------------------------------------------------- config */

/*
 * A config is a set of string options. Keys understood (value syntax):
 *   period     mean sampling period in references, integer >= 1, or "auto"
 *              (default: auto — about 20k samples per run)
 *   seed       64-bit seed for the sampling generator (default 1)
 *   line_bytes cache line size in bytes, power of two 8..65536 (default 64;
 *              "line_size" is the same key's deprecated name)
 *   window     window length in references, or "auto" (= 256 x mean period)
 *   max_samples_live  capacity of the watch table (default 0 = unlimited for
 *              the trace clock); samples beyond it are recorded as censored
 *   clock      auto | inline | dbi | step | pmu (live sessions; default auto:
 *              inline when the program carries the lomas-inline hooks, else
 *              dbi when Valgrind and the dbi tool are installed, else step)
 *   watch      auto | mprotect | debugreg (watchpoint engine; default auto =
 *              mprotect; debugreg: hardware breakpoints on the sampled 8-byte
 *              word, step clock only, so reuse is at word granularity)
 *   max_skid   references a simulated (step) or real (pmu) overflow may land
 *              late; the planner compensates (default 0 for step)
 *   events     pmu clock: "LOAD,STORE" event names in libpfm4 syntax (or one
 *              name counting both); default: the detected PMU's table
 *   pmu_sample skid | precise | double_trap: how the pmu clock finds the
 *              sampled reference (default skid: single-step from an early
 *              overflow; precise: PEBS/IBS records; double_trap: the seed's)
 *   period_semantics  auto | immediate | next_overflow: when the kernel
 *              applies PERF_EVENT_IOC_PERIOD (auto: from the kernel version)
 *   pmu_calibrate  yes | no: measure what steps, faults, traps and injected
 *              calls add to the counters at start (default yes)
 *   phase_guided  yes | no: inline and dbi clocks: sample a recognised phase
 *              with 2000 samples 16x less often, weights x16 (default no)
 * Unknown keys and bad values give LOMAS_EINVAL naming the key.
 */
typedef struct lomas_config lomas_config;

/* A new config holding every default (*out; free with lomas_config_free). */
LOMAS_API lomas_status lomas_config_new(lomas_config **out);
/*
 * Set key to value (both strings, copied). EINVAL, naming the key, for an
 * unknown key or a value outside the syntax above; cfg is then unchanged.
 * A key set twice keeps the last value. The config is read when a trace or
 * session is made from it; changing it later changes neither.
 */
LOMAS_API lomas_status lomas_config_set(lomas_config *cfg, const char *key, const char *value);
/*
 * Copy the current value of key (as a string, "auto" where that is the
 * setting) with its NUL into buf of len bytes. ENOENT for an unknown key;
 * ERANGE when it does not fit in len bytes.
 */
LOMAS_API lomas_status lomas_config_get(const lomas_config *cfg, const char *key, char *buf,
                                        size_t len);
/* Free the config; NULL is a harmless no-op. */
LOMAS_API void lomas_config_free(lomas_config *cfg);

/* ---------------------------------------------------------------- profile */

typedef enum lomas_ref_kind {
	LOMAS_REF_LOAD = 0,
	LOMAS_REF_STORE = 1,
} lomas_ref_kind;

typedef enum lomas_sample_state {
	LOMAS_SAMPLE_REUSED = 0,   /* end is the clock of the next touch */
	LOMAS_SAMPLE_DANGLING = 1, /* never touched again before the run ended */
	LOMAS_SAMPLE_CENSORED = 2, /* dropped (no watch slot); end = clock when dropped */
} lomas_sample_state;

#define LOMAS_SAMPLE_CROSS_THREAD 0x1u /* another thread touched the line meanwhile */
/*
 * A REUSED sample whose exact stack distance is known: `reserved` holds the
 * number of distinct lines its thread touched strictly between the sampled
 * reference and its reuse (saturated at UINT32_MAX). Set by the clocks that
 * see every reference (the trace clock); the LRU model then uses it instead
 * of its estimate. Without this flag `reserved` is padding, as before.
 */
#define LOMAS_SAMPLE_EXACT_SD 0x2u

/*
 * One sampled reference. Clocks are per-thread reference counts (the first
 * reference of a thread has clock 0). For a reused sample the reuse distance
 * is end - start - 1: the number of references strictly between the two.
 */
typedef struct lomas_sample {
	uint64_t start;    /* thread clock of the sampled reference */
	uint64_t end;      /* clock of the reuse (REUSED) or drop (CENSORED); else UINT64_MAX */
	uint64_t addr;     /* data address of the sampled reference */
	uint64_t start_pc; /* instruction that made the sampled reference (0 if unknown) */
	uint64_t end_pc;   /* instruction that touched the line again (0 if none) */
	double weight;     /* references this sample stands for (the mean period in force) */
	uint32_t thread;   /* index into the profile's threads */
	uint32_t window;   /* index into the profile's windows */
	uint8_t kind;      /* lomas_ref_kind */
	uint8_t state;     /* lomas_sample_state */
	uint16_t flags;    /* LOMAS_SAMPLE_* flags */
	uint32_t reserved; /* with LOMAS_SAMPLE_EXACT_SD: the exact stack distance, else 0 */
} lomas_sample;

/* A span of one thread's clock. Samples belong to the window they started in. */
typedef struct lomas_window {
	uint64_t start; /* thread clock of the first reference in the window */
	uint64_t refs;  /* references the thread made in the window */
	uint32_t thread;
	uint32_t reserved;
} lomas_window;

typedef struct lomas_thread {
	uint64_t tid;  /* OS thread id (or trace thread number) */
	uint64_t refs; /* references the thread made (its final clock) */
} lomas_thread;

/* Totals of a profile (lomas_profile_info_get). A sized struct (see the top). */
typedef struct lomas_profile_info {
	uint32_t size;       /* set by the caller: sizeof(lomas_profile_info) (see above) */
	uint32_t line_bytes; /* reuse was measured at this granularity */
	uint64_t samples;    /* all samples */
	uint64_t reused;     /* samples with a finite reuse distance */
	uint64_t dangling;   /* samples never reused */
	uint64_t censored;   /* samples dropped with only a lower bound */
	uint64_t windows;
	uint64_t threads;
	uint64_t refs;        /* references over all threads */
	double sample_weight; /* sum of sample weights */
} lomas_profile_info;
#define LOMAS_PROFILE_INFO_INIT LOMAS_SIZED_INIT(lomas_profile_info)

typedef struct lomas_profile lomas_profile;

/*
 * A profile: a run's (or several merged runs') threads, windows and samples,
 * with string metadata ("command", "clock", "line_size", ...) and the
 * memory maps the clock recorded. Every clock produces one; the model reads
 * one. docs/profile-format.md describes the file.
 */

/*
 * An empty profile (no thread, window or sample) for lines of line_bytes
 * (a power of two 8..65536, else EINVAL). Free with lomas_profile_free.
 */
LOMAS_API lomas_status lomas_profile_new(uint32_t line_bytes, lomas_profile **out);
/*
 * Read a profile file into a new profile (*out). ENOENT when path does not
 * exist, EIO when it cannot be read (the message names path and errno).
 * Corrupt input gives LOMAS_EFORMAT with the byte offset;
 * so do numbers no profile can hold: a sample weight outside 2^-64..2^64 (a
 * sample stands for at least 2^-64 and at most 2^64 references; within that
 * no model sum can overflow) or threads whose references add up past 2^64-1.
 */
LOMAS_API lomas_status lomas_profile_load(const char *path, lomas_profile **out);
/*
 * Write a profile file atomically: a temporary file next to path, renamed
 * over it. A new file gets mode 0666 less the umask (as open(2) applies it);
 * a regular file of the caller's that it replaces keeps its permission bits.
 * Any failure (a full disk, a quota, an I/O error, at any write, fsync,
 * close or rename) gives LOMAS_EIO with a message naming path and errno,
 * removes the temporary file and leaves whatever was at path untouched.
 */
LOMAS_API lomas_status lomas_profile_save(const lomas_profile *p, const char *path);
/*
 * Add the threads, windows and samples of src to dst (two runs of the same
 * program: same line size, same "command" metadata when both have one).
 * LOMAS_ERANGE, dst unchanged, if the merged profile's threads, windows or
 * references would not fit their counts (references: 2^64-1 in all).
 * EINVAL, dst unchanged, for different line sizes or commands, or src ==
 * dst.
 */
LOMAS_API lomas_status lomas_profile_merge(lomas_profile *dst, const lomas_profile *src);
/* Free the profile and everything it holds; NULL is a harmless no-op. */
LOMAS_API void lomas_profile_free(lomas_profile *p);

/*
 * The profile's totals into *out (a sized struct: set out->size first, see
 * the top). Counts every sample, so it costs one pass over them.
 */
LOMAS_API lomas_status lomas_profile_info_get(const lomas_profile *p, lomas_profile_info *out);
/*
 * The value of metadata key, or LOMAS_ENOENT. The pointer lives as long as p
 * and until the key is set again.
 */
LOMAS_API lomas_status lomas_profile_meta_get(const lomas_profile *p, const char *key,
                                              const char **value);
/* Set metadata key (non-empty) to value, both copied; EINVAL for an empty key. */
LOMAS_API lomas_status lomas_profile_meta_set(lomas_profile *p, const char *key, const char *value);
/*
 * Number of metadata entries (0 for NULL), and entry i (0-based, in the
 * order keys were first set) as key/value pointers that live as long as
 * meta_get's; ERANGE for i >= the count.
 */
LOMAS_API size_t lomas_profile_meta_count(const lomas_profile *p);
LOMAS_API lomas_status lomas_profile_meta_at(const lomas_profile *p, size_t i, const char **key,
                                             const char **value);

/*
 * Copy up to n samples/windows/threads starting at index first into out
 * (room for n records); *copied says how many (fewer at the end; 0 when
 * first equals the count). ERANGE when first is beyond the count. Indices
 * are those lomas_sample.thread and .window refer to.
 */
LOMAS_API lomas_status lomas_profile_samples(const lomas_profile *p, size_t first, size_t n,
                                             lomas_sample *out, size_t *copied);
LOMAS_API lomas_status lomas_profile_windows(const lomas_profile *p, size_t first, size_t n,
                                             lomas_window *out, size_t *copied);
LOMAS_API lomas_status lomas_profile_threads(const lomas_profile *p, size_t first, size_t n,
                                             lomas_thread *out, size_t *copied);

typedef enum lomas_export_format {
	LOMAS_EXPORT_JSON = 0, /* one JSON document: metadata, threads, windows, samples */
	LOMAS_EXPORT_CSV = 1,  /* one row per sample with a header line */
} lomas_export_format;

/*
 * Write the profile in a format for people and scripts to the stream out
 * (not closed; EIO when a write fails). The field names follow the file
 * format's (docs/profile-format.md), so the line size is "line_size".
 */
LOMAS_API lomas_status lomas_profile_export(const lomas_profile *p, lomas_export_format format,
                                            FILE *out);

/* ------------------------------------------------------------------ model */

typedef enum lomas_policy {
	LOMAS_POLICY_RANDOM = 0, /* StatCache: fully associative, random replacement */
	LOMAS_POLICY_LRU = 1,    /* StatStack: fully associative LRU */
} lomas_policy;

/* Model flags. */
#define LOMAS_MODEL_COLD 0x1u /* count cold (compulsory) misses; excluded by default */

/*
 * The model calls read a profile (never change it) and compute; any clock's
 * profile will do. Common arguments: line_bytes is 0 (the profile's line
 * size) or equal to it (a profile cannot be remodelled at another line
 * size: EINVAL); every cache size is a positive multiple of the line size
 * (EINVAL); flags is 0 or LOMAS_MODEL_COLD (EINVAL for others); a profile
 * without samples gives ERANGE. Results are deterministic: the same
 * profile and arguments give the same numbers, on any thread.
 */

/*
 * The miss ratio (misses per reference, 0..1) of a cache of cache_bytes with
 * lines of line_bytes, into *ratio.
 */
LOMAS_API lomas_status lomas_model_miss_ratio(const lomas_profile *p, lomas_policy policy,
                                              uint64_t cache_bytes, uint32_t line_bytes,
                                              unsigned flags, double *ratio);

/*
 * Miss ratios for n cache sizes (bytes) at once into ratios[n]; faster than n calls.
 *
 * The model (docs/model.md): the profile's windows are pooled into
 * segments whose reuse distances look alike; a reuse that spans segments is
 * judged by every segment it crosses (its stack distance by the references
 * between its two ends, its survival under random replacement by the miss
 * ratios of the segments it crosses, cold misses included); LRU stack
 * distances of frequent kinds of reuse are checked against the reuses' own
 * intervals; and no cache holding a thread's footprint (estimated from its
 * dangling samples) gets capacity misses.
 */
LOMAS_API lomas_status lomas_model_curve(const lomas_profile *p, lomas_policy policy,
                                         const uint64_t *cache_bytes, size_t n, uint32_t line_bytes,
                                         unsigned flags, double *ratios);

/*
 * lomas_model_curve with a confidence interval per size: ratios[i] is the
 * same estimate, [lo[i], hi[i]] an interval that holds the miss ratio the
 * model would give with every reference sampled with probability level
 * (0.95 when level is 0; otherwise 0 < level < 1). It comes from
 * `resamples` (0 = 200; at most 100000) Poisson-bootstrap replicates of the
 * samples: each sample's weight times an independent Poisson(1) count, the
 * model run again, the percentile interval taken (widened to include the
 * estimate). It reflects sampling noise, not the model's own approximations.
 * Deterministic: the same profile, arguments and seed give the same
 * intervals. Costs about `resamples` curves. LOMAS_ERANGE when the profile
 * has too few samples for one.
 */
LOMAS_API lomas_status lomas_model_curve_ci(const lomas_profile *p, lomas_policy policy,
                                            const uint64_t *cache_bytes, size_t n,
                                            uint32_t line_bytes, unsigned flags, double level,
                                            unsigned resamples, uint64_t seed, double *ratios,
                                            double *lo, double *hi);

/*
 * The default working-set-graph sizes: 1 KiB to 1 GiB, 4 points per octave,
 * each rounded to a multiple of line_bytes (81 sizes for 64-byte lines).
 * Writes at most cap sizes into sizes and the total count into *n.
 */
LOMAS_API lomas_status lomas_model_default_sizes(uint32_t line_bytes, uint64_t *sizes, size_t cap,
                                                 size_t *n);

/* --------------------------------------------- per-instruction attribution */

/*
 * Which instructions miss (UMI's "delinquent loads", done the model's way).
 * Each sample is a reference and the next touch of its line (its reuse,
 * made by the sample's end pc). For a fully associative cache of
 * cache_bytes the model of lomas_model_curve (the same one, time-aware:
 * docs/model.md) gives each reuse a miss probability: under random
 * replacement f_L(M) = 1 - (1 - 1/L)^M, with L the cache's lines and M the
 * expected misses between the reference and its reuse (the StatCache miss
 * ratios and cold-miss rates of the program's phases that its interval
 * crosses, each for its share: R d for a reuse of distance d inside one
 * phase of miss ratio R); under LRU 1 when its expected stack distance
 * (StatStack, over the phases it crosses, corrected for its reuse class
 * where the model corrects it) reaches L, else 0. A miss belongs to the
 * instruction that missed: the sample's end pc. Where the reusing
 * instruction is unknown the miss goes to the start pc, the last
 * instruction seen to touch the line, and is also counted in
 * lomas_hot_pc.unseen_misses: censored samples (a reuse too far to watch:
 * a miss in every cache, as the curves count it)
 * and, only with LOMAS_MODEL_COLD, dangling ones (never reused: each
 * stands for a line's cold miss; in a stream the instruction that touched
 * a line last is the one that touched it first). Without LOMAS_MODEL_COLD
 * dangling samples carry no miss.
 *
 * Per instruction (pc): estimated misses = sum of weight x probability over
 * the samples it ended, scaled as the curves weigh the program's phases
 * (and, under random replacement, by the footprint bound as the curves
 * apply it), so that the misses of all pcs divided by lomas_hot_info.refs
 * is lomas_model_miss_ratio for the same arguments (to rounding; a curve
 * of many sizes at once solves StatCache on a grid, within 2e-5 of that);
 * its references = the weights of the samples it started (same scaling);
 * its miss ratio and its share of all misses.
 *
 * The list is ordered by misses, largest first (then by pc). The delinquent
 * set is its first lomas_hot_info.delinquent entries: the smallest set of
 * pcs that covers 90 % of the estimated misses (the first
 * lomas_hot_info.cover90 entries), and with it every pc that carries at
 * least 1 % of them. The second rule is UMI's threshold for a delinquent
 * load, which its recall is measured against: where three loads cover 90 %,
 * a fourth with 8 % is no less worth a look. cover90 <= delinquent.
 *
 * Symbols come from the memory maps recorded in the profile (the inline,
 * step and trace-of-lackey clocks record them; a profile without maps gets
 * LOMAS_SYM_NO_MAPS) and the files they name, read when the list is made:
 * the run's program need not be alive, but its binaries must still be
 * where the maps say. A file whose GNU build id differs from the one
 * recorded at the run is not symbolized (LOMAS_SYM_CHANGED). Stripped
 * files give the function from the symbol table only; separate debug files
 * are found by build id (DIR/.build-id/xx/rest.debug) or .gnu_debuglink
 * (next to the binary, in its .debug/, or under DIR/<its directory>), DIR
 * being /usr/lib/debug or the directories given to
 * lomas_hot_list_symbolize. The inline clock records the return address of
 * its hook call as a reference's pc: for its profiles pc - 1 is looked up.
 */
typedef struct lomas_hot_list lomas_hot_list;

/* A flag of lomas_profile_hot_pcs: attribute only, do not read any file. */
#define LOMAS_HOT_NO_SYMBOLS 0x100u

typedef enum lomas_sym_status {
	LOMAS_SYM_OK = 0,        /* a function (and, with debug info, file:line) */
	LOMAS_SYM_NONE = 1,      /* not symbolized: LOMAS_HOT_NO_SYMBOLS, or pc 0 (unknown) */
	LOMAS_SYM_NO_MAPS = 2,   /* the profile records no memory maps (e.g. a lackey trace) */
	LOMAS_SYM_NO_MAP = 3,    /* no recorded file mapping holds the pc ([vdso], JIT code) */
	LOMAS_SYM_NO_FILE = 4,   /* the mapped file cannot be read now (gone, not ELF) */
	LOMAS_SYM_CHANGED = 5,   /* the file's build id is not the run's: it was rebuilt */
	LOMAS_SYM_NO_SYMBOL = 6, /* in the file, but no symbol or line information covers it */
} lomas_sym_status;

/* One call site of an inlined-at chain. */
typedef struct lomas_hot_frame {
	const char *function; /* the function holding the call site, or NULL */
	const char *file;     /* NULL if unknown */
	uint32_t line, column;
} lomas_hot_frame;

/*
 * One instruction (lomas_hot_list_get; a sized struct, see the top).
 * Strings live as long as the list (until lomas_hot_list_symbolize or
 * lomas_hot_list_free); NULL when unknown.
 */
typedef struct lomas_hot_pc {
	uint32_t
	    size; /* set by the caller: sizeof(lomas_hot_pc) (see "Structs the library fills") */
	uint32_t reserved;
	uint64_t pc;
	double misses;            /* estimated misses (references, like lomas_hot_info.refs) */
	double unseen_misses;     /* the part of misses from censored or dangling samples */
	double refs;              /* estimated references the instruction made */
	double miss_ratio;        /* misses / refs (0..1), or misses / its reuses when it
	                             started no sample (its references are then unknown) */
	double share;             /* misses / all misses (0..1) */
	uint64_t samples_started; /* samples taken at this pc */
	uint64_t samples_ended;   /* samples whose reuse this pc made */
	int delinquent;           /* 1 if in the delinquent set */
	lomas_sym_status sym;
	const char *sym_detail; /* why sym is not LOMAS_SYM_OK, for people ("" if it is) */
	const char *module;     /* the mapped file holding pc */
	uint64_t module_offset; /* pc as an address of that file (as nm shows it) */
	const char *function;   /* innermost function; an inlined one when inlined */
	const char *file;       /* source file of the instruction (needs debug info) */
	uint32_t line, column;  /* 0 if unknown */
	size_t inlined;         /* call sites in the inlined-at chain (lomas_hot_list_frame) */
} lomas_hot_pc;
#define LOMAS_HOT_PC_INIT LOMAS_SIZED_INIT(lomas_hot_pc)

/* The list's totals and arguments (lomas_hot_list_info; a sized struct, see the top). */
typedef struct lomas_hot_info {
	uint32_t
	    size; /* set by the caller: sizeof(lomas_hot_info) (see "Structs the library fills") */
	uint32_t line_bytes;
	uint64_t cache_bytes;
	lomas_policy policy;
	unsigned flags;
	size_t count;      /* pcs in the list */
	size_t delinquent; /* the delinquent set: the first `delinquent` pcs (>= cover90) */
	double misses;     /* all estimated misses */
	double refs;       /* the references they are a share of (misses / refs: the miss ratio) */
	int has_maps;      /* 1 if the profile records memory maps */
	size_t cover90;    /* the fewest pcs covering 90 % of the misses: the first cover90 */
} lomas_hot_info;
#define LOMAS_HOT_INFO_INIT LOMAS_SIZED_INIT(lomas_hot_info)

/*
 * Attribute the misses of a fully associative cache of cache_bytes (a
 * positive multiple of the line size) with lines of line_bytes (0 = the
 * profile's; any other value must equal it) under policy to instructions,
 * and symbolize them (unless flags has LOMAS_HOT_NO_SYMBOLS; debug files
 * under /usr/lib/debug). flags: LOMAS_MODEL_COLD | LOMAS_HOT_NO_SYMBOLS.
 * On success *out is a new list for lomas_hot_list_free. Errors: EINVAL
 * (a NULL argument, unknown policy or flags, a bad size), ERANGE (a
 * profile without samples), ENOMEM; *out is then NULL. Files that cannot
 * be symbolized are not errors: their pcs carry a lomas_sym_status.
 */
LOMAS_API lomas_status lomas_profile_hot_pcs(const lomas_profile *p, lomas_policy policy,
                                             uint64_t cache_bytes, uint32_t line_bytes,
                                             unsigned flags, lomas_hot_list **out);
/* The number of pcs in the list (0 for NULL). */
LOMAS_API size_t lomas_hot_list_count(const lomas_hot_list *l);
/* Copy entry i (0-based, largest misses first) into *out (set out->size first); EINVAL out of
 * range. */
LOMAS_API lomas_status lomas_hot_list_get(const lomas_hot_list *l, size_t i, lomas_hot_pc *out);
/*
 * Call site j (0 = where the innermost function was inlined, then outward)
 * of entry i's inlined-at chain into *out; EINVAL out of range.
 */
LOMAS_API lomas_status lomas_hot_list_frame(const lomas_hot_list *l, size_t i, size_t j,
                                            lomas_hot_frame *out);
/* Totals and the arguments the list was made with (set out->size first). */
LOMAS_API lomas_status lomas_hot_list_info(const lomas_hot_list *l, lomas_hot_info *out);
/*
 * Symbolize (again) every entry of l from p's maps (p: the profile l was
 * made from), looking for separate debug files in debug_path (directories
 * separated by ':'; NULL = "/usr/lib/debug"). Strings of earlier entries
 * copied out of the list are invalidated.
 */
LOMAS_API lomas_status lomas_hot_list_symbolize(lomas_hot_list *l, const lomas_profile *p,
                                                const char *debug_path);
/* Free the list and its strings; NULL is a harmless no-op. */
LOMAS_API void lomas_hot_list_free(lomas_hot_list *l);

/* ------------------------------------------------------------------ trace */

/*
 * The trace clock: feed it every reference of a run, in order; it samples
 * references at exponentially distributed intervals (seeded: same seed and
 * input, same profile) and measures each sample's forward reuse distance
 * exactly. period = 1 samples every reference (the exact histogram).
 * No process is involved: the caller is the clock.
 */
typedef struct lomas_trace lomas_trace;

/*
 * A new trace clock with cfg's period, seed, line_bytes, window and
 * max_samples_live (cfg NULL: the defaults; the live-session keys are
 * ignored). EINVAL for a setting the trace clock cannot use. Free with
 * lomas_trace_free.
 */
LOMAS_API lomas_status lomas_trace_new(const lomas_config *cfg, lomas_trace **out);
/*
 * One reference by thread (any 64-bit id; a new id is a new thread) of kind
 * at addr, made by the instruction at pc (0 if unknown). EINVAL for a bad
 * kind; ESTATE after lomas_trace_finish; ERANGE when a thread's clock or the
 * number of threads would overflow.
 */
LOMAS_API lomas_status lomas_trace_ref(lomas_trace *t, uint64_t thread, uint64_t addr, uint64_t pc,
                                       lomas_ref_kind kind);
/*
 * End the run: open samples become dangling. Transfers a new profile to *out
 * (the caller frees it). Once only: a second call gives ESTATE. The trace
 * itself still needs lomas_trace_free.
 */
LOMAS_API lomas_status lomas_trace_finish(lomas_trace *t, lomas_profile **out);
/* Free the trace (finished or not); NULL is a harmless no-op. */
LOMAS_API void lomas_trace_free(lomas_trace *t);

/*
 * Read Valgrind lackey --trace-mem=yes output from path ("-" = standard
 * input) through the trace clock. Malformed lines give LOMAS_EFORMAT naming
 * the line number.
 */
LOMAS_API lomas_status lomas_trace_analyze_lackey(const lomas_config *cfg, const char *path,
                                                  lomas_profile **out);
/* The same from an open stream; name is used in messages. */
LOMAS_API lomas_status lomas_trace_analyze_lackey_stream(const lomas_config *cfg, FILE *in,
                                                         const char *name, lomas_profile **out);

/* ---------------------------------------------------------------- session */

/*
 * A live session: run (or attach to) a target program under a clock and
 * collect its profile. The clock is chosen by the config key "clock":
 * inline (the target was built with the lomas-inline hooks), dbi (any
 * x86-64 program, unmodified, run under Valgrind with liblomas's tool: a few
 * times slower; it cannot attach, and programs the target executes run
 * natively), step (ptrace single-stepping, any binary, slow), pmu (hardware
 * counters), or auto.
 *
 * Who holds the profile differs, and with it what each call does:
 *  - inline: the target samples itself and writes its profile when it ends
 *    (the session passes the LOMAS_* environment of <lomas/inline.h> and
 *    waits for it). Until then there is nothing to read: stats are zeros
 *    and lomas_session_profile gives ESTATE. Stop leaves the program
 *    sampling itself; it writes the profile at its exit, which this session
 *    no longer reads.
 *  - dbi: the Valgrind tool samples and hands its samples over when the
 *    target ends or the session stops; before that, as inline.
 *  - step, pmu: the session (a ptrace supervisor) samples. Stats are live;
 *    lomas_session_profile is a snapshot at any time (samples still open
 *    are dangling in it); stop removes every watchpoint and detaches.
 * Per call and clock:
 *
 *   call              inline            dbi               step / pmu
 *   start             yes               yes               yes
 *   attach            ENOTSUP           ENOTSUP           yes
 *   poll, wait        waitpid           waitpid           handle ptrace stops
 *   stop              detach only       hand-over, detach detach
 *   interrupt         yes               ENOTSUP           ENOTSUP
 *   stats             after the end     after hand-over   live
 *   profile           after the end     after hand-over   live snapshot
 *
 * A session runs the target as a child of the calling process (start) or
 * traces it (attach): waitpid(-1, ...) elsewhere in the caller may take its
 * status from the session. One thread should own a session (see "Threads").
 */
typedef struct lomas_session lomas_session;

/*
 * What a session counted (lomas_session_stats; a sized struct, see the
 * top). Fields a clock does not count stay 0 (faults, steps... for inline
 * and dbi).
 */
typedef struct lomas_stats {
	uint32_t
	    size; /* set by the caller: sizeof(lomas_stats) (see "Structs the library fills") */
	uint32_t reserved;
	uint64_t refs;              /* references counted so far (all threads) */
	uint64_t samples;           /* samples started */
	uint64_t reused;            /* samples ended by a reuse */
	uint64_t censored;          /* samples dropped for lack of a watch slot */
	uint64_t faults;            /* watchpoint traps taken */
	uint64_t false_positives;   /* traps on a watched page but not a watched line */
	uint64_t reprotects;        /* pages protected again after a trap */
	uint64_t steps;             /* single-steps made */
	uint64_t injected_syscalls; /* system calls injected into the target */
	uint64_t signals_forwarded; /* target signals delivered on its behalf */
	uint64_t threads;           /* threads seen */
	uint64_t elapsed_ns;        /* wall time since start */
} lomas_stats;
#define LOMAS_STATS_INIT LOMAS_SIZED_INIT(lomas_stats)

/*
 * Start argv[0] (searched in PATH when it has no '/') with argv (NULL-
 * terminated) under cfg's clock (cfg NULL: the defaults, clock auto) into a
 * new session (*out). The target inherits the caller's environment,
 * descriptors and working directory. ENOENT when the program is not found,
 * ENOTSUP when the chosen clock cannot run it here (the message says why
 * and which clock would: an inline clock for a program without the hooks,
 * a pmu clock without usable counters), EPERM when ptrace or perf is
 * refused. Free with lomas_session_free.
 */
LOMAS_API lomas_status lomas_session_start(const lomas_config *cfg, char *const argv[],
                                           lomas_session **out);
/*
 * Attach to the running process pid (all its threads): step and pmu clocks
 * only (ENOTSUP for inline and dbi); EPERM when ptrace is refused
 * (ptrace_scope), ENOENT when there is no such process. Its profiles carry
 * the metadata start = attached: the program's caches were warm when it
 * began (the random-replacement model otherwise takes them for empty).
 */
LOMAS_API lomas_status lomas_session_attach(const lomas_config *cfg, int pid, lomas_session **out);
/*
 * Handle pending events for at most timeout_ms (0 = do not block, -1 = until
 * the target ends). *running is set to 0 once the target has ended (or the
 * session stopped), else 1. A signal to the caller may end the wait early
 * (LOMAS_OK, *running 1). ETARGET when the target could not be followed.
 */
LOMAS_API lomas_status lomas_session_poll(lomas_session *s, int timeout_ms, int *running);
/*
 * Run until the target ends; *wait_status gets its waitpid()-style status.
 * LOMAS_ESTATE (as from lomas_session_poll) once lomas_session_stop has
 * detached from a target that was still running: it runs on, not waited
 * for, and there is no status to give.
 */
LOMAS_API lomas_status lomas_session_wait(lomas_session *s, int *wait_status);
/*
 * Detach: remove every watchpoint, restore protections, leave the target
 * running. The profile and stats collected so far stay available. Nothing
 * to do (LOMAS_OK) after the target ended or a first stop. With the dbi
 * clock the program runs on under Valgrind (it cannot leave it), no longer
 * sampled; the profile holds what was collected.
 */
LOMAS_API lomas_status lomas_session_stop(lomas_session *s);
/* lomas_session_interrupt flag: the target got the signal too (a terminal's
 * ^C goes to the whole foreground process group). */
#define LOMAS_INTERRUPT_DELIVERED 1
/*
 * The caller got signal sig (SIGINT, SIGTERM) and the run is to end, keeping
 * what was collected, where the profile is the target's own to write (the
 * inline clock writes it when the program ends, on that signal too): the
 * target gets sig, unless it already has (flags: LOMAS_INTERRUPT_DELIVERED;
 * else the session looks for it pending, and passes it on if the target is
 * still running a second later), and the session runs on (poll, wait) until
 * the target ends; then lomas_session_profile has its profile.
 * LOMAS_ENOTSUP for a clock that keeps the profile itself (step; dbi, whose
 * tool hands over what it has when the session detaches): detach with
 * lomas_session_stop instead.
 */
LOMAS_API lomas_status lomas_session_interrupt(lomas_session *s, int sig, int flags);
/*
 * What the session counted so far into *out (set out->size first; see the
 * table above for when each clock knows its counts).
 */
LOMAS_API lomas_status lomas_session_stats(const lomas_session *s, lomas_stats *out);
/*
 * The profile collected so far (a new object owned by the caller; each call
 * gives a new one). inline: ESTATE while the target runs or after stop;
 * after it ended, the profile it wrote (EIO or EFORMAT, with the reason,
 * when it wrote none or a bad one). dbi: ESTATE while the target runs under
 * the tool; after the end or stop, what the tool handed over. step and pmu:
 * at any time.
 */
LOMAS_API lomas_status lomas_session_profile(lomas_session *s, lomas_profile **out);
/*
 * Free the session; a target still attached is detached first, never left
 * stopped (it runs on; a started one is not killed). NULL is a harmless
 * no-op.
 */
LOMAS_API void lomas_session_free(lomas_session *s);
/*
 * The clock the session runs ("pmu", "inline", "step", ...): what clock=auto
 * chose. NULL for a NULL session. Lives as long as the library.
 */
LOMAS_API const char *lomas_session_clock(const lomas_session *s);

/* ------------------------------------------------------------ experimental */

/*
 * Newer calls whose shape may still change in any release (see "Stability"
 * at the top): a program that uses them defines LOMAS_EXPERIMENTAL before
 * it includes this header, and accepts that it may have to change with the
 * library. They follow the conventions at the top like every other call.
 */
#ifdef LOMAS_EXPERIMENTAL

/*
 * lomas_model_curve for set-associative caches of `ways` ways (0 = fully
 * associative: exactly lomas_model_curve), each size a whole number of sets
 * (cache_bytes a multiple of ways x line size); a line's set is its line
 * number modulo the number of sets. LRU: a reuse misses when at least
 * `ways` of the distinct lines touched since the last touch of its line
 * map to its set; random replacement: each miss in its set evicts it with
 * probability 1/ways. How lines spread over sets is measured from the
 * samples (a power-of-two stride that folds an array onto a few sets shows
 * its conflict misses), the rest is lomas_model_curve's model. flags:
 * LOMAS_MODEL_COLD. Errors as lomas_model_curve's, and EINVAL for a size
 * that is not a whole number of sets.
 */
LOMAS_API lomas_status lomas_model_curve_assoc(const lomas_profile *p, lomas_policy policy,
                                               const uint64_t *cache_bytes, size_t n,
                                               uint32_t line_bytes, unsigned ways, unsigned flags,
                                               double *ratios);

/*
 * Miss-ratio bounds for an LRU cache of cache_bytes shared with other
 * programs (the stochastic thrashing model): *lower is the warm cache's miss
 * ratio (lomas_model_miss_ratio, LRU); upper[i] that of a cache emptied of
 * this program's lines every quantum_refs[i] of its references: after each
 * flush the distinct lines touched since (the active span) grow as a
 * pure-birth Markov chain leaving span s with the probability that a
 * reference's stack distance is at least s, every reference of a new line
 * misses, and once the span fills the cache misses come at the warm rate.
 * The expected misses per quantum come from the chain's phase-type fill
 * times (gamma-approximated), q from the model's LRU curve. flags:
 * LOMAS_MODEL_COLD (cold misses counted in both bounds; without it they are
 * left out of both). EINVAL for a quantum of 0 or a bad size.
 */
LOMAS_API lomas_status lomas_model_thrash_bounds(const lomas_profile *p, uint64_t cache_bytes,
                                                 uint32_t line_bytes, const uint64_t *quantum_refs,
                                                 size_t n, unsigned flags, double *lower,
                                                 double *upper);

/*
 * Program phases (the phase-detection paper's cache access signatures). Per window a data signature
 * (the set index, line number mod `buckets` (0 = 1024), of each sampled line, counted) and a code
 * signature (sampled pcs hashed into 32 buckets); similarity is the mean of the two cosines (data
 * alone when the profile has no pcs), with the norms freed of the sampling noise
 * (lib/model/phases.c). In the profile's window order, a window joins the most similar phase whose
 * similarity reaches `threshold` (0 = 0.8) and the phase's representative (the running mean of its
 * windows) takes it in; an unmatched window is phase 0 (a transition) until windows like it have
 * been seen `transition_threshold` (0 = 2) times, and then they form a new phase (ids 1, 2, ... in
 * order of appearance). window_phase[nwindows] (nwindows >= the profile's windows) receives each
 * window's phase; phases[cap] the first cap phases, index = id, 0 the
 * transitions; *nphases the number of phases, 0 included.
 */
typedef struct lomas_phase_info {
	uint32_t phase;   /* id; 0 = transition windows */
	uint32_t demand;  /* cache demand: non-zero data buckets of its windows */
	uint64_t windows; /* windows in the phase */
	uint64_t refs;    /* references of those windows */
	uint32_t reserved;
} lomas_phase_info;

LOMAS_API lomas_status lomas_profile_phases(const lomas_profile *p, uint32_t buckets,
                                            double threshold, unsigned transition_threshold,
                                            uint32_t *window_phase, size_t nwindows,
                                            lomas_phase_info *phases, size_t cap, size_t *nphases);

/*
 * A new profile of the windows whose window_phase entry is `phase` and the
 * samples that started in them, each thread's clock closed up over the
 * windows left out (its curve is the phase's own: lomas_model_curve on it).
 * A reuse ending in a left-out window becomes a censored sample ending at
 * the next kept clock. Metadata and memory maps are copied. Free with
 * lomas_profile_free.
 */
LOMAS_API lomas_status lomas_profile_phase_select(const lomas_profile *p,
                                                  const uint32_t *window_phase, size_t nwindows,
                                                  uint32_t phase, lomas_profile **out);

/*
 * What this machine offers, as one JSON document (*json_out, freed with
 * lomas_string_free): "clocks" (name, works, and why not), the perf settings
 * (perf_event_paranoid, ptrace_scope, breakpoints), and "pmu": the detected
 * core PMU's load/store events with their perf encodings. pmu names any
 * libpfm4 PMU to show its tables instead ("nhm", "skl", "amd64_fam19h_zen3";
 * LOMAS_EINVAL if unknown), "list" lists them; NULL for this machine's.
 */
LOMAS_API lomas_status lomas_machine_info(const char *pmu, char **json_out);

/*
 * The program lomas_session_start runs for command (its argv[0]), as
 * execvp finds it: command itself when it has a '/', else the first
 * executable file of that name in the directories of PATH (unset:
 * /usr/local/bin:/usr/bin:/bin), directories skipped. Its path (with NUL)
 * goes into path[len]. ENOENT when there is none ("command not found"),
 * EPERM when one is there but not executable, or command is a directory
 * (the message says which), ERANGE when a command with a '/' does not fit.
 */
LOMAS_API lomas_status lomas_program_find(const char *command, char *path, size_t len);

#endif /* LOMAS_EXPERIMENTAL */

/* Free a string the library returned; NULL is a harmless no-op. */
LOMAS_API void lomas_string_free(char *s);

#ifdef __cplusplus
}
#endif

#endif /* LOMAS_LOMAS_H */

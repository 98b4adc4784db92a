/*
 * lib/core internal interface: errors, config, the in-memory profile, rng, crc32.
 * Only liblomas sources and its tests include this; it is not installed.
 */
#ifndef LOMAS_CORE_H
#define LOMAS_CORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lomas/lomas.h"

#if defined(__GNUC__)
#define LOMAS_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define LOMAS_PRINTF(a, b)
#endif

#define LOMAS_CLOCK_NONE UINT64_MAX /* lomas_sample.end of a dangling sample */

/* ------------------------------------------------------------------ errors */

/* Set the thread-local message (printf format) and return status. */
lomas_status error_set(lomas_status status, const char *fmt, ...) LOMAS_PRINTF(2, 3);
/* Prefix the current message with "prefix: " keeping status; returns status. */
lomas_status error_prefix(lomas_status status, const char *fmt, ...) LOMAS_PRINTF(2, 3);
/* Clear the message (called on success paths that report nothing). */
void error_clear(void);
/* Send a message to the log callback, if any (never prints). */
void log_msg(lomas_log_level level, const char *fmt, ...) LOMAS_PRINTF(2, 3);

/* ------------------------------------------------------------------ config */

#define CONFIG_AUTO 0 /* numeric value meaning "auto" */

typedef enum config_clock {
	CLOCK_AUTO = 0,
	CLOCK_INLINE,
	CLOCK_STEP,
	CLOCK_PMU,
} config_clock;

typedef enum config_watch {
	WATCH_AUTO = 0,
	WATCH_MPROTECT,
	WATCH_DEBUGREG,
} config_watch;

struct lomas_config {
	uint64_t period_refs; /* CONFIG_AUTO or >= 1 */
	uint64_t seed;
	uint32_t line_size;        /* bytes, power of two */
	uint64_t window_refs;      /* CONFIG_AUTO or >= 1 */
	uint64_t max_samples_live; /* 0 = unlimited */
	config_clock clock;
	config_watch watch;
	uint32_t max_skid; /* references */
};

/* Names of the enum values ("auto", "inline", ...). */
const char *config_clock_name(config_clock c);
const char *config_watch_name(config_watch w);

/* Fill cfg with defaults (used when a caller passes a NULL config). */
void config_defaults(struct lomas_config *cfg);
/* Parse an unsigned decimal/hex integer with optional k/M/G suffix; false if bad. */
bool config_parse_u64(const char *s, uint64_t *out);

/* ----------------------------------------------------------------- profile */

typedef struct prof_meta {
	char *key;
	char *value;
} prof_meta;

typedef struct prof_calib {
	char *key; /* e.g. "step.fault" */
	double value;
} prof_calib;

typedef struct prof_map {
	uint64_t start, end, offset;
	uint32_t prot; /* PROT_* bits */
	uint32_t reserved;
	char *path; /* may be "" for anonymous */
} prof_map;

/* Growable array: items, count n, capacity cap. */
#define VEC(T)                 \
	struct {               \
		T *items;      \
		size_t n, cap; \
	}

struct lomas_profile {
	uint32_t line_size;
	VEC(lomas_sample) samples;
	VEC(lomas_window) windows;
	VEC(lomas_thread) threads;
	VEC(prof_meta) meta;
	VEC(prof_calib) calib;
	VEC(prof_map) maps;
};

/* Make room for at least want items in a VEC; LOMAS_ENOMEM on failure. */
lomas_status vec_reserve_(void **items, size_t *cap, size_t item_size, size_t want);
#define vec_reserve(v, want) \
	vec_reserve_((void **)&(v)->items, &(v)->cap, sizeof(*(v)->items), (want))

/* Append one item to a profile array; return LOMAS_ENOMEM on failure. */
lomas_status profile_add_sample(struct lomas_profile *p, const lomas_sample *s);
lomas_status profile_add_window(struct lomas_profile *p, const lomas_window *w);
lomas_status profile_add_thread(struct lomas_profile *p, const lomas_thread *t);
lomas_status profile_set_calib(struct lomas_profile *p, const char *key, double value);
lomas_status profile_add_map(struct lomas_profile *p, const prof_map *m);
/* Metadata setter with printf format for the value. */
lomas_status profile_meta_setf(struct lomas_profile *p, const char *key, const char *fmt, ...)
    LOMAS_PRINTF(3, 4);

/*
 * Check the profile's internal consistency (indices in range, windows of
 * known threads, end >= start for reused samples, finite positive weights).
 * LOMAS_EFORMAT with a message naming the first offending item.
 */
lomas_status profile_validate(const struct lomas_profile *p);
/* profile_validate's checks of sample number i (s), against p's threads and windows. */
lomas_status profile_check_sample(const struct lomas_profile *p, size_t i, const lomas_sample *s);

static inline bool line_size_valid(uint64_t b)
{
	return b >= 8 && b <= 65536 && (b & (b - 1)) == 0;
}

/* Reuse distance of a REUSED sample (references strictly between). */
static inline uint64_t sample_distance(const lomas_sample *s)
{
	return s->end - s->start - 1;
}

/* --------------------------------------------------------------------- rng */

/* xoshiro256** seeded by splitmix64; reproducible across platforms. */
typedef struct rng {
	uint64_t s[4];
} rng;

void rng_seed(rng *r, uint64_t seed);
uint64_t rng_next(rng *r);
/* Uniform double in (0, 1]: never 0, so log() is finite. */
double rng_uniform(rng *r);
/*
 * Gap to the next sample when each reference is sampled independently with
 * probability 1/mean (a geometric variate >= 1; exactly 1 when mean <= 1).
 */
uint64_t rng_gap(rng *r, double mean);
/* rng_gap in two steps for a mean used many times (same draws, same results):
 * rng_gap_with(r, rng_gap_log(mean)) == rng_gap(r, mean). */
double rng_gap_log(double mean);
uint64_t rng_gap_with(rng *r, double gap_log);

/* ------------------------------------------------------------------- crc32 */

/* CRC-32 (IEEE 802.3, as zlib's crc32); start with crc = 0. */
uint32_t crc32_update(uint32_t crc, const void *data, size_t len);
/* Tests: on = use only the tables (never PCLMULQDQ); off = detect again. */
void crc32_force_portable(int on);

/* ------------------------------------------------------------ profile file */

/*
 * Decode a profile file image of len bytes (untrusted). name is used in
 * messages ("name: offset N: ..."). LOMAS_EFORMAT for anything malformed.
 */
lomas_status profile_load_buffer(const void *data, size_t len, const char *name,
                                 lomas_profile **out);
/* Encode p as a profile file image: a malloc'd buffer in *data of *len bytes. */
lomas_status profile_save_buffer(const lomas_profile *p, void **data, size_t *len);

/*
 * More samples, after p's own, that the encoder takes one at a time instead
 * of from an array (the inline runtime's exit path: its thread stores
 * become the file's samples section without a 64-byte record per sample in
 * memory). next fills *out with the next of the n, or fails (error set).
 * Each is checked as profile_validate would.
 */
typedef struct profile_sample_source {
	uint64_t n;
	lomas_status (*next)(void *ctx, lomas_sample *out);
	void *ctx;
} profile_sample_source;

/*
 * profile_save_buffer of p with src's samples appended (src may be NULL), or
 * the same bytes written to fd at their offsets (from 0), staged 64 KiB at a
 * time.
 */
lomas_status profile_save_buffer_src(const lomas_profile *p, const profile_sample_source *src,
                                     void **data, size_t *len);
lomas_status profile_save_fd_src(const lomas_profile *p, const profile_sample_source *src, int fd);
/*
 * Save p to path atomically (a temporary file renamed over path, keeping an
 * existing file's mode). durable: also fsync the file and its directory
 * (lomas_profile_save); the inline runtime's exit path skips that, as perf
 * record does, since the program's own exit is what it delays.
 */
lomas_status profile_save_file(const lomas_profile *p, const char *path, bool durable);
lomas_status profile_save_file_src(const lomas_profile *p, const profile_sample_source *src,
                                   const char *path, bool durable);

#endif /* LOMAS_CORE_H */

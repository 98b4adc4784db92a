/*
 * lib/core internal interface: errors, config, the in-memory profile, rng, crc32.
 * Only liblomas sources and its tests include this; it is not installed.
 */
#ifndef LOMAS_CORE_H
#define LOMAS_CORE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

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
/*
 * Clear the message: the first statement of every public (LOMAS_API) call
 * but lomas_error_message, lomas_strerror and the _free functions, which
 * leave it so that cleaning up between a failing call and its report loses
 * nothing (lomas.h: after a call that succeeds the message is ""). Inline
 * and cheap: it touches the thread's message only while some thread has one
 * (error_pending, error.c).
 */
extern _Atomic unsigned error_pending;
void error_clear_slow(void) __attribute__((cold));
static inline void error_clear(void)
{
	if (atomic_load_explicit(&error_pending, memory_order_relaxed))
		error_clear_slow();
}
/*
 * Copy len bytes of untrusted text (a path, metadata, a line of a file) to
 * dst (cap bytes, always NUL-terminated) so that a terminal shows it rather
 * than acts on it: C0 controls and DEL become \n, \r, \t or \xHH, C1
 * controls, line separators and bidirectional controls \uHHHH, and bytes
 * that are not UTF-8 \xHH; valid UTF-8 text and backslashes stay as they
 * are, so escaping twice changes nothing. Cut at a whole character or
 * escape. Returns the length written. error_set and error_prefix pass every
 * message through it.
 */
size_t text_escape(char *dst, size_t cap, const char *src, size_t len);
/* Send a message to the log callback, if any (never prints). */
void log_msg(lomas_log_level level, const char *fmt, ...) LOMAS_PRINTF(2, 3);

/*
 * Sized output structs (lomas.h, "Structs the library fills"): the caller
 * sets the first field, a uint32_t size, to sizeof the struct as its header
 * declares it; the library copies the first min(size, ours) bytes of full
 * (ours = full_size bytes, filled by the call) and writes the count it
 * copied back into size, so a caller built against an older, shorter struct
 * never has bytes written past its end, and one built against a newer,
 * longer one sees from size which fields this library filled. A size below
 * 8 (the size field and the next four bytes: a caller that forgot to set
 * it, most likely zeroed) is EINVAL. fn names the call in the message.
 */
static inline lomas_status out_sized_copy(void *out, const void *full, size_t full_size,
                                          const char *fn)
{
	uint32_t size;
	__builtin_memcpy(&size, out, sizeof size);
	if (size < 8)
		return error_set(LOMAS_EINVAL,
		                 "%s: the output struct's size field is %u: set it to sizeof the "
		                 "struct (the LOMAS_*_INIT initializers do)",
		                 fn, size);
	if (size > full_size)
		size = (uint32_t)full_size;
	__builtin_memcpy(out, full, size);
	__builtin_memcpy(out, &size, sizeof size);
	return LOMAS_OK;
}

/* ------------------------------------------------------------------ config */

#define CONFIG_AUTO 0 /* numeric value meaning "auto" */

typedef enum config_clock {
	CLOCK_AUTO = 0,
	CLOCK_INLINE,
	CLOCK_STEP,
	CLOCK_PMU,
	CLOCK_DBI,
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
	/* the pmu clock (issue 20) */
	char events[256];   /* "LOAD,STORE" in libpfm4 names, or "" for the PMU's table */
	uint8_t pmu_sample; /* config_pmu_sample */
	uint8_t period_sem; /* config_period_sem */
	bool pmu_calibrate; /* measure counter perturbations at start (default true) */
	bool phase_guided;  /* inline and dbi: phase-guided sampling (default false) */
};

typedef enum config_pmu_sample {
	PMU_SAMPLE_SKID = 0,    /* overflow early, single-step to the point (any PMU) */
	PMU_SAMPLE_PRECISE,     /* PEBS / IBS records with ip and data address */
	PMU_SAMPLE_DOUBLE_TRAP, /* the seed's int3 at the PEBS ip (biased: see README) */
} config_pmu_sample;

typedef enum config_period_sem {
	PERIOD_SEM_AUTO = 0, /* from the kernel's version (3.14: immediate) */
	PERIOD_SEM_IMMEDIATE,
	PERIOD_SEM_NEXT_OVERFLOW,
} config_period_sem;

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

#define PROF_BUILD_ID_MAX 64 /* bytes of a GNU build id we keep (SHA-1 ids are 20) */

typedef struct prof_map {
	uint64_t start, end, offset;
	uint32_t prot; /* PROT_* bits */
	uint32_t reserved;
	char *path; /* may be "" for anonymous */
	/* The GNU build id (NT_GNU_BUILD_ID) of the file at path when the run
	 * mapped it, so that a file rebuilt since is told apart (lib/sym); 0
	 * bytes: unknown (no note, not a file, or a profile older than 2.1). */
	uint8_t build_id_len;
	uint8_t build_id[PROF_BUILD_ID_MAX];
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
/*
 * Big scratch blocks kept between calls (scratch.c): the model's arrays over
 * the samples. A block from big_alloc/big_calloc is freed by big_free only;
 * big_release unmaps the kept ones (the last profile's lomas_profile_free).
 */
void *big_alloc(size_t n);
void *big_calloc(size_t n, size_t size);
void big_free(void *p);
void big_release(void);
/* Ask for transparent huge pages over [p, p + n) where it is 2 MiB or more (a hint). */
void mem_hint_huge(void *p, size_t n);

lomas_status vec_reserve_(void **items, size_t *cap, size_t item_size, size_t want);
#define vec_reserve(v, want) \
	vec_reserve_((void **)&(v)->items, &(v)->cap, sizeof(*(v)->items), (want))

/* Append one item to a profile array; return LOMAS_ENOMEM on failure. */
lomas_status profile_add_sample(struct lomas_profile *p, const lomas_sample *s);
lomas_status profile_add_window(struct lomas_profile *p, const lomas_window *w);
lomas_status profile_add_thread(struct lomas_profile *p, const lomas_thread *t);
lomas_status profile_set_calib(struct lomas_profile *p, const char *key, double value);
lomas_status profile_add_map(struct lomas_profile *p, const prof_map *m);
/*
 * The memory maps a profile needs for symbolization (lib/core/elf_id.c).
 * elf_build_id_fd: the GNU build id of the ELF file open at fd (from its
 * PT_NOTE segments) into id (cap bytes); returns its length, 0 when the
 * file is not a 64-bit little-endian ELF file or has no build id.
 * profile_add_proc_maps: add the file-backed mappings listed in a
 * /proc/PID/maps file (e.g. "/proc/self/maps") to p, with the build id of
 * each file as it is now. profile_fill_build_ids: read the build id of each
 * map of p that has none from the file at its path.
 */
size_t elf_build_id_fd(int fd, uint8_t *id, size_t cap);
/* One PT_LOAD segment of an ELF file. */
typedef struct elf_segment {
	uint64_t vaddr, memsz, offset, filesz;
	uint32_t flags; /* PF_R | PF_W | PF_X */
} elf_segment;
/*
 * The ELF type (ET_EXEC, ET_DYN, ...) and up to cap PT_LOAD segments of the
 * 64-bit little-endian ELF file open at fd; *n gets how many there are.
 * false when it is not such a file.
 */
bool elf_load_segments(int fd, unsigned *type, elf_segment *segs, size_t cap, size_t *n);
size_t elf_build_id_path(const char *path, uint8_t *id, size_t cap);
lomas_status profile_add_proc_maps(struct lomas_profile *p, const char *maps_path);
void profile_fill_build_ids(struct lomas_profile *p);

/* Metadata setter with printf format for the value. */
lomas_status profile_meta_setf(struct lomas_profile *p, const char *key, const char *fmt, ...)
    LOMAS_PRINTF(3, 4);

/*
 * Check the profile's internal consistency (indices in range, windows of
 * known threads, end >= start for reused samples, weights that pass
 * weight_valid, references of all threads that add up within 64 bits).
 * LOMAS_EFORMAT with a message naming the first offending item.
 */
lomas_status profile_validate(const struct lomas_profile *p);
/* profile_validate's checks of sample number i (s), against p's threads and windows. */
lomas_status profile_check_sample(const struct lomas_profile *p, size_t i, const lomas_sample *s);

static inline bool line_size_valid(uint64_t b)
{
	return b >= 8 && b <= 65536 && (b & (b - 1)) == 0;
}

/*
 * The weights a sample may carry: it stands for 2^-64 to 2^64 references (a
 * weight is a sampling period, and a thread's clock is a 64-bit count).
 * Within these bounds no sum the model forms can leave double's range (about
 * 2^-1022 to 2^1024): with at most 2^64 samples, sum(w) <= 2^128, sum(w d^2)
 * <= 2^256 for distances below 2^64, and sum(w^2) >= 2^-128. Weights near
 * DBL_MAX made sums infinite and curves NaN; every way in (profile_validate,
 * the file decoder) refuses them instead.
 */
static inline bool weight_valid(double w)
{
	return w >= 0x1p-64 && w <= 0x1p64; /* false for NaN */
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

/* ------------------------------------------------------- packed samples */

/*
 * The packed sample record: the profile file's PSAMPLES section
 * (docs/profile-format.md) and the inline runtime's sample store use the
 * same bytes, so the runtime's exit path copies its stores into the file as
 * they are. A record is five LEB128 varints and two bytes:
 *   start     zigzag(start - previous record's start)
 *   end       0 for LOMAS_CLOCK_NONE, else zigzag(end - start) + 1
 *   addr      zigzag(addr - previous record's addr)
 *   start_pc  zigzag(start_pc - previous record's start_pc)
 *   end_pc    zigzag(end_pc - start_pc)
 *   byte      kind (bits 0-1) | cross-thread (bit 2) | state (bits 4-5)
 *   byte      level: weight = block base x 2^max(level, block floor)
 * "Previous" is all zeros before a block's first record.
 */
#define PACKED_MAX_RECORD 52u /* 5 varints of at most 10 bytes, 2 bytes */
#define PACKED_CROSS 0x4u     /* the kind byte's cross-thread bit */

typedef struct packed_sample {
	uint64_t start, end, addr, start_pc, end_pc;
	uint8_t kind;  /* lomas_ref_kind */
	uint8_t state; /* lomas_sample_state */
	uint8_t level;
	uint8_t cross; /* LOMAS_SAMPLE_CROSS_THREAD */
} packed_sample;

static inline uint64_t zigzag(uint64_t delta)
{
	return (delta << 1) ^ (uint64_t)((int64_t)delta >> 63);
}

static inline uint64_t unzigzag(uint64_t v)
{
	return (v >> 1) ^ (0 - (v & 1));
}

/*
 * LEB128, low 7 bits first, a byte at a time. (Reading and writing the
 * varints as whole 8-byte words, the groups gathered with shifts and masks,
 * was slower: 21 ns a record instead of 14 on the stream workload's samples,
 * whose varints are mostly 1-3 bytes.)
 */
static inline uint8_t *put_varint(uint8_t *q, uint64_t v)
{
	while (v >= 0x80) {
		*q++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*q++ = (uint8_t)v;
	return q;
}

/* Can s be packed as it is? (Not: an end 2^63 after its start, which the
 * end's encoding cannot tell from LOMAS_CLOCK_NONE.) */
static inline bool packed_representable(const packed_sample *s)
{
	return s->end == LOMAS_CLOCK_NONE || zigzag(s->end - s->start) != UINT64_MAX;
}

/* Write s after prev at q (PACKED_MAX_RECORD bytes of room); returns the end. */
static inline uint8_t *packed_put(uint8_t *q, const packed_sample *s, const packed_sample *prev)
{
	q = put_varint(q, zigzag(s->start - prev->start));
	q = put_varint(q, s->end == LOMAS_CLOCK_NONE ? 0 : zigzag(s->end - s->start) + 1);
	q = put_varint(q, zigzag(s->addr - prev->addr));
	q = put_varint(q, zigzag(s->start_pc - prev->start_pc));
	q = put_varint(q, zigzag(s->end_pc - s->start_pc));
	q[0] = (uint8_t)((s->kind & 3u) | (s->cross ? PACKED_CROSS : 0) | (s->state & 3u) << 4);
	q[1] = s->level;
	return q + 2;
}

/*
 * Read one varint from [p, end); NULL when it runs past end or is longer
 * than 64 bits can need (more than 10 bytes, or a tenth byte above 1).
 */
static inline const uint8_t *get_varint(const uint8_t *p, const uint8_t *end, uint64_t *v)
{
	uint64_t x = 0;
	for (unsigned shift = 0; p < end; shift += 7) {
		uint8_t b = *p++;
		if (shift == 63 && b > 1)
			return NULL;
		x |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*v = x;
			return p;
		}
	}
	return NULL;
}

/*
 * Read the record at [p, end) after prev into *s (level: the byte as it is,
 * before the block's floor). NULL when it runs past end or a varint is
 * malformed; the kind byte is not checked (the caller does).
 */
static inline const uint8_t *packed_get(const uint8_t *p, const uint8_t *end, packed_sample *s,
                                        const packed_sample *prev)
{
	uint64_t v;
	if (!(p = get_varint(p, end, &v)))
		return NULL;
	s->start = prev->start + unzigzag(v);
	if (!(p = get_varint(p, end, &v)))
		return NULL;
	s->end = v == 0 ? LOMAS_CLOCK_NONE : s->start + unzigzag(v - 1);
	if (!(p = get_varint(p, end, &v)))
		return NULL;
	s->addr = prev->addr + unzigzag(v);
	if (!(p = get_varint(p, end, &v)))
		return NULL;
	s->start_pc = prev->start_pc + unzigzag(v);
	if (!(p = get_varint(p, end, &v)) || end - p < 2)
		return NULL;
	s->end_pc = s->start_pc + unzigzag(v);
	s->kind = p[0] & 3u;
	s->cross = (p[0] & PACKED_CROSS) != 0;
	s->state = (p[0] >> 4) & 3u;
	s->level = p[1];
	return p + 2;
}

/* The kind byte's bits that no sample sets (bit 3 and bits 6-7). */
#define PACKED_KIND_RESERVED 0xc8u

/* ------------------------------------------------------------ profile file */

/*
 * Read the whole file at path into a malloc'd *out of *len bytes (a file,
 * not a directory): LOMAS_ENOENT when it does not exist, LOMAS_EIO naming
 * the path and errno otherwise (profile_file.c).
 */
lomas_status file_read_all(const char *path, uint8_t **out, size_t *len);

/*
 * Decode a profile file image of len bytes (untrusted). name is used in
 * messages ("name: offset N: ..."). LOMAS_EFORMAT for anything malformed.
 */
lomas_status profile_load_buffer(const void *data, size_t len, const char *name,
                                 lomas_profile **out);
/*
 * Encode p as a profile file image: a malloc'd buffer in *data of *len bytes.
 * The samples go to a PSAMPLES section (packed records) when every one of
 * them can be packed as it is (its window is the one its start falls in,
 * its weight a power-of-two multiple of its block's base, no flag but
 * cross-thread), else to a SAMPLES section (64-byte records).
 */
lomas_status profile_save_buffer(const lomas_profile *p, void **data, size_t *len);

/*
 * More samples, after p's own, as blocks of packed records (the inline
 * runtime's exit path: each stream of its thread stores is one block,
 * copied into the file's PSAMPLES section as it is, with no decoding). A
 * block's samples belong to one thread; each one's window is the one of
 * its thread that contains its start (the last, in start order, that
 * starts at or before it), as in the file format. next fills *out with the
 * next of the nblocks blocks, or fails (error set). The blocks are not
 * checked here: the reader checks them.
 */
typedef struct profile_sample_block {
	uint32_t thread;
	uint8_t level_floor;
	double base_weight;
	uint64_t n;          /* records */
	const uint8_t *data; /* len bytes of n records */
	size_t len;
} profile_sample_block;

typedef struct profile_sample_source {
	uint64_t n;       /* samples in all the blocks */
	uint64_t nblocks; /* blocks */
	uint64_t bytes;   /* records' bytes in all the blocks */
	lomas_status (*next)(void *ctx, profile_sample_block *out);
	void *ctx;
	/* Optional: the EXACTSD varints of the n samples, in block order
	 * (exact_len bytes: 0 = no exact distance, else distance + 1); NULL:
	 * none has one. */
	const uint8_t *exact;
	size_t exact_len;
} profile_sample_source;

/*
 * profile_save_buffer of p with src's samples appended (src may be NULL), or
 * the same bytes written to fd at their offsets (from 0), staged 64 KiB at a
 * time. With a source, p's own samples must be packable (see
 * profile_save_buffer): LOMAS_EINVAL if they are not.
 */
lomas_status profile_save_buffer_src(const lomas_profile *p, const profile_sample_source *src,
                                     void **data, size_t *len);
lomas_status profile_save_fd_src(const lomas_profile *p, const profile_sample_source *src, int fd);
/*
 * Save p to path atomically: a temporary file next to it (path.XXXXXX,
 * created mode 0666 less the umask, as open(2) applies it; an existing
 * regular file of ours at path keeps its permission bits) renamed over
 * path. Any failure: LOMAS_EIO naming path, the step and errno, the
 * temporary file removed, whatever was at path untouched. durable: also
 * fsync the file and (best effort) its directory (lomas_profile_save); the
 * inline runtime's exit path skips that, as perf record does, since the
 * program's own exit is what it delays.
 */
lomas_status profile_save_file(const lomas_profile *p, const char *path, bool durable);
lomas_status profile_save_file_src(const lomas_profile *p, const profile_sample_source *src,
                                   const char *path, bool durable);

/* ----------------------------------------------------------- save-path I/O */

/*
 * Every system call of the save path that can fail (profile_file.c, and the
 * encoder's writes) goes through one of these wrappers so that a test can
 * fail any one of them (tests/unit/test_save_faults.c). While
 * save_io_faults.armed, each wrapped call counts in .calls and the one
 * numbered .fail_at (from 1; 0 = none) fails with errno .err; with
 * .short_write a failing write first writes half its bytes and the next
 * call fails (a disk filling up). Not armed (always, outside tests), they
 * are the plain calls. Not thread-safe: tests arm it around one save.
 */
typedef struct save_io_fault {
	bool armed;
	bool short_write;
	int err;
	uint64_t calls;
	uint64_t fail_at;
} save_io_fault;

extern save_io_fault save_io_faults;

int save_io_open(const char *path, int flags, mode_t mode);
ssize_t save_io_pwrite(int fd, const void *buf, size_t len, off_t off);
int save_io_fchmod(int fd, mode_t mode);
int save_io_fsync(int fd);
int save_io_close(int fd);
int save_io_rename(const char *from, const char *to);

#endif /* LOMAS_CORE_H */

/*
 * lib/core internal interface of the profile file format's codec
 * (docs/profile-format.md), shared by its four files:
 *   profile_encode.c        a profile -> a file image (buffer or descriptor)
 *   profile_decode.c        an untrusted image -> a profile: the section
 *                           table and every section but PSAMPLES
 *   profile_pack.c          PSAMPLES, the packed samples: packing for the
 *                           encoder, unpacking for the decoder
 *   profile_window_index.c  which window a packed sample belongs to
 * The entry points (profile_save_buffer, profile_load_buffer, ...) are
 * declared in core.h; nothing outside these files includes this one.
 */
#ifndef LOMAS_PROFILE_CODEC_H
#define LOMAS_PROFILE_CODEC_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "core.h"

#define PF_MAGIC "LOMASPRF"
#define PF_MAJOR 2u
#define PF_MINOR 0u
#define PF_MINOR_BUILDIDS 1u /* 2.1: files with a BUILDIDS section */
#define PF_MINOR_EXACTSD 2u  /* 2.2: files with an EXACTSD section */
#define PF_OLDEST_MAJOR 1u   /* 1.x files (SAMPLES only) still load */
#define PF_HEADER_SIZE 32u
#define PF_ENTRY_SIZE 32u
#define PF_PROFILE_SIZE 8u
#define PF_THREAD_SIZE 16u
#define PF_WINDOW_SIZE 24u
#define PF_SAMPLE_SIZE 64u
#define PF_MAP_FIXED 32u    /* start, end, offset, prot, path length */
#define PF_BLOCK_HEADER 32u /* PSAMPLES: thread, floor, base weight, count, length */
#define PF_MIN_RECORD 7u    /* five one-byte varints and two bytes */

enum {
	SEC_META = 1,
	SEC_PROFILE = 2,
	SEC_CALIB = 3,
	SEC_THREADS = 4,
	SEC_WINDOWS = 5,
	SEC_SAMPLES = 6,
	SEC_MAPS = 7,
	SEC_PSAMPLES = 8, /* format 2.0 */
	SEC_BUILDIDS = 9, /* format 2.1 */
	SEC_EXACTSD = 10, /* format 2.2 */
	SEC_KNOWN = 11,   /* one past the last known type */
};

/* ------------------------------------------------------ little-endian access */

static inline uint32_t rd32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline uint64_t rd64(const uint8_t *p)
{
	return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32;
}

static inline double rdf64(const uint8_t *p)
{
	uint64_t u = rd64(p);
	double d;
	memcpy(&d, &u, sizeof d);
	return d;
}

static inline void wr32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

static inline void wr64(uint8_t *p, uint64_t v)
{
	wr32(p, (uint32_t)v);
	wr32(p + 4, (uint32_t)(v >> 32));
}

static inline void wrf64(uint8_t *p, double d)
{
	uint64_t u;
	memcpy(&u, &d, sizeof u);
	wr64(p, u);
}

/* EXACTSD's code of a sample (2.2): 0 for none, else its exact stack distance + 1. */
static inline uint64_t exact_code(const lomas_sample *s)
{
	return s->state == LOMAS_SAMPLE_REUSED && (s->flags & LOMAS_SAMPLE_EXACT_SD)
	           ? (uint64_t)s->reserved + 1
	           : 0;
}

/* ------------------------------------------------------------- window index */

/*
 * The windows of each thread in (start, index) order, to find the window a
 * packed sample belongs to: the last of its thread's windows, in that order,
 * that starts at or before the sample's start.
 */
typedef struct window_index {
	uint64_t *starts; /* the windows' starts, in that order, thread by thread */
	uint32_t *idx;    /* their indices */
	size_t *first;    /* thread t's windows are [first[t], first[t + 1]) */
} window_index;

/* Index p's windows into *wi (free with window_index_free). */
lomas_status window_index_build(const lomas_profile *p, window_index *wi);
void window_index_free(window_index *wi);
/*
 * The window of thread t that clock falls in: the last of its windows, in
 * (start, index) order, starting at or before clock. *hint (0 at first) is
 * where the last search ended: samples in start order search from it.
 */
uint32_t window_index_find(const window_index *wi, uint32_t t, uint64_t clock, size_t *hint);

/* --------------------------------------------------------------- packing */

/*
 * The profile's own samples as PSAMPLES blocks (profile_pack.c); *packable
 * false when some sample cannot be packed (SAMPLES is written instead).
 */
lomas_status pack_samples(const lomas_profile *p, uint8_t **out, size_t *out_len, bool *packable);

/* ---------------------------------------------------------------- decoder */

typedef struct reader {
	const uint8_t *b;
	size_t len;
	const char *name;
} reader;

/* A section located through the table: payload [off, off + len). */
typedef struct section {
	bool present;
	uint64_t entry; /* file offset of its table entry */
	uint64_t off, len;
} section;

/* Set LOMAS_EFORMAT with "name: offset N: message"; returns it. */
lomas_status codec_bad(const reader *r, uint64_t off, const char *fmt, ...) LOMAS_PRINTF(3, 4);
/* Decode the PSAMPLES section s into p (profile_pack.c). */
lomas_status decode_psamples(const reader *r, const section *s, lomas_profile *p);

#endif /* LOMAS_PROFILE_CODEC_H */

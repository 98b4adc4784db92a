/*
 * The profile file format (docs/profile-format.md): encoding a profile into a
 * file image and decoding an untrusted image back. The decoder checks every
 * length, offset, count and CRC before it touches the bytes they describe, and
 * reports the byte offset of the first problem.
 */
#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core.h"

#define PF_MAGIC "LOMASPRF"
#define PF_MAJOR 2u
#define PF_MINOR 0u
#define PF_MINOR_BUILDIDS 1u /* 2.1: files with a BUILDIDS section */
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
	SEC_KNOWN = 10,   /* one past the last known type */
};

static const char *const sec_names[SEC_KNOWN] = {
    "?",       "META",    "PROFILE", "CALIB",    "THREADS",
    "WINDOWS", "SAMPLES", "MAPS",    "PSAMPLES", "BUILDIDS",
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

typedef struct start_idx {
	uint64_t start;
	uint32_t idx;
} start_idx;

static int start_idx_cmp(const void *a, const void *b)
{
	const start_idx *x = a, *y = b;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return (x->idx > y->idx) - (x->idx < y->idx);
}

static void window_index_free(window_index *wi)
{
	free(wi->starts);
	free(wi->idx);
	free(wi->first);
	memset(wi, 0, sizeof *wi);
}

/* Build the index of p's windows; every window must name one of p's threads. */
static lomas_status window_index_build(const lomas_profile *p, window_index *wi)
{
	const size_t nt = p->threads.n, nw = p->windows.n;
	start_idx *tmp = NULL;
	size_t *at = NULL;
	memset(wi, 0, sizeof *wi);
	wi->first = calloc(nt + 2, sizeof *wi->first);
	wi->starts = malloc(sizeof *wi->starts * (nw ? nw : 1));
	wi->idx = malloc(sizeof *wi->idx * (nw ? nw : 1));
	tmp = malloc(sizeof *tmp * (nw ? nw : 1));
	at = malloc(sizeof *at * (nt + 1));
	if (!wi->first || !wi->starts || !wi->idx || !tmp || !at) {
		free(tmp);
		free(at);
		window_index_free(wi);
		return error_set(LOMAS_ENOMEM, "out of memory");
	}
	/* Counting sort by thread (stable: index order within a thread). */
	for (size_t i = 0; i < nw; i++)
		wi->first[p->windows.items[i].thread + 1]++;
	for (size_t t = 0; t < nt; t++)
		wi->first[t + 1] += wi->first[t];
	memcpy(at, wi->first, sizeof *at * (nt + 1));
	for (size_t i = 0; i < nw; i++) {
		size_t k = at[p->windows.items[i].thread]++;
		tmp[k].start = p->windows.items[i].start;
		tmp[k].idx = (uint32_t)i;
	}
	/* Then by start within each thread (most producers write them in order). */
	for (size_t t = 0; t < nt; t++) {
		start_idx *seg = tmp + wi->first[t];
		size_t n = wi->first[t + 1] - wi->first[t];
		for (size_t i = 1; i < n; i++)
			if (start_idx_cmp(&seg[i - 1], &seg[i]) > 0) {
				qsort(seg, n, sizeof *seg, start_idx_cmp);
				break;
			}
	}
	for (size_t i = 0; i < nw; i++) {
		wi->starts[i] = tmp[i].start;
		wi->idx[i] = tmp[i].idx;
	}
	free(tmp);
	free(at);
	return LOMAS_OK;
}

/*
 * The window of thread t that a sample starting at clock falls in (see
 * window_index), or UINT32_MAX when none of t's windows starts at or before
 * it. *hint: the position found last for the same thread (0 at first); the
 * next sample's is usually the same or the next one.
 */
static uint32_t window_index_find(const window_index *wi, uint32_t t, uint64_t clock, size_t *hint)
{
	size_t lo = wi->first[t], hi = wi->first[t + 1], h = *hint;
	if (h >= lo && h < hi && wi->starts[h] <= clock) {
		while (h + 1 < hi && wi->starts[h + 1] <= clock && h + 1 - *hint < 4)
			h++;
		if (h + 1 == hi || wi->starts[h + 1] > clock) {
			*hint = h;
			return wi->idx[h];
		}
	}
	/* The last position in [lo, hi) whose start is <= clock. */
	if (lo == hi || wi->starts[lo] > clock)
		return UINT32_MAX;
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;
		if (wi->starts[mid] <= clock)
			lo = mid;
		else
			hi = mid;
	}
	*hint = lo;
	return wi->idx[lo];
}

/* --------------------------------------------------------- sample packing */

/*
 * The profile's own samples as PSAMPLES blocks (header and records), in
 * order, in a malloc'd buffer. A block is a run of samples of one thread
 * whose weights are its first one's (the base) times a power of two. Sets
 * *packable to false (and returns LOMAS_OK) when some sample cannot be
 * packed as it is: p is then written with a SAMPLES section.
 */
static lomas_status pack_samples(const lomas_profile *p, uint8_t **out, size_t *out_len,
                                 bool *packable)
{
	window_index wi;
	uint8_t *b = NULL;
	size_t len = 0, cap = 0, head = 0, hint = 0;
	uint64_t count = 0;
	uint32_t thread = UINT32_MAX;
	double base = 0;
	packed_sample prev = {0};
	lomas_status st;
	*out = NULL;
	*out_len = 0;
	*packable = false;
	for (size_t i = 0; i < p->windows.n; i++)
		if (p->windows.items[i].thread >= p->threads.n)
			return LOMAS_OK;
	if (!p->samples.n) {
		*packable = true;
		return LOMAS_OK;
	}
	if ((st = window_index_build(p, &wi)))
		return st;
	for (size_t i = 0; i < p->samples.n; i++) {
		const lomas_sample *s = &p->samples.items[i];
		packed_sample x = {.start = s->start,
		                   .end = s->end,
		                   .addr = s->addr,
		                   .start_pc = s->start_pc,
		                   .end_pc = s->end_pc,
		                   .kind = s->kind,
		                   .state = s->state,
		                   .cross = (s->flags & LOMAS_SAMPLE_CROSS_THREAD) != 0};
		int e = 0;
		if (s->thread >= p->threads.n || s->kind > LOMAS_REF_STORE ||
		    s->state > LOMAS_SAMPLE_CENSORED || (s->flags & ~LOMAS_SAMPLE_CROSS_THREAD) ||
		    !(s->weight > 0.0 && s->weight <= DBL_MAX) || !packed_representable(&x))
			goto unpackable;
		if (s->thread != thread)
			hint = 0;
		if (window_index_find(&wi, s->thread, s->start, &hint) != s->window)
			goto unpackable;
		/* The level: weight = base x 2^level exactly, else a new block. */
		if (s->thread == thread && frexp(s->weight / base, &e) == 0.5 && e >= 1 &&
		    e <= 256 && ldexp(base, e - 1) == s->weight)
			x.level = (uint8_t)(e - 1);
		else
			thread = UINT32_MAX;
		if (cap - len < PF_BLOCK_HEADER + PACKED_MAX_RECORD) {
			size_t ncap = cap ? cap * 2 : 4096;
			uint8_t *nb = realloc(b, ncap);
			if (!nb) {
				st = error_set(LOMAS_ENOMEM, "out of memory");
				goto fail;
			}
			b = nb;
			cap = ncap;
		}
		if (thread == UINT32_MAX) {
			if (count) {
				wr64(b + head + 16, count);
				wr64(b + head + 24, len - head - PF_BLOCK_HEADER);
			}
			head = len;
			memset(b + head, 0, PF_BLOCK_HEADER);
			thread = s->thread;
			base = s->weight;
			wr32(b + head, thread);
			wrf64(b + head + 8, base);
			len += PF_BLOCK_HEADER;
			count = 0;
			memset(&prev, 0, sizeof prev);
		}
		len = (size_t)(packed_put(b + len, &x, &prev) - b);
		prev = x;
		count++;
	}
	wr64(b + head + 16, count);
	wr64(b + head + 24, len - head - PF_BLOCK_HEADER);
	window_index_free(&wi);
	*out = b;
	*out_len = len;
	*packable = true;
	return LOMAS_OK;
unpackable:
	st = LOMAS_OK;
fail:
	window_index_free(&wi);
	free(b);
	return st;
}

/* ------------------------------------------------------------------ encoder */

static size_t align8(size_t n)
{
	return (n + 7) & ~(size_t)7;
}

/* Bytes of a length-prefixed string; false if it does not fit a u32 length. */
static bool str_size(const char *s, size_t *acc)
{
	size_t n = strlen(s);
	if (n > UINT32_MAX)
		return false;
	*acc += 4 + n;
	return true;
}

/*
 * Where the encoder's bytes go: one buffer (profile_save_buffer) or, at
 * offsets, a file (profile_save_fd_src), through a small staging buffer, so a
 * file is written without its whole image in memory (at exit, a fresh
 * multi-megabyte image cost the inline runtime a page fault per 4 KiB).
 */
#define ENC_STAGE 65536u

typedef struct encoder {
	uint8_t *image; /* the whole image, or NULL: write to fd */
	int fd;
	uint64_t at;                      /* offset of stage[0] */
	uint8_t *stage;                   /* ENC_STAGE bytes (fd only) */
	size_t n;                         /* bytes staged */
	uint32_t crc;                     /* of the current section so far */
	lomas_status st;                  /* the first error */
	const profile_sample_source *src; /* samples after p's own, or NULL */
	bool packed;                      /* samples in PSAMPLES (else SAMPLES) */
	const uint8_t *own;               /* p's samples packed (PSAMPLES blocks) */
	size_t own_len;
} encoder;

/* Write all of data at off; -1 with errno set when a write fails (a short
 * write is continued: on a full disk the next one says ENOSPC). */
static int pwrite_all(int fd, const uint8_t *data, size_t len, uint64_t off)
{
	while (len) {
		ssize_t k = save_io_pwrite(fd, data, len, (off_t)off);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0)
			return -1;
		if (k == 0) {
			errno = ENOSPC; /* pwrite(2) makes no progress: treat as full */
			return -1;
		}
		data += k;
		len -= (size_t)k;
		off += (uint64_t)k;
	}
	return 0;
}

/*
 * Write the staged bytes out. After the first failure the stage is still
 * emptied (its bytes dropped): the encoder runs on to the end of the
 * section it is in, and a stage that kept growing ran past its ENC_STAGE
 * bytes (a heap overflow on every full disk).
 */
static void enc_flush(encoder *e)
{
	if (e->image || !e->n)
		return;
	if (!e->st && pwrite_all(e->fd, e->stage, e->n, e->at) != 0)
		e->st = error_set(LOMAS_EIO, "write failed: %s", strerror(errno));
	e->at += e->n;
	e->n = 0;
}

/* Start a section (or the header) at off. */
static void enc_seek(encoder *e, uint64_t off)
{
	enc_flush(e);
	e->at = off;
	e->n = 0;
	e->crc = 0;
}

/* Room for len (<= ENC_STAGE) more bytes of the current section. */
static uint8_t *enc_room(encoder *e, size_t len)
{
	uint8_t *q;
	if (e->image) {
		q = e->image + e->at + e->n;
	} else {
		if (e->n + len > ENC_STAGE)
			enc_flush(e);
		q = e->stage + e->n;
	}
	memset(q, 0, len);
	return q;
}

/* The len bytes at enc_room's pointer are final. */
static void enc_done(encoder *e, size_t len)
{
	const uint8_t *q = e->image ? e->image + e->at + e->n : e->stage + e->n;
	e->crc = crc32_update(e->crc, q, len);
	e->n += len;
}

static void enc_bytes(encoder *e, const void *data, size_t len)
{
	const uint8_t *d = data;
	while (len && !e->st) {
		size_t k = len < ENC_STAGE ? len : ENC_STAGE;
		memcpy(enc_room(e, k), d, k);
		enc_done(e, k);
		d += k;
		len -= k;
	}
}

static void enc_u32(encoder *e, uint32_t v)
{
	wr32(enc_room(e, 4), v);
	enc_done(e, 4);
}

static void enc_u64(encoder *e, uint64_t v)
{
	wr64(enc_room(e, 8), v);
	enc_done(e, 8);
}

static void enc_str(encoder *e, const char *s)
{
	size_t n = strlen(s);
	enc_u32(e, (uint32_t)n);
	enc_bytes(e, s, n);
}

/* Section sizes and offsets (8-byte aligned after the header and table). */
static lomas_status layout(const encoder *e, const lomas_profile *p, size_t size[SEC_KNOWN],
                           size_t off[SEC_KNOWN], const int *order, size_t nsec, size_t *total)
{
	const profile_sample_source *src = e->src;
	uint64_t nsamples = p->samples.n + (src ? src->n : 0);
	if (p->meta.n > UINT32_MAX || p->calib.n > UINT32_MAX || p->maps.n > UINT32_MAX)
		return error_set(LOMAS_ERANGE, "too many metadata, calibration or map entries");

	size[SEC_PROFILE] = PF_PROFILE_SIZE;
	size[SEC_META] = 4;
	for (size_t i = 0; i < p->meta.n; i++) {
		if (!p->meta.items[i].key[0])
			return error_set(LOMAS_EINVAL, "metadata entry %zu has an empty key", i);
		if (!str_size(p->meta.items[i].key, &size[SEC_META]) ||
		    !str_size(p->meta.items[i].value, &size[SEC_META]))
			return error_set(LOMAS_ERANGE, "metadata entry %zu is too long", i);
	}
	size[SEC_CALIB] = 4;
	for (size_t i = 0; i < p->calib.n; i++) {
		if (!p->calib.items[i].key[0])
			return error_set(LOMAS_EINVAL, "calibration entry %zu has an empty key", i);
		if (!str_size(p->calib.items[i].key, &size[SEC_CALIB]))
			return error_set(LOMAS_ERANGE, "calibration entry %zu is too long", i);
		size[SEC_CALIB] += 8;
	}
	size[SEC_MAPS] = 4;
	for (size_t i = 0; i < p->maps.n; i++) {
		size[SEC_MAPS] += PF_MAP_FIXED - 4;
		if (!str_size(p->maps.items[i].path, &size[SEC_MAPS]))
			return error_set(LOMAS_ERANGE, "map %zu path is too long", i);
	}
	size[SEC_BUILDIDS] = 4;
	for (size_t i = 0; i < p->maps.n; i++)
		size[SEC_BUILDIDS] += 1 + p->maps.items[i].build_id_len;
	/* The arrays already live in memory at >= these sizes, so no overflow;
	 * samples from a source need not. */
	if (nsamples > (SIZE_MAX / 2 - 8) / PF_SAMPLE_SIZE ||
	    (src && (src->nblocks > (SIZE_MAX / 4) / PF_BLOCK_HEADER || src->bytes > SIZE_MAX / 4)))
		return error_set(LOMAS_ERANGE, "too many samples (%llu)",
		                 (unsigned long long)nsamples);
	size[SEC_THREADS] = 8 + p->threads.n * PF_THREAD_SIZE;
	size[SEC_WINDOWS] = 8 + p->windows.n * PF_WINDOW_SIZE;
	size[SEC_SAMPLES] = 8 + (size_t)nsamples * PF_SAMPLE_SIZE;
	size[SEC_PSAMPLES] =
	    8 + e->own_len +
	    (src ? (size_t)src->nblocks * PF_BLOCK_HEADER + (size_t)src->bytes : 0);

	/* Layout: header, section table, then each section 8-byte aligned. */
	*total = PF_HEADER_SIZE + nsec * PF_ENTRY_SIZE;
	for (size_t i = 0; i < nsec; i++) {
		*total = align8(*total);
		off[order[i]] = *total;
		*total += size[order[i]];
	}
	return LOMAS_OK;
}

static void enc_sample(encoder *e, const lomas_sample *s)
{
	uint8_t *q = enc_room(e, PF_SAMPLE_SIZE);
	wr64(q, s->start);
	wr64(q + 8, s->end);
	wr64(q + 16, s->addr);
	wr64(q + 24, s->start_pc);
	wr64(q + 32, s->end_pc);
	wrf64(q + 40, s->weight);
	wr32(q + 48, s->thread);
	wr32(q + 52, s->window);
	q[56] = s->kind;
	q[57] = s->state;
	q[58] = (uint8_t)s->flags;
	q[59] = (uint8_t)(s->flags >> 8);
	enc_done(e, PF_SAMPLE_SIZE);
}

/* The source's blocks, as they are, each after its header; they must add
 * up to what the source declared (the layout was made from that). */
static void enc_source(encoder *e)
{
	const profile_sample_source *src = e->src;
	uint64_t n = 0, bytes = 0;
	for (uint64_t i = 0; i < src->nblocks && !e->st; i++) {
		profile_sample_block b;
		lomas_status st;
		uint8_t *q;
		if ((st = src->next(src->ctx, &b))) {
			e->st = st;
			return;
		}
		n += b.n;
		bytes += b.len;
		if (n > src->n || bytes > src->bytes) {
			e->st =
			    error_set(LOMAS_EINVAL, "the sample source gave more than it declared");
			return;
		}
		q = enc_room(e, PF_BLOCK_HEADER);
		wr32(q, b.thread);
		wr32(q + 4, b.level_floor);
		wrf64(q + 8, b.base_weight);
		wr64(q + 16, b.n);
		wr64(q + 24, b.len);
		enc_done(e, PF_BLOCK_HEADER);
		enc_bytes(e, b.data, b.len);
	}
	if (!e->st && (n != src->n || bytes != src->bytes))
		e->st = error_set(LOMAS_EINVAL, "the sample source gave less than it declared");
}

static void enc_section(encoder *e, const lomas_profile *p, int t)
{
	switch (t) {
	case SEC_PROFILE:
		enc_u32(e, p->line_size);
		enc_u32(e, 0);
		break;
	case SEC_META:
		enc_u32(e, (uint32_t)p->meta.n);
		for (size_t i = 0; i < p->meta.n; i++) {
			enc_str(e, p->meta.items[i].key);
			enc_str(e, p->meta.items[i].value);
		}
		break;
	case SEC_CALIB:
		enc_u32(e, (uint32_t)p->calib.n);
		for (size_t i = 0; i < p->calib.n; i++) {
			enc_str(e, p->calib.items[i].key);
			wrf64(enc_room(e, 8), p->calib.items[i].value);
			enc_done(e, 8);
		}
		break;
	case SEC_THREADS:
		enc_u64(e, p->threads.n);
		for (size_t i = 0; i < p->threads.n; i++) {
			enc_u64(e, p->threads.items[i].tid);
			enc_u64(e, p->threads.items[i].refs);
		}
		break;
	case SEC_WINDOWS:
		enc_u64(e, p->windows.n);
		for (size_t i = 0; i < p->windows.n; i++) {
			const lomas_window *w = &p->windows.items[i];
			uint8_t *q = enc_room(e, PF_WINDOW_SIZE);
			wr64(q, w->start);
			wr64(q + 8, w->refs);
			wr32(q + 16, w->thread);
			enc_done(e, PF_WINDOW_SIZE);
		}
		break;
	case SEC_SAMPLES:
		enc_u64(e, p->samples.n);
		for (size_t i = 0; i < p->samples.n && !e->st; i++)
			enc_sample(e, &p->samples.items[i]);
		break;
	case SEC_PSAMPLES:
		enc_u64(e, p->samples.n + (e->src ? e->src->n : 0));
		enc_bytes(e, e->own, e->own_len);
		if (e->src)
			enc_source(e);
		break;
	case SEC_MAPS:
		enc_u32(e, (uint32_t)p->maps.n);
		for (size_t i = 0; i < p->maps.n; i++) {
			const prof_map *m = &p->maps.items[i];
			uint8_t *q = enc_room(e, PF_MAP_FIXED - 4);
			wr64(q, m->start);
			wr64(q + 8, m->end);
			wr64(q + 16, m->offset);
			wr32(q + 24, m->prot);
			enc_done(e, PF_MAP_FIXED - 4);
			enc_str(e, m->path);
		}
		break;
	case SEC_BUILDIDS:
		enc_u32(e, (uint32_t)p->maps.n);
		for (size_t i = 0; i < p->maps.n; i++) {
			const prof_map *m = &p->maps.items[i];
			uint8_t *q = enc_room(e, 1);
			q[0] = m->build_id_len;
			enc_done(e, 1);
			enc_bytes(e, m->build_id, m->build_id_len);
		}
		break;
	}
}

static lomas_status encode_sections(encoder *e, const lomas_profile *p, const size_t *size,
                                    const size_t *off, const int *order, size_t nsec, size_t total,
                                    uint32_t *crc, uint8_t *head, size_t head_len);

static bool any_build_id(const lomas_profile *p)
{
	for (size_t i = 0; i < p->maps.n; i++)
		if (p->maps.items[i].build_id_len)
			return true;
	return false;
}

/* The whole file through e: the sections at their offsets, then the header and table. */
static lomas_status encode(encoder *e, const lomas_profile *p, size_t *len)
{
	size_t size[SEC_KNOWN] = {0}, off[SEC_KNOWN] = {0};
	uint32_t crc[SEC_KNOWN] = {0};
	int order[] = {SEC_PROFILE, SEC_META,     SEC_CALIB, SEC_THREADS,
	               SEC_WINDOWS, SEC_PSAMPLES, SEC_MAPS,  SEC_BUILDIDS};
	/* BUILDIDS (and format 2.1) only when some map has a build id: a file
	 * without one is exactly the 2.0 file it was before. */
	const size_t nsec = sizeof order / sizeof order[0] - !any_build_id(p);
	uint8_t head[PF_HEADER_SIZE + sizeof order / sizeof order[0] * PF_ENTRY_SIZE];
	size_t total = 0;
	uint8_t *own = NULL;
	lomas_status st;

	if ((st = pack_samples(p, &own, &e->own_len, &e->packed)))
		return st;
	e->own = own;
	if (!e->packed) {
		if (e->src)
			return error_set(
			    LOMAS_EINVAL,
			    "profile samples that cannot be packed, with a sample source");
		order[5] = SEC_SAMPLES;
	}
	st = layout(e, p, size, off, order, nsec, &total);
	if (!st)
		st = encode_sections(e, p, size, off, order, nsec, total, crc, head,
		                     PF_HEADER_SIZE + nsec * PF_ENTRY_SIZE);
	free(own);
	e->own = NULL;
	if (st)
		return st;
	*len = total;
	return LOMAS_OK;
}

/* encode's second half: the sections, then the header and table into head. */
static lomas_status encode_sections(encoder *e, const lomas_profile *p, const size_t *size,
                                    const size_t *off, const int *order, size_t nsec, size_t total,
                                    uint32_t *crc, uint8_t *head, size_t head_len)
{
	if (e->image == NULL && e->stage == NULL) {
		/* profile_save_buffer: the image, zeroed (the padding between sections). */
		if (!(e->image = calloc(1, total)))
			return error_set(LOMAS_ENOMEM, "out of memory encoding a %zu-byte profile",
			                 total);
	}
	for (size_t i = 0; i < nsec && !e->st; i++) {
		enc_seek(e, off[order[i]]);
		enc_section(e, p, order[i]);
		crc[order[i]] = e->crc;
	}
	if (e->st)
		return e->st;
	memset(head, 0, head_len);
	for (size_t i = 0; i < nsec; i++) {
		uint8_t *q = head + PF_HEADER_SIZE + i * PF_ENTRY_SIZE;
		int t = order[i];
		wr32(q, (uint32_t)t);
		wr64(q + 8, off[t]);
		wr64(q + 16, size[t]);
		wr32(q + 24, crc[t]);
	}
	memcpy(head, PF_MAGIC, 8);
	wr32(head + 8,
	     PF_MAJOR << 16 |
	         (nsec > 0 && order[nsec - 1] == SEC_BUILDIDS ? PF_MINOR_BUILDIDS : PF_MINOR));
	wr32(head + 16, (uint32_t)nsec);
	wr32(head + 20, crc32_update(0, head + PF_HEADER_SIZE, nsec * PF_ENTRY_SIZE));
	wr64(head + 24, PF_HEADER_SIZE);
	enc_seek(e, 0);
	enc_bytes(e, head, head_len);
	enc_flush(e);
	return e->st;
}

lomas_status profile_save_buffer_src(const lomas_profile *p, const profile_sample_source *src,
                                     void **data, size_t *len)
{
	encoder e = {.fd = -1, .src = src};
	lomas_status st;
	if (!p || !data || !len)
		return error_set(LOMAS_EINVAL, "profile_save_buffer: NULL argument");
	*data = NULL;
	*len = 0;
	if ((st = encode(&e, p, len))) {
		free(e.image);
		*len = 0;
		return st;
	}
	*data = e.image;
	return LOMAS_OK;
}

lomas_status profile_save_buffer(const lomas_profile *p, void **data, size_t *len)
{
	return profile_save_buffer_src(p, NULL, data, len);
}

lomas_status profile_save_fd_src(const lomas_profile *p, const profile_sample_source *src, int fd)
{
	encoder e = {.fd = fd, .src = src};
	size_t len;
	lomas_status st;
	if (!p)
		return error_set(LOMAS_EINVAL, "profile_save_fd: NULL profile");
	if (!(e.stage = malloc(ENC_STAGE)))
		return error_set(LOMAS_ENOMEM, "out of memory");
	st = encode(&e, p, &len);
	free(e.stage);
	return st;
}

/* ------------------------------------------------------------------ decoder */

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

/* Set LOMAS_EFORMAT with "name: offset N: message". */
LOMAS_PRINTF(3, 4)
static lomas_status bad(const reader *r, uint64_t off, const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof msg, fmt, ap);
	va_end(ap);
	return error_set(LOMAS_EFORMAT, "%s: offset %" PRIu64 ": %s", r->name, off, msg);
}

/*
 * Read a length-prefixed string at *pos (absolute) that must end by end.
 * Returns a malloc'd copy in *out.
 */
static lomas_status get_str(const reader *r, uint64_t *pos, uint64_t end, const char *what,
                            bool nonempty, char **out)
{
	uint64_t at = *pos;
	uint32_t n;
	*out = NULL;
	if (end - at < 4)
		return bad(r, at, "%s length runs past the end of its section", what);
	n = rd32(r->b + at);
	if (n > end - at - 4)
		return bad(r, at, "%s length %" PRIu32 " runs past the end of its section", what,
		           n);
	if (nonempty && n == 0)
		return bad(r, at, "%s is empty", what);
	if (memchr(r->b + at + 4, 0, n))
		return bad(r, at, "%s contains a NUL byte", what);
	*out = malloc((size_t)n + 1);
	if (!*out)
		return error_set(LOMAS_ENOMEM, "out of memory");
	memcpy(*out, r->b + at + 4, n);
	(*out)[n] = '\0';
	*pos = at + 4 + n;
	return LOMAS_OK;
}

/* Sort helper for duplicate-key detection: indices ordered by key. */
typedef struct keyref {
	const char *key;
	uint64_t off;
} keyref;

static int keyref_cmp(const void *a, const void *b)
{
	return strcmp(((const keyref *)a)->key, ((const keyref *)b)->key);
}

/* LOMAS_EFORMAT naming a duplicate key if keys[0..n) has one. Reorders keys. */
static lomas_status check_dups(const reader *r, keyref *keys, size_t n, const char *what)
{
	if (n < 2)
		return LOMAS_OK;
	qsort(keys, n, sizeof *keys, keyref_cmp);
	for (size_t i = 1; i < n; i++) {
		if (strcmp(keys[i - 1].key, keys[i].key) == 0) {
			uint64_t o = keys[i].off > keys[i - 1].off ? keys[i].off : keys[i - 1].off;
			return bad(r, o, "duplicate %s key '%s'", what, keys[i].key);
		}
	}
	return LOMAS_OK;
}

/* Check a u32-counted section's count against the smallest possible entry. */
static lomas_status small_count(const reader *r, const section *s, const char *what,
                                uint64_t min_entry, uint32_t *count)
{
	if (s->len < 4)
		return bad(r, s->off, "section %s length %" PRIu64 " is shorter than its count",
		           what, s->len);
	*count = rd32(r->b + s->off);
	if (*count > (s->len - 4) / min_entry)
		return bad(r, s->off,
		           "section %s count %" PRIu32 " is too large for its length %" PRIu64,
		           what, *count, s->len);
	return LOMAS_OK;
}

static lomas_status decode_meta(const reader *r, const section *s, lomas_profile *p)
{
	uint64_t pos = s->off + 4, end = s->off + s->len;
	uint32_t count = 0;
	keyref *keys;
	lomas_status st;
	if ((st = small_count(r, s, "META", 8, &count)) || (st = vec_reserve(&p->meta, count)))
		return st;
	keys = malloc(sizeof *keys * (count ? count : 1));
	if (!keys)
		return error_set(LOMAS_ENOMEM, "out of memory");
	for (uint32_t i = 0; i < count; i++) {
		prof_meta *m = &p->meta.items[p->meta.n];
		uint64_t at = pos;
		if ((st = get_str(r, &pos, end, "metadata key", true, &m->key)))
			goto out;
		if ((st = get_str(r, &pos, end, "metadata value", false, &m->value))) {
			free(m->key);
			goto out;
		}
		keys[i].key = m->key;
		keys[i].off = at;
		p->meta.n++;
	}
	if (pos != end) {
		st = bad(r, pos, "%" PRIu64 " unused bytes at the end of section META", end - pos);
		goto out;
	}
	st = check_dups(r, keys, count, "metadata");
out:
	free(keys);
	return st;
}

static lomas_status decode_calib(const reader *r, const section *s, lomas_profile *p)
{
	uint64_t pos = s->off + 4, end = s->off + s->len;
	uint32_t count = 0;
	keyref *keys;
	lomas_status st;
	if ((st = small_count(r, s, "CALIB", 13, &count)) || (st = vec_reserve(&p->calib, count)))
		return st;
	keys = malloc(sizeof *keys * (count ? count : 1));
	if (!keys)
		return error_set(LOMAS_ENOMEM, "out of memory");
	for (uint32_t i = 0; i < count; i++) {
		prof_calib *c = &p->calib.items[p->calib.n];
		uint64_t at = pos;
		if ((st = get_str(r, &pos, end, "calibration key", true, &c->key)))
			goto out;
		if (end - pos < 8) {
			free(c->key);
			st = bad(r, pos, "calibration value runs past the end of section CALIB");
			goto out;
		}
		c->value = rdf64(r->b + pos); /* any bits: stored, exported, never computed with */
		pos += 8;
		keys[i].key = c->key;
		keys[i].off = at;
		p->calib.n++;
	}
	if (pos != end) {
		st = bad(r, pos, "%" PRIu64 " unused bytes at the end of section CALIB", end - pos);
		goto out;
	}
	st = check_dups(r, keys, count, "calibration");
out:
	free(keys);
	return st;
}

static lomas_status decode_maps(const reader *r, const section *s, lomas_profile *p)
{
	uint64_t pos = s->off + 4, end = s->off + s->len;
	uint32_t count = 0;
	lomas_status st;
	if ((st = small_count(r, s, "MAPS", PF_MAP_FIXED, &count)) ||
	    (st = vec_reserve(&p->maps, count)))
		return st;
	for (uint32_t i = 0; i < count; i++) {
		prof_map *m = &p->maps.items[p->maps.n];
		if (end - pos < PF_MAP_FIXED)
			return bad(r, pos, "map %" PRIu32 " runs past the end of section MAPS", i);
		m->start = rd64(r->b + pos);
		m->end = rd64(r->b + pos + 8);
		m->offset = rd64(r->b + pos + 16);
		m->prot = rd32(r->b + pos + 24);
		m->reserved = 0;
		m->build_id_len = 0;
		pos += 28;
		if ((st = get_str(r, &pos, end, "map path", false, &m->path)))
			return st;
		p->maps.n++;
	}
	if (pos != end)
		return bad(r, pos, "%" PRIu64 " unused bytes at the end of section MAPS",
		           end - pos);
	return LOMAS_OK;
}

/*
 * BUILDIDS (2.1): u32 count, equal to the number of maps, then for each map
 * in order a u8 length (0 = unknown, at most PROF_BUILD_ID_MAX) and that
 * many bytes of its file's GNU build id. Decoded after MAPS.
 */
static lomas_status decode_buildids(const reader *r, const section *s, lomas_profile *p)
{
	uint64_t pos = s->off + 4, end = s->off + s->len;
	uint32_t count;
	if (s->len < 4)
		return bad(r, s->off,
		           "section BUILDIDS length %" PRIu64 " is shorter than its count", s->len);
	count = rd32(r->b + s->off);
	if (count != p->maps.n)
		return bad(r, s->off, "section BUILDIDS has %" PRIu32 " entries for %zu maps",
		           count, p->maps.n);
	for (uint32_t i = 0; i < count; i++) {
		prof_map *m = &p->maps.items[i];
		uint8_t n;
		if (end - pos < 1)
			return bad(r, pos,
			           "build id %" PRIu32 " runs past the end of section BUILDIDS", i);
		n = r->b[pos];
		if (n > PROF_BUILD_ID_MAX)
			return bad(r, pos, "build id %" PRIu32 " of %u bytes is longer than %u", i,
			           n, PROF_BUILD_ID_MAX);
		if (end - pos - 1 < n)
			return bad(r, pos,
			           "build id %" PRIu32 " runs past the end of section BUILDIDS", i);
		memcpy(m->build_id, r->b + pos + 1, n);
		m->build_id_len = n;
		pos += 1 + (uint64_t)n;
	}
	if (pos != end)
		return bad(r, pos, "%" PRIu64 " unused bytes at the end of section BUILDIDS",
		           end - pos);
	return LOMAS_OK;
}

/* Check a u64-counted array section of fixed-size records; *count its entries. */
static lomas_status array_count(const reader *r, const section *s, const char *what, uint64_t rec,
                                uint64_t *count)
{
	if (s->len < 8 || (s->len - 8) % rec != 0)
		return bad(r, s->off,
		           "section %s length %" PRIu64 " is not 8 plus a multiple of %" PRIu64,
		           what, s->len, rec);
	*count = rd64(r->b + s->off);
	if (*count != (s->len - 8) / rec)
		return bad(r, s->off,
		           "section %s count %" PRIu64 " disagrees with its length %" PRIu64
		           " (%" PRIu64 " records)",
		           what, *count, s->len, (s->len - 8) / rec);
	if (*count > UINT32_MAX && rec != PF_SAMPLE_SIZE)
		return bad(r, s->off, "section %s count %" PRIu64 " exceeds 2^32-1", what, *count);
	return LOMAS_OK;
}

static lomas_status decode_threads(const reader *r, const section *s, lomas_profile *p)
{
	uint64_t count;
	const uint8_t *q = r->b + s->off + 8;
	lomas_status st;
	if ((st = array_count(r, s, "THREADS", PF_THREAD_SIZE, &count)) ||
	    (st = vec_reserve(&p->threads, count)))
		return st;
	for (uint64_t i = 0, refs = 0; i < count; i++, q += PF_THREAD_SIZE) {
		p->threads.items[i].tid = rd64(q);
		p->threads.items[i].refs = rd64(q + 8);
		/* lomas_profile_info's refs is their sum (profile_validate checks it too). */
		if (p->threads.items[i].refs > UINT64_MAX - refs)
			return bad(r, (uint64_t)(q - r->b) + 8,
			           "thread %" PRIu64
			           ": the references of all threads add up to more than 2^64-1",
			           i);
		refs += p->threads.items[i].refs;
	}
	p->threads.n = count;
	return LOMAS_OK;
}

static lomas_status decode_windows(const reader *r, const section *s, lomas_profile *p)
{
	uint64_t count;
	const uint8_t *q = r->b + s->off + 8;
	lomas_status st;
	if ((st = array_count(r, s, "WINDOWS", PF_WINDOW_SIZE, &count)) ||
	    (st = vec_reserve(&p->windows, count)))
		return st;
	for (uint64_t i = 0; i < count; i++, q += PF_WINDOW_SIZE) {
		lomas_window *w = &p->windows.items[i];
		w->start = rd64(q);
		w->refs = rd64(q + 8);
		w->thread = rd32(q + 16);
		w->reserved = 0;
		if (w->thread >= p->threads.n)
			return bad(r, (uint64_t)(q - r->b) + 16,
			           "window %" PRIu64 " names thread %" PRIu32 " of %zu", i,
			           w->thread, p->threads.n);
	}
	p->windows.n = count;
	return LOMAS_OK;
}

static lomas_status decode_samples(const reader *r, const section *s, lomas_profile *p)
{
	uint64_t count;
	const uint8_t *q = r->b + s->off + 8;
	const size_t nthreads = p->threads.n, nwindows = p->windows.n;
	const lomas_window *wins = p->windows.items;
	lomas_status st;
	if ((st = array_count(r, s, "SAMPLES", PF_SAMPLE_SIZE, &count)) ||
	    (st = vec_reserve(&p->samples, count)))
		return st;
	for (uint64_t i = 0; i < count; i++, q += PF_SAMPLE_SIZE) {
		lomas_sample *x = &p->samples.items[i];
		uint64_t at = (uint64_t)(q - r->b);
		x->start = rd64(q);
		x->end = rd64(q + 8);
		x->addr = rd64(q + 16);
		x->start_pc = rd64(q + 24);
		x->end_pc = rd64(q + 32);
		x->weight = rdf64(q + 40);
		x->thread = rd32(q + 48);
		x->window = rd32(q + 52);
		x->kind = q[56];
		x->state = q[57];
		x->flags = (uint16_t)(q[58] | q[59] << 8);
		x->reserved = 0;
		/* The checks of profile_validate, here so the message has the offset. */
		if (x->thread >= nthreads)
			return bad(r, at + 48, "sample %" PRIu64 " names thread %" PRIu32 " of %zu",
			           i, x->thread, nthreads);
		if (x->window >= nwindows)
			return bad(r, at + 52, "sample %" PRIu64 " names window %" PRIu32 " of %zu",
			           i, x->window, nwindows);
		if (wins[x->window].thread != x->thread)
			return bad(r, at + 48,
			           "sample %" PRIu64 ": thread %" PRIu32
			           " differs from its window's %" PRIu32,
			           i, x->thread, wins[x->window].thread);
		if (x->kind > LOMAS_REF_STORE)
			return bad(r, at + 56, "sample %" PRIu64 ": bad kind %u", i, x->kind);
		if (x->state > LOMAS_SAMPLE_CENSORED)
			return bad(r, at + 57, "sample %" PRIu64 ": bad state %u", i, x->state);
		if (!weight_valid(x->weight))
			return bad(r, at + 40,
			           "sample %" PRIu64 ": weight %g is not within 2^-64..2^64", i,
			           x->weight);
		if (x->state != LOMAS_SAMPLE_DANGLING && x->end <= x->start)
			return bad(r, at + 8,
			           "sample %" PRIu64 ": end %" PRIu64 " not after start %" PRIu64,
			           i, x->end, x->start);
	}
	p->samples.n = count;
	return LOMAS_OK;
}

/*
 * PSAMPLES: u64 count, then blocks to the section's end, each a 32-byte
 * header (u32 thread, u32 level floor, f64 base weight, u64 records, u64
 * bytes) and its packed records (see packed_sample in core.h). A sample's
 * window is the one of its thread that its start falls in (window_index).
 */
static lomas_status decode_psamples(const reader *r, const section *s, lomas_profile *p)
{
	const uint8_t *q, *end = r->b + s->off + s->len;
	uint64_t count, i = 0;
	window_index wi;
	lomas_status st = LOMAS_OK;
	if (s->len < 8)
		return bad(r, s->off,
		           "section PSAMPLES length %" PRIu64 " is shorter than its count", s->len);
	count = rd64(r->b + s->off);
	if (count > (s->len - 8) / PF_MIN_RECORD)
		return bad(r, s->off,
		           "section PSAMPLES count %" PRIu64
		           " is too large for its length %" PRIu64,
		           count, s->len);
	if ((st = vec_reserve(&p->samples, count)) || (st = window_index_build(p, &wi)))
		return st;
	for (q = r->b + s->off + 8; q < end && !st;) {
		uint64_t at = (uint64_t)(q - r->b), n, blen;
		uint32_t thread, floor;
		double base;
		packed_sample prev = {0}, x;
		size_t hint = 0;
		const uint8_t *bend;
		if ((size_t)(end - q) < PF_BLOCK_HEADER) {
			st =
			    bad(r, at, "sample block header runs past the end of section PSAMPLES");
			break;
		}
		thread = rd32(q);
		floor = rd32(q + 4);
		base = rdf64(q + 8);
		n = rd64(q + 16);
		blen = rd64(q + 24);
		if (thread >= p->threads.n) {
			st = bad(r, at, "sample block names thread %" PRIu32 " of %zu", thread,
			         p->threads.n);
			break;
		}
		if (floor > 255) {
			st = bad(r, at + 4, "sample block level floor %" PRIu32 " is above 255",
			         floor);
			break;
		}
		if (!(base > 0.0 && base <= DBL_MAX)) {
			st = bad(r, at + 8,
			         "sample block base weight %g is not positive and finite", base);
			break;
		}
		if (n > count - i) {
			st = bad(r, at + 16,
			         "sample block of %" PRIu64
			         " records: more samples than the count %" PRIu64,
			         n, count);
			break;
		}
		if (blen > (uint64_t)(end - q) - PF_BLOCK_HEADER) {
			st = bad(r, at + 24,
			         "sample block length %" PRIu64
			         " runs past the end of section PSAMPLES",
			         blen);
			break;
		}
		q += PF_BLOCK_HEADER;
		bend = q + blen;
		for (uint64_t k = 0; k < n; k++, i++) {
			lomas_sample *o = &p->samples.items[i];
			unsigned level;
			at = (uint64_t)(q - r->b);
			if (!(q = packed_get(q, bend, &x, &prev))) {
				st = bad(r, at,
				         "sample %" PRIu64
				         ": record runs past its block or has a malformed varint",
				         i);
				break;
			}
			if (q[-2] & PACKED_KIND_RESERVED || x.kind > LOMAS_REF_STORE) {
				st = bad(r, (uint64_t)(q - 2 - r->b),
				         "sample %" PRIu64 ": bad kind byte 0x%02x", i, q[-2]);
				break;
			}
			if (x.state > LOMAS_SAMPLE_CENSORED) {
				st = bad(r, (uint64_t)(q - 2 - r->b),
				         "sample %" PRIu64 ": bad state %u", i, x.state);
				break;
			}
			level = x.level > floor ? x.level : floor;
			o->start = x.start;
			o->end = x.end;
			o->addr = x.addr;
			o->start_pc = x.start_pc;
			o->end_pc = x.end_pc;
			o->weight = ldexp(base, (int)level);
			o->thread = thread;
			o->window = window_index_find(&wi, thread, x.start, &hint);
			o->kind = x.kind;
			o->state = x.state;
			o->flags = x.cross ? LOMAS_SAMPLE_CROSS_THREAD : 0;
			o->reserved = 0;
			if (o->window == UINT32_MAX) {
				st = bad(r, at,
				         "sample %" PRIu64 ": no window of thread %" PRIu32
				         " starts at or before its start %" PRIu64,
				         i, thread, x.start);
				break;
			}
			if (!weight_valid(o->weight)) {
				st = bad(r, (uint64_t)(q - 1 - r->b),
				         "sample %" PRIu64 ": weight %g x 2^%u is not within "
				         "2^-64..2^64",
				         i, base, level);
				break;
			}
			if (x.state != LOMAS_SAMPLE_DANGLING && x.end <= x.start) {
				st = bad(r, at,
				         "sample %" PRIu64 ": end %" PRIu64
				         " not after start %" PRIu64,
				         i, x.end, x.start);
				break;
			}
			prev = x;
		}
		if (!st && q != bend)
			st = bad(r, (uint64_t)(q - r->b),
			         "%" PRIu64 " unused bytes at the end of a sample block",
			         (uint64_t)(bend - q));
	}
	window_index_free(&wi);
	if (st)
		return st;
	if (i != count)
		return bad(r, s->off,
		           "section PSAMPLES count %" PRIu64 " disagrees with its %" PRIu64
		           " records",
		           count, i);
	p->samples.n = count;
	return LOMAS_OK;
}

/* Read the header and section table into secs[SEC_KNOWN]. */
static lomas_status read_table(const reader *r, section *secs)
{
	uint32_t version, major, flags, nsec, tcrc, crc;
	uint64_t toff;
	if (r->len < PF_HEADER_SIZE) {
		if (r->len >= 8 && memcmp(r->b, PF_MAGIC, 8) != 0)
			return bad(r, 0, "not a lomas profile (bad magic)");
		return bad(r, r->len, "file of %zu bytes ends inside the %u-byte header", r->len,
		           PF_HEADER_SIZE);
	}
	if (memcmp(r->b, PF_MAGIC, 8) != 0)
		return bad(r, 0, "not a lomas profile (bad magic)");
	version = rd32(r->b + 8);
	if (version >> 16 > PF_MAJOR)
		return bad(r, 8,
		           "format version %u.%u is newer than this reader (%u.%u); "
		           "a newer liblomas is needed",
		           version >> 16, version & 0xffff, PF_MAJOR, PF_MINOR_BUILDIDS);
	if (version >> 16 < PF_OLDEST_MAJOR)
		return bad(r, 8, "unsupported format version %u.%u", version >> 16,
		           version & 0xffff);
	major = version >> 16;
	flags = rd32(r->b + 12);
	if (flags != 0)
		return bad(r, 12, "unknown header flags 0x%" PRIx32, flags);
	nsec = rd32(r->b + 16);
	tcrc = rd32(r->b + 20);
	toff = rd64(r->b + 24);
	if (toff > r->len || (uint64_t)nsec * PF_ENTRY_SIZE > r->len - toff)
		return bad(r, 24,
		           "section table (%" PRIu32 " entries at offset %" PRIu64
		           ") extends past the end of the file (%zu bytes)",
		           nsec, toff, r->len);
	crc = crc32_update(0, r->b + toff, (size_t)nsec * PF_ENTRY_SIZE);
	if (crc != tcrc)
		return bad(r, 20,
		           "section table CRC 0x%08" PRIx32
		           " does not match its contents (0x%08" PRIx32 ")",
		           tcrc, crc);
	for (uint32_t i = 0; i < nsec; i++) {
		uint64_t e = toff + (uint64_t)i * PF_ENTRY_SIZE;
		const uint8_t *q = r->b + e;
		uint32_t type = rd32(q), sflags = rd32(q + 4), scrc = rd32(q + 24);
		uint64_t off = rd64(q + 8), len = rd64(q + 16);
		const char *nm = type < SEC_KNOWN && type ? sec_names[type] : "(unknown)";
		if (off > r->len || len > r->len - off)
			return bad(r, e + 8,
			           "section %s (type %" PRIu32 ") at offset %" PRIu64
			           " length %" PRIu64
			           " extends past the end of the file (%zu bytes)",
			           nm, type, off, len, r->len);
		if (crc32_update(0, r->b + off, (size_t)len) != scrc)
			return bad(r, off, "section %s (type %" PRIu32 ") CRC mismatch", nm, type);
		if (type == 0 || type >= SEC_KNOWN || (major < 2 && type == SEC_PSAMPLES) ||
		    (type == SEC_BUILDIDS && (version < (2u << 16 | PF_MINOR_BUILDIDS))))
			continue; /* unknown: skipped (a newer minor version's addition) */
		if (sflags != 0)
			return bad(r, e + 4, "section %s has unknown flags 0x%" PRIx32, nm, sflags);
		if (secs[type].present)
			return bad(r, e,
			           "duplicate section %s (first in table entry at offset %" PRIu64
			           ")",
			           nm, secs[type].entry);
		secs[type].present = true;
		secs[type].entry = e;
		secs[type].off = off;
		secs[type].len = len;
	}
	{
		static const int required[] = {SEC_PROFILE, SEC_THREADS, SEC_WINDOWS};
		for (size_t i = 0; i < sizeof required / sizeof required[0]; i++)
			if (!secs[required[i]].present)
				return bad(r, toff, "required section %s is missing",
				           sec_names[required[i]]);
	}
	/* The samples: SAMPLES in 1.x; SAMPLES or PSAMPLES, not both, from 2.0. */
	if (secs[SEC_SAMPLES].present && secs[SEC_PSAMPLES].present)
		return bad(r, secs[SEC_PSAMPLES].entry,
		           "sections SAMPLES and PSAMPLES both present");
	if (!secs[SEC_SAMPLES].present && !secs[SEC_PSAMPLES].present)
		return bad(r, toff, "required section %s is missing",
		           major < 2 ? "SAMPLES" : "PSAMPLES (or SAMPLES)");
	return LOMAS_OK;
}

lomas_status profile_load_buffer(const void *data, size_t len, const char *name,
                                 lomas_profile **out)
{
	reader r = {data, len, name ? name : "(buffer)"};
	section secs[SEC_KNOWN] = {{0}};
	const section *ps;
	lomas_profile *p = NULL;
	uint32_t line_size;
	lomas_status st;

	if (!out || (!data && len))
		return error_set(LOMAS_EINVAL, "profile_load_buffer: NULL argument");
	*out = NULL;
	if (!data)
		r.b = (const uint8_t *)"";
	if ((st = read_table(&r, secs)))
		return st;
	ps = &secs[SEC_PROFILE];
	if (ps->len != PF_PROFILE_SIZE)
		return bad(&r, ps->off, "section PROFILE length %" PRIu64 " is not %u", ps->len,
		           PF_PROFILE_SIZE);
	line_size = rd32(r.b + ps->off);
	if (!line_size_valid(line_size))
		return bad(&r, ps->off,
		           "line size %" PRIu32 " is not a power of two from 8 to 65536",
		           line_size);
	if ((st = lomas_profile_new(line_size, &p)))
		return st;
	if ((st = decode_threads(&r, &secs[SEC_THREADS], p)) ||
	    (st = decode_windows(&r, &secs[SEC_WINDOWS], p)) ||
	    (secs[SEC_SAMPLES].present && (st = decode_samples(&r, &secs[SEC_SAMPLES], p))) ||
	    (secs[SEC_PSAMPLES].present && (st = decode_psamples(&r, &secs[SEC_PSAMPLES], p))) ||
	    (secs[SEC_META].present && (st = decode_meta(&r, &secs[SEC_META], p))) ||
	    (secs[SEC_CALIB].present && (st = decode_calib(&r, &secs[SEC_CALIB], p))) ||
	    (secs[SEC_MAPS].present && (st = decode_maps(&r, &secs[SEC_MAPS], p))) ||
	    (secs[SEC_BUILDIDS].present && (st = decode_buildids(&r, &secs[SEC_BUILDIDS], p))))
		goto fail;
	/* The decoders already made these checks; this backstop keeps the two in step. */
	if ((st = profile_validate(p))) {
		error_prefix(st, "%s: offset %" PRIu64, r.name,
		             secs[secs[SEC_SAMPLES].present ? SEC_SAMPLES : SEC_PSAMPLES].off);
		goto fail;
	}
	*out = p;
	return LOMAS_OK;
fail:
	lomas_profile_free(p);
	return st;
}

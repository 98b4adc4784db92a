/*
 * The profile format's encoder (docs/profile-format.md): a profile (and the
 * samples of a profile_sample_source) into a file image, in a buffer or
 * through a small stage to a descriptor, sections laid out first so every
 * offset and CRC is known before a byte is written.
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

#include "profile_codec.h"

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
	/* EXACTSD: a varint per sample; the source's given (src->exact) or a
	 * zero byte each. */
	size[SEC_EXACTSD] = 8 + (src ? (src->exact ? src->exact_len : (size_t)src->n) : 0);
	for (size_t i = 0; i < p->samples.n; i++) {
		uint8_t tmp[10];
		size[SEC_EXACTSD] +=
		    (size_t)(put_varint(tmp, exact_code(&p->samples.items[i])) - tmp);
	}
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
	/* The exact distance is EXACTSD's (the flag without it would mislead). */
	q[58] = (uint8_t)(s->flags & ~LOMAS_SAMPLE_EXACT_SD);
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
	case SEC_EXACTSD:
		enc_u64(e, p->samples.n + (e->src ? e->src->n : 0));
		/* Each varint through a buffer: the image has exactly its bytes left
		 * (enc_room clears what it hands out). */
		for (size_t i = 0; i < p->samples.n && !e->st; i++) {
			uint8_t v[10];
			enc_bytes(e, v,
			          (size_t)(put_varint(v, exact_code(&p->samples.items[i])) - v));
		}
		if (e->src && e->src->exact && !e->st)
			enc_bytes(e, e->src->exact, e->src->exact_len);
		for (uint64_t i = 0; e->src && !e->src->exact && i < e->src->n && !e->st; i++) {
			enc_room(e, 1);
			enc_done(e, 1);
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

static bool any_exact(const lomas_profile *p)
{
	for (size_t i = 0; i < p->samples.n; i++)
		if (exact_code(&p->samples.items[i]))
			return true;
	return false;
}

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
	int order[] = {SEC_PROFILE, SEC_META, SEC_CALIB, SEC_THREADS, SEC_WINDOWS, SEC_PSAMPLES,
	               SEC_MAPS,    0,        0};
	/* BUILDIDS (and format 2.1) only when some map has a build id, EXACTSD
	 * (and 2.2) only when some sample has an exact distance: a file without
	 * them is exactly the 2.0 file it was before. */
	size_t nsec = 7;
	if (any_build_id(p))
		order[nsec++] = SEC_BUILDIDS;
	if (any_exact(p) || (e->src && e->src->exact))
		order[nsec++] = SEC_EXACTSD;
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
	     PF_MAJOR << 16 | (nsec > 0 && order[nsec - 1] == SEC_EXACTSD    ? PF_MINOR_EXACTSD
	                       : nsec > 0 && order[nsec - 1] == SEC_BUILDIDS ? PF_MINOR_BUILDIDS
	                                                                     : PF_MINOR));
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

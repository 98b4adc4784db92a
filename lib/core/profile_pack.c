/*
 * PSAMPLES, the packed samples of the profile format (docs/profile-format.md,
 * format 2.0): blocks of one thread's samples whose weights are a base times
 * powers of two, each sample a packed record (packed_sample, core.h). The
 * encoder packs with pack_samples, the decoder unpacks with decode_psamples,
 * checking every length and count before it reads what they describe.
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

/*
 * The profile's own samples as PSAMPLES blocks (header and records), in
 * order, in a malloc'd buffer. A block is a run of samples of one thread
 * whose weights are its first one's (the base) times a power of two. Sets
 * *packable to false (and returns LOMAS_OK) when some sample cannot be
 * packed as it is: p is then written with a SAMPLES section.
 */
lomas_status pack_samples(const lomas_profile *p, uint8_t **out, size_t *out_len, bool *packable)
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
		    s->state > LOMAS_SAMPLE_CENSORED ||
		    (s->flags & ~(LOMAS_SAMPLE_CROSS_THREAD | LOMAS_SAMPLE_EXACT_SD)) ||
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

/*
 * PSAMPLES: u64 count, then blocks to the section's end, each a 32-byte
 * header (u32 thread, u32 level floor, f64 base weight, u64 records, u64
 * bytes) and its packed records (see packed_sample in core.h). A sample's
 * window is the one of its thread that its start falls in (window_index).
 */
lomas_status decode_psamples(const reader *r, const section *s, lomas_profile *p)
{
	const uint8_t *q, *end = r->b + s->off + s->len;
	uint64_t count, i = 0;
	window_index wi;
	lomas_status st = LOMAS_OK;
	if (s->len < 8)
		return codec_bad(r, s->off,
		                 "section PSAMPLES length %" PRIu64 " is shorter than its count",
		                 s->len);
	count = rd64(r->b + s->off);
	if (count > (s->len - 8) / PF_MIN_RECORD)
		return codec_bad(r, s->off,
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
			st = codec_bad(r, at,
			               "sample block header runs past the end of section PSAMPLES");
			break;
		}
		thread = rd32(q);
		floor = rd32(q + 4);
		base = rdf64(q + 8);
		n = rd64(q + 16);
		blen = rd64(q + 24);
		if (thread >= p->threads.n) {
			st = codec_bad(r, at, "sample block names thread %" PRIu32 " of %zu",
			               thread, p->threads.n);
			break;
		}
		if (floor > 255) {
			st = codec_bad(r, at + 4,
			               "sample block level floor %" PRIu32 " is above 255", floor);
			break;
		}
		if (!(base > 0.0 && base <= DBL_MAX)) {
			st = codec_bad(r, at + 8,
			               "sample block base weight %g is not positive and finite",
			               base);
			break;
		}
		if (n > count - i) {
			st = codec_bad(r, at + 16,
			               "sample block of %" PRIu64
			               " records: more samples than the count %" PRIu64,
			               n, count);
			break;
		}
		if (blen > (uint64_t)(end - q) - PF_BLOCK_HEADER) {
			st = codec_bad(r, at + 24,
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
				st = codec_bad(
				    r, at,
				    "sample %" PRIu64
				    ": record runs past its block or has a malformed varint",
				    i);
				break;
			}
			if (q[-2] & PACKED_KIND_RESERVED || x.kind > LOMAS_REF_STORE) {
				st =
				    codec_bad(r, (uint64_t)(q - 2 - r->b),
				              "sample %" PRIu64 ": bad kind byte 0x%02x", i, q[-2]);
				break;
			}
			if (x.state > LOMAS_SAMPLE_CENSORED) {
				st = codec_bad(r, (uint64_t)(q - 2 - r->b),
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
				st = codec_bad(r, at,
				               "sample %" PRIu64 ": no window of thread %" PRIu32
				               " starts at or before its start %" PRIu64,
				               i, thread, x.start);
				break;
			}
			if (!weight_valid(o->weight)) {
				st = codec_bad(r, (uint64_t)(q - 1 - r->b),
				               "sample %" PRIu64 ": weight %g x 2^%u is not within "
				               "2^-64..2^64",
				               i, base, level);
				break;
			}
			if (x.state != LOMAS_SAMPLE_DANGLING && x.end <= x.start) {
				st = codec_bad(r, at,
				               "sample %" PRIu64 ": end %" PRIu64
				               " not after start %" PRIu64,
				               i, x.end, x.start);
				break;
			}
			prev = x;
		}
		if (!st && q != bend)
			st = codec_bad(r, (uint64_t)(q - r->b),
			               "%" PRIu64 " unused bytes at the end of a sample block",
			               (uint64_t)(bend - q));
	}
	window_index_free(&wi);
	if (st)
		return st;
	if (i != count)
		return codec_bad(r, s->off,
		                 "section PSAMPLES count %" PRIu64 " disagrees with its %" PRIu64
		                 " records",
		                 count, i);
	p->samples.n = count;
	return LOMAS_OK;
}

/*
 * The profile format's decoder (docs/profile-format.md): an untrusted image
 * into a profile. It checks every length, offset, count and CRC before it
 * touches the bytes they describe, and reports the byte offset of the first
 * problem (codec_bad). PSAMPLES is decoded in profile_pack.c.
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

static const char *const sec_names[SEC_KNOWN] = {
    "?",       "META", "PROFILE",  "CALIB",    "THREADS", "WINDOWS",
    "SAMPLES", "MAPS", "PSAMPLES", "BUILDIDS", "EXACTSD",
};

lomas_status codec_bad(const reader *r, uint64_t off, const char *fmt, ...)
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
		return codec_bad(r, at, "%s length runs past the end of its section", what);
	n = rd32(r->b + at);
	if (n > end - at - 4)
		return codec_bad(r, at, "%s length %" PRIu32 " runs past the end of its section",
		                 what, n);
	if (nonempty && n == 0)
		return codec_bad(r, at, "%s is empty", what);
	if (memchr(r->b + at + 4, 0, n))
		return codec_bad(r, at, "%s contains a NUL byte", what);
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
			return codec_bad(r, o, "duplicate %s key '%s'", what, keys[i].key);
		}
	}
	return LOMAS_OK;
}

/* Check a u32-counted section's count against the smallest possible entry. */
static lomas_status small_count(const reader *r, const section *s, const char *what,
                                uint64_t min_entry, uint32_t *count)
{
	if (s->len < 4)
		return codec_bad(r, s->off,
		                 "section %s length %" PRIu64 " is shorter than its count", what,
		                 s->len);
	*count = rd32(r->b + s->off);
	if (*count > (s->len - 4) / min_entry)
		return codec_bad(
		    r, s->off, "section %s count %" PRIu32 " is too large for its length %" PRIu64,
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
		st = codec_bad(r, pos, "%" PRIu64 " unused bytes at the end of section META",
		               end - pos);
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
			st = codec_bad(r, pos,
			               "calibration value runs past the end of section CALIB");
			goto out;
		}
		c->value = rdf64(r->b + pos); /* any bits: stored, exported, never computed with */
		pos += 8;
		keys[i].key = c->key;
		keys[i].off = at;
		p->calib.n++;
	}
	if (pos != end) {
		st = codec_bad(r, pos, "%" PRIu64 " unused bytes at the end of section CALIB",
		               end - pos);
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
			return codec_bad(r, pos,
			                 "map %" PRIu32 " runs past the end of section MAPS", i);
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
		return codec_bad(r, pos, "%" PRIu64 " unused bytes at the end of section MAPS",
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
		return codec_bad(r, s->off,
		                 "section BUILDIDS length %" PRIu64 " is shorter than its count",
		                 s->len);
	count = rd32(r->b + s->off);
	if (count != p->maps.n)
		return codec_bad(r, s->off, "section BUILDIDS has %" PRIu32 " entries for %zu maps",
		                 count, p->maps.n);
	for (uint32_t i = 0; i < count; i++) {
		prof_map *m = &p->maps.items[i];
		uint8_t n;
		if (end - pos < 1)
			return codec_bad(
			    r, pos, "build id %" PRIu32 " runs past the end of section BUILDIDS",
			    i);
		n = r->b[pos];
		if (n > PROF_BUILD_ID_MAX)
			return codec_bad(r, pos,
			                 "build id %" PRIu32 " of %u bytes is longer than %u", i, n,
			                 PROF_BUILD_ID_MAX);
		if (end - pos - 1 < n)
			return codec_bad(
			    r, pos, "build id %" PRIu32 " runs past the end of section BUILDIDS",
			    i);
		memcpy(m->build_id, r->b + pos + 1, n);
		m->build_id_len = n;
		pos += 1 + (uint64_t)n;
	}
	if (pos != end)
		return codec_bad(r, pos, "%" PRIu64 " unused bytes at the end of section BUILDIDS",
		                 end - pos);
	return LOMAS_OK;
}

/* Check a u64-counted array section of fixed-size records; *count its entries. */
static lomas_status array_count(const reader *r, const section *s, const char *what, uint64_t rec,
                                uint64_t *count)
{
	if (s->len < 8 || (s->len - 8) % rec != 0)
		return codec_bad(
		    r, s->off, "section %s length %" PRIu64 " is not 8 plus a multiple of %" PRIu64,
		    what, s->len, rec);
	*count = rd64(r->b + s->off);
	if (*count != (s->len - 8) / rec)
		return codec_bad(r, s->off,
		                 "section %s count %" PRIu64 " disagrees with its length %" PRIu64
		                 " (%" PRIu64 " records)",
		                 what, *count, s->len, (s->len - 8) / rec);
	if (*count > UINT32_MAX && rec != PF_SAMPLE_SIZE)
		return codec_bad(r, s->off, "section %s count %" PRIu64 " exceeds 2^32-1", what,
		                 *count);
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
			return codec_bad(
			    r, (uint64_t)(q - r->b) + 8,
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
			return codec_bad(r, (uint64_t)(q - r->b) + 16,
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
		/* The exact distances come from EXACTSD alone (decode_exactsd). */
		x->flags = (uint16_t)(q[58] | q[59] << 8) & (uint16_t)~LOMAS_SAMPLE_EXACT_SD;
		x->reserved = 0;
		/* The checks of profile_validate, here so the message has the offset. */
		if (x->thread >= nthreads)
			return codec_bad(r, at + 48,
			                 "sample %" PRIu64 " names thread %" PRIu32 " of %zu", i,
			                 x->thread, nthreads);
		if (x->window >= nwindows)
			return codec_bad(r, at + 52,
			                 "sample %" PRIu64 " names window %" PRIu32 " of %zu", i,
			                 x->window, nwindows);
		if (wins[x->window].thread != x->thread)
			return codec_bad(r, at + 48,
			                 "sample %" PRIu64 ": thread %" PRIu32
			                 " differs from its window's %" PRIu32,
			                 i, x->thread, wins[x->window].thread);
		if (x->kind > LOMAS_REF_STORE)
			return codec_bad(r, at + 56, "sample %" PRIu64 ": bad kind %u", i, x->kind);
		if (x->state > LOMAS_SAMPLE_CENSORED)
			return codec_bad(r, at + 57, "sample %" PRIu64 ": bad state %u", i,
			                 x->state);
		if (!weight_valid(x->weight))
			return codec_bad(r, at + 40,
			                 "sample %" PRIu64 ": weight %g is not within 2^-64..2^64",
			                 i, x->weight);
		if (x->state != LOMAS_SAMPLE_DANGLING && x->end <= x->start)
			return codec_bad(r, at + 8,
			                 "sample %" PRIu64 ": end %" PRIu64
			                 " not after start %" PRIu64,
			                 i, x->end, x->start);
	}
	p->samples.n = count;
	return LOMAS_OK;
}

/*
 * EXACTSD (2.2): u64 count (the number of samples), then a varint per
 * sample in sample order: 0 when it has no exact stack distance, else the
 * distance + 1 (at most 2^32), only for a reused sample.
 */
static lomas_status decode_exactsd(const reader *r, const section *s, lomas_profile *p)
{
	const uint8_t *q = r->b + s->off + 8, *end = r->b + s->off + s->len;
	uint64_t count;
	if (s->len < 8)
		return codec_bad(r, s->off,
		                 "section EXACTSD length %" PRIu64 " is shorter than its count",
		                 s->len);
	count = rd64(r->b + s->off);
	if (count != p->samples.n)
		return codec_bad(r, s->off,
		                 "section EXACTSD count %" PRIu64 " is not the %zu samples", count,
		                 p->samples.n);
	for (size_t i = 0; i < p->samples.n; i++) {
		lomas_sample *x = &p->samples.items[i];
		uint64_t at = (uint64_t)(q - r->b), v;
		if (!(q = get_varint(q, end, &v)))
			return codec_bad(r, at,
			                 "sample %zu: exact distance runs past section EXACTSD or "
			                 "is a malformed varint",
			                 i);
		if (v == 0)
			continue;
		if (v - 1 > UINT32_MAX)
			return codec_bad(
			    r, at, "sample %zu: exact distance %" PRIu64 " above 2^32-1", i, v - 1);
		if (x->state != LOMAS_SAMPLE_REUSED)
			return codec_bad(r, at, "sample %zu: an exact distance, but not reused", i);
		x->flags |= LOMAS_SAMPLE_EXACT_SD;
		x->reserved = (uint32_t)(v - 1);
	}
	if (q != end)
		return codec_bad(r, (uint64_t)(q - r->b),
		                 "%" PRIu64 " unused bytes at the end of section EXACTSD",
		                 (uint64_t)(end - q));
	return LOMAS_OK;
}

/* Read the header and section table into secs[SEC_KNOWN]. */
static lomas_status read_table(const reader *r, section *secs)
{
	uint32_t version, major, flags, nsec, tcrc, crc;
	uint64_t toff;
	if (r->len < PF_HEADER_SIZE) {
		if (r->len >= 8 && memcmp(r->b, PF_MAGIC, 8) != 0)
			return codec_bad(r, 0, "not a lomas profile (bad magic)");
		return codec_bad(r, r->len, "file of %zu bytes ends inside the %u-byte header",
		                 r->len, PF_HEADER_SIZE);
	}
	if (memcmp(r->b, PF_MAGIC, 8) != 0)
		return codec_bad(r, 0, "not a lomas profile (bad magic)");
	version = rd32(r->b + 8);
	if (version >> 16 > PF_MAJOR)
		return codec_bad(r, 8,
		                 "format version %u.%u is newer than this reader (%u.%u); "
		                 "a newer liblomas is needed",
		                 version >> 16, version & 0xffff, PF_MAJOR, PF_MINOR_EXACTSD);
	if (version >> 16 < PF_OLDEST_MAJOR)
		return codec_bad(r, 8, "unsupported format version %u.%u", version >> 16,
		                 version & 0xffff);
	major = version >> 16;
	flags = rd32(r->b + 12);
	if (flags != 0)
		return codec_bad(r, 12, "unknown header flags 0x%" PRIx32, flags);
	nsec = rd32(r->b + 16);
	tcrc = rd32(r->b + 20);
	toff = rd64(r->b + 24);
	if (toff > r->len || (uint64_t)nsec * PF_ENTRY_SIZE > r->len - toff)
		return codec_bad(r, 24,
		                 "section table (%" PRIu32 " entries at offset %" PRIu64
		                 ") extends past the end of the file (%zu bytes)",
		                 nsec, toff, r->len);
	crc = crc32_update(0, r->b + toff, (size_t)nsec * PF_ENTRY_SIZE);
	if (crc != tcrc)
		return codec_bad(r, 20,
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
			return codec_bad(r, e + 8,
			                 "section %s (type %" PRIu32 ") at offset %" PRIu64
			                 " length %" PRIu64
			                 " extends past the end of the file (%zu bytes)",
			                 nm, type, off, len, r->len);
		if (crc32_update(0, r->b + off, (size_t)len) != scrc)
			return codec_bad(r, off, "section %s (type %" PRIu32 ") CRC mismatch", nm,
			                 type);
		if (type == 0 || type >= SEC_KNOWN || (major < 2 && type == SEC_PSAMPLES) ||
		    (type == SEC_BUILDIDS && (version < (2u << 16 | PF_MINOR_BUILDIDS))) ||
		    (type == SEC_EXACTSD && (version < (2u << 16 | PF_MINOR_EXACTSD))))
			continue; /* unknown: skipped (a newer minor version's addition) */
		if (sflags != 0)
			return codec_bad(r, e + 4, "section %s has unknown flags 0x%" PRIx32, nm,
			                 sflags);
		if (secs[type].present)
			return codec_bad(
			    r, e,
			    "duplicate section %s (first in table entry at offset %" PRIu64 ")", nm,
			    secs[type].entry);
		secs[type].present = true;
		secs[type].entry = e;
		secs[type].off = off;
		secs[type].len = len;
	}
	{
		static const int required[] = {SEC_PROFILE, SEC_THREADS, SEC_WINDOWS};
		for (size_t i = 0; i < sizeof required / sizeof required[0]; i++)
			if (!secs[required[i]].present)
				return codec_bad(r, toff, "required section %s is missing",
				                 sec_names[required[i]]);
	}
	/* The samples: SAMPLES in 1.x; SAMPLES or PSAMPLES, not both, from 2.0. */
	if (secs[SEC_SAMPLES].present && secs[SEC_PSAMPLES].present)
		return codec_bad(r, secs[SEC_PSAMPLES].entry,
		                 "sections SAMPLES and PSAMPLES both present");
	if (!secs[SEC_SAMPLES].present && !secs[SEC_PSAMPLES].present)
		return codec_bad(r, toff, "required section %s is missing",
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
		return codec_bad(&r, ps->off, "section PROFILE length %" PRIu64 " is not %u",
		                 ps->len, PF_PROFILE_SIZE);
	line_size = rd32(r.b + ps->off);
	if (!line_size_valid(line_size))
		return codec_bad(&r, ps->off,
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
	    (secs[SEC_BUILDIDS].present && (st = decode_buildids(&r, &secs[SEC_BUILDIDS], p))) ||
	    (secs[SEC_EXACTSD].present && (st = decode_exactsd(&r, &secs[SEC_EXACTSD], p))))
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

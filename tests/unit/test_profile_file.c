/*
 * Unit tests for the profile file (lib/core/profile_encode.c, profile_decode.c,
 * profile_pack.c, profile_window_index.c, profile_file.c):
 * round trips, every truncation, byte flips, hand-built malformed files,
 * atomic save and its failure modes.
 *
 * Hand-built files come from a small independent writer in this file (put32,
 * put64, build_file) that follows docs/profile-format.md, not the library's
 * encoder. Set LOMAS_FUZZ_CORPUS_DIR to write the fuzz seed files there.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/core.h"
#include "profile_asserts.h"

/* ------------------------------------------------------------ fixtures */

static char tmpdir[256];

static int setup_dir(void **state)
{
	(void)state;
	snprintf(tmpdir, sizeof tmpdir, "/tmp/lomas-pfile-XXXXXX");
	return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown_dir(void **state)
{
	char cmd[300];
	(void)state;
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
	return system(cmd) == 0 ? 0 : -1;
}

static void path_in(char *buf, size_t n, const char *name)
{
	snprintf(buf, n, "%s/%s", tmpdir, name);
}

/* A profile with every field set: 3 threads, 4 windows, samples of all states. */
static lomas_profile *make_full(void)
{
	lomas_profile *p;
	static const uint32_t win_thread[4] = {0, 0, 1, 2};
	assert_int_equal(lomas_profile_new(128, &p), LOMAS_OK);
	for (uint32_t t = 0; t < 3; t++) {
		lomas_thread th = {.tid = 1000 + t * 7, .refs = 100000 + t};
		assert_int_equal(profile_add_thread(p, &th), LOMAS_OK);
	}
	for (uint32_t w = 0; w < 4; w++) {
		lomas_window win = {.start = w * 5000, .refs = 5000 + w, .thread = win_thread[w]};
		assert_int_equal(profile_add_window(p, &win), LOMAS_OK);
	}
	for (uint32_t i = 0; i < 30; i++) {
		lomas_sample s = {0};
		s.window = i % 4;
		s.thread = win_thread[s.window];
		s.start = 100 + i * 37;
		s.state = (uint8_t)(i % 3);
		s.end = s.state == LOMAS_SAMPLE_DANGLING ? LOMAS_CLOCK_NONE : s.start + 1 + i * i;
		s.addr = 0x7f0000001000ull + i * 0x48;
		s.start_pc = 0x401000 + i;
		s.end_pc = s.state == LOMAS_SAMPLE_REUSED ? 0x402000 + i : 0;
		s.weight = 100.0 + i / 3.0;
		s.kind = (uint8_t)(i % 2);
		s.flags = i % 5 == 0 ? LOMAS_SAMPLE_CROSS_THREAD : 0;
		assert_int_equal(profile_add_sample(p, &s), LOMAS_OK);
	}
	assert_int_equal(lomas_profile_meta_set(p, "command", "./a.out \"quoted\" back\\slash"),
	                 LOMAS_OK);
	assert_int_equal(
	    lomas_profile_meta_set(p, "odd", "new\nline\ttab \xc3\xa9t\xc3\xa9 \xe2\x82\xac"),
	    LOMAS_OK);
	assert_int_equal(lomas_profile_meta_set(p, "empty", ""), LOMAS_OK);
	assert_int_equal(lomas_profile_meta_set(p, "clock", "trace"), LOMAS_OK);
	assert_int_equal(profile_set_calib(p, "step.fault", 1234.5), LOMAS_OK);
	assert_int_equal(profile_set_calib(p, "step.nan", NAN), LOMAS_OK);
	assert_int_equal(profile_set_calib(p, "neg", -0.125), LOMAS_OK);
	prof_map m1 = {
	    .start = 0x400000, .end = 0x401000, .offset = 0, .prot = 5, .path = "/usr/bin/a out"};
	prof_map m2 = {.start = 0x7f0000000000,
	               .end = 0x7f0000100000,
	               .offset = 0x2000,
	               .prot = 3,
	               .path = ""};
	assert_int_equal(profile_add_map(p, &m1), LOMAS_OK);
	assert_int_equal(profile_add_map(p, &m2), LOMAS_OK);
	return p;
}

/*
 * A profile whose samples can all be packed (PSAMPLES): each sample in the
 * window its start falls in, weights a power-of-two multiple of the first of
 * their run, only the cross-thread flag; 3 threads, windows out of start
 * order in the array, extreme deltas (addresses and pcs near 0 and 2^64),
 * runs of weights that force new blocks.
 */
static lomas_profile *make_packable(void)
{
	lomas_profile *p;
	static const uint64_t wstart[6] = {0, 40000, 20000, 0, 0, 7};
	static const uint32_t wthread[6] = {0, 0, 0, 1, 2, 2};
	assert_int_equal(lomas_profile_new(64, &p), LOMAS_OK);
	for (uint32_t t = 0; t < 3; t++) {
		lomas_thread th = {.tid = 500 + t, .refs = 60000};
		assert_int_equal(profile_add_thread(p, &th), LOMAS_OK);
	}
	for (uint32_t w = 0; w < 6; w++) {
		lomas_window win = {.start = wstart[w], .refs = 20000, .thread = wthread[w]};
		assert_int_equal(profile_add_window(p, &win), LOMAS_OK);
	}
	for (uint32_t i = 0; i < 400; i++) {
		lomas_sample s = {0};
		s.thread = i < 300 ? 0 : i < 350 ? 1 : 2;
		s.start = s.thread == 0 ? (uint64_t)(i * 7919) % 59999 : (uint64_t)(i % 50) * 3;
		s.window = s.thread == 1      ? 3
		           : s.thread == 2    ? (s.start >= 7 ? 5 : 4)
		           : s.start >= 40000 ? 1
		           : s.start >= 20000 ? 2
		                              : 0;
		s.state = (uint8_t)(i % 3);
		s.end = s.state == LOMAS_SAMPLE_DANGLING ? LOMAS_CLOCK_NONE
		        : i % 17 == 0                    ? UINT64_MAX - 1
		                                         : s.start + 1 + (uint64_t)i * i * i;
		s.addr = i % 11 == 0   ? UINT64_MAX - i
		         : i % 13 == 0 ? i
		                       : 0x7f0000001000ull + i * 0x48;
		s.start_pc = i % 7 == 0 ? UINT64_MAX - 3 : 0x401000 + i;
		s.end_pc = s.state == LOMAS_SAMPLE_REUSED ? (i % 5 ? 0x402000 + i : 1) : 0;
		/* 128, 256, 512 .. then a run at 96 x 2^k, then 1000. */
		s.weight = i < 200   ? ldexp(128.0, (int)(i % 5))
		           : i < 380 ? ldexp(96.0, (int)(i % 3))
		                     : 1000.0;
		s.kind = (uint8_t)(i % 2);
		s.flags = i % 5 == 0 ? LOMAS_SAMPLE_CROSS_THREAD : 0;
		assert_int_equal(profile_add_sample(p, &s), LOMAS_OK);
	}
	assert_int_equal(profile_validate(p), LOMAS_OK);
	assert_int_equal(lomas_profile_meta_set(p, "clock", "inline"), LOMAS_OK);
	return p;
}

/* Field-by-field equality of two profiles (reserved fields excluded). */
static void assert_same(const lomas_profile *a, const lomas_profile *b)
{
	assert_int_equal(a->line_size, b->line_size);
	assert_same_threads_windows_samples(a, b);
	assert_int_equal(a->meta.n, b->meta.n);
	for (size_t i = 0; i < a->meta.n; i++) {
		assert_string_equal(a->meta.items[i].key, b->meta.items[i].key);
		assert_string_equal(a->meta.items[i].value, b->meta.items[i].value);
	}
	assert_int_equal(a->calib.n, b->calib.n);
	for (size_t i = 0; i < a->calib.n; i++) {
		assert_string_equal(a->calib.items[i].key, b->calib.items[i].key);
		assert_true(same_bits(a->calib.items[i].value, b->calib.items[i].value));
	}
	assert_int_equal(a->maps.n, b->maps.n);
	for (size_t i = 0; i < a->maps.n; i++) {
		assert_int_equal(a->maps.items[i].start, b->maps.items[i].start);
		assert_int_equal(a->maps.items[i].end, b->maps.items[i].end);
		assert_int_equal(a->maps.items[i].offset, b->maps.items[i].offset);
		assert_int_equal(a->maps.items[i].prot, b->maps.items[i].prot);
		assert_string_equal(a->maps.items[i].path, b->maps.items[i].path);
	}
}

static void encode(const lomas_profile *p, uint8_t **buf, size_t *len)
{
	void *d;
	assert_int_equal(profile_save_buffer(p, &d, len), LOMAS_OK);
	*buf = d;
}

static void write_file(const char *path, const void *data, size_t len)
{
	FILE *f = fopen(path, "wb");
	assert_non_null(f);
	assert_int_equal(fwrite(data, 1, len, f), len);
	assert_int_equal(fclose(f), 0);
}

/* Read a whole file into a malloc'd buffer. */
static uint8_t *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	uint8_t *b;
	long n;
	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	b = malloc((size_t)n + 1);
	assert_non_null(b);
	assert_int_equal(fread(b, 1, (size_t)n, f), (size_t)n);
	fclose(f);
	*len = (size_t)n;
	return b;
}

/* The file saved at path holds exactly profile_save_buffer's image of p (the
 * file is encoded straight to disk, 64 KiB at a time, not from that image). */
static void assert_file_is_image(const char *path, const lomas_profile *p)
{
	uint8_t *img, *file;
	size_t ilen, flen;
	encode(p, &img, &ilen);
	file = read_file(path, &flen);
	assert_int_equal(flen, ilen);
	assert_memory_equal(file, img, ilen);
	free(file);
	free(img);
}

/* Number of entries in tmpdir whose name starts with prefix. */
static int count_prefixed(const char *prefix)
{
	DIR *d = opendir(tmpdir);
	struct dirent *e;
	int n = 0;
	assert_non_null(d);
	while ((e = readdir(d)))
		n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
	closedir(d);
	return n;
}

/* ------------------------------------------- an independent file builder */

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put64(uint8_t *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

typedef struct tsec {
	uint32_t type;
	const uint8_t *data;
	size_t len;
} tsec;

typedef struct tbuf {
	uint8_t *b;
	size_t len;
} tbuf;

/*
 * A file of the given sections: header, table right after it, payloads
 * packed in order (no padding). Version 1.0, correct CRCs.
 */
static tbuf build_file(const tsec *secs, size_t n)
{
	tbuf t;
	size_t pos = 32 + 32 * n;
	t.len = pos;
	for (size_t i = 0; i < n; i++)
		t.len += secs[i].len;
	t.b = calloc(1, t.len);
	assert_non_null(t.b);
	memcpy(t.b, "LOMASPRF", 8);
	put32(t.b + 8, 0x00010000);
	put32(t.b + 16, (uint32_t)n);
	put64(t.b + 24, 32);
	for (size_t i = 0; i < n; i++) {
		uint8_t *e = t.b + 32 + 32 * i;
		if (secs[i].len)
			memcpy(t.b + pos, secs[i].data, secs[i].len);
		put32(e, secs[i].type);
		put64(e + 8, pos);
		put64(e + 16, secs[i].len);
		put32(e + 24, crc32_update(0, secs[i].data, secs[i].len));
		pos += secs[i].len;
	}
	put32(t.b + 20, crc32_update(0, t.b + 32, 32 * n));
	return t;
}

/* Recompute the table CRC after editing the table of a build_file result. */
static void fix_table_crc(tbuf *t)
{
	uint32_t n = t->b[16] | t->b[17] << 8;
	put32(t->b + 20, crc32_update(0, t->b + 32, 32 * (size_t)n));
}

/* Payloads of a minimal valid profile: 1 thread, 1 window, 2 samples. */
static uint8_t pay_profile[8], pay_threads[8 + 16], pay_windows[8 + 24], pay_samples[8 + 128];
static uint8_t pay_meta[4 + 4 + 3 + 4 + 5];

static void make_payloads(void)
{
	memset(pay_profile, 0, sizeof pay_profile);
	put32(pay_profile, 64);
	memset(pay_threads, 0, sizeof pay_threads);
	put64(pay_threads, 1);
	put64(pay_threads + 8, 42);    /* tid */
	put64(pay_threads + 16, 1000); /* refs */
	memset(pay_windows, 0, sizeof pay_windows);
	put64(pay_windows, 1);
	put64(pay_windows + 8, 0);
	put64(pay_windows + 16, 1000);
	put32(pay_windows + 24, 0);
	memset(pay_samples, 0, sizeof pay_samples);
	put64(pay_samples, 2);
	for (int i = 0; i < 2; i++) {
		uint8_t *r = pay_samples + 8 + 64 * i;
		double w = 10.0;
		uint64_t wb;
		memcpy(&wb, &w, 8);
		put64(r, 5 + (uint64_t)i);        /* start */
		put64(r + 8, i ? UINT64_MAX : 9); /* end */
		put64(r + 16, 0x1000);            /* addr */
		put64(r + 40, wb);                /* weight */
		r[57] = i ? LOMAS_SAMPLE_DANGLING : LOMAS_SAMPLE_REUSED;
		r[56] = LOMAS_REF_STORE;
	}
	put32(pay_meta, 1);
	put32(pay_meta + 4, 3);
	memcpy(pay_meta + 8, "cpu", 3);
	put32(pay_meta + 11, 5);
	memcpy(pay_meta + 15, "x86-6", 5);
}

/* The four required sections (+ META) in a mutable copy. */
static tbuf minimal_file(void)
{
	make_payloads();
	tsec s[] = {{2, pay_profile, sizeof pay_profile},
	            {4, pay_threads, sizeof pay_threads},
	            {5, pay_windows, sizeof pay_windows},
	            {6, pay_samples, sizeof pay_samples},
	            {1, pay_meta, sizeof pay_meta}};
	return build_file(s, 5);
}

/*
 * PSAMPLES by hand (docs/profile-format.md, format 2.0): a byte writer with
 * its own LEB128 varints, blocks of records.
 */
typedef struct pbuf {
	uint8_t b[512];
	size_t n;
} pbuf;

static void pb_byte(pbuf *p, uint8_t v)
{
	assert_true(p->n < sizeof p->b);
	p->b[p->n++] = v;
}

static void pb_varint(pbuf *p, uint64_t v)
{
	do {
		pb_byte(p, (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0)));
		v >>= 7;
	} while (v);
}

static uint64_t zz(int64_t d)
{
	return d < 0 ? ((uint64_t)(-(d + 1)) << 1) | 1 : (uint64_t)d << 1;
}

/* A block header: thread, floor, base, records, bytes. */
static void pb_block(pbuf *p, uint32_t thread, uint32_t floor, double base, uint64_t n,
                     uint64_t len)
{
	uint64_t wb;
	assert_true(p->n + 32 <= sizeof p->b);
	memcpy(&wb, &base, 8);
	put32(p->b + p->n, thread);
	put32(p->b + p->n + 4, floor);
	put64(p->b + p->n + 8, wb);
	put64(p->b + p->n + 16, n);
	put64(p->b + p->n + 24, len);
	p->n += 32;
}

/*
 * One thread of 1000 references, windows [0, 500) and [500, 1000), and a
 * PSAMPLES section of 3 samples in one block (floor 1, base 10):
 *   start 5, end 9, addr 0x1000, pcs 0x400 -> 0x404, store, reused, level 0
 *   start 600, dangling, same addr and pc, load, cross-thread, level 3
 *   start 550, end 700, addr 0x1040, censored, level 1
 * Offsets of interest into the payload: rec[i] (each record's first byte).
 */
static uint8_t pay_windows2[8 + 48];
static pbuf pay_psamples;
static size_t rec[3];

static void make_psamples(void)
{
	pbuf *p = &pay_psamples;
	size_t body;
	make_payloads();
	memset(pay_windows2, 0, sizeof pay_windows2);
	put64(pay_windows2, 2);
	put64(pay_windows2 + 8 + 8, 500);
	put64(pay_windows2 + 32, 500);
	put64(pay_windows2 + 32 + 8, 500);
	memset(p, 0, sizeof *p);
	put64(p->b, 3);
	p->n = 8;
	pb_block(p, 0, 1, 10.0, 3, 0);
	body = p->n;
	rec[0] = p->n;
	pb_varint(p, zz(5));
	pb_varint(p, zz(4) + 1);
	pb_varint(p, zz(0x1000));
	pb_varint(p, zz(0x400));
	pb_varint(p, zz(4));
	pb_byte(p, LOMAS_REF_STORE | LOMAS_SAMPLE_REUSED << 4);
	pb_byte(p, 0);
	rec[1] = p->n;
	pb_varint(p, zz(595));
	pb_varint(p, 0);
	pb_varint(p, 0);
	pb_varint(p, 0);
	pb_varint(p, 0);
	pb_byte(p, LOMAS_REF_LOAD | 0x4 | LOMAS_SAMPLE_DANGLING << 4);
	pb_byte(p, 3);
	rec[2] = p->n;
	pb_varint(p, zz(-50));
	pb_varint(p, zz(150) + 1);
	pb_varint(p, zz(0x40));
	pb_varint(p, 0);
	pb_varint(p, 0);
	pb_byte(p, LOMAS_SAMPLE_CENSORED << 4);
	pb_byte(p, 1);
	put64(p->b + 8 + 24, p->n - body);
}

/* A 2.0 file of the hand-built PSAMPLES payload (maybe edited: data, len). */
static tbuf psamples_file(const uint8_t *data, size_t len)
{
	tsec s[] = {{2, pay_profile, sizeof pay_profile},
	            {4, pay_threads, sizeof pay_threads},
	            {5, pay_windows2, sizeof pay_windows2},
	            {8, data, len}};
	tbuf t = build_file(s, 4);
	put32(t.b + 8, 0x00020000);
	return t;
}

/* The section type of table entry i of an encoded image. */
static uint32_t entry_type(const uint8_t *b, size_t i)
{
	const uint8_t *e = b + 32 + 32 * i;
	return (uint32_t)e[0] | (uint32_t)e[1] << 8;
}

/* Is there a table entry of type t? */
static bool has_section(const uint8_t *b, uint32_t t)
{
	uint32_t n = b[16] | b[17] << 8;
	for (uint32_t i = 0; i < n; i++)
		if (entry_type(b, i) == t)
			return true;
	return false;
}

/* Loading t must fail with EFORMAT and a message containing needle and "offset". */
static void expect_format(const tbuf *t, const char *needle)
{
	lomas_profile *p = (lomas_profile *)1;
	assert_int_equal(profile_load_buffer(t->b, t->len, "x.lomas", &p), LOMAS_EFORMAT);
	assert_null(p);
	if (!strstr(lomas_error_message(), needle) || !strstr(lomas_error_message(), "offset"))
		fail_msg("message '%s' lacks '%s'", lomas_error_message(), needle);
	assert_non_null(strstr(lomas_error_message(), "x.lomas: offset "));
}

/* ------------------------------------------------------------------ tests */

static void test_roundtrip_buffer(void **state)
{
	lomas_profile *p = make_full(), *q;
	uint8_t *b;
	size_t len;
	(void)state;
	encode(p, &b, &len);
	assert_memory_equal(b, "LOMASPRF", 8);
	assert_int_equal(profile_load_buffer(b, len, "mem", &q), LOMAS_OK);
	assert_same(p, q);
	lomas_profile_free(q);
	free(b);
	lomas_profile_free(p);
}

/* A packable profile goes to PSAMPLES (format 2.0), in 12-20 bytes a sample
 * here, and round-trips exactly; an unpackable one (make_full: samples
 * outside the window their start falls in) goes to SAMPLES, also exactly. */
static void test_packed_roundtrip(void **state)
{
	lomas_profile *p = make_packable(), *q, *f = make_full();
	uint8_t *b;
	size_t len;
	(void)state;
	encode(p, &b, &len);
	assert_int_equal(get64(b + 8) & 0xffffffff, 0x00020000);
	assert_true(has_section(b, 8));
	assert_false(has_section(b, 6));
	assert_true(len < 600 + 20 * p->samples.n);
	assert_int_equal(profile_load_buffer(b, len, "mem", &q), LOMAS_OK);
	assert_same(p, q);
	lomas_profile_free(q);
	free(b);
	encode(f, &b, &len);
	assert_true(has_section(b, 6));
	assert_false(has_section(b, 8));
	assert_int_equal(profile_load_buffer(b, len, "mem", &q), LOMAS_OK);
	assert_same(f, q);
	lomas_profile_free(q);
	free(b);
	/* One sample outside its window is enough for SAMPLES; so is an unknown flag. */
	p->samples.items[7].window = p->samples.items[7].window == 0 ? 2 : 0;
	encode(p, &b, &len);
	assert_true(has_section(b, 6));
	free(b);
	lomas_profile_free(f);
	lomas_profile_free(p);
	p = make_packable();
	p->samples.items[3].flags |= 0x8;
	encode(p, &b, &len);
	assert_true(has_section(b, 6));
	assert_int_equal(profile_load_buffer(b, len, "mem", &q), LOMAS_OK);
	assert_same(p, q);
	lomas_profile_free(q);
	free(b);
	lomas_profile_free(p);
}

/* The hand-built PSAMPLES file: windows from starts, weights from base,
 * floor and level, flags from the kind byte. */
static void test_psamples_handbuilt(void **state)
{
	lomas_profile *p;
	tbuf t;
	(void)state;
	make_psamples();
	t = psamples_file(pay_psamples.b, pay_psamples.n);
	assert_int_equal(profile_load_buffer(t.b, t.len, "x", &p), LOMAS_OK);
	assert_int_equal(p->samples.n, 3);
	const lomas_sample *s = p->samples.items;
	assert_int_equal(s[0].start, 5);
	assert_int_equal(s[0].end, 9);
	assert_int_equal(s[0].addr, 0x1000);
	assert_int_equal(s[0].start_pc, 0x400);
	assert_int_equal(s[0].end_pc, 0x404);
	assert_int_equal(s[0].kind, LOMAS_REF_STORE);
	assert_int_equal(s[0].state, LOMAS_SAMPLE_REUSED);
	assert_int_equal(s[0].window, 0);
	assert_true(s[0].weight == 20.0); /* level 0 below the floor 1 */
	assert_int_equal(s[0].flags, 0);
	assert_int_equal(s[1].start, 600);
	assert_int_equal(s[1].end, LOMAS_CLOCK_NONE);
	assert_int_equal(s[1].state, LOMAS_SAMPLE_DANGLING);
	assert_int_equal(s[1].kind, LOMAS_REF_LOAD);
	assert_int_equal(s[1].flags, LOMAS_SAMPLE_CROSS_THREAD);
	assert_int_equal(s[1].window, 1);
	assert_true(s[1].weight == 80.0);
	assert_int_equal(s[2].start, 550);
	assert_int_equal(s[2].end, 700);
	assert_int_equal(s[2].addr, 0x1040);
	assert_int_equal(s[2].end_pc, 0x400);
	assert_int_equal(s[2].state, LOMAS_SAMPLE_CENSORED);
	assert_int_equal(s[2].window, 1);
	assert_true(s[2].weight == 20.0);
	lomas_profile_free(p);
	/* 1.x knows no type 8: there it is skipped, and SAMPLES is required. */
	put32(t.b + 8, 0x00010000);
	expect_format(&t, "required section SAMPLES is missing");
	free(t.b);
	make_psamples();
	{
		tsec sec[] = {{2, pay_profile, sizeof pay_profile},
		              {4, pay_threads, sizeof pay_threads},
		              {5, pay_windows, sizeof pay_windows},
		              {6, pay_samples, sizeof pay_samples},
		              {8, pay_psamples.b, pay_psamples.n}};
		t = build_file(sec, 5);
		assert_int_equal(profile_load_buffer(t.b, t.len, "x", &p), LOMAS_OK);
		assert_int_equal(p->samples.n, 2); /* SAMPLES' */
		lomas_profile_free(p);
		put32(t.b + 8, 0x00020000);
		expect_format(&t, "sections SAMPLES and PSAMPLES both present");
		free(t.b);
	}
	{
		tsec sec[] = {{2, pay_profile, sizeof pay_profile},
		              {4, pay_threads, sizeof pay_threads},
		              {5, pay_windows, sizeof pay_windows}};
		t = build_file(sec, 3);
		put32(t.b + 8, 0x00020000);
		expect_format(&t, "required section PSAMPLES (or SAMPLES) is missing");
		free(t.b);
	}
}

/* Edit a copy of the hand-built PSAMPLES payload and expect the message. */
static void psamples_bad(void (*edit)(pbuf *), const char *needle)
{
	pbuf c;
	tbuf t;
	make_psamples();
	c = pay_psamples;
	edit(&c);
	t = psamples_file(c.b, c.n);
	expect_format(&t, needle);
	free(t.b);
}

static void e_count_big(pbuf *c)
{
	put64(c->b, c->n);
}
static void e_count_more(pbuf *c)
{
	put64(c->b, 4);
}
static void e_count_less(pbuf *c)
{
	put64(c->b, 2);
}
static void e_short_header(pbuf *c)
{
	c->n = 8 + 31;
}
static void e_thread(pbuf *c)
{
	put32(c->b + 8, 1);
}
static void e_floor(pbuf *c)
{
	put32(c->b + 12, 256);
}
static void e_base(pbuf *c)
{
	double w = -2.0;
	uint64_t wb;
	memcpy(&wb, &w, 8);
	put64(c->b + 16, wb);
}
static void e_block_len(pbuf *c)
{
	put64(c->b + 32, c->n);
}
static void e_record_past_block(pbuf *c)
{
	put64(c->b + 32, get64(c->b + 32) - 1); /* the last record's level byte outside */
	c->n--;
}
static void e_overlong(pbuf *c)
{
	/* The first record's start: 11 continuation bytes. */
	memmove(c->b + rec[0] + 10, c->b + rec[0], c->n - rec[0]);
	for (int i = 0; i < 11; i++)
		c->b[rec[0] + i] = 0x80;
	c->n += 10;
	put64(c->b + 32, get64(c->b + 32) + 10);
}
static void e_tenth_byte(pbuf *c)
{
	/* A tenth byte above 1 (more than 64 bits), ending the varint. */
	memmove(c->b + rec[0] + 9, c->b + rec[0] + 1, c->n - rec[0] - 1);
	for (int i = 0; i < 9; i++)
		c->b[rec[0] + i] = 0xff;
	c->b[rec[0] + 9] = 2;
	c->n += 9;
	put64(c->b + 32, get64(c->b + 32) + 9);
}
static void e_kind_reserved(pbuf *c)
{
	c->b[rec[1] - 2] |= 0x08;
}
static void e_kind(pbuf *c)
{
	c->b[rec[1] - 2] = 2;
}
static void e_state(pbuf *c)
{
	c->b[rec[1] - 2] = 3 << 4;
}
static void e_weight(pbuf *c)
{
	double w = 0x1p60;
	uint64_t wb;
	memcpy(&wb, &w, 8);
	put64(c->b + 16, wb);
	c->b[rec[2] - 1] = 200;
}
/* A base weight that is fine on its own but times 2^level is above 2^64. */
static void e_weight_above(pbuf *c)
{
	double w = 0x1p63;
	uint64_t wb;
	memcpy(&wb, &w, 8);
	put64(c->b + 16, wb);
}
/* Weights below 2^-64 (their squares would vanish in the model's sums). */
static void e_weight_tiny(pbuf *c)
{
	double w = 0x1p-70;
	uint64_t wb;
	memcpy(&wb, &w, 8);
	put64(c->b + 16, wb);
}
static void e_end(pbuf *c)
{
	c->b[rec[0] + 1] = 1; /* end = start + 0 */
}
static void e_unused(pbuf *c)
{
	put64(c->b + 32, get64(c->b + 32) + 1);
	c->b[c->n++] = 0;
}

/* Every malformed PSAMPLES section is refused with its offset. */
static void test_psamples_malformed(void **state)
{
	(void)state;
	psamples_bad(e_count_big, "count");
	psamples_bad(e_count_more, "disagrees with its 3 records");
	psamples_bad(e_count_less, "more samples than the count 2");
	psamples_bad(e_short_header, "block header runs past");
	psamples_bad(e_thread, "names thread 1 of 1");
	psamples_bad(e_floor, "floor 256");
	psamples_bad(e_base, "base weight");
	psamples_bad(e_block_len, "runs past the end of section PSAMPLES");
	psamples_bad(e_record_past_block, "sample 2: record runs past its block");
	psamples_bad(e_overlong, "sample 0: record runs past its block or has a malformed varint");
	psamples_bad(e_tenth_byte, "malformed varint");
	psamples_bad(e_kind_reserved, "sample 0: bad kind byte 0x09");
	psamples_bad(e_kind, "sample 0: bad kind byte 0x02");
	psamples_bad(e_state, "sample 0: bad state 3");
	psamples_bad(e_weight, "sample 1: weight 1.15292e+18 x 2^200 is not within 2^-64..2^64");
	psamples_bad(e_weight_above, "sample 1: weight 9.22337e+18 x 2^3 is not within");
	psamples_bad(e_weight_tiny, "sample 0: weight 8.47033e-22 x 2^1 is not within");
	psamples_bad(e_end, "sample 0: end 5 not after start 5");
	psamples_bad(e_unused, "1 unused bytes at the end of a sample block");
	{
		/* No window of the thread starts at or before a sample's start. */
		tbuf t;
		make_psamples();
		put64(pay_windows2 + 8, 10); /* the first window starts at 10 */
		t = psamples_file(pay_psamples.b, pay_psamples.n);
		expect_format(&t,
		              "sample 0: no window of thread 0 starts at or before its start 5");
		free(t.b);
	}
}

static void test_roundtrip_file(void **state)
{
	lomas_profile *p = make_full(), *q, *e;
	char path[512];
	(void)state;
	path_in(path, sizeof path, "full.lomas");
	assert_int_equal(lomas_profile_save(p, path), LOMAS_OK);
	assert_file_is_image(path, p);
	assert_int_equal(lomas_profile_load(path, &q), LOMAS_OK);
	assert_same(p, q);
	lomas_profile_free(q);
	/* An empty profile round-trips too. */
	assert_int_equal(lomas_profile_new(8, &e), LOMAS_OK);
	assert_int_equal(lomas_profile_save(e, path), LOMAS_OK);
	assert_int_equal(lomas_profile_load(path, &q), LOMAS_OK);
	assert_same(e, q);
	lomas_profile_free(q);
	lomas_profile_free(e);
	lomas_profile_free(p);
	assert_int_equal(count_prefixed("full.lomas."), 0);
}

static void test_minimal_handbuilt(void **state)
{
	tbuf t = minimal_file();
	lomas_profile *p;
	const char *v;
	(void)state;
	assert_int_equal(profile_load_buffer(t.b, t.len, "x", &p), LOMAS_OK);
	assert_int_equal(p->line_size, 64);
	assert_int_equal(p->threads.n, 1);
	assert_int_equal(p->threads.items[0].tid, 42);
	assert_int_equal(p->samples.n, 2);
	assert_int_equal(p->samples.items[0].end, 9);
	assert_int_equal(p->samples.items[1].end, UINT64_MAX);
	assert_int_equal(p->samples.items[1].state, LOMAS_SAMPLE_DANGLING);
	assert_int_equal(p->samples.items[0].kind, LOMAS_REF_STORE);
	assert_int_equal(lomas_profile_meta_get(p, "cpu", &v), LOMAS_OK);
	assert_string_equal(v, "x86-6");
	lomas_profile_free(p);
	free(t.b);
}

static void truncations(lomas_profile *p)
{
	lomas_profile *q;
	uint8_t *b;
	size_t len;
	encode(p, &b, &len);
	for (size_t n = 0; n < len; n++) {
		uint8_t *c = malloc(n ? n : 1); /* exact size so ASan sees any overread */
		memcpy(c, b, n);
		q = (lomas_profile *)1;
		assert_int_equal(profile_load_buffer(c, n, "t.lomas", &q), LOMAS_EFORMAT);
		assert_null(q);
		if (!strstr(lomas_error_message(), "offset"))
			fail_msg("truncated at %zu: '%s'", n, lomas_error_message());
		free(c);
	}
	free(b);
	lomas_profile_free(p);
}

/* Every truncation of both encodings is refused (SAMPLES and PSAMPLES). */
static void test_truncation(void **state)
{
	(void)state;
	truncations(make_full());
	truncations(make_packable());
}

static void byte_flips(lomas_profile *p)
{
	lomas_profile *q;
	uint8_t *b;
	size_t len, ok = 0;
	static const uint8_t masks[] = {0x01, 0x80, 0xff};
	encode(p, &b, &len);
	for (size_t i = 0; i < len; i++) {
		for (size_t m = 0; m < sizeof masks; m++) {
			uint8_t *c = malloc(len);
			lomas_status st;
			memcpy(c, b, len);
			c[i] ^= masks[m];
			st = profile_load_buffer(c, len, "f.lomas", &q);
			if (st == LOMAS_OK) {
				assert_same(p, q); /* only an unused byte may be flipped */
				lomas_profile_free(q);
				ok++;
			} else {
				assert_int_equal(st, LOMAS_EFORMAT);
				assert_non_null(strstr(lomas_error_message(), "offset"));
			}
			free(c);
		}
	}
	/* Only padding and the minor version are unchecked: a few bytes, not many. */
	assert_true(ok < 3 * 64);
	free(b);
	lomas_profile_free(p);
}

static void test_byte_flips(void **state)
{
	(void)state;
	byte_flips(make_full());
	byte_flips(make_packable());
}

static void test_unknown_section_skipped(void **state)
{
	static const uint8_t junk[13] = "future stuff";
	lomas_profile *p;
	(void)state;
	make_payloads();
	tsec s[] = {{2, pay_profile, sizeof pay_profile}, {99, junk, sizeof junk},
	            {4, pay_threads, sizeof pay_threads}, {5, pay_windows, sizeof pay_windows},
	            {6, pay_samples, sizeof pay_samples}, {0x7fffffff, junk, 3}};
	tbuf t = build_file(s, 6);
	assert_int_equal(profile_load_buffer(t.b, t.len, "x", &p), LOMAS_OK);
	assert_int_equal(p->samples.n, 2);
	assert_int_equal(p->meta.n, 0);
	lomas_profile_free(p);
	free(t.b);
}

static void test_bad_header(void **state)
{
	tbuf t = minimal_file();
	(void)state;
	t.b[0] = 'X';
	expect_format(&t, "bad magic");
	t.b[0] = 'L';
	put32(t.b + 8, 0x00030000); /* 3.0 */
	expect_format(&t, "newer");
	put32(t.b + 8, 0x00020000); /* 2.0 with SAMPLES loads */
	{
		lomas_profile *p;
		assert_int_equal(profile_load_buffer(t.b, t.len, "x", &p), LOMAS_OK);
		lomas_profile_free(p);
	}
	put32(t.b + 8, 0x00000003); /* 0.3 */
	expect_format(&t, "version");
	put32(t.b + 8, 0x00010005); /* 1.5: a newer minor version still loads */
	{
		lomas_profile *p;
		assert_int_equal(profile_load_buffer(t.b, t.len, "x", &p), LOMAS_OK);
		lomas_profile_free(p);
	}
	put32(t.b + 12, 1);
	expect_format(&t, "flags");
	put32(t.b + 12, 0);
	put64(t.b + 24, UINT64_MAX - 16); /* table offset + size overflows */
	expect_format(&t, "section table");
	put64(t.b + 24, t.len - 40);
	expect_format(&t, "section table");
	put64(t.b + 24, 32);
	put32(t.b + 16, 0x7fffffff); /* count * 32 far past EOF */
	expect_format(&t, "section table");
	put32(t.b + 16, 5);
	t.b[20] ^= 1;
	expect_format(&t, "CRC");
	free(t.b);
}

static void test_bad_table_entries(void **state)
{
	tbuf t = minimal_file();
	uint8_t *e3 = t.b + 32 + 3 * 32; /* the SAMPLES entry */
	uint64_t off = get64(e3 + 8), len = get64(e3 + 16);
	(void)state;
	put64(e3 + 16, t.len - off + 1); /* one byte past EOF */
	fix_table_crc(&t);
	expect_format(&t, "past the end");
	put64(e3 + 16, UINT64_MAX - off + 10); /* off + len wraps around */
	fix_table_crc(&t);
	expect_format(&t, "past the end");
	put64(e3 + 8, UINT64_MAX - 4); /* offset itself past EOF */
	put64(e3 + 16, 8);
	fix_table_crc(&t);
	expect_format(&t, "past the end");
	put64(e3 + 8, off);
	put64(e3 + 16, len);
	put32(e3 + 4, 1); /* flags on a known section */
	fix_table_crc(&t);
	expect_format(&t, "flags");
	put32(e3 + 4, 0);
	put32(e3 + 24, get64(e3 + 24) ^ 1); /* section CRC */
	fix_table_crc(&t);
	expect_format(&t, "CRC mismatch");
	free(t.b);
}

static void test_duplicate_and_missing(void **state)
{
	(void)state;
	make_payloads();
	{
		tsec s[] = {{2, pay_profile, 8},
		            {4, pay_threads, sizeof pay_threads},
		            {5, pay_windows, sizeof pay_windows},
		            {6, pay_samples, sizeof pay_samples},
		            {4, pay_threads, sizeof pay_threads}};
		tbuf t = build_file(s, 5);
		expect_format(&t, "duplicate section THREADS");
		free(t.b);
	}
	{
		tsec s[] = {{2, pay_profile, 8},
		            {4, pay_threads, sizeof pay_threads},
		            {5, pay_windows, sizeof pay_windows}};
		tbuf t = build_file(s, 3);
		expect_format(&t, "required section SAMPLES is missing");
		free(t.b);
	}
	{
		tsec s[] = {{2, pay_profile, 8},
		            {4, pay_threads, sizeof pay_threads},
		            {5, pay_windows, sizeof pay_windows},
		            {6, pay_samples, sizeof pay_samples},
		            {1, pay_meta, sizeof pay_meta},
		            {1, pay_meta, sizeof pay_meta}};
		tbuf t = build_file(s, 6);
		expect_format(&t, "duplicate section META");
		free(t.b);
	}
}

/* Build the minimal file with one payload replaced. */
static tbuf with_payload(uint32_t type, const uint8_t *data, size_t len)
{
	make_payloads();
	tsec s[] = {{2, pay_profile, sizeof pay_profile},
	            {4, pay_threads, sizeof pay_threads},
	            {5, pay_windows, sizeof pay_windows},
	            {6, pay_samples, sizeof pay_samples},
	            {1, pay_meta, sizeof pay_meta}};
	for (size_t i = 0; i < 5; i++) {
		if (s[i].type == type) {
			s[i].data = data;
			s[i].len = len;
		}
	}
	return build_file(s, 5);
}

static void test_counts_and_lengths(void **state)
{
	uint8_t buf[256];
	tbuf t;
	(void)state;
	make_payloads();
	/* SAMPLES length 8 + 40: not a whole number of 64-byte records. */
	memcpy(buf, pay_samples, 48);
	t = with_payload(6, buf, 48);
	expect_format(&t, "section SAMPLES length 48 is not 8 plus a multiple of 64");
	free(t.b);
	/* SAMPLES count 3 with two records. */
	make_payloads();
	memcpy(buf, pay_samples, sizeof pay_samples);
	put64(buf, 3);
	t = with_payload(6, buf, sizeof pay_samples);
	expect_format(&t, "count 3 disagrees");
	free(t.b);
	/* THREADS count 0 with one record. */
	make_payloads();
	memcpy(buf, pay_threads, sizeof pay_threads);
	put64(buf, 0);
	t = with_payload(4, buf, sizeof pay_threads);
	expect_format(&t, "section THREADS count 0");
	free(t.b);
	/* PROFILE of the wrong size, and a bad line size. */
	t = with_payload(2, pay_profile, 4);
	expect_format(&t, "section PROFILE length 4");
	free(t.b);
	memcpy(buf, pay_profile, 8);
	put32(buf, 100);
	t = with_payload(2, buf, 8);
	expect_format(&t, "line size 100");
	free(t.b);
	/* META: a huge count, a string past the end, NUL, empty key, leftovers. */
	make_payloads();
	memcpy(buf, pay_meta, sizeof pay_meta);
	put32(buf, 0xffffffff);
	t = with_payload(1, buf, sizeof pay_meta);
	expect_format(&t, "count 4294967295 is too large");
	free(t.b);
	memcpy(buf, pay_meta, sizeof pay_meta);
	put32(buf + 11, 6); /* value length one past the section */
	t = with_payload(1, buf, sizeof pay_meta);
	expect_format(&t, "metadata value length 6 runs past");
	free(t.b);
	memcpy(buf, pay_meta, sizeof pay_meta);
	buf[9] = 0;
	t = with_payload(1, buf, sizeof pay_meta);
	expect_format(&t, "NUL");
	free(t.b);
	memcpy(buf, pay_meta, sizeof pay_meta);
	put32(buf + 4, 0); /* empty key, empty value */
	put32(buf + 8, 0);
	t = with_payload(1, buf, 12);
	expect_format(&t, "metadata key is empty");
	free(t.b);
	memcpy(buf, pay_meta, sizeof pay_meta);
	buf[sizeof pay_meta] = 'z';
	t = with_payload(1, buf, sizeof pay_meta + 1);
	expect_format(&t, "unused bytes");
	free(t.b);
	{
		/* Duplicate metadata keys. */
		uint8_t d[4 + 2 * 10];
		put32(d, 2);
		for (int i = 0; i < 2; i++) {
			put32(d + 4 + 10 * i, 1);
			d[8 + 10 * i] = 'k';
			put32(d + 9 + 10 * i, 1);
			d[13 + 10 * i] = (uint8_t)('a' + i);
		}
		t = with_payload(1, d, sizeof d);
		expect_format(&t, "duplicate metadata key 'k'");
		free(t.b);
	}
}

static void test_semantic_errors(void **state)
{
	uint8_t buf[256];
	tbuf t;
	double w;
	uint64_t wb;
	(void)state;
	make_payloads();
	memcpy(buf, pay_samples, sizeof pay_samples);
	put32(buf + 8 + 64 + 52, 1); /* second sample: window 1 of 1 */
	t = with_payload(6, buf, sizeof pay_samples);
	expect_format(&t, "sample 1 names window 1 of 1");
	/* The offset is the window field of the second record. */
	{
		char want[64];
		snprintf(want, sizeof want,
		         "offset %zu:", (size_t)get64(t.b + 32 + 3 * 32 + 8) + 8 + 64 + 52);
		assert_non_null(strstr(lomas_error_message(), want));
	}
	free(t.b);
	memcpy(buf, pay_samples, sizeof pay_samples);
	put32(buf + 8 + 48, 7);
	t = with_payload(6, buf, sizeof pay_samples);
	expect_format(&t, "sample 0 names thread 7 of 1");
	free(t.b);
	memcpy(buf, pay_windows, sizeof pay_windows);
	put32(buf + 8 + 16, 2);
	t = with_payload(5, buf, sizeof pay_windows);
	expect_format(&t, "window 0 names thread 2 of 1");
	free(t.b);
	memcpy(buf, pay_samples, sizeof pay_samples);
	buf[8 + 57] = 3;
	t = with_payload(6, buf, sizeof pay_samples);
	expect_format(&t, "bad state 3");
	free(t.b);
	memcpy(buf, pay_samples, sizeof pay_samples);
	buf[8 + 56] = 2;
	t = with_payload(6, buf, sizeof pay_samples);
	expect_format(&t, "bad kind 2");
	free(t.b);
	memcpy(buf, pay_samples, sizeof pay_samples);
	put64(buf + 8 + 8, 5); /* reused, end == start */
	t = with_payload(6, buf, sizeof pay_samples);
	expect_format(&t, "not after start");
	free(t.b);
	w = -1.0;
	memcpy(&wb, &w, 8);
	memcpy(buf, pay_samples, sizeof pay_samples);
	put64(buf + 8 + 40, wb);
	t = with_payload(6, buf, sizeof pay_samples);
	expect_format(&t, "weight");
	free(t.b);
	w = INFINITY;
	memcpy(&wb, &w, 8);
	put64(buf + 8 + 40, wb);
	t = with_payload(6, buf, sizeof pay_samples);
	expect_format(&t, "weight");
	free(t.b);
}

static void test_save_replaces_atomically(void **state)
{
	lomas_profile *p = make_full(), *q;
	char path[512];
	struct stat sb;
	(void)state;
	path_in(path, sizeof path, "replace.lomas");
	write_file(path, "old content", 11);
	assert_int_equal(chmod(path, 0640), 0);
	assert_int_equal(lomas_profile_save(p, path), LOMAS_OK);
	assert_int_equal(lomas_profile_load(path, &q), LOMAS_OK);
	assert_same(p, q);
	lomas_profile_free(q);
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal(sb.st_mode & 0777, 0640); /* permissions kept */
	assert_int_equal(count_prefixed("replace.lomas."), 0);
	lomas_profile_free(p);
}

static void test_save_failures(void **state)
{
	lomas_profile *p = make_full();
	char path[512], dir[512];
	uint8_t *b;
	size_t len;
	struct rlimit old, lim;
	(void)state;
	/* A directory that does not exist. */
	path_in(path, sizeof path, "no/such/dir/x.lomas");
	assert_int_equal(lomas_profile_save(p, path), LOMAS_EIO);
	assert_non_null(strstr(lomas_error_message(), path));
	assert_non_null(strstr(lomas_error_message(), strerror(ENOENT)));
	/* A directory nobody can create files in, root included. */
	assert_int_equal(lomas_profile_save(p, "/proc/lomas-test.lomas"), LOMAS_EIO);
	assert_non_null(strstr(lomas_error_message(), "/proc/lomas-test.lomas"));

	/* A write that fails half way (file size limit): the old target stays. */
	path_in(path, sizeof path, "keep.lomas");
	write_file(path, "precious", 8);
	signal(SIGXFSZ, SIG_IGN);
	assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
	lim = old;
	lim.rlim_cur = 1000;
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
	assert_int_equal(lomas_profile_save(p, path), LOMAS_EIO);
	assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
	assert_non_null(strstr(lomas_error_message(), path));
	assert_non_null(strstr(lomas_error_message(), strerror(EFBIG)));
	b = read_file(path, &len);
	assert_int_equal(len, 8);
	assert_memory_equal(b, "precious", 8);
	free(b);
	assert_int_equal(count_prefixed("keep.lomas."), 0);

	/* Rename over a directory fails after the data was written: temp removed. */
	path_in(dir, sizeof dir, "adir");
	assert_int_equal(mkdir(dir, 0755), 0);
	assert_int_equal(lomas_profile_save(p, dir), LOMAS_EIO);
	assert_int_equal(count_prefixed("adir."), 0);

	/* A read-only directory (only meaningful when not root). */
	if (geteuid() != 0) {
		path_in(dir, sizeof dir, "ro");
		assert_int_equal(mkdir(dir, 0755), 0);
		snprintf(path, sizeof path, "%s/x.lomas", dir);
		write_file(path, "precious", 8);
		assert_int_equal(chmod(dir, 0555), 0);
		assert_int_equal(lomas_profile_save(p, path), LOMAS_EIO);
		assert_int_equal(chmod(dir, 0755), 0);
		b = read_file(path, &len);
		assert_int_equal(len, 8);
		assert_memory_equal(b, "precious", 8);
		free(b);
	}
	lomas_profile_free(p);
}

static void test_load_errors(void **state)
{
	lomas_profile *p = (lomas_profile *)1;
	char path[512];
	(void)state;
	path_in(path, sizeof path, "missing.lomas");
	assert_int_equal(lomas_profile_load(path, &p), LOMAS_ENOENT);
	assert_null(p);
	assert_non_null(strstr(lomas_error_message(), path));
	assert_non_null(strstr(lomas_error_message(), strerror(ENOENT)));
	assert_int_equal(lomas_profile_load(tmpdir, &p), LOMAS_EIO);
	assert_non_null(strstr(lomas_error_message(), tmpdir));
	path_in(path, sizeof path, "empty.lomas");
	write_file(path, "", 0);
	assert_int_equal(lomas_profile_load(path, &p), LOMAS_EFORMAT);
	assert_non_null(strstr(lomas_error_message(), "empty.lomas: offset 0"));
	assert_int_equal(lomas_profile_load(NULL, &p), LOMAS_EINVAL);
	assert_int_equal(lomas_profile_save(NULL, path), LOMAS_EINVAL);
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* A million samples round-trip through a file; times printed for the report. */
static void test_large(void **state)
{
	const size_t n = 1000000;
	lomas_profile *p, *q;
	lomas_window w = {.start = 0, .refs = 1u << 30, .thread = 0};
	lomas_thread th = {.tid = 1, .refs = 1u << 30};
	char path[512];
	double t0, t1, t2;
	(void)state;
	assert_int_equal(lomas_profile_new(64, &p), LOMAS_OK);
	assert_int_equal(profile_add_thread(p, &th), LOMAS_OK);
	assert_int_equal(profile_add_window(p, &w), LOMAS_OK);
	assert_int_equal(vec_reserve(&p->samples, n), LOMAS_OK);
	for (size_t i = 0; i < n; i++) {
		lomas_sample s = {.start = i * 3,
		                  .end = i * 3 + 1 + i % 1000,
		                  .addr = i * 64,
		                  .start_pc = i,
		                  .end_pc = i + 1,
		                  .weight = ldexp(1000.0, (int)(i % 3)),
		                  .state = (uint8_t)(i % 3),
		                  .kind = (uint8_t)(i & 1)};
		if (s.state == LOMAS_SAMPLE_DANGLING)
			s.end = LOMAS_CLOCK_NONE;
		p->samples.items[p->samples.n++] = s;
	}
	path_in(path, sizeof path, "large.lomas");
	t0 = now_s();
	assert_int_equal(lomas_profile_save(p, path), LOMAS_OK);
	t1 = now_s();
	assert_int_equal(lomas_profile_load(path, &q), LOMAS_OK);
	t2 = now_s();
	print_message("1M samples: save %.1f ms, load %.1f ms\n", (t1 - t0) * 1e3, (t2 - t1) * 1e3);
	assert_same(p, q);
	assert_file_is_image(path, p); /* 15 MB: many staging flushes */
	lomas_profile_free(q);
	lomas_profile_free(p);
	unlink(path);
}

/* With LOMAS_FUZZ_CORPUS_DIR set, write the fuzz seed files (not a test). */
static void test_write_corpus(void **state)
{
	const char *dir = getenv("LOMAS_FUZZ_CORPUS_DIR");
	char path[1024];
	lomas_profile *p;
	uint8_t *b;
	size_t len;
	(void)state;
	if (!dir)
		skip();
	p = make_full();
	encode(p, &b, &len);
	snprintf(path, sizeof path, "%s/seed-full", dir);
	write_file(path, b, len);
	snprintf(path, sizeof path, "%s/seed-truncated", dir);
	write_file(path, b, len / 2);
	free(b);
	lomas_profile_free(p);
	p = make_packable();
	encode(p, &b, &len);
	snprintf(path, sizeof path, "%s/seed-packed", dir);
	write_file(path, b, len);
	free(b);
	lomas_profile_free(p);
	make_psamples();
	{
		tbuf t = psamples_file(pay_psamples.b, pay_psamples.n);
		snprintf(path, sizeof path, "%s/seed-psamples", dir);
		write_file(path, t.b, t.len);
		free(t.b);
	}
	assert_int_equal(lomas_profile_new(64, &p), LOMAS_OK);
	encode(p, &b, &len);
	snprintf(path, sizeof path, "%s/seed-empty", dir);
	write_file(path, b, len);
	free(b);
	lomas_profile_free(p);
	{
		tbuf t = minimal_file();
		snprintf(path, sizeof path, "%s/seed-minimal", dir);
		write_file(path, t.b, t.len);
		free(t.b);
	}
	{
		static const uint8_t junk[5] = "more";
		make_payloads();
		tsec s[] = {{2, pay_profile, 8},
		            {99, junk, sizeof junk},
		            {4, pay_threads, sizeof pay_threads},
		            {5, pay_windows, sizeof pay_windows},
		            {6, pay_samples, sizeof pay_samples}};
		tbuf t = build_file(s, 5);
		snprintf(path, sizeof path, "%s/seed-unknown-section", dir);
		write_file(path, t.b, t.len);
		free(t.b);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_roundtrip_buffer),
	    cmocka_unit_test(test_roundtrip_file),
	    cmocka_unit_test(test_packed_roundtrip),
	    cmocka_unit_test(test_psamples_handbuilt),
	    cmocka_unit_test(test_psamples_malformed),
	    cmocka_unit_test(test_minimal_handbuilt),
	    cmocka_unit_test(test_truncation),
	    cmocka_unit_test(test_byte_flips),
	    cmocka_unit_test(test_unknown_section_skipped),
	    cmocka_unit_test(test_bad_header),
	    cmocka_unit_test(test_bad_table_entries),
	    cmocka_unit_test(test_duplicate_and_missing),
	    cmocka_unit_test(test_counts_and_lengths),
	    cmocka_unit_test(test_semantic_errors),
	    cmocka_unit_test(test_save_replaces_atomically),
	    cmocka_unit_test(test_save_failures),
	    cmocka_unit_test(test_load_errors),
	    cmocka_unit_test(test_large),
	    cmocka_unit_test(test_write_corpus),
	};
	return cmocka_run_group_tests(tests, setup_dir, teardown_dir);
}

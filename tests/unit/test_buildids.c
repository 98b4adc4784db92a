/*
 * The maps a profile records for symbolization (lib/core/elf_id.c) and the
 * BUILDIDS section of format 2.1 (docs/profile-format.md): build ids read
 * from ELF files, compared with readelf's; /proc/self/maps parsed into
 * file-backed maps; the section round-trips, is written only when some map
 * has an id (the file is then exactly a 2.0 file), is skipped in a 2.0 file,
 * and every malformed variant is refused with its offset.
 *
 * With LOMAS_FUZZ_CORPUS_DIR set it also writes the fuzz seed seed-buildids.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/core.h"

/* A profile with one thread, window and sample and three maps, the first two with ids. */
static lomas_profile *make(void)
{
	lomas_profile *p;
	lomas_thread t = {.tid = 7, .refs = 100};
	lomas_window w = {.start = 0, .refs = 100, .thread = 0};
	lomas_sample s = {.start = 3,
	                  .end = 9,
	                  .addr = 0x1000,
	                  .start_pc = 0x401000,
	                  .end_pc = 0x401008,
	                  .weight = 4.0};
	prof_map m[3] = {
	    {.start = 0x400000, .end = 0x401000, .offset = 0, .prot = PROT_READ, .path = "/bin/a"},
	    {.start = 0x401000,
	     .end = 0x402000,
	     .offset = 0x1000,
	     .prot = PROT_READ | PROT_EXEC,
	     .path = "/bin/a"},
	    {.start = 0x7f0000000000, .end = 0x7f0000001000, .prot = PROT_READ, .path = "[vdso]"},
	};
	for (int i = 0; i < 2; i++) {
		m[i].build_id_len = 20;
		for (int k = 0; k < 20; k++)
			m[i].build_id[k] = (uint8_t)(k * 13 + 1);
	}
	m[0].build_id[19] = 0; /* ids are bytes: NUL is one */
	m[1].build_id[19] = 0;
	assert_int_equal(lomas_profile_new(64, &p), LOMAS_OK);
	assert_int_equal(profile_add_thread(p, &t), LOMAS_OK);
	assert_int_equal(profile_add_window(p, &w), LOMAS_OK);
	assert_int_equal(profile_add_sample(p, &s), LOMAS_OK);
	for (int i = 0; i < 3; i++)
		assert_int_equal(profile_add_map(p, &m[i]), LOMAS_OK);
	return p;
}

static uint32_t rd32(const uint8_t *b)
{
	return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

static uint64_t rd64(const uint8_t *b)
{
	return (uint64_t)rd32(b) | (uint64_t)rd32(b + 4) << 32;
}

static void wr32(uint8_t *b, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		b[i] = (uint8_t)(v >> (8 * i));
}

/* The table entry of section type in image b, or NULL. */
static uint8_t *entry_of(uint8_t *b, uint32_t type)
{
	uint32_t n = rd32(b + 16);
	uint64_t toff = rd64(b + 24);
	for (uint32_t i = 0; i < n; i++)
		if (rd32(b + toff + 32 * i) == type)
			return b + toff + 32 * i;
	return NULL;
}

/* Re-seal image b after its payloads changed: section and table CRCs. */
static void reseal(uint8_t *b)
{
	uint32_t n = rd32(b + 16);
	uint64_t toff = rd64(b + 24);
	for (uint32_t i = 0; i < n; i++) {
		uint8_t *e = b + toff + 32 * i;
		wr32(e + 24, crc32_update(0, b + rd64(e + 8), (size_t)rd64(e + 16)));
	}
	wr32(b + 20, crc32_update(0, b + toff, (size_t)n * 32));
}

static void expect_format(uint8_t *b, size_t len, const char *needle)
{
	lomas_profile *q = NULL;
	assert_int_equal(profile_load_buffer(b, len, "ids", &q), LOMAS_EFORMAT);
	assert_null(q);
	if (!strstr(lomas_error_message(), needle))
		fail_msg("message '%s' lacks '%s'", lomas_error_message(), needle);
	assert_non_null(strstr(lomas_error_message(), "ids: offset "));
}

static void test_roundtrip_and_version(void **state)
{
	lomas_profile *p = make(), *q;
	void *data;
	size_t len;
	(void)state;
	assert_int_equal(profile_save_buffer(p, &data, &len), LOMAS_OK);
	assert_int_equal(rd32((uint8_t *)data + 8), 0x00020001u);
	assert_non_null(entry_of(data, 9));
	assert_int_equal(profile_load_buffer(data, len, "ids", &q), LOMAS_OK);
	assert_int_equal(q->maps.n, 3);
	for (size_t i = 0; i < 3; i++) {
		assert_int_equal(q->maps.items[i].build_id_len, p->maps.items[i].build_id_len);
		assert_memory_equal(q->maps.items[i].build_id, p->maps.items[i].build_id,
		                    p->maps.items[i].build_id_len);
		assert_string_equal(q->maps.items[i].path, p->maps.items[i].path);
	}
	lomas_profile_free(q);
	free(data);

	/* Without any id: no section, version 2.0, and the ids stay unknown. */
	for (size_t i = 0; i < p->maps.n; i++)
		p->maps.items[i].build_id_len = 0;
	assert_int_equal(profile_save_buffer(p, &data, &len), LOMAS_OK);
	assert_int_equal(rd32((uint8_t *)data + 8), 0x00020000u);
	assert_null(entry_of(data, 9));
	assert_int_equal(profile_load_buffer(data, len, "ids", &q), LOMAS_OK);
	for (size_t i = 0; i < q->maps.n; i++)
		assert_int_equal(q->maps.items[i].build_id_len, 0);
	lomas_profile_free(q);
	free(data);
	lomas_profile_free(p);
}

/* In a 2.0 file, type 9 is an unknown section (2.0 said so): skipped, ids unknown. */
static void test_type9_in_2_0_is_unknown(void **state)
{
	lomas_profile *p = make(), *q;
	uint8_t *b;
	size_t len;
	(void)state;
	assert_int_equal(profile_save_buffer(p, (void **)&b, &len), LOMAS_OK);
	wr32(b + 8, 0x00020000u);
	wr32(entry_of(b, 9) + 4, 0x1234); /* flags an unknown section may carry */
	reseal(b);
	assert_int_equal(profile_load_buffer(b, len, "ids", &q), LOMAS_OK);
	for (size_t i = 0; i < q->maps.n; i++)
		assert_int_equal(q->maps.items[i].build_id_len, 0);
	lomas_profile_free(q);
	/* And in 2.1 the flags of a known section must be 0. */
	wr32(b + 8, 0x00020001u);
	reseal(b);
	expect_format(b, len, "section BUILDIDS has unknown flags");
	free(b);
	lomas_profile_free(p);
}

static void test_malformed(void **state)
{
	lomas_profile *p = make();
	uint8_t *b, *e, *pay;
	size_t len;
	uint64_t plen;
	(void)state;
	assert_int_equal(profile_save_buffer(p, (void **)&b, &len), LOMAS_OK);
	e = entry_of(b, 9);
	pay = b + rd64(e + 8);
	plen = rd64(e + 16);
	assert_int_equal(plen, 4 + 21 + 21 + 1);

	wr32(pay, 2); /* count: one per map */
	reseal(b);
	expect_format(b, len, "section BUILDIDS has 2 entries for 3 maps");
	wr32(pay, 3);

	pay[4] = 65; /* a length above 64 */
	reseal(b);
	expect_format(b, len, "of 65 bytes is longer than 64");
	pay[4] = 20;

	pay[4 + 21 + 21] = 1; /* the last id runs past the end */
	reseal(b);
	expect_format(b, len, "runs past the end of section BUILDIDS");
	pay[4 + 21 + 21] = 0;

	wr32(e + 16, plen - 1); /* the last entry cut off */
	reseal(b);
	expect_format(b, len, "runs past the end of section BUILDIDS");
	wr32(e + 16, 2); /* shorter than its count */
	reseal(b);
	expect_format(b, len, "shorter than its count");
	wr32(e + 16, plen);
	reseal(b);
	{
		lomas_profile *q;
		assert_int_equal(profile_load_buffer(b, len, "ids", &q), LOMAS_OK);
		lomas_profile_free(q);
	}
	free(b);
	lomas_profile_free(p);
}

/* The id of a file as `readelf -n` prints it (hex), or "" without one. */
static void readelf_id(const char *path, char *out, size_t cap)
{
	char cmd[1200], line[512];
	FILE *f;
	out[0] = '\0';
	snprintf(cmd, sizeof cmd, "readelf -n '%s' 2>/dev/null", path);
	if (!(f = popen(cmd, "r")))
		return;
	while (fgets(line, sizeof line, f)) {
		char *at = strstr(line, "Build ID: ");
		if (at) {
			snprintf(out, cap, "%s", at + 10);
			out[strcspn(out, "\r\n ")] = '\0';
		}
	}
	pclose(f);
}

static void hex(const uint8_t *id, size_t n, char *out)
{
	for (size_t i = 0; i < n; i++)
		sprintf(out + 2 * i, "%02x", id[i]);
	out[2 * n] = '\0';
}

static void test_ids_from_files(void **state)
{
	char self[4096], want[256], got[256];
	uint8_t id[PROF_BUILD_ID_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	size_t k;
	int fd;
	(void)state;
	assert_true(n > 0);
	self[n] = '\0';
	readelf_id(self, want, sizeof want);
	if (!want[0])
		skip(); /* no readelf, or a test binary linked without an id */
	k = elf_build_id_path(self, id, sizeof id);
	hex(id, k, got);
	assert_string_equal(got, want);
	/* A short buffer gets the first bytes. */
	assert_int_equal(elf_build_id_path(self, id, 4), 4);
	assert_memory_equal(got, want, 8);
	/* Not ELF, not there, not absolute: no id. */
	fd = open("/proc/self/maps", O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(elf_build_id_fd(fd, id, sizeof id), 0);
	close(fd);
	assert_int_equal(elf_build_id_path("/nonexistent/file", id, sizeof id), 0);
	assert_int_equal(elf_build_id_path("relative", id, sizeof id), 0);
}

static void test_proc_maps(void **state)
{
	char self[4096], want[256], got[256];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	lomas_profile *p;
	uintptr_t code = (uintptr_t)&test_proc_maps;
	bool code_mapped = false;
	(void)state;
	assert_true(n > 0);
	self[n] = '\0';
	readelf_id(self, want, sizeof want);
	assert_int_equal(lomas_profile_new(64, &p), LOMAS_OK);
	assert_int_equal(profile_add_proc_maps(p, "/proc/self/maps"), LOMAS_OK);
	assert_true(p->maps.n > 0);
	for (size_t i = 0; i < p->maps.n; i++) {
		const prof_map *m = &p->maps.items[i];
		assert_true(m->path[0] == '/'); /* file-backed only */
		assert_true(m->end > m->start);
		if (code >= m->start && code < m->end) {
			code_mapped = true;
			assert_string_equal(m->path, self);
			assert_true(m->prot & PROT_EXEC);
			if (want[0]) {
				hex(m->build_id, m->build_id_len, got);
				assert_string_equal(got, want);
			}
		}
	}
	assert_true(code_mapped);
	assert_int_equal(profile_add_proc_maps(p, "/nonexistent/maps"), LOMAS_EIO);
	lomas_profile_free(p);
}

/* With LOMAS_FUZZ_CORPUS_DIR set, write the fuzz seed (not a test). */
static void test_write_corpus(void **state)
{
	const char *dir = getenv("LOMAS_FUZZ_CORPUS_DIR");
	char path[1024];
	lomas_profile *p;
	void *b;
	size_t len;
	FILE *f;
	(void)state;
	if (!dir)
		skip();
	p = make();
	assert_int_equal(profile_save_buffer(p, &b, &len), LOMAS_OK);
	snprintf(path, sizeof path, "%s/seed-buildids", dir);
	assert_non_null(f = fopen(path, "wb"));
	assert_int_equal(fwrite(b, 1, len, f), len);
	fclose(f);
	free(b);
	lomas_profile_free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_roundtrip_and_version),
	    cmocka_unit_test(test_type9_in_2_0_is_unknown),
	    cmocka_unit_test(test_malformed),
	    cmocka_unit_test(test_ids_from_files),
	    cmocka_unit_test(test_proc_maps),
	    cmocka_unit_test(test_write_corpus),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

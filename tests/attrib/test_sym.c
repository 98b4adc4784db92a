/*
 * Symbolization (lib/sym through lomas_profile_hot_pcs): real programs built
 * several ways (tests/attrib/meson.build) copy their /proc/self/maps and
 * print the addresses of marker labels placed on known source lines
 * (sym_target.c); after they exit, a profile with those maps and samples at
 * those pcs must name the right function, file, line and inlined-at chain:
 * a PIE and a fixed-address executable, a shared library, a binary stripped
 * of its debug info (function from the symbol table only), one stripped of
 * everything (no name rather than a wrong one), separate debug info found
 * through .gnu_debuglink and through a .build-id directory, and a binary
 * rebuilt or removed since the run (reported, never mis-symbolized).
 *
 * Environment: SYM_TARGETS (the build folder of the targets), SYM_SOURCE
 * (sym_target.c), SYM_LIB_SOURCE (sym_lib.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <inttypes.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/core.h"

static char tmp[256];

struct run {
	uint64_t plain, inlined, lib;
	char maps[512];
};

static const char *env(const char *name)
{
	const char *v = getenv(name);
	if (!v)
		fail_msg("%s is not set", name);
	return v;
}

/* The line of source file path that holds mark (a comment). */
static uint32_t line_of(const char *path, const char *mark)
{
	FILE *f = fopen(path, "r");
	char buf[1024];
	uint32_t n = 0;
	assert_non_null(f);
	while (fgets(buf, sizeof buf, f)) {
		n++;
		if (strstr(buf, mark)) {
			fclose(f);
			return n;
		}
	}
	fclose(f);
	fail_msg("%s not found in %s", mark, path);
	return 0;
}

static void target_path(const char *name, char *out, size_t cap)
{
	snprintf(out, cap, "%s/%s", env("SYM_TARGETS"), name);
}

/* Run exe: its maps go to a file in tmp, its markers into r. */
static void run_target(const char *exe, struct run *r)
{
	char cmd[2048], line[256];
	FILE *f;
	static int k;
	memset(r, 0, sizeof *r);
	snprintf(r->maps, sizeof r->maps, "%s/maps.%d", tmp, k++);
	snprintf(cmd, sizeof cmd, "'%s' '%s'", exe, r->maps);
	f = popen(cmd, "r");
	assert_non_null(f);
	while (fgets(line, sizeof line, f)) {
		void *pc;
		char what[32];
		if (sscanf(line, "%31s %p", what, &pc) != 2)
			continue;
		if (!strcmp(what, "plain"))
			r->plain = (uint64_t)(uintptr_t)pc;
		else if (!strcmp(what, "inlined"))
			r->inlined = (uint64_t)(uintptr_t)pc;
		else if (!strcmp(what, "lib"))
			r->lib = (uint64_t)(uintptr_t)pc;
	}
	assert_int_equal(pclose(f), 0);
	assert_true(r->plain && r->inlined);
}

/* A profile with r's maps and one far reuse ended at each marker. */
static lomas_profile *profile_for(const struct run *r, bool with_maps, uint64_t shift)
{
	lomas_profile *p;
	lomas_thread t = {.tid = 1, .refs = 10000000};
	lomas_window w = {.start = 0, .refs = 10000000, .thread = 0};
	uint64_t pcs[3] = {r->plain, r->inlined, r->lib};
	assert_int_equal(lomas_profile_new(64, &p), LOMAS_OK);
	assert_int_equal(profile_add_thread(p, &t), LOMAS_OK);
	assert_int_equal(profile_add_window(p, &w), LOMAS_OK);
	for (int i = 0; i < 3; i++) {
		lomas_sample s = {.start = 10 + (uint64_t)i,
		                  .end = 5000000 + (uint64_t)i,
		                  .addr = 0x10000 + 64 * (uint64_t)i,
		                  .start_pc = pcs[i] + shift,
		                  .end_pc = pcs[i] + shift,
		                  .weight = 1.0 + i};
		if (pcs[i])
			assert_int_equal(profile_add_sample(p, &s), LOMAS_OK);
	}
	if (with_maps)
		assert_int_equal(profile_add_proc_maps(p, r->maps), LOMAS_OK);
	return p;
}

/* The symbolized list: attribution without symbols, then with debug_path. */
static lomas_hot_list *hot(const lomas_profile *p, const char *debug_path)
{
	lomas_hot_list *l;
	assert_int_equal(
	    lomas_profile_hot_pcs(p, LOMAS_POLICY_LRU, 64, 0, LOMAS_HOT_NO_SYMBOLS, &l), LOMAS_OK);
	assert_int_equal(lomas_hot_list_symbolize(l, p, debug_path), LOMAS_OK);
	assert_string_equal(lomas_error_message(), "");
	return l;
}

/* The entry of pc (or fail), its index in *at. */
static lomas_hot_pc entry(const lomas_hot_list *l, uint64_t pc, size_t *at)
{
	lomas_hot_pc e = LOMAS_HOT_PC_INIT;
	for (size_t i = 0; i < lomas_hot_list_count(l); i++) {
		assert_int_equal(lomas_hot_list_get(l, i, &e), LOMAS_OK);
		if (e.pc == pc) {
			if (at)
				*at = i;
			return e;
		}
	}
	fail_msg("pc 0x%" PRIx64 " is not in the list", pc);
	return e;
}

static const char *base(const char *path)
{
	const char *s = path ? strrchr(path, '/') : NULL;
	return s ? s + 1 : path;
}

/* The value of symbol name in exe, as nm prints it (its link-time address). */
static uint64_t nm_value(const char *exe, const char *name)
{
	char cmd[1200], line[512];
	uint64_t v = 0;
	FILE *f;
	snprintf(cmd, sizeof cmd, "nm '%s' 2>/dev/null", exe);
	f = popen(cmd, "r");
	assert_non_null(f);
	while (fgets(line, sizeof line, f)) {
		char sym[256], type;
		uint64_t val;
		if (sscanf(line, "%" SCNx64 " %c %255s", &val, &type, sym) == 3 &&
		    !strcmp(sym, name))
			v = val;
	}
	pclose(f);
	return v;
}

/* Full debug info: function, file, line and the inlined-at chain of both markers. */
static void expect_full(const char *exe, const lomas_hot_list *l, const struct run *r)
{
	const char *src = env("SYM_SOURCE");
	lomas_hot_pc e = entry(l, r->plain, NULL);
	lomas_hot_frame f;
	size_t at;
	assert_int_equal(e.sym, LOMAS_SYM_OK);
	assert_string_equal(e.function, "plain");
	assert_non_null(e.file);
	assert_string_equal(base(e.file), "sym_target.c");
	assert_int_equal(e.line, line_of(src, "/* MARK_PLAIN */"));
	assert_int_equal(e.inlined, 0);
	assert_string_equal(base(e.module), base(exe));
	assert_int_equal(e.module_offset, nm_value(exe, "mark_plain"));
	e = entry(l, r->inlined, &at);
	assert_int_equal(e.sym, LOMAS_SYM_OK);
	assert_string_equal(e.function, "inner");
	assert_int_equal(e.line, line_of(src, "/* MARK_INLINED */"));
	assert_int_equal(e.inlined, 1);
	assert_int_equal(lomas_hot_list_frame(l, at, 0, &f), LOMAS_OK);
	assert_string_equal(f.function, "outer");
	assert_string_equal(base(f.file), "sym_target.c");
	assert_int_equal(f.line, line_of(src, "/* CALL_INNER */"));
	assert_int_equal(lomas_hot_list_frame(l, at, 1, &f), LOMAS_EINVAL);
}

static void check_full(const char *name)
{
	char exe[1024];
	struct run r;
	lomas_profile *p;
	lomas_hot_list *l;
	target_path(name, exe, sizeof exe);
	run_target(exe, &r);
	p = profile_for(&r, true, 0);
	l = hot(p, NULL);
	expect_full(exe, l, &r);
	lomas_hot_list_free(l);
	lomas_profile_free(p);
}

static void test_pie(void **state)
{
	(void)state;
	check_full("sym-pie");
}

static void test_fixed_address(void **state)
{
	char exe[1024];
	struct run r;
	(void)state;
	check_full("sym-nopie");
	/* Not position-independent: the run's addresses are the link-time ones. */
	target_path("sym-nopie", exe, sizeof exe);
	run_target(exe, &r);
	assert_int_equal(r.plain, nm_value(exe, "mark_plain"));
}

static void test_shared_library(void **state)
{
	char exe[1024];
	struct run r;
	lomas_profile *p;
	lomas_hot_list *l;
	lomas_hot_pc e = LOMAS_HOT_PC_INIT;
	(void)state;
	target_path("sym-lib", exe, sizeof exe);
	run_target(exe, &r);
	assert_true(r.lib != 0);
	p = profile_for(&r, true, 0);
	l = hot(p, NULL);
	expect_full(exe, l, &r);
	e = entry(l, r.lib, NULL);
	assert_int_equal(e.sym, LOMAS_SYM_OK);
	assert_string_equal(e.function, "lib_work");
	assert_string_equal(base(e.file), "sym_lib.c");
	assert_int_equal(e.line, line_of(env("SYM_LIB_SOURCE"), "/* MARK_LIB */"));
	assert_string_equal(base(e.module), "libsymlib.so");
	lomas_hot_list_free(l);
	lomas_profile_free(p);
}

/* strip -g: the symbol table names the function, nothing names the line. */
static void test_stripped_of_debug_info(void **state)
{
	char exe[1024];
	struct run r;
	lomas_profile *p;
	lomas_hot_list *l;
	lomas_hot_pc e = LOMAS_HOT_PC_INIT;
	(void)state;
	target_path("sym-stripped", exe, sizeof exe);
	run_target(exe, &r);
	p = profile_for(&r, true, 0);
	l = hot(p, "/nonexistent-debug-dir");
	e = entry(l, r.plain, NULL);
	assert_int_equal(e.sym, LOMAS_SYM_OK);
	assert_string_equal(e.function, "plain");
	assert_null(e.file);
	assert_int_equal(e.line, 0);
	/* inner was inlined: its code lies in outer's symbol. */
	e = entry(l, r.inlined, NULL);
	assert_string_equal(e.function, "outer");
	assert_null(e.file);
	lomas_hot_list_free(l);
	lomas_profile_free(p);
}

/* strip --strip-all: no symbol covers plain: no name at all, not a neighbour's. */
static void test_stripped_of_everything(void **state)
{
	char exe[1024];
	struct run r;
	lomas_profile *p;
	lomas_hot_list *l;
	lomas_hot_pc e = LOMAS_HOT_PC_INIT;
	(void)state;
	target_path("sym-strip-all", exe, sizeof exe);
	run_target(exe, &r);
	p = profile_for(&r, true, 0);
	l = hot(p, "/nonexistent-debug-dir");
	e = entry(l, r.plain, NULL);
	assert_int_equal(e.sym, LOMAS_SYM_NO_SYMBOL);
	assert_null(e.function);
	assert_null(e.file);
	assert_string_equal(base(e.module), "sym-strip-all");
	assert_non_null(strstr(e.sym_detail, "no symbol or line"));
	lomas_hot_list_free(l);
	lomas_profile_free(p);
}

/* Debug info in a separate file named by .gnu_debuglink, next to the binary. */
static void test_debuglink(void **state)
{
	(void)state;
	check_full("sym-dbg");
}

static void copy_file(const char *from, const char *to)
{
	char cmd[2200];
	snprintf(cmd, sizeof cmd, "cp '%s' '%s'", from, to);
	assert_int_equal(system(cmd), 0);
}

/* Debug info found by build id in a debug directory we name (not /usr/lib/debug). */
static void test_build_id_directory(void **state)
{
	char exe[1024], debug[1024], dir[1024], path[1200], hex[2 * PROF_BUILD_ID_MAX + 1];
	uint8_t id[PROF_BUILD_ID_MAX];
	size_t n;
	struct run r;
	lomas_profile *p;
	lomas_hot_list *l;
	(void)state;
	target_path("sym-stripped", exe, sizeof exe);
	target_path("sym-dbg.debug", debug, sizeof debug);
	n = elf_build_id_path(exe, id, sizeof id);
	assert_true(n >= 2);
	for (size_t i = 0; i < n; i++)
		sprintf(hex + 2 * i, "%02x", id[i]);
	/* sym-dbg.debug came from sym-pie, as sym-stripped did: the same build id. */
	snprintf(dir, sizeof dir, "%s/debug/.build-id/%.2s", tmp, hex);
	snprintf(path, sizeof path, "mkdir -p '%s'", dir);
	assert_int_equal(system(path), 0);
	snprintf(path, sizeof path, "%s/%s.debug", dir, hex + 2);
	copy_file(debug, path);
	run_target(exe, &r);
	p = profile_for(&r, true, 0);
	l = hot(p, "/nonexistent-debug-dir");
	assert_null(entry(l, r.plain, NULL).file);
	lomas_hot_list_free(l);
	snprintf(dir, sizeof dir, "/nonexistent-debug-dir:%s/debug", tmp);
	l = hot(p, dir);
	expect_full(exe, l, &r);
	lomas_hot_list_free(l);
	lomas_profile_free(p);
}

/* A binary rebuilt since the run is reported, not symbolized; a removed one too. */
static void test_changed_and_removed(void **state)
{
	char exe[1024], other[1024], prog[1024];
	struct run r;
	lomas_profile *p;
	lomas_hot_list *l;
	lomas_hot_pc e = LOMAS_HOT_PC_INIT;
	(void)state;
	target_path("sym-pie", exe, sizeof exe);
	target_path("sym-lib", other, sizeof other);
	snprintf(prog, sizeof prog, "%s/prog", tmp);
	copy_file(exe, prog);
	run_target(prog, &r);
	p = profile_for(&r, true, 0);
	l = hot(p, NULL);
	expect_full(prog, l, &r);
	lomas_hot_list_free(l);
	/* Another program at the same path: a build id the run did not see. */
	copy_file(other, prog);
	l = hot(p, NULL);
	e = entry(l, r.plain, NULL);
	assert_int_equal(e.sym, LOMAS_SYM_CHANGED);
	assert_null(e.function);
	assert_null(e.file);
	assert_non_null(strstr(e.sym_detail, "changed since the run"));
	lomas_hot_list_free(l);
	unlink(prog);
	l = hot(p, NULL);
	e = entry(l, r.plain, NULL);
	assert_int_equal(e.sym, LOMAS_SYM_NO_FILE);
	assert_null(e.function);
	assert_non_null(strstr(e.sym_detail, "cannot open"));
	lomas_hot_list_free(l);
	lomas_profile_free(p);
}

/* The inline clock records return addresses: its pcs are looked up one byte back. */
static void test_inline_clock_pcs(void **state)
{
	char exe[1024];
	struct run r;
	lomas_profile *p;
	lomas_hot_list *l;
	lomas_hot_pc e = LOMAS_HOT_PC_INIT;
	(void)state;
	target_path("sym-pie", exe, sizeof exe);
	run_target(exe, &r);
	/* mark_plain + 1 is the byte after its one-byte nop: the next line's code. */
	p = profile_for(&r, true, 1);
	assert_int_equal(lomas_profile_meta_set(p, "clock", "inline"), LOMAS_OK);
	l = hot(p, NULL);
	e = entry(l, r.plain + 1, NULL);
	assert_string_equal(e.function, "plain");
	assert_int_equal(e.line, line_of(env("SYM_SOURCE"), "/* MARK_PLAIN */"));
	lomas_hot_list_free(l);
	lomas_profile_free(p);
}

/* No maps (a lackey trace without its program): said, not guessed. */
static void test_no_maps(void **state)
{
	char exe[1024];
	struct run r;
	lomas_profile *p;
	lomas_hot_list *l;
	lomas_hot_info info = LOMAS_HOT_INFO_INIT;
	lomas_hot_pc e = LOMAS_HOT_PC_INIT;
	(void)state;
	target_path("sym-pie", exe, sizeof exe);
	run_target(exe, &r);
	p = profile_for(&r, false, 0);
	l = hot(p, NULL);
	assert_int_equal(lomas_hot_list_info(l, &info), LOMAS_OK);
	assert_int_equal(info.has_maps, 0);
	e = entry(l, r.plain, NULL);
	assert_int_equal(e.sym, LOMAS_SYM_NO_MAPS);
	assert_null(e.function);
	assert_null(e.module);
	lomas_hot_list_free(l);
	lomas_profile_free(p);
}

/* lomas_hot_list_frame clears the message when it succeeds (the API contract). */
static void test_frame_clears_the_message(void **state)
{
	char exe[1024];
	struct run r;
	lomas_profile *p, *q;
	lomas_hot_list *l;
	lomas_hot_frame f;
	size_t at;
	(void)state;
	target_path("sym-pie", exe, sizeof exe);
	run_target(exe, &r);
	p = profile_for(&r, true, 0);
	l = hot(p, NULL);
	entry(l, r.inlined, &at);
	assert_int_equal(lomas_profile_load("/nonexistent/x.lomas", &q), LOMAS_ENOENT);
	assert_true(lomas_error_message()[0] != '\0');
	assert_int_equal(lomas_hot_list_frame(l, at, 0, &f), LOMAS_OK);
	assert_string_equal(lomas_error_message(), "");
	lomas_hot_list_free(l);
	lomas_profile_free(p);
}

static int setup(void **state)
{
	(void)state;
	snprintf(tmp, sizeof tmp, "/tmp/lomas-sym-XXXXXX");
	return mkdtemp(tmp) ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[512];
	(void)state;
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
	return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_pie),
	    cmocka_unit_test(test_fixed_address),
	    cmocka_unit_test(test_shared_library),
	    cmocka_unit_test(test_stripped_of_debug_info),
	    cmocka_unit_test(test_stripped_of_everything),
	    cmocka_unit_test(test_debuglink),
	    cmocka_unit_test(test_build_id_directory),
	    cmocka_unit_test(test_changed_and_removed),
	    cmocka_unit_test(test_inline_clock_pcs),
	    cmocka_unit_test(test_no_maps),
	    cmocka_unit_test(test_frame_clears_the_message),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}

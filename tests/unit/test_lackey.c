/*
 * Unit tests for the Valgrind lackey reader (lib/trace/lackey.c): the real
 * format, malformed lines, line ends, files and stdin, split reads, and a
 * trace made by valgrind itself checked against an independent sscanf parse.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "trace/trace.h"

static lomas_config *cfg_period(const char *period)
{
	lomas_config *cfg;
	assert_int_equal(lomas_config_new(&cfg), LOMAS_OK);
	assert_int_equal(lomas_config_set(cfg, "period", period), LOMAS_OK);
	return cfg;
}

/* Analyze text through fmemopen with the given read buffer (0 = the public function). */
static lomas_status analyze_text(const lomas_config *cfg, const char *text, size_t len,
                                 size_t buf_bytes, lomas_profile **out)
{
	FILE *f = fmemopen((void *)text, len, "r");
	lomas_status st;
	assert_non_null(f);
	if (buf_bytes)
		st = lackey_read_stream(cfg, f, "t.trace", buf_bytes, out);
	else
		st = lomas_trace_analyze_lackey_stream(cfg, f, "t.trace", out);
	fclose(f);
	return st;
}

static const char snippet[] = "==4760== Lackey, an example Valgrind tool\n"
                              "==4760== Command: /bin/true\n"
                              "==4760== \n"
                              "I  04016bd0,3\n"
                              " S 7ff000398,8\n"
                              "I  04016bd3,5\n"
                              " L 04222cac,4\n"
                              " M 0421ce20,4\n"
                              "I  04016be0,2\n"
                              " L 7ff000390,8\n"
                              "--4760-- a warning\n"
                              "**4760** another\n"
                              " S 0421ce3f,4\n"
                              "==4760== \n"
                              "==4760== Exit code:       0\n";

/* References, pcs, the M expansion and metadata on a snippet in valgrind's own format. */
static void test_snippet(void **state)
{
	lomas_config *cfg = cfg_period("1");
	lomas_profile *p;
	const char *v;
	const lomas_sample *s;
	(void)state;
	assert_int_equal(analyze_text(cfg, snippet, strlen(snippet), 0, &p), LOMAS_OK);
	assert_int_equal(p->threads.n, 1);
	assert_int_equal(p->threads.items[0].tid, 0);
	assert_int_equal(p->threads.items[0].refs, 6);
	assert_int_equal(p->samples.n, 6);
	s = p->samples.items;
	/* 0: S 7ff000398 by 04016bd0, reused by the L at clock 4 */
	assert_int_equal(s[0].addr, 0x7ff000398ull);
	assert_int_equal(s[0].start_pc, 0x04016bd0);
	assert_int_equal(s[0].kind, LOMAS_REF_STORE);
	assert_int_equal(s[0].state, LOMAS_SAMPLE_REUSED);
	assert_int_equal(s[0].end, 4);
	assert_int_equal(s[0].end_pc, 0x04016be0);
	assert_int_equal(sample_distance(&s[0]), 3);
	/* 1: L 04222cac never reused */
	assert_int_equal(s[1].addr, 0x04222cac);
	assert_int_equal(s[1].kind, LOMAS_REF_LOAD);
	assert_int_equal(s[1].start_pc, 0x04016bd3);
	assert_int_equal(s[1].state, LOMAS_SAMPLE_DANGLING);
	/* 2, 3: M = load then store, same pc; the load is reused by the store at distance 0 */
	assert_int_equal(s[2].addr, 0x0421ce20);
	assert_int_equal(s[2].kind, LOMAS_REF_LOAD);
	assert_int_equal(s[2].start_pc, 0x04016bd3);
	assert_int_equal(s[2].state, LOMAS_SAMPLE_REUSED);
	assert_int_equal(s[2].end, 3);
	assert_int_equal(s[2].end_pc, 0x04016bd3);
	assert_int_equal(sample_distance(&s[2]), 0);
	assert_int_equal(s[3].addr, 0x0421ce20);
	assert_int_equal(s[3].kind, LOMAS_REF_STORE);
	assert_int_equal(s[3].start_pc, 0x04016bd3);
	/* the store is reused by the S to 0421ce3f (same 64-byte line) */
	assert_int_equal(s[3].state, LOMAS_SAMPLE_REUSED);
	assert_int_equal(s[3].end, 5);
	assert_int_equal(s[3].end_pc, 0x04016be0);
	assert_int_equal(s[4].start, 4);
	assert_int_equal(s[4].state, LOMAS_SAMPLE_DANGLING);
	assert_int_equal(s[5].start, 5);
	assert_int_equal(s[5].kind, LOMAS_REF_STORE);
	assert_int_equal(lomas_profile_meta_get(p, "source", &v), LOMAS_OK);
	assert_string_equal(v, "t.trace");
	assert_int_equal(lomas_profile_meta_get(p, "clock", &v), LOMAS_OK);
	assert_string_equal(v, "trace");
	assert_int_equal(lomas_profile_meta_get(p, "refs", &v), LOMAS_OK);
	assert_string_equal(v, "6");
	lomas_profile_free(p);
	lomas_config_free(cfg);
}

/* Each malformed line gives EFORMAT naming its line number and quoting it. */
static void test_malformed(void **state)
{
	static const struct {
		const char *line;
		const char *what;
	} bad[] = {
	    {" L zz,4", "bad hex address"},
	    {" L 04zz,4", "expected ','"},
	    {" L 0422cac 4", "expected ','"},
	    {" L 0422cac", "expected ','"},
	    {" X 0422cac,4", "not a lackey line"},
	    {" L 0422cac,", "missing or bad decimal size"},
	    {" L 0422cac,x", "missing or bad decimal size"},
	    {" L 0422cac,4x", "unexpected text after the size"},
	    {" L 0422cac,4 5", "unexpected text after the size"},
	    {" L 11112222333344445,4", "address has more than 16 hex digits"},
	    {" L 0422cac,99999999999", "size too large"},
	    {"L0422cac,4", "expected a space"},
	    {"I 0x0401,3", "expected ','"},
	    {"garbage", "not a lackey line"},
	    {"==abc== not valgrind", "not a lackey line"},
	    {"==12 missing marker", "not a lackey line"},
	    {"hello world", "not a lackey line"},
	};
	lomas_config *cfg = cfg_period("3");
	(void)state;
	for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
		char text[512], want[128];
		lomas_profile *p = (lomas_profile *)&p;
		snprintf(text, sizeof text, "==1== hi\nI  0400,3\n L 1000,4\n\n%s\n S 2000,8\n",
		         bad[k].line);
		assert_int_equal(analyze_text(cfg, text, strlen(text), 0, &p), LOMAS_EFORMAT);
		assert_null(p);
		snprintf(want, sizeof want, "t.trace:5: %s", bad[k].what);
		if (strncmp(lomas_error_message(), want, strlen(want)) != 0)
			fail_msg("line '%s': message '%s', want prefix '%s'", bad[k].line,
			         lomas_error_message(), want);
		assert_non_null(strstr(lomas_error_message(), bad[k].line));
		/* the same as the last line without '\n' */
		snprintf(text, sizeof text, "I  0400,3\n L 1000,4\n%s", bad[k].line);
		assert_int_equal(analyze_text(cfg, text, strlen(text), 0, &p), LOMAS_EFORMAT);
		assert_non_null(strstr(lomas_error_message(), "t.trace:3: "));
	}
	{
		/* a NUL byte inside a line; an overlong line is quoted truncated */
		static const char nul[] = "I  0400,3\n L 10\0000,4\n";
		char big[2000];
		lomas_profile *p;
		assert_int_equal(analyze_text(cfg, nul, sizeof nul - 1, 0, &p), LOMAS_EFORMAT);
		assert_non_null(strstr(lomas_error_message(), "t.trace:2: "));
		memset(big, 'L', sizeof big);
		memcpy(big, "I  0400,3\n", 10);
		assert_int_equal(analyze_text(cfg, big, sizeof big, 0, &p), LOMAS_EFORMAT);
		assert_non_null(strstr(lomas_error_message(), "t.trace:2: line too long"));
		assert_true(strlen(lomas_error_message()) < 200);
		big[1500] = '\n';
		assert_int_equal(analyze_text(cfg, big, sizeof big, 1024, &p), LOMAS_EFORMAT);
		assert_non_null(strstr(lomas_error_message(), "t.trace:2: line too long"));
	}
	lomas_config_free(cfg);
}

/*
 * Valgrind's own lines in a log, each prefix as Valgrind 3.19 writes it
 * (the "###" notes of its DWARF reader come from a clang-16 -g program's
 * DWARF 5), are skipped between trace lines, also when longer than any
 * read buffer; near misses of each prefix are still refused by line number.
 */
static void test_valgrind_prefixes(void **state)
{
	static const char *const skipped[] = {
	    "### unhandled dwarf2 abbrev form code 0x25",
	    "### unhandled dwarf2 abbrev form code 0x1b",
	    "###",
	    "####### more hashes",
	    "--12345-- warning: L3 cache found, using its data for the LL simulation.",
	    "--1--",
	    "==99== Lackey, an example Valgrind tool",
	    "==99==",
	    "**7** Valgrind's memory management: out of memory:",
	    "**7**",
	};
	static const struct {
		const char *line;
		const char *what;
	} near[] = {
	    {"##", "not a lackey line"},
	    {"## unhandled", "not a lackey line"},
	    {"# comment", "not a lackey line"},
	    {" ### indented", "not a lackey line"},
	    {"--12-+ x", "not a lackey line"},
	    {"--12== x", "not a lackey line"},
	    {"==12-- x", "not a lackey line"},
	    {"**12== x", "not a lackey line"},
	    {"-- 12-- x", "not a lackey line"},
	    {"----", "not a lackey line"},
	    {"--x-- x", "not a lackey line"},
	    {"=12== x", "not a lackey line"},
	    {"*12** x", "not a lackey line"},
	    {"vex amd64->IR: unhandled instruction bytes: 0x62", "not a lackey line"},
	};
	lomas_config *cfg = cfg_period("1");
	(void)state;
	for (size_t k = 0; k < sizeof skipped / sizeof skipped[0]; k++) {
		char text[512];
		lomas_profile *p;
		snprintf(text, sizeof text, "I  0400,3\n%s\n L 1000,4\n%s\n S 1000,8\n%s",
		         skipped[k], skipped[k], skipped[k]);
		if (analyze_text(cfg, text, strlen(text), 0, &p) != LOMAS_OK)
			fail_msg("'%s' refused: %s", skipped[k], lomas_error_message());
		/* Exactly the two references, the store the load's reuse at distance 0. */
		assert_int_equal(p->threads.items[0].refs, 2);
		assert_int_equal(p->samples.n, 2);
		assert_int_equal(p->samples.items[0].end, 1);
		lomas_profile_free(p);
	}
	for (size_t k = 0; k < sizeof near / sizeof near[0]; k++) {
		char text[512], want[128];
		lomas_profile *p;
		snprintf(text, sizeof text, "### ok\nI  0400,3\n L 1000,4\n%s\n S 2000,8\n",
		         near[k].line);
		assert_int_equal(analyze_text(cfg, text, strlen(text), 0, &p), LOMAS_EFORMAT);
		snprintf(want, sizeof want, "t.trace:4: %s", near[k].what);
		if (strncmp(lomas_error_message(), want, strlen(want)) != 0)
			fail_msg("'%s': message '%s', want prefix '%s'", near[k].line,
			         lomas_error_message(), want);
	}
	{
		/* A "###" note longer than the read buffer and than LACKEY_MAX_LINE. */
		size_t len = 0;
		char *text = malloc(8192);
		lomas_profile *p;
		assert_non_null(text);
		len += (size_t)sprintf(text, "I  0400,3\n L 1000,4\n### ");
		memset(text + len, 'x', 5000);
		len += 5000;
		len += (size_t)sprintf(text + len, "\n S 1000,8\n");
		assert_int_equal(analyze_text(cfg, text, len, 1024, &p), LOMAS_OK);
		assert_int_equal(p->threads.items[0].refs, 2);
		lomas_profile_free(p);
		assert_int_equal(analyze_text(cfg, text, len, 0, &p), LOMAS_OK);
		assert_int_equal(p->threads.items[0].refs, 2);
		lomas_profile_free(p);
		free(text);
	}
	lomas_config_free(cfg);
}

/* CRLF line ends, blank lines, spaces at the end, no final newline. */
static void test_line_ends(void **state)
{
	static const char text[] = "==7== x\r\n\r\nI  0400,3\r\n L 1000,4 \r\n\n\n  \t\n"
	                           " S 1008,8\r\n M 2000,1\r\n\r\n L 1010,4";
	lomas_config *cfg = cfg_period("1");
	lomas_profile *p;
	(void)state;
	assert_int_equal(analyze_text(cfg, text, sizeof text - 1, 0, &p), LOMAS_OK);
	assert_int_equal(p->threads.items[0].refs, 5);
	assert_int_equal(p->samples.n, 5);
	assert_int_equal(p->samples.items[0].end, 1);
	assert_int_equal(p->samples.items[0].start_pc, 0x400);
	assert_int_equal(p->samples.items[1].end, 4);
	assert_int_equal(p->samples.items[4].addr, 0x1010);
	lomas_profile_free(p);
	/* empty input: no references at all */
	assert_int_equal(analyze_text(cfg, "\n", 1, 0, &p), LOMAS_OK);
	assert_int_equal(p->threads.n, 0);
	assert_int_equal(p->samples.n, 0);
	lomas_profile_free(p);
	/* data references before any I line have pc 0 */
	assert_int_equal(analyze_text(cfg, " L 40,8\n", 8, 0, &p), LOMAS_OK);
	assert_int_equal(p->samples.n, 1);
	assert_int_equal(p->samples.items[0].start_pc, 0);
	lomas_profile_free(p);
	lomas_config_free(cfg);
}

/* A long input read with a small buffer (lines split across reads) gives the same profile. */
static void test_split_reads(void **state)
{
	size_t cap = 4 << 20, len = 0;
	char *text = malloc(cap);
	uint64_t x = 12345;
	lomas_config *cfg = cfg_period("7");
	lomas_profile *a, *b;
	(void)state;
	assert_non_null(text);
	for (int i = 0; len + 4000 < cap; i++) {
		x = x * 6364136223846793005ull + 1442695040888963407ull;
		if (i % 5000 == 17) { /* Valgrind lines longer than any read buffer */
			len += (size_t)sprintf(text + len, "==99== ");
			memset(text + len, 'v', 3000);
			len += 3000;
			text[len++] = '\n';
		} else if (i % 3 == 0) {
			len += (size_t)sprintf(text + len, "I  %08llx,%d%s\n",
			                       (unsigned long long)(0x400000 + (x >> 50)),
			                       (int)(x >> 60) + 1, i % 7 ? "" : "\r");
		} else {
			len += (size_t)sprintf(
			    text + len, " %c %llx,%d\n", "LSM"[(x >> 40) % 3],
			    (unsigned long long)(0x7f000000 + ((x >> 30) % 40000)), 8);
		}
	}
	assert_int_equal(analyze_text(cfg, text, len, 0, &a), LOMAS_OK);
	assert_int_equal(analyze_text(cfg, text, len, 1024, &b), LOMAS_OK);
	assert_true(a->samples.n > 1000);
	assert_int_equal(a->threads.items[0].refs, b->threads.items[0].refs);
	assert_int_equal(a->samples.n, b->samples.n);
	assert_memory_equal(a->samples.items, b->samples.items,
	                    a->samples.n * sizeof(lomas_sample));
	lomas_profile_free(a);
	lomas_profile_free(b);
	/* an error deep in the file names the same line either way */
	memcpy(text + len - 3, "?\n", 2);
	assert_int_equal(analyze_text(cfg, text, len - 1, 0, &a), LOMAS_EFORMAT);
	{
		char msg[1024];
		snprintf(msg, sizeof msg, "%s", lomas_error_message());
		assert_int_equal(analyze_text(cfg, text, len - 1, 1024, &b), LOMAS_EFORMAT);
		assert_string_equal(msg, lomas_error_message());
	}
	free(text);
	lomas_config_free(cfg);
}

/* Paths: a file, a missing file, a directory, and "-" for standard input. */
static void test_paths(void **state)
{
	char path[] = "/tmp/lomas_lackey_XXXXXX";
	int fd = mkstemp(path), saved;
	lomas_config *cfg = cfg_period("1");
	lomas_profile *p;
	const char *v;
	(void)state;
	assert_true(fd >= 0);
	assert_int_equal(write(fd, snippet, strlen(snippet)), (ssize_t)strlen(snippet));
	close(fd);
	assert_int_equal(lomas_trace_analyze_lackey(cfg, path, &p), LOMAS_OK);
	assert_int_equal(p->samples.n, 6);
	assert_int_equal(lomas_profile_meta_get(p, "source", &v), LOMAS_OK);
	assert_string_equal(v, path);
	lomas_profile_free(p);

	assert_int_equal(lomas_trace_analyze_lackey(cfg, "/nonexistent/x.trace", &p), LOMAS_ENOENT);
	assert_null(p);
	assert_non_null(strstr(lomas_error_message(), "/nonexistent/x.trace"));
	assert_int_equal(lomas_trace_analyze_lackey(cfg, "/tmp", &p), LOMAS_EIO);
	assert_non_null(strstr(lomas_error_message(), "/tmp"));
	assert_int_equal(lomas_trace_analyze_lackey(cfg, NULL, &p), LOMAS_EINVAL);
	assert_int_equal(lomas_trace_analyze_lackey(cfg, path, NULL), LOMAS_EINVAL);
	assert_int_equal(lomas_trace_analyze_lackey_stream(cfg, NULL, "x", &p), LOMAS_EINVAL);

	/* standard input */
	saved = dup(0);
	fd = open(path, O_RDONLY);
	assert_true(saved >= 0 && fd >= 0);
	assert_int_equal(dup2(fd, 0), 0);
	close(fd);
	clearerr(stdin);
	assert_int_equal(lomas_trace_analyze_lackey(cfg, "-", &p), LOMAS_OK);
	assert_int_equal(dup2(saved, 0), 0);
	close(saved);
	clearerr(stdin);
	assert_int_equal(p->samples.n, 6);
	assert_int_equal(p->samples.items[2].end, 3);
	assert_int_equal(lomas_profile_meta_get(p, "source", &v), LOMAS_OK);
	assert_string_equal(v, "-");
	lomas_profile_free(p);
	unlink(path);
	lomas_config_free(cfg);
}

/* One reference of the independent parse. */
typedef struct vref {
	uint64_t addr, pc;
	int kind;
} vref;

/* A trace written by valgrind itself, checked against sscanf and a brute-force scan. */
static void test_valgrind(void **state)
{
	char path[] = "/tmp/lomas_vg_XXXXXX", cmd[512], line[512];
	int fd;
	FILE *f;
	vref *r = NULL;
	size_t n = 0, cap = 0;
	uint64_t pc = 0;
	lomas_config *cfg = cfg_period("1");
	lomas_profile *p;
	(void)state;
	if (system("valgrind --version >/dev/null 2>&1") != 0) {
		lomas_config_free(cfg);
		skip();
	}
	fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	snprintf(cmd, sizeof cmd,
	         "valgrind --tool=lackey --trace-mem=yes --log-file=%s /bin/true >/dev/null 2>&1",
	         path);
	assert_int_equal(system(cmd), 0);
	f = fopen(path, "r");
	assert_non_null(f);
	while (fgets(line, sizeof line, f)) {
		unsigned long long a;
		unsigned long sz;
		char op;
		if (line[0] == '=')
			continue;
		if (sscanf(line, "I %llx,%lu", &a, &sz) == 2) {
			pc = a;
			continue;
		}
		assert_int_equal(sscanf(line, " %c %llx,%lu", &op, &a, &sz), 3);
		for (int k = 0; k < (op == 'M' ? 2 : 1); k++) {
			if (n == cap) {
				cap = cap ? cap * 2 : 4096;
				r = realloc(r, cap * sizeof *r);
				assert_non_null(r);
			}
			r[n].addr = a;
			r[n].pc = pc;
			r[n].kind = op == 'S' || (op == 'M' && k == 1);
			n++;
		}
	}
	fclose(f);
	assert_true(n > 1000);
	assert_int_equal(lomas_trace_analyze_lackey(cfg, path, &p), LOMAS_OK);
	assert_int_equal(p->threads.items[0].refs, n);
	assert_int_equal(p->samples.n, n);
	for (size_t i = 0; i < n; i++) {
		const lomas_sample *s = &p->samples.items[i];
		size_t j;
		assert_int_equal(s->start, i);
		assert_int_equal(s->addr, r[i].addr);
		assert_int_equal(s->start_pc, r[i].pc);
		assert_int_equal(s->kind, r[i].kind);
		for (j = i + 1; j < n && r[j].addr / 64 != r[i].addr / 64; j++)
			;
		if (j < n) {
			assert_int_equal(s->state, LOMAS_SAMPLE_REUSED);
			assert_int_equal(s->end, j);
			assert_int_equal(s->end_pc, r[j].pc);
		} else {
			assert_int_equal(s->state, LOMAS_SAMPLE_DANGLING);
		}
	}
	lomas_profile_free(p);
	free(r);
	unlink(path);
	lomas_config_free(cfg);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_snippet),
	    cmocka_unit_test(test_malformed),
	    cmocka_unit_test(test_line_ends),
	    cmocka_unit_test(test_split_reads),
	    cmocka_unit_test(test_paths),
	    cmocka_unit_test(test_valgrind),
	    cmocka_unit_test(test_valgrind_prefixes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * Unit tests for lomas_profile_export (lib/core/export.c): JSON parsed back
 * with jansson and checked against the profile, CSV parsed field by field,
 * output errors.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

static const char *const meta_keys[] = {"command", "quote\"key", "odd", "utf8", "empty"};
static const char *const meta_vals[] = {
    "./prog --name=\"x y\" C:\\path\\to",
    "back\\slash",
    "line1\nline2\r\ttab \x01 ctrl",
    "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xe6\x97\xa5\xe6\x9c\xac",
    "",
};
#define NMETA (sizeof meta_keys / sizeof meta_keys[0])

/* 2 threads, 3 windows, 12 samples over all states and kinds. */
static lomas_profile *make_profile(void)
{
	lomas_profile *p;
	static const uint32_t wthread[3] = {0, 1, 1};
	assert_int_equal(lomas_profile_new(64, &p), LOMAS_OK);
	for (uint32_t t = 0; t < 2; t++) {
		lomas_thread th = {.tid = 4242 + t, .refs = 77777 + t};
		assert_int_equal(profile_add_thread(p, &th), LOMAS_OK);
	}
	for (uint32_t w = 0; w < 3; w++) {
		lomas_window win = {.start = 1000 * w, .refs = 1000 + w, .thread = wthread[w]};
		assert_int_equal(profile_add_window(p, &win), LOMAS_OK);
	}
	for (uint32_t i = 0; i < 12; i++) {
		lomas_sample s = {0};
		s.window = i % 3;
		s.thread = wthread[s.window];
		s.start = 10 + i * 11;
		s.state = (uint8_t)(i % 3);
		s.end = s.state == LOMAS_SAMPLE_DANGLING ? LOMAS_CLOCK_NONE : s.start + 2 + i;
		s.addr = 0xffff800000000000ull + i * 8; /* above INT64_MAX: hex strings */
		s.start_pc = 0x400000 + i;
		s.end_pc = s.state == LOMAS_SAMPLE_REUSED ? 0x500000 + i : 0;
		s.weight = 1.0 / (i + 3); /* needs all 17 digits to round-trip */
		s.kind = (uint8_t)(i % 2);
		s.flags = i % 4 == 1 ? LOMAS_SAMPLE_CROSS_THREAD : 0;
		assert_int_equal(profile_add_sample(p, &s), LOMAS_OK);
	}
	for (size_t i = 0; i < NMETA; i++)
		assert_int_equal(lomas_profile_meta_set(p, meta_keys[i], meta_vals[i]), LOMAS_OK);
	assert_int_equal(profile_set_calib(p, "step.fault", 2500.25), LOMAS_OK);
	assert_int_equal(profile_set_calib(p, "bad", NAN), LOMAS_OK);
	prof_map m = {.start = 0x400000,
	              .end = 0x452000,
	              .offset = 0x1000,
	              .prot = 5,
	              .path = "/bin/with \"quote\""};
	assert_int_equal(profile_add_map(p, &m), LOMAS_OK);
	return p;
}

/* Export into a malloc'd NUL-terminated string. */
static char *export_str(const lomas_profile *p, lomas_export_format fmt)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	assert_non_null(f);
	assert_int_equal(lomas_profile_export(p, fmt, f), LOMAS_OK);
	assert_int_equal(fclose(f), 0);
	return buf;
}

static uint64_t hex_value(json_t *v)
{
	const char *s = json_string_value(v);
	assert_non_null(s);
	assert_true(strncmp(s, "0x", 2) == 0);
	return strtoull(s + 2, NULL, 16);
}

static const char *const state_names[] = {"reused", "dangling", "censored"};
static const char *const kind_names[] = {"load", "store"};

static void test_json(void **state)
{
	lomas_profile *p = make_profile();
	char *text = export_str(p, LOMAS_EXPORT_JSON);
	json_error_t err;
	json_t *root = json_loads(text, 0, &err), *v, *arr;
	(void)state;
	if (!root)
		fail_msg("JSON does not parse: %s at line %d: %s", err.text, err.line, text);
	assert_string_equal(json_string_value(json_object_get(root, "format")), "lomas-profile");
	assert_int_equal(json_integer_value(json_object_get(root, "version")), 1);
	assert_int_equal(json_integer_value(json_object_get(root, "line_size")), 64);

	v = json_object_get(root, "meta");
	assert_true(json_is_object(v));
	assert_int_equal(json_object_size(v), NMETA);
	for (size_t i = 0; i < NMETA; i++) {
		json_t *s = json_object_get(v, meta_keys[i]);
		assert_non_null(s);
		assert_string_equal(json_string_value(s), meta_vals[i]);
	}

	v = json_object_get(root, "calibration");
	assert_true(json_real_value(json_object_get(v, "step.fault")) == 2500.25);
	assert_true(json_is_null(json_object_get(v, "bad")));

	arr = json_object_get(root, "threads");
	assert_int_equal(json_array_size(arr), 2);
	for (size_t i = 0; i < 2; i++) {
		v = json_array_get(arr, i);
		assert_int_equal(json_integer_value(json_object_get(v, "tid")), 4242 + i);
		assert_int_equal(json_integer_value(json_object_get(v, "refs")), 77777 + i);
	}
	arr = json_object_get(root, "windows");
	assert_int_equal(json_array_size(arr), 3);
	for (size_t i = 0; i < 3; i++) {
		v = json_array_get(arr, i);
		assert_int_equal(json_integer_value(json_object_get(v, "start")), 1000 * i);
		assert_int_equal(json_integer_value(json_object_get(v, "refs")), 1000 + i);
		assert_int_equal(json_integer_value(json_object_get(v, "thread")), i == 0 ? 0 : 1);
	}

	arr = json_object_get(root, "samples");
	assert_int_equal(json_array_size(arr), p->samples.n);
	for (size_t i = 0; i < p->samples.n; i++) {
		const lomas_sample *s = &p->samples.items[i];
		v = json_array_get(arr, i);
		assert_int_equal(json_object_size(v), 12);
		assert_int_equal(json_integer_value(json_object_get(v, "thread")), s->thread);
		assert_int_equal(json_integer_value(json_object_get(v, "window")), s->window);
		assert_int_equal(json_integer_value(json_object_get(v, "start")), s->start);
		assert_string_equal(json_string_value(json_object_get(v, "state")),
		                    state_names[i % 3]);
		assert_string_equal(json_string_value(json_object_get(v, "kind")),
		                    kind_names[i % 2]);
		if (i % 3 == 1) { /* dangling: no end, no distance */
			assert_true(json_is_null(json_object_get(v, "end")));
			assert_true(json_is_null(json_object_get(v, "distance")));
		} else {
			assert_int_equal(json_integer_value(json_object_get(v, "end")),
			                 10 + i * 11 + 2 + i);
			if (i % 3 == 0) /* reused: references strictly between = 1 + i */
				assert_int_equal(json_integer_value(json_object_get(v, "distance")),
				                 1 + i);
			else
				assert_true(json_is_null(json_object_get(v, "distance")));
		}
		assert_int_equal(hex_value(json_object_get(v, "addr")),
		                 0xffff800000000000ull + i * 8);
		assert_int_equal(hex_value(json_object_get(v, "start_pc")), 0x400000 + i);
		assert_int_equal(hex_value(json_object_get(v, "end_pc")),
		                 i % 3 == 0 ? 0x500000 + i : 0);
		assert_true(json_real_value(json_object_get(v, "weight")) == 1.0 / (i + 3));
		assert_true(json_is_boolean(json_object_get(v, "cross_thread")));
		assert_int_equal(json_is_true(json_object_get(v, "cross_thread")), i % 4 == 1);
	}

	arr = json_object_get(root, "maps");
	assert_int_equal(json_array_size(arr), 1);
	v = json_array_get(arr, 0);
	assert_int_equal(hex_value(json_object_get(v, "start")), 0x400000);
	assert_int_equal(hex_value(json_object_get(v, "end")), 0x452000);
	assert_int_equal(hex_value(json_object_get(v, "offset")), 0x1000);
	assert_int_equal(json_integer_value(json_object_get(v, "prot")), 5);
	assert_string_equal(json_string_value(json_object_get(v, "path")), "/bin/with \"quote\"");

	json_decref(root);
	free(text);
	lomas_profile_free(p);
}

static void test_json_odd_values(void **state)
{
	lomas_profile *p;
	lomas_thread th = {.tid = UINT64_MAX, .refs = 5};
	lomas_window w = {0};
	char *text;
	json_t *root;
	(void)state;
	assert_int_equal(lomas_profile_new(8, &p), LOMAS_OK);
	assert_int_equal(profile_add_thread(p, &th), LOMAS_OK);
	assert_int_equal(profile_add_window(p, &w), LOMAS_OK);
	/* Not UTF-8: the bytes 0xff and a lone continuation byte. */
	assert_int_equal(lomas_profile_meta_set(p, "raw",
	                                        "a\xff"
	                                        "b\x80"),
	                 LOMAS_OK);
	text = export_str(p, LOMAS_EXPORT_JSON);
	root = json_loads(text, 0, NULL);
	assert_non_null(root);
	/* A u64 beyond JSON's signed range is a decimal string, not a wrapped number. */
	assert_string_equal(json_string_value(json_object_get(
	                        json_array_get(json_object_get(root, "threads"), 0), "tid")),
	                    "18446744073709551615");
	assert_string_equal(
	    json_string_value(json_object_get(json_object_get(root, "meta"), "raw")),
	    "a\xef\xbf\xbd"
	    "b\xef\xbf\xbd");
	assert_int_equal(json_array_size(json_object_get(root, "samples")), 0);
	json_decref(root);
	free(text);
	lomas_profile_free(p);
}

/* Split s at sep in place into at most max fields; returns the count. */
static size_t split(char *s, char sep, char **f, size_t max)
{
	size_t n = 0;
	f[n++] = s;
	for (char *c = s; *c && n < max; c++) {
		if (*c == sep) {
			*c = '\0';
			f[n++] = c + 1;
		}
	}
	return n;
}

static void test_csv(void **state)
{
	lomas_profile *p = make_profile();
	char *text = export_str(p, LOMAS_EXPORT_CSV), *lines[64], *f[16];
	size_t nl;
	(void)state;
	nl = split(text, '\n', lines, 64);
	assert_int_equal(nl, p->samples.n + 2); /* header, rows, "" after the final newline */
	assert_string_equal(lines[nl - 1], "");
	assert_string_equal(
	    lines[0], "thread,window,start,end,distance,state,kind,addr,start_pc,end_pc,weight");
	for (size_t i = 0; i < p->samples.n; i++) {
		const lomas_sample *s = &p->samples.items[i];
		assert_int_equal(split(lines[i + 1], ',', f, 16), 11);
		assert_int_equal(strtoull(f[0], NULL, 10), s->thread);
		assert_int_equal(strtoull(f[1], NULL, 10), s->window);
		assert_int_equal(strtoull(f[2], NULL, 10), 10 + i * 11);
		if (i % 3 == 1) {
			assert_string_equal(f[3], "");
			assert_string_equal(f[4], "");
		} else {
			assert_int_equal(strtoull(f[3], NULL, 10), 10 + i * 11 + 2 + i);
			if (i % 3 == 0)
				assert_int_equal(strtoull(f[4], NULL, 10), 1 + i);
			else
				assert_string_equal(f[4], "");
		}
		assert_string_equal(f[5], state_names[i % 3]);
		assert_string_equal(f[6], kind_names[i % 2]);
		assert_int_equal(strtoull(f[7], NULL, 16), 0xffff800000000000ull + i * 8);
		assert_true(strncmp(f[7], "0x", 2) == 0);
		assert_int_equal(strtoull(f[8], NULL, 16), 0x400000 + i);
		assert_int_equal(strtoull(f[9], NULL, 16), i % 3 == 0 ? 0x500000 + i : 0);
		assert_true(strtod(f[10], NULL) == 1.0 / (i + 3));
	}
	free(text);
	lomas_profile_free(p);
}

static void test_output_errors(void **state)
{
	lomas_profile *p = make_profile();
	FILE *f;
	(void)state;
	f = fopen("/dev/full", "w");
	assert_non_null(f);
	assert_int_equal(lomas_profile_export(p, LOMAS_EXPORT_JSON, f), LOMAS_EIO);
	assert_non_null(strstr(lomas_error_message(), "write error"));
	fclose(f);
	f = fopen("/dev/full", "w");
	assert_non_null(f);
	assert_int_equal(lomas_profile_export(p, LOMAS_EXPORT_CSV, f), LOMAS_EIO);
	fclose(f);
	/* Unbuffered: the very first write fails. */
	f = fopen("/dev/full", "w");
	assert_non_null(f);
	setvbuf(f, NULL, _IONBF, 0);
	assert_int_equal(lomas_profile_export(p, LOMAS_EXPORT_JSON, f), LOMAS_EIO);
	fclose(f);
	/* A stream opened for reading only. */
	f = fopen("/dev/null", "r");
	assert_non_null(f);
	assert_int_equal(lomas_profile_export(p, LOMAS_EXPORT_CSV, f), LOMAS_EIO);
	fclose(f);
	assert_int_equal(lomas_profile_export(p, (lomas_export_format)7, stdout), LOMAS_EINVAL);
	assert_int_equal(lomas_profile_export(NULL, LOMAS_EXPORT_CSV, stdout), LOMAS_EINVAL);
	lomas_profile_free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_json),
	    cmocka_unit_test(test_json_odd_values),
	    cmocka_unit_test(test_csv),
	    cmocka_unit_test(test_output_errors),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

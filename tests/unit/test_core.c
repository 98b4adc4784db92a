/* Unit tests for lib/core: errors, config, rng, crc32, in-memory profile, merge. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>

#include "core/core.h"

static void test_errors(void **state)
{
	(void)state;
	assert_string_equal(lomas_strerror(LOMAS_EFORMAT), "malformed input");
	assert_string_equal(lomas_strerror(12345), "unknown error");
	assert_int_equal(error_set(LOMAS_EINVAL, "bad %s %d", "thing", 7), LOMAS_EINVAL);
	assert_string_equal(lomas_error_message(), "bad thing 7");
	error_prefix(LOMAS_EINVAL, "file %s", "x.lomas");
	assert_string_equal(lomas_error_message(), "file x.lomas: bad thing 7");
	error_clear();
	assert_string_equal(lomas_error_message(), "");
	assert_int_equal(lomas_version_number(), LOMAS_VERSION_NUMBER);
	assert_string_equal(lomas_version(), LOMAS_VERSION_STRING);
}

/* text_escape on what a hostile file or path can hold; expected text written out by hand. */
static void test_text_escape(void **state)
{
	static const struct {
		const char *in;
		const char *out;
	} cases[] = {
	    {"plain text / path.lomas", "plain text / path.lomas"},
	    {"back\\slash \\x41 stays", "back\\slash \\x41 stays"},
	    {"\x1b]0;title\x07", "\\x1b]0;title\\x07"},
	    {"a\rb\nc\td", "a\\rb\\nc\\td"},
	    {"\x01\x1f\x7f", "\\x01\\x1f\\x7f"},
	    {"raw C1 \x9b"
	     "31m",
	     "raw C1 \\x9b31m"}, /* not UTF-8 */
	    {"UTF-8 C1 \xc2\x9b"
	     "31m \xc2\x85",
	     "UTF-8 C1 \\u009b31m \\u0085"}, /* CSI, NEL */
	    {"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80",
	     "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"},
	    {"\xe2\x80\xae rtl \xe2\x81\xa6x\xe2\x81\xa9 \xe2\x80\xa8",
	     "\\u202e rtl \\u2066x\\u2069 \\u2028"},
	    {"\xe2\x80\x8f\xe2\x80\x8e", "\\u200f\\u200e"},
	    {"overlong \xc0\xaf \xe0\x80\xaf", "overlong \\xc0\\xaf \\xe0\\x80\\xaf"},
	    {"surrogate \xed\xa0\x80", "surrogate \\xed\\xa0\\x80"},
	    {"above U+10FFFF \xf4\x90\x80\x80", "above U+10FFFF \\xf4\\x90\\x80\\x80"},
	    {"cut \xe2\x82", "cut \\xe2\\x82"},
	    {"", ""},
	};
	char out[256], again[256];
	(void)state;
	for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
		size_t n = text_escape(out, sizeof out, cases[i].in, strlen(cases[i].in));
		assert_string_equal(out, cases[i].out);
		assert_int_equal(n, strlen(out));
		/* Escaping twice changes nothing (messages are built from messages). */
		text_escape(again, sizeof again, out, strlen(out));
		assert_string_equal(again, out);
	}
	/* An embedded NUL (len says so) is escaped too, not an end. */
	text_escape(out, sizeof out, "a\0b", 3);
	assert_string_equal(out, "a\\x00b");
	/* Cut only at whole characters and escapes. */
	assert_int_equal(text_escape(out, 6, "ab\x1b", 3), 2);
	assert_string_equal(out, "ab");
	assert_int_equal(text_escape(out, 4, "\xc3\xa9\xc3\xa9", 4), 2);
	assert_string_equal(out, "\xc3\xa9");
	assert_int_equal(text_escape(out, 1, "abc", 3), 0);
	assert_string_equal(out, "");
	/* Every message goes through it: error_set, error_prefix. */
	error_set(LOMAS_EFORMAT, "%s: bad key '%s'", "x\x1b[2J.lomas", "k\rv");
	assert_string_equal(lomas_error_message(), "x\\x1b[2J.lomas: bad key 'k\\rv'");
	error_prefix(LOMAS_EFORMAT, "in \x07%s", "z");
	assert_string_equal(lomas_error_message(), "in \\x07z: x\\x1b[2J.lomas: bad key 'k\\rv'");
	error_clear();
}

static void *set_and_hold(void *arg)
{
	pthread_barrier_t *b = arg;
	error_set(LOMAS_EIO, "thread message");
	pthread_barrier_wait(&b[0]); /* set */
	pthread_barrier_wait(&b[1]); /* the main thread cleared its own */
	/* Another thread's error_clear never touches this thread's message. */
	if (strcmp(lomas_error_message(), "thread message") != 0)
		return (void *)1;
	error_clear();
	return lomas_error_message()[0] ? (void *)2 : NULL;
}

/* The message is per thread; error_clear's shortcut (no message anywhere) stays exact. */
static void test_error_per_thread(void **state)
{
	pthread_barrier_t b[2];
	pthread_t t;
	void *ret;
	(void)state;
	error_clear();
	assert_int_equal(atomic_load(&error_pending), 0);
	pthread_barrier_init(&b[0], NULL, 2);
	pthread_barrier_init(&b[1], NULL, 2);
	assert_int_equal(pthread_create(&t, NULL, set_and_hold, b), 0);
	pthread_barrier_wait(&b[0]);
	assert_string_equal(lomas_error_message(), ""); /* not ours */
	error_set(LOMAS_EINVAL, "main message");
	assert_int_equal(atomic_load(&error_pending), 2);
	error_clear();
	assert_string_equal(lomas_error_message(), "");
	assert_int_equal(atomic_load(&error_pending), 1);
	pthread_barrier_wait(&b[1]);
	assert_int_equal(pthread_join(t, &ret), 0);
	assert_null(ret);
	assert_int_equal(atomic_load(&error_pending), 0);
	/* Set, overwritten, prefixed: still one thread with a message. */
	error_set(LOMAS_EIO, "a");
	error_set(LOMAS_EIO, "b");
	error_prefix(LOMAS_EIO, "c");
	assert_int_equal(atomic_load(&error_pending), 1);
	error_clear();
	error_clear();
	assert_int_equal(atomic_load(&error_pending), 0);
	pthread_barrier_destroy(&b[0]);
	pthread_barrier_destroy(&b[1]);
}

static void test_config(void **state)
{
	lomas_config *cfg;
	char buf[64];
	(void)state;
	assert_int_equal(lomas_config_new(&cfg), LOMAS_OK);
	assert_int_equal(lomas_config_get(cfg, "period", buf, sizeof buf), LOMAS_OK);
	assert_string_equal(buf, "auto");
	assert_int_equal(lomas_config_set(cfg, "period", "200"), LOMAS_OK);
	assert_int_equal(lomas_config_get(cfg, "period", buf, sizeof buf), LOMAS_OK);
	assert_string_equal(buf, "200");
	assert_int_equal(lomas_config_set(cfg, "period", "1k"), LOMAS_OK);
	assert_int_equal(cfg->period_refs, 1000);
	assert_int_equal(lomas_config_set(cfg, "period", "0"), LOMAS_EINVAL);
	assert_non_null(strstr(lomas_error_message(), "period"));
	assert_int_equal(lomas_config_set(cfg, "period", "-5"), LOMAS_EINVAL);
	assert_int_equal(lomas_config_set(cfg, "period", "12x"), LOMAS_EINVAL);
	assert_int_equal(cfg->period_refs, 1000); /* unchanged by bad values */
	assert_int_equal(lomas_config_set(cfg, "line_size", "96"), LOMAS_EINVAL);
	assert_int_equal(lomas_config_set(cfg, "line_size", "4"), LOMAS_EINVAL);
	assert_int_equal(lomas_config_set(cfg, "line_size", "128"), LOMAS_OK);
	assert_int_equal(cfg->line_size, 128);
	/* line_bytes is the key's name; line_size its deprecated alias, the same setting. */
	assert_int_equal(lomas_config_set(cfg, "line_bytes", "32"), LOMAS_OK);
	assert_int_equal(lomas_config_get(cfg, "line_size", buf, sizeof buf), LOMAS_OK);
	assert_string_equal(buf, "32");
	assert_int_equal(lomas_config_set(cfg, "line_bytes", "96"), LOMAS_EINVAL);
	assert_non_null(strstr(lomas_error_message(), "line_bytes"));
	assert_int_equal(lomas_config_set(cfg, "line_size", "128"), LOMAS_OK);
	assert_int_equal(lomas_config_get(cfg, "line_bytes", buf, sizeof buf), LOMAS_OK);
	assert_string_equal(buf, "128");
	assert_int_equal(lomas_config_set(cfg, "seed", "0xff"), LOMAS_OK);
	assert_int_equal(cfg->seed, 255);
	assert_int_equal(lomas_config_set(cfg, "seed", "18446744073709551616"), LOMAS_EINVAL);
	assert_int_equal(lomas_config_set(cfg, "clock", "step"), LOMAS_OK);
	assert_int_equal(lomas_config_get(cfg, "clock", buf, sizeof buf), LOMAS_OK);
	assert_string_equal(buf, "step");
	assert_int_equal(lomas_config_set(cfg, "clock", "sundial"), LOMAS_EINVAL);
	assert_int_equal(cfg->clock, CLOCK_STEP);
	assert_int_equal(lomas_config_set(cfg, "watch", "debugreg"), LOMAS_OK);
	assert_int_equal(cfg->watch, WATCH_DEBUGREG);
	assert_int_equal(lomas_config_set(cfg, "max_skid", "10"), LOMAS_OK);
	assert_int_equal(cfg->max_skid, 10);
	assert_int_equal(lomas_config_set(cfg, "max_skid", "99999"), LOMAS_EINVAL);
	assert_int_equal(lomas_config_set(cfg, "colour", "red"), LOMAS_EINVAL);
	assert_non_null(strstr(lomas_error_message(), "colour"));
	assert_int_equal(lomas_config_get(cfg, "colour", buf, sizeof buf), LOMAS_ENOENT);
	assert_int_equal(lomas_config_get(cfg, "seed", buf, 2), LOMAS_ERANGE);
	lomas_config_free(cfg);
}

static void test_rng(void **state)
{
	rng a, b;
	double sum = 0, sumsq = 0;
	const int n = 200000;
	const double mean = 100.0;
	(void)state;
	rng_seed(&a, 42);
	rng_seed(&b, 42);
	for (int i = 0; i < 100; i++)
		assert_true(rng_next(&a) == rng_next(&b));
	for (int i = 0; i < 100000; i++) {
		double u = rng_uniform(&a);
		assert_true(u > 0.0 && u <= 1.0);
	}
	for (int i = 0; i < n; i++) {
		uint64_t g = rng_gap(&a, mean);
		assert_true(g >= 1);
		sum += (double)g;
		sumsq += (double)g * (double)g;
	}
	/* Geometric with p = 1/mean: mean 100, variance (1-p)/p^2 = 9900. */
	double m = sum / n, var = sumsq / n - m * m;
	assert_true(fabs(m - mean) < 4 * sqrt(9900.0 / n));
	assert_true(fabs(var - 9900.0) < 0.05 * 9900.0);
	assert_int_equal(rng_gap(&a, 1.0), 1);
	assert_int_equal(rng_gap(&a, 0.5), 1);
}

/* The two-step gap draws exactly what rng_gap draws, mean <= 1 included (no draw). */
static void test_rng_gap_with(void **state)
{
	const double means[] = {0.5, 1.0, 1.5, 64.0, 1000.0, 3.3e6, 1e18};
	(void)state;
	for (size_t m = 0; m < sizeof means / sizeof *means; m++) {
		rng a, b;
		double l = rng_gap_log(means[m]);
		rng_seed(&a, 7 + m);
		rng_seed(&b, 7 + m);
		for (int i = 0; i < 5000; i++)
			assert_true(rng_gap(&a, means[m]) == rng_gap_with(&b, l));
		assert_true(rng_next(&a) == rng_next(&b)); /* same number of draws */
	}
}

static void test_crc32(void **state)
{
	(void)state;
	assert_int_equal(crc32_update(0, "123456789", 9), 0xCBF43926u);
	uint32_t c = crc32_update(0, "1234", 4);
	assert_int_equal(crc32_update(c, "56789", 5), 0xCBF43926u);
	assert_int_equal(crc32_update(0, "", 0), 0);
}

/* Bit at a time, straight from the definition: the ground truth for both paths. */
static uint32_t crc32_bitwise(uint32_t crc, const unsigned char *p, size_t len)
{
	crc = ~crc;
	while (len--) {
		crc ^= *p++;
		for (int k = 0; k < 8; k++)
			crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
	}
	return ~crc;
}

static void test_crc32_paths_agree_with_the_definition(void **state)
{
	enum { MAX = 5000 };
	unsigned char *buf = malloc(MAX + 16);
	uint64_t x = 0x9e3779b97f4a7c15ull;
	(void)state;
	assert_non_null(buf);
	for (size_t i = 0; i < MAX + 16; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		buf[i] = (unsigned char)x;
	}
	for (int portable = 0; portable < 2; portable++) {
		crc32_force_portable(portable);
		for (size_t len = 0; len <= MAX; len += len < 300 ? 1 : 97)
			for (size_t off = 0; off < 16; off += 5) {
				uint32_t want = crc32_bitwise(0, buf + off, len);
				assert_int_equal(crc32_update(0, buf + off, len), want);
				/* Chained in two pieces, the split anywhere. */
				size_t cut = len / 3;
				uint32_t c = crc32_update(0, buf + off, cut);
				assert_int_equal(crc32_update(c, buf + off + cut, len - cut), want);
			}
	}
	crc32_force_portable(0);
	free(buf);
}

/* A profile with one thread, two windows and three samples. */
static lomas_profile *small_profile(const char *command)
{
	lomas_profile *p;
	lomas_thread t = {.tid = 7, .refs = 1000};
	lomas_window w0 = {.start = 0, .refs = 500, .thread = 0};
	lomas_window w1 = {.start = 500, .refs = 500, .thread = 0};
	lomas_sample s = {.start = 10,
	                  .end = 20,
	                  .addr = 0x1000,
	                  .weight = 100,
	                  .thread = 0,
	                  .window = 0,
	                  .kind = LOMAS_REF_LOAD,
	                  .state = LOMAS_SAMPLE_REUSED};
	assert_int_equal(lomas_profile_new(64, &p), LOMAS_OK);
	assert_int_equal(profile_add_thread(p, &t), LOMAS_OK);
	assert_int_equal(profile_add_window(p, &w0), LOMAS_OK);
	assert_int_equal(profile_add_window(p, &w1), LOMAS_OK);
	assert_int_equal(profile_add_sample(p, &s), LOMAS_OK);
	s.start = 600;
	s.end = LOMAS_CLOCK_NONE;
	s.window = 1;
	s.state = LOMAS_SAMPLE_DANGLING;
	assert_int_equal(profile_add_sample(p, &s), LOMAS_OK);
	s.start = 700;
	s.end = 900;
	s.state = LOMAS_SAMPLE_CENSORED;
	assert_int_equal(profile_add_sample(p, &s), LOMAS_OK);
	if (command)
		assert_int_equal(lomas_profile_meta_set(p, "command", command), LOMAS_OK);
	return p;
}

static void test_profile(void **state)
{
	lomas_profile *p = small_profile("./a.out");
	lomas_profile_info info = LOMAS_PROFILE_INFO_INIT;
	const char *v, *k;
	lomas_sample out[8];
	size_t copied;
	(void)state;
	assert_int_equal(lomas_profile_new(48, &(lomas_profile *){NULL}), LOMAS_EINVAL);
	assert_int_equal(profile_validate(p), LOMAS_OK);
	assert_int_equal(lomas_profile_info_get(p, &info), LOMAS_OK);
	assert_int_equal(info.samples, 3);
	assert_int_equal(info.reused, 1);
	assert_int_equal(info.dangling, 1);
	assert_int_equal(info.censored, 1);
	assert_int_equal(info.refs, 1000);
	assert_true(info.sample_weight == 300.0);
	assert_int_equal(sample_distance(&p->samples.items[0]), 9);

	assert_int_equal(lomas_profile_meta_get(p, "command", &v), LOMAS_OK);
	assert_string_equal(v, "./a.out");
	assert_int_equal(lomas_profile_meta_set(p, "command", "./b.out"), LOMAS_OK);
	assert_int_equal(lomas_profile_meta_count(p), 1);
	assert_int_equal(lomas_profile_meta_at(p, 0, &k, &v), LOMAS_OK);
	assert_string_equal(k, "command");
	assert_string_equal(v, "./b.out");
	assert_int_equal(lomas_profile_meta_at(p, 1, &k, &v), LOMAS_ERANGE);
	assert_int_equal(lomas_profile_meta_get(p, "nope", &v), LOMAS_ENOENT);

	assert_int_equal(lomas_profile_samples(p, 1, 8, out, &copied), LOMAS_OK);
	assert_int_equal(copied, 2);
	assert_int_equal(out[0].start, 600);
	assert_int_equal(lomas_profile_samples(p, 3, 8, out, &copied), LOMAS_OK);
	assert_int_equal(copied, 0);
	assert_int_equal(lomas_profile_samples(p, 4, 8, out, &copied), LOMAS_ERANGE);

	/* Validation catches each kind of inconsistency. */
	p->samples.items[0].window = 9;
	assert_int_equal(profile_validate(p), LOMAS_EFORMAT);
	assert_non_null(strstr(lomas_error_message(), "sample 0"));
	p->samples.items[0].window = 0;
	p->samples.items[0].end = 5;
	assert_int_equal(profile_validate(p), LOMAS_EFORMAT);
	p->samples.items[0].end = 20;
	p->samples.items[0].weight = NAN;
	assert_int_equal(profile_validate(p), LOMAS_EFORMAT);
	p->samples.items[0].weight = 100;
	p->windows.items[1].thread = 3;
	assert_int_equal(profile_validate(p), LOMAS_EFORMAT);
	lomas_profile_free(p);
}

/*
 * lomas_profile_info is a sized struct (lomas.h, "Structs the library
 * fills"): a caller built against a shorter, older struct gets only the
 * bytes it declared; one built against a longer, newer one gets ours and
 * learns from size where they end; a size left 0 is refused, nothing
 * written. The values checked are small_profile's, counted by hand.
 */
static void test_sized_profile_info(void **state)
{
	lomas_profile *p = small_profile(NULL);
	const size_t ours = sizeof(lomas_profile_info);
	unsigned char buf[sizeof(lomas_profile_info) + 32];
	lomas_profile_info full = LOMAS_PROFILE_INFO_INIT;
	uint32_t size;
	(void)state;
	assert_int_equal(full.size, ours);
	assert_int_equal(lomas_profile_info_get(p, &full), LOMAS_OK);
	assert_int_equal(full.size, ours);

	/* An older caller: size, line_bytes and samples only (16 bytes). */
	memset(buf, 0xa5, sizeof buf);
	size = 16;
	memcpy(buf, &size, sizeof size);
	assert_int_equal(lomas_profile_info_get(p, (lomas_profile_info *)(void *)buf), LOMAS_OK);
	memcpy(&size, buf, sizeof size);
	assert_int_equal(size, 16);
	assert_int_equal(((lomas_profile_info *)(void *)buf)->line_bytes, 64);
	assert_int_equal(((lomas_profile_info *)(void *)buf)->samples, 3);
	for (size_t i = 16; i < sizeof buf; i++)
		assert_int_equal(buf[i], 0xa5);

	/* A newer caller with 32 more bytes: ours filled, size says where they end. */
	memset(buf, 0xa5, sizeof buf);
	size = (uint32_t)sizeof buf;
	memcpy(buf, &size, sizeof size);
	assert_int_equal(lomas_profile_info_get(p, (lomas_profile_info *)(void *)buf), LOMAS_OK);
	memcpy(&size, buf, sizeof size);
	assert_int_equal(size, ours);
	assert_memory_equal(buf, &full, ours);
	for (size_t i = ours; i < sizeof buf; i++)
		assert_int_equal(buf[i], 0xa5);

	/* size not set: EINVAL naming the field, nothing else written. */
	memset(buf, 0, sizeof buf);
	assert_int_equal(lomas_profile_info_get(p, (lomas_profile_info *)(void *)buf),
	                 LOMAS_EINVAL);
	assert_non_null(strstr(lomas_error_message(), "size"));
	for (size_t i = 0; i < sizeof buf; i++)
		assert_int_equal(buf[i], 0);
	lomas_profile_free(p);
}

/* Every _free of NULL is a harmless no-op and leaves the thread's message. */
static void test_free_null(void **state)
{
	(void)state;
	error_set(LOMAS_EIO, "kept");
	lomas_config_free(NULL);
	lomas_profile_free(NULL);
	lomas_hot_list_free(NULL);
	lomas_trace_free(NULL);
	lomas_session_free(NULL);
	lomas_string_free(NULL);
	assert_string_equal(lomas_error_message(), "kept");
	error_clear();
}

static void test_merge(void **state)
{
	lomas_profile *a = small_profile("./a.out");
	lomas_profile *b = small_profile("./a.out");
	lomas_profile *c = small_profile("./other");
	lomas_profile *d;
	(void)state;
	assert_int_equal(lomas_profile_merge(a, b), LOMAS_OK);
	assert_int_equal(a->threads.n, 2);
	assert_int_equal(a->windows.n, 4);
	assert_int_equal(a->samples.n, 6);
	assert_int_equal(a->samples.items[4].window, 3);
	assert_int_equal(a->samples.items[4].thread, 1);
	assert_int_equal(profile_validate(a), LOMAS_OK);
	assert_int_equal(lomas_profile_merge(a, c), LOMAS_EINVAL);
	assert_non_null(strstr(lomas_error_message(), "different programs"));
	assert_int_equal(a->samples.n, 6);
	assert_int_equal(lomas_profile_new(128, &d), LOMAS_OK);
	assert_int_equal(lomas_profile_merge(a, d), LOMAS_EINVAL);
	assert_int_equal(lomas_profile_merge(a, a), LOMAS_EINVAL);
	/* References that would add up past 2^64-1: ERANGE, nothing merged. */
	b->threads.items[0].refs = UINT64_MAX - 1000;
	assert_int_equal(profile_validate(b), LOMAS_OK);
	assert_int_equal(lomas_profile_merge(a, b), LOMAS_ERANGE);
	assert_non_null(strstr(lomas_error_message(), "2^64"));
	assert_int_equal(a->threads.n, 2);
	assert_int_equal(a->samples.n, 6);
	b->threads.items[0].refs = UINT64_MAX - 2000;
	assert_int_equal(lomas_profile_merge(a, b), LOMAS_OK);
	lomas_profile_free(a);
	lomas_profile_free(b);
	lomas_profile_free(c);
	lomas_profile_free(d);
}

/* The weights and reference counts profile_validate lets through (2^-64..2^64). */
static void test_validate_numbers(void **state)
{
	static const struct {
		double w;
		bool ok;
	} weights[] = {
	    {0x1p64, true},
	    {0x1p-64, true},
	    {1.0, true},
	    {0x1p64 * (1 + 0x1p-52), false},
	    {0x1p-64 * (1 - 0x1p-53), false},
	    {DBL_MAX, false},
	    {INFINITY, false},
	    {NAN, false},
	    {0.0, false},
	    {-1.0, false},
	    {5e-324, false},
	};
	lomas_profile *p = small_profile(NULL);
	lomas_thread t2 = {.tid = 8, .refs = 0};
	(void)state;
	for (size_t i = 0; i < sizeof weights / sizeof weights[0]; i++) {
		p->samples.items[1].weight = weights[i].w;
		assert_int_equal(weight_valid(weights[i].w), weights[i].ok);
		assert_int_equal(profile_validate(p), weights[i].ok ? LOMAS_OK : LOMAS_EFORMAT);
		if (!weights[i].ok)
			assert_non_null(strstr(lomas_error_message(), "sample 1: weight"));
	}
	p->samples.items[1].weight = 100;
	assert_int_equal(profile_add_thread(p, &t2), LOMAS_OK);
	p->threads.items[0].refs = UINT64_MAX;
	assert_int_equal(profile_validate(p), LOMAS_OK);
	p->threads.items[1].refs = 1;
	assert_int_equal(profile_validate(p), LOMAS_EFORMAT);
	assert_non_null(strstr(lomas_error_message(), "2^64-1"));
	lomas_profile_free(p);
}

/*
 * The model's scratch blocks (scratch.c): small and big ones usable over
 * their whole length, big_calloc zero even where it reuses a kept (dirty)
 * block, threads taking and returning blocks at once, big_release safe at
 * any time. Under ASan every block is malloc'd: there this checks bounds.
 */
static void *scratch_worker(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg;
	for (int i = 0; i < 50; i++) {
		size_t n = ((size_t)1 << 18) + (size_t)(rand_r(&seed) % (3u << 20));
		unsigned char *p = big_calloc(n, 1);
		if (!p)
			return (void *)1;
		for (size_t j = 0; j < n; j += 4093)
			if (p[j])
				return (void *)2;
		memset(p, 0xa5, n);
		big_free(p);
	}
	return NULL;
}

static void test_scratch(void **state)
{
	(void)state;
	size_t sizes[] = {1, 100, (size_t)256 << 10, ((size_t)2 << 20) - 1, (size_t)5 << 20};
	for (int round = 0; round < 3; round++) {
		for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
			unsigned char *p = big_calloc(sizes[k], 1);
			assert_non_null(p);
			assert_int_equal((uintptr_t)p % 16, 0); /* malloc's alignment at least */
			for (size_t j = 0; j < sizes[k]; j++)
				assert_int_equal(p[j], 0);
			memset(p, 0xff, sizes[k]); /* dirty: the next round's calloc reuses it */
			big_free(p);
			unsigned char *q = big_alloc(sizes[k]);
			assert_non_null(q);
			q[0] = q[sizes[k] - 1] = 1;
			big_free(q);
		}
	}
	assert_null(big_calloc(SIZE_MAX / 2, 4));
	assert_null(big_alloc(SIZE_MAX - 16));
	big_free(NULL);
	pthread_t t[4];
	for (uintptr_t i = 0; i < 4; i++)
		assert_int_equal(pthread_create(&t[i], NULL, scratch_worker, (void *)(i + 1)), 0);
	for (int i = 0; i < 4; i++) {
		void *r;
		assert_int_equal(pthread_join(t[i], &r), 0);
		assert_null(r);
	}
	big_release();
	big_release();
	unsigned char *p = big_calloc((size_t)3 << 20, 1);
	assert_non_null(p);
	assert_int_equal(p[(size_t)3 << 19], 0);
	big_free(p);
	big_release();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_errors),
	    cmocka_unit_test(test_text_escape),
	    cmocka_unit_test(test_error_per_thread),
	    cmocka_unit_test(test_config),
	    cmocka_unit_test(test_rng),
	    cmocka_unit_test(test_crc32),
	    cmocka_unit_test(test_crc32_paths_agree_with_the_definition),
	    cmocka_unit_test(test_rng_gap_with),
	    cmocka_unit_test(test_profile),
	    cmocka_unit_test(test_sized_profile_info),
	    cmocka_unit_test(test_free_null),
	    cmocka_unit_test(test_merge),
	    cmocka_unit_test(test_scratch),
	    cmocka_unit_test(test_validate_numbers),
	};
	return cmocka_run_group_tests_name("core", tests, NULL, NULL);
}

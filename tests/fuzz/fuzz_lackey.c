/*
 * Fuzz target for the Valgrind lackey reader: the input is a trace file.
 * It is read twice, through the public stream function and with the
 * smallest read buffer (lines split across reads); both must agree, and a
 * message never carries a control character.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace/trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Analyze data; on success return the profile, else NULL with *st set. */
static lomas_profile *analyze(const lomas_config *cfg, const uint8_t *data, size_t size,
                              size_t buf_bytes, lomas_status *st, char *msg, size_t msg_len)
{
	lomas_profile *p = NULL;
	/* fmemopen rejects size 0 on some libcs: read one '\n' instead (a blank line). */
	FILE *f = size ? fmemopen((void *)data, size, "r") : fmemopen((void *)"\n", 1, "r");
	if (!f) {
		*st = 1;
		return NULL;
	}
	if (buf_bytes)
		*st = lackey_read_stream(cfg, f, "fuzz", buf_bytes, &p);
	else
		*st = lomas_trace_analyze_lackey_stream(cfg, f, "fuzz", &p);
	fclose(f);
	snprintf(msg, msg_len, "%s", lomas_error_message());
	/* A message quotes the bad line: never a control character (a terminal's escape). */
	for (const unsigned char *c = (const unsigned char *)msg; *c; c++)
		if (*c < 0x20 || *c == 0x7f)
			abort();
	if (*st == LOMAS_OK && (!p || profile_validate(p) != LOMAS_OK))
		abort();
	if (*st != LOMAS_OK && p)
		abort();
	return p;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static lomas_config *cfg;
	lomas_status s1, s2;
	lomas_profile *a, *b;
	char m1[1024], m2[1024];
	if (!cfg) {
		if (lomas_config_new(&cfg) || lomas_config_set(cfg, "period", "3") ||
		    lomas_config_set(cfg, "max_samples_live", "50"))
			abort();
	}
	a = analyze(cfg, data, size, 0, &s1, m1, sizeof m1);
	b = analyze(cfg, data, size, 1, &s2, m2, sizeof m2);
	if (s1 == 1 || s2 == 1) {
		lomas_profile_free(a);
		lomas_profile_free(b);
		return 0;
	}
	/* The read buffer size must not change the result. */
	if (s1 != s2 || strcmp(m1, m2) != 0)
		abort();
	if (a && (a->samples.n != b->samples.n || a->threads.n != b->threads.n ||
	          (a->samples.n && memcmp(a->samples.items, b->samples.items,
	                                  a->samples.n * sizeof(lomas_sample)) != 0)))
		abort();
	lomas_profile_free(a);
	lomas_profile_free(b);
	return 0;
}

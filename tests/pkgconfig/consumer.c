/*
 * A program built only with `pkg-config --cflags --libs lomas`: it feeds a
 * cyclic reference stream over K lines through the trace clock and checks the
 * LRU cliff (every reuse misses below K lines, none above), exactly as any
 * user of the installed library would.
 */
#include <stdio.h>

#include <lomas/lomas.h>

#define K 256

static int fail(const char *what)
{
	fprintf(stderr, "consumer: %s: %s (%s)\n", what, lomas_error_message(), lomas_version());
	return 1;
}

int main(void)
{
	lomas_config *cfg;
	lomas_trace *t;
	lomas_profile *p;
	double below, above;
	if (lomas_version_number() != LOMAS_VERSION_NUMBER)
		return fail("header and library versions differ");
	if (lomas_config_new(&cfg) || lomas_config_set(cfg, "period", "1") ||
	    lomas_trace_new(cfg, &t))
		return fail("setup");
	for (int rep = 0; rep < 20; rep++)
		for (int i = 0; i < K; i++)
			if (lomas_trace_ref(t, 0, 0x10000 + (uint64_t)i * 64, 0x400000,
			                    LOMAS_REF_LOAD))
				return fail("trace_ref");
	if (lomas_trace_finish(t, &p))
		return fail("finish");
	if (lomas_model_miss_ratio(p, LOMAS_POLICY_LRU, (K / 2) * 64, 0, 0, &below) ||
	    lomas_model_miss_ratio(p, LOMAS_POLICY_LRU, (2 * K) * 64, 0, 0, &above))
		return fail("model");
	/* 19 of 20 passes are reuses: 0.95 of all references miss below K lines. */
	printf("lru below=%.4f above=%.4f\n", below, above);
	lomas_profile_free(p);
	lomas_trace_free(t);
	lomas_config_free(cfg);
	return (below > 0.94 && below < 0.96 && above == 0.0) ? 0 : 1;
}

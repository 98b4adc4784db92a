/*
 * Using liblomas from C with nothing but <lomas/lomas.h>: sample a run's
 * memory references, then model its miss-ratio curve for both replacement
 * policies.
 *
 *   embed               feeds the trace clock a synthetic loop: 100 sweeps over
 *                       a 256 KiB array, so LRU misses every reference below
 *                       256 KiB and none above; random replacement falls
 *                       more gently
 *   embed PROFILE       loads a saved profile (lomas-demo record -o, ...)
 *
 * Prints "size_bytes,random,lru" and one line per size. Every call's status
 * is checked; on failure lomas_error_message() says what went wrong.
 */
#include <lomas/lomas.h>
#include <stdint.h>
#include <stdio.h>

#define ARRAY_BYTES (256u * 1024u)
#define SWEEPS 100u

static int fail(const char *what, lomas_status st)
{
	fprintf(stderr, "embed: %s: %s (%s)\n", what, lomas_error_message(), lomas_strerror(st));
	return 1;
}

/* A profile of the synthetic loop: one 8-byte load per 64-byte line. */
static int synthetic_profile(lomas_profile **out)
{
	lomas_config *cfg = NULL;
	lomas_trace *t = NULL;
	lomas_status st;
	const uint64_t base = 0x10000000, pc = 0x401000;
	if ((st = lomas_config_new(&cfg)))
		return fail("lomas_config_new", st);
	if ((st = lomas_config_set(cfg, "period", "100")) ||
	    (st = lomas_config_set(cfg, "seed", "42")) || (st = lomas_trace_new(cfg, &t))) {
		lomas_config_free(cfg);
		return fail("setting up the trace clock", st);
	}
	for (uint32_t s = 0; s < SWEEPS && !st; s++)
		for (uint64_t off = 0; off < ARRAY_BYTES && !st; off += 64)
			st = lomas_trace_ref(t, 0, base + off, pc, LOMAS_REF_LOAD);
	if (!st)
		st = lomas_trace_finish(t, out);
	lomas_trace_free(t); /* both free calls take NULL too */
	lomas_config_free(cfg);
	return st ? fail("tracing the loop", st) : 0;
}

int main(int argc, char **argv)
{
	static const uint64_t sizes[] = {16u << 10, 64u << 10, 128u << 10, 512u << 10, 4u << 20};
	enum { N = sizeof sizes / sizeof sizes[0] };
	double random[N], lru[N];
	lomas_profile *p = NULL;
	lomas_status st;
	if (argc > 2) {
		fprintf(stderr, "usage: embed [PROFILE]\n");
		return 2;
	}
	if (argc == 2) {
		if ((st = lomas_profile_load(argv[1], &p)))
			return fail("lomas_profile_load", st);
	} else if (synthetic_profile(&p)) {
		return 1;
	}
	/* line_bytes 0: the profile's own line size; flags 0: cold misses excluded */
	if ((st = lomas_model_curve(p, LOMAS_POLICY_RANDOM, sizes, N, 0, 0, random)) ||
	    (st = lomas_model_curve(p, LOMAS_POLICY_LRU, sizes, N, 0, 0, lru))) {
		lomas_profile_free(p);
		return fail("lomas_model_curve", st);
	}
	printf("size_bytes,random,lru\n");
	for (size_t i = 0; i < N; i++)
		printf("%llu,%.6f,%.6f\n", (unsigned long long)sizes[i], random[i], lru[i]);
	lomas_profile_free(p);
	return 0;
}

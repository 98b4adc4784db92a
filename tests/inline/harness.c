/*
 * A harness profiling one region with lomas_inline_start/stop, built with
 * `pkg-config --cflags --libs lomas-inline lomas`: it sums an array of n
 * longs r times inside the region and checks the profile (the references of
 * the region, the thread, the model) with liblomas. Prints "harness ok".
 */
#include <stdio.h>
#include <stdlib.h>

#include <lomas/inline.h>
#include <lomas/lomas.h>

#define N 4096
#define R 50

static long sum(volatile long *a)
{
	long s = 0;
	for (int r = 0; r < R; r++)
		for (int i = 0; i < N; i++)
			s += a[i];
	return s;
}

int main(void)
{
	volatile long *a = calloc(N, sizeof *a);
	lomas_config *cfg;
	lomas_profile *p;
	lomas_profile_info info = LOMAS_PROFILE_INFO_INIT;
	double below, above;
	long s;
	if (!a || lomas_config_new(&cfg) || lomas_config_set(cfg, "period", "20"))
		return 1;
	if (lomas_inline_start(cfg) != LOMAS_OK) {
		fprintf(stderr, "start: %s\n", lomas_error_message());
		return 1;
	}
	s = sum(a);
	if (lomas_inline_stop(&p) != LOMAS_OK) {
		fprintf(stderr, "stop: %s\n", lomas_error_message());
		return 1;
	}
	if (lomas_inline_stop(NULL) != LOMAS_ESTATE) {
		fprintf(stderr, "a second stop must fail\n");
		return 1;
	}
	sum(a); /* not profiled */
	lomas_profile_info_get(p, &info);
	/* The region: N x R volatile loads (and nothing else instrumented). */
	printf("refs %llu samples %llu threads %llu\n", (unsigned long long)info.refs,
	       (unsigned long long)info.samples, (unsigned long long)info.threads);
	/* A cyclic sweep over N longs (N*8/64 = 512 lines): LRU misses every reuse below
	 * 512 lines and none above. */
	lomas_model_miss_ratio(p, LOMAS_POLICY_LRU, 256 * 64, 0, 0, &below);
	lomas_model_miss_ratio(p, LOMAS_POLICY_LRU, 1024 * 64, 0, 0, &above);
	printf("lru below=%.3f above=%.3f sum=%ld\n", below, above, s);
	if (info.refs < (unsigned long long)N * R || info.refs > (unsigned long long)N * R + 64 ||
	    info.threads != 1 || info.samples < 5000 || above > 0.001 || below < 0.1) {
		fprintf(stderr, "harness: unexpected profile\n");
		return 1;
	}
	lomas_profile_free(p);
	lomas_config_free(cfg);
	printf("harness ok\n");
	return 0;
}

/*
 * Time-sharing bounds benchmark: lomas_model_thrash_bounds for a 2 MiB LRU
 * cache (C = 32768 lines) and a quantum of 10^7 references, on profiles of
 * about 20k (the default run's size) and 200k samples recorded by the trace
 * clock from a mixture of hot and cold random references; prints the median
 * CPU time of 7 runs against the 100 ms goal (docs/model.md), and that
 * of one LRU curve (the bounds make two: q with cold misses at the span
 * grid, the warm ratio without), the part that grows with the samples.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "lomas/lomas.h"

#define RUNS 7

static double cpu_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static uint64_t next(uint64_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return *x;
}

static lomas_profile *record(uint64_t refs, const char *period)
{
	lomas_config *cfg = NULL;
	lomas_trace *t = NULL;
	lomas_profile *p = NULL;
	uint64_t x = 88172645463325252ull;
	if (lomas_config_new(&cfg) || lomas_config_set(cfg, "period", period) ||
	    lomas_trace_new(cfg, &t))
		return NULL;
	for (uint64_t i = 0; i < refs; i++) {
		uint64_t r = next(&x), line = r % 4 ? (r >> 8) % 20000 : 20000 + (r >> 8) % 200000;
		if (lomas_trace_ref(t, 0, line * 64, 0x1000, LOMAS_REF_LOAD))
			return NULL;
	}
	if (lomas_trace_finish(t, &p))
		p = NULL;
	lomas_trace_free(t);
	lomas_config_free(cfg);
	return p;
}

int main(void)
{
	static const struct {
		uint64_t refs;
		const char *period;
	} runs[] = {{4000000, "200"}, {4000000, "20"}};
	for (size_t k = 0; k < 2; k++) {
		lomas_profile *p = record(runs[k].refs, runs[k].period);
		lomas_profile_info info = LOMAS_PROFILE_INFO_INIT;
		uint64_t quantum = 10000000;
		double ms[RUNS], cm[RUNS], lower = 0, upper = 0, warm = 0;
		if (!p || lomas_profile_info_get(p, &info)) {
			fprintf(stderr, "bench_thrash: cannot record: %s\n", lomas_error_message());
			return 1;
		}
		for (int r = 0; r < RUNS; r++) {
			double t0 = cpu_ms();
			if (lomas_model_thrash_bounds(p, 32768 * 64, 0, &quantum, 1, 0, &lower,
			                              &upper)) {
				fprintf(stderr, "bench_thrash: %s\n", lomas_error_message());
				return 1;
			}
			ms[r] = cpu_ms() - t0;
			t0 = cpu_ms();
			if (lomas_model_miss_ratio(p, LOMAS_POLICY_LRU, 32768 * 64, 0, 0, &warm))
				return 1;
			cm[r] = cpu_ms() - t0;
		}
		qsort(ms, RUNS, sizeof *ms, cmp_double);
		qsort(cm, RUNS, sizeof *cm, cmp_double);
		printf(
		    "thrash bounds C=32768 n=1e7, %llu samples: median %.1f ms CPU (goal 100 ms); "
		    "lower %.4f upper %.4f\n  (of which building the model: one LRU curve takes "
		    "%.1f ms here)\n",
		    (unsigned long long)info.samples, ms[RUNS / 2], lower, upper, cm[RUNS / 2]);
		lomas_profile_free(p);
	}
	return 0;
}

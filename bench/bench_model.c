/*
 * Model benchmark: a synthetic 1M-sample profile (4000 windows of 250
 * samples, a mixture of short, medium and long reuse distances plus dangling
 * samples); prints the median time of a 100-size curve per policy against the
 * 50 ms goal, and of profile save and load (goal for load: 200 ms), as wall
 * time and as the process's CPU time (the figure to read on a shared machine).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/core.h"

#define NWIN 4000
#define PER_WIN 250
#define PERIOD 100.0
#define RUNS 7

static double clock_ms(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static double now_ms(void)
{
	return clock_ms(CLOCK_MONOTONIC);
}

/* CPU time of the process: less disturbed than wall time on a busy machine. */
static double cpu_ms(void)
{
	return clock_ms(CLOCK_PROCESS_CPUTIME_ID);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, n, sizeof *v, cmp_double);
	return v[n / 2];
}

/* Distance drawn from a mixture resembling real programs. */
static uint64_t draw_distance(rng *r, int *dangling)
{
	double u = rng_uniform(r), v = rng_uniform(r);
	*dangling = 0;
	if (u < 0.45)
		return (uint64_t)(-log(v) * 4.0); /* same line, next few references */
	if (u < 0.75)
		return (uint64_t)exp(log(16.0) + v * (log(2e4) - log(16.0)));
	if (u < 0.95)
		return (uint64_t)exp(log(2e4) + v * (log(2e8) - log(2e4)));
	*dangling = 1;
	return 0;
}

static lomas_profile *synth(void)
{
	lomas_profile *p;
	rng r;
	lomas_thread t = {.tid = 1, .refs = (uint64_t)(NWIN * 256 * PERIOD)};
	rng_seed(&r, 7);
	if (lomas_profile_new(64, &p) || profile_add_thread(p, &t))
		return NULL;
	for (uint32_t w = 0; w < NWIN; w++) {
		lomas_window win = {.start = (uint64_t)(w * 256 * PERIOD),
		                    .refs = (uint64_t)(256 * PERIOD)};
		if (profile_add_window(p, &win))
			return NULL;
		/*
		 * Samples as a clock records them: in clock order, inside their
		 * window (one in each of PER_WIN equal slices, at a random place).
		 * The distances are drawn as before this model (some reach past the
		 * run's end): the same stationary mixture the 50 ms goal was set on.
		 */
		uint64_t slice = win.refs / PER_WIN;
		for (int i = 0; i < PER_WIN; i++) {
			lomas_sample s;
			int dangling;
			uint64_t d = draw_distance(&r, &dangling);
			uint64_t clock = win.start + (uint64_t)i * slice + rng_next(&r) % slice;
			memset(&s, 0, sizeof s);
			s.start = clock;
			s.end = dangling ? LOMAS_CLOCK_NONE : clock + d + 1;
			s.state = dangling ? LOMAS_SAMPLE_DANGLING : LOMAS_SAMPLE_REUSED;
			s.addr = 0x10000 + (rng_next(&r) & 0xffffff) * 8;
			s.start_pc = 0x400000 + (rng_next(&r) & 0xfff);
			s.end_pc = dangling ? 0 : s.start_pc + 4;
			s.weight = PERIOD;
			s.window = w;
			if (profile_add_sample(p, &s))
				return NULL;
		}
	}
	return p;
}

int main(int argc, char **argv)
{
	/* An argument picks one part (random, lru or load): to profile it alone. */
	const char *only = argc > 1 ? argv[1] : NULL;
	const char *parts[3] = {"random", "lru", "load"};
	lomas_profile *p = synth();
	uint64_t sizes[100];
	double ratios[100], t[RUNS], c[RUNS];
	const char *names[2] = {"random (StatCache)", "lru (StatStack)"};
	if (!p) {
		fprintf(stderr, "bench_model: cannot build the profile\n");
		return 1;
	}
	/* 100 sizes, 4 KiB .. ~128 MiB, 3.3 per octave, whole lines. */
	for (int i = 0; i < 100; i++)
		sizes[i] = (uint64_t)floor(exp2(12.0 + i * 0.15) / 64.0) * 64;
	printf("profile: %zu samples, %zu windows\n", p->samples.n, p->windows.n);
	for (int pol = 0; pol < 2; pol++) {
		if (only && strcmp(only, parts[pol]) != 0)
			continue;
		for (int k = 0; k < RUNS; k++) {
			double t0 = now_ms(), c0 = cpu_ms();
			if (lomas_model_curve(p, pol, sizes, 100, 0, 0, ratios)) {
				fprintf(stderr, "curve: %s\n", lomas_error_message());
				return 1;
			}
			t[k] = now_ms() - t0;
			c[k] = cpu_ms() - c0;
		}
		/* The first call also maps the model's scratch (kept for the next calls). */
		double first = c[0];
		printf("curve %-20s 100 sizes: %8.1f ms wall, %6.1f ms cpu (median of %d; "
		       "goal 50 ms)  [mr(4KiB)=%.4f mr(1MiB)=%.4f]\n",
		       names[pol], median(t, RUNS), median(c, RUNS), RUNS, ratios[0], ratios[53]);
		printf("      %-20s first call:  %6.1f ms cpu (its scratch memory mapped fresh)\n",
		       "", first);
	}

	if (only && strcmp(only, parts[2]) != 0) {
		lomas_profile_free(p);
		return 0;
	}
	char path[] = "/tmp/bench_model_XXXXXX";
	int fd = mkstemp(path);
	if (fd < 0) {
		perror("mkstemp");
		return 1;
	}
	close(fd);
	/* Save and load timed separately: the goal is for load (from the page cache). */
	double ts[RUNS];
	int ok = 1;
	for (int k = 0; k < RUNS && ok; k++) {
		lomas_profile *q = NULL;
		double t0 = now_ms();
		lomas_status st = lomas_profile_save(p, path);
		double t1 = now_ms(), c1 = cpu_ms();
		if (!st)
			st = lomas_profile_load(path, &q);
		ts[k] = t1 - t0;
		t[k] = now_ms() - t1;
		c[k] = cpu_ms() - c1;
		if (st) {
			printf("profile save/load: error: %s\n", lomas_error_message());
			ok = 0;
		}
		lomas_profile_free(q);
	}
	if (ok) {
		printf("profile save (atomic, fsync): %8.1f ms (median of %d)\n", median(ts, RUNS),
		       RUNS);
		printf(
		    "profile load:                 %8.1f ms wall, %6.1f ms cpu (median of %d; goal "
		    "200 ms)\n",
		    median(t, RUNS), median(c, RUNS), RUNS);
	}
	unlink(path);
	lomas_profile_free(p);
	return 0;
}

/*
 * Synthetic reference streams through a sampler, its samples printed one
 * per line ("start end state kind addr level thread", sorted by the caller),
 * then "refs THREAD N" for each thread. THREADS 0 (the default): one stream,
 * on the caller's thread (thread 0), still running when the run ends;
 * THREADS n: n threads one after another (1..n, each ending before the next
 * starts), REFS references each, of streams of their own: each thread's
 * end (period auto: its last samples join the budget, the older ones are
 * thinned) is the core's and the runtime's exit path. Which sampler depends
 * on how this file is built:
 *   core    the sampler core's state machine (lib/sampler/thread.c) as
 *           liblomas carries it (glibc's log), or, built with the dbi tool's
 *           own log and log1p (lib/dbi/tool_math.c) and no liblomas, as the
 *           tool carries it;
 *   inline  the inline clock's runtime (liblomas-inline.so), fed through its
 *           sanitizer-coverage hooks, called here by hand.
 * tests/dbi/test_dbi.py runs all three on the same stream and compares.
 * SAMPLER_PHASE_GUIDED set: the core with phase-guided sampling.
 *
 *   sampler_stream core|inline REFS PERIOD|auto SEED MAX_LIVE [THREADS]
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sampler/sampler.h"
#include "../unit/heap_alloc.h"

#ifdef WITH_INLINE
#include <pthread.h>

#include "lomas/inline.h"
void __sanitizer_cov_load8(uint64_t *addr);
void __sanitizer_cov_store8(uint64_t *addr);
#endif

/* The stream: reference i's address and kind, from a small generator of
 * its own: a mix of a hot set, a sweep over a large array and random lines
 * across 64 MiB, so reuse distances span short to dangling. */
typedef struct stream {
	uint64_t x, sweep;
} stream;

static uint64_t next_ref(stream *s, int *store)
{
	uint64_t r;
	s->x ^= s->x << 13, s->x ^= s->x >> 7, s->x ^= s->x << 17;
	r = s->x;
	*store = (r >> 60) == 0;
	switch ((r >> 56) & 3) {
	case 0: return 0x10000000ull + ((r >> 8) & 0xfff) * 8;                 /* hot: 32 KiB */
	case 1: return 0x20000000ull + (s->sweep++ % (1u << 21)) * 8;          /* sweep: 16 MiB */
	default: return 0x40000000ull + ((r >> 8) & ((1u << 26) - 1) & ~7ull); /* 64 MiB */
	}
}

/* Thread k's stream (k = 0: the one-thread run's). */
static stream stream_of(uint64_t k)
{
	stream s = {.x = 0x9e3779b97f4a7c15ull ^ (k * 0xbf58476d1ce4e5b9ull)};
	return s;
}

static void print_sample(const isample *is, uint64_t thread)
{
	printf("%" PRIu64 " %" PRIu64 " %u %u %" PRIx64 " %u %" PRIu64 "\n", is->start, is->end,
	       is->state, is->kind, is->addr, is->level, thread);
}

/* Thread k's references, its sampler started (index k) and not finished. */
static void core_run(sampler_thread *t, sampler_budget *budget, uint64_t k, uint64_t refs)
{
	stream s = stream_of(k);
	for (uint64_t c = 0; c < refs; c++) {
		int store;
		uint64_t a = next_ref(&s, &store);
		sampler_visit(t, budget, &heap, a, c, 0, store ? LOMAS_REF_STORE : LOMAS_REF_LOAD);
	}
}

static void core_print(const sampler_thread *t, uint64_t k, uint64_t refs)
{
	store_iter it;
	isample is;
	store_iter_init(&it, &t->done);
	while (store_iter_next(&it, &is))
		print_sample(&is, k);
	printf("refs %" PRIu64 " %" PRIu64 "\n", k, refs);
}

static int core(uint64_t refs, uint64_t period, uint64_t seed, uint32_t max_live, uint32_t nthreads)
{
	sampler_settings set = {
	    .period = period, .seed = seed, .max_live = max_live, .line_shift = 6};
	/* Phase-guided sampling at its defaults (the core builds only: the
	 * inline runtime's pcs are its own return addresses, these are 0). */
	if (getenv("SAMPLER_PHASE_GUIDED")) {
		set.phase_guided = true;
		set.phase.min_samples = PHASE_DEFAULT_SAMPLES;
		set.phase.shift = PHASE_DEFAULT_SHIFT;
	}
	sampler_budget budget = {0};
	sampler_thread *ts = calloc(nthreads ? nthreads : 1, sizeof *ts);
	uint8_t *filter = calloc(1, FILTER_SIZE + FILTER_PAD);
	void *mem = calloc(1, wt_bytes(max_live));
	if (!ts || !filter || !mem)
		return 1;
	if (!nthreads) {
		/* As the inline runtime's profile of a thread still running: at
		 * the final level, its open samples dangling, nothing published. */
		sampler_thread_init(&ts[0], &set, 0, mem, filter, &budget, &heap);
		core_run(&ts[0], &budget, 0, refs);
		if (ts[0].adaptive)
			sampler_thread_to_level(&ts[0], budget.level, &heap);
		if (!wt_collect(&ts[0].wt, &ts[0].done, &heap))
			return 1;
		free(ts[0].phase); /* (sampler_thread_finish would have) */
		core_print(&ts[0], 0, refs);
		store_free(&ts[0].done, &heap);
	}
	for (uint32_t k = 1; k <= nthreads; k++) {
		sampler_thread *t = &ts[k - 1];
		memset(filter, 0, FILTER_SIZE + FILTER_PAD);
		memset(mem, 0, wt_bytes(max_live));
		sampler_thread_init(t, &set, k, mem, filter, &budget, &heap);
		core_run(t, &budget, k, refs);
		sampler_thread_finish(t, &budget, &heap);
		/* Its table is given back, as the dbi tool does at a thread's end. */
		memset(&t->wt, 0, sizeof t->wt);
		t->wt.oldest = t->wt.newest = t->wt.free_head = WT_NONE;
	}
	/* The ended threads at the final level, as the hand-over and the
	 * inline runtime's exited threads' arena bring them. */
	for (uint32_t k = 1; k <= nthreads; k++) {
		if (ts[k - 1].adaptive)
			sampler_thread_to_level(&ts[k - 1], budget.level, &heap);
		core_print(&ts[k - 1], k, refs);
		store_free(&ts[k - 1].done, &heap);
	}
	free(ts);
	free(mem);
	free(filter);
	return 0;
}

#ifdef WITH_INLINE
/* Thread k's references through the hooks. */
typedef struct inline_job {
	uint64_t k, refs;
} inline_job;

static void *inline_run(void *arg)
{
	const inline_job *j = arg;
	stream s = stream_of(j->k);
	for (uint64_t c = 0; c < j->refs; c++) {
		int store;
		uint64_t *a = (uint64_t *)(uintptr_t)next_ref(&s, &store);
		if (store)
			__sanitizer_cov_store8(a);
		else
			__sanitizer_cov_load8(a);
	}
	return NULL;
}

static int run_inline(uint64_t refs, uint64_t period, uint64_t seed, uint32_t max_live,
                      uint32_t nthreads)
{
	lomas_config *cfg;
	lomas_profile *p;
	lomas_profile_info info = LOMAS_PROFILE_INFO_INIT;
	lomas_thread *threads;
	size_t got;
	char v[32];
	lomas_config_new(&cfg);
	snprintf(v, sizeof v, "%" PRIu64, period);
	lomas_config_set(cfg, "period", period ? v : "auto");
	snprintf(v, sizeof v, "%" PRIu64, seed);
	lomas_config_set(cfg, "seed", v);
	snprintf(v, sizeof v, "%u", max_live);
	lomas_config_set(cfg, "max_samples_live", v);
	if (lomas_inline_start(cfg)) {
		fprintf(stderr, "lomas_inline_start: %s\n", lomas_error_message());
		return 1;
	}
	if (!nthreads) {
		inline_job j = {0, refs};
		inline_run(&j);
	}
	/* Threads one after another: the runtime numbers them 1, 2, ... as
	 * they first reference memory (this thread never does), and each ends
	 * (its key's destructor: the exit path) before the next starts. */
	for (uint32_t k = 1; k <= nthreads; k++) {
		inline_job j = {k, refs};
		pthread_t th;
		if (pthread_create(&th, NULL, inline_run, &j) || pthread_join(th, NULL))
			return 1;
	}
	if (lomas_inline_stop(&p)) {
		fprintf(stderr, "lomas_inline_stop: %s\n", lomas_error_message());
		return 1;
	}
	lomas_profile_info_get(p, &info);
	/* The profile's threads are in index order: thread k is the k-th (or 0). */
	if (info.threads != (nthreads ? nthreads : 1) ||
	    !(threads = calloc(info.threads, sizeof *threads)) ||
	    lomas_profile_threads(p, 0, info.threads, threads, &got))
		return 1;
	for (size_t i = 0; i < info.samples; i++) {
		lomas_sample smp;
		isample is = {0};
		lomas_profile_samples(p, i, 1, &smp, &got);
		/* weight = base x 2^level */
		unsigned level = 0;
		double base = period ? (double)period : AUTO_START_PERIOD;
		while (base * (double)(1ull << level) < smp.weight)
			level++;
		is.start = smp.start;
		is.end = smp.end;
		is.state = (uint8_t)smp.state;
		is.kind = (uint8_t)smp.kind;
		is.addr = smp.addr;
		is.level = (uint8_t)level;
		print_sample(&is, nthreads ? smp.thread + 1 : 0);
	}
	for (size_t i = 0; i < info.threads; i++)
		printf("refs %zu %" PRIu64 "\n", nthreads ? i + 1 : 0, threads[i].refs);
	free(threads);
	lomas_profile_free(p);
	lomas_config_free(cfg);
	return 0;
}
#endif

int main(int argc, char **argv)
{
	uint64_t refs, period, seed;
	uint32_t max_live, nthreads;
	if (argc != 6 && argc != 7) {
		fprintf(stderr, "usage: sampler_stream core|inline REFS PERIOD|auto SEED MAX_LIVE "
		                "[THREADS]\n");
		return 2;
	}
	refs = strtoull(argv[2], NULL, 10);
	period = strcmp(argv[3], "auto") == 0 ? 0 : strtoull(argv[3], NULL, 10);
	seed = strtoull(argv[4], NULL, 10);
	max_live = (uint32_t)strtoul(argv[5], NULL, 10);
	nthreads = argc == 7 ? (uint32_t)strtoul(argv[6], NULL, 10) : 0;
	if (strcmp(argv[1], "core") == 0)
		return core(refs, period, seed, max_live, nthreads);
#ifdef WITH_INLINE
	if (strcmp(argv[1], "inline") == 0)
		return run_inline(refs, period, seed, max_live, nthreads);
#endif
	fprintf(stderr, "sampler_stream: %s not built in\n", argv[1]);
	return 2;
}

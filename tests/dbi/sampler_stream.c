/*
 * One synthetic reference stream through a sampler, its samples printed one
 * per line ("start end state kind addr level", sorted by the caller), then
 * "refs N". Which sampler depends on how this file is built:
 *   core    the sampler core's state machine (lib/sampler/thread.c) as
 *           liblomas carries it (glibc's log), or, built with the dbi tool's
 *           own log and log1p (lib/dbi/tool_math.c) and no liblomas, as the
 *           tool carries it;
 *   inline  the inline clock's runtime (liblomas-inline.so), fed through its
 *           sanitizer-coverage hooks, called here by hand.
 * tests/dbi/test_dbi.py runs all three on the same stream and compares.
 *
 *   sampler_stream core|inline REFS PERIOD|auto SEED MAX_LIVE
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sampler/sampler.h"

#ifdef WITH_INLINE
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

static void *zalloc(size_t bytes)
{
	return calloc(1, bytes);
}

static void release(void *mem, size_t bytes)
{
	(void)bytes;
	free(mem);
}

static void *grow(void *mem, size_t old, size_t bytes)
{
	(void)old;
	return realloc(mem, bytes);
}

static const inline_alloc heap = {zalloc, release, grow};

static int core(uint64_t refs, uint64_t period, uint64_t seed, uint32_t max_live)
{
	sampler_settings set = {
	    .period = period, .seed = seed, .max_live = max_live, .line_shift = 6};
	sampler_budget budget = {0};
	sampler_thread t;
	stream s = {.x = 0x9e3779b97f4a7c15ull};
	uint8_t *filter = calloc(1, FILTER_SIZE + FILTER_PAD);
	void *mem = calloc(1, wt_bytes(max_live));
	store_iter it;
	isample is;
	if (!filter || !mem)
		return 1;
	sampler_thread_init(&t, &set, 0, mem, filter, &budget, &heap);
	for (uint64_t c = 0; c < refs; c++) {
		int store;
		uint64_t a = next_ref(&s, &store);
		sampler_visit(&t, &budget, &heap, a, c, 0,
		              store ? LOMAS_REF_STORE : LOMAS_REF_LOAD);
	}
	/* As the inline runtime's exit path: to the final level, open samples dangling. */
	if (t.adaptive)
		sampler_thread_to_level(&t, budget.level, &heap);
	sampler_thread_finish(&t, &heap);
	store_iter_init(&it, &t.done);
	while (store_iter_next(&it, &is))
		printf("%" PRIu64 " %" PRIu64 " %u %u %" PRIx64 " %u\n", is.start, is.end, is.state,
		       is.kind, is.addr, is.level);
	printf("refs %" PRIu64 "\n", refs);
	store_free(&t.done, &heap);
	free(mem);
	free(filter);
	return 0;
}

#ifdef WITH_INLINE
static int run_inline(uint64_t refs, uint64_t period, uint64_t seed, uint32_t max_live)
{
	lomas_config *cfg;
	lomas_profile *p;
	lomas_profile_info info;
	stream s = {.x = 0x9e3779b97f4a7c15ull};
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
	for (uint64_t c = 0; c < refs; c++) {
		int store;
		uint64_t *a = (uint64_t *)(uintptr_t)next_ref(&s, &store);
		if (store)
			__sanitizer_cov_store8(a);
		else
			__sanitizer_cov_load8(a);
	}
	if (lomas_inline_stop(&p)) {
		fprintf(stderr, "lomas_inline_stop: %s\n", lomas_error_message());
		return 1;
	}
	lomas_profile_info_get(p, &info);
	for (size_t i = 0; i < info.samples; i++) {
		lomas_sample smp;
		size_t got;
		lomas_profile_samples(p, i, 1, &smp, &got);
		/* weight = base x 2^level */
		unsigned level = 0;
		double base = period ? (double)period : AUTO_START_PERIOD;
		while (base * (double)(1ull << level) < smp.weight)
			level++;
		printf("%" PRIu64 " %" PRIu64 " %u %u %" PRIx64 " %u\n", smp.start, smp.end,
		       smp.state, smp.kind, smp.addr, level);
	}
	printf("refs %" PRIu64 "\n", info.refs);
	lomas_profile_free(p);
	lomas_config_free(cfg);
	return 0;
}
#endif

int main(int argc, char **argv)
{
	uint64_t refs, period, seed;
	uint32_t max_live;
	if (argc != 6) {
		fprintf(stderr,
		        "usage: sampler_stream core|inline REFS PERIOD|auto SEED MAX_LIVE\n");
		return 2;
	}
	refs = strtoull(argv[2], NULL, 10);
	period = strcmp(argv[3], "auto") == 0 ? 0 : strtoull(argv[3], NULL, 10);
	seed = strtoull(argv[4], NULL, 10);
	max_live = (uint32_t)strtoul(argv[5], NULL, 10);
	if (strcmp(argv[1], "core") == 0)
		return core(refs, period, seed, max_live);
#ifdef WITH_INLINE
	if (strcmp(argv[1], "inline") == 0)
		return run_inline(refs, period, seed, max_live);
#endif
	fprintf(stderr, "sampler_stream: %s not built in\n", argv[1]);
	return 2;
}

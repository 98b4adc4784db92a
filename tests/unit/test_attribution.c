/*
 * Per-instruction attribution (lib/model/attribution.c, hot.c, and
 * lomas_profile_hot_pcs without symbols), against ground truth computed
 * here: exact fully associative LRU and random-replacement caches simulated
 * over the same reference stream, each miss charged to the instruction that
 * made the reference. Also the bookkeeping: the misses of all pcs over the
 * list's references are the model's miss ratio; where dangling and censored
 * samples go; the delinquent set (90 % of the misses, and every pc with 1 %).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"
#include "model/model.h"

#define NPC 4
#define MAXLINES 8192
/* The instructions of the synthetic program. */
static const uint64_t pcs[NPC] = {0x401000, 0x401010, 0x401020, 0x401030};
enum { HOT, STREAM, RANDOM, MEDIUM };

typedef struct ref {
	uint32_t line;
	uint8_t pc;
} ref;

/* A program: each step touches a 16-line hot set four times (HOT), the next
 * line of a 2048-line cycle (STREAM), a random line of 1024 (RANDOM) and a
 * random one of 300 (MEDIUM). */
static ref *program(size_t steps, size_t *n)
{
	ref *r = malloc(steps * 7 * sizeof *r);
	uint64_t x = 88172645463325252ull;
	size_t k = 0;
	assert_non_null(r);
	for (size_t s = 0; s < steps; s++) {
		for (int h = 0; h < 4; h++)
			r[k++] = (ref){(uint32_t)((s * 4 + (size_t)h) % 16), HOT};
		r[k++] = (ref){(uint32_t)(16 + s % 2048), STREAM};
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		r[k++] = (ref){(uint32_t)(16 + 2048 + x % 1024), RANDOM};
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		r[k++] = (ref){(uint32_t)(16 + 2048 + 1024 + x % 300), MEDIUM};
	}
	*n = k;
	return r;
}

/* Exact misses per pc of an LRU cache of L lines (cold misses not counted). */
static void exact_lru(const ref *r, size_t n, size_t L, double *miss)
{
	static int32_t prev[MAXLINES], next[MAXLINES];
	static bool in[MAXLINES], seen[MAXLINES];
	int32_t head = -1, tail = -1;
	size_t count = 0;
	memset(in, 0, sizeof in);
	memset(seen, 0, sizeof seen);
	memset(miss, 0, NPC * sizeof *miss);
	for (size_t i = 0; i < n; i++) {
		int32_t l = (int32_t)r[i].line;
		if (in[l]) { /* a hit: to the front */
			if (head == l)
				continue;
			next[prev[l]] = next[l];
			if (next[l] >= 0)
				prev[next[l]] = prev[l];
			else
				tail = prev[l];
		} else {
			if (seen[l])
				miss[r[i].pc] += 1.0;
			seen[l] = in[l] = true;
			if (++count > L) { /* evict the least recently used */
				int32_t v = tail;
				in[v] = false;
				tail = prev[v];
				if (tail >= 0)
					next[tail] = -1;
				else
					head = -1;
				count--;
			}
		}
		prev[l] = -1;
		next[l] = head;
		if (head >= 0)
			prev[head] = l;
		head = l;
		if (tail < 0)
			tail = l;
	}
}

/* Exact misses per pc of a random-replacement cache of L lines, mean of runs. */
static void exact_random(const ref *r, size_t n, size_t L, int runs, double *miss)
{
	static int32_t slot_of[MAXLINES];
	static bool seen[MAXLINES];
	int32_t *slots = malloc(L * sizeof *slots);
	rng g;
	assert_non_null(slots);
	memset(miss, 0, NPC * sizeof *miss);
	rng_seed(&g, 99);
	for (int run = 0; run < runs; run++) {
		size_t used = 0;
		memset(seen, 0, sizeof seen);
		for (size_t i = 0; i < MAXLINES; i++)
			slot_of[i] = -1;
		for (size_t i = 0; i < n; i++) {
			int32_t l = (int32_t)r[i].line;
			if (slot_of[l] >= 0)
				continue;
			if (seen[l])
				miss[r[i].pc] += 1.0 / runs;
			seen[l] = true;
			if (used < L) {
				slots[used] = l;
				slot_of[l] = (int32_t)used++;
			} else {
				size_t v = (size_t)(rng_next(&g) % L);
				slot_of[slots[v]] = -1;
				slots[v] = l;
				slot_of[l] = (int32_t)v;
			}
		}
	}
	free(slots);
}

/* The program through the trace clock at mean period `period`. */
static lomas_profile *sample(const ref *r, size_t n, const char *period)
{
	lomas_config *cfg;
	lomas_trace *t;
	lomas_profile *p;
	assert_int_equal(lomas_config_new(&cfg), LOMAS_OK);
	assert_int_equal(lomas_config_set(cfg, "period", period), LOMAS_OK);
	assert_int_equal(lomas_config_set(cfg, "seed", "7"), LOMAS_OK);
	assert_int_equal(lomas_trace_new(cfg, &t), LOMAS_OK);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(lomas_trace_ref(t, 0, 0x10000000 + 64 * (uint64_t)r[i].line,
		                                 pcs[r[i].pc], LOMAS_REF_LOAD),
		                 LOMAS_OK);
	assert_int_equal(lomas_trace_finish(t, &p), LOMAS_OK);
	lomas_trace_free(t);
	lomas_config_free(cfg);
	return p;
}

/* The model's share of each pc from the public list. */
static void model_shares(const lomas_profile *p, lomas_policy pol, uint64_t bytes, double *share,
                         size_t *delinquent)
{
	lomas_hot_list *l;
	lomas_hot_info info = LOMAS_HOT_INFO_INIT;
	memset(share, 0, NPC * sizeof *share);
	assert_int_equal(lomas_profile_hot_pcs(p, pol, bytes, 0, LOMAS_HOT_NO_SYMBOLS, &l),
	                 LOMAS_OK);
	assert_int_equal(lomas_hot_list_info(l, &info), LOMAS_OK);
	for (size_t i = 0; i < lomas_hot_list_count(l); i++) {
		lomas_hot_pc e = LOMAS_HOT_PC_INIT;
		assert_int_equal(lomas_hot_list_get(l, i, &e), LOMAS_OK);
		assert_int_equal(e.sym, LOMAS_SYM_NONE);
		for (int k = 0; k < NPC; k++)
			if (e.pc == pcs[k])
				share[k] = e.share;
		/* The list is ordered and the delinquent ones come first. */
		assert_int_equal(e.delinquent, i < info.delinquent);
	}
	*delinquent = info.delinquent;
	lomas_hot_list_free(l);
}

/* Shares within 5 points of exact simulation, both policies, three sizes. */
static void test_shares_match_exact_simulation(void **state)
{
	static const size_t lines[] = {256, 700, 1500};
	size_t n, delinquent;
	ref *r = program(60000, &n);
	lomas_profile *p = sample(r, n, "4");
	(void)state;
	for (size_t k = 0; k < sizeof lines / sizeof lines[0]; k++) {
		for (int pol = 0; pol < 2; pol++) {
			double miss[NPC], total = 0, share[NPC];
			if (pol == LOMAS_POLICY_LRU)
				exact_lru(r, n, lines[k], miss);
			else
				exact_random(r, n, lines[k], 3, miss);
			for (int i = 0; i < NPC; i++)
				total += miss[i];
			assert_true(total > 0);
			model_shares(p, (lomas_policy)pol, 64 * lines[k], share, &delinquent);
			for (int i = 0; i < NPC; i++) {
				double want = miss[i] / total;
				if (fabs(share[i] - want) > 0.05)
					fail_msg("%zu lines, %s, pc %d: share %.3f, exact %.3f",
					         lines[k], pol ? "lru" : "random", i, share[i],
					         want);
			}
			/* The stream misses everywhere below 2048 lines: always delinquent. */
			assert_true(delinquent >= 1);
			assert_true(share[STREAM] >= share[HOT]);
		}
	}
	lomas_profile_free(p);
	free(r);
}

/* misses / refs of the list is the model's miss ratio, for every policy and flag. */
static void test_totals_are_the_curve(void **state)
{
	static const uint64_t sizes[] = {64, 4096, 32768, 100 * 64, 1 << 20};
	size_t n;
	ref *r = program(20000, &n);
	lomas_profile *p = sample(r, n, "16");
	(void)state;
	for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
		for (int pol = 0; pol < 2; pol++) {
			for (unsigned flags = 0; flags <= LOMAS_MODEL_COLD; flags++) {
				lomas_hot_list *l;
				lomas_hot_info info = LOMAS_HOT_INFO_INIT;
				double ratio, sum = 0.0, share = 0.0;
				assert_int_equal(lomas_model_miss_ratio(p, (lomas_policy)pol,
				                                        sizes[k], 0, flags, &ratio),
				                 LOMAS_OK);
				assert_int_equal(
				    lomas_profile_hot_pcs(p, (lomas_policy)pol, sizes[k], 64,
				                          flags | LOMAS_HOT_NO_SYMBOLS, &l),
				    LOMAS_OK);
				assert_int_equal(lomas_hot_list_info(l, &info), LOMAS_OK);
				assert_true(fabs(info.misses / info.refs - ratio) <=
				            1e-9 * (ratio + 1e-9));
				assert_true(info.refs == (double)n);
				for (size_t i = 0; i < info.count; i++) {
					lomas_hot_pc e = LOMAS_HOT_PC_INIT;
					assert_int_equal(lomas_hot_list_get(l, i, &e), LOMAS_OK);
					sum += e.misses;
					share += e.share;
					assert_true(e.miss_ratio >= 0.0 && e.miss_ratio <= 1.0);
				}
				assert_true(fabs(sum - info.misses) <= 1e-9 * (sum + 1));
				if (info.misses > 0)
					assert_true(fabs(share - 1.0) < 1e-9);
				lomas_hot_list_free(l);
			}
		}
	}
	lomas_profile_free(p);
	free(r);
}

/* A profile of hand-made samples: one window of 1000 references, weight w each. */
static lomas_profile *handmade(const lomas_sample *s, size_t ns)
{
	lomas_profile *p;
	lomas_thread t = {.tid = 1, .refs = 1000};
	lomas_window w = {.start = 0, .refs = 1000, .thread = 0};
	assert_int_equal(lomas_profile_new(64, &p), LOMAS_OK);
	assert_int_equal(profile_add_thread(p, &t), LOMAS_OK);
	assert_int_equal(profile_add_window(p, &w), LOMAS_OK);
	for (size_t i = 0; i < ns; i++)
		assert_int_equal(profile_add_sample(p, &s[i]), LOMAS_OK);
	return p;
}

static lomas_hot_pc find(const lomas_hot_list *l, uint64_t pc)
{
	lomas_hot_pc e = LOMAS_HOT_PC_INIT;
	for (size_t i = 0; i < lomas_hot_list_count(l); i++) {
		assert_int_equal(lomas_hot_list_get(l, i, &e), LOMAS_OK);
		if (e.pc == pc)
			return e;
	}
	memset(&e, 0, sizeof e);
	return e;
}

/*
 * A reuse's miss goes to its end pc; a censored sample's (a miss in every
 * cache) to its start pc, as unseen; a dangling one's only with cold misses,
 * to its start pc too. LRU of one line: every reuse with references between
 * misses, so the probabilities are 0 or 1 and the counts exact.
 */
static void test_where_misses_go(void **state)
{
	const lomas_sample s[] = {
	    {.start = 0, .end = 10, .start_pc = 0xa0, .end_pc = 0xb0, .weight = 250},
	    {.start = 1, .end = 2, .start_pc = 0xa0, .end_pc = 0xb0, .weight = 250},
	    {.start = 2,
	     .end = 500,
	     .start_pc = 0xc0,
	     .end_pc = 0,
	     .weight = 250,
	     .state = LOMAS_SAMPLE_CENSORED},
	    {.start = 3,
	     .end = LOMAS_CLOCK_NONE,
	     .start_pc = 0xd0,
	     .weight = 250,
	     .state = LOMAS_SAMPLE_DANGLING},
	};
	lomas_profile *p = handmade(s, 4);
	lomas_hot_list *l;
	lomas_hot_pc e = LOMAS_HOT_PC_INIT;
	(void)state;
	assert_int_equal(
	    lomas_profile_hot_pcs(p, LOMAS_POLICY_LRU, 64, 0, LOMAS_HOT_NO_SYMBOLS, &l), LOMAS_OK);
	e = find(l, 0xb0); /* distance 9 misses, distance 0 never does */
	assert_true(e.misses == 250 && e.unseen_misses == 0 && e.samples_ended == 2);
	assert_true(e.refs == 0 && e.samples_started == 0);
	assert_true(e.miss_ratio == 0.5); /* no samples of its own: over its reuses */
	e = find(l, 0xa0);                /* started two samples, missed nothing itself */
	assert_true(e.misses == 0 && e.refs == 500 && e.miss_ratio == 0);
	e = find(l, 0xc0);
	assert_true(e.misses == 250 && e.unseen_misses == 250 && e.miss_ratio == 1);
	e = find(l, 0xd0);
	assert_true(e.misses == 0 && e.refs == 250);
	assert_int_equal(lomas_hot_list_count(l), 4); /* end pc 0 of the censored one: none */
	lomas_hot_list_free(l);

	assert_int_equal(lomas_profile_hot_pcs(p, LOMAS_POLICY_RANDOM, 64, 0,
	                                       LOMAS_MODEL_COLD | LOMAS_HOT_NO_SYMBOLS, &l),
	                 LOMAS_OK);
	e = find(l, 0xd0);
	assert_true(e.misses == 250 && e.unseen_misses == 250);
	e = find(l, 0xb0); /* one line, random: as LRU */
	assert_true(fabs(e.misses - 250) < 1e-9);
	lomas_hot_list_free(l);
	lomas_profile_free(p);
}

/* A profile of ns far reuses (each a miss in a one-line cache) ended at pcs
 * 0x200, 0x201, ... with weights w. */
static lomas_profile *misses_of(const double *w, size_t ns)
{
	lomas_sample *s = calloc(ns, sizeof *s);
	lomas_profile *p;
	assert_non_null(s);
	for (size_t i = 0; i < ns; i++)
		s[i] = (lomas_sample){.start = (uint64_t)i,
		                      .end = 900,
		                      .start_pc = 0x100,
		                      .end_pc = 0x200 + (uint64_t)i,
		                      .weight = w[i]};
	p = handmade(s, ns);
	free(s);
	return p;
}

static size_t delinquent_of(const lomas_profile *p, uint64_t bytes, size_t *cover90)
{
	lomas_hot_list *l;
	lomas_hot_info info = LOMAS_HOT_INFO_INIT;
	assert_int_equal(
	    lomas_profile_hot_pcs(p, LOMAS_POLICY_LRU, bytes, 0, LOMAS_HOT_NO_SYMBOLS, &l),
	    LOMAS_OK);
	assert_int_equal(lomas_hot_list_info(l, &info), LOMAS_OK);
	for (size_t i = 0; i < info.count; i++) {
		lomas_hot_pc e = LOMAS_HOT_PC_INIT;
		assert_int_equal(lomas_hot_list_get(l, i, &e), LOMAS_OK);
		assert_int_equal(e.delinquent, i < info.delinquent);
	}
	lomas_hot_list_free(l);
	*cover90 = info.cover90;
	return info.delinquent;
}

/*
 * The delinquent set: the fewest pcs covering 90 % of the misses (cover90),
 * and every pc with 1 % of them. 60+25+8 of 100 cover 90 % (3 pcs), and
 * 6.3 % is still 1 % or more: 4 pcs, not the 0.5 and 0.2 ones. 200 pcs of
 * 0.5 % each: the first 180 cover 90 %, and no other has 1 %.
 */
static void test_delinquent_set(void **state)
{
	const double w[] = {60, 25, 8, 6.3, 0.5, 0.2};
	double flat[200];
	lomas_profile *p = misses_of(w, 6);
	lomas_hot_list *l;
	size_t cover90;
	(void)state;
	assert_int_equal(delinquent_of(p, 64, &cover90), 4);
	assert_int_equal(cover90, 3);
	assert_int_equal(
	    lomas_profile_hot_pcs(p, LOMAS_POLICY_LRU, 64, 0, LOMAS_HOT_NO_SYMBOLS, &l), LOMAS_OK);
	for (size_t i = 0; i < 6; i++) {
		lomas_hot_pc e = LOMAS_HOT_PC_INIT;
		assert_int_equal(lomas_hot_list_get(l, i, &e), LOMAS_OK);
		assert_int_equal(e.pc, 0x200 + i);
		assert_true(fabs(e.share - w[i] / 100.0) < 1e-12);
	}
	lomas_hot_list_free(l);
	/* A cache that holds everything: no misses, an empty delinquent set. */
	assert_int_equal(delinquent_of(p, 1 << 20, &cover90), 0);
	assert_int_equal(cover90, 0);
	lomas_profile_free(p);
	for (int i = 0; i < 200; i++)
		flat[i] = 1.0;
	p = misses_of(flat, 200);
	assert_int_equal(delinquent_of(p, 64, &cover90), 180);
	assert_int_equal(cover90, 180);
	lomas_profile_free(p);
}

static void test_bad_arguments(void **state)
{
	const lomas_sample s = {.start = 0, .end = 9, .start_pc = 1, .end_pc = 2, .weight = 1};
	lomas_profile *p = handmade(&s, 1), *empty;
	lomas_hot_list *l = (lomas_hot_list *)&l;
	lomas_hot_pc e = LOMAS_HOT_PC_INIT;
	lomas_hot_frame f;
	(void)state;
	assert_int_equal(lomas_profile_hot_pcs(NULL, LOMAS_POLICY_LRU, 64, 0, 0, &l), LOMAS_EINVAL);
	assert_null(l);
	assert_int_equal(lomas_profile_hot_pcs(p, LOMAS_POLICY_LRU, 64, 0, 0, NULL), LOMAS_EINVAL);
	assert_int_equal(lomas_profile_hot_pcs(p, (lomas_policy)7, 64, 0, 0, &l), LOMAS_EINVAL);
	assert_int_equal(lomas_profile_hot_pcs(p, LOMAS_POLICY_LRU, 64, 0, 0x40, &l), LOMAS_EINVAL);
	assert_int_equal(lomas_profile_hot_pcs(p, LOMAS_POLICY_LRU, 100, 0, 0, &l), LOMAS_EINVAL);
	assert_non_null(strstr(lomas_error_message(), "100 bytes"));
	assert_int_equal(lomas_profile_hot_pcs(p, LOMAS_POLICY_LRU, 0, 0, 0, &l), LOMAS_EINVAL);
	assert_int_equal(lomas_profile_hot_pcs(p, LOMAS_POLICY_LRU, 128, 32, 0, &l), LOMAS_EINVAL);
	assert_int_equal(lomas_profile_new(64, &empty), LOMAS_OK);
	assert_int_equal(lomas_profile_hot_pcs(empty, LOMAS_POLICY_LRU, 64, 0, 0, &l),
	                 LOMAS_ERANGE);
	assert_null(l);
	lomas_profile_free(empty);
	assert_int_equal(lomas_profile_hot_pcs(p, LOMAS_POLICY_LRU, 64, 0, 0, &l), LOMAS_OK);
	assert_int_equal(lomas_hot_list_get(l, lomas_hot_list_count(l), &e), LOMAS_EINVAL);
	assert_int_equal(lomas_hot_list_get(l, 0, NULL), LOMAS_EINVAL);
	{
		/* Sized structs (lomas.h): an older, shorter lomas_hot_pc (size and pc
		 * only) gets those 16 bytes and no more; a size left 0 is refused. */
		unsigned char old[sizeof(lomas_hot_pc)];
		lomas_hot_pc whole = LOMAS_HOT_PC_INIT;
		lomas_hot_info info0 = {0};
		uint32_t size = 16;
		assert_int_equal(lomas_hot_list_get(l, 0, &whole), LOMAS_OK);
		assert_int_equal(whole.size, sizeof whole);
		memset(old, 0x5a, sizeof old);
		memcpy(old, &size, sizeof size);
		assert_int_equal(lomas_hot_list_get(l, 0, (lomas_hot_pc *)(void *)old), LOMAS_OK);
		memcpy(&size, old, sizeof size);
		assert_int_equal(size, 16); /* what the library filled: all of it */
		assert_memory_equal(old + 4, (const unsigned char *)&whole + 4, 12);
		for (size_t i = 16; i < sizeof old; i++)
			assert_int_equal(old[i], 0x5a);
		assert_int_equal(lomas_hot_list_info(l, &info0), LOMAS_EINVAL);
		assert_int_equal(info0.count, 0);
		memset(old, 0, sizeof old);
		assert_int_equal(lomas_hot_list_get(l, 0, (lomas_hot_pc *)(void *)old),
		                 LOMAS_EINVAL);
	}
	assert_int_equal(lomas_hot_list_frame(l, 0, 0, &f), LOMAS_EINVAL);
	assert_int_equal(lomas_hot_list_frame(l, 99, 0, &f), LOMAS_EINVAL);
	assert_int_equal(lomas_hot_list_info(NULL, NULL), LOMAS_EINVAL);
	assert_int_equal(lomas_hot_list_symbolize(l, NULL, NULL), LOMAS_EINVAL);
	assert_int_equal(lomas_hot_list_count(NULL), 0);
	lomas_hot_list_free(l);
	lomas_hot_list_free(NULL);
	lomas_profile_free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_shares_match_exact_simulation),
	    cmocka_unit_test(test_totals_are_the_curve),
	    cmocka_unit_test(test_where_misses_go),
	    cmocka_unit_test(test_delinquent_set),
	    cmocka_unit_test(test_bad_arguments),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

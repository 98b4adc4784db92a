/*
 * What the replay tests of the pmu clock share (test_pmu_replay.c,
 * test_pmu_precise.c): the replay kernel installed in place of the real
 * perf system calls, and the profile's metadata and calibration read back.
 */
#ifndef LOMAS_TEST_PMU_REPLAY_RUN_H
#define LOMAS_TEST_PMU_REPLAY_RUN_H

#include <sys/personality.h>

#include "../integration/step_run.h"

#include "lomas/lomas.h"
#include "monitor/monitor.h"
#include "pmu/pmu.h"

/* skl: MEM_INST_RETIRED:ALL_LOADS, ALL_STORES and ANY (both), Intel SDM 19. */
#define SKL_LOADS 0x81d0
#define SKL_STORES 0x82d0
#define SKL_ANY 0x83d0

static pmu_replay *rep;

/* A hybrid CPU for the replay kernel (hybrid_on): its core PMUs' types, the moves. */
static uint32_t hybrid_types[2], hybrid_every;
static char hybrid_root[64];

static inline uint64_t injected(void *arg, pid_t tid)
{
	return mon_injected_into(tid);
}

/* The replay kernel in place of the real one; precise: PEBS records in the rings. */
static inline void replay_on_mode(uint64_t seed, uint32_t skid, bool next, int64_t step,
                                  int64_t fault, int64_t trap, int64_t sys, bool precise)
{
	pmu_replay_conf c = {.seed = seed,
	                     .max_skid = skid,
	                     .next_overflow = next,
	                     .per_step = step,
	                     .per_fault = fault,
	                     .per_trap = trap,
	                     .per_syscall = sys,
	                     .load_config = SKL_LOADS,
	                     .store_config = SKL_STORES,
	                     .refs_config = SKL_ANY,
	                     .precise = precise,
	                     .core_types = {hybrid_types[0], hybrid_types[1]},
	                     .migrate_every = hybrid_every,
	                     .injected = injected};
	assert_int_equal(pmu_replay_new(&c, &rep), LOMAS_OK);
	pmu_sys_set(pmu_replay_ops(rep));
}

static inline void replay_on(uint64_t seed, uint32_t skid, bool next, int64_t step, int64_t fault,
                             int64_t trap, int64_t sys)
{
	replay_on_mode(seed, skid, next, step, fault, trap, sys, false);
}

static inline void replay_off(pmu_replay_stats *st)
{
	if (st)
		pmu_replay_get_stats(rep, st);
	pmu_sys_set(NULL);
	pmu_replay_free(rep);
	rep = NULL;
}

static inline uint64_t meta_u64(const lomas_profile *p, const char *key)
{
	const char *v = NULL;
	assert_int_equal(lomas_profile_meta_get(p, key, &v), LOMAS_OK);
	return strtoull(v, NULL, 10);
}

static inline double calib(const lomas_profile *p, const char *key)
{
	for (size_t i = 0; i < p->calib.n; i++)
		if (!strcmp(p->calib.items[i].key, key))
			return p->calib.items[i].value;
	fail_msg("no calibration %s", key);
	return 0;
}

/*
 * Write text and a newline to root/bus/event_source/devices/<pmu>/<file> of
 * a sysfs tree for LOMAS_SYSFS_ROOT (a PMU's type, a format/ field), making
 * the directories.
 */
static inline void sysfs_put(const char *root, const char *pmu, const char *file, const char *text)
{
	char path[512];
	FILE *f;
	snprintf(path, sizeof path, "mkdir -p %s/bus/event_source/devices/%s/%s", root, pmu, file);
	*strrchr(path, '/') = '\0';
	assert_int_equal(system(path), 0);
	snprintf(path, sizeof path, "%s/bus/event_source/devices/%s/%s", root, pmu, file);
	assert_non_null(f = fopen(path, "w"));
	fprintf(f, "%s\n", text);
	fclose(f);
}

/*
 * A hybrid machine: a sysfs tree (LOMAS_SYSFS_ROOT) with cpu_core and
 * cpu_atom of perf types 8 and 9, and a replay kernel whose counters of
 * those types count only on their kind, threads moving every `every`
 * instructions. hybrid_off undoes it.
 */
static inline void hybrid_on(uint32_t every)
{
	snprintf(hybrid_root, sizeof hybrid_root, "/tmp/lomas-hybrid-XXXXXX");
	assert_non_null(mkdtemp(hybrid_root));
	sysfs_put(hybrid_root, "cpu_core", "type", "8");
	sysfs_put(hybrid_root, "cpu_atom", "type", "9");
	setenv("LOMAS_SYSFS_ROOT", hybrid_root, 1);
	hybrid_types[0] = 8;
	hybrid_types[1] = 9;
	hybrid_every = every;
}

static inline void hybrid_off(void)
{
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf %s", hybrid_root);
	assert_int_equal(system(cmd), 0);
	unsetenv("LOMAS_SYSFS_ROOT");
	hybrid_types[0] = hybrid_types[1] = hybrid_every = 0;
}

/*
 * After each test, passed or failed: a failed assertion skips the test's own
 * replay_off and hybrid_off, and the tests after it would run on its kernel.
 */
static inline int replay_teardown(void **state)
{
	(void)state;
	if (rep)
		replay_off(NULL);
	if (hybrid_every)
		hybrid_off();
	unsetenv("LOMAS_TEST_PAD"); /* test_pmu_replay's environment sizes */
	return 0;
}

/*
 * The replay tests' main: the step tests' setup; with fixed_addresses, the
 * process again with address randomization off (self, its name), so that
 * every run of a target has the same addresses as the ground truth's; pmu
 * the libpfm4 PMU forced (its tables); LOMAS_TEST_FILTER runs one test;
 * each test without a teardown of its own gets replay_teardown.
 */
static inline int pmu_replay_main(const struct CMUnitTest *tests, size_t n, const char *self,
                                  bool fixed_addresses, const char *pmu)
{
	int r = step_test_setup();
	if (r)
		return r;
	if (fixed_addresses && personality(0xffffffff) != -1 &&
	    !(personality(0xffffffff) & ADDR_NO_RANDOMIZE)) {
		personality(personality(0xffffffff) | ADDR_NO_RANDOMIZE);
		execv("/proc/self/exe", (char *[]){(char *)self, NULL});
	}
	setenv("LIBPFM_FORCE_PMU", pmu, 1);
	if (getenv("LOMAS_TEST_FILTER")) /* one test while working on it */
		cmocka_set_test_filter(getenv("LOMAS_TEST_FILTER"));
	struct CMUnitTest *each = calloc(n, sizeof *each);
	if (!each)
		return 1;
	for (size_t i = 0; i < n; i++) {
		each[i] = tests[i];
		if (!each[i].teardown_func)
			each[i].teardown_func = replay_teardown;
	}
	r = _cmocka_run_group_tests(self, each, n, NULL, NULL);
	free(each);
	return r;
}

#endif /* LOMAS_TEST_PMU_REPLAY_RUN_H */

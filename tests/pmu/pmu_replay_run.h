/*
 * What the replay tests of the pmu clock share (test_pmu_replay.c,
 * test_pmu_precise.c): the replay kernel installed in place of the real
 * perf system calls, and the profile's metadata and calibration read back.
 */
#ifndef LOMAS_TEST_PMU_REPLAY_RUN_H
#define LOMAS_TEST_PMU_REPLAY_RUN_H

#include "../integration/step_run.h"

#include "lomas/lomas.h"
#include "monitor/monitor.h"
#include "pmu/pmu.h"

/* skl: MEM_INST_RETIRED:ALL_LOADS, ALL_STORES and ANY (both), Intel SDM 19. */
#define SKL_LOADS 0x81d0
#define SKL_STORES 0x82d0
#define SKL_ANY 0x83d0

static pmu_replay *rep;

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

#endif /* LOMAS_TEST_PMU_REPLAY_RUN_H */

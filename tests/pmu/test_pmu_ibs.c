/*
 * The pmu clock's precise mode on AMD: IBS op sampling (issue 20, "AMD: IBS
 * op sampling with the data address where the kernel offers it"; "A
 * PEBS/IBS replay gives records with exact ip and address"), through the
 * replay kernel with an ibs_op PMU: a sysfs tree (LOMAS_SYSFS_ROOT) with
 * ibs_op and its format, libpfm4 forced to Zen 3 (LS_DISPATCH counts the
 * clock), and a fake IBS that counts ops, tags whichever op its count
 * reaches (a memory op, another op, a kernel op of the monitor's
 * perturbations) and writes its record; the signal comes late by a skid.
 *
 * Ground truth: an independent full trace of the same run (full_trace.h).
 * Every sample must name a reference of the trace (pc, address, kind) at
 * most the skid before the clock it starts at, and end exactly where the
 * trace next touches its line after that clock. The samples' rate and mix
 * of loads and stores are the trace's (each memory op sampled at
 * 1/period). Kernels that cannot filter kernel-mode samples, or have no
 * per-thread IBS, or count cycles only: handled, or refused in one line.
 */
#include <math.h>
#include "../integration/full_trace.h"
#include "pmu_replay_run.h"

#define IBS_TYPE 11
#define IBS_TYPE_S "11"

static char ibs_root[64];

/* An ibs_op PMU in a sysfs tree: its type, cnt_ctl (when ops), swfilt (when filter). */
static void ibs_sysfs(bool ops, bool filter)
{
	snprintf(ibs_root, sizeof ibs_root, "/tmp/lomas-ibs-XXXXXX");
	assert_non_null(mkdtemp(ibs_root));
	sysfs_put(ibs_root, "ibs_op", "type", IBS_TYPE_S);
	if (ops)
		sysfs_put(ibs_root, "ibs_op", "format/cnt_ctl", "config:19");
	if (filter)
		sysfs_put(ibs_root, "ibs_op", "format/swfilt", "config2:0");
	setenv("LOMAS_SYSFS_ROOT", ibs_root, 1);
}

static void ibs_sysfs_off(void)
{
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf %s", ibs_root);
	assert_int_equal(system(cmd), 0);
	unsetenv("LOMAS_SYSFS_ROOT");
}

/* The replay kernel with IBS: Zen 3's LS_DISPATCH encodings count loads and stores. */
static void ibs_replay(uint64_t seed, uint32_t skid, const int64_t pert[4], bool per_task,
                       bool filter)
{
	pmu_table t;
	pmu_replay_conf c = {.seed = seed,
	                     .max_skid = skid,
	                     .per_step = pert[0],
	                     .per_fault = pert[1],
	                     .per_trap = pert[2],
	                     .per_syscall = pert[3],
	                     .ibs_type = IBS_TYPE,
	                     .ibs_per_task = per_task,
	                     .ibs_swfilt = filter,
	                     .injected = injected};
	assert_int_equal(pmu_table_get(NULL, NULL, &t), LOMAS_OK);
	assert_int_equal(t.n, 2);
	c.load_config = t.ev[0].attr.config;
	c.store_config = t.ev[1].attr.config;
	assert_int_equal(pmu_replay_new(&c, &rep), LOMAS_OK);
	pmu_sys_set(pmu_replay_ops(rep));
}

/* The first reference after index `from` touching the 64-byte line of addr, or SIZE_MAX. */
static size_t next_touch(const trace *tr, size_t from, uint64_t addr)
{
	uint64_t lo = addr & ~63ull, hi = lo + 64;
	for (size_t j = from + 1; j < tr->n; j++) {
		uint64_t a = tr->r[j].addr, b = a + (tr->r[j].size ? tr->r[j].size : 1);
		if (a < hi && b > lo)
			return j;
	}
	return SIZE_MAX;
}

typedef struct ibs_out {
	uint64_t runs, samples, stores, window, records, not_memory, kernel, late_records, expected;
	double late;
} ibs_out;

/* Check p's samples against the trace (see the file's comment); window: the skid's reach. */
static void check(const trace *tr, const lomas_profile *p, uint64_t window, ibs_out *o)
{
	for (size_t k = 0; k < p->samples.n; k++) {
		const lomas_sample *y = &p->samples.items[k];
		size_t i = SIZE_MAX, end;
		assert_true(y->start < tr->n);
		for (size_t c = y->start + 1; c-- > 0 && y->start - c <= window;)
			if (tr->r[c].pc == y->start_pc && tr->r[c].addr == y->addr &&
			    tr->r[c].kind == y->kind) {
				i = c;
				break;
			}
		if (i == SIZE_MAX) {
			for (size_t c = y->start > 40 ? y->start - 40 : 0;
			     c < y->start + 10 && c < tr->n; c++)
				fprintf(stderr, "#  ref %zu pc %#llx addr %#llx kind %u\n", c,
				        (unsigned long long)tr->r[c].pc,
				        (unsigned long long)tr->r[c].addr, tr->r[c].kind);
			fail_msg("sample %zu (start %llu pc %#llx addr %#llx kind %u) names no "
			         "reference of the trace within %llu before it",
			         k, (unsigned long long)y->start, (unsigned long long)y->start_pc,
			         (unsigned long long)y->addr, y->kind, (unsigned long long)window);
		}
		end = next_touch(tr, y->start, y->addr);
		if (end == SIZE_MAX ? y->state == LOMAS_SAMPLE_REUSED
		                    : y->state != LOMAS_SAMPLE_REUSED || y->end != end)
			fail_msg(
			    "sample %zu at %llu addr %#llx: state %u end %llu, the trace's next "
			    "touch after it %lld",
			    k, (unsigned long long)y->start, (unsigned long long)y->addr, y->state,
			    (unsigned long long)y->end, end == SIZE_MAX ? -1LL : (long long)end);
		o->samples++;
		o->stores += y->kind == LOMAS_REF_STORE;
		o->late += (double)(y->start - i);
		/* A reuse between the sampled reference and the signal: not seen. */
		o->window += next_touch(tr, i, y->addr) <= y->start;
	}
}

static void sweep(const char *tgt, const char *arg, uint32_t skid, const int64_t pert[4],
                  bool filter, const unsigned *periods, size_t np, unsigned seeds, ibs_out *o)
{
	char path[4200], seed[32], period[32];
	run_result n, p;
	trace tr = {0};
	uint64_t trace_stores = 0;
	memset(o, 0, sizeof *o);
	target(path, sizeof path, tgt);
	char *argv[] = {path, (char *)arg, NULL};
	ibs_sysfs(true, filter); /* first: the environment is on the target's stack */
	run_native(argv, &n);
	full_trace(argv, &tr);
	for (size_t j = 0; j < tr.n; j++)
		trace_stores += tr.r[j].kind == LOMAS_REF_STORE;
	for (size_t pi = 0; pi < np; pi++)
		for (unsigned k = 1; k <= seeds; k++) {
			const char *by = NULL;
			pmu_replay_stats rs;
			snprintf(seed, sizeof seed, "%u", k);
			snprintf(period, sizeof period, "%u", periods[pi]);
			ibs_replay(k * 7919, skid, pert, true, filter);
			if (run_step(argv, &p, "clock", "pmu", "pmu_sample", "precise", "period",
			             period, "seed", seed, NULL))
				fail_msg("the pmu clock, IBS: %s", lomas_error_message());
			replay_off(&rs);
			if (getenv("IBS_DEBUG"))
				fprintf(
				    stderr,
				    "#   period %s seed %s: %zu samples, other %llu kernel %llu, "
				    "overflows %llu stale %llu, "
				    "replay: ops %llu signals %llu records %llu lost %llu\n",
				    period, seed, p.prof->samples.n,
				    (unsigned long long)meta_u64(p.prof, "pmu.not_memory_records"),
				    (unsigned long long)meta_u64(p.prof, "pmu.kernel_records"),
				    (unsigned long long)meta_u64(p.prof, "pmu.overflows"),
				    (unsigned long long)meta_u64(p.prof, "pmu.stale_overflows"),
				    (unsigned long long)rs.ibs_ops, (unsigned long long)rs.signals,
				    (unsigned long long)rs.records, (unsigned long long)rs.lost);
			assert_string_equal(p.out, n.out);
			assert_int_equal(p.status, n.status);
			assert_int_equal(profile_validate(p.prof), LOMAS_OK);
			assert_int_equal(lomas_profile_meta_get(p.prof, "pmu.precise_by", &by),
			                 LOMAS_OK);
			assert_non_null(
			    strstr(by, filter ? "filtered by the kernel" : "dropped by us"));
			check(&tr, p.prof, skid + DECODE_MAX_REFS + 1, o);
			assert_int_equal(meta_u64(p.prof, "pmu.records"), p.prof->samples.n);
			o->records += meta_u64(p.prof, "pmu.records");
			o->not_memory += meta_u64(p.prof, "pmu.not_memory_records");
			o->kernel += meta_u64(p.prof, "pmu.kernel_records");
			o->late_records += meta_u64(p.prof, "pmu.late_records");
			o->expected += tr.n / periods[pi];
			o->runs++;
			free_result(&p);
		}
	ibs_sysfs_off();
	/* The mix of the trace: loads and stores alike sampled at 1/period per op. */
	if (o->samples >= 200) {
		double share = (double)o->stores / (double)o->samples,
		       want = (double)trace_stores / (double)tr.n,
		       sd = sqrt(want * (1 - want) / (double)o->samples);
		if (fabs(share - want) > 4 * sd + 0.02)
			fail_msg("stores: %.3f of the samples, %.3f of the trace", share, want);
	}
	fprintf(stderr,
	        "# IBS %s skid %u perturbations %lld/%lld/%lld/%lld%s: %llu runs, %llu samples "
	        "(%.2f of references / period), every one a reference of the trace %.1f before "
	        "its start on average and ending at the trace's next touch; %llu reuses inside "
	        "the skid window not seen; records of other ops %llu, of kernel ops %llu, met with "
	        "the signal blocked %llu\n",
	        tgt, skid, (long long)pert[0], (long long)pert[1], (long long)pert[2],
	        (long long)pert[3], filter ? " (swfilt)" : "", (unsigned long long)o->runs,
	        (unsigned long long)o->samples,
	        o->expected ? (double)o->samples / (double)o->expected : 0.0,
	        o->samples ? o->late / (double)o->samples : 0.0, (unsigned long long)o->window,
	        (unsigned long long)o->not_memory, (unsigned long long)o->kernel,
	        (unsigned long long)o->late_records);
	free(tr.r);
}

static const unsigned periods[] = {150, 400};

/* No skid, no perturbation: each sample the reference itself (start = its index). */
static void test_ibs_exact(void **state)
{
	static const int64_t none[4] = {0, 0, 0, 0};
	ibs_out o;
	(void)state;
	sweep("t_loop", "6", 0, none, false, periods, 2, 3, &o);
	assert_true(o.samples > o.runs * 5);
	assert_true(o.late <= (double)o.samples * DECODE_MAX_REFS);
	assert_true(o.not_memory > 0); /* IBS tags every op */
	assert_int_equal(o.kernel, 0); /* no perturbation: no kernel op counted */
	/* Each memory op at 1/period: the rate of the references (a dead time of the skid). */
	assert_true(o.samples * 10 >= o.expected * 7 && o.samples * 10 <= o.expected * 13);
}

/* Skid and every perturbation, a kernel without swfilt: kernel ops' records dropped by us. */
static void test_ibs_skid_perturbed(void **state)
{
	static const int64_t pert[4] = {3, 2, 4, 6};
	ibs_out o;
	(void)state;
	sweep("t_loop", "6", 12, pert, false, periods, 2, 3, &o);
	assert_true(o.samples > o.runs * 5);
	assert_true(o.kernel > 0);
	assert_true(o.samples * 10 >= o.expected * 6 && o.samples * 10 <= o.expected * 13);
}

/* A kernel with swfilt drops kernel-mode samples itself; a program that faults on purpose. */
static void test_ibs_swfilt_segv(void **state)
{
	static const int64_t pert[4] = {3, 2, 4, 6};
	static const unsigned p[] = {40};
	ibs_out o;
	(void)state;
	sweep("t_segv_recover", "1", 8, pert, true, p, 1, 3, &o);
	assert_true(o.samples > 0);
	assert_int_equal(o.kernel, 0);
}

/* The hostile set under IBS (skid, perturbations, no swfilt): the program as natively. */
static void test_ibs_hostile(void **state)
{
	static const int64_t pert[4] = {3, 2, 4, 6};
	static const char *const targets[][2] = {
	    {"t_signals", NULL}, {"t_threads", NULL}, {"t_crash", NULL}, {"t_crash", "fpe"}};
	(void)state;
	ibs_sysfs(true, false);
	for (size_t i = 0; i < sizeof targets / sizeof *targets; i++) {
		char path[4200];
		run_result n, p;
		uint32_t threads = 0;
		target(path, sizeof path, targets[i][0]);
		char *argv[] = {path, (char *)targets[i][1], NULL};
		run_native(argv, &n);
		ibs_replay(11 + i, 12, pert, true, false);
		if (run_step(argv, &p, "clock", "pmu", "pmu_sample", "precise", "period", "200",
		             "seed", "5", NULL))
			fail_msg("the pmu clock, IBS, on %s: %s", targets[i][0],
			         lomas_error_message());
		replay_off(NULL);
		assert_string_equal(p.out, n.out);
		assert_int_equal(p.status, n.status);
		assert_int_equal(profile_validate(p.prof), LOMAS_OK);
		assert_true(p.prof->samples.n > 0);
		for (size_t k = 0; k < p.prof->samples.n; k++)
			threads |= 1u << (p.prof->samples.items[k].thread % 32);
		fprintf(stderr,
		        "# IBS %s %s: status %d as natively, %zu samples, %d threads sampled\n",
		        targets[i][0], targets[i][1] ? targets[i][1] : "", p.status,
		        p.prof->samples.n, __builtin_popcount(threads));
		if (!strcmp(targets[i][0], "t_threads"))
			assert_true(__builtin_popcount(threads) > 1);
		free_result(&p);
	}
	ibs_sysfs_off();
}

/* Refused in one line: no per-thread IBS (Linux < 6.2); IBS counting cycles only. */
static void test_ibs_refused(void **state)
{
	static const int64_t none[4] = {0, 0, 0, 0};
	char path[4200];
	run_result p;
	(void)state;
	target(path, sizeof path, "t_loop");
	char *argv[] = {path, "2", NULL};
	ibs_sysfs(true, false);
	ibs_replay(1, 4, none, false, false);
	assert_int_equal(run_step(argv, &p, "clock", "pmu", "pmu_sample", "precise", NULL),
	                 LOMAS_ENOTSUP);
	replay_off(NULL);
	assert_non_null(strstr(lomas_error_message(), "Linux >= 6.2"));
	assert_null(strchr(lomas_error_message(), '\n'));
	ibs_sysfs_off();
	ibs_sysfs(false, false);
	ibs_replay(1, 4, none, true, false);
	assert_int_equal(run_step(argv, &p, "clock", "pmu", "pmu_sample", "precise", NULL),
	                 LOMAS_ENOTSUP);
	replay_off(NULL);
	assert_non_null(strstr(lomas_error_message(), "cycles only"));
	ibs_sysfs_off();
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_ibs_exact),       cmocka_unit_test(test_ibs_skid_perturbed),
	    cmocka_unit_test(test_ibs_swfilt_segv), cmocka_unit_test(test_ibs_hostile),
	    cmocka_unit_test(test_ibs_refused),
	};
	return pmu_replay_main(tests, sizeof tests / sizeof *tests, "test_pmu_ibs", true,
	                       "amd64_fam19h_zen3");
}

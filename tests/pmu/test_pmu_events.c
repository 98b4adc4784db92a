/*
 * The pmu clock's event tables (issue 20, item 1): for each PMU family,
 * forced with LIBPFM_FORCE_PMU, the table's encodings equal what libpfm4's
 * own tables give when asked directly here (pfm_get_os_event_encoding, not
 * our code), and the event select and unit mask are the ones the vendors
 * document (Intel SDM vol. 3B ch. 19; AMD PPR for family 19h: LS_DISPATCH
 * is event 0x29, umask 1 loads, 2 stores). --events overrides; an unknown
 * name is refused naming it; the probe turns ENOENT into one line.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/stat.h>

#include "lomas/lomas.h"
#include "pmu/pmu.h"

#include <perfmon/pfmlib_perf_event.h>

/* libpfm4's encoding of name on PMU force, asked directly. */
static int direct(const char *force, const char *name, struct perf_event_attr *attr)
{
	pfm_perf_encode_arg_t arg;
	char full[256];
	int r;
	snprintf(full, sizeof full, "%s::%s", force, name);
	setenv("LIBPFM_FORCE_PMU", force, 1);
	assert_int_equal(pfm_initialize(), PFM_SUCCESS);
	memset(attr, 0, sizeof *attr);
	memset(&arg, 0, sizeof arg);
	arg.attr = attr;
	arg.size = sizeof arg;
	r = pfm_get_os_event_encoding(full, PFM_PLM3, PFM_OS_PERF_EVENT_EXT, &arg);
	pfm_terminate();
	unsetenv("LIBPFM_FORCE_PMU");
	return r;
}

static void check_pmu(const char *pmu, const char *family, const char *load, const char *store,
                      unsigned evsel, unsigned umask_load, unsigned umask_store, bool pebs)
{
	pmu_table t;
	struct perf_event_attr a;
	const char *names[2] = {load, store};
	unsigned umasks[2] = {umask_load, umask_store};
	assert_int_equal(pmu_table_get(pmu, NULL, &t), LOMAS_OK);
	assert_string_equal(t.pmu, pmu);
	assert_string_equal(t.family, family);
	assert_int_equal(t.n, 2);
	assert_int_equal(t.pebs_addr, pebs);
	assert_int_equal(t.approximate, !strcmp(family, "zen"));
	for (int i = 0; i < 2; i++) {
		const struct perf_event_attr *e = &t.ev[i].attr;
		assert_string_equal(t.ev[i].name, names[i]);
		assert_int_equal(t.ev[i].kinds, i ? PMU_KIND_STORES : PMU_KIND_LOADS);
		assert_int_equal(direct(pmu, names[i], &a), PFM_SUCCESS);
		assert_int_equal(e->type, a.type);
		assert_int_equal(e->config, a.config);
		assert_int_equal(e->config1, a.config1);
		assert_int_equal(e->config2, a.config2);
		assert_int_equal(e->exclude_kernel, a.exclude_kernel);
		assert_int_equal(e->exclude_hv, a.exclude_hv);
		assert_int_equal(e->precise_ip, a.precise_ip);
		/* The vendor's event select and unit mask, user level only, raw type. */
		assert_int_equal(e->type, PERF_TYPE_RAW);
		assert_int_equal(e->config & 0xff, evsel);
		assert_int_equal((e->config >> 8) & 0xff, umasks[i]);
		assert_true(e->exclude_kernel);
		assert_non_null(strstr(t.ev[i].fstr, pmu));
	}
}

static void test_nehalem(void **state)
{
	check_pmu("nhm", "nhm", "MEM_INST_RETIRED:LOADS", "MEM_INST_RETIRED:STORES", 0x0b, 0x01,
	          0x02, false);
}

static void test_sandy_bridge(void **state)
{
	check_pmu("snb", "snb", "MEM_UOPS_RETIRED:ALL_LOADS", "MEM_UOPS_RETIRED:ALL_STORES", 0xd0,
	          0x81, 0x82, false);
	/* Haswell has the PEBS data address for the same events. */
	check_pmu("hsw", "snb", "MEM_UOPS_RETIRED:ALL_LOADS", "MEM_UOPS_RETIRED:ALL_STORES", 0xd0,
	          0x81, 0x82, true);
}

static void test_skylake(void **state)
{
	check_pmu("skl", "skl", "MEM_INST_RETIRED:ALL_LOADS", "MEM_INST_RETIRED:ALL_STORES", 0xd0,
	          0x81, 0x82, true);
}

static void test_sapphire_rapids(void **state)
{
	check_pmu("spr", "skl", "MEM_INST_RETIRED:ALL_LOADS", "MEM_INST_RETIRED:ALL_STORES", 0xd0,
	          0x81, 0x82, true);
}

static void test_zen3(void **state)
{
	check_pmu("amd64_fam19h_zen3", "zen", "LS_DISPATCH:LD_DISPATCH",
	          "LS_DISPATCH:STORE_DISPATCH", 0x29, 0x01, 0x02, false);
}

/* --events: any libpfm4 names; one name counts both kinds; unknown ones refused. */
static void test_events_override(void **state)
{
	pmu_table t;
	struct perf_event_attr a;
	assert_int_equal(pmu_table_get("skl", "MEM_INST_RETIRED:ANY", &t), LOMAS_OK);
	assert_int_equal(t.n, 1);
	assert_int_equal(t.ev[0].kinds, PMU_KIND_REFS);
	assert_int_equal(direct("skl", "MEM_INST_RETIRED:ANY", &a), PFM_SUCCESS);
	assert_int_equal(t.ev[0].attr.config, a.config);
	assert_int_equal(pmu_table_get("nhm", "MEM_INST_RETIRED:LOADS,MEM_INST_RETIRED:STORES", &t),
	                 LOMAS_OK);
	assert_int_equal(t.n, 2);
	assert_int_equal(t.ev[1].kinds, PMU_KIND_STORES);
	assert_int_equal(pmu_table_get("skl", "MEM_INST_RETIRED:ALL_LOADS,NO_SUCH_EVENT", &t),
	                 LOMAS_EINVAL);
	assert_non_null(strstr(lomas_error_message(), "NO_SUCH_EVENT"));
	assert_non_null(strstr(lomas_error_message(), "skl"));
	assert_int_equal(pmu_table_get("skl", "A,B,C", &t), LOMAS_EINVAL);
	assert_int_equal(pmu_table_get("no_such_pmu", NULL, &t), LOMAS_EINVAL);
	assert_non_null(strstr(lomas_error_message(), "no_such_pmu"));
	/* Forcing is undone: the environment is as it was. */
	assert_null(getenv("LIBPFM_FORCE_PMU"));
}

/* A fake open that fails as a machine without a PMU or with paranoid 3 does. */
static int fail_errno;
static int fake_open(void *ctx, struct perf_event_attr *attr, pid_t tid, int cpu, int group,
                     unsigned long flags)
{
	return -fail_errno;
}

static void test_probe_errors(void **state)
{
	pmu_table t;
	pmu_sys_ops ops = pmu_sys_real;
	assert_int_equal(pmu_table_get("skl", NULL, &t), LOMAS_OK);
	ops.open = fake_open;
	pmu_sys_set(&ops);
	fail_errno = ENOENT;
	assert_int_equal(pmu_probe(&t, 0, "step"), LOMAS_ENOTSUP);
	assert_non_null(strstr(lomas_error_message(), "no hardware PMU"));
	assert_non_null(strstr(lomas_error_message(), "--clock=step"));
	assert_null(strchr(lomas_error_message(), '\n'));
	fail_errno = EACCES;
	assert_int_equal(pmu_probe(&t, 0, "step"), LOMAS_EPERM);
	assert_non_null(strstr(lomas_error_message(), "perf_event_paranoid"));
	assert_non_null(strstr(lomas_error_message(), "CAP_PERFMON"));
	pmu_sys_set(NULL);
	assert_ptr_equal(pmu_sys(), &pmu_sys_real);
}

/* A sysfs tree with the given core PMUs (name=type pairs) under a fresh directory. */
static void fake_sysfs(char *root, size_t len, const char *const *names, const unsigned *types,
                       unsigned n)
{
	char path[4096];
	snprintf(root, len, "/tmp/lomas-sysfs-XXXXXX");
	assert_non_null(mkdtemp(root));
	for (unsigned i = 0; i < n; i++) {
		FILE *f;
		snprintf(path, sizeof path, "%s/bus", root);
		mkdir(path, 0700);
		snprintf(path, sizeof path, "%s/bus/event_source", root);
		mkdir(path, 0700);
		snprintf(path, sizeof path, "%s/bus/event_source/devices", root);
		mkdir(path, 0700);
		snprintf(path, sizeof path, "%s/bus/event_source/devices/%s", root, names[i]);
		assert_int_equal(mkdir(path, 0700), 0);
		snprintf(path, sizeof path, "%s/bus/event_source/devices/%s/type", root, names[i]);
		assert_non_null(f = fopen(path, "w"));
		fprintf(f, "%u\n", types[i]);
		fclose(f);
	}
	setenv("LOMAS_SYSFS_ROOT", root, 1);
}

static void rm_sysfs(const char *root)
{
	char cmd[4200];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
	assert_int_equal(system(cmd), 0);
	unsetenv("LOMAS_SYSFS_ROOT");
}

/*
 * A hybrid Intel part (cpu_core and cpu_atom in sysfs): the table lists
 * both core PMUs, each event is opened on each (a raw event with that
 * PMU's type; a generic one with the type in config's high 32 bits), and
 * lomas_machine_info shows both.
 */
static void test_hybrid_types(void **state)
{
	static const char *const names[] = {"cpu_core", "cpu_atom"};
	static const unsigned types[] = {4, 10};
	char root[64], *json = NULL;
	pmu_table t;
	struct perf_event_attr a;
	pmu_event hw = {.attr = {.type = PERF_TYPE_HARDWARE, .config = PERF_COUNT_HW_INSTRUCTIONS}};
	fake_sysfs(root, sizeof root, names, types, 2);
	assert_int_equal(pmu_table_get("skl", NULL, &t), LOMAS_OK);
	assert_int_equal(t.ntypes, 2);
	assert_true(t.hybrid);
	assert_string_equal(t.types[0].name, "cpu_core");
	assert_int_equal(t.types[0].type, 4);
	assert_string_equal(t.types[1].name, "cpu_atom");
	assert_int_equal(t.types[1].type, 10);
	pmu_attr_for_type(&t.ev[0], 10, &a);
	assert_int_equal(a.type, 10);
	assert_int_equal(a.config, 0x81d0); /* MEM_INST_RETIRED:ALL_LOADS, unchanged */
	pmu_attr_for_type(&hw, 10, &a);
	assert_int_equal(a.type, PERF_TYPE_HARDWARE);
	assert_int_equal(a.config, (10ull << 32) | PERF_COUNT_HW_INSTRUCTIONS);
	assert_int_equal(lomas_machine_info("skl", &json), LOMAS_OK);
	assert_non_null(strstr(json, "\"cpu_core\""));
	assert_non_null(strstr(json, "\"cpu_atom\""));
	assert_non_null(strstr(json, "\"type\": 10"));
	lomas_string_free(json);
	rm_sysfs(root);
	/* One core PMU ("cpu"): not hybrid, one type. */
	{
		static const char *const one[] = {"cpu"};
		static const unsigned four[] = {4};
		fake_sysfs(root, sizeof root, one, four, 1);
		assert_int_equal(pmu_table_get("skl", NULL, &t), LOMAS_OK);
		assert_int_equal(t.ntypes, 1);
		assert_false(t.hybrid);
		rm_sysfs(root);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_nehalem),      cmocka_unit_test(test_sandy_bridge),
	    cmocka_unit_test(test_skylake),      cmocka_unit_test(test_sapphire_rapids),
	    cmocka_unit_test(test_zen3),         cmocka_unit_test(test_events_override),
	    cmocka_unit_test(test_probe_errors), cmocka_unit_test(test_hybrid_types),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

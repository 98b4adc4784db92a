/*
 * lomas_machine_info: what this machine offers the clocks, as one JSON
 * document (lomas-demo info prints it for people or as --json): each clock
 * and, where it cannot run, why; the perf settings that decide it; the
 * detected (or a named) PMU's load/store events with their perf encodings.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>
#include <linux/hw_breakpoint.h>

#include "pmu.h"

static int read_int(const char *path, int dflt)
{
	FILE *f = fopen(path, "re");
	int v = dflt;
	if (!f)
		return dflt;
	if (fscanf(f, "%d", &v) != 1)
		v = dflt;
	fclose(f);
	return v;
}

/* Is prog an executable on PATH? */
static bool on_path(const char *prog)
{
	const char *path = getenv("PATH");
	char buf[4096];
	if (!path)
		path = "/usr/local/bin:/usr/bin:/bin";
	while (*path) {
		size_t n = strcspn(path, ":");
		snprintf(buf, sizeof buf, "%.*s/%s", (int)n, path, prog);
		if (n && access(buf, X_OK) == 0)
			return true;
		path += n + (path[n] == ':');
	}
	return false;
}

static void add_clock(json_t *arr, const char *name, bool works, const char *why)
{
	json_t *c = json_pack("{s:s, s:b}", "name", name, "works", works);
	if (!works && why)
		json_object_set_new(c, "why", json_string(why));
	json_array_append_new(arr, c);
}

/* Do hardware breakpoints (the debugreg engine's) open and fire here? */
static bool breakpoints_work(void)
{
	static volatile uint64_t word;
	struct perf_event_attr a = {.type = PERF_TYPE_BREAKPOINT, .size = sizeof a};
	const pmu_sys_ops *sys = pmu_sys();
	int fd;
	a.bp_type = HW_BREAKPOINT_RW;
	a.bp_addr = (uint64_t)(uintptr_t)&word;
	a.bp_len = HW_BREAKPOINT_LEN_8;
	a.exclude_kernel = 1;
	a.exclude_hv = 1;
	uint64_t count = 0;
	bool fired;
	fd = sys->open(sys->ctx, &a, getpid(), -1, -1, PERF_FLAG_FD_CLOEXEC);
	if (fd < 0)
		return false;
	/* One that opens must also fire: under some hypervisors (a PVM guest
	 * on AMD EPYC, 2026-11-29) it opens and counts nothing. */
	for (int i = 0; i < 4; i++)
		word += (uint64_t)i;
	fired = sys->read(sys->ctx, fd, &count, sizeof count) == (ssize_t)sizeof count && count > 0;
	sys->close(sys->ctx, fd);
	return fired;
}

static json_t *events_json(const pmu_table *t)
{
	json_t *arr = json_array();
	for (unsigned i = 0; i < t->n; i++) {
		const pmu_event *e = &t->ev[i];
		char cfg[32], perf[96];
		snprintf(cfg, sizeof cfg, "%#llx", (unsigned long long)e->attr.config);
		/* perf's own syntax for a raw event: r<config>, user level only. */
		snprintf(perf, sizeof perf, "r%llx:u", (unsigned long long)e->attr.config);
		json_array_append_new(arr,
		                      json_pack("{s:s, s:s, s:s, s:i, s:s, s:s, s:I, s:I}", "kind",
		                                e->kinds == PMU_KIND_REFS     ? "load+store"
		                                : e->kinds == PMU_KIND_STORES ? "store"
		                                                              : "load",
		                                "name", e->name, "fstr", e->fstr, "type",
		                                (int)e->attr.type, "config", cfg, "perf", perf,
		                                "config1", (json_int_t)e->attr.config1, "config2",
		                                (json_int_t)e->attr.config2));
	}
	return arr;
}

/* What pmu_sample=precise samples with here. */
static const char *precise_by(const pmu_table *t)
{
	if (t->pebs_addr)
		return "PEBS with the data address";
	if (pmu_precise_ibs(t))
		return t->ibs_swfilt ? "IBS op (ops; kernel samples filtered by the kernel)"
		                     : "IBS op (ops; kernel samples dropped by lomas)";
	if (t->ibs_op)
		return "none (IBS op counts cycles only here)";
	return "none";
}

/* The kernel's core PMUs and, on each, the events' attr (a hybrid CPU opens one per PMU). */
static json_t *types_json(const pmu_table *t)
{
	json_t *arr = json_array();
	for (unsigned k = 0; k < t->ntypes; k++) {
		json_t *ev = json_array();
		for (unsigned i = 0; i < t->n; i++) {
			struct perf_event_attr a;
			char cfg[32];
			pmu_attr_for_type(&t->ev[i], t->types[k].type, &a);
			snprintf(cfg, sizeof cfg, "%#llx", (unsigned long long)a.config);
			json_array_append_new(ev,
			                      json_pack("{s:s, s:i, s:s}", "name", t->ev[i].name,
			                                "type", (int)a.type, "config", cfg));
		}
		json_array_append_new(arr, json_pack("{s:s, s:i, s:o}", "name", t->types[k].name,
		                                     "type", (int)t->types[k].type, "events", ev));
	}
	return arr;
}

static void list_one(const char *name, const char *desc, bool present, void *arg)
{
	json_array_append_new(
	    arg, json_pack("{s:s, s:s, s:b}", "name", name, "desc", desc, "present", present));
}

lomas_status lomas_machine_info(const char *pmu, char **json_out)
{
	error_clear();
	json_t *root, *clocks, *p;
	pmu_table t;
	lomas_status st, probe = LOMAS_ENOTSUP;
	char why[512] = "", *text;
	int paranoid = pmu_paranoid(), scope;
	if (!json_out)
		return error_set(LOMAS_EINVAL, "lomas_machine_info: NULL argument");
	*json_out = NULL;
	root = json_object();
	clocks = json_array();
	if (pmu && !strcmp(pmu, "list")) {
		json_t *l = json_array();
		pmu_list(list_one, l);
		json_object_set_new(root, "pmus", l);
		goto out;
	}
	st = pmu_table_get(pmu, NULL, &t);
	if (st == LOMAS_EINVAL) {
		json_decref(root);
		json_decref(clocks);
		return st; /* an unknown --pmu name */
	}
	if (st) {
		snprintf(why, sizeof why, "%s", lomas_error_message());
	} else if (pmu && *pmu) {
		snprintf(why, sizeof why, "the %s tables are shown; this machine's own are not",
		         pmu);
	} else if ((probe = pmu_probe(&t, getpid(), NULL))) {
		snprintf(why, sizeof why, "%s", lomas_error_message());
	}
	error_clear();
	add_clock(clocks, "pmu", !st && !(pmu && *pmu) && !probe, why);
	scope = read_int("/proc/sys/kernel/yama/ptrace_scope", 0);
	add_clock(clocks, "step", scope < 3,
	          "kernel.yama.ptrace_scope is 3: no process may be traced");
	add_clock(clocks, "inline", on_path("clang-16"),
	          "no clang-16 on PATH to build programs with the lomas-inline hooks");
	{
		lomas_config *cfg = NULL;
		bool known = lomas_config_new(&cfg) == LOMAS_OK &&
		             lomas_config_set(cfg, "clock", "dbi") == LOMAS_OK;
		lomas_config_free(cfg);
		error_clear();
		add_clock(clocks, "dbi", known && on_path("valgrind"),
		          known ? "no valgrind on PATH"
		                : "this build of liblomas has no dbi clock");
	}
	add_clock(clocks, "trace", true, NULL);
	json_object_set_new(root, "perf_event_paranoid", json_integer(paranoid));
	json_object_set_new(root, "ptrace_scope", json_integer(scope));
	json_object_set_new(root, "breakpoints", json_boolean(breakpoints_work()));
	if (!st) {
		p = json_pack("{s:s, s:s, s:s, s:b, s:b, s:b, s:b, s:b, s:s}", "name", t.pmu,
		              "desc", t.desc, "family", t.family, "forced", pmu && *pmu, "hybrid",
		              t.hybrid, "pebs_address", t.pebs_addr, "ibs_op", t.ibs_op,
		              "approximate", t.approximate, "precise", precise_by(&t));
		json_object_set_new(p, "events", events_json(&t));
		json_object_set_new(p, "core_pmus", types_json(&t));
		json_object_set_new(root, "pmu", p);
	}
out:
	json_object_set_new(root, "clocks", clocks);
	text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
	json_decref(root);
	if (!text)
		return error_set(LOMAS_ENOMEM, "out of memory");
	*json_out = text;
	return LOMAS_OK;
}

void lomas_string_free(char *s)
{
	free(s);
}

/*
 * The pmu clock's event tables through libpfm4 (issue 20): the load and
 * store events of the detected core PMU and their perf encodings from
 * pfm_get_os_event_encoding(PFM_OS_PERF_EVENT_EXT). Families, by the
 * events their PMUs know (Intel SDM vol. 3B, ch. 19):
 *   Skylake and later  MEM_INST_RETIRED:ALL_LOADS / ALL_STORES (PEBS, data address)
 *   Sandy Bridge-Bdw   MEM_UOPS_RETIRED:ALL_LOADS / ALL_STORES (PEBS address from Haswell)
 *   Nehalem/Westmere   MEM_INST_RETIRED:LOADS / STORES (the kernel's PEBS table takes
 *                      MEM_INST_RETIRED only as load latency: not precise here)
 *   AMD Zen            LS_DISPATCH:LD_DISPATCH / STORE_DISPATCH: dispatched, not
 *                      retired (approximate); IBS op sampling where offered
 * tried in that order on the PMU (a Skylake PMU also takes the older alias).
 * libpfm4 reads LIBPFM_FORCE_PMU once, in pfm_initialize(); a forced PMU is
 * set for one initialization and the library terminated after each use.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* linux/perf_event.h first: libpfm4's own copy then steps aside. */
#include "pmu.h"

#include <perfmon/pfmlib_perf_event.h>

static pthread_mutex_t pfm_lock = PTHREAD_MUTEX_INITIALIZER;

static const struct family {
	const char *name;
	const char *load, *store;
	bool approximate;
} families[] = {
    {"skl", "MEM_INST_RETIRED:ALL_LOADS", "MEM_INST_RETIRED:ALL_STORES", false},
    {"snb", "MEM_UOPS_RETIRED:ALL_LOADS", "MEM_UOPS_RETIRED:ALL_STORES", false},
    {"nhm", "MEM_INST_RETIRED:LOADS", "MEM_INST_RETIRED:STORES", false},
    {"zen", "LS_DISPATCH:LD_DISPATCH", "LS_DISPATCH:STORE_DISPATCH", true},
};

/* PMUs of the snb family whose PEBS records carry the data address. */
static bool pebs_address(const char *family, const char *pmu)
{
	if (!strcmp(family, "skl"))
		return true;
	return !strcmp(family, "snb") && (!strncmp(pmu, "hsw", 3) || !strncmp(pmu, "bdw", 3));
}

/* Start libpfm4, with LIBPFM_FORCE_PMU=force for this initialization. */
static int pfm_begin(const char *force)
{
	char *saved = NULL;
	int r;
	pthread_mutex_lock(&pfm_lock);
	if (force && *force) {
		const char *old = getenv("LIBPFM_FORCE_PMU");
		saved = old ? strdup(old) : NULL;
		setenv("LIBPFM_FORCE_PMU", force, 1);
	}
	r = pfm_initialize();
	if (force && *force) {
		if (saved)
			setenv("LIBPFM_FORCE_PMU", saved, 1);
		else
			unsetenv("LIBPFM_FORCE_PMU");
		free(saved);
	}
	return r;
}

static void pfm_end(void)
{
	pfm_terminate();
	pthread_mutex_unlock(&pfm_lock);
}

/* Encode "pmu::name" (user level only) into ev; a pfm error code. */
static int encode(const char *pmu, const char *name, unsigned kinds, pmu_event *ev)
{
	pfm_perf_encode_arg_t arg;
	char full[256], *fstr = NULL;
	int r;
	memset(ev, 0, sizeof *ev);
	memset(&arg, 0, sizeof arg);
	arg.attr = &ev->attr;
	arg.size = sizeof arg;
	arg.fstr = &fstr;
	if (strstr(name, "::"))
		snprintf(full, sizeof full, "%s", name);
	else
		snprintf(full, sizeof full, "%s::%s", pmu, name);
	r = pfm_get_os_event_encoding(full, PFM_PLM3, PFM_OS_PERF_EVENT_EXT, &arg);
	if (r == PFM_SUCCESS) {
		snprintf(ev->name, sizeof ev->name, "%s", name);
		snprintf(ev->fstr, sizeof ev->fstr, "%s", fstr ? fstr : name);
		ev->attr.size = sizeof ev->attr;
		ev->kinds = kinds;
	}
	free(fstr);
	return r;
}

/*
 * The present core PMUs (at most 2 kept): their count. pfm_terminate()
 * leaves the PMUs of an earlier initialization flagged present
 * (pfmlib_init_pmus sets PFMLIB_PMU_FL_ACTIVE, nothing clears it), so a
 * forced PMU is looked up by its name.
 */
static unsigned core_pmus(pmu_table *t, const char *force)
{
	unsigned n = 0;
	pfm_pmu_info_t pi;
	for (int i = 0; i < PFM_PMU_MAX; i++) {
		memset(&pi, 0, sizeof pi);
		pi.size = sizeof pi;
		if (pfm_get_pmu_info((pfm_pmu_t)i, &pi) != PFM_SUCCESS || !pi.is_present ||
		    pi.type != PFM_PMU_TYPE_CORE)
			continue;
		if (force && *force && strncasecmp(pi.name, force, strcspn(force, ",")) != 0)
			continue;
		if (n == 0) {
			snprintf(t->pmu, sizeof t->pmu, "%s", pi.name);
			snprintf(t->desc, sizeof t->desc, "%s", pi.desc ? pi.desc : "");
		}
		if (n < 2)
			snprintf(t->cores[n], sizeof t->cores[n], "%s", pi.name);
		n++;
	}
	return n;
}

/* The file of the kernel PMU name in sysfs ($LOMAS_SYSFS_ROOT or /sys), or NULL. */
static FILE *pmu_file(const char *name, const char *file)
{
	const char *root = getenv("LOMAS_SYSFS_ROOT");
	char path[4096];
	snprintf(path, sizeof path, "%s/bus/event_source/devices/%s/%s",
	         root && *root ? root : "/sys", name, file);
	return fopen(path, "re");
}

/* The perf type of the kernel PMU name (sysfs), or -1. */
static long pmu_type_of(const char *name)
{
	unsigned type;
	long r = -1;
	FILE *f = pmu_file(name, "type");
	if (!f)
		return -1;
	if (fscanf(f, "%u", &type) == 1)
		r = type;
	fclose(f);
	return r;
}

unsigned pmu_core_types(pmu_core_type *out, unsigned max)
{
	static const char *const names[] = {"cpu", "cpu_core", "cpu_atom"};
	unsigned n = 0;
	for (size_t i = 0; i < sizeof names / sizeof *names && n < max; i++) {
		long type = pmu_type_of(names[i]);
		if (type < 0)
			continue;
		snprintf(out[n].name, sizeof out[n].name, "%s", names[i]);
		out[n].type = (uint32_t)type;
		n++;
	}
	return n;
}

void pmu_attr_for_type(const pmu_event *e, uint32_t type, struct perf_event_attr *out)
{
	*out = e->attr;
	if (out->type == PERF_TYPE_HARDWARE || out->type == PERF_TYPE_HW_CACHE)
		out->config = (out->config & 0xffffffffull) | (uint64_t)type << 32;
	else
		out->type = type;
}

/*
 * The bit a format file of the kernel PMU name says field `fmt` is in
 * (sysfs format/<fmt>: "config:19", "config2:0"), as a mask, or 0 when
 * there is no such file or it names another field than `field`.
 */
static uint64_t format_bit(const char *name, const char *fmt, const char *field)
{
	char file[128], want[32];
	unsigned bit;
	uint64_t r = 0;
	FILE *f;
	snprintf(file, sizeof file, "format/%s", fmt);
	if (!(f = pmu_file(name, file)))
		return 0;
	snprintf(want, sizeof want, "%s:%%u", field); /* "config:%u" does not take "config2:" */
	if (fscanf(f, want, &bit) == 1 && bit < 64)
		r = 1ull << bit;
	fclose(f);
	return r;
}

/* AMD IBS op: the kernel's ibs_op PMU, its perf type and format (sysfs). */
static void ibs_probe(pmu_table *t)
{
	long type = pmu_type_of("ibs_op");
	if (type < 0)
		return;
	t->ibs_op = true;
	t->ibs_type = (unsigned)type;
	t->ibs_cnt_ctl = format_bit("ibs_op", "cnt_ctl", "config");
	t->ibs_swfilt = format_bit("ibs_op", "swfilt", "config2");
}

void pmu_ibs_attr(const pmu_table *t, bool user, struct perf_event_attr *out)
{
	memset(out, 0, sizeof *out);
	out->size = sizeof *out;
	out->type = t->ibs_type;
	out->config = t->ibs_cnt_ctl;
	out->sample_type = PMU_RING_SAMPLE_TYPE;
	if (user && t->ibs_swfilt) {
		out->config2 = t->ibs_swfilt;
		out->exclude_kernel = 1;
		out->exclude_hv = 1;
	}
}

static lomas_status given_events(pmu_table *t, const char *events)
{
	char buf[512], *save = NULL, *tok;
	unsigned n = 0;
	int r;
	snprintf(buf, sizeof buf, "%s", events);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (n == PMU_MAX_EVENTS)
			return error_set(LOMAS_EINVAL,
			                 "events: '%s': at most two events (LOAD,STORE)", events);
		if ((r = encode(t->pmu, tok, n ? PMU_KIND_STORES : PMU_KIND_LOADS, &t->ev[n])))
			return error_set(LOMAS_EINVAL, "unknown event '%s' on PMU %s: %s", tok,
			                 t->pmu, pfm_strerror(r));
		n++;
	}
	if (n == 0)
		return error_set(LOMAS_EINVAL, "events: '%s' names no event", events);
	if (n == 1)
		t->ev[0].kinds = PMU_KIND_REFS; /* one event counts both kinds */
	t->n = n;
	return LOMAS_OK;
}

/*
 * Where libpfm4 knows no core PMU of this CPU: whether each of the given
 * event names is one it knows at all (pfm_find_event over the PMUs it has
 * active), so that a misspelt --events names itself rather than the CPU.
 */
static lomas_status names_known(const char *events)
{
	char buf[512], *save = NULL, *tok;
	int r;
	snprintf(buf, sizeof buf, "%s", events);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
		if ((r = pfm_find_event(tok)) < 0)
			return error_set(LOMAS_EINVAL,
			                 "unknown event '%s': %s (and libpfm4 recognizes no core "
			                 "PMU on this CPU)",
			                 tok, pfm_strerror(r));
	return LOMAS_OK;
}

lomas_status pmu_table_get(const char *force, const char *events, pmu_table *out)
{
	lomas_status st = LOMAS_OK;
	unsigned ncores;
	int r;
	memset(out, 0, sizeof *out);
	if ((r = pfm_begin(force)) != PFM_SUCCESS) {
		st = error_set(LOMAS_ENOTSUP, "libpfm4 cannot start: %s", pfm_strerror(r));
		goto done;
	}
	ncores = core_pmus(out, force);
	if (ncores == 0 && !(force && *force) && events && *events && (st = names_known(events)))
		goto done; /* an unknown name is the user's first error (AMD Zen 5, libpfm4 4.13) */
	if (ncores == 0) {
		st = force && *force
		         ? error_set(LOMAS_EINVAL,
		                     "PMU '%s' is not one libpfm4 knows (see "
		                     "lomas-demo info --pmu list)",
		                     force)
		         : error_set(LOMAS_ENOTSUP, "libpfm4 recognizes no core PMU on this CPU");
		goto done;
	}
	/* The kernel's core PMUs are this machine's, whichever tables are shown. */
	out->ntypes = pmu_core_types(out->types, PMU_MAX_TYPES);
	out->hybrid = ncores > 1 || out->ntypes > 1;
	ibs_probe(out);
	for (size_t f = 0; f < sizeof families / sizeof *families; f++) {
		if (encode(out->pmu, families[f].load, PMU_KIND_LOADS, &out->ev[0]) ||
		    encode(out->pmu, families[f].store, PMU_KIND_STORES, &out->ev[1]))
			continue;
		out->n = 2;
		snprintf(out->family, sizeof out->family, "%s", families[f].name);
		out->approximate = families[f].approximate;
		/* The PMU's, whichever events count: precise mode asks it of any event. */
		out->pebs_addr = pebs_address(families[f].name, out->pmu);
		break;
	}
	if (events && *events) {
		out->family[0] = '\0';
		out->approximate = false;
		memset(out->ev, 0, sizeof out->ev);
		out->n = 0;
		st = given_events(out, events);
		goto done;
	}
	if (out->n)
		goto done;
	st = error_set(LOMAS_ENOTSUP,
	               "no load/store events known for PMU %s (%s); name them with "
	               "--events LOAD,STORE",
	               out->pmu, out->desc);
done:
	pfm_end();
	return st;
}

void pmu_list(void (*fn)(const char *name, const char *desc, bool present, void *arg), void *arg)
{
	pfm_pmu_info_t pi;
	if (pfm_begin(NULL) != PFM_SUCCESS) {
		pfm_end();
		return;
	}
	for (int i = 0; i < PFM_PMU_MAX; i++) {
		memset(&pi, 0, sizeof pi);
		pi.size = sizeof pi;
		if (pfm_get_pmu_info((pfm_pmu_t)i, &pi) != PFM_SUCCESS ||
		    pi.type != PFM_PMU_TYPE_CORE)
			continue;
		fn(pi.name, pi.desc ? pi.desc : "", pi.is_present, arg);
	}
	pfm_end();
}

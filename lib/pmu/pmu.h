/*
 * lib/pmu internal interface: the kernel side of the pmu clock (docs/pmu-clock.md).
 *
 * 1. A function table (pmu_sys_ops) through which every perf system call of
 *    the pmu clock goes: perf_event_open, ioctl, read, fcntl, the mmap ring,
 *    close, and how a thread is let run between samples. sys.c holds the
 *    real one; replay.c a fake kernel that counts the references of a real
 *    target driven by single steps, with random skid and counts perturbed as
 *    a real counter's are, so every other part of the clock runs in CI on
 *    machines without a PMU (none of ours has one).
 * 2. Event tables through libpfm4 (events.c): the load and store events of
 *    the detected PMU and their perf encodings.
 */
#ifndef LOMAS_PMU_H
#define LOMAS_PMU_H

#include <linux/perf_event.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "core/core.h"

/* ------------------------------------------------------------ event tables */

/* What an event counts, in lomas_ref_kind's terms. */
enum {
	PMU_KIND_LOADS = 1,
	PMU_KIND_STORES = 2,
	PMU_KIND_REFS = 3, /* one event for both (--events with one name) */
};

#define PMU_MAX_EVENTS 2
#define PMU_MAX_TYPES 2

typedef struct pmu_core_type {
	char name[32]; /* the kernel's PMU name: cpu, cpu_core, cpu_atom */
	uint32_t type; /* its perf_event_attr.type */
} pmu_core_type;

typedef struct pmu_event {
	char name[128]; /* as given (libpfm4 syntax) */
	char fstr[512]; /* libpfm4's fully qualified name */
	struct perf_event_attr attr;
	unsigned kinds; /* PMU_KIND_* */
} pmu_event;

typedef struct pmu_table {
	char pmu[64];    /* libpfm4 PMU name ("skl", "amd64_fam19h_zen3") */
	char desc[128];  /* its description */
	char family[16]; /* "nhm", "snb", "skl", "zen", or "" (events given) */
	pmu_event ev[PMU_MAX_EVENTS];
	unsigned n;
	bool approximate;  /* counts dispatched, not retired, operations (AMD LS_DISPATCH) */
	bool pebs_addr;    /* the kernel takes precise_ip with PERF_SAMPLE_ADDR for these */
	bool ibs_op;       /* AMD IBS op sampling is offered by this kernel (ibs_op PMU) */
	unsigned ibs_type; /* its perf type (sysfs) */
	/*
	 * Its format (sysfs): the config bit that makes it count dispatched
	 * ops rather than cycles (cnt_ctl, "config:19"; 0: cycles only), and
	 * the config2 bit that lets the kernel drop kernel-mode samples itself
	 * (swfilt, "config2:0", Linux 6.14; 0: none, and exclude_kernel is
	 * refused).
	 */
	uint64_t ibs_cnt_ctl;
	uint64_t ibs_swfilt;
	bool hybrid;                        /* more than one core PMU (per-core-type counters) */
	char cores[2][64];                  /* the core PMUs of a hybrid CPU */
	pmu_core_type types[PMU_MAX_TYPES]; /* the kernel's core PMUs (sysfs) */
	unsigned ntypes;
} pmu_table;

/*
 * The kernel's core PMUs and their perf types, from
 * <root>/bus/event_source/devices/<name>/type, root = $LOMAS_SYSFS_ROOT or
 * /sys: "cpu" on most machines; "cpu_core" and "cpu_atom" on hybrid Intel
 * parts, where a counter must be opened on each (a thread moves between
 * core kinds, and each PMU counts only while it runs on its kind). At most
 * max, in that order; their count.
 */
unsigned pmu_core_types(pmu_core_type *out, unsigned max);
/*
 * e's attr for the core PMU of perf type `type`: a raw event is opened on
 * that PMU (attr.type = type); a generic hardware or cache event keeps its
 * type and names the PMU in config's high 32 bits, the kernel's extended
 * type ABI (Linux 6.0, PERF_PMU_TYPE_SHIFT).
 */
void pmu_attr_for_type(const pmu_event *e, uint32_t type, struct perf_event_attr *out);
/*
 * The attr of t's IBS op sampler, counting dispatched ops: type ibs_type,
 * config cnt_ctl, the sample types of the ring; user: ask the kernel to
 * drop kernel-mode samples (exclude_kernel with swfilt), which only a
 * kernel with swfilt takes (older ones refuse any exclude_*: open it
 * without and drop those records yourself).
 */
void pmu_ibs_attr(const pmu_table *t, bool user, struct perf_event_attr *out);
/* Does precise mode sample with t's IBS op (no PEBS with the address; IBS counting ops)? */
static inline bool pmu_precise_ibs(const pmu_table *t)
{
	return !t->pebs_addr && t->ibs_op && t->ibs_cnt_ctl;
}

/*
 * The load/store events of the PMU named force (a libpfm4 name, as in
 * LIBPFM_FORCE_PMU), or of the detected one when force is NULL or empty;
 * events, when not NULL or empty, is "LOAD,STORE" (or one name counting
 * both) in libpfm4 syntax and overrides the table. LOMAS_ENOTSUP when
 * libpfm4 knows no core PMU here, LOMAS_EINVAL naming an event libpfm4 does
 * not know on that PMU.
 */
lomas_status pmu_table_get(const char *force, const char *events, pmu_table *out);
/* Every core PMU libpfm4 supports (for `info`): calls fn(name, desc, present). */
void pmu_list(void (*fn)(const char *name, const char *desc, bool present, void *arg), void *arg);

/* ------------------------------------------------------ the function table */

enum pmu_run {
	PMU_RUN = 0,  /* run freely until something stops it (PTRACE_SYSCALL) */
	PMU_STEP = 1, /* one instruction (PTRACE_SINGLESTEP): the clock is stepping */
};

typedef struct pmu_sys_ops {
	/* perf_event_open(2): a descriptor, or -errno. */
	int (*open)(void *ctx, struct perf_event_attr *attr, pid_t tid, int cpu, int group,
	            unsigned long flags);
	/* ioctl(2) on a perf descriptor: 0 or -errno. */
	int (*ioctl)(void *ctx, int fd, unsigned long req, unsigned long arg);
	/* read(2) of the counter: bytes or -errno. */
	ssize_t (*read)(void *ctx, int fd, void *buf, size_t len);
	/* fcntl(2) (F_SETOWN_EX takes a struct f_owner_ex pointer in arg): >= 0 or -errno. */
	int (*fcntl)(void *ctx, int fd, int cmd, unsigned long arg);
	/* mmap(2) of the sample ring (1 + 2^n pages): the address, or NULL with errno set. */
	void *(*mmap)(void *ctx, int fd, size_t len);
	int (*munmap)(void *ctx, void *addr, size_t len);
	int (*close)(void *ctx, int fd);
	/*
	 * Let the stopped thread tid run (enum pmu_run), delivering sig: 0 or
	 * -errno. PMU_RUN is PTRACE_SYSCALL: the thread runs until a signal,
	 * a system call's entry or exit, or a ptrace event stops it.
	 */
	int (*resume)(void *ctx, pid_t tid, int how, int sig);
	/*
	 * waitpid(2) for the thread tid (flags: __WALL, WNOHANG): tid with
	 * *status, 0, or -1 with errno. Every report of a thread the clock
	 * resumed is collected here: a fake kernel that runs the thread itself
	 * (the replay steps a PMU_RUN one instruction at a time to count what it
	 * retires) returns only the stops a real kernel reports.
	 */
	pid_t (*wait)(void *ctx, pid_t tid, int *status, int flags);
	/*
	 * Is the signal whose siginfo is si the overflow of fd? (The kernel
	 * sends F_SETSIG's signal with si_code POLL_IN and si_fd.)
	 */
	bool (*is_overflow)(void *ctx, int fd, const siginfo_t *si);
	void *ctx;
} pmu_sys_ops;

/* The table in use (the real one unless a test installed another). */
const pmu_sys_ops *pmu_sys(void);
/* Install ops (NULL: the real table again). Tests only; not thread-safe. */
void pmu_sys_set(const pmu_sys_ops *ops);
/* The real table. */
extern const pmu_sys_ops pmu_sys_real;

/*
 * Can counters of the table's events be opened for tid (0 = ourselves)?
 * LOMAS_OK, or the capability error with one line naming the cause (no PMU:
 * ENOENT/EOPNOTSUPP; perf_event_paranoid with the sysctl and CAP_PERFMON)
 * and, when alt is not NULL, the clock to use instead.
 */
lomas_status pmu_probe(const pmu_table *t, pid_t tid, const char *alt);
/* /proc/sys/kernel/perf_event_paranoid, or INT32_MIN when unreadable. */
int pmu_paranoid(void);

/* ------------------------------------------------------- the sample ring */

/*
 * The sample types the clock asks of precise counters (PEBS, IBS op) and
 * the only ones ring.c lays out: a record is the header, then these fields
 * in the kernel's order (perf_event_open(2), PERF_RECORD_SAMPLE): ip,
 * pid/tid, addr, data_src.
 */
#define PMU_RING_SAMPLE_TYPE \
	(PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_ADDR | PERF_SAMPLE_DATA_SRC)

/* One record of the ring, as far as the clock reads it. */
typedef struct pmu_record {
	uint32_t type; /* PERF_RECORD_* */
	uint16_t misc;
	uint64_t ip, addr, data_src; /* PERF_RECORD_SAMPLE */
	uint32_t pid, tid;
	uint64_t lost; /* PERF_RECORD_LOST: records the kernel dropped */
} pmu_record;

typedef struct pmu_ring_stats {
	uint64_t samples;   /* PERF_RECORD_SAMPLE read */
	uint64_t lost;      /* records the kernel reported lost (PERF_RECORD_LOST) */
	uint64_t throttles; /* PERF_RECORD_THROTTLE: the kernel stopped sampling a while */
	uint64_t other;     /* any other record, skipped */
	uint64_t corrupt;   /* rings given up on: a header that cannot be (dropped whole) */
} pmu_ring_stats;

/*
 * Read up to max PERF_RECORD_SAMPLE records of sample_type from the ring pg
 * (the first of 1 + 2^n pages mapped from a counter, len bytes in all) into
 * out, consuming them and every other record before them (LOST and
 * THROTTLE counted in st). The protocol of include/uapi/linux/perf_event.h:
 * data_head read with acquire (the kernel's writes before it are visible),
 * data_tail written with release (the kernel may reuse the space only
 * after our reads); records wrap at the end of the data area and may
 * straddle it. Returns how many samples were stored.
 */
unsigned pmu_ring_read(struct perf_event_mmap_page *pg, size_t len, uint64_t sample_type,
                       pmu_record *out, unsigned max, pmu_ring_stats *st);
/*
 * Lay out record r (a sample of sample_type, or a PERF_RECORD_LOST) into
 * buf as the kernel does: its size, or 0 when it does not fit or
 * sample_type asks for a field ring.c does not lay out. (The replay's writer.)
 */
size_t pmu_record_layout(const pmu_record *r, uint64_t sample_type, unsigned char *buf, size_t cap);

/* ------------------------------------------------------------- the replay */

typedef struct pmu_replay pmu_replay;

typedef struct pmu_replay_conf {
	uint64_t seed;         /* of the skid generator */
	uint32_t max_skid;     /* overflows are reported 0..max_skid references late */
	bool next_overflow;    /* PERF_EVENT_IOC_PERIOD loads at the next overflow (2.6.36) */
	int64_t per_step;      /* counts a single-step of the clock adds */
	int64_t per_fault;     /* ... a SIGSEGV stop (the faulting access counted, then again) */
	int64_t per_trap;      /* ... a trap (int3, the overflow interrupt) */
	int64_t per_syscall;   /* ... a system call injected into the thread */
	uint64_t load_config;  /* attr.config counted as loads */
	uint64_t store_config; /* ... as stores */
	uint64_t refs_config;  /* ... as both */
	bool precise;          /* PEBS/IBS: records with exact ip and data address */
	/*
	 * AMD IBS op (perf type ibs_type, 0: none): a counter of that type
	 * counts the thread's ops, each retired instruction one per reference
	 * it makes (one if none), user and, for the monitor's perturbations,
	 * kernel ops; its overflow tags the op and writes a record: ip, data
	 * address and data source of a memory op (PERF_MEM_OP_NA, address 0
	 * otherwise), PERF_RECORD_MISC_KERNEL for a kernel op. The sample
	 * period's low nibble is masked at open and refused by
	 * PERF_EVENT_IOC_PERIOD, as the kernel does. ibs_per_task: it opens per
	 * thread (Linux >= 6.2; EINVAL before); ibs_swfilt: exclude_kernel is
	 * taken with config2 bit 0 and kernel ops write nothing (else any
	 * exclude_* is EINVAL, PERF_PMU_CAP_NO_EXCLUDE).
	 */
	uint32_t ibs_type;
	bool ibs_per_task;
	bool ibs_swfilt;
	/*
	 * A hybrid CPU: the perf types of its core PMUs (0: none, every counter
	 * of PERF_TYPE_RAW counts everywhere). A counter opened with one of
	 * them counts only while its thread runs on that kind; each thread
	 * moves to the other kind every migrate_every retired instructions.
	 */
	uint32_t core_types[2];
	uint32_t migrate_every;
	/* System calls injected so far into tid (the monitor's count). */
	uint64_t (*injected)(void *arg, pid_t tid);
	void *arg;
} pmu_replay_conf;

lomas_status pmu_replay_new(const pmu_replay_conf *conf, pmu_replay **out);
void pmu_replay_free(pmu_replay *r);
/* Its function table (ctx = r). */
const pmu_sys_ops *pmu_replay_ops(pmu_replay *r);

typedef struct pmu_replay_stats {
	uint64_t opened, overflows, signals, skid_total, perturbations;
	uint64_t records;    /* precise records written */
	uint64_t lost;       /* ... dropped for a full ring */
	uint64_t unrecorded; /* overflows among perturbation counts: no reference, no record */
	uint64_t cpuid_run;  /* CPUIDs of free-running threads run by the fake, not stepped */
	uint64_t ibs_ops;    /* ops an IBS counter counted (user and kernel) */
} pmu_replay_stats;
void pmu_replay_get_stats(const pmu_replay *r, pmu_replay_stats *out);

#endif /* LOMAS_PMU_H */

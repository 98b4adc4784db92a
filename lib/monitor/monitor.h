/*
 * lib/monitor internal interface: the ptrace supervisor (spawn, attach,
 * threads, one event loop over all stops, faithful signal forwarding,
 * syscall injection, the shadow of the target's page protections) and the
 * step clock driven by it (single-step, decode, count, sample, watch with
 * the mprotect engine). docs/architecture.md.
 */
#ifndef LOMAS_MONITOR_H
#define LOMAS_MONITOR_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/user.h>

#include "clock/clock.h"
#include "core/core.h"
#include "decode/decode.h"
#include "pmu/pmu.h"
#include "watch/watch.h"

/* ------------------------------------------------------- system call seam */

/*
 * Every ptrace, waitpid and process_vm_readv of the monitor goes through
 * these (sys.c) so tests can make the Nth one fail (the target vanishing).
 */
long mon_ptrace(int req, pid_t tid, void *addr, void *data);
pid_t mon_sys_waitpid(pid_t pid, int *status, int flags);
struct iovec;
ssize_t mon_sys_vm_readv(pid_t pid, const struct iovec *local, unsigned long nlocal,
                         const struct iovec *remote, unsigned long nremote, unsigned long flags);
long mon_sys_peek(pid_t pid, uint64_t addr);
/* The decoder's memory reads, through the seam. */
extern const decode_mem_ops mon_decode_mem_ops;

typedef struct mon_sys_hook {
	uint64_t fail_at; /* the call (1-based, since the hook was set) to act on; 0 = none */
	int err; /* errno a ptrace or process_vm_readv fails with (a wait: EINTR); 0 = it runs */
	void (*before)(uint64_t call, void *ctx); /* run just before that call, or NULL */
	void *ctx;
} mon_sys_hook;

/* Install (NULL: remove) the hook and restart the count. Tests only. */
void mon_sys_set_hook(const mon_sys_hook *h);
/* Calls made through the seam since the hook was last set. */
uint64_t mon_sys_calls(void);

/* ------------------------------------------------------------ shadow maps */

typedef struct map_range {
	uint64_t start, end, offset;
	int prot;     /* PROT_* */
	bool special; /* [vdso], [vvar], [vsyscall]: never protect */
	char *path;
} map_range;

typedef struct maps_shadow {
	VEC(map_range) r;
} maps_shadow;

/* Parse /proc/PID/maps text (pure: tests feed text). */
lomas_status maps_parse(maps_shadow *m, const char *text);
lomas_status maps_read(maps_shadow *m, pid_t pid);
void maps_free(maps_shadow *m);
/* The range holding addr, or NULL. */
const map_range *maps_find(const maps_shadow *m, uint64_t addr);

/* ------------------------------------------------------------- pmu clock */

/* One sampling counter of a thread (pmu_clock.c). */
typedef struct pmu_stream {
	int fd;         /* -1: not open */
	unsigned kinds; /* PMU_KIND_* */
	rng gaps;
	skid_planner plan;
	skid_counter shadow; /* the kernel's counter as programmed, in raw counts */
	ledger led;
	uint64_t count; /* corrected count at the last read */
	bool approaching;
	void *ring; /* precise mode: the sample ring */
	size_t ring_len;
	int64_t armed_bias; /* precise mode: the ledger's bias when the counter was last armed */
	/*
	 * A hybrid CPU: counting-only counters of the same event on the other
	 * core PMUs (the sampling one is on the first); the count is the sum.
	 */
	int xfd[PMU_MAX_TYPES - 1];
	unsigned nx;
	uint64_t xraw; /* their sum at the last read */
	uint64_t xarm; /* ... when the sampling counter was last armed (precise mode) */
} pmu_stream;

typedef struct pmu_thread {
	pmu_stream s[PMU_MAX_EVENTS];
	/*
	 * Precise mode through AMD IBS op (monitor.pibs): the sampler, which
	 * counts ops; s[] then only count (the clock), sampling nothing.
	 */
	pmu_stream ibs;
	bool ibs_due; /* its record taken: armed for the next point when the thread goes on */
	/* double trap: the stream's int3 was met; sample when dt_pc next retires */
	bool dt_wait[PMU_MAX_EVENTS];
	uint64_t dt_pc[PMU_MAX_EVENTS];
	int dt_kind[PMU_MAX_EVENTS];       /* the record's kind, -1: any */
	uint64_t injected_noted;           /* injected calls already noted in the ledgers */
	bool clock_step;                   /* resumed by the clock with a single-step */
	bool ran_free;                     /* resumed with PMU_RUN: the clock is the counters' */
	bool force_step;                   /* the next resume steps (a skipped call put back) */
	bool skipping;                     /* its call was skipped at the entry (pmu_free.c) */
	bool vsys_retry;                   /* a vsyscall call faulted on our pages: stepped again */
	struct user_regs_struct call_regs; /* ... its registers there */
} pmu_thread;

typedef struct pmu_stats {
	uint64_t overflows, stale, clock_steps, overshoots, mismatches, syncs, records;
	uint64_t retry_steps;    /* steps the monitor needed (a fault retried), not the clock */
	uint64_t stale_records;  /* precise: records that name no point (a re-fire, a gap) */
	uint64_t not_memory;     /* precise: records of an op with no data address (IBS) */
	uint64_t kernel_records; /* IBS: records of kernel-mode ops (no swfilt: ours to drop) */
	uint64_t late_records;   /* IBS: records met with the signal blocked: clock unknown */
	uint64_t dtrap_planted, dtrap_taken, dtrap_lost; /* double trap */
	uint64_t moved_kind; /* precise, hybrid: records dropped, the thread ran on another kind */
	uint64_t runs;       /* resumes with PMU_RUN: free running between samples */
	uint64_t calls;      /* system calls skipped at entry and stepped over lifted */
	uint64_t held_steps; /* steps instead of a free run: a watch not synced, an overflow held */
} pmu_stats;

/* A double trap's int3 in the target's text (pmu_dtrap.c). */
typedef struct pmu_bp {
	bool used;
	uint64_t ip;
	uint8_t orig; /* the byte it replaced */
	pid_t tid;    /* whose point it is */
	unsigned stream;
	int kind;
} pmu_bp;

#define PMU_MAX_BPS 64

/* Injected system calls so far into tid, by any monitor of this process (ptrace.c). */
uint64_t mon_injected_into(pid_t tid);

/* ------------------------------------------------------------- supervisor */

enum mon_thread_state {
	MT_NEW = 0, /* announced by a clone event, first stop not seen yet */
	MT_RUNNING, /* resumed by us; a stop will come */
	MT_STOPPED, /* in a ptrace-stop we have not resumed yet */
	MT_LISTEN,  /* group-stop, PTRACE_LISTEN */
	MT_EXITING, /* PTRACE_EVENT_EXIT seen */
	MT_GONE,
};

/* A signal held for delivery (sig_hold). */
typedef struct mon_held {
	siginfo_t si;
	bool noted; /* the pmu clock's overflow, its trap in the ledger already (pmu_hold) */
} mon_held;

typedef struct mon_thread {
	pid_t tid;
	uint32_t index; /* profile thread index */
	int state;
	/* the step clock */
	uint64_t clock;
	step_sampler sampler;
	pmu_thread pmu;    /* the pmu clock */
	bool have_pending; /* pending: decoded, resumed with a step, not yet retired */
	decode_insn pending;
	uint64_t pending_c0;
	uint64_t resume_epoch; /* engine lift epoch when resumed */
	bool in_syscall;       /* stepping a syscall instruction: holds one lift */
	long sysno;
	bool delivering; /* a signal is being delivered: holds one lift */
	/* Signals met where they could not be delivered (sigstate.c), in order. */
	VEC(mon_held) held;
	/*
	 * In a signal-delivery-stop (a step's trap too), where a signal given
	 * on resume is delivered; the kernel ignores one given at an event or
	 * group stop and turns one given at a system call stop into a kill.
	 */
	bool at_sigstop;
	uint64_t segv_retry; /* fault address + 1 of a SIGSEGV being retried */
	uint64_t fault_page; /* page of our fault the pending instruction is stepped over */
	bool segv_lift;      /* SIGSEGV blocked in this thread: holds one lift (sigstate.c) */
	bool suspect;        /* a request to resume it failed: is it still in a stop? (wait.c) */
	bool group_stop;     /* an injected call met its group-stop: it is in that stop now */
	uint64_t fs_base;
	uint64_t rseq_addr;
	uint32_t rseq_len;
	/* the debug-register engine (dwatch.c) */
	dreg_thread dreg;
	bool have_last; /* last: the instruction that retired last, its first clock */
	decode_insn last;
	uint64_t last_c0;
} mon_thread;

typedef struct monitor_stats {
	uint64_t steps, injected, signals, threads;
	uint64_t held_merged; /* held signals merged into one of the same number (standard) */
	uint64_t held_lost;   /* ... not held: no memory */
	uint64_t reuse_by_fault, reuse_by_decode, cross_thread;
	uint64_t unwatchable; /* samples on pages we may not protect (watched by decode) */
	uint64_t masked;      /* AVX-512 masked moves narrowed to their mask (decode_mask.c) */
	uint64_t mask_unread; /* ... left full-size: the opmask registers could not be read */
	uint64_t cpuid_run;   /* CPUIDs run by the monitor, not stepped (decode_cpuid.c) */
} monitor_stats;

typedef struct monitor {
	pid_t pid;
	bool spawned;
	bool ended; /* the process is gone */
	bool detached;
	int exit_status; /* waitpid-style */
	VEC(mon_thread) threads;
	maps_shadow maps;
	uint64_t scratch;      /* our page in the target (0: none yet) */
	uint64_t syscall_insn; /* address of a `syscall` instruction usable for injection */
	uint64_t page_size;
	monitor_stats stats;
	/* the step clock */
	struct lomas_config cfg;
	double period;
	uint64_t window_refs;
	decoder *dec;
	mprot_engine eng;
	bool eng_ready;
	uint64_t lift_epoch;
	VEC(lomas_sample) samples;
	char *command;
	lomas_status error; /* first fatal error seen by the loop (mon_fail) */
	char errmsg[512];   /* its message */
	pid_t cur_tid;      /* the stopped thread injections run in */
	bool sync_needed;   /* watches changed: bring protections in line at the next stop */
	bool segv_ignored;  /* the process ignores SIGSEGV: holds one lift (sigstate.c) */
	/* the debug-register engine (dwatch.c) instead of mprotect's (eng stays empty) */
	bool dreg_mode;
	dreg_engine dreg;
	uint64_t dreg_unexplained;  /* traps no decoded reference of the instruction explains */
	uint64_t dreg_decoded_only; /* reuses decoded with no trap (masked vector accesses) */
	/* the pmu clock (pmu_clock.c) */
	bool pmu_mode;
	pmu_table ptab;
	const pmu_sys_ops *psys;
	int psig;         /* the overflow signal (F_SETSIG) */
	uint32_t pmargin; /* the planner's max_skid: arm this many counts early */
	skid_semantics psem;
	int64_t pcalib[PMU_MAX_EVENTS][LEDGER_NKINDS];
	bool pcalibrated;
	pmu_stats pstats;
	pmu_ring_stats pring;    /* precise mode: what the rings held */
	pmu_bp pbp[PMU_MAX_BPS]; /* double trap: int3s planted */
	bool pibs;      /* precise mode through AMD IBS op (no PEBS with the data address) */
	bool pibs_user; /* ... the kernel drops its kernel-mode samples (swfilt) */
	/* wait.c */
	size_t wait_next;    /* the sweep starts after the thread that reported last */
	bool wait_poll;      /* SIGCHLD cannot wake us: sleep in growing steps instead */
	bool wait_slept;     /* the last sleep timed out */
	unsigned backoff_us; /* the next polling sleep */
} monitor;

/* Spawn argv (program_path resolved) stopped at its exec; EXITKILL set. */
lomas_status mon_spawn(monitor *m, const char *program_path, char *const argv[]);
/* Kill the spawned child pid (traced or not) and reap it. */
void mon_kill_reap(pid_t pid);
/* Seize every thread of pid and stop them. */
lomas_status mon_attach(monitor *m, pid_t pid);
/* A thread record by tid (NULL if unknown). */
mon_thread *mon_thread_of(monitor *m, pid_t tid);
/* Add a thread record. */
lomas_status mon_add_thread(monitor *m, pid_t tid, mon_thread **out);
/* Record the session's first fatal error (st, with the current message); returns st. */
lomas_status mon_fail(monitor *m, lomas_status st);
/* Record every thread of the process not known yet (a clone whose tid was not learnt). */
lomas_status mon_adopt_threads(monitor *m);
/* Live threads (not gone). */
size_t mon_live_threads(const monitor *m);
/*
 * Wait for the next report of any traced thread for at most timeout_ms (-1 =
 * forever), sleeping, never spinning (wait.c). 1 with *t and *status set; 0
 * on timeout, when no thread is left to wait for, or when a signal handler
 * of the caller's ran; a negative status on error.
 */
int mon_wait(monitor *m, int timeout_ms, mon_thread **t, int *status);
/* The same for one thread: 1 got a report, 0 timeout, -1 error (errno). */
int mon_wait_tid(monitor *m, pid_t tid, int timeout_ms, int *status);
/* waitpid(2), retried when a signal of the caller interrupts it. */
pid_t mon_waitpid(pid_t pid, int *status, int flags);
/* The thread's process ended / the thread is gone: bookkeeping from a wait status. */
void mon_reap(monitor *m, mon_thread *t, int status);

/*
 * Run system call nr with args in the stopped thread t (its registers are
 * saved and restored). *ret gets the raw return value (negative errno).
 */
lomas_status mon_inject(monitor *m, mon_thread *t, long nr, const uint64_t args[6], long *ret);
/* Unmap the scratch page (before detaching); kept if that fails, to be tried again. */
lomas_status mon_drop_scratch(monitor *m, mon_thread *t);

/* Bring every live thread to a stop, restore everything, detach. */
lomas_status mon_detach(monitor *m);

/* ------------------------------------------------ the target's signal state */

/*
 * Re-read whether SIGSEGV is blocked in t (a stopped thread) and take or drop
 * its lift accordingly; call wherever t's mask may have changed (a system
 * call or a signal delivery finished, a new thread's first stop, exec).
 */
void sig_guard_thread(monitor *m, mon_thread *t);
/* The signals the stopped thread tid blocks (bit sig - 1); all when it cannot be read. */
uint64_t sig_blocked(pid_t tid);
/* Re-read whether the process ignores SIGSEGV (after rt_sigaction, exec, at start). */
void sig_refresh_ignored(monitor *m);
/* t is gone: drop the lift it held, and the signals held for it. */
void sig_forget_thread(monitor *m, mon_thread *t);
/*
 * Held signals: a signal the kernel reported at a stop where it could not be
 * delivered (an injected call's step, the interrupt of an attach or detach)
 * is held, in order, and delivered at the thread's next resume (one per
 * resume, as the kernel nests handlers) or sent again at detach. None is
 * dropped: a standard signal already held is merged, as the kernel merges a
 * pending one; the pmu clock's second overflow only counts (pmu_hold).
 */
void sig_hold(monitor *m, mon_thread *t, const siginfo_t *si);
/* A signal taken out to deliver and not delivered: held again, first. */
void sig_hold_first(monitor *m, mon_thread *t, const siginfo_t *si);
/* Take out the first held signal into *out; false when none is held. */
bool sig_held_take(mon_thread *t, mon_held *out);
/* Drop every held signal that ours() says belongs to the monitor. */
void sig_held_drop(monitor *m, mon_thread *t,
                   bool (*ours)(monitor *m, mon_thread *t, const mon_held *h));
/* Queue si to t again in the kernel (siginfo kept where the kernel lets a process). */
void sig_resend(monitor *m, mon_thread *t, const siginfo_t *si);
/* Send t's held signals again (after PTRACE_DETACH), in order; none is left held. */
void sig_held_resend(monitor *m, mon_thread *t);

/* ---------------------------------------------------------- step clock */

lomas_status step_init(monitor *m, const struct lomas_config *cfg);
void step_free(monitor *m);
/* Start stepping every stopped thread (after spawn/attach). */
lomas_status step_begin(monitor *m);
/* Handle one stop of thread t with wait status st, and resume it. */
lomas_status step_handle(monitor *m, mon_thread *t, int st, bool detaching);
/* step.c, for stops.c: a new thread's sampler; the pending instruction retired. */
void step_thread_init(monitor *m, mon_thread *t);
void step_commit(monitor *m, mon_thread *t);
/* A fault on our page at addr: lift it for t's next step. */
void step_our_fault(monitor *m, mon_thread *t, uint64_t addr);
/* Drop the lifts t holds for a finished call or delivery, and its fault lifts. */
void step_release(monitor *m, mon_thread *t, bool syscall_done);
/* Resume t with a single-step, delivering sig (with siginfo si) if non-zero. */
lomas_status step_resume(monitor *m, mon_thread *t, int sig, siginfo_t *si);
/* Decode the instruction at t's rip into t->pending, unless one is there (the pmu clock). */
lomas_status step_decode(monitor *m, mon_thread *t);
/*
 * t's decoded instruction is about to be stepped: a CPUID is run by us
 * instead, with the instructions after it that are CPUIDs too (their step
 * trap may be lost: decode_cpuid.c); the next one is left decoded.
 */
lomas_status step_run_cpuid(monitor *m, mon_thread *t);
/* t reported a group-stop (or met one in an injected call): it stays stopped (LISTEN). */
lomas_status step_group_stop(monitor *m, mon_thread *t, bool detaching);
/* t vanished without a report, or ended: release what it held, mark it gone. */
void step_thread_gone(monitor *m, mon_thread *t);
/* Restore every protection (before detach); t: a stopped thread to inject from. */
lomas_status step_restore(monitor *m, mon_thread *t);
/* The profile so far. */
lomas_status step_profile(monitor *m, lomas_profile **out);

/* step.c, for dwatch.c: end sample id at clock (pc), by the engine's trap or by decode. */
void step_end_sample(monitor *m, uint64_t id, uint64_t clock, uint64_t pc, bool by_trap);

/* ------------------------------------------- debug-register engine hooks */

/* Check that breakpoints can be armed, set the engine up: in step_init. */
lomas_status dwatch_init(monitor *m);
/* A new thread (no breakpoint yet); t is gone (its breakpoints closed). */
void dwatch_thread_init(monitor *m, mon_thread *t);
void dwatch_thread_end(monitor *m, mon_thread *t);
/* The instruction in (first clock c0) of t retires: remember it, poll a quiet thread. */
void dwatch_commit(monitor *m, mon_thread *t, const decode_insn *in, uint64_t c0);
/* Sample id starts at reference j of in (first clock c0), which retires: watch its word. */
void dwatch_start(monitor *m, mon_thread *t, uint64_t id, const decode_insn *in, unsigned j,
                  uint64_t c0);
/* A signal stop of t: 1 when it was a breakpoint's (swallowed, t resumed unless detaching). */
int dwatch_signal(monitor *m, mon_thread *t, int sig, const siginfo_t *si, bool detaching);
/* The same without resuming (a signal kept from an injected call). */
bool dwatch_take_signal(monitor *m, mon_thread *t, int sig, const siginfo_t *si);
/* t's blocked signals are mask now (sigstate.c). */
void dwatch_mask(monitor *m, mon_thread *t, uint64_t mask);
/* exec replaced the address space: every breakpoint goes. */
void dwatch_exec(monitor *m);
/* Before detaching (every thread stopped): breakpoints closed, sent signals taken. */
void dwatch_detach(monitor *m);
/* The engine's metadata in the profile. */
lomas_status dwatch_profile_meta(monitor *m, lomas_profile *p);

/* ------------------------------------------------------- pmu clock hooks */

/* Set up the pmu clock for cfg (tables, semantics): before spawn/attach. */
lomas_status pmu_clock_init(monitor *m, const struct lomas_config *cfg);
/* Measure the counters' perturbations in the stopped thread t (pmu_calib.c). */
lomas_status pmu_calibrate(monitor *m, mon_thread *t);
/* Open t's sampling counters (a new thread, or the first ones). */
lomas_status pmu_thread_start(monitor *m, mon_thread *t);
/*
 * t's counters about to close: the points t passed with no signal are lost
 * (pmu.overshoots), in every mode that aims at points (skid and precise);
 * read: t is stopped, its counters read first.
 */
void pmu_points_end(monitor *m, mon_thread *t, bool read);
/* t is gone: close its counters. */
void pmu_thread_end(monitor *m, mon_thread *t);
/* The pending instruction retired (in, clock c0): sampled reference indices into idx. */
unsigned pmu_commit(monitor *m, mon_thread *t, const decode_insn *in, uint64_t c0, unsigned *idx);
/*
 * A signal stop of t: 1 when it was the counter's overflow (swallowed, t
 * resumed unless detaching), 0 when the monitor handles it as before, or
 * a negative status.
 */
int pmu_signal(monitor *m, mon_thread *t, int sig, const siginfo_t *si, bool detaching);
/*
 * The same without resuming: true when si was the overflow (a signal held
 * for later; noted: its trap is in the ledger already, mon_held.noted).
 */
bool pmu_take_signal(monitor *m, mon_thread *t, int sig, const siginfo_t *si, bool noted);
/*
 * Must t be single-stepped when it runs on (an approach to a point, a
 * double trap's instruction, a sample no fault can end, or must_step: a
 * step the monitor needs)? Else it may run freely (PMU_RUN), nothing decoded.
 */
bool pmu_wants_step(monitor *m, mon_thread *t, bool must_step);
/*
 * A signal about to be held (sig_hold): the counter's overflow has its trap
 * noted now (h->noted); false: a second overflow (one is held), counted only.
 */
bool pmu_hold(monitor *m, mon_thread *t, mon_held *h);
/*
 * Resume t: a single step (have_pending decoded) when step or sig, else
 * PMU_RUN; the counters armed again first where they need it (precise
 * mode, hybrid).
 */
int pmu_resume(monitor *m, mon_thread *t, int sig, bool step);
/* A vsyscall emulation that failed on a page of ours (t stopped with SIGSEGV si): retry it. */
bool pmu_vsyscall_fault(monitor *m, mon_thread *t, const siginfo_t *si);
/* A system call's entry or exit stop of a free-running t (pmu_free.c). */
lomas_status pmu_call_stop(monitor *m, mon_thread *t, bool detaching);
/* The report of an injected call's step (blocking, EINTR retried): the same way. */
pid_t mon_wait_injected(monitor *m, pid_t tid, int *status);
/* waitpid for a traced thread's report: through the pmu clock's table in pmu mode. */
pid_t mon_wait_report(monitor *m, pid_t tid, int *status, int flags);
/* Read t's counters and set its clock from them. */
void pmu_sync(monitor *m, mon_thread *t);
/* The pmu clock's metadata and calibration in the profile. */
lomas_status pmu_profile_meta(monitor *m, lomas_profile *p);
void pmu_clock_free(monitor *m);
/* Before detaching (every thread stopped): counters closed, sent overflows taken. */
void pmu_detach(monitor *m);
/* Precise mode (pmu_precise.c): map s's sample ring (its counter just opened). */
lomas_status pmu_precise_open(monitor *m, pmu_stream *s);
/* Precise mode through IBS op: open t's sampler (its counting streams are open). */
lomas_status pmu_ibs_open(monitor *m, mon_thread *t, uint64_t seed);
/* ... does a record wait in its ring? Take it at this stop (t->clock read first). */
bool pmu_ibs_waiting(const mon_thread *t);
void pmu_ibs_poll(monitor *m, mon_thread *t);
/* Route fd's overflow to thread tid as the signal m->psig (F_SETOWN_EX, F_SETSIG, O_ASYNC). */
lomas_status pmu_route(monitor *m, int fd, pid_t tid);
/* An overflow of t (counters read): drain the rings, start the watches their records name. */
void pmu_precise_overflow(monitor *m, mon_thread *t);
/* Precise mode's and the double trap's metadata in the profile. */
lomas_status pmu_precise_meta(monitor *m, lomas_profile *p);
/* Before t runs: arm again the counters the monitor's own perturbations moved. */
void pmu_precise_rearm(monitor *m, mon_thread *t, bool must_step);
/* Double trap (pmu_dtrap.c): an int3 at ip for t's stream (from its overflow's record). */
void pmu_dtrap_plant(monitor *m, mon_thread *t, unsigned stream, uint64_t ip, int kind);
/* A SIGTRAP of t: true when it was one of our int3s (removed, t set back to run it). */
bool pmu_dtrap_signal(monitor *m, mon_thread *t, int sig, const siginfo_t *si);
/* in retired in t: the indices of the references sampled at a met int3's instruction. */
unsigned pmu_dtrap_commit(monitor *m, mon_thread *t, const decode_insn *in, unsigned *idx);
/* Before detaching (threads stopped): every int3 removed. */
void pmu_dtrap_detach(monitor *m);
/* step.c, for pmu_precise.c: a sample of t at clock, the reference (pc, addr, kind). */
void step_start_at(monitor *m, mon_thread *t, uint64_t clock, uint64_t pc, uint64_t addr,
                   uint8_t kind);

#endif /* LOMAS_MONITOR_H */

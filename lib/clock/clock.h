/*
 * lib/clock internal interface. Pure logic only (no system calls): the skid
 * planner (docs/pmu-clock.md), a simulated overflow counter with
 * both PERF_EVENT_IOC_PERIOD semantics (for tests and the step clock's
 * simulated skid), the counter-compensation ledger, and the step clock's
 * per-thread sampler (exponential countdown, simulated late overflows).
 *
 * Counts are "references so far": the reference with clock c (0-based)
 * brings the count to c + 1. A sample point Sp (a count) names the reference
 * whose clock is Sp - 1.
 */
#ifndef LOMAS_CLOCK_H
#define LOMAS_CLOCK_H

#include <stdbool.h>
#include <stdint.h>

#include "core/core.h"

/* ------------------------------------------------------------ skid planner */

typedef enum skid_semantics {
	/* Linux >= 3.14: PERF_EVENT_IOC_PERIOD restarts the period now. */
	SKID_PERIOD_IMMEDIATE = 0,
	/* Linux 2.6.36 (the seed): the new period is loaded at the next overflow. */
	SKID_PERIOD_NEXT_OVERFLOW = 1,
} skid_semantics;

typedef struct skid_planner {
	uint32_t max_skid;
	skid_semantics sem;
	uint64_t target;      /* Sp of the sample being approached */
	uint64_t next_target; /* Sp of the one after (NEXT_OVERFLOW needs it) */
	uint64_t overflow;    /* count at which the counter overflows next */
	uint64_t after;       /* count of the overflow after that (NEXT_OVERFLOW) */
} skid_planner;

/* What to program into the counter: a period, and under NEXT_OVERFLOW also the reload. */
typedef struct skid_program {
	uint64_t period; /* program now (at open: attr.sample_period; else the ioctl) */
	uint64_t reload; /* NEXT_OVERFLOW: ioctl value that takes effect at the next overflow */
	bool has_reload;
	bool step_now; /* the point is within max_skid: single-step to it, arm nothing */
} skid_program;

/* What to do at an overflow stop. */
typedef struct skid_action {
	uint64_t target;    /* Sp: the count at which the sampled reference has retired */
	uint64_t remaining; /* references to single-step before reaching it (0 = sample now) */
	bool overshot;      /* the count already passed Sp (skid beyond max_skid, or a multi-
	                       reference instruction): the sample was in the last instruction */
} skid_action;

/*
 * Start: the counter is opened at count now; sp0 < sp1 are the first two
 * sample points. Returns what to program so that the first overflow is at
 * sp0 - max_skid (or now + 1 if that has passed).
 */
skid_program skid_plan_start(skid_planner *p, uint32_t max_skid, skid_semantics sem, uint64_t now,
                             uint64_t sp0, uint64_t sp1);
/* An overflow was reported and the counter reads c. */
skid_action skid_plan_overflow(const skid_planner *p, uint64_t c);
/*
 * The sample at p->target was taken; the counter reads now; sp_next_next
 * is the sample point after next (NEXT_OVERFLOW plans one ahead). Returns the
 * period to program (IMMEDIATE) or the reload to program (NEXT_OVERFLOW).
 */
skid_program skid_plan_next(skid_planner *p, uint64_t now, uint64_t sp_next_next);

/*
 * A simulated sampling counter: counts references; overflows when the count
 * reaches the programmed point; the overflow is reported skid references late.
 */
typedef struct skid_counter {
	skid_semantics sem;
	uint64_t count;
	uint64_t overflow_at; /* count of the next overflow (UINT64_MAX: none) */
	uint64_t period;      /* reloaded at each overflow */
	uint64_t reload;      /* NEXT_OVERFLOW: period loaded at the next overflow */
	bool has_reload;
	uint64_t pending;   /* overflows raised and not yet reported */
	uint64_t report_at; /* count at which the oldest pending overflow is reported */
} skid_counter;

void skid_counter_open(skid_counter *k, skid_semantics sem, uint64_t now, uint64_t period);
/* PERF_EVENT_IOC_PERIOD with the counter's semantics. */
void skid_counter_set_period(skid_counter *k, uint64_t period);
/*
 * Count n references; an overflow raised among them is reported once skid
 * more references have passed. True when a report is due at the new count.
 */
bool skid_counter_advance(skid_counter *k, uint64_t n, uint32_t skid);
/* Consume the due report. */
void skid_counter_ack(skid_counter *k);

/* ------------------------------------------------------------------ ledger */

typedef enum ledger_kind {
	LEDGER_PAGE_FAULT = 0,
	LEDGER_TRAP = 1,
	LEDGER_SYSCALL = 2,
	LEDGER_STEP = 3,
	LEDGER_NKINDS = 4,
} ledger_kind;

/*
 * Counter compensation: load/store counters also tick for events the monitor
 * caused or saw. The ledger knows how many of each kind happened and how
 * much each is worth (calibrated), and converts raw counter values into
 * reference counts.
 */
typedef struct ledger {
	int64_t per_event[LEDGER_NKINDS]; /* counts each event adds (may be negative) */
	uint64_t events[LEDGER_NKINDS];   /* events so far */
} ledger;

void ledger_init(ledger *l);
const char *ledger_kind_name(ledger_kind k);
/* n more events of kind happened. */
void ledger_note(ledger *l, ledger_kind k, uint64_t n);
/* The amount events of kind have added so far. */
int64_t ledger_bias(const ledger *l);
/* Reference count from a raw counter value (never below 0). */
uint64_t ledger_correct(const ledger *l, uint64_t raw);
/*
 * Calibration of one kind: a known sequence of `expected` references with
 * `events` events of kind read `raw` on the counter (other kinds already
 * calibrated and their events noted in l). Sets per_event[kind]; LOMAS_EINVAL
 * if the excess is not a whole multiple of events.
 */
lomas_status ledger_calibrate(ledger *l, ledger_kind k, uint64_t expected, uint64_t raw,
                              uint64_t events);

/* ---------------------------------------------------- step clock's sampler */

/*
 * Per-thread sampler of the step clock: exponentially distributed sample
 * points (rng_gap, mean period), and the skid planner driven by a simulated
 * late overflow (0..max_skid references late) so the planner runs as it
 * would on hardware. Exact: the planner's target is the chosen point.
 */
typedef struct step_sampler {
	rng gaps;
	rng skid;
	double period;
	uint32_t max_skid;
	skid_planner plan;
	skid_counter counter;
	uint64_t sp;      /* next sample point (count) */
	uint64_t sp_next; /* the one after */
	bool stepping;    /* overflow seen: stepping to plan.target */
	uint32_t cur_skid;
	uint64_t overflows;  /* simulated overflow reports */
	uint64_t overshoots; /* reports that came after the target's instruction */
	uint64_t skid_steps; /* references stepped between a report and its sample */
	uint64_t lost;       /* points passed before their report (never, by construction) */
} step_sampler;

void step_sampler_init(step_sampler *s, uint64_t seed, double period, uint32_t max_skid);
/*
 * One instruction retired with n references at clocks c0 .. c0 + n - 1.
 * Writes the indices (0..n-1, increasing) of the sampled references into
 * idx and returns how many (at most n).
 */
unsigned step_sampler_commit(step_sampler *s, uint64_t c0, unsigned n, unsigned *idx);

#endif /* LOMAS_CLOCK_H */

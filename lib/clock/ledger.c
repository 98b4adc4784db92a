/*
 * The counter-compensation ledger (docs/architecture.md, the clocks): every page fault, trap,
 * system call and single-step the monitor causes or sees may tick the load/store counters.
 * Calibration measures, per kind, what one event adds; the ledger subtracts the calibrated amount
 * times the events so far from raw readings.
 */
#include <string.h>

#include "clock.h"

void ledger_init(ledger *l)
{
	memset(l, 0, sizeof *l);
}

const char *ledger_kind_name(ledger_kind k)
{
	static const char *names[LEDGER_NKINDS] = {"page_fault", "trap", "syscall", "step"};
	return (unsigned)k < LEDGER_NKINDS ? names[k] : "?";
}

void ledger_note(ledger *l, ledger_kind k, uint64_t n)
{
	if ((unsigned)k < LEDGER_NKINDS)
		l->events[k] += n;
}

int64_t ledger_bias(const ledger *l)
{
	int64_t b = 0;
	for (int k = 0; k < LEDGER_NKINDS; k++)
		b += l->per_event[k] * (int64_t)l->events[k];
	return b;
}

uint64_t ledger_correct(const ledger *l, uint64_t raw)
{
	int64_t b = ledger_bias(l);
	if (b >= 0)
		return raw > (uint64_t)b ? raw - (uint64_t)b : 0;
	return raw + (uint64_t)(-b);
}

lomas_status ledger_calibrate(ledger *l, ledger_kind k, uint64_t expected, uint64_t raw,
                              uint64_t events)
{
	int64_t excess;
	if ((unsigned)k >= LEDGER_NKINDS || events == 0)
		return error_set(LOMAS_EINVAL, "ledger calibration needs at least one event");
	/* Remove what the other, already calibrated kinds account for. */
	excess = (int64_t)raw - (int64_t)expected;
	for (int j = 0; j < LEDGER_NKINDS; j++)
		if (j != (int)k)
			excess -= l->per_event[j] * (int64_t)l->events[j];
	if (excess % (int64_t)events)
		return error_set(
		    LOMAS_EINVAL, "calibration of %s: excess %lld is not a multiple of %llu events",
		    ledger_kind_name(k), (long long)excess, (unsigned long long)events);
	l->per_event[k] = excess / (int64_t)events;
	return LOMAS_OK;
}

/* STUB (helper: trace). The trace clock. */
#include "trace.h"

lomas_status lomas_trace_new(const lomas_config *cfg, lomas_trace **out)
{
	(void)cfg; (void)out;
	return error_set(LOMAS_ENOTSUP, "lomas_trace_new: not implemented");
}

lomas_status lomas_trace_ref(lomas_trace *t, uint64_t thread, uint64_t addr, uint64_t pc,
			     lomas_ref_kind kind)
{
	(void)t; (void)thread; (void)addr; (void)pc; (void)kind;
	return error_set(LOMAS_ENOTSUP, "lomas_trace_ref: not implemented");
}

lomas_status lomas_trace_finish(lomas_trace *t, lomas_profile **out)
{
	(void)t; (void)out;
	return error_set(LOMAS_ENOTSUP, "lomas_trace_finish: not implemented");
}

void lomas_trace_free(lomas_trace *t)
{
	(void)t;
}

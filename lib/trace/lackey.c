/* STUB (helper: trace). Valgrind lackey --trace-mem=yes reader. */
#include "trace.h"

lomas_status lomas_trace_analyze_lackey(const lomas_config *cfg, const char *path,
					lomas_profile **out)
{
	(void)cfg; (void)path; (void)out;
	return error_set(LOMAS_ENOTSUP, "lomas_trace_analyze_lackey: not implemented");
}

lomas_status lomas_trace_analyze_lackey_stream(const lomas_config *cfg, FILE *in,
					       const char *name, lomas_profile **out)
{
	(void)cfg; (void)in; (void)name; (void)out;
	return error_set(LOMAS_ENOTSUP, "lomas_trace_analyze_lackey_stream: not implemented");
}

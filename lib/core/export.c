/* STUB (helper: profile file). JSON and CSV export through libjansson. */
#include "core.h"

lomas_status lomas_profile_export(const lomas_profile *p, lomas_export_format format, FILE *out)
{
	(void)p;
	(void)format;
	(void)out;
	return error_set(LOMAS_ENOTSUP, "lomas_profile_export: not implemented");
}

/* STUB (helper: profile file). Binary profile file of DESIGN §6: load and atomic save. */
#include "core.h"

lomas_status lomas_profile_load(const char *path, lomas_profile **out)
{
	(void)path;
	(void)out;
	return error_set(LOMAS_ENOTSUP, "lomas_profile_load: not implemented");
}

lomas_status lomas_profile_save(const lomas_profile *p, const char *path)
{
	(void)p;
	(void)path;
	return error_set(LOMAS_ENOTSUP, "lomas_profile_save: not implemented");
}

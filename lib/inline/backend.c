/* STUB (helper: inline). Session backend for programs built with the lomas-inline hooks. */
#include "../session.h"

bool inline_backend_detect(const char *program_path)
{
	(void)program_path;
	return false;
}

lomas_status inline_backend_start(const struct lomas_config *cfg, const char *program_path,
				  char *const argv[], const session_ops **ops, void **impl)
{
	(void)cfg; (void)program_path; (void)argv; (void)ops; (void)impl;
	return error_set(LOMAS_ENOTSUP, "the inline clock is not built yet");
}

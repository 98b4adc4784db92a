/* STUB (helper: monitor). Session backend: ptrace supervisor with the step clock. */
#include "../session.h"

lomas_status monitor_backend_start(const struct lomas_config *cfg, const char *program_path,
				   char *const argv[], const session_ops **ops, void **impl)
{
	(void)cfg; (void)program_path; (void)argv; (void)ops; (void)impl;
	return error_set(LOMAS_ENOTSUP, "the step clock is not built yet");
}

lomas_status monitor_backend_attach(const struct lomas_config *cfg, int pid,
				    const session_ops **ops, void **impl)
{
	(void)cfg; (void)pid; (void)ops; (void)impl;
	return error_set(LOMAS_ENOTSUP, "attaching (step clock) is not built yet");
}

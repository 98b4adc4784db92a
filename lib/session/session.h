/*
 * The session's internal interface: a live clock is a backend with these
 * operations; session.c chooses one from the config and forwards the
 * public lomas_session_* calls to it.
 */
#ifndef LOMAS_SESSION_H
#define LOMAS_SESSION_H

#include <stdbool.h>

#include "core/core.h"

typedef struct session_ops {
	const char *name; /* the clock's name, recorded in the profile */
	/* Handle events for at most timeout_ms (-1 = until the target ends). */
	lomas_status (*poll)(void *impl, int timeout_ms, bool *running);
	/* Detach and leave the target running unharmed. */
	lomas_status (*stop)(void *impl);
	lomas_status (*stats)(void *impl, lomas_stats *out);
	/* A new profile of what was collected so far. */
	lomas_status (*profile)(void *impl, lomas_profile **out);
	/* The target's waitpid() status; valid once poll reported !running. */
	int (*wait_status)(void *impl);
	/* Free; a target still attached is detached first, never left stopped. */
	void (*free)(void *impl);
	/* lomas_session_interrupt (NULL: the clock has no such way; the caller
	 * detaches with stop). */
	lomas_status (*interrupt)(void *impl, int sig, int flags);
} session_ops;

/*
 * Resolve argv0 like execvp (PATH search when it has no '/') into buf.
 * LOMAS_ENOENT if not found, LOMAS_EPERM if found but not executable.
 */
lomas_status session_find_program(const char *argv0, char *buf, size_t len);

/* argv joined with spaces into buf (truncated to len), the profile's "command". */
void session_command_line(char *const argv[], char *buf, size_t len);

/* backend_inline.c: run a program built with the lomas-inline hooks. */
bool inline_backend_detect(const char *program_path);
lomas_status inline_backend_start(const struct lomas_config *cfg, const char *program_path,
                                  char *const argv[], const session_ops **ops, void **impl);

/* backend_dbi.c: run any program under the dbi clock's Valgrind tool. */
bool dbi_backend_available(void);
lomas_status dbi_backend_start(const struct lomas_config *cfg, const char *program_path,
                               char *const argv[], const session_ops **ops, void **impl);
/* The dbi clock cannot attach: always an error (LOMAS_ENOTSUP) with the reason. */
lomas_status dbi_backend_attach(void);

/* backend_monitor.c: the ptrace supervisor (lib/monitor) with the step or pmu clock. */
lomas_status monitor_backend_start(const struct lomas_config *cfg, const char *program_path,
                                   char *const argv[], const session_ops **ops, void **impl);
lomas_status monitor_backend_attach(const struct lomas_config *cfg, int pid,
                                    const session_ops **ops, void **impl);

#endif /* LOMAS_SESSION_H */

/*
 * The session's internal interface: a live clock is a backend with these
 * operations; session.c chooses one from the config and forwards the
 * public lomas_session_* calls to it.
 */
#ifndef LOMAS_SESSION_H
#define LOMAS_SESSION_H

#include <stdbool.h>
#include <sys/types.h>

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

/*
 * spawn.c: fork and execve(path, argv, env) for a backend that runs its
 * target itself. pid_digits (or NULL): the end of one of env's strings,
 * where the child writes its own pid in decimal before the exec. On success
 * *pid is the child and *pidfd its pidfd (-1 where the kernel has none).
 * An exec that fails reaps the child and returns LOMAS_ETARGET with its
 * errno in *exec_errno (0 otherwise); a failed pipe or fork, LOMAS_EIO or
 * LOMAS_ETARGET.
 */
lomas_status session_spawn(const char *path, char *const argv[], char *const env[],
                           char *pid_digits, pid_t *pid, int *pidfd, int *exec_errno);

/*
 * Wait up to ms milliseconds for the child to exit: on its pidfd, which
 * becomes readable the moment it does; without one (a kernel before 5.3, or
 * a seccomp filter that refuses pidfd_open), in sleeps that start at
 * *nap_us (the caller's, 100 at first) and double up to 10 ms, so a short
 * target is not kept waiting for a whole sleep after it ended (a fixed
 * 10 ms made lomas-demo record of a 1 ms program take 14 ms). A signal ends
 * the wait early, so the caller sees its own flags at once.
 */
void session_wait_exit(int pidfd, long ms, long *nap_us);

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

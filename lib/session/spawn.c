/*
 * The target of a backend that runs a program itself (backend_inline.c: the
 * program; backend_dbi.c: Valgrind's tool with the program): started with
 * fork and execve, its exec failure told back, and its end waited for.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "session.h"

lomas_status session_spawn(const char *path, char *const argv[], char *const env[],
                           char *pid_digits, pid_t *pid, int *pidfd, int *exec_errno)
{
	int pipefd[2], child_errno = 0;
	ssize_t r;
	*pidfd = -1;
	*exec_errno = 0;
	/* exec failure comes back through a close-on-exec pipe. */
	if (pipe2(pipefd, O_CLOEXEC) != 0)
		return error_set(LOMAS_EIO, "pipe: %s", strerror(errno));
	*pid = fork();
	if (*pid == 0) {
		/* Async-signal-safe from here on: digits by hand. */
		if (pid_digits) {
			char digits[24];
			int nd = 0;
			for (unsigned long v = (unsigned long)getpid(); v || !nd; v /= 10)
				digits[nd++] = (char)('0' + v % 10);
			while (nd)
				*pid_digits++ = digits[--nd];
			*pid_digits = '\0';
		}
		close(pipefd[0]);
		execve(path, argv, env);
		child_errno = errno;
		r = write(pipefd[1], &child_errno, sizeof child_errno);
		(void)r;
		_exit(127);
	}
	close(pipefd[1]);
	if (*pid < 0) {
		close(pipefd[0]);
		return error_set(LOMAS_ETARGET, "fork: %s", strerror(errno));
	}
	do
		r = read(pipefd[0], &child_errno, sizeof child_errno);
	while (r < 0 && errno == EINTR);
	close(pipefd[0]);
	if (r == (ssize_t)sizeof child_errno) {
		int status;
		waitpid(*pid, &status, 0);
		*exec_errno = child_errno;
		return error_set(LOMAS_ETARGET, "cannot run %s: %s", path, strerror(child_errno));
	}
#ifdef SYS_pidfd_open
	/* Not reaped yet, so the pid cannot have been reused; close-on-exec. */
	*pidfd = (int)syscall(SYS_pidfd_open, *pid, 0);
	if (*pidfd < 0)
		*pidfd = -1;
#endif
	return LOMAS_OK;
}

void session_wait_exit(int pidfd, long ms, long *nap_us)
{
	if (pidfd >= 0) {
		struct pollfd pfd = {.fd = pidfd, .events = POLLIN};
		poll(&pfd, 1, (int)(ms > INT_MAX ? INT_MAX : ms));
		return;
	}
	struct timespec ts;
	long us = *nap_us < ms * 1000 ? *nap_us : ms * 1000;
	ts.tv_sec = us / 1000000;
	ts.tv_nsec = (us % 1000000) * 1000;
	nanosleep(&ts, NULL);
	*nap_us = *nap_us * 2 > 10000 ? 10000 : *nap_us * 2;
}

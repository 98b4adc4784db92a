/*
 * The monitor's system calls toward the target (ptrace, waitpid,
 * process_vm_readv), through one seam so that tests can make any of them
 * fail: the target can vanish (SIGKILL, exit of its last thread) between any
 * two of our calls, and every call then fails with ESRCH or ECHILD. A test
 * sets a hook that fails the Nth call (counting from the hook's
 * installation) with a chosen errno, or runs a callback just before it (to
 * kill the target for real at that point), and requires that the session
 * still ends with a clear status, never hangs, never crashes, leaks nothing,
 * and leaves a target that still exists neither stopped nor protected.
 *
 * The hook is process-wide and meant for tests (one session at a time).
 */
#include <errno.h>
#include <stdatomic.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/wait.h>

#include "monitor.h"

static mon_sys_hook hook;
static _Atomic uint64_t calls;

void mon_sys_set_hook(const mon_sys_hook *h)
{
	hook = h ? *h : (mon_sys_hook){0};
	atomic_store(&calls, 0);
}

uint64_t mon_sys_calls(void)
{
	return atomic_load(&calls);
}

/*
 * Count this call; true when the hook makes it fail, with errno err. A wait
 * for a thread that still exists can only be interrupted (EINTR): failing it
 * otherwise would leave its report uncollected behind our back, a state the
 * kernel never produces.
 */
static bool fails(int err)
{
	uint64_t n = atomic_fetch_add(&calls, 1) + 1;
	if (!hook.fail_at || n != hook.fail_at)
		return false;
	if (hook.before)
		hook.before(n, hook.ctx);
	if (!hook.err)
		return false;
	errno = err ? err : hook.err;
	return true;
}

long mon_ptrace(int req, pid_t tid, void *addr, void *data)
{
	if (fails(0))
		return -1;
	return ptrace((enum __ptrace_request)req, tid, addr, data);
}

pid_t mon_sys_waitpid(pid_t pid, int *status, int flags)
{
	if (fails(EINTR))
		return -1;
	return waitpid(pid, status, flags);
}

ssize_t mon_sys_vm_readv(pid_t pid, const struct iovec *local, unsigned long nlocal,
                         const struct iovec *remote, unsigned long nremote, unsigned long flags)
{
	if (fails(0))
		return -1;
	return process_vm_readv(pid, local, nlocal, remote, nremote, flags);
}

long mon_sys_peek(pid_t pid, uint64_t addr)
{
	if (fails(0))
		return -1;
	return ptrace(PTRACE_PEEKDATA, pid, (void *)(uintptr_t)addr, NULL);
}

const decode_mem_ops mon_decode_mem_ops = {mon_sys_vm_readv, mon_sys_peek};

/*
 * The real kernel behind the pmu clock's function table, and the probe that
 * turns a failing perf_event_open into one capability error naming its
 * cause (docs/cli.md: lomas-demo record exits 125 with it).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pmu.h"

#ifndef POLL_IN
#define POLL_IN 1
#endif
#ifndef POLL_HUP
#define POLL_HUP 6
#endif

static int real_open(void *ctx, struct perf_event_attr *attr, pid_t tid, int cpu, int group,
                     unsigned long flags)
{
	long fd = syscall(SYS_perf_event_open, attr, tid, cpu, group, flags);
	return fd < 0 ? -errno : (int)fd;
}

static int real_ioctl(void *ctx, int fd, unsigned long req, unsigned long arg)
{
	return ioctl(fd, req, arg) < 0 ? -errno : 0;
}

static ssize_t real_read(void *ctx, int fd, void *buf, size_t len)
{
	ssize_t n;
	do
		n = read(fd, buf, len);
	while (n < 0 && errno == EINTR);
	return n < 0 ? -errno : n;
}

static int real_fcntl(void *ctx, int fd, int cmd, unsigned long arg)
{
	int r = fcntl(fd, cmd, arg);
	return r < 0 ? -errno : r;
}

static void *real_mmap(void *ctx, int fd, size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	return p == MAP_FAILED ? NULL : p;
}

static int real_munmap(void *ctx, void *addr, size_t len)
{
	return munmap(addr, len) < 0 ? -errno : 0;
}

static int real_close(void *ctx, int fd)
{
	return close(fd) < 0 ? -errno : 0;
}

/*
 * Between samples the thread runs under PTRACE_SYSCALL, not PTRACE_CONT:
 * the monitor lifts its page protections around every system call of the
 * target (docs/architecture.md, the watch engines: no call may see EFAULT
 * because of us; pmu_free.c: the call is skipped at its entry, the thread
 * put back on its syscall instruction and stepped over it lifted).
 */
static int real_resume(void *ctx, pid_t tid, int how, int sig)
{
	long r = ptrace(how == PMU_STEP ? PTRACE_SINGLESTEP : PTRACE_SYSCALL, tid, NULL,
	                (void *)(long)sig);
	return r < 0 ? -errno : 0;
}

static pid_t real_wait(void *ctx, pid_t tid, int *status, int flags)
{
	return waitpid(tid, status, flags);
}

/* perf_event_wakeup -> kill_fasync(POLL_IN); a disabled event_limit gives POLL_HUP. */
static bool real_is_overflow(void *ctx, int fd, const siginfo_t *si)
{
	return (si->si_code == POLL_IN || si->si_code == POLL_HUP) && si->si_fd == fd;
}

const pmu_sys_ops pmu_sys_real = {
    .open = real_open,
    .ioctl = real_ioctl,
    .read = real_read,
    .fcntl = real_fcntl,
    .mmap = real_mmap,
    .munmap = real_munmap,
    .close = real_close,
    .resume = real_resume,
    .wait = real_wait,
    .is_overflow = real_is_overflow,
};

static const pmu_sys_ops *cur = &pmu_sys_real;

const pmu_sys_ops *pmu_sys(void)
{
	return cur;
}

void pmu_sys_set(const pmu_sys_ops *ops)
{
	cur = ops ? ops : &pmu_sys_real;
}

int pmu_paranoid(void)
{
	FILE *f = fopen("/proc/sys/kernel/perf_event_paranoid", "re");
	int v;
	if (!f)
		return INT32_MIN;
	if (fscanf(f, "%d", &v) != 1)
		v = INT32_MIN;
	fclose(f);
	return v;
}

lomas_status pmu_probe(const pmu_table *t, pid_t tid, const char *alt)
{
	const pmu_sys_ops *sys = pmu_sys();
	char instead[160] = "";
	if (alt)
		snprintf(instead, sizeof instead, "; use --clock=%s", alt);
	for (unsigned i = 0; i < t->n; i++) {
		struct perf_event_attr a = t->ev[i].attr;
		int fd;
		a.disabled = 1;
		fd = sys->open(sys->ctx, &a, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
		if (fd >= 0) {
			sys->close(sys->ctx, fd);
			continue;
		}
		switch (-fd) {
		case ENOENT:
		case EOPNOTSUPP:
		case ENODEV:
			return error_set(LOMAS_ENOTSUP,
			                 "the pmu clock cannot run: no hardware PMU here "
			                 "(perf_event_open of %s on %s: %s)%s",
			                 t->ev[i].name, t->pmu, strerror(-fd), instead);
		case EACCES:
		case EPERM:
			return error_set(LOMAS_EPERM,
			                 "the pmu clock may not open counters: perf_event_open of "
			                 "%s: %s: kernel.perf_event_paranoid is %d; lower it "
			                 "(sysctl kernel.perf_event_paranoid=2 or less) or grant "
			                 "CAP_PERFMON%s",
			                 t->ev[i].name, strerror(-fd), pmu_paranoid(), instead);
		case EINVAL:
			return error_set(LOMAS_ENOTSUP,
			                 "the pmu clock cannot run: perf_event_open of %s (config "
			                 "%#llx) is refused: %s; this kernel or CPU does not take "
			                 "it%s",
			                 t->ev[i].name, (unsigned long long)t->ev[i].attr.config,
			                 strerror(-fd), instead);
		default:
			return error_set(LOMAS_ENOTSUP,
			                 "the pmu clock cannot run: perf_event_open of %s: %s%s",
			                 t->ev[i].name, strerror(-fd), instead);
		}
	}
	return LOMAS_OK;
}

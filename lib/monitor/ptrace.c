/*
 * The ptrace supervisor: spawn and attach (PTRACE_SEIZE), threads, waiting
 * for stops, syscall injection, detach. Linux x86-64 only.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "monitor.h"

#define TRACE_OPTS \
	(PTRACE_O_TRACECLONE | PTRACE_O_TRACEEXEC | PTRACE_O_TRACEEXIT | PTRACE_O_TRACESYSGOOD)

mon_thread *mon_thread_of(monitor *m, pid_t tid)
{
	/* The newest record for tid (tids are reused only after a thread is gone). */
	for (size_t i = m->threads.n; i-- > 0;)
		if (m->threads.items[i].tid == tid && m->threads.items[i].state != MT_GONE)
			return &m->threads.items[i];
	return NULL;
}

lomas_status mon_add_thread(monitor *m, pid_t tid, mon_thread **out)
{
	lomas_status st;
	if ((st = vec_reserve(&m->threads, m->threads.n + 1)))
		return st;
	mon_thread *t = &m->threads.items[m->threads.n];
	memset(t, 0, sizeof *t);
	t->tid = tid;
	t->index = (uint32_t)m->threads.n;
	t->state = MT_NEW;
	m->threads.n++;
	m->stats.threads++;
	*out = t;
	return LOMAS_OK;
}

lomas_status mon_fail(monitor *m, lomas_status st)
{
	if (st && !m->error) {
		m->error = st;
		snprintf(m->errmsg, sizeof m->errmsg, "%s", lomas_error_message());
		if (!m->errmsg[0])
			snprintf(m->errmsg, sizeof m->errmsg, "%s", lomas_strerror(st));
	}
	return st;
}

lomas_status mon_adopt_threads(monitor *m)
{
	char path[64];
	DIR *d;
	struct dirent *de;
	lomas_status st = LOMAS_OK;
	snprintf(path, sizeof path, "/proc/%d/task", (int)m->pid);
	if (!(d = opendir(path)))
		return error_set(LOMAS_ETARGET, "%s: %s", path, strerror(errno));
	while (!st && (de = readdir(d))) {
		pid_t tid = (pid_t)atoi(de->d_name);
		mon_thread *t;
		if (tid <= 0 || mon_thread_of(m, tid))
			continue;
		/* Traced already (PTRACE_O_TRACECLONE): its first stop is on its way. */
		if (!(st = mon_add_thread(m, tid, &t)))
			step_thread_init(m, t);
	}
	closedir(d);
	return st;
}

size_t mon_live_threads(const monitor *m)
{
	size_t n = 0;
	for (size_t i = 0; i < m->threads.n; i++)
		n += m->threads.items[i].state != MT_GONE;
	return n;
}

/*
 * waitpid, again when a signal interrupts it: the caller's handlers need not
 * have SA_RESTART (lomas-demo's SIGINT handler has not), and a wait given up
 * half-way leaves a thread in a state our bookkeeping does not describe.
 */
pid_t mon_waitpid(pid_t pid, int *status, int flags)
{
	pid_t r;
	do
		r = mon_sys_waitpid(pid, status, flags);
	while (r < 0 && errno == EINTR);
	return r;
}

void mon_kill_reap(pid_t pid)
{
	int status;
	kill(pid, SIGKILL);
	/*
	 * A traced child killed may still stop once (PTRACE_EVENT_EXIT) before
	 * it dies: let it go on until it is reaped (bounded: a wait may fail).
	 */
	for (int i = 0; i < 16; i++) {
		if (mon_waitpid(pid, &status, __WALL) != pid)
			return;
		if (WIFEXITED(status) || WIFSIGNALED(status))
			return;
		mon_ptrace(PTRACE_CONT, pid, NULL, NULL);
	}
}

static lomas_status ptrace_error(const char *what, pid_t pid, int err)
{
	if (err == EPERM)
		return error_set(LOMAS_EPERM,
		                 "%s %d: operation not permitted (ptrace is restricted: see "
		                 "/proc/sys/kernel/yama/ptrace_scope, or run as the target's owner "
		                 "with CAP_SYS_PTRACE)",
		                 what, (int)pid);
	if (err == ESRCH)
		return error_set(LOMAS_ENOENT, "%s %d: no such process", what, (int)pid);
	return error_set(LOMAS_ETARGET, "%s %d: %s", what, (int)pid, strerror(err));
}

lomas_status mon_spawn(monitor *m, const char *program_path, char *const argv[])
{
	int pipefd[2], status, err = 0;
	pid_t pid;
	mon_thread *t;
	lomas_status st;
	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return error_set(LOMAS_EIO, "pipe: %s", strerror(errno));
	pid = fork();
	if (pid < 0) {
		close(pipefd[0]);
		close(pipefd[1]);
		return error_set(LOMAS_ETARGET, "fork: %s", strerror(errno));
	}
	if (pid == 0) {
		/* The child: wait to be seized, then exec; report an exec failure. */
		close(pipefd[0]);
		kill(getpid(), SIGSTOP);
		execv(program_path, argv);
		err = errno;
		if (write(pipefd[1], &err, sizeof err) < 0)
			_exit(127);
		_exit(127);
	}
	close(pipefd[1]);
	m->pid = pid;
	m->spawned = true;
	if (mon_waitpid(pid, &status, WSTOPPED) != pid || !WIFSTOPPED(status)) {
		close(pipefd[0]);
		return error_set(LOMAS_ETARGET, "the child did not stop before exec");
	}
	if (mon_ptrace(PTRACE_SEIZE, pid, NULL, (void *)(long)(TRACE_OPTS | PTRACE_O_EXITKILL)) <
	    0) {
		err = errno;
		kill(pid, SIGKILL);
		mon_waitpid(pid, &status, 0);
		close(pipefd[0]);
		return ptrace_error("PTRACE_SEIZE", pid, err);
	}
	kill(pid, SIGCONT);
	/* Run it to its exec, forwarding nothing of the start-up dance. */
	for (;;) {
		if (mon_waitpid(pid, &status, __WALL) != pid) {
			err = errno;
			close(pipefd[0]);
			return error_set(LOMAS_ETARGET, "waitpid: %s", strerror(err));
		}
		if (WIFEXITED(status) || WIFSIGNALED(status)) {
			ssize_t r = read(pipefd[0], &err, sizeof err);
			close(pipefd[0]);
			m->ended = true;
			m->exit_status = status;
			if (r == (ssize_t)sizeof err)
				return error_set(err == ENOENT ? LOMAS_ENOENT : LOMAS_EPERM,
				                 "cannot execute %s: %s", program_path,
				                 strerror(err));
			return error_set(LOMAS_ETARGET, "%s ended before its exec", program_path);
		}
		if ((status >> 16) == PTRACE_EVENT_EXEC)
			break;
		/* Not resumed, it would never report again: no wait for it then. */
		if (mon_ptrace(PTRACE_CONT, pid, NULL, NULL) < 0) {
			err = errno;
			close(pipefd[0]);
			return error_set(LOMAS_ETARGET, "PTRACE_CONT(%d): %s", (int)pid,
			                 strerror(err));
		}
	}
	close(pipefd[0]);
	if ((st = mon_add_thread(m, pid, &t)))
		return st;
	t->state = MT_STOPPED;
	return LOMAS_OK;
}

lomas_status mon_attach(monitor *m, pid_t pid)
{
	char path[64];
	bool more = true;
	int err;
	lomas_status st;
	m->pid = pid;
	snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
	/* Threads may be created while we seize: rescan until no new one appears. */
	while (more) {
		DIR *d = opendir(path);
		struct dirent *de;
		more = false;
		if (!d)
			return error_set(LOMAS_ENOENT, "process %d: no such process", (int)pid);
		while ((de = readdir(d))) {
			pid_t tid = (pid_t)atoi(de->d_name);
			mon_thread *t;
			if (tid <= 0 || mon_thread_of(m, tid))
				continue;
			if (mon_ptrace(PTRACE_SEIZE, tid, NULL, (void *)(long)TRACE_OPTS) < 0) {
				err = errno;
				if (err == ESRCH && tid != pid)
					continue; /* it exited meanwhile */
				closedir(d);
				return ptrace_error("PTRACE_SEIZE", tid, err);
			}
			/* Recorded before anything can fail: detaching lets go of it. */
			if ((st = mon_add_thread(m, tid, &t))) {
				mon_ptrace(PTRACE_DETACH, tid, NULL, NULL);
				closedir(d);
				return st;
			}
			t->state = MT_RUNNING;
			more = true;
			if (mon_ptrace(PTRACE_INTERRUPT, tid, NULL, NULL) < 0) {
				err = errno;
				closedir(d);
				return ptrace_error("PTRACE_INTERRUPT", tid, err);
			}
		}
		closedir(d);
	}
	/* Collect each thread's interrupt stop. */
	for (size_t i = 0; i < m->threads.n; i++) {
		mon_thread *t = &m->threads.items[i];
		int status;
		while (t->state == MT_RUNNING) {
			if (mon_waitpid(t->tid, &status, __WALL) != t->tid)
				return error_set(LOMAS_ETARGET, "waitpid(%d): %s", (int)t->tid,
				                 strerror(errno));
			if (WIFEXITED(status) || WIFSIGNALED(status)) {
				mon_reap(m, t, status);
				break;
			}
			if ((status >> 16) == PTRACE_EVENT_STOP) {
				int sig = WSTOPSIG(status);
				t->state = MT_STOPPED;
				if (sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN ||
				    sig == SIGTTOU) {
					/*
					 * Stopped by job control before we came: it stays
					 * stopped until its SIGCONT, as without us.
					 */
					if (mon_ptrace(PTRACE_LISTEN, t->tid, NULL, NULL) == 0)
						t->state = MT_LISTEN;
				}
				break;
			}
			/* A signal arrived first: keep it for later and go on to the interrupt. */
			if ((status >> 16) == 0) {
				siginfo_t si;
				if (mon_ptrace(PTRACE_GETSIGINFO, t->tid, NULL, &si) == 0)
					sig_hold(m, t, &si);
			}
			if (mon_ptrace(PTRACE_CONT, t->tid, NULL, NULL) < 0) {
				/* Still in that stop: detaching lets go of it from there. */
				t->state = MT_STOPPED;
				return ptrace_error("PTRACE_CONT", t->tid, errno);
			}
		}
	}
	if (m->ended)
		return error_set(LOMAS_ETARGET, "process %d ended while attaching", (int)pid);
	return LOMAS_OK;
}

void mon_reap(monitor *m, mon_thread *t, int status)
{
	t->state = MT_GONE;
	if (t->tid == m->pid) {
		m->ended = true;
		m->exit_status = status;
	}
}

/* ------------------------------------------------------- syscall injection */

/*
 * Calls injected per thread, process-wide: the pmu clock's ledgers note
 * them, and a replay kernel perturbs its counts by them as a real counter
 * is (lib/pmu/replay.c). A small table; the oldest entry is reused.
 */
#define INJECTED_SLOTS 512
static struct {
	pid_t tid;
	uint64_t n;
} injected[INJECTED_SLOTS];
static unsigned injected_next;

static void injected_note(pid_t tid)
{
	for (unsigned i = 0; i < INJECTED_SLOTS; i++)
		if (injected[i].tid == tid) {
			injected[i].n++;
			return;
		}
	injected[injected_next].tid = tid;
	injected[injected_next].n = 1;
	injected_next = (injected_next + 1) % INJECTED_SLOTS;
}

uint64_t mon_injected_into(pid_t tid)
{
	for (unsigned i = 0; i < INJECTED_SLOTS; i++)
		if (injected[i].tid == tid)
			return injected[i].n;
	return 0;
}

/* Put saved registers back; once more if the first request fails. */
static lomas_status restore_regs(mon_thread *t, const struct user_regs_struct *saved)
{
	if (mon_ptrace(PTRACE_SETREGS, t->tid, NULL, (void *)saved) == 0 ||
	    mon_ptrace(PTRACE_SETREGS, t->tid, NULL, (void *)saved) == 0)
		return LOMAS_OK;
	return error_set(LOMAS_ETARGET, "PTRACE_SETREGS(%d): %s", (int)t->tid, strerror(errno));
}

/*
 * Run the instruction at `at` (a syscall) with regs set; wait for its step to
 * end. Whatever fails after the registers were changed, they are put back:
 * a thread left with the injection's registers would run on in our page.
 */
static lomas_status run_syscall_at(monitor *m, mon_thread *t, uint64_t at, long nr,
                                   const uint64_t a[6], long *ret)
{
	struct user_regs_struct saved, r;
	lomas_status st = LOMAS_OK;
	int status;
	if (mon_ptrace(PTRACE_GETREGS, t->tid, NULL, &saved) < 0)
		return error_set(LOMAS_ETARGET, "PTRACE_GETREGS(%d): %s", (int)t->tid,
		                 strerror(errno));
	r = saved;
	r.rip = at;
	r.rax = (uint64_t)nr;
	r.orig_rax = (uint64_t)-1;
	r.rdi = a[0];
	r.rsi = a[1];
	r.rdx = a[2];
	r.r10 = a[3];
	r.r8 = a[4];
	r.r9 = a[5];
	if (mon_ptrace(PTRACE_SETREGS, t->tid, NULL, &r) < 0)
		return error_set(LOMAS_ETARGET, "PTRACE_SETREGS(%d): %s", (int)t->tid,
		                 strerror(errno));
	for (int tries = 0;; tries++) {
		if (mon_ptrace(PTRACE_SINGLESTEP, t->tid, NULL, NULL) < 0) {
			st = error_set(LOMAS_ETARGET, "PTRACE_SINGLESTEP(%d): %s", (int)t->tid,
			               strerror(errno));
			break;
		}
		/* Through the pmu clock's table: a fake kernel sees the stops it counts. */
		if (mon_wait_injected(m, t->tid, &status) != t->tid) {
			st = error_set(LOMAS_ETARGET, "waitpid(%d): %s", (int)t->tid,
			               strerror(errno));
			break;
		}
		if (WIFEXITED(status) || WIFSIGNALED(status)) {
			step_thread_gone(m, t);
			mon_reap(m, t, status);
			return error_set(LOMAS_ETARGET, "thread %d ended during an injected call",
			                 (int)t->tid);
		}
		if ((status >> 16) == PTRACE_EVENT_EXIT) {
			t->state = MT_EXITING;
			return error_set(LOMAS_ETARGET, "thread %d is exiting", (int)t->tid);
		}
		if ((status >> 16) == PTRACE_EVENT_STOP &&
		    (WSTOPSIG(status) == SIGSTOP || WSTOPSIG(status) == SIGTSTP ||
		     WSTOPSIG(status) == SIGTTIN || WSTOPSIG(status) == SIGTTOU)) {
			/*
			 * The group-stop another thread began reached this one before
			 * the call ran (the trap comes on the way back to user mode):
			 * nothing ran; its registers back, it takes part in the stop
			 * (stepping on would leave it the only thread running).
			 */
			t->group_stop = true;
			st = error_set(LOMAS_ESTATE, "thread %d entered a group-stop", (int)t->tid);
			break;
		}
		if ((status >> 16) == 0 && WSTOPSIG(status) != SIGTRAP) {
			/* A signal came first: keep it, and run the call. */
			siginfo_t si;
			int sig = WSTOPSIG(status);
			if ((sig == SIGSEGV || sig == SIGBUS || sig == SIGILL) &&
			    mon_ptrace(PTRACE_GETREGS, t->tid, NULL, &r) == 0 &&
			    (r.rip == at || r.rip == at + 2)) {
				/* Our instruction faulted (our page is gone): not the program's. */
				st = error_set(LOMAS_ETARGET,
				               "the injected call faulted (signal %d)", sig);
				break;
			}
			if (mon_ptrace(PTRACE_GETSIGINFO, t->tid, NULL, &si) < 0) {
				memset(&si, 0, sizeof si);
				si.si_signo = WSTOPSIG(status); /* delivered all the same */
			}
			sig_hold(m, t, &si);
			continue;
		}
		if (mon_ptrace(PTRACE_GETREGS, t->tid, NULL, &r) < 0) {
			st = error_set(LOMAS_ETARGET, "PTRACE_GETREGS(%d): %s", (int)t->tid,
			               strerror(errno));
			break;
		}
		if (r.rip == at + 2 || tries > 8)
			break;
	}
	/* Its last stop, a step's trap: a signal given on resume is delivered. */
	t->at_sigstop = !st;
	if (!st) {
		*ret = (long)r.rax;
		m->stats.injected++;
		injected_note(t->tid);
	}
	lomas_status rs = restore_regs(t, &saved);
	return st ? st : rs;
}

/* The mmap's result ret: the page gets `syscall; int3 x 6` and becomes ours. */
static lomas_status fill_scratch(monitor *m, mon_thread *t, long ret)
{
	if (ret < 0 && ret > -4096)
		return error_set(LOMAS_ETARGET, "mmap of the scratch page failed: %s",
		                 strerror((int)-ret));
	/* ptrace writes through the read-only mapping (FOLL_FORCE). */
	if (mon_ptrace(PTRACE_POKETEXT, t->tid, (void *)ret, (void *)0xcccccccccccc050full) < 0)
		return error_set(LOMAS_ETARGET, "cannot fill the scratch page: %s",
		                 strerror(errno));
	m->scratch = (uint64_t)ret;
	m->syscall_insn = (uint64_t)ret;
	return LOMAS_OK;
}

/*
 * A `syscall` (0f 05) in the target's vDSO, or 0. Any such two bytes run as
 * one when rip points there (the x86-64 vDSO has several: its fallbacks to
 * the real calls). Running it needs no change to the program's code.
 */
static uint64_t vdso_syscall(monitor *m, mon_thread *t)
{
	enum { MAX_VDSO = 64 * 1024 };
	uint64_t at = 0;
	for (size_t i = 0; i < m->maps.r.n && !at; i++) {
		const map_range *v = &m->maps.r.items[i];
		size_t len = (size_t)(v->end - v->start);
		uint8_t *buf;
		if (!v->path || strcmp(v->path, "[vdso]") || !(v->prot & PROT_EXEC) || len < 2 ||
		    len > MAX_VDSO || !(buf = malloc(len)))
			continue;
		struct iovec local = {buf, len}, remote = {(void *)v->start, len};
		if (mon_sys_vm_readv(t->tid, &local, 1, &remote, 1, 0) == (ssize_t)len)
			for (size_t k = 0; k + 1 < len; k++)
				if (buf[k] == 0x0f && buf[k + 1] == 0x05) {
					at = v->start + k;
					break;
				}
		free(buf);
	}
	return at;
}

/*
 * Map the scratch page holding `syscall; int3`. The mmap runs at a syscall
 * of the vDSO; only without one is a syscall poked over the code at rip for
 * that step. That poke is in code every thread shares: a sibling stepping
 * the same pc meanwhile runs the syscall and goes on two bytes later, inside
 * an instruction (t_stress died so, SIGSEGV or SIGILL, in 4 of 30 runs under
 * load: its first sample came after its threads had started).
 */
static lomas_status make_scratch(monitor *m, mon_thread *t)
{
	struct user_regs_struct r;
	uint64_t args[6] = {
	    0, m->page_size, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, (uint64_t)-1, 0};
	uint64_t vdso = vdso_syscall(m, t);
	long word, patched, ret = 0;
	lomas_status st;
	if (vdso) {
		if ((st = run_syscall_at(m, t, vdso, SYS_mmap, args, &ret)))
			return st;
		return fill_scratch(m, t, ret);
	}
	if (mon_ptrace(PTRACE_GETREGS, t->tid, NULL, &r) < 0)
		return error_set(LOMAS_ETARGET, "PTRACE_GETREGS(%d): %s", (int)t->tid,
		                 strerror(errno));
	errno = 0;
	word = mon_ptrace(PTRACE_PEEKTEXT, t->tid, (void *)r.rip, NULL);
	if (errno)
		return error_set(LOMAS_ETARGET, "cannot read the code of %d: %s", (int)t->tid,
		                 strerror(errno));
	patched = (long)(((uint64_t)word & ~0xffffull) | 0x050full);
	if (mon_ptrace(PTRACE_POKETEXT, t->tid, (void *)r.rip, (void *)patched) < 0)
		return error_set(LOMAS_ETARGET, "cannot write the code of %d: %s", (int)t->tid,
		                 strerror(errno));
	st = run_syscall_at(m, t, r.rip, SYS_mmap, args, &ret);
	/* The program's own code back, whatever happened (once more if refused). */
	if (mon_ptrace(PTRACE_POKETEXT, t->tid, (void *)r.rip, (void *)word) < 0 &&
	    mon_ptrace(PTRACE_POKETEXT, t->tid, (void *)r.rip, (void *)word) < 0 && !st)
		st = error_set(LOMAS_ETARGET, "cannot restore the code of %d: %s", (int)t->tid,
		               strerror(errno));
	return st ? st : fill_scratch(m, t, ret);
}

lomas_status mon_inject(monitor *m, mon_thread *t, long nr, const uint64_t args[6], long *ret)
{
	lomas_status st;
	if (!m->syscall_insn && (st = make_scratch(m, t)))
		return st;
	return run_syscall_at(m, t, m->syscall_insn, nr, args, ret);
}

lomas_status mon_drop_scratch(monitor *m, mon_thread *t)
{
	uint64_t args[6] = {m->scratch, m->page_size, 0, 0, 0, 0};
	maps_shadow now = {{0}};
	long ret = 0;
	lomas_status st;
	if (!m->scratch)
		return LOMAS_OK;
	/* A try whose outcome was unknown may have unmapped it already. */
	if (maps_read(&now, m->pid) == LOMAS_OK && !maps_find(&now, m->scratch)) {
		maps_free(&now);
		m->scratch = m->syscall_insn = 0;
		return LOMAS_OK;
	}
	maps_free(&now);
	/* The munmap returns to the unmapped page's next byte: run_syscall_at only steps. */
	if ((st = run_syscall_at(m, t, m->syscall_insn, SYS_munmap, args, &ret)))
		return st; /* kept: detaching tries again */
	if (ret < 0 && ret > -4096)
		return error_set(LOMAS_ETARGET, "munmap of our page in %d failed: %s", (int)m->pid,
		                 strerror((int)-ret));
	m->scratch = 0;
	m->syscall_insn = 0;
	return LOMAS_OK;
}

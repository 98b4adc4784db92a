/*
 * The inline runtime and the program's signals: the profile written on a
 * fatal signal, and the dispositions the program sees.
 *
 * The runtime catches SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL, SIGTERM and
 * SIGINT while the program leaves them at their default: the handler writes
 * the profile, puts the default back and raises the signal again, so the
 * program ends as it would have (the shell sees 128+N). The program never
 * sees that handler: with the recipe's -Wl,--wrap=sigaction,--wrap=signal
 * (and __sysv_signal, what signal() is in strict ISO C), its calls go
 * through here, and a query returns the disposition it set itself (SIG_DFL,
 * with its own flags and mask). Setting one of them to SIG_DFL keeps (or
 * puts back) the runtime's handler; any other disposition replaces it.
 * What the program can still tell: SigCgt in /proc/self/status, and the
 * queries of code not linked with the wrappers (shared libraries).
 *
 * Writing the profile allocates (the core's profile and encoder use
 * malloc), and the signal may have interrupted malloc itself: in its own
 * thread the allocator's lock can be held (writing would wait forever) or
 * its heap half-updated (glibc aborts: the program would end by SIGABRT,
 * not by its signal). So the handler writes the profile in a child process,
 * a copy of the program made at that moment (a raw clone: no atfork
 * handlers, no SIGCHLD to the program), which can hang or crash without
 * harm: the program waits for it at most DUMP_DEADLINE_S (then kills it),
 * and ends by its signal either way. The child makes no core file, prints
 * nothing of glibc's (its stderr is /dev/null; the runtime's own messages
 * still reach the program's stderr) and dies with the program.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "inline.h"

/* glibc's own names for sigaction and signal, which the wraps leave alone. */
extern int __sigaction(int sig, const struct sigaction *act, struct sigaction *old);
extern void (*bsd_signal(int sig, void (*handler)(int)))(int);
extern void (*sysv_signal(int sig, void (*handler)(int)))(int);

#define DUMP_DEADLINE_S 5

static const int fatal_signals[] = {SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL, SIGTERM, SIGINT};
#define NFATAL (sizeof fatal_signals / sizeof *fatal_signals)

static bool is_default(const struct sigaction *sa)
{
	return sa->sa_handler == SIG_DFL; /* sa_sigaction shares its storage */
}

static void on_fatal(int sig);

/* What glibc's sigaction adds to a disposition on its way to the kernel
 * (SA_RESTORER and its return trampoline), so that a query of the view
 * returns what the kernel would. Taken from the runtime's own handler. */
static int restorer_flags;
static void (*restorer)(void);

static void runtime_handler(struct sigaction *sa)
{
	memset(sa, 0, sizeof *sa);
	sa->sa_handler = on_fatal;
	sigemptyset(&sa->sa_mask);
	sa->sa_flags = SA_RESTART;
}

void rt_install_signal_handlers(void)
{
	for (size_t i = 0; i < NFATAL; i++) {
		int sig = fatal_signals[i];
		struct sigaction cur, sa;
		rt_spin_lock(&rt.sig_lock);
		if (!atomic_load(&rt.caught[sig]) && __sigaction(sig, NULL, &cur) == 0 &&
		    is_default(&cur)) {
			runtime_handler(&sa);
			rt.view[sig] = cur;
			if (__sigaction(sig, &sa, NULL) == 0) {
				atomic_store(&rt.caught[sig], true);
				if (!restorer_flags && __sigaction(sig, NULL, &cur) == 0) {
					restorer_flags = cur.sa_flags & ~sa.sa_flags;
					restorer = cur.sa_restorer;
				}
			}
		}
		rt_spin_unlock(&rt.sig_lock);
	}
}

/* The program's own dispositions back for every signal the runtime catches. */
static void restore_views(void)
{
	for (size_t i = 0; i < NFATAL; i++) {
		int sig = fatal_signals[i];
		if (atomic_exchange(&rt.caught[sig], false))
			__sigaction(sig, &rt.view[sig], NULL);
	}
}

/* The child of dump_in_child: write the profile for signal sig, then _exit. */
static void dumper(int sig)
{
	struct rlimit no_core = {0, 0};
	struct sigaction dfl;
	sigset_t none;
	char ending[32];
	int null;
	/* glibc's heap may be locked or half-updated in this copy: a heap of its own. */
	rt_heap_private();
	setrlimit(RLIMIT_CORE, &no_core);
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	memset(&dfl, 0, sizeof dfl);
	dfl.sa_handler = SIG_DFL;
	for (size_t i = 0; i < NFATAL; i++)
		__sigaction(fatal_signals[i], &dfl, NULL);
	sigemptyset(&none);
	pthread_sigmask(SIG_SETMASK, &none, NULL);
	/* The runtime's messages to the program's stderr (rt_say checks it is),
	 * glibc's (a malloc assertion, say) to nowhere. */
	rt.say_fd = fcntl(2, F_DUPFD_CLOEXEC, 10);
	if ((null = open("/dev/null", O_WRONLY | O_CLOEXEC)) >= 0)
		dup2(null, 2);
	/* A lock another thread held is held forever here: go on without it
	 * (best effort: the worst is a crash of this copy). */
	pthread_mutex_trylock(&rt.mu);
	snprintf(ending, sizeof ending, "signal %d", sig);
	rt_dump_locked(ending);
	_exit(0);
}

/* Write the profile for signal sig in a child (see the top) and wait for it. */
static void dump_in_child(int sig)
{
	struct timespec nap = {0, 1000000};
	int status;
	long pid;
	/* Flags 0: a copy of the process (as fork) whose exit signals nothing,
	 * waited for with __WCLONE (a program's wait(-1) never sees it). */
	pid = syscall(SYS_clone, 0L, NULL, NULL, NULL, 0L);
	if (pid == 0)
		dumper(sig);
	if (pid < 0)
		return;
	for (int ms = 0; ms < DUMP_DEADLINE_S * 1000; ms++) {
		long r = waitpid((pid_t)pid, &status, __WCLONE | WNOHANG);
		if (r == pid || (r < 0 && errno != EINTR))
			return;
		nanosleep(&nap, NULL);
	}
	kill((pid_t)pid, SIGKILL);
	waitpid((pid_t)pid, &status, __WCLONE);
}

static void on_fatal(int sig)
{
	int saved = errno;
	bool mine = atomic_load(&rt.caught[sig]);
	/* Back to the program's dispositions first. */
	restore_views();
	if (mine && !atomic_exchange(&rt.dumping, 1) && !rt.forked_child && rt.output_ok &&
	    !rt.written && atomic_load(&rt.active)) {
		lomas__fast.busy = 1;
		dump_in_child(sig);
		/* A thread calling exit meanwhile writes nothing more. */
		rt.written = true;
	}
	errno = saved;
	/* Blocked while we run: delivered with the default action when we return. */
	raise(sig);
}

#ifndef LOMAS_INLINE_SHARED
static bool is_fatal(int sig)
{
	for (size_t i = 0; i < NFATAL; i++)
		if (fatal_signals[i] == sig)
			return true;
	return false;
}

/* Should a default disposition get the runtime's handler? (Not once forked or secure.) */
static bool handlers_wanted(void)
{
	return atomic_load(&rt.epoch) != 0 && !rt.secure && !rt.forked_child;
}

/* *act as a query would return it once installed. */
static struct sigaction as_installed(const struct sigaction *act)
{
	struct sigaction v = *act;
	v.sa_flags |= restorer_flags;
	if (restorer_flags)
		v.sa_restorer = restorer;
	return v;
}

/*
 * sigaction for the program (see the top): sig's disposition as the program
 * set it, the runtime's handler kept in place of SIG_DFL.
 */
static int program_sigaction(int sig, const struct sigaction *act, struct sigaction *oldact)
{
	struct sigaction prev, sa;
	int rc = 0;
	if (sig <= 0 || sig >= NSIG || !is_fatal(sig))
		return __sigaction(sig, act, oldact);
	rt_spin_lock(&rt.sig_lock);
	if (atomic_load(&rt.caught[sig])) {
		prev = rt.view[sig];
		if (act && is_default(act))
			rt.view[sig] = as_installed(act);
		else if (act && (rc = __sigaction(sig, act, NULL)) == 0)
			atomic_store(&rt.caught[sig], false);
	} else if (act && is_default(act) && handlers_wanted()) {
		runtime_handler(&sa);
		if ((rc = __sigaction(sig, &sa, &prev)) == 0) {
			rt.view[sig] = as_installed(act);
			atomic_store(&rt.caught[sig], true);
		}
	} else {
		rc = __sigaction(sig, act, &prev);
	}
	rt_spin_unlock(&rt.sig_lock);
	if (rc == 0 && oldact)
		*oldact = prev;
	return rc;
}

typedef void (*handler_fn)(int);

/*
 * signal() for the program: real is glibc's, with BSD semantics (bsd: the
 * flags and mask it sets, SA_RESTART and the signal itself; siginterrupt's
 * exceptions are not known here) or System V's (SA_RESETHAND | SA_NODEFER).
 */
static handler_fn program_signal(int sig, handler_fn handler, handler_fn (*real)(int, handler_fn),
                                 bool bsd)
{
	struct sigaction act, old;
	handler_fn r;
	if (sig <= 0 || sig >= NSIG || !is_fatal(sig))
		return real(sig, handler);
	if (handler == SIG_DFL) {
		memset(&act, 0, sizeof act);
		act.sa_handler = SIG_DFL;
		sigemptyset(&act.sa_mask);
		if (bsd)
			sigaddset(&act.sa_mask, sig);
		act.sa_flags = bsd ? SA_RESTART : SA_RESETHAND | SA_NODEFER;
		return program_sigaction(sig, &act, &old) == 0 ? old.sa_handler : SIG_ERR;
	}
	/* glibc installs it with its own flags; the old disposition is the program's. */
	rt_spin_lock(&rt.sig_lock);
	r = real(sig, handler);
	if (r != SIG_ERR && atomic_exchange(&rt.caught[sig], false))
		r = rt.view[sig].sa_handler;
	rt_spin_unlock(&rt.sig_lock);
	return r;
}

/* The recipe links with -Wl,--wrap=sigaction,--wrap=signal,--wrap=__sysv_signal. */
RT_EXPORT int __wrap_sigaction(int sig, const struct sigaction *act, struct sigaction *oldact);
RT_EXPORT handler_fn __wrap_signal(int sig, handler_fn handler);
RT_EXPORT handler_fn __wrap___sysv_signal(int sig, handler_fn handler);

int __wrap_sigaction(int sig, const struct sigaction *act, struct sigaction *oldact)
{
	return program_sigaction(sig, act, oldact);
}

handler_fn __wrap_signal(int sig, handler_fn handler)
{
	return program_signal(sig, handler, bsd_signal, true);
}

handler_fn __wrap___sysv_signal(int sig, handler_fn handler)
{
	return program_signal(sig, handler, sysv_signal, false);
}
#endif

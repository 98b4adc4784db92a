/*
 * Programs that do what the inline runtime must put up with, built with the
 * lomas-inline recipe (hostile-inline) and without it (hostile-plain): the
 * tests in test_hostile.py compare the two.  hostile MODE [ARGS]:
 *   setuid            print the real and effective uids, work, exit 0
 *   daemon FILE [GONE]
 *                     close every descriptor, (remove the file GONE,) open
 *                     /dev/null as 0, 1 and 2, open FILE (descriptor 3),
 *                     work, write a line to it
 *   closed-stderr FILE DIR
 *                     close fd 2, open FILE (it gets 2), work, write a line
 *                     to it, remove the (empty) directory DIR, exit 0
 *   threads N         run N short threads one after another
 *   stack             a default-attribute thread that uses all but 32 KiB of
 *                     the default stack size (RLIMIT_STACK)
 *   dispositions      print every signal's disposition (sigaction), then
 *                     what signal() and sigaction() report while changing
 *                     SIGINT, SIGTERM and SIGSEGV, then every one again
 *   interrupt [handle|malloc]
 *                     print "ready", then work until SIGINT ends it (handle:
 *                     catch it, print "got 2", exit 3; malloc: the work is
 *                     malloc and free)
 *   fork | exec       work, then fork a child that works (fork) or runs
 *                     this program's "child" mode (exec), wait for it
 *   orphan            work, start this program's "late-child" mode and
 *                     exit at once (the child outlives us)
 *   system            work, then system("THIS child; true"): a shell in
 *                     between that is not instrumented
 *   dlopen SO         dlopen SO (RTLD_NOW) and call its plugin_work(20000)
 *   child | late-child
 *                     work (late-child: after 300 ms) and print a line
 *   stress G          64 threads started, run and joined continuously, G
 *                     generations of them, while a 200 us SIGALRM timer and
 *                     a thread sending SIGUSR1 interrupt them; handlers with
 *                     memory references of their own; a deterministic sum
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* n longs, read-modify-written r times: 2 n r references. */
static long work(long n, int r)
{
	long *a = calloc((size_t)n, sizeof *a), s = 0;
	if (!a)
		exit(1);
	for (int k = 0; k < r; k++)
		for (long i = 0; i < n; i++)
			s += a[i] += i ^ k;
	free(a);
	return s;
}

static int mode_daemon(const char *file, const char *gone)
{
	char line[64];
	long max = sysconf(_SC_OPEN_MAX);
	int fd, n;
	for (long i = 0; i < (max > 0 && max < 65536 ? max : 65536); i++)
		close((int)i);
	if (gone)
		unlink(gone);
	if (open("/dev/null", O_RDONLY) != 0 || open("/dev/null", O_WRONLY) != 1 ||
	    open("/dev/null", O_WRONLY) != 2)
		return 2;
	fd = open(file, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	n = snprintf(line, sizeof line, "fd %d sum %ld\n", fd, work(100000, 10));
	return write(fd, line, (size_t)n) == n ? 0 : 3;
}

static int mode_closed_stderr(const char *file, const char *dir)
{
	char line[64];
	int fd, n;
	close(2);
	fd = open(file, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	n = snprintf(line, sizeof line, "fd %d sum %ld\n", fd, work(20000, 4));
	if (write(fd, line, (size_t)n) != n)
		return 3;
	return rmdir(dir) == 0 ? 0 : 4;
}

static void *short_thread(void *arg)
{
	static _Thread_local long mine[256];
	long s = 0;
	for (int k = 0; k < 4; k++)
		for (int i = 0; i < 256; i++)
			s += mine[i] += (long)arg + i;
	return (void *)s;
}

static int mode_threads(long n)
{
	long s = 0;
	for (long i = 0; i < n; i++) {
		pthread_t t;
		void *r;
		if (pthread_create(&t, NULL, short_thread, (void *)i) != 0)
			return 2;
		pthread_join(t, &r);
		s += (long)r;
	}
	printf("threads %ld sum %ld\n", n, s);
	return 0;
}

static void *deep_thread(void *arg)
{
	size_t n = (size_t)arg;
	volatile char *p = __builtin_alloca(n);
	for (size_t i = 0; i < n; i += 256)
		p[i] = (char)i;
	return (void *)(long)p[n / 2];
}

static int mode_stack(void)
{
	pthread_attr_t a;
	size_t size;
	pthread_t t;
	int rc;
	if (pthread_getattr_default_np(&a) != 0 || pthread_attr_getstacksize(&a, &size) != 0)
		return 2;
	pthread_attr_destroy(&a);
	if ((rc = pthread_create(&t, NULL, deep_thread, (void *)(size - 32 * 1024))) != 0) {
		printf("pthread_create: %s\n", strerror(rc));
		return 3;
	}
	pthread_join(t, NULL);
	printf("stack %zu KiB used %zu KiB\n", size / 1024, size / 1024 - 32);
	return 0;
}

static void on_signal(int sig)
{
	(void)sig;
}

static const char *kind(void (*h)(int))
{
	return h == SIG_DFL ? "dfl" : h == SIG_IGN ? "ign" : h == on_signal ? "mine" : "OTHER";
}

static void print_dispositions(void)
{
	for (int sig = 1; sig < NSIG; sig++) {
		struct sigaction sa;
		unsigned long mask = 0;
		if (sigaction(sig, NULL, &sa) != 0)
			continue;
		for (int m = 1; m < 64; m++)
			if (sigismember(&sa.sa_mask, m) == 1)
				mask |= 1ul << (m - 1);
		printf("%d:%s:%x:%lx:%s ", sig, kind(sa.sa_handler), (unsigned)sa.sa_flags, mask,
		       sa.sa_restorer ? "r" : "-");
	}
	printf("\n");
}

static int mode_dispositions(void)
{
	struct sigaction sa, old;
	print_dispositions();
	printf("signal(INT, mine) was %s\n", kind(signal(SIGINT, on_signal)));
	printf("signal(INT, dfl) was %s\n", kind(signal(SIGINT, SIG_DFL)));
	printf("signal(TERM, ign) was %s\n", kind(signal(SIGTERM, SIG_IGN)));
	printf("signal(TERM, dfl) was %s\n", kind(signal(SIGTERM, SIG_DFL)));
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = SIG_DFL;
	sa.sa_flags = SA_RESETHAND | SA_NODEFER;
	sigaddset(&sa.sa_mask, SIGUSR2);
	sigaction(SIGSEGV, &sa, &old);
	printf("sigaction(SEGV, dfl) was %s:%x\n", kind(old.sa_handler), (unsigned)old.sa_flags);
	print_dispositions();
	return 0;
}

static volatile sig_atomic_t interrupted;

static void on_interrupt(int sig)
{
	interrupted = sig;
}

static int mode_interrupt(const char *how)
{
	long s = 0;
	if (!strcmp(how, "handle"))
		signal(SIGINT, on_interrupt);
	printf("ready\n");
	fflush(stdout);
	while (!interrupted) {
		if (!strcmp(how, "malloc")) {
			void *p[64];
			for (int i = 0; i < 64; i++)
				if ((p[i] = malloc(16 + (size_t)i * 200)))
					((char *)p[i])[0] = (char)i;
			for (int i = 0; i < 64; i++)
				free(p[i]);
		} else {
			s += work(10000, 2);
		}
	}
	printf("got %d\n", (int)interrupted);
	return s == 42 ? 4 : 3;
}

static int mode_fork(const char *self, int exec)
{
	int status;
	pid_t pid;
	printf("parent %ld\n", work(50000, 4));
	fflush(stdout);
	if ((pid = fork()) == 0) {
		if (exec) {
			execl(self, self, "child", (char *)NULL);
			_exit(127);
		}
		printf("forked %ld\n", work(20000, 4));
		fflush(stdout);
		_exit(0);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		return 2;
	printf("child ended %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	return 0;
}

static int mode_orphan(const char *self)
{
	printf("parent %ld\n", work(50000, 4));
	fflush(stdout);
	if (fork() == 0) {
		execl(self, self, "late-child", (char *)NULL);
		_exit(127);
	}
	return 0;
}

static int mode_system(const char *self)
{
	char cmd[4096];
	int status;
	printf("parent %ld\n", work(50000, 4));
	fflush(stdout);
	snprintf(cmd, sizeof cmd, "%s child; true", self);
	status = system(cmd);
	printf("system %d\n", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	return 0;
}

static int mode_dlopen(const char *so)
{
	void *h = dlopen(so, RTLD_NOW);
	long (*fn)(long);
	if (!h) {
		printf("dlopen: %s\n", dlerror());
		return 1;
	}
	*(void **)&fn = dlsym(h, "plugin_work");
	if (!fn) {
		printf("dlsym: %s\n", dlerror());
		return 2;
	}
	printf("main %ld plugin %ld\n", work(20000, 2), fn(20000));
	return 0;
}

/* ---------------------------------------------------------------- stress */

#define SLOTS 64
static volatile long handler_refs[64];
static atomic_long alarms, usr1s;
static atomic_int stop_sender;

static void on_alarm(int sig)
{
	(void)sig;
	for (int i = 0; i < 64; i += 4)
		handler_refs[i] += i;
	atomic_fetch_add(&alarms, 1);
}

static void on_usr1(int sig)
{
	(void)sig;
	for (int i = 1; i < 64; i += 4)
		handler_refs[i] ^= i;
	atomic_fetch_add(&usr1s, 1);
}

static void *stress_thread(void *arg)
{
	long seed = (long)arg, n = 500 + seed % 1500, s = 0;
	long *a = malloc((size_t)n * sizeof *a);
	if (!a)
		return NULL;
	for (long i = 0; i < n; i++)
		a[i] = seed * 31 + i;
	for (int k = 0; k < 6; k++)
		for (long i = 0; i < n; i++)
			s += a[(i * 7 + k) % n] += k;
	free(a);
	return (void *)s;
}

static void *sender(void *arg)
{
	struct timespec ts = {0, 300000};
	(void)arg;
	while (!atomic_load(&stop_sender)) {
		kill(getpid(), SIGUSR1);
		nanosleep(&ts, NULL);
	}
	return NULL;
}

static int mode_stress(long generations)
{
	struct sigaction sa;
	struct itimerval on = {{0, 200}, {0, 200}}, off = {{0, 0}, {0, 0}};
	pthread_t slot[SLOTS], snd;
	long sum = 0;
	memset(&sa, 0, sizeof sa);
	sa.sa_flags = SA_RESTART;
	sa.sa_handler = on_alarm;
	sigaction(SIGALRM, &sa, NULL);
	sa.sa_handler = on_usr1;
	sigaction(SIGUSR1, &sa, NULL);
	setitimer(ITIMER_REAL, &on, NULL);
	if (pthread_create(&snd, NULL, sender, NULL) != 0)
		return 2;
	for (long g = 0; g <= generations; g++)
		for (int i = 0; i < SLOTS; i++) {
			void *r;
			if (g > 0) {
				pthread_join(slot[i], &r);
				sum += (long)r;
			}
			if (g < generations && pthread_create(&slot[i], NULL, stress_thread,
			                                      (void *)(g * SLOTS + i)) != 0)
				return 3;
		}
	atomic_store(&stop_sender, 1);
	pthread_join(snd, NULL);
	setitimer(ITIMER_REAL, &off, NULL);
	printf("stress %ld threads sum %ld alarms %s usr1 %s\n", generations * SLOTS, sum,
	       atomic_load(&alarms) > 0 ? "yes" : "no", atomic_load(&usr1s) > 0 ? "yes" : "no");
	return 0;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";
	const char *arg = argc > 2 ? argv[2] : "";
	if (!strcmp(mode, "setuid")) {
		printf("uid %d euid %d sum %ld\n", (int)getuid(), (int)geteuid(), work(20000, 4));
		return 0;
	}
	if (!strcmp(mode, "daemon") && argc > 2)
		return mode_daemon(arg, argc > 3 ? argv[3] : NULL);
	if (!strcmp(mode, "closed-stderr") && argc > 3)
		return mode_closed_stderr(arg, argv[3]);
	if (!strcmp(mode, "threads") && argc > 2)
		return mode_threads(atol(arg));
	if (!strcmp(mode, "stack"))
		return mode_stack();
	if (!strcmp(mode, "dispositions"))
		return mode_dispositions();
	if (!strcmp(mode, "interrupt"))
		return mode_interrupt(arg);
	if (!strcmp(mode, "fork") || !strcmp(mode, "exec"))
		return mode_fork(argv[0], !strcmp(mode, "exec"));
	if (!strcmp(mode, "orphan"))
		return mode_orphan(argv[0]);
	if (!strcmp(mode, "system"))
		return mode_system(argv[0]);
	if (!strcmp(mode, "dlopen") && argc > 2)
		return mode_dlopen(arg);
	if (!strcmp(mode, "child") || !strcmp(mode, "late-child")) {
		if (!strcmp(mode, "late-child"))
			usleep(300000);
		printf("%s %ld\n", mode, work(20000, 4));
		return 0;
	}
	if (!strcmp(mode, "stress") && argc > 2)
		return mode_stress(atol(arg));
	fprintf(stderr, "hostile: unknown mode '%s'\n", mode);
	return 64;
}

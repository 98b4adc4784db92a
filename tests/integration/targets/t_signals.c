/* Step-clock target: signals behave exactly as natively (see test_monitor.c). */
#include <signal.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <unistd.h>

static char data[8192] __attribute__((aligned(4096)));
static volatile sig_atomic_t got_usr1, got_alrm, got_alt;
static char *trap_page;
static sigjmp_buf jb;
static char altstack[65536] __attribute__((aligned(4096)));

static void on_segv(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
	if ((char *)si->si_addr >= trap_page && (char *)si->si_addr < trap_page + 4096) {
		mprotect(trap_page, 4096, PROT_READ | PROT_WRITE); /* recover and retry */
		return;
	}
	siglongjmp(jb, 1);
}

static void on_usr1(int sig)
{
	(void)sig;
	got_usr1++;
	data[100]++; /* touch the data page from a handler */
}

static void on_alrm(int sig)
{
	(void)sig;
	got_alrm++;
}

static void on_alt(int sig)
{
	char local[64];
	(void)sig;
	memset(local, 1, sizeof local);
	got_alt = (local[5] == 1) &&
	          ((char *)&local >= altstack && (char *)&local < altstack + sizeof altstack);
}

int main(void)
{
	struct sigaction sa;
	int fds[2];
	char rd[64];
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = on_segv;
	sa.sa_flags = SA_SIGINFO | SA_NODEFER;
	sigaction(SIGSEGV, &sa, NULL);
	signal(SIGUSR1, on_usr1);
	signal(SIGALRM, on_alrm);

	/* 1. its own SIGSEGV, on purpose, recovered. */
	trap_page = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	trap_page[10] = 42;
	printf("segv recovered %d\n", trap_page[10]);
	if (!sigsetjmp(jb, 1)) {
		*(volatile int *)16 = 1; /* a second one, escaped with siglongjmp */
		printf("not reached\n");
	} else {
		printf("segv escaped\n");
	}

	/* 2. read()/write() on buffers in (likely watched) data pages. */
	for (int i = 0; i < 64; i++)
		data[i * 64] = (char)i;
	if (pipe(fds) == 0) {
		long w = write(fds[1], data, 4096);
		long r = read(fds[0], data + 4096, 4096);
		printf("pipe %ld %ld %d\n", w, r, data[4096 + 63 * 64]);
	}
	memcpy(rd, data + 64, sizeof rd);
	printf("data %d\n", rd[0]);

	/* 3. raise(SIGUSR1). */
	raise(SIGUSR1);
	raise(SIGUSR1);
	printf("usr1 %d\n", (int)got_usr1);

	/* 4. a handler on sigaltstack. */
	stack_t ss = {.ss_sp = altstack, .ss_size = sizeof altstack};
	sigaltstack(&ss, NULL);
	sa.sa_handler = on_alt;
	sa.sa_flags = SA_ONSTACK;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR2, &sa, NULL);
	raise(SIGUSR2);
	printf("altstack %d\n", (int)got_alt);

	/* 5. SIGALRM from a timer, interrupting a blocking call. */
	struct itimerval it = {{0, 0}, {0, 20000}};
	setitimer(ITIMER_REAL, &it, NULL);
	while (!got_alrm)
		pause();
	printf("alarm %d\n", (int)got_alrm);
	fflush(stdout);
	return 7;
}

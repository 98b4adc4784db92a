/*
 * Debug-register engine target (test_debugreg.c): word-sized reuse on a
 * few lines, with what a breakpoint must not change: its own SIGTRAP
 * handler (int3 and tgkill), its own handler of SIGRTMAX (the signal the
 * engine routes breakpoints as), a stretch with every signal but SIGTRAP
 * blocked (the engine reads its counters there), a
 * SIGSEGV it recovers from, and (argv[1] = "threads") threads touching the
 * same words. argv[2] = rounds. Prints its counts; exits 3.
 */
#include "tiny.h"

#define NW 64
static volatile uint64_t words[NW] __attribute__((aligned(64)));
static volatile unsigned long traps, rts, segvs;
static char ro_page[4096] __attribute__((aligned(4096)));
static char stacks[2][65536] __attribute__((aligned(16)));
static int ctid[2];

static void on_trap(int sig, void *si, void *uc)
{
	(void)sig, (void)si, (void)uc;
	traps++;
	words[3]++;
}

static void on_rt(int sig, void *si, void *uc)
{
	(void)sig, (void)si, (void)uc;
	rts++;
	words[5] += 2;
}

static void on_segv(int sig, void *si, void *uc)
{
	(void)sig, (void)si, (void)uc;
	segvs++;
	t_mprotect(ro_page, 4096, PROT_READ | PROT_WRITE); /* the write is retried */
}

/* Word reuse at several distances: words[i] += words[(i * 7 + r) % NW]. */
static void sweep(unsigned r)
{
	for (unsigned i = 0; i < NW; i += 1 + (i & 1))
		words[i] += words[(i * 7 + r) % NW];
}

/* Reads main's words (another thread's breakpoints must not see them), writes its own. */
static volatile uint64_t own[2][NW];
static void worker(void *arg)
{
	unsigned long id = (unsigned long)arg;
	for (unsigned r = 0; r < 6; r++) {
		for (unsigned i = 0; i < NW; i++)
			own[id][i] += words[(i * 7 + r) % NW];
		t_yield();
	}
}

int main(int argc, char **argv)
{
	int threads = argc > 1 && argv[1][0] == 't';
	unsigned long n = t_arg(argc, argv, 2, 8);
	uint64_t sum = 0;
	/* SA_NODEFER: the step clock cannot step a handler with SIGTRAP blocked
	 * (docs/architecture.md) */
	t_sigaction(SIGTRAP, on_trap, SA_SIGINFO | SA_NODEFER, 0);
	t_sigaction(64, on_rt, SA_SIGINFO, 0);
	t_sigaction(SIGSEGV, on_segv, SA_SIGINFO, 0);
	t_mprotect(ro_page, 4096, PROT_READ);
	if (threads)
		for (unsigned long i = 0; i < 2; i++)
			t_thread(worker, (void *)i, stacks[i] + sizeof stacks[i], &ctid[i]);
	for (unsigned long k = 0; k < n; k++) {
		sweep((unsigned)k);
		__asm__ volatile("int3");
		t_raise(SIGTRAP);
		t_raise(64);
		if (k % 3 == 0) {
			/* Not SIGTRAP: the step clock cannot step with it blocked
			 * (docs/architecture.md). */
			uint64_t old = t_sigmask(SIG_BLOCK, ~T_SIG(SIGTRAP));
			sweep((unsigned)k + 1);
			t_sigmask(SIG_SETMASK, old);
		}
		if (k == 1) {
			ro_page[8] = 1; /* SIGSEGV, recovered */
			t_mprotect(ro_page, 4096, PROT_READ);
		}
	}
	if (threads)
		for (int i = 0; i < 2; i++)
			t_join(&ctid[i]);
	for (unsigned i = 0; i < NW; i++)
		sum = sum * 31 + words[i];
	t_kv("sum", (unsigned long)sum);
	t_kv("traps", traps);
	t_kv("rts", rts);
	t_kv("segvs", segvs);
	t_flush();
	return 3;
}

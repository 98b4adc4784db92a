/*
 * Debug-register engine target (test_debugreg.c): word-sized reuse on a
 * few lines, with what a breakpoint must not change: its own SIGTRAP
 * handler (int3 and tgkill), its own handler of SIGRTMAX (the signal the
 * engine routes breakpoints as), a stretch with every signal but SIGTRAP
 * blocked (the engine reads its counters there), a
 * SIGSEGV it recovers from, and (argv[1] = "threads") threads touching the
 * same words. argv[1] = "masked": stores whose next decoded touch is an
 * AVX-512 masked store whose mask leaves them out (where the CPU has
 * AVX-512BW; plain stores elsewhere). argv[2] = rounds. Prints its counts;
 * exits 3.
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

/* AVX-512BW (CPUID.7.0:EBX[30]) with the opmask and zmm state enabled by the OS (XCR0 bits 5-7). */
static int has_avx512bw(void)
{
	unsigned a, b, c, d, lo, hi;
	__asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(1), "c"(0));
	if (!(c & (1u << 27))) /* OSXSAVE: xgetbv works */
		return 0;
	__asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
	if ((lo & 0xe6) != 0xe6)
		return 0;
	__asm__ volatile("cpuid" : "=a"(a), "=b"(b), "=c"(c), "=d"(d) : "a"(7), "c"(0));
	return (b >> 30) & 1;
}

/*
 * words[8..15] (one line): a plain store to word i, then a 64-byte masked
 * store over the line whose mask holds only word i+1's bytes, as glibc's
 * memset tail does (vmovdqu8 with a bzhi mask). The decoder counts the
 * masked store over the whole line (lib/decode/decode.c), so word i is
 * reused at distance 0 in the clock's stream while the CPU, and a data
 * breakpoint, never touch it there (the regression CI met).
 */
static void masked(unsigned long n, int avx512)
{
	volatile uint64_t *line = &words[8];
	for (unsigned long k = 0; k < n; k++)
		for (unsigned i = 0; i < 8; i++) {
			uint64_t mask = 0xffull << (8 * ((i + 1) & 7));
			line[i] = k * 8 + i;
			if (avx512)
				__asm__ volatile("kmovq %0, %%k1\n\t"
				                 "vpxord %%zmm0, %%zmm0, %%zmm0\n\t"
				                 "vmovdqu8 %%zmm0, (%1)%{%%k1%}"
				                 :
				                 : "r"(mask), "r"(line)
				                 : "xmm0", "memory");
			else
				line[(i + 1) & 7] = 0;
		}
}

int main(int argc, char **argv)
{
	int threads = argc > 1 && argv[1][0] == 't';
	int mask = argc > 1 && argv[1][0] == 'm';
	unsigned long n = t_arg(argc, argv, 2, 8);
	uint64_t sum = 0;
	/* SA_NODEFER: the step clock cannot step a handler with SIGTRAP blocked
	 * (docs/architecture.md) */
	t_sigaction(SIGTRAP, on_trap, SA_SIGINFO | SA_NODEFER, 0);
	t_sigaction(64, on_rt, SA_SIGINFO, 0);
	t_sigaction(SIGSEGV, on_segv, SA_SIGINFO, 0);
	t_mprotect(ro_page, 4096, PROT_READ);
	if (mask)
		masked(n, has_avx512bw());
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

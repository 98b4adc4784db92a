/*
 * A program that faults on purpose and recovers, in every way a program
 * can (issue 16, item 3): under the step clock it must print the same lines
 * and exit with the same status as natively, for every seed, period and
 * skid. Its handlers touch the same data pages the main line touches (so
 * samples watch them), and most run with SIGSEGV blocked, the state in which
 * a fault of ours used to cost the program its handler (see
 * lib/monitor/sigstate.c).
 *
 *   1. SIGSEGV handler (SIGSEGV blocked inside it) that escapes with
 *      siglongjmp, faults on the program's own PROT_NONE page and on NULL;
 *   2. a write to the program's own read-only page (which it also reads, so
 *      our protection may sit on top of its own): the handler makes it
 *      writable and returns, the write is retried;
 *   3. SIGBUS (a file mapping beyond its end) with every signal blocked in
 *      the handler, escaped with siglongjmp;
 *   4. a SIGSEGV handler on an alternate stack the main line also touches;
 *   5. SIGSEGV blocked by the main line for a while, then unblocked;
 *   6. SIGSEGV ignored for a while (a raised SIGSEGV is then discarded),
 *      then the handler installed again;
 *   7. what the program sees at the end: its handler, its mask;
 *   8. time() through the vsyscall page, into a watched line.
 *
 * argv[1]: rounds of each part (default 6). Exit status 3.
 */
#include "tiny.h"

#define PAGE 4096

static char data[4 * PAGE] __attribute__((aligned(PAGE)));
static char altstack[4 * PAGE] __attribute__((aligned(PAGE)));
static char *noaccess, *readonly, *beyond;
static t_jmpbuf jb;
static volatile unsigned long segv_jumps, segv_fixes, bus_jumps, alt_jumps, alt_on_stack;
static volatile unsigned long touched;

/* Touch a spread of lines of data (loads and stores) so samples watch its pages. */
static void touch(unsigned salt)
{
	for (unsigned i = 0; i < 4; i++) {
		unsigned k = (i * 4160u + salt * 1088u) & (sizeof data - 1);
		data[k] = (char)(data[k] + 1);
		touched +=
		    (unsigned char)data[k] + (unsigned char)data[(k + 64) & (sizeof data - 1)];
	}
}

static void on_segv_jump(int sig, void *si, void *uc)
{
	(void)si;
	(void)uc;
	segv_jumps++;
	touch(sig); /* the handler's own references, SIGSEGV blocked */
	t_siglongjmp(&jb, 1);
}

static void on_segv_fix(int sig, void *si, void *uc)
{
	char *addr = *(char **)((char *)si + 16); /* si_addr */
	(void)uc;
	touch(sig);
	if (addr >= readonly && addr < readonly + PAGE) {
		segv_fixes++;
		t_mprotect(readonly, PAGE, PROT_READ | PROT_WRITE);
		return;
	}
	t_siglongjmp(&jb, 2);
}

static void on_bus(int sig, void *si, void *uc)
{
	(void)si;
	(void)uc;
	bus_jumps++;
	touch(sig); /* every signal blocked here, SIGSEGV too */
	t_siglongjmp(&jb, 3);
}

static void on_segv_alt(int sig, void *si, void *uc)
{
	char local[64];
	(void)si;
	(void)uc;
	memset(local, 1, sizeof local);
	alt_jumps++;
	alt_on_stack += local >= altstack && local < altstack + sizeof altstack;
	touch(sig);
	t_siglongjmp(&jb, 4);
}

int main(int argc, char **argv)
{
	unsigned long rounds = t_arg(argc, argv, 1, 6), ign_raised = 0, blocked_ok = 0;
	long memfd;

	noaccess = t_mmap(0, PAGE, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	readonly = t_mmap(0, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	memfd = sys2(__NR_memfd_create, "t_segv_recover", 0);
	sys2(__NR_ftruncate, memfd, PAGE);
	beyond = t_mmap(0, 2 * PAGE, PROT_READ | PROT_WRITE, MAP_SHARED, (int)memfd, 0);

	/* 1. SIGSEGV escaped with siglongjmp: own PROT_NONE page, then NULL. */
	t_sigaction(SIGSEGV, on_segv_jump, SA_SIGINFO, 0);
	for (unsigned long i = 0; i < rounds; i++) {
		touch((unsigned)i);
		if (!t_sigsetjmp(&jb))
			noaccess[i * 64] = 1;
		if (!t_sigsetjmp(&jb))
			*(volatile int *)(8 + i) = 1;
	}
	t_kv("segv_jumps", segv_jumps);

	/* 2. The program's own read-only page: fixed by the handler, the write retried. */
	t_sigaction(SIGSEGV, on_segv_fix, SA_SIGINFO, 0);
	for (unsigned long i = 0; i < rounds; i++) {
		touched += (unsigned char)readonly[i * 64]; /* a sample may watch this line */
		t_mprotect(readonly, PAGE, PROT_READ);
		touched += (unsigned char)readonly[i * 64 + 8];
		readonly[i * 64] = (char)(i + 1); /* genuine fault: fixed, retried */
		touch((unsigned)i);
	}
	t_kv("segv_fixes", segv_fixes);
	t_kv("readonly", (unsigned char)readonly[(rounds - 1) * 64]);

	/* 3. SIGBUS beyond the end of a file mapping, every signal blocked in the handler. */
	t_sigaction(SIGBUS, on_bus, SA_SIGINFO, ~0ull);
	for (unsigned long i = 0; i < rounds; i++) {
		beyond[i * 64] = (char)i; /* inside the file */
		touch((unsigned)i);
		if (!t_sigsetjmp(&jb))
			beyond[PAGE + i * 64] = 1;
	}
	t_kv("bus_jumps", bus_jumps);

	/* 4. A SIGSEGV handler on an alternate stack the main line touches too. */
	stack_t ss = {.ss_sp = altstack, .ss_size = sizeof altstack, .ss_flags = 0};
	sys2(__NR_sigaltstack, &ss, 0);
	t_sigaction(SIGSEGV, on_segv_alt, SA_SIGINFO | SA_ONSTACK, 0);
	for (unsigned long i = 0; i < rounds; i++) {
		altstack[sizeof altstack - 64 - i * 64] = (char)i;
		altstack[sizeof altstack - PAGE - i * 64] = (char)i;
		touch((unsigned)i);
		if (!t_sigsetjmp(&jb))
			noaccess[i * 64 + 32] = 1;
	}
	t_kv("alt_jumps", alt_jumps);
	t_kv("alt_on_stack", alt_on_stack);

	/* 5. SIGSEGV blocked by the main line while it works, then a genuine fault. */
	t_sigaction(SIGSEGV, on_segv_jump, SA_SIGINFO, 0);
	for (unsigned long i = 0; i < rounds; i++) {
		t_sigmask(SIG_BLOCK, T_SIG(SIGSEGV));
		touch((unsigned)i);
		t_sigmask(SIG_UNBLOCK, T_SIG(SIGSEGV));
		if (!t_sigsetjmp(&jb))
			noaccess[i * 64] = 1;
		else
			blocked_ok++;
	}
	t_kv("blocked_then_caught", blocked_ok);

	/* 6. SIGSEGV ignored while it works: a raised SIGSEGV is discarded. */
	for (unsigned long i = 0; i < rounds; i++) {
		t_sigignore(SIGSEGV);
		touch((unsigned)i);
		t_raise(SIGSEGV);
		ign_raised++;
		t_sigaction(SIGSEGV, on_segv_jump, SA_SIGINFO, 0);
		if (!t_sigsetjmp(&jb))
			noaccess[i * 64] = 1;
	}
	t_kv("ignored_raised", ign_raised);

	/*
	 * 8. The vsyscall page's time(): the kernel emulates it and writes the
	 * caller's buffer, a watched line. Where vsyscall is off, the call
	 * faults: caught, "absent", natively and under the clock alike.
	 */
	t_sigaction(SIGSEGV, on_segv_jump, SA_SIGINFO, 0);
	unsigned long vs_ok = 0, vs_absent = 0;
	for (unsigned long i = 0; i < rounds; i++) {
		long *slot = (long *)(data + ((i * 2112u) & (sizeof data - 64)));
		touch((unsigned)i);
		*slot = 0;
		if (!t_sigsetjmp(&jb)) {
			long (*vtime)(long *) = (long (*)(long *))0xffffffffff600400ul;
			long v = vtime(slot);
			vs_ok += v > 0 && v == *slot;
		} else {
			vs_absent++;
		}
	}
	t_kv("vsyscall_ok", vs_ok);
	t_kv("vsyscall_absent", vs_absent);

	/* 7. What the program sees of its own signal state at the end. */
	t_kv("segv_jumps_total", segv_jumps - vs_absent);
	t_kv("handler_kept", t_gethandler(SIGSEGV) == (unsigned long)on_segv_jump);
	t_kv("bus_handler_kept", t_gethandler(SIGBUS) == (unsigned long)on_bus);
	t_kv("mask", t_getmask());
	t_kv("touched", touched);
	t_flush();
	return 3;
}

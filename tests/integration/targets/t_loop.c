/*
 * Step-clock target: argv[1] rounds over a 16 KiB buffer (4 pages, 256
 * lines), each round making exactly one load and one store per line, in
 * inline assembly (no other references in the loop body: a register loop).
 * argv[2] (optional) = stride in bytes (default 64). argv[3] = "cpuid":
 * each round then runs CPUID followed at once by one store (one reference
 * more per round: the step clock must not lose it to a hypervisor that
 * drops CPUID's step trap, lib/decode/decode_cpuid.c).
 */
#include <stdlib.h>
#include <unistd.h>

static char buf[16384] __attribute__((aligned(4096)));

int main(int argc, char **argv)
{
	long rounds = argc > 1 ? atol(argv[1]) : 1;
	long stride = argc > 2 ? atol(argv[2]) : 64;
	long n = (long)sizeof buf / stride;
	int cpuid = argc > 3 && argv[3][0] == 'c'; /* "cpuid"; the same loads for any argv[3] */
	for (long r = 0; r < rounds; r++) {
		char *p = buf;
		long i = n;
		__asm__ volatile("1:\n\t"
		                 "movq (%0), %%rax\n\t" /* one load */
		                 "incq %%rax\n\t"
		                 "movq %%rax, 8(%0)\n\t" /* one store, same line */
		                 "addq %2, %0\n\t"
		                 "decq %1\n\t"
		                 "jnz 1b\n\t"
		                 : "+r"(p), "+r"(i)
		                 : "r"(stride)
		                 : "rax", "memory", "cc");
		if (cpuid)
			__asm__ volatile("xorl %%eax, %%eax\n\t"
			                 "xorl %%ecx, %%ecx\n\t"
			                 "cpuid\n\t"
			                 "movl %%eax, (%0)\n\t" /* one store, right after CPUID */
			                 :
			                 : "r"(buf)
			                 : "rax", "rbx", "rcx", "rdx", "memory");
	}
	if (write(1, "loop done\n", 10) != 10)
		return 1;
	return 0;
}

/*
 * A loop whose references are known from its code (docs/architecture.md): each
 * iteration of the assembly below makes 18 data references:
 *   mov (%[s]),%rax             1 load
 *   add %rax,(%[d])             a read-modify-write: 1 load + 1 store
 *   mov %rax,8(%[d])            1 store
 *   push %rax / pop %rdx        1 store + 1 load
 *   movdqu 16(%[s]),%xmm0       1 load (16 bytes: one reference)
 *   movdqu %xmm0,32(%[d])       1 store
 *   call / ret                  1 store (the return address) + 1 load
 *   rep movsq, 4 iterations     4 x (1 load + 1 store)
 *   lea, mov $4, dec, jnz       none
 * so a run of 2N iterations makes exactly 18 N references more than a run
 * of N (the rest of the program is the same: as many digits to parse).
 */
#include <stdio.h>
#include <stdlib.h>

static long src[16] = {1, 2, 3}, dst[16], from[4] = {4, 5, 6, 7}, to[4];

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 1000;
	long count = n;
	long *s = src, *d = dst, *f = from, *t = to;
	/* Below the stack pointer lies the red zone the compiler may use: step
	 * over it before pushing. */
	__asm__ volatile("sub $128, %%rsp\n\t"
	                 "1:\n\t"
	                 "mov (%[s]), %%rax\n\t"
	                 "add %%rax, (%[d])\n\t"
	                 "mov %%rax, 8(%[d])\n\t"
	                 "push %%rax\n\t"
	                 "pop %%rdx\n\t"
	                 "movdqu 16(%[s]), %%xmm0\n\t"
	                 "movdqu %%xmm0, 32(%[d])\n\t"
	                 "call 2f\n\t"
	                 "mov %[f], %%rsi\n\t"
	                 "mov %[t], %%rdi\n\t"
	                 "mov $4, %%rcx\n\t"
	                 "cld\n\t"
	                 "rep movsq\n\t"
	                 "jmp 3f\n"
	                 "2:\n\t"
	                 "ret\n"
	                 "3:\n\t"
	                 "dec %[n]\n\t"
	                 "jnz 1b\n\t"
	                 "add $128, %%rsp\n\t"
	                 : [n] "+r"(count)
	                 : [s] "r"(s), [d] "r"(d), [f] "r"(f), [t] "r"(t)
	                 : "rax", "rcx", "rdx", "rsi", "rdi", "xmm0", "memory", "cc");
	printf("known %ld %ld %ld\n", n, dst[0], to[3]);
	return 0;
}

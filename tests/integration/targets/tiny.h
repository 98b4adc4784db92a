/*
 * A few hundred instructions of libc for the step clock's hostile targets.
 * The step clock single-steps every instruction (~85 us each on the CI
 * VMs), and a static glibc spends ~30k instructions before main; these
 * targets are built -nostdlib with this header instead, so a run of one
 * takes a few thousand steps and a test can afford hundreds of them (many
 * seeds, periods, skids). Linux x86-64 only; raw system calls.
 */
#ifndef LOMAS_TINY_H
#define LOMAS_TINY_H

#include <stddef.h>
#include <stdint.h>

#include <asm/signal.h>
#include <asm/unistd.h>
#include <linux/futex.h>
#include <linux/mman.h>
#include <linux/sched.h>

#undef sa_handler
#undef sa_sigaction

static inline long sys6(long n, long a, long b, long c, long d, long e, long f)
{
	register long r10 __asm__("r10") = d;
	register long r8 __asm__("r8") = e;
	register long r9 __asm__("r9") = f;
	long ret;
	__asm__ volatile("syscall"
	                 : "=a"(ret)
	                 : "a"(n), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
	                 : "rcx", "r11", "memory");
	return ret;
}
#define sys0(n) sys6(n, 0, 0, 0, 0, 0, 0)
#define sys1(n, a) sys6(n, (long)(a), 0, 0, 0, 0, 0)
#define sys2(n, a, b) sys6(n, (long)(a), (long)(b), 0, 0, 0, 0)
#define sys3(n, a, b, c) sys6(n, (long)(a), (long)(b), (long)(c), 0, 0, 0)
#define sys4(n, a, b, c, d) sys6(n, (long)(a), (long)(b), (long)(c), (long)(d), 0, 0)

/* The compiler may emit calls to these for copies and clears. */
void *memset(void *d, int c, size_t n);
void *memcpy(void *d, const void *s, size_t n);
__attribute__((used)) void *memset(void *d, int c, size_t n)
{
	volatile unsigned char *p = d;
	while (n--)
		*p++ = (unsigned char)c;
	return d;
}
__attribute__((used)) void *memcpy(void *d, const void *s, size_t n)
{
	volatile unsigned char *p = d;
	const unsigned char *q = s;
	while (n--)
		*p++ = *q++;
	return d;
}

static inline void t_exit(int code)
{
	for (;;)
		sys1(__NR_exit_group, code);
}

static inline long t_write(int fd, const void *buf, size_t n)
{
	return sys3(__NR_write, fd, buf, n);
}

/* Output: a line buffer written with one write(2) per t_flush(). */
static char t_out[4096];
static size_t t_outn;

static inline void t_flush(void)
{
	if (t_outn)
		t_write(1, t_out, t_outn);
	t_outn = 0;
}
static inline void t_puts(const char *s)
{
	while (*s) {
		if (t_outn == sizeof t_out)
			t_flush();
		t_out[t_outn++] = *s++;
	}
}
static inline void t_putu(unsigned long v)
{
	char b[24];
	int i = 0;
	do
		b[i++] = (char)('0' + v % 10);
	while ((v /= 10));
	while (i--) {
		char s[2] = {b[i], 0};
		t_puts(s);
	}
}
/* "key value\n" */
static inline void t_kv(const char *k, unsigned long v)
{
	t_puts(k);
	t_puts(" ");
	t_putu(v);
	t_puts("\n");
}

/* ------------------------------------------------------------- signals */

struct t_sigaction {
	void (*handler)(int, void *, void *);
	unsigned long flags;
	void (*restorer)(void);
	uint64_t mask;
};

void t_restorer(void);
__asm__(".text\n"
        ".globl t_restorer\n"
        "t_restorer:\n"
        "  mov $15, %eax\n" /* rt_sigreturn */
        "  syscall\n"
        "  hlt\n");

#define T_SIG(s) (1ull << ((s)-1))

static inline long t_sigaction(int sig, void (*h)(int, void *, void *), unsigned long flags,
                               uint64_t mask)
{
	struct t_sigaction sa = {h, flags | SA_RESTORER, t_restorer, mask};
	return sys4(__NR_rt_sigaction, sig, &sa, 0, 8);
}
static inline long t_sigignore(int sig)
{
	struct t_sigaction sa = {(void (*)(int, void *, void *))SIG_IGN, SA_RESTORER, t_restorer,
	                         0};
	return sys4(__NR_rt_sigaction, sig, &sa, 0, 8);
}
/* The handler installed for sig now (SIG_DFL = 0, SIG_IGN = 1). */
static inline unsigned long t_gethandler(int sig)
{
	struct t_sigaction old = {0};
	sys4(__NR_rt_sigaction, sig, 0, &old, 8);
	return (unsigned long)old.handler;
}
static inline uint64_t t_sigmask(int how, uint64_t set)
{
	uint64_t old = 0;
	sys4(__NR_rt_sigprocmask, how, &set, &old, 8);
	return old;
}
static inline uint64_t t_getmask(void)
{
	uint64_t old = 0;
	sys4(__NR_rt_sigprocmask, SIG_BLOCK, 0, &old, 8);
	return old;
}
static inline int t_getpid(void)
{
	return (int)sys0(__NR_getpid);
}
static inline int t_gettid(void)
{
	return (int)sys0(__NR_gettid);
}
static inline void t_raise(int sig)
{
	sys3(__NR_tgkill, t_getpid(), t_gettid(), sig);
}

/*
 * sigsetjmp/siglongjmp: callee-saved registers, stack and return address,
 * and the signal mask (always saved, as sigsetjmp(env, 1)).
 */
typedef struct t_jmpbuf {
	uint64_t rbx, rbp, r12, r13, r14, r15, rsp, rip;
	uint64_t mask;
} t_jmpbuf;

int t_setjmp_regs(t_jmpbuf *j) __attribute__((returns_twice));
void t_longjmp_regs(t_jmpbuf *j, int v) __attribute__((noreturn));
__asm__(".text\n"
        ".globl t_setjmp_regs\n"
        "t_setjmp_regs:\n"
        "  mov %rbx, 0(%rdi)\n"
        "  mov %rbp, 8(%rdi)\n"
        "  mov %r12, 16(%rdi)\n"
        "  mov %r13, 24(%rdi)\n"
        "  mov %r14, 32(%rdi)\n"
        "  mov %r15, 40(%rdi)\n"
        "  lea 8(%rsp), %rdx\n"
        "  mov %rdx, 48(%rdi)\n"
        "  mov (%rsp), %rdx\n"
        "  mov %rdx, 56(%rdi)\n"
        "  xor %eax, %eax\n"
        "  ret\n"
        ".globl t_longjmp_regs\n"
        "t_longjmp_regs:\n"
        "  mov %esi, %eax\n"
        "  mov 0(%rdi), %rbx\n"
        "  mov 8(%rdi), %rbp\n"
        "  mov 16(%rdi), %r12\n"
        "  mov 24(%rdi), %r13\n"
        "  mov 32(%rdi), %r14\n"
        "  mov 40(%rdi), %r15\n"
        "  mov 48(%rdi), %rsp\n"
        "  jmp *56(%rdi)\n");

#define t_sigsetjmp(j) ((j)->mask = t_getmask(), t_setjmp_regs(j))
static inline __attribute__((noreturn)) void t_siglongjmp(t_jmpbuf *j, int v)
{
	t_sigmask(SIG_SETMASK, j->mask);
	t_longjmp_regs(j, v ? v : 1);
}

/* ------------------------------------------------------------- memory */

static inline void *t_mmap(void *addr, size_t len, int prot, int flags, int fd, long off)
{
	return (void *)sys6(__NR_mmap, (long)addr, (long)len, prot, flags, fd, off);
}
static inline long t_mprotect(void *addr, size_t len, int prot)
{
	return sys3(__NR_mprotect, addr, len, prot);
}

/* ------------------------------------------------------------- threads */

/*
 * Start fn(arg) in a new thread on the stack ending at stack_top. *ctid is
 * the thread id until the thread exits, then 0 (CLONE_CHILD_CLEARTID wakes
 * a futex waiter on it); returns the tid or a negative errno.
 */
static inline long t_thread(void (*fn)(void *), void *arg, char *stack_top, int *ctid)
{
	unsigned long flags = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD |
	                      CLONE_SYSVSEM | CLONE_PARENT_SETTID | CLONE_CHILD_CLEARTID;
	void **sp = (void **)((uintptr_t)stack_top & ~(uintptr_t)15);
	register long r10 __asm__("r10") = (long)ctid;
	register long r8 __asm__("r8") = 0;
	long ret;
	*--sp = arg;
	*--sp = (void *)fn;
	__asm__ volatile("syscall\n"
	                 "test %%rax, %%rax\n"
	                 "jnz 1f\n"
	                 "pop %%rax\n" /* the new thread: fn */
	                 "pop %%rdi\n" /* arg */
	                 "and $-16, %%rsp\n"
	                 "call *%%rax\n"
	                 "mov $60, %%eax\n" /* exit: this thread only */
	                 "xor %%edi, %%edi\n"
	                 "syscall\n"
	                 "hlt\n"
	                 "1:\n"
	                 : "=a"(ret)
	                 : "a"((long)__NR_clone), "D"(flags), "S"(sp), "d"(ctid), "r"(r10), "r"(r8)
	                 : "rcx", "r11", "memory");
	return ret;
}

/* Wait until the thread whose ctid this is has exited. */
static inline void t_join(int *ctid)
{
	int v;
	while ((v = __atomic_load_n(ctid, __ATOMIC_ACQUIRE)) != 0)
		sys6(__NR_futex, (long)ctid, FUTEX_WAIT, v, 0, 0, 0);
}

static inline void t_yield(void)
{
	sys0(__NR_sched_yield);
}

/* ------------------------------------------------------------- entry */

int main(int argc, char **argv);
void t_start_c(long *sp);
__attribute__((used)) void t_start_c(long *sp)
{
	t_exit(main((int)sp[0], (char **)(sp + 1)));
}
__asm__(".text\n"
        ".globl _start\n"
        "_start:\n"
        "  xor %ebp, %ebp\n"
        "  mov %rsp, %rdi\n"
        "  and $-16, %rsp\n"
        "  call t_start_c\n"
        "  hlt\n");

/* Decimal argument i, or def. */
static inline unsigned long t_arg(int argc, char **argv, int i, unsigned long def)
{
	unsigned long v = 0;
	if (i >= argc)
		return def;
	for (const char *p = argv[i]; *p >= '0' && *p <= '9'; p++)
		v = v * 10 + (unsigned long)(*p - '0');
	return v;
}

#endif /* LOMAS_TINY_H */

/*
 * An independent full reference trace of a single-threaded target, for the
 * step clock's tests: this file's own single-stepper (PTRACE_TRACEME),
 * decoding each instruction before it runs and keeping its references when
 * its step report says it retired. The target's own signals are delivered
 * as natively (a handler's entry, int3, a fault: nothing retired). The
 * decoder is its only part shared with the code under test.
 */
#ifndef LOMAS_TEST_FULL_TRACE_H
#define LOMAS_TEST_FULL_TRACE_H

#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <stdlib.h>
#include <sys/ptrace.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include "decode/decode.h"
#include "step_run.h"

typedef struct tref {
	uint64_t addr, pc;
	uint32_t size;
	uint8_t kind;
} tref;

typedef struct trace {
	tref *r;
	size_t n, cap;
} trace;

static inline void trace_push(trace *t, const decode_ref *d, uint64_t pc)
{
	if (t->n == t->cap) {
		t->cap = t->cap ? t->cap * 2 : 65536;
		t->r = realloc(t->r, t->cap * sizeof *t->r);
		assert_non_null(t->r);
	}
	t->r[t->n++] = (tref){d->addr, pc, d->size, d->kind};
}

/* Record every reference of a run of argv (stdout into a pipe, as run_step does). */
static inline void full_trace(char *const argv[], trace *t)
{
	decoder *d;
	int p[2], status, sig = 0;
	pid_t pid;
	char sink[8192];
	assert_int_equal(decoder_new(&d), LOMAS_OK);
	assert_int_equal(pipe(p), 0);
	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		dup2(p[1], 1);
		close(p[0]);
		close(p[1]);
		ptrace(PTRACE_TRACEME, 0, NULL, NULL);
		kill(getpid(), SIGSTOP);
		execv(argv[0], argv);
		_exit(127);
	}
	close(p[1]);
	assert_int_equal(waitpid(pid, &status, 0), pid); /* SIGSTOP */
	ptrace(PTRACE_CONT, pid, NULL, NULL);
	assert_int_equal(waitpid(pid, &status, 0), pid); /* SIGTRAP after exec */
	assert_true(WIFSTOPPED(status) && WSTOPSIG(status) == SIGTRAP);
	for (;;) {
		struct user_regs_struct regs;
		decode_insn in;
		siginfo_t si;
		assert_int_equal(ptrace(PTRACE_GETREGS, pid, NULL, &regs), 0);
		if (decoder_at(d, pid, &regs, &in) != LOMAS_OK)
			in.nrefs = 0;
		if (decode_has_opmask(&in)) { /* AVX-512 masked moves: what the mask selects */
			uint64_t k[8];
			assert_int_equal(decode_read_opmask(pid, k), LOMAS_OK);
			decode_apply_opmask(&in, k);
		}
		if (!sig && decode_is_cpuid(&in)) {
			/* Run here, not stepped: a hypervisor may lose CPUID's step
			 * trap (decode_cpuid.c). */
			assert_int_equal(decode_run_cpuid(pid, &in), LOMAS_OK);
			continue;
		}
		ptrace(PTRACE_SINGLESTEP, pid, NULL, (void *)(long)sig);
		sig = 0;
		assert_int_equal(waitpid(pid, &status, 0), pid);
		if (WIFEXITED(status) || WIFSIGNALED(status))
			break;
		assert_int_equal(ptrace(PTRACE_GETSIGINFO, pid, NULL, &si), 0);
		/* A step: TRAP_TRACE, or TRAP_BRKPT over a system call (user_single_step_report).
		 */
		if (WSTOPSIG(status) == SIGTRAP &&
		    (si.si_code == TRAP_TRACE || si.si_code == TRAP_BRKPT)) {
			for (unsigned j = 0; j < in.nrefs; j++)
				trace_push(t, &in.refs[j], in.pc);
		} else if (!(WSTOPSIG(status) == SIGTRAP && si.si_code == SIGTRAP)) {
			sig = WSTOPSIG(status); /* the program's own: delivered */
		}
	}
	read_all(p[0], sink, sizeof sink);
	close(p[0]);
	decoder_free(d);
}

/*
 * The exact forward reuse distance of reference i: the next reference
 * overlapping the aligned block of `block` bytes holding its address (64: the
 * line; 8: the word a debug register watches). UINT64_MAX if none.
 */
static inline uint64_t exact_block_distance(const trace *t, size_t i, uint64_t block)
{
	uint64_t lo = t->r[i].addr & ~(block - 1), hi = lo + block;
	for (size_t j = i + 1; j < t->n; j++) {
		uint64_t a = t->r[j].addr, b = a + (t->r[j].size ? t->r[j].size : 1);
		if (a < hi && b > lo)
			return j - i - 1;
	}
	return UINT64_MAX;
}

#endif /* LOMAS_TEST_FULL_TRACE_H */

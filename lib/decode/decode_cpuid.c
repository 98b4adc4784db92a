/*
 * CPUID run for a stopped thread instead of single-stepping it. Under some
 * hypervisors (this project's machines: PVM) CPUID is emulated outside the
 * guest and the single-step trap it should raise is lost: the trap comes
 * after the NEXT instruction, so a clock that counts the references of each
 * step's decoded instruction silently drops that instruction's (t_loop's
 * glibc start-up: init_cpu_features' xsave-size loop, `cpuid; mov
 * %eax,(%r9)`, lost one store per iteration; whether a fault exposed it
 * differed between two runs, so two clocks disagreed). The tracer runs
 * CPUID with the thread's eax/ecx and writes the result back: the same
 * instruction on the same machine (the thread could have run on any CPU,
 * so the per-CPU fields are as good as its own).
 */
#include <cpuid.h>
#include <errno.h>
#include <string.h>
#include <sys/ptrace.h>

#include "decode.h"

bool decode_is_cpuid(const decode_insn *in)
{
	return in->nrefs == 0 && !strcmp(in->text, "cpuid");
}

lomas_status decode_run_cpuid(pid_t tid, const decode_insn *in)
{
	struct user_regs_struct r;
	unsigned a, b, c, d;
	if (ptrace(PTRACE_GETREGS, tid, NULL, &r) < 0)
		return error_set(LOMAS_ETARGET, "PTRACE_GETREGS(%d): %s", (int)tid,
		                 strerror(errno));
	if (r.rip != in->pc)
		return error_set(LOMAS_ESTATE, "thread %d is not at its cpuid", (int)tid);
	__cpuid_count((unsigned)r.rax, (unsigned)r.rcx, a, b, c, d);
	r.rax = a;
	r.rbx = b;
	r.rcx = c;
	r.rdx = d;
	r.rip += in->len;
	if (ptrace(PTRACE_SETREGS, tid, NULL, &r) < 0)
		return error_set(LOMAS_ETARGET, "PTRACE_SETREGS(%d): %s", (int)tid,
		                 strerror(errno));
	return LOMAS_OK;
}

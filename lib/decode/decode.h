/*
 * lib/decode: x86-64 instruction decoding (Capstone) and the data references
 * an instruction makes, with effective addresses computed from registers.
 */
#ifndef LOMAS_DECODE_H
#define LOMAS_DECODE_H

#include <stdbool.h>
#include <signal.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/user.h>

#include "core/core.h"

/* SIGTRAP's si_code after a single step and after a breakpoint, for every
 * piece of code that steps a target (step and pmu clocks, the pmu replay, the
 * tests' ground-truth tracers): glibc defines them only for XOPEN/POSIX 2008. */
#ifndef TRAP_BRKPT
#define TRAP_BRKPT 1
#endif
#ifndef TRAP_TRACE
#define TRAP_TRACE 2
#endif

#define DECODE_MAX_REFS 4
#define DECODE_MAX_LEN 15

typedef struct decode_ref {
	uint64_t addr; /* effective address of the first byte */
	uint32_t size; /* bytes accessed (0 when unknown, e.g. xsave) */
	uint8_t kind;  /* LOMAS_REF_LOAD / LOMAS_REF_STORE */
	/* An AVX-512 masked move not yet narrowed (decode_apply_opmask): its
	 * mask register k1-k7, element size, and whether the selected elements
	 * are packed (compress/expand). mask 0: size is what is touched. */
	uint8_t mask;
	uint8_t elem;
	bool compress;
} decode_ref;

typedef struct decode_insn {
	uint64_t pc;
	uint8_t len;   /* instruction length in bytes */
	uint8_t nrefs; /* data references, in program order (a RMW is a load then a store) */
	decode_ref refs[DECODE_MAX_REFS];
	bool rep;      /* rep/repe/repne-prefixed string instruction: refs are ONE iteration's */
	bool syscall;  /* syscall instruction */
	bool branch;   /* control transfer (jmp, jcc, call, ret, ...) */
	char text[64]; /* "mov rax, qword ptr [rbx + 8]" for messages and tests */
} decode_insn;

typedef struct decoder decoder;

lomas_status decoder_new(decoder **out);
void decoder_free(decoder *d);

/*
 * Pure: decode the instruction in code[0..len) located at pc, computing its
 * data references with regs (general registers, rip = pc, fs_base/gs_base
 * for segment overrides). For a rep-prefixed string instruction with
 * rcx == 0 there are no references. LOMAS_EFORMAT if the bytes are not a
 * valid instruction.
 */
lomas_status decode_bytes(decoder *d, const uint8_t *code, size_t len, uint64_t pc,
                          const struct user_regs_struct *regs, decode_insn *out);

/*
 * The same for the instruction at regs->rip in process pid, reading its bytes
 * with process_vm_readv (falling back to PTRACE_PEEKTEXT); decoded bytes are
 * cached by address until decoder_invalidate() covers them.
 */
lomas_status decoder_at(decoder *d, pid_t pid, const struct user_regs_struct *regs,
                        decode_insn *out);

/*
 * AVX-512 masks (decode_mask.c): does in have a masked reference whose size
 * depends on an opmask register; narrow such references to the elements
 * k[] selects (dropping those that select none); read k0-k7 of a stopped
 * thread (PTRACE_GETREGSET NT_X86_XSTATE; LOMAS_ENOTSUP without AVX-512).
 * Without the registers, a masked reference keeps its full size.
 */
bool decode_has_opmask(const decode_insn *in);
void decode_apply_opmask(decode_insn *in, const uint64_t k[8]);
lomas_status decode_read_opmask(pid_t tid, uint64_t k[8]);

/*
 * CPUID is not single-stepped where the step trap after it is lost
 * (decode_cpuid.c): decode_run_cpuid runs it for the stopped thread tid,
 * at in->pc, and moves it past (its registers as CPUID leaves them).
 */
bool decode_is_cpuid(const decode_insn *in);
lomas_status decode_run_cpuid(pid_t tid, const decode_insn *in);

/* Forget cached code in [start, end) (the target wrote or remapped it). */
void decoder_invalidate(decoder *d, uint64_t start, uint64_t end);

/* Added by the decode helper (additive): cache counters for tests and benches. */
typedef struct decode_stats {
	uint64_t hits;      /* decoder_at calls answered from the cache */
	uint64_t misses;    /* decoder_at calls that read and decoded the bytes */
	uint64_t evictions; /* cached entries replaced by another address */
	uint64_t cached;    /* entries held now (at most DECODE_CACHE_SLOTS) */
} decode_stats;

#define DECODE_CACHE_SLOTS 8192

void decoder_stats(const decoder *d, decode_stats *out);

/*
 * Test hook: read code with PTRACE_PEEKDATA only (the fallback used when
 * process_vm_readv fails with EPERM/ENOSYS), so tests can exercise it.
 */
void decoder_set_peek_only(decoder *d, bool on);

/*
 * How decoder_at reaches the target's memory: by default process_vm_readv(2)
 * and ptrace(PTRACE_PEEKDATA). The monitor routes them through its system
 * call seam (lib/monitor/sys.c) so tests can make them fail; a NULL member
 * keeps the default.
 */
struct iovec;
typedef struct decode_mem_ops {
	ssize_t (*vm_readv)(pid_t pid, const struct iovec *local, unsigned long nlocal,
	                    const struct iovec *remote, unsigned long nremote, unsigned long flags);
	long (*peek)(pid_t pid, uint64_t addr); /* PTRACE_PEEKDATA: errno set on failure */
} decode_mem_ops;

void decoder_set_mem_ops(decoder *d, const decode_mem_ops *ops);

#endif /* LOMAS_DECODE_H */

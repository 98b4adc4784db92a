/*
 * lib/decode private header: the register-independent form of a decoded
 * instruction (a "template") shared by decode.c (Capstone -> template,
 * template + registers -> decode_insn) and decode_at.c (reading target code,
 * the per-address cache). Not used outside lib/decode.
 */
#ifndef LOMAS_DECODE_IMPL_H
#define LOMAS_DECODE_IMPL_H

#include <capstone/capstone.h>

#include "decode.h"

/* Register slots an address expression may name (indices into reg_value()). */
enum {
	GPR_RAX = 0,
	GPR_RCX,
	GPR_RDX,
	GPR_RBX,
	GPR_RSP,
	GPR_RBP,
	GPR_RSI,
	GPR_RDI,
	GPR_R8,
	GPR_R9,
	GPR_R10,
	GPR_R11,
	GPR_R12,
	GPR_R13,
	GPR_R14,
	GPR_R15,
	GPR_RIP, /* the address of the next instruction (pc + len) */
	GPR_AL,  /* low byte of rax, zero-extended (xlat) */
	GPR_NONE = 0xff,
};

enum { SEG_NONE = 0, SEG_FS, SEG_GS };

/* One data reference: address = seg + trunc(base + index*scale + disp + bias). */
typedef struct tmpl_ref {
	int64_t disp;
	int32_t rsp_bias; /* added to rsp where it is base/index (pop [rsp+x]) */
	uint32_t size;    /* bytes; 0 when unknown */
	uint8_t kind;     /* LOMAS_REF_LOAD / LOMAS_REF_STORE */
	uint8_t seg;      /* SEG_* */
	uint8_t base;     /* GPR_* */
	uint8_t index;    /* GPR_* */
	uint8_t scale;
	uint8_t addr32; /* 0x67 prefix: the effective address wraps at 32 bits */
	uint8_t bitreg; /* bt*: GPR_* holding a signed bit offset, else GPR_NONE */
	uint8_t mask;   /* AVX-512 masked move: k1-k7 (decode_mask.c), else 0 */
	uint8_t elem;   /* its element size */
	bool compress;  /* compress/expand: the selected elements packed */
} tmpl_ref;

typedef struct tmpl {
	uint64_t pc;
	uint8_t len;
	uint8_t nrefs;
	bool rep;        /* rep-prefixed string instruction */
	bool rep_addr32; /* its count register is ecx, not rcx */
	bool syscall;
	bool branch;
	tmpl_ref refs[DECODE_MAX_REFS];
	char text[64];
} tmpl;

struct decoder {
	csh cs;
	cs_insn *ci; /* scratch instruction for cs_disasm_iter */
	struct cache_slot *cache;
	decode_stats stats;
	bool peek_only;
	decode_mem_ops mem;
};

/* Decode code[0..len) at pc into t (no registers needed). */
lomas_status tmpl_build(decoder *d, const uint8_t *code, size_t len, uint64_t pc, tmpl *t);
/* Compute the references of t with regs into out. */
void tmpl_eval(const tmpl *t, const struct user_regs_struct *regs, decode_insn *out);

/* decode_mask.c: mark the masked moves' memory references with their mask. */
void tmpl_mark_opmask(tmpl *t, const cs_insn *ci);

/* decode_class.c: instruction classes (the rules are in decode.c's header comment). */
/* Capstone register -> GPR_* slot (any width of the same register); GPR_NONE if not a GPR. */
uint8_t gpr_of(x86_reg r);
/* Explicit memory operands of instruction id (mnemonic mn) are not references. */
bool is_noref(unsigned id, const char *mn);
/* Read-modify-write when its destination is memory: a load then a store. */
bool is_rmw(unsigned id);
/* bt/bts/btr/btc: a register operand is a signed bit offset from the memory operand. */
bool is_bit_test(unsigned id);
/* One-operand instructions that write their memory operand. */
bool is_unary_store(unsigned id, const char *mn);
/* Bytes accessed by an explicit memory operand (Capstone's size, corrected). */
uint32_t mem_size(unsigned id, const cs_x86_op *op);
/* Gathers and scatters (vector-indexed memory operand). */
bool is_vsib(const char *mn);

#endif /* LOMAS_DECODE_IMPL_H */

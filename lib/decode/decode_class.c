/*
 * Instruction classes for lib/decode (see the rules in decode.c's header):
 * which explicit memory operands are references, of what kind and size.
 */
#include <string.h>

#include "decode_impl.h"

/* Capstone register -> GPR_* slot (any width of the same register). */
uint8_t gpr_of(x86_reg r)
{
	switch (r) {
	case X86_REG_RAX:
	case X86_REG_EAX:
	case X86_REG_AX: return GPR_RAX;
	case X86_REG_RCX:
	case X86_REG_ECX:
	case X86_REG_CX: return GPR_RCX;
	case X86_REG_RDX:
	case X86_REG_EDX:
	case X86_REG_DX: return GPR_RDX;
	case X86_REG_RBX:
	case X86_REG_EBX:
	case X86_REG_BX: return GPR_RBX;
	case X86_REG_RSP:
	case X86_REG_ESP:
	case X86_REG_SP: return GPR_RSP;
	case X86_REG_RBP:
	case X86_REG_EBP:
	case X86_REG_BP: return GPR_RBP;
	case X86_REG_RSI:
	case X86_REG_ESI:
	case X86_REG_SI: return GPR_RSI;
	case X86_REG_RDI:
	case X86_REG_EDI:
	case X86_REG_DI: return GPR_RDI;
	case X86_REG_R8:
	case X86_REG_R8D:
	case X86_REG_R8W: return GPR_R8;
	case X86_REG_R9:
	case X86_REG_R9D:
	case X86_REG_R9W: return GPR_R9;
	case X86_REG_R10:
	case X86_REG_R10D:
	case X86_REG_R10W: return GPR_R10;
	case X86_REG_R11:
	case X86_REG_R11D:
	case X86_REG_R11W: return GPR_R11;
	case X86_REG_R12:
	case X86_REG_R12D:
	case X86_REG_R12W: return GPR_R12;
	case X86_REG_R13:
	case X86_REG_R13D:
	case X86_REG_R13W: return GPR_R13;
	case X86_REG_R14:
	case X86_REG_R14D:
	case X86_REG_R14W: return GPR_R14;
	case X86_REG_R15:
	case X86_REG_R15D:
	case X86_REG_R15W: return GPR_R15;
	case X86_REG_RIP:
	case X86_REG_EIP: return GPR_RIP;
	default: return GPR_NONE;
	}
}

static bool starts_with(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* Explicit memory operands of these are not data references. */
bool is_noref(unsigned id, const char *mn)
{
	switch (id) {
	case X86_INS_LEA:
	case X86_INS_NOP:
	case X86_INS_PREFETCH:
	case X86_INS_PREFETCHNTA:
	case X86_INS_PREFETCHT0:
	case X86_INS_PREFETCHT1:
	case X86_INS_PREFETCHT2:
	case X86_INS_PREFETCHW:
	case X86_INS_CLFLUSH:
	case X86_INS_CLFLUSHOPT:
	case X86_INS_CLWB:
	case X86_INS_BOUND:
	case X86_INS_INVLPG:
	case X86_INS_INVLPGA:
	case X86_INS_UD0:
	case X86_INS_UD2B: return true;
	default:
		return starts_with(mn, "prefetch") || starts_with(mn, "vgatherpf") ||
		       starts_with(mn, "vscatterpf") || starts_with(mn, "bnd");
	}
}

bool is_rmw(unsigned id)
{
	switch (id) {
	case X86_INS_ADD:
	case X86_INS_ADC:
	case X86_INS_SUB:
	case X86_INS_SBB:
	case X86_INS_AND:
	case X86_INS_OR:
	case X86_INS_XOR:
	case X86_INS_INC:
	case X86_INS_DEC:
	case X86_INS_NEG:
	case X86_INS_NOT:
	case X86_INS_SHL:
	case X86_INS_SAL:
	case X86_INS_SHR:
	case X86_INS_SAR:
	case X86_INS_ROL:
	case X86_INS_ROR:
	case X86_INS_RCL:
	case X86_INS_RCR:
	case X86_INS_SHLD:
	case X86_INS_SHRD:
	case X86_INS_XCHG:
	case X86_INS_XADD:
	case X86_INS_CMPXCHG:
	case X86_INS_CMPXCHG8B:
	case X86_INS_CMPXCHG16B:
	case X86_INS_BTS:
	case X86_INS_BTR:
	case X86_INS_BTC: return true;
	default: return false;
	}
}

bool is_bit_test(unsigned id)
{
	return id == X86_INS_BT || id == X86_INS_BTS || id == X86_INS_BTR || id == X86_INS_BTC;
}

/* One-operand instructions whose memory operand is written, not read. */
bool is_unary_store(unsigned id, const char *mn)
{
	switch (id) {
	case X86_INS_FST:
	case X86_INS_FSTP:
	case X86_INS_FIST:
	case X86_INS_FISTP:
	case X86_INS_FISTTP:
	case X86_INS_FBSTP:
	case X86_INS_FNSTCW:
	case X86_INS_FNSTSW:
	case X86_INS_FNSTENV:
	case X86_INS_FNSAVE:
	case X86_INS_STMXCSR:
	case X86_INS_VSTMXCSR:
	case X86_INS_FXSAVE:
	case X86_INS_FXSAVE64:
	case X86_INS_XSAVE:
	case X86_INS_XSAVE64:
	case X86_INS_XSAVEC:
	case X86_INS_XSAVEC64:
	case X86_INS_XSAVEOPT:
	case X86_INS_XSAVEOPT64:
	case X86_INS_XSAVES:
	case X86_INS_XSAVES64:
	case X86_INS_SGDT:
	case X86_INS_SIDT:
	case X86_INS_SLDT:
	case X86_INS_STR:
	case X86_INS_SMSW: return true;
	default: return starts_with(mn, "set");
	}
}

/* Size of an explicit memory operand, correcting Capstone 4.0.2 where wrong. */
uint32_t mem_size(unsigned id, const cs_x86_op *op)
{
	switch (id) {
	case X86_INS_FXSAVE:
	case X86_INS_FXSAVE64:
	case X86_INS_FXRSTOR:
	case X86_INS_FXRSTOR64: return 512;
	case X86_INS_XSAVE:
	case X86_INS_XSAVE64:
	case X86_INS_XSAVEC:
	case X86_INS_XSAVEC64:
	case X86_INS_XSAVEOPT:
	case X86_INS_XSAVEOPT64:
	case X86_INS_XSAVES:
	case X86_INS_XSAVES64:
	case X86_INS_XRSTOR:
	case X86_INS_XRSTOR64:
	case X86_INS_XRSTORS:
	case X86_INS_XRSTORS64: return 0;
	case X86_INS_FNSAVE:
	case X86_INS_FRSTOR: return 108;
	case X86_INS_FNSTENV:
	case X86_INS_FLDENV: return 28;
	case X86_INS_FNSTSW:
	case X86_INS_FNSTCW:
	case X86_INS_FLDCW:
	case X86_INS_SLDT:
	case X86_INS_STR:
	case X86_INS_SMSW: return 2;
	case X86_INS_SGDT:
	case X86_INS_SIDT:
	case X86_INS_LGDT:
	case X86_INS_LIDT: return 10;
	default: return op->size;
	}
}

bool is_vsib(const char *mn)
{
	return starts_with(mn, "vgather") || starts_with(mn, "vpgather") ||
	       starts_with(mn, "vscatter") || starts_with(mn, "vpscatter");
}

/*
 * x86-64 decoding with Capstone 4 and the data references of one instruction.
 *
 * Decoding produces a register-independent template (decode_impl.h): a list
 * of address expressions with kind and size. Evaluating a template with a
 * register set gives the references. decode_at.c caches templates by pc.
 *
 * Capstone 4.0.2's operand access flags (cs_x86_op.access) are wrong for many
 * instructions (measured: stores by movups/vmovdqu/movnti/movq/pextrd/
 * vextractf128/vmaskmovps/fst/fstp/fisttp/fnstcw/stmxcsr report READ; rol/rcl/
 * cmpxchg/cmpxchg8b/16b [mem] report READ only; test [mem], imm reports
 * READ|WRITE; frstor reports WRITE; masked AVX-512 loads report 0), so they
 * are not used. The kind of an explicit memory operand comes from our own
 * rules instead (mem_kind()):
 *   - read-modify-write instructions (add..xor, inc/dec/neg/not, shifts and
 *     rotates, shld/shrd, xchg, xadd, cmpxchg, cmpxchg8b/16b, bts/btr/btc):
 *     a load then a store of the same address;
 *   - cmp/test/bt: a load;
 *   - one-operand instructions: a store for setcc, x87 stores (fst/fstp/fist/
 *     fistp/fisttp/fbstp/fnstcw/fnstsw/fnstenv/fnsave), stmxcsr, fxsave, xsave,
 *     sgdt/sidt/sldt/str/smsw; otherwise a load (push/call/jmp [mem], mul/div,
 *     x87 loads and arithmetic, fldcw, ldmxcsr, fxrstor, xrstor, ...);
 *   - otherwise Intel operand order decides: the first operand is the
 *     destination (a store), any later one a source (a load).
 * Sizes are Capstone's operand sizes except where Capstone is wrong (table in
 * mem_size()).
 *
 * Documented choices:
 *   - Not references: lea, nop/hint-nop with memory operands (this includes
 *     the MPX bnd encodings, which Capstone 4 decodes as nop), prefetch,
 *     clflush/clflushopt/clwb (cache maintenance moves no data into the
 *     program), vgatherpf, vscatterpf, bound, invlpg, ud0/ud1, and branch
 *     targets (jmp/call rel). jmp/call [mem] do load the target pointer.
 *   - Gathers/scatters (vsib): one reference (load for gathers, store for
 *     scatters) at seg + base + disp with size 0: the vector index is not in
 *     user_regs_struct. (Capstone 4.0.2 even reports a GPR as the index of
 *     AVX-512 scatters, so the index is ignored whatever it says.)
 *   - AVX-512 masked moves: marked with their mask register, narrowed to the
 *     selected elements once the registers are read (decode_mask.c); other
 *     masked accesses and vmaskmov*: the full operand size regardless of the
 *     mask. Embedded broadcast ({1toN}): the element size.
 *   - fxsave/fxrstor: 512 bytes. xsave, xrstor: size 0 (depends on XCR0 and
 *     the requested-feature bitmap). fnsave/frstor: 108 bytes; fnstenv/
 *     fldenv: 28.
 *   - bt/bts/btr/btc [mem], reg: the register is a signed bit offset, so the
 *     reference is at mem + floor(offset / bits) * size, as the CPU does.
 *   - push: store at rsp-8 (rsp-2 with a 0x66 prefix); push [mem]: load of
 *     [mem] (address with the old rsp) then the store. pop: load at rsp;
 *     pop [mem]: load at rsp then store to [mem] computed with rsp already
 *     incremented. call: store at rsp-8 (call [mem]: load the target first).
 *     ret / ret imm: load 8 at rsp. retf: one load at rsp of 16 bytes (rex.w)
 *     or 8. iretq: one load of 40 bytes at rsp. leave: load at rbp.
 *     pushf/popf and push/pop fs/gs: as push/pop (8 bytes).
 *   - enter imm16, L (L = imm8 mod 32): store rbp at rsp-8; for i in 1..L-1 a
 *     load of [rbp-8i] and a store at rsp-8-8i; if L > 0 a store of the new
 *     frame pointer at rsp-8-8L. Only the first DECODE_MAX_REFS references
 *     are listed (enter with L >= 3 is truncated; compilers never emit it).
 *   - String instructions (movs/cmps/stos/lods/scas/ins/outs): one
 *     iteration's references at the current rsi/rdi (esi/edi with 0x67);
 *     a segment override applies to the rsi side only (rdi is es:). With any
 *     rep/repe/repne prefix, rep = true, and no references when rcx (ecx with
 *     0x67) is 0.
 *   - xlat: load 1 byte at seg:[rbx + al]. maskmovq/maskmovdqu: a store of 8/
 *     16 bytes at seg:[rdi] (full size, mask ignored).
 *   - syscall = true for syscall, sysenter and int 0x80 (all enter the
 *     kernel's system-call path); they are not marked branch. branch = true for
 *     Capstone's jump/call/ret/iret/relative-branch groups and int/int3/into.
 *   - Segment overrides: fs/gs add regs->fs_base/gs_base; es/cs/ss/ds have
 *     base 0 in 64-bit mode. 0x67 truncates the effective address to 32
 *     bits before the segment base is added.
 */
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "decode_impl.h"

static uint8_t seg_of_prefix(const cs_x86 *x)
{
	if (x->prefix[1] == X86_PREFIX_FS)
		return SEG_FS;
	if (x->prefix[1] == X86_PREFIX_GS)
		return SEG_GS;
	return SEG_NONE;
}

static tmpl_ref *add_ref(tmpl *t, uint8_t kind, uint32_t size)
{
	tmpl_ref *r;
	if (t->nrefs >= DECODE_MAX_REFS)
		return NULL; /* only enter with nesting >= 3 gets here (documented) */
	r = &t->refs[t->nrefs++];
	memset(r, 0, sizeof *r);
	r->kind = kind;
	r->size = size;
	r->base = GPR_NONE;
	r->index = GPR_NONE;
	r->bitreg = GPR_NONE;
	r->scale = 1;
	return r;
}

/* A reference at [reg + disp] (stack, string and other implicit operands). */
static void add_simple(tmpl *t, uint8_t kind, uint32_t size, uint8_t reg, int64_t disp, uint8_t seg,
                       bool addr32)
{
	tmpl_ref *r = add_ref(t, kind, size);
	if (!r)
		return;
	r->base = reg;
	r->disp = disp;
	r->seg = seg;
	r->addr32 = addr32;
}

/* A reference for an explicit memory operand; rsp_bias for pop [mem]. */
static lomas_status add_mem(tmpl *t, const cs_x86 *x, const cs_x86_op *op, unsigned id,
                            const char *mn, uint8_t kind, int32_t rsp_bias)
{
	tmpl_ref *r = add_ref(t, kind, mem_size(id, op));
	if (!r)
		return LOMAS_OK;
	r->disp = op->mem.disp;
	r->rsp_bias = rsp_bias;
	r->addr32 = x->addr_size == 4;
	if (op->mem.segment == X86_REG_FS)
		r->seg = SEG_FS;
	else if (op->mem.segment == X86_REG_GS)
		r->seg = SEG_GS;
	else
		r->seg = seg_of_prefix(x);
	if (op->mem.base != X86_REG_INVALID) {
		r->base = gpr_of(op->mem.base);
		if (r->base == GPR_NONE)
			return error_set(LOMAS_EFORMAT,
			                 "%s at 0x%" PRIx64 ": unsupported base register", t->text,
			                 t->pc);
	}
	if (is_vsib(mn)) {
		r->size = 0; /* vector index: see the file comment */
	} else if (op->mem.index != X86_REG_INVALID) {
		r->index = gpr_of(op->mem.index);
		if (r->index == GPR_NONE)
			return error_set(LOMAS_EFORMAT,
			                 "%s at 0x%" PRIx64 ": unsupported index register", t->text,
			                 t->pc);
		r->scale = (uint8_t)op->mem.scale;
	}
	return LOMAS_OK;
}

/* Kind of the explicit memory operand at position pos of n operands. */
static int mem_kind(unsigned id, const char *mn, int pos, int n)
{
	if (id == X86_INS_CMP || id == X86_INS_TEST || id == X86_INS_BT)
		return LOMAS_REF_LOAD;
	if (pos > 0)
		return LOMAS_REF_LOAD;
	if (n == 1)
		return is_unary_store(id, mn) ? LOMAS_REF_STORE : LOMAS_REF_LOAD;
	return LOMAS_REF_STORE;
}

/* movs/cmps/stos/lods/scas/ins/outs: legacy one-byte opcodes 6c-6f, a4-a7, aa-af. */
static bool string_op(const cs_x86 *x)
{
	uint8_t op = x->opcode[0];
	if (x->opcode[1] != 0)
		return false;
	return (op >= 0x6c && op <= 0x6f) || (op >= 0xa4 && op <= 0xa7) ||
	       (op >= 0xaa && op <= 0xaf);
}

static void build_string(tmpl *t, const cs_x86 *x)
{
	uint8_t op = x->opcode[0];
	bool a32 = x->addr_size == 4;
	uint8_t seg = seg_of_prefix(x);
	uint32_t size;
	if ((op & 1) == 0)
		size = 1;
	else if ((x->rex & 8) && op >= 0xa4)
		size = 8;
	else if (x->prefix[2] == X86_PREFIX_OPSIZE)
		size = 2;
	else
		size = 4;
	t->rep = x->prefix[0] == X86_PREFIX_REP || x->prefix[0] == X86_PREFIX_REPNE;
	t->rep_addr32 = a32;
	switch (op & 0xfe) {
	case 0xa4: /* movs: load [rsi], store [rdi] */
		add_simple(t, LOMAS_REF_LOAD, size, GPR_RSI, 0, seg, a32);
		add_simple(t, LOMAS_REF_STORE, size, GPR_RDI, 0, SEG_NONE, a32);
		break;
	case 0xa6: /* cmps: load [rsi], load [rdi] */
		add_simple(t, LOMAS_REF_LOAD, size, GPR_RSI, 0, seg, a32);
		add_simple(t, LOMAS_REF_LOAD, size, GPR_RDI, 0, SEG_NONE, a32);
		break;
	case 0xaa: /* stos */
	case 0x6c: /* ins */ add_simple(t, LOMAS_REF_STORE, size, GPR_RDI, 0, SEG_NONE, a32); break;
	case 0xac: /* lods */
	case 0x6e: /* outs */ add_simple(t, LOMAS_REF_LOAD, size, GPR_RSI, 0, seg, a32); break;
	case 0xae: /* scas */ add_simple(t, LOMAS_REF_LOAD, size, GPR_RDI, 0, SEG_NONE, a32); break;
	default: break;
	}
}

static const cs_x86_op *first_mem(const cs_x86 *x)
{
	for (int i = 0; i < x->op_count; i++)
		if (x->operands[i].type == X86_OP_MEM)
			return &x->operands[i];
	return NULL;
}

/* enter imm16, L: see the file comment. */
static void build_enter(tmpl *t, const cs_x86 *x, uint32_t ss)
{
	unsigned level = 0;
	if (x->op_count >= 2 && x->operands[1].type == X86_OP_IMM)
		level = (unsigned)x->operands[1].imm & 31;
	add_simple(t, LOMAS_REF_STORE, ss, GPR_RSP, -(int64_t)ss, SEG_NONE, false);
	for (unsigned i = 1; i < level; i++) {
		add_simple(t, LOMAS_REF_LOAD, ss, GPR_RBP, -(int64_t)(ss * i), SEG_NONE, false);
		add_simple(t, LOMAS_REF_STORE, ss, GPR_RSP, -(int64_t)(ss * (i + 1)), SEG_NONE,
		           false);
	}
	if (level > 0)
		add_simple(t, LOMAS_REF_STORE, ss, GPR_RSP, -(int64_t)(ss * (level + 1)), SEG_NONE,
		           false);
}

/* Instructions with implicit references; true if handled. */
static bool build_implicit(tmpl *t, const cs_insn *ci, lomas_status *st)
{
	const cs_x86 *x = &ci->detail->x86;
	const cs_x86_op *m = first_mem(x);
	uint32_t ss = x->prefix[2] == X86_PREFIX_OPSIZE ? 2 : 8; /* stack slot */
	uint8_t seg = seg_of_prefix(x);
	bool a32 = x->addr_size == 4;
	*st = LOMAS_OK;
	switch (ci->id) {
	case X86_INS_PUSH:
		if (m)
			*st = add_mem(t, x, m, ci->id, ci->mnemonic, LOMAS_REF_LOAD, 0);
		add_simple(t, LOMAS_REF_STORE, ss, GPR_RSP, -(int64_t)ss, SEG_NONE, false);
		return true;
	case X86_INS_POP:
		add_simple(t, LOMAS_REF_LOAD, ss, GPR_RSP, 0, SEG_NONE, false);
		if (m) /* the CPU computes the destination with rsp already incremented */
			*st = add_mem(t, x, m, ci->id, ci->mnemonic, LOMAS_REF_STORE, (int32_t)ss);
		return true;
	case X86_INS_PUSHF:
	case X86_INS_PUSHFQ:
	case X86_INS_PUSHFD:
		add_simple(t, LOMAS_REF_STORE, ss, GPR_RSP, -(int64_t)ss, SEG_NONE, false);
		return true;
	case X86_INS_POPF:
	case X86_INS_POPFQ:
	case X86_INS_POPFD:
		add_simple(t, LOMAS_REF_LOAD, ss, GPR_RSP, 0, SEG_NONE, false);
		return true;
	case X86_INS_CALL:
		if (m)
			*st = add_mem(t, x, m, ci->id, ci->mnemonic, LOMAS_REF_LOAD, 0);
		add_simple(t, LOMAS_REF_STORE, 8, GPR_RSP, -8, SEG_NONE, false);
		return true;
	case X86_INS_LCALL:
		if (m)
			*st = add_mem(t, x, m, ci->id, ci->mnemonic, LOMAS_REF_LOAD, 0);
		add_simple(t, LOMAS_REF_STORE, 16, GPR_RSP, -16, SEG_NONE, false);
		return true;
	case X86_INS_RET:
		add_simple(t, LOMAS_REF_LOAD, 8, GPR_RSP, 0, SEG_NONE, false);
		return true;
	case X86_INS_RETF:
	case X86_INS_RETFQ:
		add_simple(t, LOMAS_REF_LOAD, (x->rex & 8) ? 16 : 8, GPR_RSP, 0, SEG_NONE, false);
		return true;
	case X86_INS_IRET:
	case X86_INS_IRETD:
	case X86_INS_IRETQ:
		add_simple(t, LOMAS_REF_LOAD,
		           ci->id == X86_INS_IRETQ   ? 40
		           : ci->id == X86_INS_IRETD ? 20
		                                     : 10,
		           GPR_RSP, 0, SEG_NONE, false);
		return true;
	case X86_INS_LEAVE:
		add_simple(t, LOMAS_REF_LOAD, ss, GPR_RBP, 0, SEG_NONE, false);
		return true;
	case X86_INS_ENTER: build_enter(t, x, ss); return true;
	case X86_INS_XLATB: {
		tmpl_ref *r = add_ref(t, LOMAS_REF_LOAD, 1);
		if (!r)
			return true;
		r->base = GPR_RBX;
		r->index = GPR_AL;
		r->seg = seg;
		r->addr32 = a32;
		return true;
	}
	case X86_INS_MASKMOVQ: add_simple(t, LOMAS_REF_STORE, 8, GPR_RDI, 0, seg, a32); return true;
	case X86_INS_MASKMOVDQU:
	case X86_INS_VMASKMOVDQU:
		add_simple(t, LOMAS_REF_STORE, 16, GPR_RDI, 0, seg, a32);
		return true;
	default: return false;
	}
}

static void build_flags(tmpl *t, const cs_insn *ci)
{
	const cs_detail *det = ci->detail;
	const cs_x86 *x = &det->x86;
	bool int_grp = false;
	t->syscall = ci->id == X86_INS_SYSCALL || ci->id == X86_INS_SYSENTER ||
	             (ci->id == X86_INS_INT && x->op_count == 1 &&
	              x->operands[0].type == X86_OP_IMM && x->operands[0].imm == 0x80);
	for (int i = 0; i < det->groups_count; i++) {
		switch (det->groups[i]) {
		case X86_GRP_JUMP:
		case X86_GRP_CALL:
		case X86_GRP_RET:
		case X86_GRP_IRET:
		case X86_GRP_BRANCH_RELATIVE: t->branch = true; break;
		case X86_GRP_INT: int_grp = true; break;
		default: break;
		}
	}
	if (int_grp && !t->syscall)
		t->branch = true;
}

lomas_status tmpl_build(decoder *d, const uint8_t *code, size_t len, uint64_t pc, tmpl *t)
{
	const uint8_t *p = code;
	size_t n = len > DECODE_MAX_LEN ? DECODE_MAX_LEN : len;
	uint64_t addr = pc;
	const cs_insn *ci = d->ci;
	const cs_x86 *x;
	lomas_status st = LOMAS_OK;

	memset(t, 0, sizeof *t);
	t->pc = pc;
	if (!code || len == 0 || !cs_disasm_iter(d->cs, &p, &n, &addr, d->ci))
		return error_set(LOMAS_EFORMAT,
		                 "invalid or truncated x86-64 instruction at pc 0x%" PRIx64
		                 " (%zu bytes available)",
		                 pc, len);
	x = &ci->detail->x86;
	t->len = (uint8_t)ci->size;
	snprintf(t->text, sizeof t->text, "%s%s%s", ci->mnemonic, ci->op_str[0] ? " " : "",
	         ci->op_str);
	build_flags(t, ci);

	if (string_op(x)) {
		build_string(t, x);
		return LOMAS_OK;
	}
	if (build_implicit(t, ci, &st))
		return st;
	if (is_noref(ci->id, ci->mnemonic))
		return LOMAS_OK;

	for (int i = 0; i < x->op_count && st == LOMAS_OK; i++) {
		const cs_x86_op *op = &x->operands[i];
		if (op->type != X86_OP_MEM)
			continue;
		/* the RMW forms are those whose destination (operand 0) is memory */
		if (is_rmw(ci->id) && (i == 0 || ci->id == X86_INS_XCHG)) {
			st = add_mem(t, x, op, ci->id, ci->mnemonic, LOMAS_REF_LOAD, 0);
			if (st == LOMAS_OK)
				st = add_mem(t, x, op, ci->id, ci->mnemonic, LOMAS_REF_STORE, 0);
		} else {
			st = add_mem(t, x, op, ci->id, ci->mnemonic,
			             (uint8_t)mem_kind(ci->id, ci->mnemonic, i, x->op_count), 0);
		}
	}
	/* bt* [mem], reg: the register is a signed bit offset from [mem]. */
	if (st == LOMAS_OK && is_bit_test(ci->id) && x->op_count == 2 &&
	    x->operands[0].type == X86_OP_MEM && x->operands[1].type == X86_OP_REG) {
		uint8_t g = gpr_of(x->operands[1].reg);
		for (int i = 0; i < t->nrefs; i++)
			t->refs[i].bitreg = g;
	}
	if (st == LOMAS_OK)
		tmpl_mark_opmask(t, ci);
	return st;
}

static const size_t gpr_offset[16] = {
    offsetof(struct user_regs_struct, rax), offsetof(struct user_regs_struct, rcx),
    offsetof(struct user_regs_struct, rdx), offsetof(struct user_regs_struct, rbx),
    offsetof(struct user_regs_struct, rsp), offsetof(struct user_regs_struct, rbp),
    offsetof(struct user_regs_struct, rsi), offsetof(struct user_regs_struct, rdi),
    offsetof(struct user_regs_struct, r8),  offsetof(struct user_regs_struct, r9),
    offsetof(struct user_regs_struct, r10), offsetof(struct user_regs_struct, r11),
    offsetof(struct user_regs_struct, r12), offsetof(struct user_regs_struct, r13),
    offsetof(struct user_regs_struct, r14), offsetof(struct user_regs_struct, r15),
};

static uint64_t reg_value(const struct user_regs_struct *regs, uint8_t g, uint64_t next_pc)
{
	uint64_t v;
	if (g < 16) {
		memcpy(&v, (const char *)regs + gpr_offset[g], sizeof v);
		return v;
	}
	if (g == GPR_RIP)
		return next_pc;
	if (g == GPR_AL)
		return regs->rax & 0xff;
	return 0;
}

/* floor(offset / (8*size)) * size for a signed bit offset in a size-byte register. */
static uint64_t bit_offset_bytes(uint64_t reg, uint32_t size)
{
	int64_t off, bits = (int64_t)size * 8, q;
	if (size == 2)
		off = (int16_t)(uint16_t)reg;
	else if (size == 4)
		off = (int32_t)(uint32_t)reg;
	else
		off = (int64_t)reg;
	q = off / bits;
	if (off % bits < 0)
		q -= 1;
	return (uint64_t)q * size;
}

void tmpl_eval(const tmpl *t, const struct user_regs_struct *regs, decode_insn *out)
{
	uint64_t next_pc = t->pc + t->len;
	out->pc = t->pc;
	out->len = t->len;
	out->rep = t->rep;
	out->syscall = t->syscall;
	out->branch = t->branch;
	memcpy(out->text, t->text, sizeof out->text);
	out->nrefs = t->nrefs;
	if (t->rep) {
		uint64_t count = t->rep_addr32 ? (uint32_t)regs->rcx : regs->rcx;
		if (count == 0)
			out->nrefs = 0;
	}
	for (int i = 0; i < out->nrefs; i++) {
		const tmpl_ref *r = &t->refs[i];
		uint64_t a = (uint64_t)r->disp;
		if (r->base != GPR_NONE) {
			a += reg_value(regs, r->base, next_pc);
			if (r->base == GPR_RSP)
				a += (uint64_t)(int64_t)r->rsp_bias;
		}
		if (r->index != GPR_NONE)
			a += reg_value(regs, r->index, next_pc) * r->scale;
		if (r->bitreg != GPR_NONE)
			a += bit_offset_bytes(reg_value(regs, r->bitreg, next_pc), r->size);
		if (r->addr32)
			a = (uint32_t)a;
		if (r->seg == SEG_FS)
			a += regs->fs_base;
		else if (r->seg == SEG_GS)
			a += regs->gs_base;
		out->refs[i].addr = a;
		out->refs[i].size = r->size;
		out->refs[i].kind = r->kind;
		out->refs[i].mask = r->mask;
		out->refs[i].elem = r->elem;
		out->refs[i].compress = r->compress;
	}
}

lomas_status decode_bytes(decoder *d, const uint8_t *code, size_t len, uint64_t pc,
                          const struct user_regs_struct *regs, decode_insn *out)
{
	tmpl t;
	lomas_status st;
	if (!d || !regs || !out)
		return error_set(LOMAS_EINVAL, "decode_bytes: NULL argument");
	st = tmpl_build(d, code, len, pc, &t);
	if (st != LOMAS_OK)
		return st;
	tmpl_eval(&t, regs, out);
	return LOMAS_OK;
}

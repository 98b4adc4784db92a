/*
 * Unit tests for lib/decode: a table of encoded instructions (bytes assembled
 * with GNU as 2.40 and listed with objdump -M intel; the listing is the first
 * field of each row) with hand-computed references for fixed register values,
 * invalid encodings, and decoder_at() on a child process stopped under ptrace
 * (reading, the cache, invalidation, the PEEKDATA fallback, page ends), plus
 * a small cost measurement.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "decode/decode.h"

/* Register values of the table (see base_regs()). */
#define PC 0x401000ull
#define RAX 0x1234ull
#define RBX 0x20000ull
#define RCX 3ull
#define RDX 5ull
#define RSI 0x30000ull
#define RDI 0x40000ull
#define RSP 0x7ffff000ull
#define RBP 0x7ffff100ull
#define R9 ((uint64_t)-65)
#define R12 0xdead000000000500ull
#define R13 0x50000ull
#define R14 0x11ull
#define FS 0x7f0000001000ull
#define GS 0x7e0000002000ull
/* bt [rbx], eax: eax is a signed bit offset; the CPU touches the dword holding that bit. */
#define BT32_RAX ((RAX / 32) * 4)

#define L(a, s)                                    \
	{                                          \
		(uint64_t)(a), (s), LOMAS_REF_LOAD \
	}
#define S(a, s)                                     \
	{                                           \
		(uint64_t)(a), (s), LOMAS_REF_STORE \
	}
#define B(...) {__VA_ARGS__}, sizeof((uint8_t[]){__VA_ARGS__})

enum { F_BR = 1, F_REP = 2, F_SYS = 4 };

typedef struct exp_ref {
	uint64_t addr;
	uint32_t size;
	uint8_t kind;
} exp_ref;

typedef struct tcase {
	const char *listing; /* objdump -M intel of the bytes */
	uint8_t code[DECODE_MAX_LEN];
	uint8_t len;
	int flags;
	void (*setup)(struct user_regs_struct *r);
	int nrefs;
	exp_ref refs[DECODE_MAX_REFS];
} tcase;

static struct user_regs_struct base_regs(void)
{
	struct user_regs_struct r;
	memset(&r, 0, sizeof r);
	r.rip = PC;
	r.rax = RAX;
	r.rbx = RBX;
	r.rcx = RCX;
	r.rdx = RDX;
	r.rsi = RSI;
	r.rdi = RDI;
	r.rsp = RSP;
	r.rbp = RBP;
	r.r9 = R9;
	r.r12 = R12;
	r.r13 = R13;
	r.r14 = R14;
	r.fs_base = FS;
	r.gs_base = GS;
	return r;
}

static void rcx_zero(struct user_regs_struct *r)
{
	r->rcx = 0;
}

/* ecx is 0 but rcx is not: a 0x67 rep counts with ecx. */
static void rcx_high_only(struct user_regs_struct *r)
{
	r->rcx = 0x100000000ull;
}

/* rsi/rdi with high bits: 0x67 string instructions use esi/edi. */
static void rsi_rdi_high(struct user_regs_struct *r)
{
	r->rsi = 0xffff000000000000ull | RSI;
	r->rdi = 0x0000000100000000ull | RDI;
}

/* bt with a negative 32-bit offset in eax: -33 -> dword at -8. */
static void eax_minus33(struct user_regs_struct *r)
{
	r->rax = 0xffffffffffffffdfull; /* eax = -33; the upper half must be ignored */
}

/* clang-format off */
static const tcase cases[] = {
	{ "mov rax,QWORD PTR [rbx+rcx*4+0x10]", B(0x48, 0x8b, 0x44, 0x8b, 0x10), 0, NULL, 1, { L(RBX + RCX * 4 + 0x10, 8) } },
	{ "mov QWORD PTR [rbx],rax", B(0x48, 0x89, 0x03), 0, NULL, 1, { S(RBX, 8) } },
	{ "mov DWORD PTR [rip+0x100],0x5", B(0xc7, 0x05, 0x00, 0x01, 0x00, 0x00, 0x05, 0x00, 0x00, 0x00), 0, NULL, 1, { S(PC + 10 + 0x100, 4) } },
	{ "movzx eax,BYTE PTR [rsi]", B(0x0f, 0xb6, 0x06), 0, NULL, 1, { L(RSI, 1) } },
	{ "movsx rax,WORD PTR [rsi+0x2]", B(0x48, 0x0f, 0xbf, 0x46, 0x02), 0, NULL, 1, { L(RSI + 2, 2) } },
	{ "movups xmm0,XMMWORD PTR [rax]", B(0x0f, 0x10, 0x00), 0, NULL, 1, { L(RAX, 16) } },
	{ "movups XMMWORD PTR [rax],xmm0", B(0x0f, 0x11, 0x00), 0, NULL, 1, { S(RAX, 16) } },
	{ "movaps xmm1,XMMWORD PTR [rax+0x10]", B(0x0f, 0x28, 0x48, 0x10), 0, NULL, 1, { L(RAX + 16, 16) } },
	{ "vmovdqu ymm0,YMMWORD PTR [rax]", B(0xc5, 0xfe, 0x6f, 0x00), 0, NULL, 1, { L(RAX, 32) } },
	{ "vmovdqu YMMWORD PTR [rax],ymm0", B(0xc5, 0xfe, 0x7f, 0x00), 0, NULL, 1, { S(RAX, 32) } },
	{ "vmovdqu xmm0,XMMWORD PTR [rax]", B(0xc5, 0xfa, 0x6f, 0x00), 0, NULL, 1, { L(RAX, 16) } },
	{ "vmovdqu64 zmm0,ZMMWORD PTR [rax]", B(0x62, 0xf1, 0xfe, 0x48, 0x6f, 0x00), 0, NULL, 1, { L(RAX, 64) } },
	{ "vmovdqu64 ZMMWORD PTR [rax+0x40],zmm1", B(0x62, 0xf1, 0xfe, 0x48, 0x7f, 0x48, 0x01), 0, NULL, 1, { S(RAX + 64, 64) } },
	{ "cvtsi2sd xmm0,QWORD PTR [rax]", B(0xf2, 0x48, 0x0f, 0x2a, 0x00), 0, NULL, 1, { L(RAX, 8) } },
	{ "cvttsd2si eax,QWORD PTR [rax]", B(0xf2, 0x0f, 0x2c, 0x00), 0, NULL, 1, { L(RAX, 8) } },
	{ "add rax,QWORD PTR [rbx]", B(0x48, 0x03, 0x03), 0, NULL, 1, { L(RBX, 8) } },
	{ "add QWORD PTR [rbx],rax", B(0x48, 0x01, 0x03), 0, NULL, 2, { L(RBX, 8), S(RBX, 8) } },
	{ "add DWORD PTR [rbx+0x8],0x1", B(0x83, 0x43, 0x08, 0x01), 0, NULL, 2, { L(RBX + 8, 4), S(RBX + 8, 4) } },
	{ "sub DWORD PTR [rbx],eax", B(0x29, 0x03), 0, NULL, 2, { L(RBX, 4), S(RBX, 4) } },
	{ "and BYTE PTR [rbx],al", B(0x20, 0x03), 0, NULL, 2, { L(RBX, 1), S(RBX, 1) } },
	{ "or WORD PTR [rbx],ax", B(0x66, 0x09, 0x03), 0, NULL, 2, { L(RBX, 2), S(RBX, 2) } },
	{ "xor QWORD PTR [rbx],0x7", B(0x48, 0x83, 0x33, 0x07), 0, NULL, 2, { L(RBX, 8), S(RBX, 8) } },
	{ "adc DWORD PTR [rbx],eax", B(0x11, 0x03), 0, NULL, 2, { L(RBX, 4), S(RBX, 4) } },
	{ "sbb DWORD PTR [rbx],eax", B(0x19, 0x03), 0, NULL, 2, { L(RBX, 4), S(RBX, 4) } },
	{ "inc DWORD PTR [rbx]", B(0xff, 0x03), 0, NULL, 2, { L(RBX, 4), S(RBX, 4) } },
	{ "dec BYTE PTR [rbx]", B(0xfe, 0x0b), 0, NULL, 2, { L(RBX, 1), S(RBX, 1) } },
	{ "neg QWORD PTR [rbx]", B(0x48, 0xf7, 0x1b), 0, NULL, 2, { L(RBX, 8), S(RBX, 8) } },
	{ "not DWORD PTR [rbx]", B(0xf7, 0x13), 0, NULL, 2, { L(RBX, 4), S(RBX, 4) } },
	{ "shl DWORD PTR [rbx],1", B(0xd1, 0x23), 0, NULL, 2, { L(RBX, 4), S(RBX, 4) } },
	{ "shl DWORD PTR [rbx],cl", B(0xd3, 0x23), 0, NULL, 2, { L(RBX, 4), S(RBX, 4) } },
	{ "sar QWORD PTR [rbx],0x3", B(0x48, 0xc1, 0x3b, 0x03), 0, NULL, 2, { L(RBX, 8), S(RBX, 8) } },
	{ "rol BYTE PTR [rbx],1", B(0xd0, 0x03), 0, NULL, 2, { L(RBX, 1), S(RBX, 1) } },
	{ "rcl DWORD PTR [rbx],1", B(0xd1, 0x13), 0, NULL, 2, { L(RBX, 4), S(RBX, 4) } },
	{ "shld DWORD PTR [rbx],eax,0x3", B(0x0f, 0xa4, 0x03, 0x03), 0, NULL, 2, { L(RBX, 4), S(RBX, 4) } },
	{ "shrd DWORD PTR [rbx],eax,cl", B(0x0f, 0xad, 0x03), 0, NULL, 2, { L(RBX, 4), S(RBX, 4) } },
	{ "xchg QWORD PTR [rbx],rax", B(0x48, 0x87, 0x03), 0, NULL, 2, { L(RBX, 8), S(RBX, 8) } },
	{ "xchg BYTE PTR [rbx],al", B(0x86, 0x03), 0, NULL, 2, { L(RBX, 1), S(RBX, 1) } },
	{ "xadd DWORD PTR [rbx],eax", B(0x0f, 0xc1, 0x03), 0, NULL, 2, { L(RBX, 4), S(RBX, 4) } },
	{ "cmpxchg DWORD PTR [rbx],ecx", B(0x0f, 0xb1, 0x0b), 0, NULL, 2, { L(RBX, 4), S(RBX, 4) } },
	{ "cmpxchg BYTE PTR [rbx],cl", B(0x0f, 0xb0, 0x0b), 0, NULL, 2, { L(RBX, 1), S(RBX, 1) } },
	{ "lock add DWORD PTR [rbx],eax", B(0xf0, 0x01, 0x03), 0, NULL, 2, { L(RBX, 4), S(RBX, 4) } },
	{ "lock cmpxchg QWORD PTR [rbx],rcx", B(0xf0, 0x48, 0x0f, 0xb1, 0x0b), 0, NULL, 2, { L(RBX, 8), S(RBX, 8) } },
	{ "lock xadd QWORD PTR [rbx],rax", B(0xf0, 0x48, 0x0f, 0xc1, 0x03), 0, NULL, 2, { L(RBX, 8), S(RBX, 8) } },
	{ "lock inc QWORD PTR [rbx]", B(0xf0, 0x48, 0xff, 0x03), 0, NULL, 2, { L(RBX, 8), S(RBX, 8) } },
	{ "cmpxchg16b OWORD PTR [rbx]", B(0x48, 0x0f, 0xc7, 0x0b), 0, NULL, 2, { L(RBX, 16), S(RBX, 16) } },
	{ "cmpxchg8b QWORD PTR [rbx]", B(0x0f, 0xc7, 0x0b), 0, NULL, 2, { L(RBX, 8), S(RBX, 8) } },
	{ "bts DWORD PTR [rbx],eax", B(0x0f, 0xab, 0x03), 0, NULL, 2, { L(RBX + BT32_RAX, 4), S(RBX + BT32_RAX, 4) } },
	{ "btr QWORD PTR [rbx],0x3", B(0x48, 0x0f, 0xba, 0x33, 0x03), 0, NULL, 2, { L(RBX, 8), S(RBX, 8) } },
	{ "btc QWORD PTR [rbx],r9", B(0x4c, 0x0f, 0xbb, 0x0b), 0, NULL, 2, { L(RBX - 16, 8), S(RBX - 16, 8) } },
	{ "lock bts DWORD PTR [rbx],0x1", B(0xf0, 0x0f, 0xba, 0x2b, 0x01), 0, NULL, 2, { L(RBX, 4), S(RBX, 4) } },
	{ "bt DWORD PTR [rbx],eax", B(0x0f, 0xa3, 0x03), 0, NULL, 1, { L(RBX + BT32_RAX, 4) } },
	{ "bt DWORD PTR [rbx],0x3", B(0x0f, 0xba, 0x23, 0x03), 0, NULL, 1, { L(RBX, 4) } },
	{ "cmp DWORD PTR [rbx],eax", B(0x39, 0x03), 0, NULL, 1, { L(RBX, 4) } },
	{ "cmp eax,DWORD PTR [rbx]", B(0x3b, 0x03), 0, NULL, 1, { L(RBX, 4) } },
	{ "cmp BYTE PTR [rbx],0x0", B(0x80, 0x3b, 0x00), 0, NULL, 1, { L(RBX, 1) } },
	{ "test DWORD PTR [rbx],eax", B(0x85, 0x03), 0, NULL, 1, { L(RBX, 4) } },
	{ "test BYTE PTR [rbx],0x1", B(0xf6, 0x03, 0x01), 0, NULL, 1, { L(RBX, 1) } },
	{ "lea rax,[rbx+rcx*8+0x8]", B(0x48, 0x8d, 0x44, 0xcb, 0x08), 0, NULL, 0, {  } },
	{ "nop DWORD PTR [rax+rax*1]", B(0x0f, 0x1f, 0x04, 0x00), 0, NULL, 0, {  } },
	{ "nop WORD PTR [rax+rax*1]", B(0x66, 0x0f, 0x1f, 0x04, 0x00), 0, NULL, 0, {  } },
	{ "prefetcht0 BYTE PTR [rax]", B(0x0f, 0x18, 0x08), 0, NULL, 0, {  } },
	{ "prefetchnta BYTE PTR [rax]", B(0x0f, 0x18, 0x00), 0, NULL, 0, {  } },
	{ "prefetchw BYTE PTR [rax]", B(0x0f, 0x0d, 0x08), 0, NULL, 0, {  } },
	{ "clflush BYTE PTR [rax]", B(0x0f, 0xae, 0x38), 0, NULL, 0, {  } },
	{ "clflushopt BYTE PTR [rax]", B(0x66, 0x0f, 0xae, 0x38), 0, NULL, 0, {  } },
	{ "clwb BYTE PTR [rax]", B(0x66, 0x0f, 0xae, 0x30), 0, NULL, 0, {  } },
	{ "bndmk bnd0,[rax]", B(0xf3, 0x0f, 0x1b, 0x00), 0, NULL, 0, {  } },
	{ "bndcl bnd0,[rax]", B(0xf3, 0x0f, 0x1a, 0x00), 0, NULL, 0, {  } },
	{ "push rax", B(0x50), 0, NULL, 1, { S(RSP - 8, 8) } },
	{ "push QWORD PTR [rbx]", B(0xff, 0x33), 0, NULL, 2, { L(RBX, 8), S(RSP - 8, 8) } },
	{ "push QWORD PTR [rsp+0x8]", B(0xff, 0x74, 0x24, 0x08), 0, NULL, 2, { L(RSP + 8, 8), S(RSP - 8, 8) } },
	{ "push 0x1", B(0x6a, 0x01), 0, NULL, 1, { S(RSP - 8, 8) } },
	{ "pushw 0x1", B(0x66, 0x6a, 0x01), 0, NULL, 1, { S(RSP - 2, 2) } },
	{ "push fs", B(0x0f, 0xa0), 0, NULL, 1, { S(RSP - 8, 8) } },
	{ "pop rax", B(0x58), 0, NULL, 1, { L(RSP, 8) } },
	{ "pop QWORD PTR [rbx]", B(0x8f, 0x03), 0, NULL, 2, { L(RSP, 8), S(RBX, 8) } },
	{ "pop QWORD PTR [rsp]", B(0x8f, 0x04, 0x24), 0, NULL, 2, { L(RSP, 8), S(RSP + 8, 8) } },
	{ "pop QWORD PTR [rsp+0x8]", B(0x8f, 0x44, 0x24, 0x08), 0, NULL, 2, { L(RSP, 8), S(RSP + 16, 8) } },
	{ "call rax", B(0xff, 0xd0), F_BR, NULL, 1, { S(RSP - 8, 8) } },
	{ "call QWORD PTR [rbx]", B(0xff, 0x13), F_BR, NULL, 2, { L(RBX, 8), S(RSP - 8, 8) } },
	{ "call QWORD PTR [rip+0x10]", B(0xff, 0x15, 0x10, 0x00, 0x00, 0x00), F_BR, NULL, 2, { L(PC + 6 + 0x10, 8), S(RSP - 8, 8) } },
	{ "call 0x116", B(0xe8, 0x00, 0x00, 0x00, 0x00), F_BR, NULL, 1, { S(RSP - 8, 8) } },
	{ "ret", B(0xc3), F_BR, NULL, 1, { L(RSP, 8) } },
	{ "ret 0x10", B(0xc2, 0x10, 0x00), F_BR, NULL, 1, { L(RSP, 8) } },
	{ "repz ret", B(0xf3, 0xc3), F_BR, NULL, 1, { L(RSP, 8) } },
	{ "leave", B(0xc9), 0, NULL, 1, { L(RBP, 8) } },
	{ "pushf", B(0x9c), 0, NULL, 1, { S(RSP - 8, 8) } },
	{ "popf", B(0x9d), 0, NULL, 1, { L(RSP, 8) } },
	{ "enter 0x10,0x0", B(0xc8, 0x10, 0x00, 0x00), 0, NULL, 1, { S(RSP - 8, 8) } },
	{ "enter 0x10,0x1", B(0xc8, 0x10, 0x00, 0x01), 0, NULL, 2, { S(RSP - 8, 8), S(RSP - 16, 8) } },
	{ "enter 0x10,0x2", B(0xc8, 0x10, 0x00, 0x02), 0, NULL, 4, { S(RSP - 8, 8), L(RBP - 8, 8), S(RSP - 16, 8), S(RSP - 24, 8) } },
	{ "movs BYTE PTR es:[rdi],BYTE PTR ds:[rsi]", B(0xa4), 0, NULL, 2, { L(RSI, 1), S(RDI, 1) } },
	{ "movs WORD PTR es:[rdi],WORD PTR ds:[rsi]", B(0x66, 0xa5), 0, NULL, 2, { L(RSI, 2), S(RDI, 2) } },
	{ "movs QWORD PTR es:[rdi],QWORD PTR ds:[rsi]", B(0x48, 0xa5), 0, NULL, 2, { L(RSI, 8), S(RDI, 8) } },
	{ "rep movs BYTE PTR es:[rdi],BYTE PTR ds:[rsi]", B(0xf3, 0xa4), F_REP, NULL, 2, { L(RSI, 1), S(RDI, 1) } },
	{ "rep movs DWORD PTR es:[rdi],DWORD PTR ds:[rsi]", B(0xf3, 0xa5), F_REP, NULL, 2, { L(RSI, 4), S(RDI, 4) } },
	{ "stos BYTE PTR es:[rdi],al", B(0xaa), 0, NULL, 1, { S(RDI, 1) } },
	{ "rep stos QWORD PTR es:[rdi],rax", B(0xf3, 0x48, 0xab), F_REP, NULL, 1, { S(RDI, 8) } },
	{ "lods eax,DWORD PTR ds:[rsi]", B(0xad), 0, NULL, 1, { L(RSI, 4) } },
	{ "cmps BYTE PTR ds:[rsi],BYTE PTR es:[rdi]", B(0xa6), 0, NULL, 2, { L(RSI, 1), L(RDI, 1) } },
	{ "repz cmps BYTE PTR ds:[rsi],BYTE PTR es:[rdi]", B(0xf3, 0xa6), F_REP, NULL, 2, { L(RSI, 1), L(RDI, 1) } },
	{ "repnz scas al,BYTE PTR es:[rdi]", B(0xf2, 0xae), F_REP, NULL, 1, { L(RDI, 1) } },
	{ "scas rax,QWORD PTR es:[rdi]", B(0x48, 0xaf), 0, NULL, 1, { L(RDI, 8) } },
	{ "movs BYTE PTR es:[rdi],BYTE PTR fs:[rsi]", B(0x64, 0xa4), 0, NULL, 2, { L(FS + RSI, 1), S(RDI, 1) } },
	{ "movs BYTE PTR es:[edi],BYTE PTR ds:[esi]", B(0x67, 0xa4), 0, NULL, 2, { L(RSI, 1), S(RDI, 1) } },
	{ "rep movs BYTE PTR es:[edi],BYTE PTR ds:[esi]", B(0x67, 0xf3, 0xa4), F_REP, NULL, 2, { L(RSI, 1), S(RDI, 1) } },
	{ "mov rax,QWORD PTR fs:0x28", B(0x64, 0x48, 0x8b, 0x04, 0x25, 0x28, 0x00, 0x00, 0x00), 0, NULL, 1, { L(FS + 0x28, 8) } },
	{ "mov rax,QWORD PTR fs:[rax]", B(0x64, 0x48, 0x8b, 0x00), 0, NULL, 1, { L(FS + RAX, 8) } },
	{ "mov QWORD PTR gs:0x8,rax", B(0x65, 0x48, 0x89, 0x04, 0x25, 0x08, 0x00, 0x00, 0x00), 0, NULL, 1, { S(GS + 8, 8) } },
	{ "syscall", B(0x0f, 0x05), F_SYS, NULL, 0, {  } },
	{ "int 0x80", B(0xcd, 0x80), F_SYS, NULL, 0, {  } },
	{ "jmp rax", B(0xff, 0xe0), F_BR, NULL, 0, {  } },
	{ "jmp QWORD PTR [rax]", B(0xff, 0x20), F_BR, NULL, 1, { L(RAX, 8) } },
	{ "je 0x165", B(0x74, 0xfe), F_BR, NULL, 0, {  } },
	{ "jmp 0x167", B(0xeb, 0xfe), F_BR, NULL, 0, {  } },
	{ "int3", B(0xcc), F_BR, NULL, 0, {  } },
	{ "vpgatherdd ymm0,DWORD PTR [rax+ymm1*4],ymm2", B(0xc4, 0xe2, 0x6d, 0x90, 0x04, 0x88), 0, NULL, 1, { L(RAX, 0) } },
	{ "vgatherdps zmm0{k1},DWORD PTR [rax+zmm1*4+0x8]", B(0x62, 0xf2, 0x7d, 0x49, 0x92, 0x44, 0x88, 0x02), 0, NULL, 1, { L(RAX + 8, 0) } },
	{ "vpscatterdd DWORD PTR [rax+zmm1*4]{k1},zmm0", B(0x62, 0xf2, 0x7d, 0x49, 0xa0, 0x04, 0x88), 0, NULL, 1, { S(RAX, 0) } },
	{ "vgatherpf0dps DWORD PTR [rax+zmm1*4]{k1}", B(0x62, 0xf2, 0x7d, 0x49, 0xc6, 0x0c, 0x88), 0, NULL, 0, {  } },
	{ "xsave [rax]", B(0x0f, 0xae, 0x20), 0, NULL, 1, { S(RAX, 0) } },
	{ "xrstor [rax]", B(0x0f, 0xae, 0x28), 0, NULL, 1, { L(RAX, 0) } },
	{ "fxsave [rax]", B(0x0f, 0xae, 0x00), 0, NULL, 1, { S(RAX, 512) } },
	{ "fxrstor [rax]", B(0x0f, 0xae, 0x08), 0, NULL, 1, { L(RAX, 512) } },
	{ "fxsave64 [rax]", B(0x48, 0x0f, 0xae, 0x00), 0, NULL, 1, { S(RAX, 512) } },
	{ "xsaveopt [rax]", B(0x0f, 0xae, 0x30), 0, NULL, 1, { S(RAX, 0) } },
	{ "xsavec [rax]", B(0x0f, 0xc7, 0x20), 0, NULL, 1, { S(RAX, 0) } },
	{ "movsd xmm0,QWORD PTR [rax]", B(0xf2, 0x0f, 0x10, 0x00), 0, NULL, 1, { L(RAX, 8) } },
	{ "movsd QWORD PTR [rax],xmm0", B(0xf2, 0x0f, 0x11, 0x00), 0, NULL, 1, { S(RAX, 8) } },
	{ "vaddps zmm0,zmm1,DWORD BCST [rax]", B(0x62, 0xf1, 0x74, 0x58, 0x58, 0x00), 0, NULL, 1, { L(RAX, 4) } },
	{ "fld QWORD PTR [rax]", B(0xdd, 0x00), 0, NULL, 1, { L(RAX, 8) } },
	{ "fstp QWORD PTR [rax]", B(0xdd, 0x18), 0, NULL, 1, { S(RAX, 8) } },
	{ "fistp QWORD PTR [rax]", B(0xdf, 0x38), 0, NULL, 1, { S(RAX, 8) } },
	{ "fisttp DWORD PTR [rax]", B(0xdb, 0x08), 0, NULL, 1, { S(RAX, 4) } },
	{ "fadd DWORD PTR [rax]", B(0xd8, 0x00), 0, NULL, 1, { L(RAX, 4) } },
	{ "fnstcw WORD PTR [rax]", B(0xd9, 0x38), 0, NULL, 1, { S(RAX, 2) } },
	{ "fldcw WORD PTR [rax]", B(0xd9, 0x28), 0, NULL, 1, { L(RAX, 2) } },
	{ "frstor [rax]", B(0xdd, 0x20), 0, NULL, 1, { L(RAX, 108) } },
	{ "fnsave [rax]", B(0xdd, 0x30), 0, NULL, 1, { S(RAX, 108) } },
	{ "stmxcsr DWORD PTR [rax]", B(0x0f, 0xae, 0x18), 0, NULL, 1, { S(RAX, 4) } },
	{ "ldmxcsr DWORD PTR [rax]", B(0x0f, 0xae, 0x10), 0, NULL, 1, { L(RAX, 4) } },
	{ "sete BYTE PTR [rax]", B(0x0f, 0x94, 0x00), 0, NULL, 1, { S(RAX, 1) } },
	{ "cmove eax,DWORD PTR [rax]", B(0x0f, 0x44, 0x00), 0, NULL, 1, { L(RAX, 4) } },
	{ "movnti DWORD PTR [rax],eax", B(0x0f, 0xc3, 0x00), 0, NULL, 1, { S(RAX, 4) } },
	{ "pextrd DWORD PTR [rax],xmm0,0x1", B(0x66, 0x0f, 0x3a, 0x16, 0x00, 0x01), 0, NULL, 1, { S(RAX, 4) } },
	{ "pinsrd xmm0,DWORD PTR [rax],0x1", B(0x66, 0x0f, 0x3a, 0x22, 0x00, 0x01), 0, NULL, 1, { L(RAX, 4) } },
	{ "vextractf128 XMMWORD PTR [rax],ymm0,0x1", B(0xc4, 0xe3, 0x7d, 0x19, 0x00, 0x01), 0, NULL, 1, { S(RAX, 16) } },
	{ "vmaskmovps YMMWORD PTR [rax],ymm1,ymm2", B(0xc4, 0xe2, 0x75, 0x2e, 0x10), 0, NULL, 1, { S(RAX, 32) } },
	{ "vmaskmovps ymm0,ymm1,YMMWORD PTR [rax]", B(0xc4, 0xe2, 0x75, 0x2c, 0x00), 0, NULL, 1, { L(RAX, 32) } },
	{ "maskmovdqu xmm0,xmm1", B(0x66, 0x0f, 0xf7, 0xc1), 0, NULL, 1, { S(RDI, 16) } },
	{ "xlat BYTE PTR ds:[rbx]", B(0xd7), 0, NULL, 1, { L(RBX + (RAX & 0xff), 1) } },
	{ "div QWORD PTR [rbx]", B(0x48, 0xf7, 0x33), 0, NULL, 1, { L(RBX, 8) } },
	{ "imul eax,DWORD PTR [rbx],0x5", B(0x6b, 0x03, 0x05), 0, NULL, 1, { L(RBX, 4) } },
	{ "movbe DWORD PTR [rbx],eax", B(0x0f, 0x38, 0xf1, 0x03), 0, NULL, 1, { S(RBX, 4) } },
	{ "vmovups xmm0{k1}{z},XMMWORD PTR [rax]", B(0x62, 0xf1, 0x7c, 0x89, 0x10, 0x00), 0, NULL, 1, { L(RAX, 16) } },
	{ "vpcompressd ZMMWORD PTR [rax]{k1},zmm0", B(0x62, 0xf2, 0x7d, 0x49, 0x8b, 0x00), 0, NULL, 1, { S(RAX, 64) } },
	{ "mov eax,DWORD PTR [r12d+ebx*1]", B(0x67, 0x41, 0x8b, 0x04, 0x1c), 0, NULL, 1, { L((R12 + RBX) & 0xffffffff, 4) } },
	{ "mov eax,DWORD PTR [eip+0x10]", B(0x67, 0x8b, 0x05, 0x10, 0x00, 0x00, 0x00), 0, NULL, 1, { L((PC + 7 + 0x10) & 0xffffffff, 4) } },
	{ "mov rax,QWORD PTR [rsp+rbp*2-0x20]", B(0x48, 0x8b, 0x44, 0x6c, 0xe0), 0, NULL, 1, { L(RSP + RBP * 2 - 0x20, 8) } },
	{ "mov r8,QWORD PTR [r13+r14*8+0x0]", B(0x4f, 0x8b, 0x44, 0xf5, 0x00), 0, NULL, 1, { L(R13 + R14 * 8, 8) } },
	{ "enter 0x10,0x3 (truncated to DECODE_MAX_REFS)", B(0xc8, 0x10, 0x00, 0x03), 0, NULL, 4, { S(RSP - 8, 8), L(RBP - 8, 8), S(RSP - 16, 8), L(RBP - 16, 8) } },
	/* register-dependent variants */
	{ "rep movs BYTE PTR es:[rdi],BYTE PTR ds:[rsi] (rcx=0)", B(0xf3, 0xa4), F_REP, rcx_zero, 0, { { 0 } } },
	{ "rep stos QWORD PTR es:[rdi],rax (rcx=0)", B(0xf3, 0x48, 0xab), F_REP, rcx_zero, 0, { { 0 } } },
	{ "repnz scas al,BYTE PTR es:[rdi] (rcx=0)", B(0xf2, 0xae), F_REP, rcx_zero, 0, { { 0 } } },
	{ "movs BYTE PTR es:[rdi],BYTE PTR ds:[rsi] (rcx=0, no rep)", B(0xa4), 0, rcx_zero, 2, { L(RSI, 1), S(RDI, 1) } },
	{ "rep movs BYTE PTR es:[edi],BYTE PTR ds:[esi] (ecx=0)", B(0x67, 0xf3, 0xa4), F_REP, rcx_high_only, 0, { { 0 } } },
	{ "rep movs BYTE PTR es:[rdi],BYTE PTR ds:[rsi] (rcx=2^32)", B(0xf3, 0xa4), F_REP, rcx_high_only, 2, { L(RSI, 1), S(RDI, 1) } },
	{ "movs BYTE PTR es:[edi],BYTE PTR ds:[esi] (high rsi/rdi)", B(0x67, 0xa4), 0, rsi_rdi_high, 2, { L(RSI, 1), S(RDI, 1) } },
	{ "movs BYTE PTR es:[rdi],BYTE PTR ds:[rsi] (high rsi/rdi)", B(0xa4), 0, rsi_rdi_high, 2, { L(0xffff000000000000ull | RSI, 1), S(0x0000000100000000ull | RDI, 1) } },
	{ "bt DWORD PTR [rbx],eax (eax=-33)", B(0x0f, 0xa3, 0x03), 0, eax_minus33, 1, { L(RBX - 8, 4) } },
};

/* clang-format on */

#define NCASES (sizeof cases / sizeof cases[0])

static int setup_decoder(void **state)
{
	decoder *d;
	if (decoder_new(&d) != LOMAS_OK)
		return -1;
	*state = d;
	return 0;
}

static int teardown_decoder(void **state)
{
	decoder_free(*state);
	return 0;
}

static const char *kind_name(int k)
{
	return k == LOMAS_REF_LOAD ? "load" : k == LOMAS_REF_STORE ? "store" : "?";
}

/* Compare one decoded instruction with a row; print the row on mismatch. */
static int check_case(const tcase *c, const decode_insn *in, uint64_t pc)
{
	int bad = 0;
	if (in->pc != pc || in->len != c->len || in->nrefs != c->nrefs ||
	    in->rep != !!(c->flags & F_REP) || in->branch != !!(c->flags & F_BR) ||
	    in->syscall != !!(c->flags & F_SYS))
		bad = 1;
	for (int i = 0; !bad && i < c->nrefs; i++)
		if (in->refs[i].addr != c->refs[i].addr || in->refs[i].size != c->refs[i].size ||
		    in->refs[i].kind != c->refs[i].kind)
			bad = 1;
	if (bad) {
		print_message("MISMATCH for `%s` (decoded as `%s`): len %u/%u nrefs %u/%d rep %d "
		              "branch %d syscall %d\n",
		              c->listing, in->text, in->len, c->len, in->nrefs, c->nrefs, in->rep,
		              in->branch, in->syscall);
		for (int i = 0; i < in->nrefs; i++)
			print_message("  got  %s 0x%" PRIx64 " size %u\n",
			              kind_name(in->refs[i].kind), in->refs[i].addr,
			              in->refs[i].size);
		for (int i = 0; i < c->nrefs; i++)
			print_message("  want %s 0x%" PRIx64 " size %u\n",
			              kind_name(c->refs[i].kind), c->refs[i].addr, c->refs[i].size);
	}
	return bad;
}

static void test_table(void **state)
{
	decoder *d = *state;
	int failures = 0;
	for (size_t i = 0; i < NCASES; i++) {
		const tcase *c = &cases[i];
		struct user_regs_struct regs = base_regs();
		uint8_t buf[DECODE_MAX_LEN];
		decode_insn in;
		lomas_status st;
		/* trailing bytes (nop) must not change the length */
		memset(buf, 0x90, sizeof buf);
		memcpy(buf, c->code, c->len);
		if (c->setup)
			c->setup(&regs);
		memset(&in, 0xa5, sizeof in);
		st = decode_bytes(d, buf, sizeof buf, PC, &regs, &in);
		if (st != LOMAS_OK) {
			print_message("FAILED to decode `%s`: %s\n", c->listing,
			              lomas_error_message());
			failures++;
			continue;
		}
		failures += check_case(c, &in, PC);
		/* exactly the instruction's bytes are enough */
		st = decode_bytes(d, c->code, c->len, PC, &regs, &in);
		if (st != LOMAS_OK || in.len != c->len) {
			print_message("FAILED with exact length: `%s`\n", c->listing);
			failures++;
		}
	}
	print_message("%zu table rows\n", NCASES);
	assert_int_equal(failures, 0);
}

static void test_text(void **state)
{
	decoder *d = *state;
	struct user_regs_struct regs = base_regs();
	decode_insn in;
	const uint8_t mov[] = {0x48, 0x8b, 0x44, 0x8b, 0x10};
	const uint8_t rep[] = {0xf3, 0xa4};
	const uint8_t ret[] = {0xc3};
	assert_int_equal(decode_bytes(d, mov, sizeof mov, PC, &regs, &in), LOMAS_OK);
	assert_string_equal(in.text, "mov rax, qword ptr [rbx + rcx*4 + 0x10]");
	assert_int_equal(decode_bytes(d, rep, sizeof rep, PC, &regs, &in), LOMAS_OK);
	assert_non_null(strstr(in.text, "rep movsb"));
	assert_int_equal(decode_bytes(d, ret, sizeof ret, PC, &regs, &in), LOMAS_OK);
	assert_string_equal(in.text, "ret");
}

static void test_invalid(void **state)
{
	decoder *d = *state;
	struct user_regs_struct regs = base_regs();
	decode_insn in;
	static const struct {
		uint8_t b[4];
		size_t n;
	} bad[] = {
	    {{0x06}, 1},             /* push es: invalid in 64-bit mode */
	    {{0xd6}, 1},             /* salc: invalid in 64-bit mode */
	    {{0x48, 0x8b}, 2},       /* mov without its ModRM byte */
	    {{0xc4}, 1},             /* lone VEX prefix */
	    {{0xf0, 0x90}, 2},       /* lock nop */
	    {{0x0f, 0x04}, 2},       /* undefined 0f 04 */
	    {{0x48, 0x8b, 0x44}, 3}, /* missing SIB and displacement */
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		assert_int_equal(decode_bytes(d, bad[i].b, bad[i].n, PC, &regs, &in),
		                 LOMAS_EFORMAT);
		assert_non_null(strstr(lomas_error_message(), "0x401000"));
	}
	assert_int_equal(decode_bytes(d, bad[0].b, 0, PC, &regs, &in), LOMAS_EFORMAT);
	assert_int_equal(decode_bytes(d, NULL, 4, PC, &regs, &in), LOMAS_EFORMAT);
	assert_int_equal(decode_bytes(d, bad[0].b, 1, PC, NULL, &in), LOMAS_EINVAL);
}

/* ------------------------------------------------------------ decoder_at */

/*
 * Code the child runs nothing of but that the parent decodes in the child:
 *   +0  48 8b 44 8b 10        mov rax, qword ptr [rbx+rcx*4+0x10]
 *   +5  48 01 03              add qword ptr [rbx], rax
 *   +8  f3 a4                 rep movsb
 *   +10 64 48 8b 04 25 28 00 00 00  mov rax, qword ptr fs:[0x28]
 *   +19 c3                    ret
 */
__asm__(".text\n"
        ".globl lomas_test_decode_probe\n"
        ".hidden lomas_test_decode_probe\n"
        ".type lomas_test_decode_probe, @function\n"
        "lomas_test_decode_probe:\n"
        ".byte 0x48, 0x8b, 0x44, 0x8b, 0x10\n"
        ".byte 0x48, 0x01, 0x03\n"
        ".byte 0xf3, 0xa4\n"
        ".byte 0x64, 0x48, 0x8b, 0x04, 0x25, 0x28, 0x00, 0x00, 0x00\n"
        ".byte 0xc3\n"
        ".size lomas_test_decode_probe, .-lomas_test_decode_probe\n");
extern const uint8_t lomas_test_decode_probe[];

#define SCRATCH_PAGES 4 /* nops, followed by an unmapped page */
#define PAGE 4096u

typedef struct child {
	pid_t pid;
	struct user_regs_struct regs;
	uint8_t *scratch; /* SCRATCH_PAGES mapped pages of nop, then a hole */
} child;

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Fork a child stopped under ptrace; false (and the test skips) if ptrace is not allowed. */
static bool child_start(child *c)
{
	int status;
	uint8_t *m = mmap(NULL, (SCRATCH_PAGES + 1) * PAGE, PROT_READ | PROT_WRITE,
	                  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(m != MAP_FAILED);
	memset(m, 0x90, SCRATCH_PAGES * PAGE);
	/* mov rax, qword ptr [rbx] ending exactly at the hole */
	m[SCRATCH_PAGES * PAGE - 3] = 0x48;
	m[SCRATCH_PAGES * PAGE - 2] = 0x8b;
	m[SCRATCH_PAGES * PAGE - 1] = 0x03;
	assert_int_equal(munmap(m + SCRATCH_PAGES * PAGE, PAGE), 0);
	c->scratch = m;
	c->pid = fork();
	assert_true(c->pid >= 0);
	if (c->pid == 0) {
		if (ptrace(PTRACE_TRACEME, 0, NULL, NULL) != 0)
			_exit(3);
		raise(SIGSTOP);
		_exit(0);
	}
	assert_int_equal(waitpid(c->pid, &status, 0), c->pid);
	if (!WIFSTOPPED(status) || ptrace(PTRACE_GETREGS, c->pid, NULL, &c->regs) != 0) {
		if (!WIFEXITED(status))
			kill(c->pid, SIGKILL);
		waitpid(c->pid, &status, 0);
		munmap(m, SCRATCH_PAGES * PAGE);
		return false;
	}
	return true;
}

static void child_stop(child *c)
{
	int status;
	kill(c->pid, SIGKILL);
	waitpid(c->pid, &status, 0);
	munmap(c->scratch, SCRATCH_PAGES * PAGE);
}

static uint64_t stat_hits(const decoder *d)
{
	decode_stats s;
	decoder_stats(d, &s);
	return s.hits;
}

static uint64_t stat_misses(const decoder *d)
{
	decode_stats s;
	decoder_stats(d, &s);
	return s.misses;
}

static void test_at(void **state)
{
	decoder *d = *state;
	child c;
	struct user_regs_struct r;
	decode_insn in;
	uint64_t probe = (uint64_t)(uintptr_t)lomas_test_decode_probe, self_fs;
	long word;

	if (!child_start(&c)) {
		print_message("ptrace not permitted here: skipping\n");
		skip();
	}
	/* glibc keeps the TCB's own address at fs:0, so it equals fs_base; a fork child shares it
	 */
	__asm__ volatile("mov %%fs:0, %0" : "=r"(self_fs));
	assert_int_equal(c.regs.fs_base, self_fs);

	decoder_invalidate(d, 0, UINT64_MAX);
	r = c.regs;
	r.rip = probe;
	r.rbx = 0x1000;
	r.rcx = 2;
	assert_int_equal(decoder_at(d, c.pid, &r, &in), LOMAS_OK);
	assert_int_equal(in.pc, probe);
	assert_int_equal(in.len, 5);
	assert_int_equal(in.nrefs, 1);
	assert_int_equal(in.refs[0].addr, 0x1000 + 2 * 4 + 0x10);
	assert_int_equal(in.refs[0].size, 8);
	assert_int_equal(in.refs[0].kind, LOMAS_REF_LOAD);
	assert_string_equal(in.text, "mov rax, qword ptr [rbx + rcx*4 + 0x10]");
	assert_int_equal(stat_misses(d), 1);
	assert_int_equal(stat_hits(d), 0);

	/* the hit path recomputes addresses from the new registers */
	r.rbx = 0x5000;
	assert_int_equal(decoder_at(d, c.pid, &r, &in), LOMAS_OK);
	assert_int_equal(in.refs[0].addr, 0x5000 + 2 * 4 + 0x10);
	assert_int_equal(stat_hits(d), 1);

	r.rip = probe + 5;
	assert_int_equal(decoder_at(d, c.pid, &r, &in), LOMAS_OK);
	assert_int_equal(in.nrefs, 2);
	assert_int_equal(in.refs[0].kind, LOMAS_REF_LOAD);
	assert_int_equal(in.refs[1].kind, LOMAS_REF_STORE);
	assert_int_equal(in.refs[1].addr, 0x5000);

	r.rip = probe + 8;
	r.rcx = 0;
	assert_int_equal(decoder_at(d, c.pid, &r, &in), LOMAS_OK);
	assert_true(in.rep);
	assert_int_equal(in.nrefs, 0);
	r.rcx = 7;
	r.rsi = 0xa000;
	r.rdi = 0xb000;
	assert_int_equal(decoder_at(d, c.pid, &r, &in), LOMAS_OK);
	assert_int_equal(in.nrefs, 2);
	assert_int_equal(in.refs[0].addr, 0xa000);
	assert_int_equal(in.refs[1].addr, 0xb000);

	/* TLS access with the child's real fs_base */
	r.rip = probe + 10;
	assert_int_equal(decoder_at(d, c.pid, &r, &in), LOMAS_OK);
	assert_int_equal(in.len, 9);
	assert_int_equal(in.refs[0].addr, self_fs + 0x28);

	/* single-stepping a loop over the first three instructions decodes once */
	{
		uint64_t m0 = stat_misses(d), h0 = stat_hits(d);
		for (int it = 0; it < 1000; it++) {
			static const unsigned off[] = {0, 5, 8};
			for (int k = 0; k < 3; k++) {
				r.rip = probe + off[k];
				assert_int_equal(decoder_at(d, c.pid, &r, &in), LOMAS_OK);
			}
		}
		assert_int_equal(stat_misses(d), m0);
		assert_int_equal(stat_hits(d), h0 + 3000);
	}

	/* rewrite the first instruction in the child: mov [rbx+rcx*4+0x10], rax (0x8b -> 0x89) */
	errno = 0;
	word = ptrace(PTRACE_PEEKDATA, c.pid, (void *)(uintptr_t)probe, NULL);
	assert_int_equal(errno, 0);
	((uint8_t *)&word)[1] = 0x89;
	assert_int_equal(ptrace(PTRACE_POKEDATA, c.pid, (void *)(uintptr_t)probe, (void *)word), 0);
	r.rip = probe;
	r.rbx = 0x1000;
	r.rcx = 2;
	assert_int_equal(decoder_at(d, c.pid, &r, &in), LOMAS_OK);
	assert_int_equal(in.refs[0].kind, LOMAS_REF_LOAD); /* stale: served from the cache */
	decoder_invalidate(d, probe + 4, probe + 5);       /* overlaps only the last byte */
	{
		uint64_t m0 = stat_misses(d);
		assert_int_equal(decoder_at(d, c.pid, &r, &in), LOMAS_OK);
		assert_int_equal(in.refs[0].kind, LOMAS_REF_STORE);
		assert_int_equal(in.refs[0].addr, 0x1000 + 2 * 4 + 0x10);
		assert_int_equal(stat_misses(d), m0 + 1);
		r.rip = probe + 5; /* untouched by the invalidation */
		assert_int_equal(decoder_at(d, c.pid, &r, &in), LOMAS_OK);
		assert_int_equal(stat_misses(d), m0 + 1);
		/* a large range (full-table scan) that ends before the probe keeps it */
		decoder_invalidate(d, probe - 100000, probe);
		/* a large range after the rep movsb (probe+8, 2 bytes) keeps it too */
		decoder_invalidate(d, probe + 10, probe + 100000);
		decoder_invalidate(d, probe + 8, probe + 8); /* empty range: no effect */
		r.rip = probe + 8;
		assert_int_equal(decoder_at(d, c.pid, &r, &in), LOMAS_OK);
		assert_int_equal(stat_misses(d), m0 + 1);
		/* a large range covering it drops it */
		decoder_invalidate(d, probe + 9, probe + 100000);
		assert_int_equal(decoder_at(d, c.pid, &r, &in), LOMAS_OK);
		assert_int_equal(stat_misses(d), m0 + 2);
	}

	/* an instruction that ends exactly where the mapping ends, with both readers */
	for (int peek = 0; peek <= 1; peek++) {
		uint64_t end = (uint64_t)(uintptr_t)c.scratch + SCRATCH_PAGES * PAGE;
		decoder_set_peek_only(d, peek);
		decoder_invalidate(d, 0, UINT64_MAX);
		r.rip = end - 3;
		r.rbx = 0x7000;
		assert_int_equal(decoder_at(d, c.pid, &r, &in), LOMAS_OK);
		assert_int_equal(in.len, 3);
		assert_int_equal(in.nrefs, 1);
		assert_int_equal(in.refs[0].addr, 0x7000);
		assert_int_equal(in.refs[0].kind, LOMAS_REF_LOAD);
		/* 8b 03 at end-2 is mov eax, [rbx]; the lone 03 at end-1 is an add without its
		 * ModRM */
		r.rip = end - 2;
		assert_int_equal(decoder_at(d, c.pid, &r, &in), LOMAS_OK);
		assert_int_equal(in.len, 2);
		assert_int_equal(in.refs[0].size, 4);
		r.rip = end - 1;
		assert_int_equal(decoder_at(d, c.pid, &r, &in), LOMAS_EFORMAT);
		assert_non_null(strstr(lomas_error_message(), "0x"));
		/* nothing mapped at all */
		r.rip = end;
		assert_int_equal(decoder_at(d, c.pid, &r, &in), LOMAS_ETARGET);
		/* the rewritten probe through this reader */
		r.rip = probe + 5;
		r.rbx = 0x2000;
		assert_int_equal(decoder_at(d, c.pid, &r, &in), LOMAS_OK);
		assert_int_equal(in.nrefs, 2);
		assert_int_equal(in.refs[1].addr, 0x2000);
	}
	decoder_set_peek_only(d, false);

	/* the cache stays bounded: 4 pages of one-byte nops are 16k distinct pcs */
	{
		decode_stats s;
		uint64_t base = (uint64_t)(uintptr_t)c.scratch;
		decoder_invalidate(d, 0, UINT64_MAX);
		decoder_stats(d, &s);
		assert_int_equal(s.cached, 0);
		for (uint64_t a = 0; a < SCRATCH_PAGES * PAGE - 3; a++) {
			r.rip = base + a;
			assert_int_equal(decoder_at(d, c.pid, &r, &in), LOMAS_OK);
			assert_int_equal(in.len, 1);
			assert_int_equal(in.nrefs, 0);
		}
		decoder_stats(d, &s);
		assert_true(s.cached <= DECODE_CACHE_SLOTS);
		assert_true(s.evictions >= SCRATCH_PAGES * PAGE - 3 - DECODE_CACHE_SLOTS);
	}

	/* cost per instruction: decode only, decoder_at hit, decoder_at miss (read + decode) */
	{
		const int n_dec = 20000, n_hit = 200000, n_miss = 20000;
		uint8_t code[DECODE_MAX_LEN];
		uint64_t t0, t1, t2, t3;
		memset(code, 0x90, sizeof code);
		memcpy(code, lomas_test_decode_probe, 5);
		r.rip = probe;
		t0 = now_ns();
		for (int i = 0; i < n_dec; i++)
			assert_int_equal(decode_bytes(d, code, sizeof code, probe, &r, &in),
			                 LOMAS_OK);
		t1 = now_ns();
		assert_int_equal(decoder_at(d, c.pid, &r, &in), LOMAS_OK);
		for (int i = 0; i < n_hit; i++)
			assert_int_equal(decoder_at(d, c.pid, &r, &in), LOMAS_OK);
		t2 = now_ns();
		for (int i = 0; i < n_miss; i++) {
			decoder_invalidate(d, probe, probe + 1);
			assert_int_equal(decoder_at(d, c.pid, &r, &in), LOMAS_OK);
		}
		t3 = now_ns();
		print_message("decode cost per instruction: decode_bytes %.0f ns, decoder_at cache "
		              "hit %.1f ns, "
		              "decoder_at miss (invalidate + process_vm_readv + decode) %.0f ns\n",
		              (double)(t1 - t0) / n_dec, (double)(t2 - t1) / n_hit,
		              (double)(t3 - t2) / n_miss);
	}
	child_stop(&c);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_table),
	    cmocka_unit_test(test_text),
	    cmocka_unit_test(test_invalid),
	    cmocka_unit_test(test_at),
	};
	return cmocka_run_group_tests(tests, setup_decoder, teardown_decoder);
}

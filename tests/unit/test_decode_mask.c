/*
 * AVX-512 masked moves (lib/decode/decode_mask.c): which references the
 * decoder marks with a mask register, how a mask narrows them (expected
 * addresses and sizes worked out by hand from the encodings and the SDM's
 * element order), and the opmask registers read from a stopped child.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <signal.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#include "decode/decode.h"

#define PC 0x401000ull

static struct user_regs_struct regs(void)
{
	struct user_regs_struct r;
	memset(&r, 0, sizeof r);
	r.rip = PC;
	r.rax = 0x10000;
	r.rbx = 0x20000;
	r.rcx = 0x30000;
	r.rdx = 0x40000;
	r.rsi = 0x50000;
	r.rdi = 0x60000;
	return r;
}

typedef struct mcase {
	const char *listing;
	uint8_t code[12];
	uint8_t len;
	bool marked;   /* the decoder leaves its size to the mask */
	uint8_t k;     /* the mask register */
	uint64_t mask; /* its value in the case */
	uint8_t nrefs; /* after narrowing */
	uint64_t addr; /* ... the reference */
	uint32_t size;
	uint8_t kind;
} mcase;

static const mcase cases[] = {
    /* glibc's memset tail: bytes 8..31 of the line */
    {"vmovdqu8 [rax]{k1}, zmm16",
     {0x62, 0xe1, 0x7f, 0x49, 0x7f, 0x00},
     6,
     true,
     1,
     0xffffff00ull,
     1,
     0x10000 + 8,
     24,
     LOMAS_REF_STORE},
    {"vmovdqu8 [rax]{k1}, zmm16 (all)",
     {0x62, 0xe1, 0x7f, 0x49, 0x7f, 0x00},
     6,
     true,
     1,
     ~0ull,
     1,
     0x10000,
     64,
     LOMAS_REF_STORE},
    {"vmovdqu8 [rax]{k1}, zmm16 (none)",
     {0x62, 0xe1, 0x7f, 0x49, 0x7f, 0x00},
     6,
     true,
     1,
     0,
     0,
     0,
     0,
     0},
    /* 16 dwords: bits 16 and up select nothing */
    {"vmovdqu32 zmm0{k2}{z}, [rbx]",
     {0x62, 0xf1, 0x7e, 0xca, 0x6f, 0x03},
     6,
     true,
     2,
     0x3000cull,
     1,
     0x20000 + 8,
     8,
     LOMAS_REF_LOAD},
    {"vmovdqu32 zmm0{k2}{z}, [rbx] (high bits only)",
     {0x62, 0xf1, 0x7e, 0xca, 0x6f, 0x03},
     6,
     true,
     2,
     0x30000ull,
     0,
     0,
     0,
     0},
    /* 8 floats of a ymm: the last one */
    {"vmovups [rcx+0x40]{k3}, ymm1",
     {0x62, 0xf1, 0x7c, 0x2b, 0x11, 0x49, 0x02},
     7,
     true,
     3,
     0x80,
     1,
     0x30000 + 0x40 + 28,
     4,
     LOMAS_REF_STORE},
    /* a scalar: bit 0 alone decides */
    {"vmovss [rdx]{k4}, xmm0", {0x62, 0xf1, 0x7e, 0x0c, 0x11, 0x02}, 6, true, 4, 0x2, 0, 0, 0, 0},
    {"vmovss [rdx]{k4}, xmm0 (bit 0)",
     {0x62, 0xf1, 0x7e, 0x0c, 0x11, 0x02},
     6,
     true,
     4,
     0x3,
     1,
     0x40000,
     4,
     LOMAS_REF_STORE},
    /* compress: the 8 selected dwords packed at the start */
    {"vpcompressd [rdi]{k5}, zmm1",
     {0x62, 0xf2, 0x7d, 0x4d, 0x8b, 0x0f},
     6,
     true,
     5,
     0xf0f0,
     1,
     0x60000,
     32,
     LOMAS_REF_STORE},
    {"vexpandps zmm0{k6}, [rsi]",
     {0x62, 0xf2, 0x7d, 0x4e, 0x88, 0x06},
     6,
     true,
     6,
     0x8000,
     1,
     0x50000,
     4,
     LOMAS_REF_LOAD},
    /* 8 words from rax+2: words 1 and 2 */
    {"vmovdqu16 [rax+2]{k7}, xmm3",
     {0x62, 0xf1, 0xff, 0x0f, 0x7f, 0x98, 0x02, 0x00, 0x00, 0x00},
     10,
     true,
     7,
     0x6,
     1,
     0x10000 + 2 + 2,
     4,
     LOMAS_REF_STORE},
    /* not masked, and a masked arithmetic source: full size */
    {"vmovdqu8 [rax], zmm16",
     {0x62, 0xe1, 0x7f, 0x48, 0x7f, 0x00},
     6,
     false,
     1,
     0,
     1,
     0x10000,
     64,
     LOMAS_REF_STORE},
    {"vaddps zmm0{k1}, zmm1, [rax]",
     {0x62, 0xf1, 0x74, 0x49, 0x58, 0x00},
     6,
     false,
     1,
     0,
     1,
     0x10000,
     64,
     LOMAS_REF_LOAD},
};

static void test_narrowing(void **state)
{
	decoder *d = NULL;
	(void)state;
	assert_int_equal(decoder_new(&d), LOMAS_OK);
	for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
		const mcase *c = &cases[i];
		struct user_regs_struct r = regs();
		uint64_t k[8] = {0};
		decode_insn in;
		print_message("%s\n", c->listing);
		assert_int_equal(decode_bytes(d, c->code, c->len, PC, &r, &in), LOMAS_OK);
		assert_int_equal(in.len, c->len);
		assert_int_equal(in.nrefs, 1);
		assert_int_equal(decode_has_opmask(&in), c->marked);
		k[c->k] = c->mask;
		decode_apply_opmask(&in, k);
		assert_false(decode_has_opmask(&in));
		assert_int_equal(in.nrefs, c->nrefs);
		if (c->nrefs) {
			assert_int_equal(in.refs[0].addr, c->addr);
			assert_int_equal(in.refs[0].size, c->size);
			assert_int_equal(in.refs[0].kind, c->kind);
		}
	}
	decoder_free(d);
}

/* Without the registers (all bits set): the full operand, as before. */
static void test_unread_is_full_size(void **state)
{
	decoder *d = NULL;
	struct user_regs_struct r = regs();
	uint64_t k[8];
	decode_insn in;
	(void)state;
	memset(k, 0xff, sizeof k);
	assert_int_equal(decoder_new(&d), LOMAS_OK);
	assert_int_equal(decode_bytes(d, cases[0].code, cases[0].len, PC, &r, &in), LOMAS_OK);
	decode_apply_opmask(&in, k);
	assert_int_equal(in.nrefs, 1);
	assert_int_equal(in.refs[0].addr, 0x10000);
	assert_int_equal(in.refs[0].size, 64);
	decoder_free(d);
}

/* k1 and k7 as a child set them, read while it is stopped. */
static void test_read_from_child(void **state)
{
	uint64_t k[8];
	int status;
	pid_t pid;
	(void)state;
	__builtin_cpu_init();
	if (!__builtin_cpu_supports("avx512f")) {
		print_message("no AVX-512 here: nothing to read\n");
		assert_int_equal(decode_read_opmask(getpid(), k), LOMAS_ENOTSUP);
		return;
	}
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		uint64_t a = 0x123456789abcdef0ull, b = 0x55;
		ptrace(PTRACE_TRACEME, 0, NULL, NULL);
		__asm__ volatile("kmovq %0, %%k1\n\t"
		                 "kmovq %1, %%k7\n\t"
		                 "mov $39, %%eax\n\t" /* getpid */
		                 "syscall\n\t"
		                 "mov %%eax, %%edi\n\t"
		                 "mov $19, %%esi\n\t" /* SIGSTOP */
		                 "mov $62, %%eax\n\t" /* kill */
		                 "syscall"
		                 :
		                 : "r"(a), "r"(b)
		                 : "rax", "rdi", "rsi", "rcx", "r11", "memory");
		_exit(0);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFSTOPPED(status) && WSTOPSIG(status) == SIGSTOP);
	assert_int_equal(decode_read_opmask(pid, k), LOMAS_OK);
	assert_int_equal(k[1], 0x123456789abcdef0ull);
	assert_int_equal(k[7], 0x55);
	kill(pid, SIGKILL);
	assert_int_equal(waitpid(pid, &status, 0), pid);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_narrowing),
	    cmocka_unit_test(test_unread_is_full_size),
	    cmocka_unit_test(test_read_from_child),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

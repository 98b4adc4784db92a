/*
 * AVX-512 write masks (opmask registers k1-k7) on memory operands.
 *
 * An EVEX-encoded move with a mask touches only the elements whose mask
 * bit is set: the CPU neither reads nor writes the others (and does not
 * fault on them, Intel SDM vol. 1 §15.6.2 "memory fault suppression"), so
 * neither a data breakpoint nor a page protection sees them. glibc's string
 * functions end with such moves (memset's tail: vmovdqu8 [rax]{k1}, zmm16),
 * and a full-size reference there is a touch the program never made.
 *
 * The template marks the explicit memory operand of the masked moves below
 * with the mask register and the element size; once the registers are known
 * (decoder_opmask_at reads them with PTRACE_GETREGSET NT_X86_XSTATE),
 * decode_apply_opmask narrows each marked reference:
 *   - a masked move (vmovdqu8/16/32/64, vmovdqa32/64, vmovups/aps/upd/apd,
 *     vmovss/sd): from the lowest to the highest selected element; none
 *     selected, no reference;
 *   - compress stores and expand loads (vpcompress*, vcompressp*, vpexpand*,
 *     vexpandp*): the selected elements are packed from the operand's start,
 *     so popcount(mask) elements there.
 * A span may still cover unselected elements between two selected ones (a
 * mask with holes; compilers' and glibc's tail masks have none): it is exact
 * for the lines a 64-byte access touches, not for every word. Other masked
 * instructions with a memory operand (arithmetic with a memory source,
 * conversions, broadcasts) keep the full operand size.
 */
#include <errno.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/uio.h>

#include <cpuid.h>
#include <elf.h>

#include "decode_impl.h"

/* The masked moves: element size in bytes, or 0 when not one of them. */
static uint8_t masked_move_elem(const char *mn, bool *compress)
{
	static const struct {
		const char *mn;
		uint8_t elem;
		bool compress;
	} tab[] = {
	    {"vmovdqu8", 1, false},   {"vmovdqu16", 2, false},  {"vmovdqu32", 4, false},
	    {"vmovdqu64", 8, false},  {"vmovdqa32", 4, false},  {"vmovdqa64", 8, false},
	    {"vmovups", 4, false},    {"vmovaps", 4, false},    {"vmovupd", 8, false},
	    {"vmovapd", 8, false},    {"vmovss", 4, false},     {"vmovsd", 8, false},
	    {"vpcompressb", 1, true}, {"vpcompressw", 2, true}, {"vpcompressd", 4, true},
	    {"vpcompressq", 8, true}, {"vcompressps", 4, true}, {"vcompresspd", 8, true},
	    {"vpexpandb", 1, true},   {"vpexpandw", 2, true},   {"vpexpandd", 4, true},
	    {"vpexpandq", 8, true},   {"vexpandps", 4, true},   {"vexpandpd", 8, true},
	};
	for (size_t i = 0; i < sizeof tab / sizeof *tab; i++)
		if (strcmp(mn, tab[i].mn) == 0) {
			*compress = tab[i].compress;
			return tab[i].elem;
		}
	return 0;
}

/* EVEX.aaa, the mask register of an EVEX instruction (0: none). */
static uint8_t evex_mask(const uint8_t *b, size_t n)
{
	size_t i = 0;
	/* Legacy prefixes may precede EVEX (REX may not: #UD). */
	while (i < n && (b[i] == 0x26 || b[i] == 0x2e || b[i] == 0x36 || b[i] == 0x3e ||
	                 b[i] == 0x64 || b[i] == 0x65 || b[i] == 0x66 || b[i] == 0x67 ||
	                 b[i] == 0xf0 || b[i] == 0xf2 || b[i] == 0xf3))
		i++;
	/* 62 P0 P1 P2: in 64-bit mode 0x62 is always EVEX; aaa is P2's low 3 bits. */
	if (i + 3 >= n || b[i] != 0x62)
		return 0;
	return b[i + 3] & 7;
}

void tmpl_mark_opmask(tmpl *t, const cs_insn *ci)
{
	const cs_x86 *x = &ci->detail->x86;
	bool compress = false;
	uint8_t k = evex_mask(ci->bytes, ci->size), elem;
	if (k == 0 || (elem = masked_move_elem(ci->mnemonic, &compress)) == 0)
		return;
	for (int i = 0; i < x->op_count; i++)
		if (x->operands[i].type == X86_OP_MEM &&
		    x->operands[i].avx_bcast != X86_AVX_BCAST_INVALID)
			return; /* embedded broadcast: one element, kept */
	for (int i = 0; i < t->nrefs; i++) {
		tmpl_ref *r = &t->refs[i];
		if (r->size < elem || r->size % elem)
			continue;
		r->mask = k;
		r->elem = elem;
		r->compress = compress;
	}
}

bool decode_has_opmask(const decode_insn *in)
{
	for (int i = 0; i < in->nrefs; i++)
		if (in->refs[i].mask)
			return true;
	return false;
}

void decode_apply_opmask(decode_insn *in, const uint64_t k[8])
{
	int o = 0;
	for (int i = 0; i < in->nrefs; i++) {
		decode_ref r = in->refs[i];
		if (r.mask && r.elem) {
			uint32_t n = r.size / r.elem;
			uint64_t m = k[r.mask & 7];
			if (n < 64)
				m &= (1ull << n) - 1;
			if (m == 0)
				continue; /* nothing selected: no access */
			if (r.compress) {
				r.size = (uint32_t)__builtin_popcountll(m) * r.elem;
			} else {
				unsigned lo = (unsigned)__builtin_ctzll(m);
				unsigned hi = 63u - (unsigned)__builtin_clzll(m);
				r.addr += (uint64_t)lo * r.elem;
				r.size = (hi - lo + 1) * r.elem;
			}
		}
		r.mask = 0;
		r.elem = 0;
		r.compress = false;
		in->refs[o++] = r;
	}
	in->nrefs = (uint8_t)o;
}

/*
 * Where the opmask state (XSAVE component 5, k0-k7, 8 bytes each) sits in
 * the standard-format XSAVE area that NT_X86_XSTATE returns: CPUID leaf
 * 0Dh, sub-leaf 5, EBX (its size in EAX; 0 without AVX-512).
 */
static uint32_t opmask_offset(void)
{
	unsigned a = 0, b = 0, c = 0, d = 0;
	if (!__get_cpuid_count(0xd, 5, &a, &b, &c, &d) || a < 64)
		return 0;
	return b;
}

lomas_status decode_read_opmask(pid_t tid, uint64_t k[8])
{
	/* Enough for the header and k0-k7 (at 1088 on every CPU so far); the
	 * kernel copies no more than this (a multiple of its 8-byte unit). */
	_Alignas(64) uint8_t buf[4096];
	uint32_t off = opmask_offset();
	struct iovec io = {buf, sizeof buf};
	uint64_t bv;
	memset(k, 0, 8 * sizeof *k);
	if (off == 0 || off + 64 > sizeof buf)
		return error_set(LOMAS_ENOTSUP, "no AVX-512 opmask state on this CPU");
	if (ptrace(PTRACE_GETREGSET, tid, (void *)(uintptr_t)NT_X86_XSTATE, &io) < 0)
		return error_set(LOMAS_ETARGET, "PTRACE_GETREGSET(NT_X86_XSTATE) of %d: %s",
		                 (int)tid, strerror(errno));
	if (io.iov_len < off + 64 || io.iov_len < 520)
		return error_set(LOMAS_ENOTSUP, "the XSAVE area of %d has no opmask state",
		                 (int)tid);
	/* XSTATE_BV (header at 512): component 5 clear = its init state, all zero. */
	memcpy(&bv, buf + 512, sizeof bv);
	if (bv & (1u << 5))
		memcpy(k, buf + off, 8 * sizeof *k);
	return LOMAS_OK;
}

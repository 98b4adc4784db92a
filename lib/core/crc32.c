/*
 * CRC-32 (reflected polynomial 0xEDB88320), same values as zlib.
 *
 * Where the CPU has PCLMULQDQ and SSE4.1 (every x86-64 since about 2010),
 * runs of 64 bytes or more are folded with carry-less multiplication, four
 * 128-bit lanes at a time, then Barrett-reduced (Gopal et al., "Fast CRC
 * Computation for Generic Polynomials Using PCLMULQDQ", Intel 2009; the
 * bit-reflected constants are the paper's): about ten times the speed of the
 * tables, which matters because every profile written (an instrumented
 * program's exit included) and read is checked end to end. The rest, and
 * every byte on other CPUs, goes through slicing-by-8 (eight tables, eight
 * bytes per step).
 */
#include <string.h>

#include "core.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <immintrin.h>
#define CRC_CLMUL 1

#define CLMUL_TARGET __attribute__((target("pclmul,sse4.1")))

/* crc is the running (pre-inverted) register; len >= 64 and a multiple of 16. */
CLMUL_TARGET static uint32_t crc32_clmul(uint32_t crc, const unsigned char *p, size_t len)
{
	const __m128i k1k2 = _mm_set_epi64x(0x01c6e41596, 0x0154442bd4);
	const __m128i k3k4 = _mm_set_epi64x(0x00ccaa009e, 0x01751997d0);
	const __m128i k5k0 = _mm_set_epi64x(0, 0x0163cd6124);
	const __m128i poly = _mm_set_epi64x(0x01f7011641, 0x01db710641);
	const __m128i mask32 = _mm_setr_epi32(~0, 0, ~0, 0);
	__m128i x1, x2, x3, x4, x5, x6, x7, x8;

	x1 = _mm_loadu_si128((const __m128i *)(const void *)(p + 0));
	x2 = _mm_loadu_si128((const __m128i *)(const void *)(p + 16));
	x3 = _mm_loadu_si128((const __m128i *)(const void *)(p + 32));
	x4 = _mm_loadu_si128((const __m128i *)(const void *)(p + 48));
	x1 = _mm_xor_si128(x1, _mm_cvtsi32_si128((int)crc));
	p += 64;
	len -= 64;
	/* Four lanes, 64 bytes per step. */
	while (len >= 64) {
		x5 = _mm_clmulepi64_si128(x1, k1k2, 0x00);
		x6 = _mm_clmulepi64_si128(x2, k1k2, 0x00);
		x7 = _mm_clmulepi64_si128(x3, k1k2, 0x00);
		x8 = _mm_clmulepi64_si128(x4, k1k2, 0x00);
		x1 = _mm_clmulepi64_si128(x1, k1k2, 0x11);
		x2 = _mm_clmulepi64_si128(x2, k1k2, 0x11);
		x3 = _mm_clmulepi64_si128(x3, k1k2, 0x11);
		x4 = _mm_clmulepi64_si128(x4, k1k2, 0x11);
		x1 = _mm_xor_si128(_mm_xor_si128(x1, x5),
		                   _mm_loadu_si128((const __m128i *)(const void *)(p + 0)));
		x2 = _mm_xor_si128(_mm_xor_si128(x2, x6),
		                   _mm_loadu_si128((const __m128i *)(const void *)(p + 16)));
		x3 = _mm_xor_si128(_mm_xor_si128(x3, x7),
		                   _mm_loadu_si128((const __m128i *)(const void *)(p + 32)));
		x4 = _mm_xor_si128(_mm_xor_si128(x4, x8),
		                   _mm_loadu_si128((const __m128i *)(const void *)(p + 48)));
		p += 64;
		len -= 64;
	}
	/* Fold the four lanes into one. */
	x5 = _mm_clmulepi64_si128(x1, k3k4, 0x00);
	x1 = _mm_clmulepi64_si128(x1, k3k4, 0x11);
	x1 = _mm_xor_si128(_mm_xor_si128(x1, x2), x5);
	x5 = _mm_clmulepi64_si128(x1, k3k4, 0x00);
	x1 = _mm_clmulepi64_si128(x1, k3k4, 0x11);
	x1 = _mm_xor_si128(_mm_xor_si128(x1, x3), x5);
	x5 = _mm_clmulepi64_si128(x1, k3k4, 0x00);
	x1 = _mm_clmulepi64_si128(x1, k3k4, 0x11);
	x1 = _mm_xor_si128(_mm_xor_si128(x1, x4), x5);
	/* One lane, 16 bytes per step. */
	while (len >= 16) {
		x2 = _mm_loadu_si128((const __m128i *)(const void *)p);
		x5 = _mm_clmulepi64_si128(x1, k3k4, 0x00);
		x1 = _mm_clmulepi64_si128(x1, k3k4, 0x11);
		x1 = _mm_xor_si128(_mm_xor_si128(x1, x2), x5);
		p += 16;
		len -= 16;
	}
	/* 128 bits to 64. */
	x2 = _mm_clmulepi64_si128(x1, k3k4, 0x10);
	x1 = _mm_xor_si128(_mm_srli_si128(x1, 8), x2);
	x2 = _mm_srli_si128(x1, 4);
	x1 = _mm_and_si128(x1, mask32);
	x1 = _mm_clmulepi64_si128(x1, k5k0, 0x00);
	x1 = _mm_xor_si128(x1, x2);
	/* Barrett reduction to 32 bits. */
	x2 = _mm_and_si128(x1, mask32);
	x2 = _mm_clmulepi64_si128(x2, poly, 0x10);
	x2 = _mm_and_si128(x2, mask32);
	x2 = _mm_clmulepi64_si128(x2, poly, 0x00);
	x1 = _mm_xor_si128(x1, x2);
	return (uint32_t)_mm_extract_epi32(x1, 1);
}

/* 1: use crc32_clmul; 0: not; -1: not asked yet. */
static int clmul_state = -1;

static int clmul_usable(void)
{
	int s = __atomic_load_n(&clmul_state, __ATOMIC_RELAXED);
	if (s < 0) {
		unsigned a, b, c, d;
		s = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_PCLMUL) && (c & bit_SSE4_1);
		__atomic_store_n(&clmul_state, s, __ATOMIC_RELAXED);
	}
	return s;
}

void crc32_force_portable(int on)
{
	__atomic_store_n(&clmul_state, on ? 0 : -1, __ATOMIC_RELAXED);
}
#else
void crc32_force_portable(int on)
{
	(void)on;
}
#endif

static uint32_t table[8][256];
static int table_ready;

static void table_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
		table[0][i] = c;
	}
	/* table[k][i]: the CRC of byte i followed by k zero bytes. */
	for (uint32_t i = 0; i < 256; i++)
		for (int k = 1; k < 8; k++)
			table[k][i] = (table[k - 1][i] >> 8) ^ table[0][table[k - 1][i] & 0xff];
	__atomic_store_n(&table_ready, 1, __ATOMIC_RELEASE);
}

uint32_t crc32_update(uint32_t crc, const void *data, size_t len)
{
	const unsigned char *p = data;
	/* Racing initialisations write identical values, so a plain flag suffices. */
	if (!__atomic_load_n(&table_ready, __ATOMIC_ACQUIRE))
		table_init();
	crc = ~crc;
#ifdef CRC_CLMUL
	if (len >= 64 && clmul_usable()) {
		size_t chunk = len & ~(size_t)15;
		crc = crc32_clmul(crc, p, chunk);
		p += chunk;
		len -= chunk;
	}
#endif
	while (len >= 8) {
		/* Little-endian assembly of the next 8 bytes, independent of host order. */
		uint32_t lo = crc ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
		                     (uint32_t)p[3] << 24);
		uint32_t hi = (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16 |
		              (uint32_t)p[7] << 24;
		crc = table[7][lo & 0xff] ^ table[6][(lo >> 8) & 0xff] ^
		      table[5][(lo >> 16) & 0xff] ^ table[4][lo >> 24] ^ table[3][hi & 0xff] ^
		      table[2][(hi >> 8) & 0xff] ^ table[1][(hi >> 16) & 0xff] ^ table[0][hi >> 24];
		p += 8;
		len -= 8;
	}
	while (len--)
		crc = table[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return ~crc;
}

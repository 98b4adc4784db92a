/*
 * The contract between the inline clock's compiler pass (pass/lomas-pass.cpp,
 * C++) and its runtime (inline.h, runtime.c, hooks.c, lib/sampler's filter;
 * C): what code the pass writes into a program expects of the runtime it is
 * linked with. Plain C preprocessor, includable from both; both include it,
 * so a constant here cannot differ between them. build-lto.sh reads
 * LOMAS_ABI_EXPORTS from it (the C preprocessor prints it), and
 * tests/inline/check_contract.py checks what no compiler can: the symbols a
 * pass-built object asks for are the ones the runtime defines, and the
 * runtime reads the LOMAS_* variables <lomas/inline.h> names.
 *
 * Change anything here and both sides change with it: a program built by an
 * older pass must not be linked with a newer runtime (the static runtime
 * and the plugin are installed together, from one build).
 */
#ifndef LOMAS_INLINE_CONTRACT_H
#define LOMAS_INLINE_CONTRACT_H

/* ---------------------------------------------------------------- symbols */

/*
 * The runtime's symbols that instrumented code names (docs/inline-clock.md):
 *   lomas__fast         initial-exec TLS; its first 8 bytes (offset
 *                       LOMAS_ABI_FAST_COUNTDOWN) are the thread's countdown
 *                       to its next slow-path visit, read as signed
 *   lomas__filter       initial-exec TLS, LOMAS_ABI_FILTER_SIZE +
 *                       LOMAS_ABI_FILTER_PAD bytes (below)
 *   lomas__slow         void (const void *addr, uint64_t info, uintptr_t pc)
 *                       (the sanitizer-coverage hooks)
 *   lomas__slow_pm      void (const void *addr, uint64_t info), clang's
 *                       preserve_most convention (the pass)
 *   lomas__range_clean  int (uint64_t first_block, uint64_t nblocks)
 */
#define LOMAS_ABI_FAST "lomas__fast"
#define LOMAS_ABI_FILTER "lomas__filter"
#define LOMAS_ABI_SLOW "lomas__slow"
#define LOMAS_ABI_SLOW_PM "lomas__slow_pm"
#define LOMAS_ABI_RANGE_CLEAN "lomas__range_clean"
#define LOMAS_ABI_FAST_COUNTDOWN 0

/*
 * Every symbol the static runtime keeps visible when build-lto.sh
 * internalizes the rest (comma-separated, for opt's
 * -internalize-public-api-list): the symbols above, the sanitizer-coverage
 * hooks, the --wrap targets of the link recipe and the lomas_inline_* API
 * of <lomas/inline.h>.
 */
#define LOMAS_ABI_EXPORTS                                                                  \
	"__sanitizer_cov_load1,__sanitizer_cov_load2,__sanitizer_cov_load4,"               \
	"__sanitizer_cov_load8,__sanitizer_cov_load16,__sanitizer_cov_store1,"             \
	"__sanitizer_cov_store2,__sanitizer_cov_store4,__sanitizer_cov_store8,"            \
	"__sanitizer_cov_store16,__sanitizer_cov_trace_pc,__sanitizer_cov_trace_pc_guard," \
	"__sanitizer_cov_trace_pc_guard_init,__wrap_pthread_create,__wrap_sigaction,"      \
	"__wrap_signal,__wrap___sysv_signal,lomas_inline_start,lomas_inline_stop,"         \
	"lomas_inline_active,lomas_inline_marker," LOMAS_ABI_SLOW "," LOMAS_ABI_SLOW_PM    \
	"," LOMAS_ABI_FAST "," LOMAS_ABI_FILTER "," LOMAS_ABI_RANGE_CLEAN

/* ----------------------------------------------------------------- filter */

/*
 * The per-thread filter (lib/sampler/sampler.h describes its bytes): one byte
 * per 2^SHIFT-byte block, indexed by the block number modulo 2^BITS. The
 * fast path only tests a byte for non-zero; ANY is the byte of blocks whose
 * tags differ. PAD bytes follow the filter so the pass's range test can load
 * 8 bytes at any index (the first mirrors byte 0).
 */
#define LOMAS_ABI_FILTER_SHIFT 6
#define LOMAS_ABI_FILTER_BITS 16
#define LOMAS_ABI_FILTER_SIZE (1u << LOMAS_ABI_FILTER_BITS)
#define LOMAS_ABI_FILTER_ANY 1u
#define LOMAS_ABI_FILTER_PAD 8u

/* ------------------------------------------------------- reference info */

/*
 * The info word of a slow-path visit (inline.h, "Reference info"): bits 0-7
 * the size in bytes, STORE a store, NEXT_KNOWN the run's next reference is at
 * this one's address plus the signed 16-bit offset at NEXT_SHIFT, and at
 * AFTER_SHIFT (16 bits) the references of the run after this one.
 */
#define LOMAS_ABI_REF_SIZE_MASK 0xffu
#define LOMAS_ABI_REF_STORE 0x100u
#define LOMAS_ABI_REF_NEXT_KNOWN 0x200u
#define LOMAS_ABI_REF_AFTER_SHIFT 16
#define LOMAS_ABI_REF_NEXT_SHIFT 32

#endif /* LOMAS_INLINE_CONTRACT_H */

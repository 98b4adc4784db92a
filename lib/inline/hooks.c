/*
 * The compiler-instrumentation hooks (clang -fsanitize-coverage=func,
 * trace-loads,trace-stores calls __sanitizer_cov_loadN / storeN with the
 * address before every load and store it keeps after optimization).
 *
 * The fast path is a few instructions: count the reference down to the next
 * slow-path visit, then test one filter byte for the reference's 64-byte
 * block. Everything else (starting a sample, the watch table, full-trace
 * mode) is in the out-of-line slow path in runtime.c.
 *
 * Built as LLVM bitcode for the static library, LTO inlines these into the
 * instrumented functions; then the slow path takes the pc of the reference
 * itself with __builtin_return_address(0). In the shared library (no LTO)
 * the hook is a real call, so it passes its own return address instead.
 */
#include <stdint.h>

#include "inline.h"

#define HOOK_API __attribute__((visibility("default")))

#ifdef LOMAS_INLINE_SHARED
#define PC_HINT ((uintptr_t)__builtin_return_address(0))
#else
#define PC_HINT ((uintptr_t)0)
#endif

/* The whole fast path; info = size | REF_STORE_BIT for stores. */
static inline __attribute__((always_inline)) void hook(const void *addr, unsigned info)
{
	if (__builtin_expect((int64_t)--lomas__fast.countdown <= 0, 0) ||
	    __builtin_expect(lomas__filter[((uintptr_t)addr >> FILTER_SHIFT) & FILTER_MASK] != 0,
	                     0))
		lomas__slow(addr, info, PC_HINT);
}

/* Prototypes as in compiler-rt's sanitizer/coverage_interface.h. */
HOOK_API void __sanitizer_cov_load1(uint8_t *addr);
HOOK_API void __sanitizer_cov_load2(uint16_t *addr);
HOOK_API void __sanitizer_cov_load4(uint32_t *addr);
HOOK_API void __sanitizer_cov_load8(uint64_t *addr);
HOOK_API void __sanitizer_cov_load16(__int128 *addr);
HOOK_API void __sanitizer_cov_store1(uint8_t *addr);
HOOK_API void __sanitizer_cov_store2(uint16_t *addr);
HOOK_API void __sanitizer_cov_store4(uint32_t *addr);
HOOK_API void __sanitizer_cov_store8(uint64_t *addr);
HOOK_API void __sanitizer_cov_store16(__int128 *addr);

void __sanitizer_cov_load1(uint8_t *addr)
{
	hook(addr, 1);
}

void __sanitizer_cov_load2(uint16_t *addr)
{
	hook(addr, 2);
}

void __sanitizer_cov_load4(uint32_t *addr)
{
	hook(addr, 4);
}

void __sanitizer_cov_load8(uint64_t *addr)
{
	hook(addr, 8);
}

void __sanitizer_cov_load16(__int128 *addr)
{
	hook(addr, 16);
}

void __sanitizer_cov_store1(uint8_t *addr)
{
	hook(addr, 1 | REF_STORE_BIT);
}

void __sanitizer_cov_store2(uint16_t *addr)
{
	hook(addr, 2 | REF_STORE_BIT);
}

void __sanitizer_cov_store4(uint32_t *addr)
{
	hook(addr, 4 | REF_STORE_BIT);
}

void __sanitizer_cov_store8(uint64_t *addr)
{
	hook(addr, 8 | REF_STORE_BIT);
}

void __sanitizer_cov_store16(__int128 *addr)
{
	hook(addr, 16 | REF_STORE_BIT);
}

/*
 * -fsanitize-coverage=func alone inserts no pc callbacks, but a user who adds
 * trace-pc or trace-pc-guard still links: these do nothing.
 */
HOOK_API void __sanitizer_cov_trace_pc(void);
HOOK_API void __sanitizer_cov_trace_pc_guard(uint32_t *guard);
HOOK_API void __sanitizer_cov_trace_pc_guard_init(uint32_t *start, uint32_t *stop);

void __sanitizer_cov_trace_pc(void)
{
}

void __sanitizer_cov_trace_pc_guard(uint32_t *guard)
{
	(void)guard;
}

void __sanitizer_cov_trace_pc_guard_init(uint32_t *start, uint32_t *stop)
{
	(void)start;
	(void)stop;
}

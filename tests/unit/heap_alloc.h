/*
 * Shared by the programs that drive the sampler core with the C heap
 * (test_phase_sampler.c, tests/dbi/sampler_stream.c): an inline_alloc over
 * calloc, free and realloc. The sampler core allocates only through an
 * inline_alloc (docs/architecture.md: the dbi tool has no libc); the
 * library's own is inline_malloc_alloc in assemble.c, which the stream
 * program's tool build does not compile.
 */
#ifndef LOMAS_TEST_HEAP_ALLOC_H
#define LOMAS_TEST_HEAP_ALLOC_H

#include <stdlib.h>

#include "sampler/sampler.h"

static void *heap_zalloc(size_t bytes)
{
	return calloc(1, bytes);
}

static void heap_release(void *mem, size_t bytes)
{
	(void)bytes;
	free(mem);
}

static void *heap_grow(void *mem, size_t old, size_t bytes)
{
	(void)old;
	return realloc(mem, bytes);
}

static const inline_alloc heap = {heap_zalloc, heap_release, heap_grow};

#endif /* LOMAS_TEST_HEAP_ALLOC_H */

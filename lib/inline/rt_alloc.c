/*
 * The runtime's allocator (see rt_alloc.h): glibc's, until rt_heap_private
 * switches a process (the child writing a profile on a fatal signal) to
 * memory mapped here, handed out in order and never given back (the child
 * ends when the profile is written). Memory from before the switch is
 * never freed; realloc copies out of it (malloc_usable_size reads the
 * chunk's own header, no lock).
 */
#include "rt_alloc.h"

/* This file is built with rt_alloc.h included first too (-include): here
 * the names are glibc's. */
#undef malloc
#undef calloc
#undef realloc
#undef free
#undef strdup
#undef strndup
#undef qsort

#include <malloc.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/mman.h>

#define CHUNK_BYTES (64u << 20)
#define HEADER 16u

static bool private_heap;
static uint8_t *chunk;
static size_t chunk_used, chunk_cap;

void rt_heap_private(void)
{
	private_heap = true;
}

static void *bump(size_t bytes)
{
	size_t need = ((bytes + 15u) & ~(size_t)15u) + HEADER;
	uint8_t *p;
	if (bytes > SIZE_MAX / 2)
		return NULL;
	if (chunk_cap - chunk_used < need) {
		size_t cap = need > CHUNK_BYTES ? need : CHUNK_BYTES;
		void *m =
		    mmap(NULL, cap, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (m == MAP_FAILED)
			return NULL;
		chunk = m;
		chunk_used = 0;
		chunk_cap = cap;
	}
	p = chunk + chunk_used;
	chunk_used += need;
	memcpy(p, &bytes, sizeof bytes);
	return p + HEADER;
}

void *rt_malloc(size_t bytes)
{
	return private_heap ? bump(bytes) : malloc(bytes);
}

void *rt_calloc(size_t n, size_t size)
{
	if (!private_heap)
		return calloc(n, size);
	if (size && n > SIZE_MAX / size)
		return NULL;
	return bump(n * size); /* fresh mappings are zero */
}

void rt_free(void *mem)
{
	if (!private_heap)
		free(mem);
}

/* Is mem from bump (the current chunk; older chunks' blocks are only read)? */
static bool bumped(const void *mem)
{
	const uint8_t *p = mem;
	return chunk && p >= chunk + HEADER && p < chunk + chunk_used;
}

void *rt_realloc(void *mem, size_t bytes)
{
	size_t old;
	void *q;
	if (!private_heap)
		return realloc(mem, bytes);
	if (!mem)
		return bump(bytes);
	if (bumped(mem))
		memcpy(&old, (uint8_t *)mem - HEADER, sizeof old);
	else
		old = malloc_usable_size(mem);
	if (!(q = bump(bytes)))
		return NULL;
	memcpy(q, mem, old < bytes ? old : bytes);
	return q;
}

char *rt_strndup(const char *s, size_t n)
{
	size_t len = strnlen(s, n);
	char *d = rt_malloc(len + 1);
	if (d) {
		memcpy(d, s, len);
		d[len] = '\0';
	}
	return d;
}

char *rt_strdup(const char *s)
{
	return rt_strndup(s, SIZE_MAX);
}

/* Heapsort: in place, no allocation (qsort's contract, not stable either). */
static void swap_bytes(uint8_t *a, uint8_t *b, size_t size)
{
	while (size--) {
		uint8_t t = *a;
		*a++ = *b;
		*b++ = t;
	}
}

static void sift_down(uint8_t *base, size_t root, size_t n, size_t size,
                      int (*cmp)(const void *, const void *))
{
	for (;;) {
		size_t child = 2 * root + 1, top = root;
		if (child < n && cmp(base + child * size, base + top * size) > 0)
			top = child;
		if (child + 1 < n && cmp(base + (child + 1) * size, base + top * size) > 0)
			top = child + 1;
		if (top == root)
			return;
		swap_bytes(base + root * size, base + top * size, size);
		root = top;
	}
}

void rt_qsort(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *))
{
	uint8_t *b = base;
	if (n < 2 || !size)
		return;
	for (size_t i = n / 2; i-- > 0;)
		sift_down(b, i, n, size, cmp);
	for (size_t end = n - 1; end > 0; end--) {
		swap_bytes(b, b + end * size, size);
		sift_down(b, 0, end, size, cmp);
	}
}

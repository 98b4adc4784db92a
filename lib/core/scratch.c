/*
 * Big scratch blocks, kept between calls (docs/model.md, Cost).
 *
 * A curve over a profile of 1M samples builds ~50 MB of arrays and frees
 * them when it returns; malloc gives most of that memory back to the system
 * and the next call faults it in again, a page at a time. Where page faults
 * are dear (a PVM guest here: ~23 us a 4 KiB fault, 370 ms for 64 MiB),
 * those faults were 3/4 of a curve's time. Blocks of BIG_MIN or more are
 * therefore mapped whole (2 MiB multiples, transparent huge pages asked
 * for) and, once freed, kept in a small pool for the next call; the pool is
 * bounded (POOL_MAX blocks, POOL_BYTES) and emptied when the process's last
 * profile is freed (big_release, lomas_profile_free).
 *
 * Every block carries a header, so big_free tells a mapped block from a
 * malloc'd small one; a block from big_alloc goes back through big_free
 * only. Under AddressSanitizer every block is malloc'd (no pool), so ASan
 * still sees every overflow, leak and mismatched free.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "core.h"

#if defined(__SANITIZE_ADDRESS__)
#define BIG_POOL 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define BIG_POOL 0
#endif
#endif
#ifndef BIG_POOL
#define BIG_POOL 1
#endif

#define BIG_HDR 64 /* a mapped block stays 64-byte aligned; a malloc'd one, malloc's */
#define BIG_MIN ((size_t)256 << 10) /* smaller blocks are malloc'd */
#define BIG_HUGE ((size_t)2 << 20)  /* mappings are multiples of a huge page */
#define POOL_MAX 16
#define POOL_BYTES ((size_t)512 << 20)
#define BIG_MAGIC 0x6c6f6d6173626967ull /* "lomasbig" */

typedef struct big_hdr {
	uint64_t magic;
	size_t map; /* the mapping's length; 0: malloc'd */
} big_hdr;
_Static_assert(sizeof(big_hdr) <= BIG_HDR, "the header fits");

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static big_hdr *pool[POOL_MAX];
static size_t npool, pool_bytes;

static void *small_block(size_t n)
{
	big_hdr *h = malloc(BIG_HDR + n);
	if (!h)
		return NULL;
	h->magic = BIG_MAGIC;
	h->map = 0;
	return (char *)h + BIG_HDR;
}

/* A block of n bytes; *fresh: its memory is zero (a new mapping). */
static void *big_get(size_t n, bool *fresh)
{
	size_t len, best = POOL_MAX;
	big_hdr *h;
	*fresh = false;
	if (n > SIZE_MAX - BIG_HDR - BIG_HUGE)
		return NULL;
	if (!BIG_POOL || n < BIG_MIN)
		return small_block(n);
	len = (n + BIG_HDR + BIG_HUGE - 1) / BIG_HUGE * BIG_HUGE;
	pthread_mutex_lock(&pool_lock);
	/* The smallest kept block that holds n, if it is not more than twice as large. */
	for (size_t i = 0; i < npool; i++)
		if (pool[i]->map >= len && pool[i]->map <= 2 * len &&
		    (best == POOL_MAX || pool[i]->map < pool[best]->map))
			best = i;
	if (best < POOL_MAX) {
		h = pool[best];
		pool[best] = pool[--npool];
		pool_bytes -= h->map;
		pthread_mutex_unlock(&pool_lock);
		return (char *)h + BIG_HDR;
	}
	pthread_mutex_unlock(&pool_lock);
	h = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (h == MAP_FAILED)
		return NULL;
#ifdef MADV_HUGEPAGE
	(void)madvise(h, len, MADV_HUGEPAGE); /* a hint: refused, the block still works */
#endif
	h->magic = BIG_MAGIC;
	h->map = len;
	*fresh = true;
	return (char *)h + BIG_HDR;
}

void *big_alloc(size_t n)
{
	bool fresh;
	return big_get(n ? n : 1, &fresh);
}

void *big_calloc(size_t n, size_t size)
{
	bool fresh;
	void *p;
	if (size && n > SIZE_MAX / size)
		return NULL;
	n *= size;
	if (n == 0)
		n = 1;
	p = big_get(n, &fresh);
	if (p && !fresh)
		memset(p, 0, n);
	return p;
}

void big_free(void *p)
{
	big_hdr *h;
	if (!p)
		return;
	h = (big_hdr *)((char *)p - BIG_HDR);
	if (!h->map) {
		free(h);
		return;
	}
	pthread_mutex_lock(&pool_lock);
	if (npool < POOL_MAX && pool_bytes + h->map <= POOL_BYTES) {
		pool[npool++] = h;
		pool_bytes += h->map;
		h = NULL;
	}
	pthread_mutex_unlock(&pool_lock);
	if (h)
		munmap(h, h->map);
}

void big_release(void)
{
	pthread_mutex_lock(&pool_lock);
	while (npool > 0) {
		big_hdr *h = pool[--npool];
		munmap(h, h->map);
	}
	pool_bytes = 0;
	pthread_mutex_unlock(&pool_lock);
}

void mem_hint_huge(void *p, size_t n)
{
#ifdef MADV_HUGEPAGE
	uintptr_t a = ((uintptr_t)p + 4095) & ~(uintptr_t)4095,
	          e = ((uintptr_t)p + n) & ~(uintptr_t)4095;
	if (p && n >= BIG_HUGE && e > a)
		(void)madvise((void *)a, e - a, MADV_HUGEPAGE);
#else
	(void)p;
	(void)n;
#endif
}

/*
 * Included first in every source of liblomas-inline (build-lto.sh and
 * meson: -include): the runtime's copy of the core and the runtime itself
 * allocate through rt_alloc.c, not glibc's malloc directly, so that the
 * child that writes the profile on a fatal signal (signals.c) can switch to
 * a heap of its own: the signal may have interrupted malloc, leaving glibc's
 * heap locked or half-updated in that copy of the process. qsort too (glibc's
 * allocates for arrays over 1 KiB).
 */
#ifndef LOMAS_INLINE_RT_ALLOC_H
#define LOMAS_INLINE_RT_ALLOC_H

#include <stdlib.h>
#include <string.h>

void *rt_malloc(size_t bytes);
void *rt_calloc(size_t n, size_t size);
void *rt_realloc(void *mem, size_t bytes);
void rt_free(void *mem);
char *rt_strdup(const char *s);
char *rt_strndup(const char *s, size_t n);
void rt_qsort(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *));
/* From now on (in this process) allocate from mmap'd memory, never free. */
void rt_heap_private(void);

#define malloc rt_malloc
#define calloc rt_calloc
#define realloc rt_realloc
#define free rt_free
#define strdup rt_strdup
#define strndup rt_strndup
#define qsort rt_qsort

#endif /* LOMAS_INLINE_RT_ALLOC_H */

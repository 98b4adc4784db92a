/*
 * An open-addressing map keyed by page address (linear probing, backward-shift
 * deletion), shared by the watch table's per-page counts and the mprotect
 * engine's page states. Entries are esize bytes and begin with their
 * uint64_t page; the map keeps which slots are in use.
 */
#include <stdlib.h>
#include <string.h>

#include "watch.h"

#define PAGEMAP_MIN 64

static inline unsigned char *slot(const pagemap *m, size_t i)
{
	return m->items + i * m->esize;
}

static inline uint64_t key_at(const pagemap *m, size_t i)
{
	uint64_t k;
	memcpy(&k, slot(m, i), sizeof k);
	return k;
}

static lomas_status alloc_arrays(pagemap *m, size_t cap)
{
	unsigned char *items = calloc(cap, m->esize);
	uint8_t *used = calloc(cap, 1);
	if (!items || !used) {
		free(items);
		free(used);
		return error_set(LOMAS_ENOMEM, "out of memory growing a page map");
	}
	m->items = items;
	m->used = used;
	m->cap = cap;
	return LOMAS_OK;
}

lomas_status pagemap_init(pagemap *m, size_t esize)
{
	memset(m, 0, sizeof *m);
	m->esize = esize;
	return alloc_arrays(m, PAGEMAP_MIN);
}

void pagemap_free(pagemap *m)
{
	free(m->items);
	free(m->used);
	m->items = NULL;
	m->used = NULL;
	m->cap = m->n = 0;
}

void pagemap_clear(pagemap *m)
{
	memset(m->items, 0, m->cap * m->esize);
	memset(m->used, 0, m->cap);
	m->n = 0;
}

/* The slot holding page, or the empty slot that ends its probe run. */
static size_t probe(const pagemap *m, uint64_t page, bool *found)
{
	size_t mask = m->cap - 1, i = watch_hash64(page) & mask;
	while (m->used[i]) {
		if (key_at(m, i) == page) {
			*found = true;
			return i;
		}
		i = (i + 1) & mask;
	}
	*found = false;
	return i;
}

void *pagemap_find(const pagemap *m, uint64_t page)
{
	bool f;
	size_t i = probe(m, page, &f);
	return f ? slot(m, i) : NULL;
}

static lomas_status grow(pagemap *m)
{
	pagemap old = *m;
	lomas_status st = alloc_arrays(m, old.cap * 2);
	if (st)
		return st;
	for (size_t i = 0; i < old.cap; i++) {
		bool f;
		size_t j;
		if (!old.used[i])
			continue;
		j = probe(m, key_at(&old, i), &f);
		memcpy(slot(m, j), slot(&old, i), m->esize);
		m->used[j] = 1;
	}
	free(old.items);
	free(old.used);
	return LOMAS_OK;
}

lomas_status pagemap_insert(pagemap *m, uint64_t page, void **entry, bool *created)
{
	bool f;
	size_t i = probe(m, page, &f);
	if (!f) {
		lomas_status st;
		if ((m->n + 1) * 2 > m->cap) {
			if ((st = grow(m)))
				return st;
			i = probe(m, page, &f);
		}
		memset(slot(m, i), 0, m->esize);
		memcpy(slot(m, i), &page, sizeof page);
		m->used[i] = 1;
		m->n++;
	}
	*entry = slot(m, i);
	if (created)
		*created = !f;
	return LOMAS_OK;
}

void pagemap_remove(pagemap *m, uint64_t page)
{
	bool f;
	size_t mask = m->cap - 1, i = probe(m, page, &f), j = i;
	if (!f)
		return;
	m->used[i] = 0;
	m->n--;
	/* Backward-shift deletion keeps every probe run unbroken. */
	for (;;) {
		j = (j + 1) & mask;
		if (!m->used[j])
			break;
		size_t home = watch_hash64(key_at(m, j)) & mask;
		/* Move j into the hole i if its home is not in (i, j]. */
		if ((j > i && (home <= i || home > j)) || (j < i && (home <= i && home > j))) {
			memcpy(slot(m, i), slot(m, j), m->esize);
			m->used[i] = 1;
			m->used[j] = 0;
			i = j;
		}
	}
}

void *pagemap_at(const pagemap *m, size_t i)
{
	return m->used[i] ? slot(m, i) : NULL;
}

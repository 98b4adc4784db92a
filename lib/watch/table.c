/*
 * The watch table: which lines are watched for which thread, and how many
 * watched lines each page holds. Pure logic (no system calls): linear probing
 * keyed by the line, so every watcher of one line sits in one probe run.
 */
#include <stdlib.h>
#include <string.h>

#include "watch.h"

lomas_status watch_table_init(watch_table *t, uint32_t line_size, uint32_t page_size,
                              uint64_t capacity)
{
	memset(t, 0, sizeof *t);
	if (!line_size || (line_size & (line_size - 1)) || !page_size ||
	    (page_size & (page_size - 1)) || line_size > page_size)
		return error_set(LOMAS_EINVAL, "watch table: bad line size %u or page size %u",
		                 line_size, page_size);
	t->line_mask = ~(uint64_t)(line_size - 1);
	t->page_mask = ~(uint64_t)(page_size - 1);
	t->capacity = capacity;
	t->cap = 64;
	t->slots = calloc(t->cap, sizeof *t->slots);
	if (!t->slots || pagemap_init(&t->pages, sizeof(watch_page_count))) {
		watch_table_free(t);
		return error_set(LOMAS_ENOMEM, "out of memory");
	}
	return LOMAS_OK;
}

void watch_table_free(watch_table *t)
{
	free(t->slots);
	pagemap_free(&t->pages);
	t->slots = NULL;
	t->n = t->cap = 0;
}

void watch_table_clear(watch_table *t)
{
	memset(t->slots, 0, t->cap * sizeof *t->slots);
	pagemap_clear(&t->pages);
	t->n = 0;
}

/* ---- per-page counts */

static lomas_status page_inc(watch_table *t, uint64_t page)
{
	void *v;
	lomas_status st = pagemap_insert(&t->pages, page, &v, NULL);
	if (st)
		return st;
	((watch_page_count *)v)->count++;
	return LOMAS_OK;
}

static void page_dec(watch_table *t, uint64_t page)
{
	watch_page_count *p = pagemap_find(&t->pages, page);
	if (p && !--p->count)
		pagemap_remove(&t->pages, page);
}

uint32_t watch_table_page_count(const watch_table *t, uint64_t addr)
{
	const watch_page_count *p = pagemap_find(&t->pages, addr & t->page_mask);
	return p ? p->count : 0;
}

/* ---- entries */

static size_t entry_find(const watch_table *t, uint64_t line, uint32_t thread, bool *found)
{
	size_t m = t->cap - 1, i = watch_hash64(line) & m;
	while (t->slots[i].used) {
		if (t->slots[i].line == line && t->slots[i].thread == thread) {
			*found = true;
			return i;
		}
		i = (i + 1) & m;
	}
	*found = false;
	return i;
}

static lomas_status entry_grow(watch_table *t)
{
	watch_entry *old = t->slots;
	size_t ocap = t->cap;
	watch_entry *n = calloc(ocap * 2, sizeof *n);
	if (!n)
		return error_set(LOMAS_ENOMEM, "out of memory growing the watch table");
	t->slots = n;
	t->cap = ocap * 2;
	for (size_t i = 0; i < ocap; i++) {
		if (old[i].used) {
			bool f;
			t->slots[entry_find(t, old[i].line, old[i].thread, &f)] = old[i];
		}
	}
	free(old);
	return LOMAS_OK;
}

static void entry_delete(watch_table *t, size_t i)
{
	size_t m = t->cap - 1, j = i;
	page_dec(t, t->slots[i].line & t->page_mask);
	t->slots[i].used = 0;
	t->n--;
	for (;;) {
		j = (j + 1) & m;
		if (!t->slots[j].used)
			break;
		size_t home = watch_hash64(t->slots[j].line) & m;
		if ((j > i && (home <= i || home > j)) || (j < i && (home <= i && home > j))) {
			t->slots[i] = t->slots[j];
			t->slots[j].used = 0;
			i = j;
		}
	}
}

lomas_status watch_table_add(watch_table *t, uint64_t addr, uint32_t thread, uint64_t sample,
                             watch_entry *displaced, bool *did_displace)
{
	uint64_t line = addr & t->line_mask;
	bool f;
	size_t i;
	lomas_status st;
	*did_displace = false;
	i = entry_find(t, line, thread, &f);
	if (f) {
		*displaced = t->slots[i];
		*did_displace = true;
		t->slots[i].sample = sample;
		t->slots[i].seq = t->seq++;
		return LOMAS_OK;
	}
	if (t->capacity && t->n >= t->capacity) {
		size_t oldest = SIZE_MAX;
		for (size_t k = 0; k < t->cap; k++)
			if (t->slots[k].used &&
			    (oldest == SIZE_MAX || t->slots[k].seq < t->slots[oldest].seq))
				oldest = k;
		if (oldest != SIZE_MAX) {
			*displaced = t->slots[oldest];
			*did_displace = true;
			entry_delete(t, oldest);
		}
	}
	if ((t->n + 1) * 2 > t->cap && (st = entry_grow(t)))
		return st;
	if ((st = page_inc(t, line & t->page_mask)))
		return st;
	i = entry_find(t, line, thread, &f);
	t->slots[i] = (watch_entry){
	    .line = line, .sample = sample, .seq = t->seq++, .thread = thread, .used = 1};
	t->n++;
	return LOMAS_OK;
}

bool watch_table_find(const watch_table *t, uint64_t addr, uint32_t thread, watch_entry *out)
{
	bool f;
	size_t i = entry_find(t, addr & t->line_mask, thread, &f);
	if (f && out)
		*out = t->slots[i];
	return f;
}

bool watch_table_remove(watch_table *t, uint64_t addr, uint32_t thread, watch_entry *out)
{
	bool f;
	size_t i = entry_find(t, addr & t->line_mask, thread, &f);
	if (!f)
		return false;
	if (out)
		*out = t->slots[i];
	entry_delete(t, i);
	return true;
}

size_t watch_table_others(const watch_table *t, uint64_t addr, uint32_t thread, uint64_t *samples,
                          size_t max)
{
	uint64_t line = addr & t->line_mask;
	size_t m = t->cap - 1, i = watch_hash64(line) & m, n = 0;
	while (t->slots[i].used) {
		if (t->slots[i].line == line && t->slots[i].thread != thread) {
			if (samples && n < max)
				samples[n] = t->slots[i].sample;
			n++;
		}
		i = (i + 1) & m;
	}
	return n;
}

/*
 * The mprotect watchpoint engine (DESIGN §4, the seed's design): a page that
 * holds a watched line is PROT_NONE, so the target faults on its next touch.
 * The engine only decides which page should have which protection; the
 * monitor runs the mprotect calls inside the target (syscall injection) and
 * knows the target's own protections (shadow of /proc/PID/maps).
 *
 * A watched page is PROT_NONE exactly when no lift is in force (lift_depth ==
 * 0: no system call or signal delivery in progress) and no thread is stepping
 * over a fault on it (temp_owner < 0).
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "watch.h"

static inline size_t phash(uint64_t x)
{
	x ^= x >> 29;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 32;
	return (size_t)x;
}

static mprot_page *pfind(const mprot_engine *e, uint64_t page, bool *found)
{
	size_t m = e->pcap - 1, i = phash(page) & m;
	while (e->pages[i].used) {
		if (e->pages[i].page == page) {
			*found = true;
			return &e->pages[i];
		}
		i = (i + 1) & m;
	}
	*found = false;
	return &e->pages[i];
}

static lomas_status pgrow(mprot_engine *e)
{
	mprot_page *old = e->pages;
	size_t ocap = e->pcap;
	mprot_page *n = calloc(ocap * 2, sizeof *n);
	if (!n)
		return error_set(LOMAS_ENOMEM, "out of memory");
	e->pages = n;
	e->pcap = ocap * 2;
	for (size_t i = 0; i < ocap; i++) {
		bool f;
		if (old[i].used)
			*pfind(e, old[i].page, &f) = old[i];
	}
	free(old);
	return LOMAS_OK;
}

/* Drop a page entry that is neither watched nor protected (rebuilds the probe runs). */
static void pcompact(mprot_engine *e)
{
	mprot_page *old = e->pages;
	size_t cap = e->pcap;
	mprot_page *n = calloc(cap, sizeof *n);
	if (!n)
		return; /* keep the stale entries: harmless */
	e->pages = n;
	e->pn = 0;
	for (size_t i = 0; i < cap; i++) {
		bool f;
		if (!old[i].used)
			continue;
		if (!old[i].prot_none && old[i].temp_owner < 0 &&
		    !watch_table_page_count(&e->table, old[i].page))
			continue;
		*pfind(e, old[i].page, &f) = old[i];
		e->pn++;
	}
	free(old);
}

lomas_status mprot_init(mprot_engine *e, const mprot_ops *ops, uint32_t line_size,
                        uint32_t page_size, uint64_t capacity)
{
	lomas_status st;
	memset(e, 0, sizeof *e);
	if ((st = watch_table_init(&e->table, line_size, page_size, capacity)))
		return st;
	e->ops = *ops;
	e->page_size = page_size;
	e->pcap = 64;
	e->pages = calloc(e->pcap, sizeof *e->pages);
	if (!e->pages) {
		watch_table_free(&e->table);
		return error_set(LOMAS_ENOMEM, "out of memory");
	}
	return LOMAS_OK;
}

void mprot_free(mprot_engine *e)
{
	watch_table_free(&e->table);
	free(e->pages);
	e->pages = NULL;
	e->pcap = e->pn = 0;
}

static bool want_none(const mprot_engine *e, const mprot_page *p)
{
	return e->lift_depth == 0 && p->temp_owner < 0 && p->orig >= 0 && !p->pinned &&
	       watch_table_page_count(&e->table, p->page) > 0;
}

/* Set the page's real protection to what the state asks. */
static lomas_status apply(mprot_engine *e, mprot_page *p, bool reprotect)
{
	bool want = want_none(e, p);
	int r;
	if (want == p->prot_none)
		return LOMAS_OK;
	if (want) {
		r = e->ops.mprotect(e->ops.ctx, p->page, e->page_size, PROT_NONE);
		if (r == 0) {
			p->prot_none = true;
			e->stats.protects++;
			if (reprotect)
				e->stats.reprotects++;
		}
	} else if (p->orig < 0) {
		p->prot_none = false; /* unmapped meanwhile: nothing left to restore */
		r = 0;
	} else {
		r = e->ops.mprotect(e->ops.ctx, p->page, e->page_size, p->orig);
		if (r == 0) {
			p->prot_none = false;
			e->stats.restores++;
			e->lift_events++;
		}
	}
	if (r) {
		e->stats.failures++;
		return error_set(LOMAS_ETARGET, "mprotect(%#llx) in the target failed: %d",
		                 (unsigned long long)p->page, r);
	}
	return LOMAS_OK;
}

lomas_status mprot_watch(mprot_engine *e, uint64_t addr, uint32_t thread, uint64_t sample,
                         watch_entry *displaced, bool *did_displace)
{
	uint64_t page = addr & e->table.page_mask;
	bool f;
	mprot_page *p;
	lomas_status st;
	*did_displace = false;
	p = pfind(e, page, &f);
	if (!f) {
		int orig = e->ops.page_prot(e->ops.ctx, page);
		if (orig < 0)
			return error_set(LOMAS_EPERM, "page %#llx is not mapped",
			                 (unsigned long long)page);
		if ((e->pn + 1) * 2 > e->pcap) {
			if ((st = pgrow(e)))
				return st;
			p = pfind(e, page, &f);
		}
		*p = (mprot_page){.page = page, .orig = orig, .temp_owner = -1, .used = true};
		p->pinned = e->ops.may_protect && !e->ops.may_protect(e->ops.ctx, page);
		e->pn++;
	}
	return watch_table_add(&e->table, addr, thread, sample, displaced, did_displace);
}

bool mprot_unwatch(mprot_engine *e, uint64_t addr, uint32_t thread, watch_entry *out)
{
	return watch_table_remove(&e->table, addr, thread, out);
}

bool mprot_is_ours(const mprot_engine *e, uint64_t addr)
{
	bool f;
	const mprot_page *p = pfind(e, addr & e->table.page_mask, &f);
	return f && p->prot_none;
}

bool mprot_is_lifted(const mprot_engine *e, uint64_t addr)
{
	bool f;
	const mprot_page *p = pfind(e, addr & e->table.page_mask, &f);
	return f && !p->prot_none;
}

bool mprot_is_pinned(const mprot_engine *e, uint64_t addr)
{
	bool f;
	const mprot_page *p = pfind(e, addr & e->table.page_mask, &f);
	return f && p->pinned;
}

lomas_status mprot_fault_lift(mprot_engine *e, uint64_t addr, uint32_t thread)
{
	bool f;
	mprot_page *p = pfind(e, addr & e->table.page_mask, &f);
	if (!f || !p->prot_none)
		return error_set(LOMAS_EINVAL, "fault on a page that is not ours");
	e->stats.faults++;
	p->temp_owner = (int)thread;
	return apply(e, p, false);
}

void mprot_fault_done(mprot_engine *e, uint32_t thread)
{
	for (size_t i = 0; i < e->pcap; i++) {
		mprot_page *p = &e->pages[i];
		if (p->used && p->temp_owner == (int)thread) {
			p->temp_owner = -1;
			apply(e, p, true);
		}
	}
}

lomas_status mprot_sync(mprot_engine *e)
{
	lomas_status st = LOMAS_OK, s2;
	size_t stale = 0;
	for (size_t i = 0; i < e->pcap; i++) {
		mprot_page *p = &e->pages[i];
		if (!p->used)
			continue;
		if ((s2 = apply(e, p, false)) && !st)
			st = s2;
		if (!p->prot_none && p->temp_owner < 0 &&
		    !watch_table_page_count(&e->table, p->page))
			stale++;
	}
	if (stale > 16 && stale * 2 > e->pn)
		pcompact(e);
	return st;
}

lomas_status mprot_lift(mprot_engine *e)
{
	e->lift_depth++;
	if (e->lift_depth == 1)
		return mprot_sync(e);
	return LOMAS_OK;
}

lomas_status mprot_unlift(mprot_engine *e)
{
	if (e->lift_depth > 0)
		e->lift_depth--;
	if (e->lift_depth == 0)
		return mprot_sync(e);
	return LOMAS_OK;
}

void mprot_maps_changed(mprot_engine *e)
{
	for (size_t i = 0; i < e->pcap; i++) {
		mprot_page *p = &e->pages[i];
		if (!p->used)
			continue;
		if (!p->prot_none)
			p->orig = e->ops.page_prot(e->ops.ctx, p->page);
		p->pinned = e->ops.may_protect && !e->ops.may_protect(e->ops.ctx, p->page);
	}
}

lomas_status mprot_restore_all(mprot_engine *e)
{
	lomas_status st;
	watch_table_clear(&e->table);
	for (size_t i = 0; i < e->pcap; i++)
		if (e->pages[i].used)
			e->pages[i].temp_owner = -1;
	st = mprot_sync(e);
	pcompact(e);
	return st;
}

void mprot_forget_all(mprot_engine *e)
{
	watch_table_clear(&e->table);
	memset(e->pages, 0, e->pcap * sizeof *e->pages);
	e->pn = 0;
	e->lift_depth = 0;
}

size_t mprot_protected_pages(const mprot_engine *e)
{
	size_t n = 0;
	for (size_t i = 0; i < e->pcap; i++)
		n += e->pages[i].used && e->pages[i].prot_none;
	return n;
}

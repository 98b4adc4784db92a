/*
 * The mprotect watchpoint engine (docs/architecture.md, the watch engines, the seed's design): a
 * page that holds a watched line is PROT_NONE, so the target faults on its next touch. The engine
 * only decides which page should have which protection; the monitor runs the mprotect calls inside
 * the target (syscall injection) and knows the target's own protections (shadow of /proc/PID/maps).
 *
 * A watched page is PROT_NONE exactly when no lift is in force (lift_depth ==
 * 0: no system call or signal delivery in progress) and no thread is stepping
 * over a fault on it (temp_owner < 0).
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "watch.h"

/* Drop page entries that are neither watched nor protected (rebuilds the map). */
static void pcompact(mprot_engine *e)
{
	pagemap n;
	if (pagemap_init(&n, sizeof(mprot_page)))
		return; /* keep the stale entries: harmless */
	for (size_t i = 0; i < e->pages.cap; i++) {
		const mprot_page *p = pagemap_at(&e->pages, i);
		void *dst;
		if (!p || (!p->prot_none && p->temp_owner < 0 &&
		           !watch_table_page_count(&e->table, p->page)))
			continue;
		if (pagemap_insert(&n, p->page, &dst, NULL)) {
			pagemap_free(&n);
			return;
		}
		memcpy(dst, p, sizeof *p);
	}
	pagemap_free(&e->pages);
	e->pages = n;
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
	if ((st = pagemap_init(&e->pages, sizeof(mprot_page)))) {
		watch_table_free(&e->table);
		return st;
	}
	return LOMAS_OK;
}

void mprot_free(mprot_engine *e)
{
	watch_table_free(&e->table);
	pagemap_free(&e->pages);
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
	if (want == p->prot_none && !p->unsure)
		return LOMAS_OK;
	if (want) {
		r = e->ops.mprotect(e->ops.ctx, p->page, e->page_size, PROT_NONE);
		if (r == MPROT_DEFER)
			return LOMAS_OK;
		if (r == 0 || r == MPROT_UNKNOWN) {
			/* Unknown: assume it is protected (a fault there is ours), redo it. */
			p->prot_none = true;
			p->unsure = r != 0;
			e->stats.protects++;
			if (reprotect)
				e->stats.reprotects++;
		}
	} else if (p->orig < 0) {
		p->prot_none = p->unsure = false; /* unmapped meanwhile: nothing to restore */
		r = 0;
	} else {
		r = e->ops.mprotect(e->ops.ctx, p->page, e->page_size, p->orig);
		if (r == MPROT_DEFER)
			return LOMAS_OK;
		if (r == 0) {
			p->prot_none = p->unsure = false;
			e->stats.restores++;
		} else if (r == MPROT_UNKNOWN) {
			p->prot_none = p->unsure = true; /* maybe still protected: redo it */
		}
		e->lift_events++; /* it may be readable now: reuse by decode (step.c) */
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
	lomas_status st;
	*did_displace = false;
	if (!pagemap_find(&e->pages, page)) {
		int orig = e->ops.page_prot(e->ops.ctx, page);
		void *v;
		if (orig < 0)
			return error_set(LOMAS_EPERM, "page %#llx is not mapped",
			                 (unsigned long long)page);
		if ((st = pagemap_insert(&e->pages, page, &v, NULL)))
			return st;
		*(mprot_page *)v = (mprot_page){.page = page,
		                                .orig = orig,
		                                .temp_owner = -1,
		                                .pinned = e->ops.may_protect &&
		                                          !e->ops.may_protect(e->ops.ctx, page)};
	}
	return watch_table_add(&e->table, addr, thread, sample, displaced, did_displace);
}

bool mprot_unwatch(mprot_engine *e, uint64_t addr, uint32_t thread, watch_entry *out)
{
	return watch_table_remove(&e->table, addr, thread, out);
}

bool mprot_is_ours(const mprot_engine *e, uint64_t addr)
{
	const mprot_page *p = pagemap_find(&e->pages, addr & e->table.page_mask);
	return p && p->prot_none;
}

bool mprot_is_certain(const mprot_engine *e, uint64_t addr)
{
	const mprot_page *p = pagemap_find(&e->pages, addr & e->table.page_mask);
	return p && p->prot_none && !p->unsure;
}

bool mprot_is_lifted(const mprot_engine *e, uint64_t addr)
{
	const mprot_page *p = pagemap_find(&e->pages, addr & e->table.page_mask);
	return p && !p->prot_none;
}

bool mprot_is_pinned(const mprot_engine *e, uint64_t addr)
{
	const mprot_page *p = pagemap_find(&e->pages, addr & e->table.page_mask);
	return p && p->pinned;
}

lomas_status mprot_fault_lift(mprot_engine *e, uint64_t addr, uint32_t thread)
{
	mprot_page *p = pagemap_find(&e->pages, addr & e->table.page_mask);
	if (!p || !p->prot_none)
		return error_set(LOMAS_EINVAL, "fault on a page that is not ours");
	e->stats.faults++;
	p->temp_owner = (int)thread;
	return apply(e, p, false);
}

lomas_status mprot_hold(mprot_engine *e, uint64_t addr, uint32_t thread)
{
	mprot_page *p = pagemap_find(&e->pages, addr & e->table.page_mask);
	if (!p)
		return error_set(LOMAS_EINVAL, "not a page of ours");
	p->temp_owner = (int)thread;
	return apply(e, p, false);
}

bool mprot_held_by(const mprot_engine *e, uint64_t addr, uint32_t thread)
{
	const mprot_page *p = pagemap_find(&e->pages, addr & e->table.page_mask);
	return p && p->temp_owner == (int)thread && !p->prot_none;
}

bool mprot_is_tracked(const mprot_engine *e, uint64_t addr)
{
	return pagemap_find(&e->pages, addr & e->table.page_mask) != NULL;
}

void mprot_fault_done(mprot_engine *e, uint32_t thread)
{
	for (size_t i = 0; i < e->pages.cap; i++) {
		mprot_page *p = pagemap_at(&e->pages, i);
		if (p && p->temp_owner == (int)thread) {
			p->temp_owner = -1;
			apply(e, p, true);
		}
	}
}

void mprot_fault_forget(mprot_engine *e, uint32_t thread)
{
	for (size_t i = 0; i < e->pages.cap; i++) {
		mprot_page *p = pagemap_at(&e->pages, i);
		if (p && p->temp_owner == (int)thread)
			p->temp_owner = -1;
	}
}

lomas_status mprot_sync(mprot_engine *e)
{
	lomas_status st = LOMAS_OK, s2;
	size_t stale = 0;
	for (size_t i = 0; i < e->pages.cap; i++) {
		mprot_page *p = pagemap_at(&e->pages, i);
		if (!p)
			continue;
		if ((s2 = apply(e, p, false)) && !st)
			st = s2;
		if (!p->prot_none && p->temp_owner < 0 &&
		    !watch_table_page_count(&e->table, p->page))
			stale++;
	}
	if (stale > 16 && stale * 2 > e->pages.n)
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
	for (size_t i = 0; i < e->pages.cap; i++) {
		mprot_page *p = pagemap_at(&e->pages, i);
		if (!p)
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
	for (size_t i = 0; i < e->pages.cap; i++) {
		mprot_page *p = pagemap_at(&e->pages, i);
		if (p)
			p->temp_owner = -1;
	}
	st = mprot_sync(e);
	pcompact(e);
	return st;
}

void mprot_forget_all(mprot_engine *e)
{
	watch_table_clear(&e->table);
	pagemap_clear(&e->pages);
	e->lift_depth = 0;
}

size_t mprot_protected_pages(const mprot_engine *e)
{
	size_t n = 0;
	for (size_t i = 0; i < e->pages.cap; i++) {
		const mprot_page *p = pagemap_at(&e->pages, i);
		n += p && p->prot_none;
	}
	return n;
}

size_t mprot_unfaulting_pages(const mprot_engine *e)
{
	size_t n = 0;
	for (size_t i = 0; i < e->pages.cap; i++) {
		const mprot_page *p = pagemap_at(&e->pages, i);
		if (p && watch_table_page_count(&e->table, p->page) > 0 && !want_none(e, p))
			n++;
	}
	return n;
}

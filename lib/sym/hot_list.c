/*
 * The public face of per-instruction attribution (lomas_profile_hot_pcs):
 * the model's per-pc misses (lib/model/hot.c) as an opaque list, each pc
 * symbolized from the profile's maps (sym.c). The list owns every string
 * it hands out.
 */
#include <stdlib.h>
#include <string.h>

#include "../model/model.h"
#include "sym.h"

typedef struct arena_block {
	struct arena_block *next;
	size_t used, cap;
	char data[];
} arena_block;

struct lomas_hot_list {
	lomas_hot_info info;
	lomas_hot_pc *pcs;
	size_t *frame_at; /* pcs[i]'s chain is frames[frame_at[i] .. + pcs[i].inlined) */
	lomas_hot_frame *frames;
	size_t nframes, frames_cap;
	arena_block *strings;
};

static void arena_free(arena_block *b)
{
	while (b) {
		arena_block *n = b->next;
		free(b);
		b = n;
	}
}

/* A copy of s that lives as long as the list; NULL for NULL or out of memory. */
static const char *keep(lomas_hot_list *l, const char *s)
{
	size_t n;
	arena_block *b = l->strings;
	if (!s)
		return NULL;
	n = strlen(s) + 1;
	if (!b || b->cap - b->used < n) {
		size_t cap = n > 65536 ? n : 65536;
		arena_block *nb = malloc(sizeof *nb + cap);
		if (!nb)
			return NULL;
		nb->next = b;
		nb->used = 0;
		nb->cap = cap;
		l->strings = b = nb;
	}
	memcpy(b->data + b->used, s, n);
	b->used += n;
	return b->data + b->used - n;
}

/* Forget every entry's symbols (before symbolizing again). */
static void clear_symbols(lomas_hot_list *l, lomas_sym_status status, const char *detail)
{
	arena_free(l->strings);
	l->strings = NULL;
	l->nframes = 0;
	for (size_t i = 0; i < l->info.count; i++) {
		lomas_hot_pc *e = &l->pcs[i];
		e->sym = status;
		e->sym_detail = detail;
		e->module = e->function = e->file = NULL;
		e->module_offset = 0;
		e->line = e->column = 0;
		e->inlined = 0;
		l->frame_at[i] = 0;
	}
}

static lomas_status add_frames(lomas_hot_list *l, size_t i, const sym_result *r)
{
	if (l->nframes + r->nframes > l->frames_cap) {
		size_t nc = l->frames_cap ? l->frames_cap : 64;
		while (nc < l->nframes + r->nframes)
			nc *= 2;
		lomas_hot_frame *f = realloc(l->frames, nc * sizeof *f);
		if (!f)
			return error_set(LOMAS_ENOMEM, "out of memory symbolizing");
		l->frames = f;
		l->frames_cap = nc;
	}
	l->frame_at[i] = l->nframes;
	for (size_t j = 0; j < r->nframes; j++) {
		lomas_hot_frame *f = &l->frames[l->nframes++];
		f->function = keep(l, r->frames[j].function);
		f->file = keep(l, r->frames[j].file);
		f->line = r->frames[j].line;
		f->column = r->frames[j].column;
	}
	l->pcs[i].inlined = r->nframes;
	return LOMAS_OK;
}

static lomas_status symbolize(lomas_hot_list *l, const lomas_profile *p, const char *debug_path)
{
	const char *clock = NULL;
	uint64_t adjust;
	sym_ctx *s;
	lomas_status st;
	if (!sym_profile_has_maps(p)) {
		clear_symbols(l, LOMAS_SYM_NO_MAPS,
		              "the profile records no memory maps (a lackey trace may have none)");
		for (size_t i = 0; i < l->info.count; i++)
			if (l->pcs[i].pc == 0)
				l->pcs[i].sym = LOMAS_SYM_NONE;
		return LOMAS_OK;
	}
	clear_symbols(l, LOMAS_SYM_NONE, "");
	/* The inline clock's pcs are return addresses of its hook calls (lomas.h). */
	for (size_t i = 0; i < p->meta.n; i++)
		if (strcmp(p->meta.items[i].key, "clock") == 0)
			clock = p->meta.items[i].value;
	adjust = clock && strcmp(clock, "inline") == 0 ? 1 : 0;
	if ((st = sym_open(p, debug_path, &s)))
		return st;
	for (size_t i = 0; i < l->info.count && !st; i++) {
		lomas_hot_pc *e = &l->pcs[i];
		sym_result r;
		sym_lookup(s, e->pc, adjust, &r);
		e->sym = r.status;
		e->sym_detail = keep(l, r.detail);
		e->module = keep(l, r.module);
		e->module_offset = r.module_offset;
		e->function = keep(l, r.function);
		e->file = keep(l, r.file);
		e->line = r.line;
		e->column = r.column;
		if (!e->sym_detail)
			st = error_set(LOMAS_ENOMEM, "out of memory symbolizing");
		else
			st = add_frames(l, i, &r);
	}
	sym_close(s);
	return st;
}

lomas_status lomas_profile_hot_pcs(const lomas_profile *p, lomas_policy policy,
                                   uint64_t cache_bytes, uint32_t line_bytes, unsigned flags,
                                   lomas_hot_list **out)
{
	model_hot h;
	lomas_hot_list *l;
	lomas_status st;
	error_clear();
	if (out)
		*out = NULL;
	if (!p || !out)
		return error_set(LOMAS_EINVAL, "lomas_profile_hot_pcs: NULL argument");
	if (policy != LOMAS_POLICY_RANDOM && policy != LOMAS_POLICY_LRU)
		return error_set(LOMAS_EINVAL, "unknown replacement policy %d", (int)policy);
	if (flags & ~(LOMAS_MODEL_COLD | LOMAS_HOT_NO_SYMBOLS))
		return error_set(LOMAS_EINVAL, "unknown flags 0x%x", flags);
	if (line_bytes != 0 && line_bytes != p->line_size)
		return error_set(LOMAS_EINVAL,
		                 "profile was recorded with %u-byte lines; cannot model %u-byte "
		                 "lines",
		                 p->line_size, line_bytes);
	if (!line_size_valid(p->line_size))
		return error_set(LOMAS_EINVAL, "profile line size %u is invalid", p->line_size);
	if (cache_bytes == 0 || cache_bytes % p->line_size != 0)
		return error_set(LOMAS_EINVAL,
		                 "cache size %llu bytes is not a positive multiple of the %u-byte "
		                 "line size",
		                 (unsigned long long)cache_bytes, p->line_size);
	if ((st = model_hot_build(p, policy, (double)(cache_bytes / p->line_size),
	                          flags & LOMAS_MODEL_COLD, &h)))
		return st;
	if (!(l = calloc(1, sizeof *l)) || !(l->pcs = calloc(h.n ? h.n : 1, sizeof *l->pcs)) ||
	    !(l->frame_at = calloc(h.n ? h.n : 1, sizeof *l->frame_at))) {
		model_hot_free(&h);
		lomas_hot_list_free(l);
		return error_set(LOMAS_ENOMEM, "out of memory attributing misses");
	}
	l->info = (lomas_hot_info){.size = sizeof(lomas_hot_info),
	                           .cache_bytes = cache_bytes,
	                           .line_bytes = p->line_size,
	                           .policy = policy,
	                           .flags = flags,
	                           .count = h.n,
	                           .delinquent = h.delinquent,
	                           .misses = h.misses,
	                           .refs = h.refs,
	                           .has_maps = sym_profile_has_maps(p),
	                           .cover90 = h.cover90};
	for (size_t i = 0; i < h.n; i++) {
		const model_hot_pc *m = &h.pcs[i];
		lomas_hot_pc *e = &l->pcs[i];
		double ratio = m->refs > 0.0     ? m->misses / m->refs
		               : m->reuses > 0.0 ? m->misses / m->reuses
		                                 : 0.0;
		e->size = sizeof *e;
		e->pc = m->pc;
		e->misses = m->misses;
		e->unseen_misses = m->unseen;
		e->refs = m->refs;
		e->miss_ratio = ratio > 1.0 ? 1.0 : ratio;
		e->share = h.misses > 0.0 ? m->misses / h.misses : 0.0;
		e->samples_started = m->started;
		e->samples_ended = m->ended;
		e->delinquent = i < h.delinquent;
		e->sym = LOMAS_SYM_NONE;
		e->sym_detail = "";
	}
	model_hot_free(&h);
	if (!(flags & LOMAS_HOT_NO_SYMBOLS) && (st = symbolize(l, p, NULL))) {
		lomas_hot_list_free(l);
		return st;
	}
	*out = l;
	return LOMAS_OK;
}

size_t lomas_hot_list_count(const lomas_hot_list *l)
{
	error_clear();
	return l ? l->info.count : 0;
}

lomas_status lomas_hot_list_get(const lomas_hot_list *l, size_t i, lomas_hot_pc *out)
{
	error_clear();
	if (!l || !out)
		return error_set(LOMAS_EINVAL, "lomas_hot_list_get: NULL argument");
	if (i >= l->info.count)
		return error_set(LOMAS_EINVAL, "entry %zu of a list of %zu", i, l->info.count);
	return out_sized_copy(out, &l->pcs[i], sizeof l->pcs[i], "lomas_hot_list_get");
}

lomas_status lomas_hot_list_frame(const lomas_hot_list *l, size_t i, size_t j, lomas_hot_frame *out)
{
	error_clear();
	if (!l || !out)
		return error_set(LOMAS_EINVAL, "lomas_hot_list_frame: NULL argument");
	if (i >= l->info.count)
		return error_set(LOMAS_EINVAL, "entry %zu of a list of %zu", i, l->info.count);
	if (j >= l->pcs[i].inlined)
		return error_set(LOMAS_EINVAL, "call site %zu of a chain of %zu", j,
		                 l->pcs[i].inlined);
	*out = l->frames[l->frame_at[i] + j];
	return LOMAS_OK;
}

lomas_status lomas_hot_list_info(const lomas_hot_list *l, lomas_hot_info *out)
{
	error_clear();
	if (!l || !out)
		return error_set(LOMAS_EINVAL, "lomas_hot_list_info: NULL argument");
	return out_sized_copy(out, &l->info, sizeof l->info, "lomas_hot_list_info");
}

lomas_status lomas_hot_list_symbolize(lomas_hot_list *l, const lomas_profile *p,
                                      const char *debug_path)
{
	error_clear();
	if (!l || !p)
		return error_set(LOMAS_EINVAL, "lomas_hot_list_symbolize: NULL argument");
	return symbolize(l, p, debug_path);
}

void lomas_hot_list_free(lomas_hot_list *l)
{
	if (!l)
		return;
	arena_free(l->strings);
	free(l->pcs);
	free(l->frame_at);
	free(l->frames);
	free(l);
}

/*
 * Public model entry points: argument checks, size ordering, the default
 * options (segments, time-aware, reuse classes for LRU, footprint bound),
 * default sizes.
 */
#include <math.h>
#include <stdlib.h>

#include "model.h"

lomas_status model_check_args(const lomas_profile *p, lomas_policy policy,
                              const uint64_t *cache_bytes, size_t n, uint32_t line_bytes,
                              unsigned flags, const double *ratios, uint32_t *line)
{
	if (!p || (n > 0 && (!cache_bytes || !ratios)))
		return error_set(LOMAS_EINVAL, "lomas_model: NULL argument");
	if (policy != LOMAS_POLICY_RANDOM && policy != LOMAS_POLICY_LRU)
		return error_set(LOMAS_EINVAL, "unknown replacement policy %d", (int)policy);
	if (flags & ~LOMAS_MODEL_COLD)
		return error_set(LOMAS_EINVAL, "unknown model flags 0x%x", flags);
	if (line_bytes != 0 && line_bytes != p->line_size)
		return error_set(LOMAS_EINVAL,
		                 "profile was recorded with %u-byte lines; cannot model %u-byte "
		                 "lines",
		                 p->line_size, line_bytes);
	*line = p->line_size;
	if (!line_size_valid(*line))
		return error_set(LOMAS_EINVAL, "profile line size %u is invalid", *line);
	for (size_t i = 0; i < n; i++) {
		if (cache_bytes[i] == 0 || cache_bytes[i] % *line != 0)
			return error_set(LOMAS_EINVAL,
			                 "cache size %llu bytes is not a positive multiple of the "
			                 "%u-byte line size",
			                 (unsigned long long)cache_bytes[i], *line);
	}
	return LOMAS_OK;
}

static int size_ix_cmp(const void *a, const void *b)
{
	const size_ix *x = a, *y = b;
	return x->bytes < y->bytes ? -1 : x->bytes > y->bytes;
}

model_opts model_default_opts(lomas_policy policy)
{
	model_opts o = {0};
	o.grouping = MODEL_GROUP_SEGMENT;
	o.time_aware = true;
	o.classes = policy == LOMAS_POLICY_LRU;
	o.footprint = true;
	return o;
}

lomas_status model_run(model_data *m, lomas_policy policy, const double *lines, size_t n,
                       unsigned flags, bool bound, double *out)
{
	double *cap = calloc(m->nthreads * n + 1, sizeof *cap), *cold = calloc(n + 1, sizeof *cold);
	lomas_status st;
	if (!cap || !cold) {
		free(cap);
		free(cold);
		return error_set(LOMAS_ENOMEM, "out of memory");
	}
	/* Many sizes: StatCache on a tabulated grid; a few: exact roots per size. */
	if (policy == LOMAS_POLICY_RANDOM)
		st = statcache_curve_time(m, lines, n, n >= MODEL_GRID_MIN, cap, cold);
	else
		st = statstack_curve(m, lines, n, bound, cap, cold);
	/* StatStack applies the bound itself, to each stack distance. */
	if (!st)
		st = model_finish(m, lines, n, cap, cold, (flags & LOMAS_MODEL_COLD) != 0,
		                  bound && policy == LOMAS_POLICY_RANDOM, out);
	free(cap);
	free(cold);
	return st;
}

lomas_status model_sort_sizes(const uint64_t *cache_bytes, size_t n, uint32_t line, size_ix **ord,
                              double **lines)
{
	*ord = malloc((n ? n : 1) * sizeof **ord);
	*lines = malloc((n ? n : 1) * sizeof **lines);
	if (!*ord || !*lines) {
		free(*ord);
		free(*lines);
		return error_set(LOMAS_ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < n; i++) {
		(*ord)[i].bytes = cache_bytes[i];
		(*ord)[i].ix = i;
	}
	qsort(*ord, n, sizeof **ord, size_ix_cmp);
	for (size_t i = 0; i < n; i++)
		(*lines)[i] = (double)((*ord)[i].bytes / line);
	return LOMAS_OK;
}

lomas_status model_curve_opts(const lomas_profile *p, lomas_policy policy,
                              const uint64_t *cache_bytes, size_t n, unsigned flags,
                              const model_opts *o, double *ratios)
{
	model_data m;
	model_opts oo = *o;
	size_ix *ord = NULL;
	double *lines = NULL, *out = NULL;
	lomas_status st;

	oo.moments = policy == LOMAS_POLICY_RANDOM && n < MODEL_GRID_MIN;
	oo.lru = policy == LOMAS_POLICY_LRU;
	if ((st = model_data_build(p, &oo, &m)))
		return st;
	if (n == 0) {
		model_data_free(&m);
		return LOMAS_OK;
	}
	if ((st = model_sort_sizes(cache_bytes, n, p->line_size, &ord, &lines)))
		goto done;
	if (!(out = malloc(n * sizeof *out))) {
		st = error_set(LOMAS_ENOMEM, "out of memory");
		goto done;
	}
	if (!(st = model_run(&m, policy, lines, n, flags, o->footprint, out))) {
		for (size_t i = 0; i < n; i++)
			ratios[ord[i].ix] = out[i];
		error_clear();
	}
done:
	free(ord);
	free(lines);
	free(out);
	model_data_free(&m);
	return st;
}

lomas_status lomas_model_miss_ratio(const lomas_profile *p, lomas_policy policy,
                                    uint64_t cache_bytes, uint32_t line_bytes, unsigned flags,
                                    double *ratio)
{
	error_clear();
	if (!ratio)
		return error_set(LOMAS_EINVAL, "lomas_model_miss_ratio: ratio is NULL");
	return lomas_model_curve(p, policy, &cache_bytes, 1, line_bytes, flags, ratio);
}

lomas_status lomas_model_curve(const lomas_profile *p, lomas_policy policy,
                               const uint64_t *cache_bytes, size_t n, uint32_t line_bytes,
                               unsigned flags, double *ratios)
{
	error_clear();
	uint32_t line = 0;
	lomas_status st =
	    model_check_args(p, policy, cache_bytes, n, line_bytes, flags, ratios, &line);
	if (st)
		return st;
	model_opts o = model_default_opts(policy);
	(void)line;
	return model_curve_opts(p, policy, cache_bytes, n, flags, &o, ratios);
}

#define DEFAULT_SIZES 81

lomas_status lomas_model_default_sizes(uint32_t line_bytes, uint64_t *sizes, size_t cap, size_t *n)
{
	error_clear();
	if (!n || (cap > 0 && !sizes))
		return error_set(LOMAS_EINVAL, "lomas_model_default_sizes: NULL argument");
	if (!line_size_valid(line_bytes))
		return error_set(LOMAS_EINVAL, "line size %u is not a power of two from 8 to 65536",
		                 line_bytes);
	for (size_t k = 0; k < DEFAULT_SIZES && k < cap; k++) {
		/* 2^(10 + k/4) bytes, to the nearest whole line (at least one). */
		double v = exp2(10.0 + (double)k / 4.0);
		double l = floor(v / line_bytes + 0.5);
		sizes[k] = (uint64_t)(l < 1.0 ? 1.0 : l) * line_bytes;
	}
	*n = DEFAULT_SIZES;
	return LOMAS_OK;
}

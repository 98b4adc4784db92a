/* STUB (helper: model). Public model entry points. */
#include "model.h"

lomas_status lomas_model_miss_ratio(const lomas_profile *p, lomas_policy policy,
				    uint64_t cache_bytes, uint32_t line_bytes, unsigned flags,
				    double *ratio)
{
	return lomas_model_curve(p, policy, &cache_bytes, 1, line_bytes, flags, ratio);
}

lomas_status lomas_model_curve(const lomas_profile *p, lomas_policy policy,
			       const uint64_t *cache_bytes, size_t n, uint32_t line_bytes,
			       unsigned flags, double *ratios)
{
	(void)p; (void)policy; (void)cache_bytes; (void)n; (void)line_bytes; (void)flags;
	(void)ratios;
	return error_set(LOMAS_ENOTSUP, "lomas_model_curve: not implemented");
}

lomas_status lomas_model_default_sizes(uint32_t line_bytes, uint64_t *sizes, size_t cap,
				       size_t *n)
{
	(void)line_bytes; (void)sizes; (void)cap; (void)n;
	return error_set(LOMAS_ENOTSUP, "lomas_model_default_sizes: not implemented");
}

/* The in-memory profile: construction, metadata, accessors, validation, merge. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"

lomas_status vec_reserve_(void **items, size_t *cap, size_t item_size, size_t want)
{
	size_t ncap;
	void *n;
	if (want <= *cap)
		return LOMAS_OK;
	ncap = *cap ? *cap : 16;
	while (ncap < want) {
		if (ncap > SIZE_MAX / 2)
			return error_set(LOMAS_ENOMEM, "array too large");
		ncap *= 2;
	}
	if (ncap > SIZE_MAX / item_size)
		return error_set(LOMAS_ENOMEM, "array too large");
	n = realloc(*items, ncap * item_size);
	if (!n)
		return error_set(LOMAS_ENOMEM, "out of memory growing an array to %zu items", ncap);
	mem_hint_huge(n, ncap * item_size); /* a 1M-sample profile's 64 MB: fewer faults */
	*items = n;
	*cap = ncap;
	return LOMAS_OK;
}

#define VEC_PUSH(v, x)                                           \
	do {                                                     \
		lomas_status st_ = vec_reserve((v), (v)->n + 1); \
		if (st_)                                         \
			return st_;                              \
		(v)->items[(v)->n++] = *(x);                     \
	} while (0)

/* Profiles alive: the last one freed empties the model's scratch pool (scratch.c). */
static atomic_size_t live_profiles;

lomas_status lomas_profile_new(uint32_t line_size, lomas_profile **out)
{
	error_clear();
	if (!out)
		return error_set(LOMAS_EINVAL, "lomas_profile_new: out is NULL");
	*out = NULL;
	if (!line_size_valid(line_size))
		return error_set(LOMAS_EINVAL, "line size %u is not a power of two from 8 to 65536",
		                 line_size);
	*out = calloc(1, sizeof **out);
	if (!*out)
		return error_set(LOMAS_ENOMEM, "out of memory");
	(*out)->line_size = line_size;
	atomic_fetch_add(&live_profiles, 1);
	return LOMAS_OK;
}

void lomas_profile_free(lomas_profile *p)
{
	if (!p)
		return;
	for (size_t i = 0; i < p->meta.n; i++) {
		free(p->meta.items[i].key);
		free(p->meta.items[i].value);
	}
	for (size_t i = 0; i < p->calib.n; i++)
		free(p->calib.items[i].key);
	for (size_t i = 0; i < p->maps.n; i++)
		free(p->maps.items[i].path);
	free(p->samples.items);
	free(p->windows.items);
	free(p->threads.items);
	free(p->meta.items);
	free(p->calib.items);
	free(p->maps.items);
	free(p);
	if (atomic_fetch_sub(&live_profiles, 1) == 1)
		big_release();
}

lomas_status profile_add_sample(struct lomas_profile *p, const lomas_sample *s)
{
	VEC_PUSH(&p->samples, s);
	return LOMAS_OK;
}

lomas_status profile_add_window(struct lomas_profile *p, const lomas_window *w)
{
	VEC_PUSH(&p->windows, w);
	return LOMAS_OK;
}

lomas_status profile_add_thread(struct lomas_profile *p, const lomas_thread *t)
{
	VEC_PUSH(&p->threads, t);
	return LOMAS_OK;
}

lomas_status profile_set_calib(struct lomas_profile *p, const char *key, double value)
{
	prof_calib c;
	for (size_t i = 0; i < p->calib.n; i++) {
		if (strcmp(p->calib.items[i].key, key) == 0) {
			p->calib.items[i].value = value;
			return LOMAS_OK;
		}
	}
	c.key = strdup(key);
	c.value = value;
	if (!c.key)
		return error_set(LOMAS_ENOMEM, "out of memory");
	if (vec_reserve(&p->calib, p->calib.n + 1)) {
		free(c.key);
		return LOMAS_ENOMEM;
	}
	p->calib.items[p->calib.n++] = c;
	return LOMAS_OK;
}

lomas_status profile_add_map(struct lomas_profile *p, const prof_map *m)
{
	prof_map c = *m;
	c.path = strdup(m->path ? m->path : "");
	if (!c.path)
		return error_set(LOMAS_ENOMEM, "out of memory");
	if (vec_reserve(&p->maps, p->maps.n + 1)) {
		free(c.path);
		return LOMAS_ENOMEM;
	}
	p->maps.items[p->maps.n++] = c;
	return LOMAS_OK;
}

lomas_status lomas_profile_meta_set(lomas_profile *p, const char *key, const char *value)
{
	error_clear();
	char *v;
	prof_meta m;
	if (!p || !key || !value || !*key)
		return error_set(LOMAS_EINVAL, "lomas_profile_meta_set: NULL or empty argument");
	v = strdup(value);
	if (!v)
		return error_set(LOMAS_ENOMEM, "out of memory");
	for (size_t i = 0; i < p->meta.n; i++) {
		if (strcmp(p->meta.items[i].key, key) == 0) {
			free(p->meta.items[i].value);
			p->meta.items[i].value = v;
			return LOMAS_OK;
		}
	}
	m.key = strdup(key);
	m.value = v;
	if (!m.key || vec_reserve(&p->meta, p->meta.n + 1)) {
		free(m.key);
		free(v);
		return error_set(LOMAS_ENOMEM, "out of memory");
	}
	p->meta.items[p->meta.n++] = m;
	return LOMAS_OK;
}

lomas_status profile_meta_setf(struct lomas_profile *p, const char *key, const char *fmt, ...)
{
	char buf[4096];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	return lomas_profile_meta_set(p, key, buf);
}

lomas_status lomas_profile_meta_get(const lomas_profile *p, const char *key, const char **value)
{
	error_clear();
	if (!p || !key || !value)
		return error_set(LOMAS_EINVAL, "lomas_profile_meta_get: NULL argument");
	for (size_t i = 0; i < p->meta.n; i++) {
		if (strcmp(p->meta.items[i].key, key) == 0) {
			*value = p->meta.items[i].value;
			return LOMAS_OK;
		}
	}
	*value = NULL;
	return error_set(LOMAS_ENOENT, "no metadata key '%s'", key);
}

size_t lomas_profile_meta_count(const lomas_profile *p)
{
	error_clear();
	return p ? p->meta.n : 0;
}

lomas_status lomas_profile_meta_at(const lomas_profile *p, size_t i, const char **key,
                                   const char **value)
{
	error_clear();
	if (!p || !key || !value)
		return error_set(LOMAS_EINVAL, "lomas_profile_meta_at: NULL argument");
	if (i >= p->meta.n)
		return error_set(LOMAS_ERANGE, "metadata index %zu out of range (%zu entries)", i,
		                 p->meta.n);
	*key = p->meta.items[i].key;
	*value = p->meta.items[i].value;
	return LOMAS_OK;
}

lomas_status lomas_profile_info_get(const lomas_profile *p, lomas_profile_info *out)
{
	lomas_profile_info full = LOMAS_PROFILE_INFO_INIT;
	error_clear();
	if (!p || !out)
		return error_set(LOMAS_EINVAL, "lomas_profile_info_get: NULL argument");
	memset(&full, 0, sizeof full);
	full.size = sizeof full;
	full.line_bytes = p->line_size;
	full.samples = p->samples.n;
	full.windows = p->windows.n;
	full.threads = p->threads.n;
	for (size_t i = 0; i < p->samples.n; i++) {
		const lomas_sample *s = &p->samples.items[i];
		full.reused += s->state == LOMAS_SAMPLE_REUSED;
		full.dangling += s->state == LOMAS_SAMPLE_DANGLING;
		full.censored += s->state == LOMAS_SAMPLE_CENSORED;
		full.sample_weight += s->weight;
	}
	for (size_t i = 0; i < p->threads.n; i++)
		full.refs += p->threads.items[i].refs;
	return out_sized_copy(out, &full, sizeof full, "lomas_profile_info_get");
}

/* Shared body of the three array accessors. */
static lomas_status copy_range(const void *items, size_t count, size_t item_size, size_t first,
                               size_t n, void *out, size_t *copied, const char *what)
{
	size_t k;
	if (!out || !copied)
		return error_set(LOMAS_EINVAL, "lomas_profile_%s: NULL argument", what);
	if (first > count)
		return error_set(LOMAS_ERANGE, "lomas_profile_%s: first %zu beyond %zu items", what,
		                 first, count);
	k = count - first < n ? count - first : n;
	if (k)
		memcpy(out, (const char *)items + first * item_size, k * item_size);
	*copied = k;
	return LOMAS_OK;
}

lomas_status lomas_profile_samples(const lomas_profile *p, size_t first, size_t n,
                                   lomas_sample *out, size_t *copied)
{
	error_clear();
	if (!p)
		return error_set(LOMAS_EINVAL, "lomas_profile_samples: NULL profile");
	return copy_range(p->samples.items, p->samples.n, sizeof(lomas_sample), first, n, out,
	                  copied, "samples");
}

lomas_status lomas_profile_windows(const lomas_profile *p, size_t first, size_t n,
                                   lomas_window *out, size_t *copied)
{
	error_clear();
	if (!p)
		return error_set(LOMAS_EINVAL, "lomas_profile_windows: NULL profile");
	return copy_range(p->windows.items, p->windows.n, sizeof(lomas_window), first, n, out,
	                  copied, "windows");
}

lomas_status lomas_profile_threads(const lomas_profile *p, size_t first, size_t n,
                                   lomas_thread *out, size_t *copied)
{
	error_clear();
	if (!p)
		return error_set(LOMAS_EINVAL, "lomas_profile_threads: NULL profile");
	return copy_range(p->threads.items, p->threads.n, sizeof(lomas_thread), first, n, out,
	                  copied, "threads");
}

lomas_status profile_validate(const struct lomas_profile *p)
{
	if (!line_size_valid(p->line_size))
		return error_set(LOMAS_EFORMAT,
		                 "line size %u is not a power of two from 8 to 65536",
		                 p->line_size);
	for (size_t i = 0; i < p->windows.n; i++) {
		const lomas_window *w = &p->windows.items[i];
		if (w->thread >= p->threads.n)
			return error_set(LOMAS_EFORMAT, "window %zu names thread %u of %zu", i,
			                 w->thread, p->threads.n);
	}
	uint64_t refs = 0;
	for (size_t i = 0; i < p->threads.n; i++) {
		if (p->threads.items[i].refs > UINT64_MAX - refs)
			return error_set(LOMAS_EFORMAT,
			                 "thread %zu: the references of all threads add up to more "
			                 "than 2^64-1",
			                 i);
		refs += p->threads.items[i].refs;
	}
	for (size_t i = 0; i < p->samples.n; i++) {
		lomas_status st = profile_check_sample(p, i, &p->samples.items[i]);
		if (st)
			return st;
	}
	return LOMAS_OK;
}

lomas_status profile_check_sample(const struct lomas_profile *p, size_t i, const lomas_sample *s)
{
	if (s->thread >= p->threads.n)
		return error_set(LOMAS_EFORMAT, "sample %zu names thread %u of %zu", i, s->thread,
		                 p->threads.n);
	if (s->window >= p->windows.n)
		return error_set(LOMAS_EFORMAT, "sample %zu names window %u of %zu", i, s->window,
		                 p->windows.n);
	if (p->windows.items[s->window].thread != s->thread)
		return error_set(LOMAS_EFORMAT,
		                 "sample %zu: thread %u differs from its window's %u", i, s->thread,
		                 p->windows.items[s->window].thread);
	if (s->kind > LOMAS_REF_STORE || s->state > LOMAS_SAMPLE_CENSORED)
		return error_set(LOMAS_EFORMAT, "sample %zu: bad kind %u or state %u", i, s->kind,
		                 s->state);
	if (!weight_valid(s->weight))
		return error_set(LOMAS_EFORMAT, "sample %zu: weight %g is not within 2^-64..2^64",
		                 i, s->weight);
	if (s->state != LOMAS_SAMPLE_DANGLING && s->end <= s->start)
		return error_set(LOMAS_EFORMAT, "sample %zu: end %llu not after start %llu", i,
		                 (unsigned long long)s->end, (unsigned long long)s->start);
	return LOMAS_OK;
}

lomas_status lomas_profile_merge(lomas_profile *dst, const lomas_profile *src)
{
	error_clear();
	const char *a = NULL, *b = NULL;
	size_t t0, w0;
	lomas_status st;
	if (!dst || !src || dst == src)
		return error_set(LOMAS_EINVAL, "lomas_profile_merge: NULL or identical profiles");
	if (dst->line_size != src->line_size)
		return error_set(LOMAS_EINVAL,
		                 "cannot merge profiles with %u-byte and %u-byte lines",
		                 dst->line_size, src->line_size);
	lomas_profile_meta_get(dst, "command", &a);
	lomas_profile_meta_get(src, "command", &b);
	error_clear();
	if (a && b && strcmp(a, b) != 0)
		return error_set(LOMAS_EINVAL,
		                 "cannot merge profiles of different programs ('%s' and '%s')", a,
		                 b);
	if (src->threads.n > UINT32_MAX - dst->threads.n ||
	    src->windows.n > UINT32_MAX - dst->windows.n)
		return error_set(LOMAS_ERANGE, "merged profile would have too many windows");
	/* lomas_profile_info's refs: the merged threads' references must add up in 64 bits. */
	{
		uint64_t refs = 0;
		for (int k = 0; k < 2; k++) {
			const lomas_profile *q = k ? src : dst;
			for (size_t i = 0; i < q->threads.n; i++) {
				if (q->threads.items[i].refs > UINT64_MAX - refs)
					return error_set(
					    LOMAS_ERANGE,
					    "the merged profile's references would add "
					    "up to more than 2^64-1");
				refs += q->threads.items[i].refs;
			}
		}
	}
	/* Reserve everything first so a failure leaves dst unchanged. */
	if ((st = vec_reserve(&dst->threads, dst->threads.n + src->threads.n)) ||
	    (st = vec_reserve(&dst->windows, dst->windows.n + src->windows.n)) ||
	    (st = vec_reserve(&dst->samples, dst->samples.n + src->samples.n)))
		return st;
	t0 = dst->threads.n;
	w0 = dst->windows.n;
	for (size_t i = 0; i < src->threads.n; i++)
		dst->threads.items[dst->threads.n++] = src->threads.items[i];
	for (size_t i = 0; i < src->windows.n; i++) {
		lomas_window w = src->windows.items[i];
		w.thread += (uint32_t)t0;
		dst->windows.items[dst->windows.n++] = w;
	}
	for (size_t i = 0; i < src->samples.n; i++) {
		lomas_sample s = src->samples.items[i];
		s.thread += (uint32_t)t0;
		s.window += (uint32_t)w0;
		dst->samples.items[dst->samples.n++] = s;
	}
	if (!a && b)
		lomas_profile_meta_set(dst, "command", b);
	return LOMAS_OK;
}

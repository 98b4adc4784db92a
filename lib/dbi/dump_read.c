/*
 * The host side of the dbi clock's hand-over (dump.h): the tool's threads,
 * sample streams and mappings become a profile, assembled with the sampler
 * core (lib/sampler/assemble.c) exactly as the inline runtime assembles its
 * own at exit. The file comes from another process and is untrusted: every
 * length and count is checked against what is left, every record decoded
 * within its block, and anything wrong gives LOMAS_EFORMAT with its offset.
 */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dbi.h"
#include "dump.h"
#include "sampler/sampler.h"

/* Threads and mappings a file may have (far above what a process has). */
#define MAX_THREADS (1u << 20)
#define MAX_MAPS (1u << 20)
#define MAX_BLOCKS (1u << 16)
/* Windows a profile may have (24 bytes each): a run of 10^10 references cut
 * into windows of 1000 has 10^7. A 1.4 KB fuzz input that asks for millions
 * took 9 s and 900 MB under ASan (building, validating and saving them), past
 * libFuzzer's 10 s limit: fuzz builds check the same at a lower count. */
#ifdef FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION
#define MAX_WINDOWS (1u << 16)
#else
#define MAX_WINDOWS (1u << 24)
#endif

typedef struct reader {
	const uint8_t *base;
	size_t len, at;
	const char *name;
} reader;

static lomas_status bad(const reader *r, const char *what)
{
	return error_set(LOMAS_EFORMAT, "%s: offset %zu: %s", r->name, r->at, what);
}

/* Copy n bytes at the cursor into out and move on; false if fewer are left. */
static bool take(reader *r, void *out, size_t n)
{
	if (r->len - r->at < n)
		return false;
	memcpy(out, r->base + r->at, n);
	r->at += n;
	return true;
}

/* One thread's header and blocks, checked. */
typedef struct thread_view {
	dump_thread th;
	size_t blocks_at; /* offset of its first dump_block */
	uint64_t samples;
} thread_view;

/* Check thread tv's blocks (lengths only) and move past them. */
static lomas_status skim_blocks(reader *r, thread_view *tv)
{
	tv->blocks_at = r->at;
	if (tv->th.nblocks > MAX_BLOCKS)
		return bad(r, "too many sample blocks");
	for (uint32_t b = 0; b < tv->th.nblocks; b++) {
		dump_block blk;
		if (!take(r, &blk, sizeof blk))
			return bad(r, "truncated sample block header");
		if (blk.len > r->len - r->at)
			return bad(r, "sample block longer than the file");
		/* A record is at least 7 bytes (5 varints, 2 bytes). */
		if (blk.n > blk.len / 7)
			return bad(r, "sample block holds fewer bytes than its records need");
		r->at += blk.len;
		tv->samples += blk.n;
	}
	return LOMAS_OK;
}

/* Decode tv's blocks into p (pl: where its samples go). */
static lomas_status add_samples(reader *r, const thread_view *tv, const inline_sample_place *pl,
                                lomas_profile *p)
{
	r->at = tv->blocks_at;
	for (uint32_t b = 0; b < tv->th.nblocks; b++) {
		dump_block blk;
		const uint8_t *q, *end;
		packed_sample prev, s;
		take(r, &blk, sizeof blk); /* checked by skim_blocks */
		q = r->base + r->at;
		end = q + blk.len;
		memset(&prev, 0, sizeof prev);
		for (uint64_t i = 0; i < blk.n; i++) {
			lomas_sample out;
			lomas_status st;
			const uint8_t *next = packed_get(q, end, &s, &prev);
			if (!next) {
				r->at = (size_t)(q - r->base);
				return bad(r, "malformed sample record");
			}
			if ((next[-2] & PACKED_KIND_RESERVED) || s.cross ||
			    s.kind > LOMAS_REF_STORE || s.state > LOMAS_SAMPLE_CENSORED ||
			    s.level > 63 || s.start >= tv->th.refs ||
			    (s.state != LOMAS_SAMPLE_DANGLING &&
			     (s.end == LOMAS_CLOCK_NONE || s.end <= s.start ||
			      s.end > tv->th.refs)) ||
			    (s.state == LOMAS_SAMPLE_DANGLING && s.end != LOMAS_CLOCK_NONE)) {
				r->at = (size_t)(q - r->base);
				return bad(r, "sample record out of range");
			}
			prev = s;
			if (s.level < blk.floor)
				s.level = (uint8_t)(blk.floor > 63 ? 63 : blk.floor);
			inline_sample_to_profile(&s, pl, &out);
			if ((st = profile_add_sample(p, &out)))
				return st;
			q = next;
		}
		if (q != end) {
			r->at = (size_t)(q - r->base);
			return bad(r, "bytes left over after a block's records");
		}
		r->at += blk.len;
	}
	return LOMAS_OK;
}

static int by_thread_start(const void *a, const void *b)
{
	const dump_exact_rec *x = a, *y = b;
	if (x->index != y->index)
		return x->index < y->index ? -1 : 1;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return (x->end > y->end) - (x->end < y->end);
}

/*
 * The tool's exact stack distances (dump_exact_head, records): each goes to
 * the reused sample of its thread with its clocks (a sample the period
 * thinned away leaves its distance unused). A distance no sample can have
 * (a thread that is not in the file, clocks out of order) is an error.
 */
static lomas_status add_exact(reader *r, uint32_t nthreads, lomas_profile *p)
{
	dump_exact_head e;
	dump_exact_rec *x;
	uint64_t used = 0;
	if (!take(r, &e, sizeof e))
		return bad(r, "truncated exact distances");
	if (e.n > (r->len - r->at) / sizeof *x)
		return bad(r, "more exact distances than the file holds");
	if (!(e.budget >= 0.0 && e.budget <= 1.0))
		return bad(r, "exact distances' budget out of range");
	if (!(x = malloc((e.n ? e.n : 1) * sizeof *x)))
		return error_set(LOMAS_ENOMEM, "out of memory");
	memcpy(x, r->base + r->at, e.n * sizeof *x);
	/* Distinct other lines strictly between: at most the references between. */
	for (uint64_t i = 0; i < e.n; i++)
		if (x[i].index >= nthreads || x[i].end <= x[i].start ||
		    x[i].sd > x[i].end - x[i].start - 1) {
			free(x);
			return bad(r, "exact distance out of range");
		}
	r->at += e.n * sizeof *x;
	qsort(x, e.n, sizeof *x, by_thread_start);
	for (size_t i = 0; i < p->samples.n && e.n; i++) {
		lomas_sample *s = &p->samples.items[i];
		size_t lo = 0, hi = e.n;
		if (s->state != LOMAS_SAMPLE_REUSED)
			continue;
		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;
			if (x[mid].index < s->thread ||
			    (x[mid].index == s->thread && x[mid].start < s->start))
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo < e.n && x[lo].index == s->thread && x[lo].start == s->start &&
		    x[lo].end == s->end) {
			s->flags |= LOMAS_SAMPLE_EXACT_SD;
			s->reserved = x[lo].sd;
			used++;
		}
	}
	free(x);
	profile_meta_setf(p, "exact_bursts", "%llu, %llu references (budget %g%%), %llu distances",
	                  (unsigned long long)e.bursts, (unsigned long long)e.refs,
	                  100.0 * e.budget, (unsigned long long)used);
	return LOMAS_OK;
}

static lomas_status add_maps(reader *r, uint32_t nmaps, lomas_profile *p)
{
	for (uint32_t i = 0; i < nmaps; i++) {
		dump_map m;
		prof_map pm;
		char *path;
		lomas_status st;
		if (!take(r, &m, sizeof m))
			return bad(r, "truncated mapping");
		if (m.end <= m.start || m.path_len > 4096 || m.path_len > r->len - r->at)
			return bad(r, "bad mapping");
		if (!(path = malloc((size_t)m.path_len + 1)))
			return error_set(LOMAS_ENOMEM, "out of memory");
		memcpy(path, r->base + r->at, m.path_len);
		path[m.path_len] = '\0';
		r->at += m.path_len;
		if (strlen(path) != m.path_len) {
			free(path);
			return bad(r, "mapping path with a NUL byte");
		}
		pm = (prof_map){.start = m.start,
		                .end = m.end,
		                .offset = m.offset,
		                .prot = m.prot & 7u,
		                .path = path};
		st = profile_add_map(p, &pm);
		free(path);
		if (st)
			return st;
	}
	return LOMAS_OK;
}

/* A NUL-terminated copy of a fixed field that may lack its NUL. */
static void fixed_string(char *out, size_t cap, const char *field, size_t len)
{
	size_t n = strnlen(field, len);
	if (n >= cap)
		n = cap - 1;
	for (size_t i = 0; i < n; i++)
		out[i] = (field[i] >= 0x20 && field[i] < 0x7f) ? field[i] : '?';
	out[n] = '\0';
}

static const char *ended_name(int ended)
{
	switch (ended) {
	case DUMP_ENDED_EXIT: return "exit";
	case DUMP_ENDED_SIGNAL: return "signal";
	case DUMP_ENDED_EXEC: return "exec (the new program ran natively)";
	case DUMP_ENDED_SNAPSHOT: return "detached (the program ran on)";
	default: return "?";
	}
}

/*
 * The window for period auto, as the inline runtime's exit path chooses
 * it: 256 x the references per sample held (the samples' mixed weights),
 * else 256 x the largest period in force.
 */
static uint64_t auto_window(const dump_header *h, const thread_view *tv)
{
	uint64_t refs = 0, held = 0;
	double max_period = 0;
	for (uint32_t i = 0; i < h->nthreads; i++) {
		double period = ldexp(tv[i].th.base_period, (int)tv[i].th.level);
		refs += tv[i].th.refs;
		held += tv[i].samples;
		if (period > max_period)
			max_period = period;
	}
	if (h->period == 0 && held && refs / held > AUTO_START_PERIOD)
		return 256 * (refs / held);
	return (uint64_t)(256.0 * (max_period > 0 ? max_period : AUTO_START_PERIOD));
}

lomas_status dbi_dump_read(const void *data, size_t len, const char *name, lomas_profile **out,
                           dbi_dump_info *info)
{
	reader r = {.base = data, .len = len, .name = name ? name : "(dbi hand-over)"};
	dump_header h;
	thread_view *tv = NULL;
	lomas_profile *p = NULL;
	lomas_status st;
	uint64_t window;
	char vg[32], tool[32];
	*out = NULL;
	if (!data || !take(&r, &h, sizeof h))
		return bad(&r, "truncated header");
	if (memcmp(h.magic, DUMP_MAGIC, sizeof h.magic) != 0)
		return error_set(LOMAS_EFORMAT, "%s: not a dbi hand-over file", r.name);
	if (h.version != DUMP_VERSION)
		return error_set(LOMAS_EFORMAT, "%s: hand-over version %u (this library reads %u)",
		                 r.name, h.version, DUMP_VERSION);
	if (h.header_bytes < sizeof h || h.header_bytes > len)
		return bad(&r, "bad header length");
	r.at = h.header_bytes; /* a later version may add fields */
	if (!line_size_valid(h.line_size) || h.nthreads > MAX_THREADS || h.nmaps > MAX_MAPS ||
	    h.auto_level > AUTO_MAX_LEVEL)
		return bad(&r, "header field out of range");
	fixed_string(vg, sizeof vg, h.valgrind_version, sizeof h.valgrind_version);
	fixed_string(tool, sizeof tool, h.tool_version, sizeof h.tool_version);
	if (!(tv = calloc(h.nthreads ? h.nthreads : 1, sizeof *tv)))
		return error_set(LOMAS_ENOMEM, "out of memory");
	for (uint32_t i = 0; i < h.nthreads; i++) {
		if (!take(&r, &tv[i].th, sizeof tv[i].th)) {
			st = bad(&r, "truncated thread");
			goto fail;
		}
		if (!(tv[i].th.base_period >= 1.0 && tv[i].th.base_period < 1e18) ||
		    tv[i].th.level > AUTO_MAX_LEVEL || tv[i].th.index != i) {
			st = bad(&r, "thread field out of range");
			goto fail;
		}
		if ((st = skim_blocks(&r, &tv[i])))
			goto fail;
	}
	window = h.window ? h.window : auto_window(&h, tv);
	{
		uint64_t windows = 0;
		for (uint32_t i = 0; i < h.nthreads && windows <= MAX_WINDOWS; i++)
			windows += windows_count(tv[i].th.refs, window);
		if (windows > MAX_WINDOWS) {
			st = error_set(LOMAS_ERANGE,
			               "%s: more than %u windows of %llu references (a longer "
			               "window)",
			               r.name, MAX_WINDOWS, (unsigned long long)window);
			goto fail;
		}
	}
	if ((st = lomas_profile_new(h.line_size, &p)))
		goto fail;
	{
		size_t maps_at = r.at;
		for (uint32_t i = 0; i < h.nthreads; i++) {
			inline_thread_data td = {.tid = tv[i].th.tid,
			                         .refs = tv[i].th.refs,
			                         .base_period = tv[i].th.base_period};
			inline_sample_place pl;
			if ((st = inline_profile_add_thread_head(p, &td, window, &pl)) ||
			    (st = vec_reserve(&p->samples, p->samples.n + tv[i].samples)) ||
			    (st = add_samples(&r, &tv[i], &pl, p)))
				goto fail;
		}
		r.at = maps_at;
	}
	if ((st = add_maps(&r, h.nmaps, p)))
		goto fail;
	if ((h.flags & DUMP_FLAG_EXACT) && (st = add_exact(&r, h.nthreads, p)))
		goto fail;
	if (r.at != len) {
		st = bad(&r, "bytes left over at the end");
		goto fail;
	}
	profile_meta_setf(p, "clock", "dbi");
	profile_meta_setf(p, "watch", "dbi (per-thread filter and table, in the Valgrind tool)");
	profile_meta_setf(p, "dbi_tool", "lomas %s", tool);
	profile_meta_setf(p, "valgrind", "%s", vg);
	profile_meta_setf(p, "pid", "%llu", (unsigned long long)h.pid);
	if (h.period)
		profile_meta_setf(p, "period", "%llu", (unsigned long long)h.period);
	else
		profile_meta_setf(p, "period", "auto (final level %u)", h.auto_level);
	profile_meta_setf(p, "seed", "%llu", (unsigned long long)h.seed);
	profile_meta_setf(p, "line_size", "%u", h.line_size);
	profile_meta_setf(p, "window", "%llu", (unsigned long long)window);
	profile_meta_setf(p, "max_samples_live", "%u", h.max_live);
	profile_meta_setf(p, "reuse", "per-thread (touches by other threads are not seen)");
	profile_meta_setf(p, "children", "not followed (--trace-children=no: they run natively)");
	profile_meta_setf(p, "ended", "%s", ended_name(h.ended));
	if (h.lost)
		profile_meta_setf(p, "samples_lost", "%llu (out of memory)",
		                  (unsigned long long)h.lost);
	if ((st = profile_validate(p)))
		goto fail;
	if (info) {
		info->ended = h.ended;
		info->traced = (h.flags & DUMP_FLAG_TRACE) != 0;
		info->pid = h.pid;
		info->lost = h.lost;
		memcpy(info->valgrind_version, vg, sizeof vg);
		memcpy(info->tool_version, tool, sizeof tool);
	}
	free(tv);
	*out = p;
	return LOMAS_OK;
fail:
	free(tv);
	lomas_profile_free(p);
	return st;
}

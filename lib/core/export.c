/*
 * JSON and CSV export of a profile. Every JSON value is encoded by libjansson;
 * only the punctuation of the top-level object and arrays is written here, so
 * a million-sample profile never becomes one jansson tree in memory.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "core.h"

/*
 * ASCII only: text from the profile (a command line, paths) may hold control
 * characters, C1 controls (U+009B is CSI to a UTF-8 xterm) or bidirectional
 * overrides; as \uXXXX escapes they stay the same JSON strings and an export
 * is safe to look at in a terminal.
 */
#define JSON_FLAGS (JSON_COMPACT | JSON_ENCODE_ANY | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII)
#define EXPORT_VERSION 1

/* Length of a valid UTF-8 sequence at s (as jansson accepts it), or 0. */
static size_t utf8_seq(const unsigned char *s)
{
	unsigned c = s[0];
	size_t n;
	uint32_t cp;
	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf) {
		n = 2;
		cp = c & 0x1f;
	} else if (c >= 0xe0 && c <= 0xef) {
		n = 3;
		cp = c & 0x0f;
	} else if (c >= 0xf0 && c <= 0xf4) {
		n = 4;
		cp = c & 0x07;
	} else {
		return 0;
	}
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80) /* also stops at the terminating NUL */
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10ffff ||
	    (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

/*
 * A JSON string for s. Strings that are not valid UTF-8 (metadata may hold
 * raw bytes from a command line) get U+FFFD for each bad byte.
 */
static json_t *jstr(const char *s)
{
	json_t *j = json_string(s);
	char *fixed, *q;
	if (j)
		return j;
	fixed = malloc(strlen(s) * 3 + 1);
	if (!fixed)
		return NULL;
	q = fixed;
	for (const unsigned char *p = (const unsigned char *)s; *p;) {
		size_t n = utf8_seq(p);
		if (n) {
			memcpy(q, p, n);
			q += n;
			p += n;
		} else {
			memcpy(q, "\xef\xbf\xbd", 3);
			q += 3;
			p++;
		}
	}
	*q = '\0';
	j = json_string(fixed);
	free(fixed);
	return j;
}

/* An unsigned integer; above INT64_MAX (JSON integers in jansson are signed) a decimal string. */
static json_t *ju64(uint64_t v)
{
	char buf[24];
	if (v <= INT64_MAX)
		return json_integer((json_int_t)v);
	snprintf(buf, sizeof buf, "%" PRIu64, v);
	return json_string(buf);
}

static json_t *jhex(uint64_t v)
{
	char buf[24];
	snprintf(buf, sizeof buf, "0x%" PRIx64, v);
	return json_string(buf);
}

/* A finite double, or null (JSON has no NaN or infinity). */
static json_t *jreal(double d)
{
	return isfinite(d) ? json_real(d) : json_null();
}

/* Set obj[key] = v, owning v; false on failure (including v == NULL). */
static bool put(json_t *obj, const char *key, json_t *v)
{
	return v && json_object_set_new(obj, key, v) == 0;
}

/* Write one value and drop it; false if it could not be built or written. */
static bool emit(FILE *out, json_t *v)
{
	int rc;
	if (!v)
		return false;
	rc = json_dumpf(v, out, JSON_FLAGS);
	json_decref(v);
	return rc == 0;
}

static const char *state_name(unsigned s)
{
	switch (s) {
	case LOMAS_SAMPLE_REUSED: return "reused";
	case LOMAS_SAMPLE_DANGLING: return "dangling";
	case LOMAS_SAMPLE_CENSORED: return "censored";
	default: return "unknown";
	}
}

static const char *kind_name(unsigned k)
{
	return k == LOMAS_REF_LOAD ? "load" : k == LOMAS_REF_STORE ? "store" : "unknown";
}

static json_t *sample_json(const lomas_sample *s)
{
	json_t *o = json_object();
	bool has_end = s->state == LOMAS_SAMPLE_REUSED || s->state == LOMAS_SAMPLE_CENSORED;
	bool reused = s->state == LOMAS_SAMPLE_REUSED && s->end > s->start;
	if (o && put(o, "thread", json_integer(s->thread)) &&
	    put(o, "window", json_integer(s->window)) && put(o, "start", ju64(s->start)) &&
	    put(o, "end", has_end ? ju64(s->end) : json_null()) &&
	    put(o, "distance", reused ? ju64(sample_distance(s)) : json_null()) &&
	    put(o, "state", json_string(state_name(s->state))) &&
	    put(o, "kind", json_string(kind_name(s->kind))) && put(o, "addr", jhex(s->addr)) &&
	    put(o, "start_pc", jhex(s->start_pc)) && put(o, "end_pc", jhex(s->end_pc)) &&
	    put(o, "weight", jreal(s->weight)) &&
	    put(o, "cross_thread", json_boolean(s->flags & LOMAS_SAMPLE_CROSS_THREAD)) &&
	    /* Only where known (EXACTSD): older exports stay as they were. */
	    (!(s->flags & LOMAS_SAMPLE_EXACT_SD) ||
	     put(o, "stack_distance", json_integer((json_int_t)s->reserved))))
		return o;
	json_decref(o);
	return NULL;
}

static json_t *meta_json(const lomas_profile *p)
{
	json_t *o = json_object();
	for (size_t i = 0; o && i < p->meta.n; i++) {
		json_t *k = jstr(p->meta.items[i].key);
		bool ok = k && put(o, json_string_value(k), jstr(p->meta.items[i].value));
		json_decref(k);
		if (!ok) {
			json_decref(o);
			return NULL;
		}
	}
	return o;
}

static json_t *calib_json(const lomas_profile *p)
{
	json_t *o = json_object();
	for (size_t i = 0; o && i < p->calib.n; i++) {
		json_t *k = jstr(p->calib.items[i].key);
		bool ok = k && put(o, json_string_value(k), jreal(p->calib.items[i].value));
		json_decref(k);
		if (!ok) {
			json_decref(o);
			return NULL;
		}
	}
	return o;
}

static json_t *thread_json(const lomas_thread *t)
{
	json_t *o = json_object();
	if (o && put(o, "tid", ju64(t->tid)) && put(o, "refs", ju64(t->refs)))
		return o;
	json_decref(o);
	return NULL;
}

static json_t *window_json(const lomas_window *w)
{
	json_t *o = json_object();
	if (o && put(o, "start", ju64(w->start)) && put(o, "refs", ju64(w->refs)) &&
	    put(o, "thread", json_integer(w->thread)))
		return o;
	json_decref(o);
	return NULL;
}

static json_t *map_json(const prof_map *m)
{
	json_t *o = json_object();
	char id[2 * PROF_BUILD_ID_MAX + 1];
	for (unsigned i = 0; i < m->build_id_len && i < PROF_BUILD_ID_MAX; i++)
		snprintf(id + 2 * i, 3, "%02x", m->build_id[i]);
	id[2 * (m->build_id_len < PROF_BUILD_ID_MAX ? m->build_id_len : PROF_BUILD_ID_MAX)] = '\0';
	if (o && put(o, "start", jhex(m->start)) && put(o, "end", jhex(m->end)) &&
	    put(o, "offset", jhex(m->offset)) && put(o, "prot", json_integer(m->prot)) &&
	    put(o, "path", jstr(m->path)) &&
	    put(o, "build_id", m->build_id_len ? json_string(id) : json_null()))
		return o;
	json_decref(o);
	return NULL;
}

/* Write "key":[ items ] with each item built by fn; false on failure. */
#define EMIT_ARRAY(out, key, vec, fn)                                                          \
	do {                                                                                   \
		if (fputs(",\n\"" key "\":[", out) < 0)                                        \
			return false;                                                          \
		for (size_t i_ = 0; i_ < (vec).n; i_++) {                                      \
			if ((i_ && fputs(",\n", out) < 0) || !emit(out, fn(&(vec).items[i_]))) \
				return false;                                                  \
		}                                                                              \
		if (fputc(']', out) == EOF)                                                    \
			return false;                                                          \
	} while (0)

static bool export_json(const lomas_profile *p, FILE *out)
{
	if (fputs("{\"format\":\"lomas-profile\",\"version\":", out) < 0 ||
	    !emit(out, json_integer(EXPORT_VERSION)) || fputs(",\"line_size\":", out) < 0 ||
	    !emit(out, json_integer(p->line_size)) || fputs(",\n\"meta\":", out) < 0 ||
	    !emit(out, meta_json(p)) || fputs(",\n\"calibration\":", out) < 0 ||
	    !emit(out, calib_json(p)))
		return false;
	EMIT_ARRAY(out, "threads", p->threads, thread_json);
	EMIT_ARRAY(out, "windows", p->windows, window_json);
	EMIT_ARRAY(out, "samples", p->samples, sample_json);
	EMIT_ARRAY(out, "maps", p->maps, map_json);
	return fputs("}\n", out) >= 0;
}

static bool export_csv(const lomas_profile *p, FILE *out)
{
	if (fputs("thread,window,start,end,distance,state,kind,addr,start_pc,end_pc,weight\n",
	          out) < 0)
		return false;
	for (size_t i = 0; i < p->samples.n; i++) {
		const lomas_sample *s = &p->samples.items[i];
		char end[24] = "", dist[24] = "";
		if (s->state == LOMAS_SAMPLE_REUSED || s->state == LOMAS_SAMPLE_CENSORED)
			snprintf(end, sizeof end, "%" PRIu64, s->end);
		if (s->state == LOMAS_SAMPLE_REUSED && s->end > s->start)
			snprintf(dist, sizeof dist, "%" PRIu64, sample_distance(s));
		if (fprintf(out,
		            "%" PRIu32 ",%" PRIu32 ",%" PRIu64 ",%s,%s,%s,%s,0x%" PRIx64
		            ",0x%" PRIx64 ",0x%" PRIx64 ",%.17g\n",
		            s->thread, s->window, s->start, end, dist, state_name(s->state),
		            kind_name(s->kind), s->addr, s->start_pc, s->end_pc, s->weight) < 0)
			return false;
	}
	return true;
}

lomas_status lomas_profile_export(const lomas_profile *p, lomas_export_format format, FILE *out)
{
	error_clear();
	bool ok;
	if (!p || !out)
		return error_set(LOMAS_EINVAL, "lomas_profile_export: NULL argument");
	if (format != LOMAS_EXPORT_JSON && format != LOMAS_EXPORT_CSV)
		return error_set(LOMAS_EINVAL, "lomas_profile_export: unknown format %d",
		                 (int)format);
	errno = 0;
	ok = format == LOMAS_EXPORT_JSON ? export_json(p, out) : export_csv(p, out);
	if (ok && fflush(out) == 0 && !ferror(out))
		return LOMAS_OK;
	if (!ok && !ferror(out))
		return error_set(LOMAS_ENOMEM, "export: out of memory building JSON");
	return error_set(LOMAS_EIO, "export: write error: %s", strerror(errno ? errno : EIO));
}

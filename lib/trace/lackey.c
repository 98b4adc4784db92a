/*
 * Valgrind lackey --trace-mem=yes reader. The format, as lackey writes it
 * (lk_main.c: "I  %08lx,%lu", " L %08lx,%lu", " S ...", " M ..."):
 *   I  04016bd0,3      an instruction: not a reference; its address is the pc
 *                      of the data references that follow
 *    L 04222cac,4      a load  (one reference)
 *    S 7ff000398,8     a store (one reference)
 *    M 0421ce20,4      a modify: a load then a store (two references)
 * Valgrind's own lines start "==PID==" (or "--PID--", "**PID**", or "###"
 * for its DWARF reader's notes) and are skipped whatever their length. Lackey has no threads: all
 * is thread 0. Parsing is by hand over large reads: no sscanf, no per-line stdio.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "trace.h"

#define LACKEY_BUF_BYTES (256u * 1024u)
#define SHOW_MAX 60 /* characters of a bad line quoted in the message */

/* 0..15 for hex digits, 0xff otherwise. */
static const uint8_t hexval[256] = {
    ['0'] = 0,  ['1'] = 1,  ['2'] = 2,  ['3'] = 3,  ['4'] = 4,  ['5'] = 5,  ['6'] = 6,  ['7'] = 7,
    ['8'] = 8,  ['9'] = 9,  ['a'] = 10, ['b'] = 11, ['c'] = 12, ['d'] = 13, ['e'] = 14, ['f'] = 15,
    ['A'] = 10, ['B'] = 11, ['C'] = 12, ['D'] = 13, ['E'] = 14, ['F'] = 15,
};

static inline bool is_hex(unsigned char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

typedef struct lackey {
	struct lomas_trace *t;
	const char *name;
	uint64_t lineno; /* 1-based number of the line being parsed */
	uint64_t pc;     /* address of the last I line */
	/* What Valgrind's own lines say about the traced program (lackey_maps.c). */
	char command[LACKEY_MAX_LINE + 1]; /* "==PID== Command: ..." */
	char syms[LACKEY_MAX_LINE + 1];    /* the first "--PID-- Reading syms from PATH" (-v) */
} lackey;

/* EFORMAT "name:line: what (text)", quoting at most SHOW_MAX printable characters. */
static lomas_status bad_line(const lackey *lk, const char *what, const char *s, size_t len)
{
	char show[SHOW_MAX + 4];
	size_t n = len < SHOW_MAX ? len : SHOW_MAX;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		show[i] = (c >= 0x20 && c < 0x7f) ? (char)c : '?';
	}
	if (len > SHOW_MAX)
		memcpy(show + n, "...", 3), n += 3;
	show[n] = '\0';
	return error_set(LOMAS_EFORMAT, "%s:%" PRIu64 ": %s ('%s')", lk->name, lk->lineno, what,
	                 show);
}

/*
 * A line Valgrind itself wrote into the log: "==123==", "--123--" or
 * "**123**" then anything (its messages, debug lines and errors), or "###"
 * then anything (the DWARF reader's notes printed without a pid, e.g.
 * "### unhandled dwarf2 abbrev form code 0x25" for clang's DWARF 5 in 3.19).
 */
static bool is_valgrind_line(const char *s, size_t len)
{
	char m;
	size_t i = 2, d;
	if (len >= 3 && s[0] == '#' && s[1] == '#' && s[2] == '#')
		return true;
	if (len < 5)
		return false;
	m = s[0];
	if ((m != '=' && m != '-' && m != '*') || s[1] != m)
		return false;
	for (d = 0; i < len && s[i] >= '0' && s[i] <= '9'; i++, d++)
		;
	return d > 0 && i + 1 < len && s[i] == m && s[i + 1] == m;
}

/* Keep the text after `key` in a Valgrind line s (len bytes) into out, once. */
static void note(const char *s, size_t len, const char *key, char *out)
{
	size_t k = strlen(key);
	const char *at;
	if (out[0] || len > LACKEY_MAX_LINE)
		return;
	for (at = s; at + k <= s + len; at++) {
		if (memcmp(at, key, k) == 0) {
			size_t n = (size_t)(s + len - at - k);
			memcpy(out, at + k, n);
			out[n] = '\0';
			return;
		}
	}
}

/* Parse one line (without its '\n') and feed its references to the clock. */
static lomas_status parse_line(lackey *lk, const char *s, size_t len)
{
	const char *line = s;
	size_t full = len, i = 0, nd;
	uint64_t addr = 0, size = 0;
	char op;
	lomas_status st;

	/* Judged on the first LACKEY_MAX_LINE bytes, as read_all does for unfinished lines. */
	if (full > LACKEY_MAX_LINE) {
		if (is_valgrind_line(s, LACKEY_MAX_LINE))
			return LOMAS_OK;
		return bad_line(lk, "line too long", line, full);
	}
	while (len && (s[len - 1] == '\r' || s[len - 1] == ' ' || s[len - 1] == '\t'))
		len--;
	while (i < len && (s[i] == ' ' || s[i] == '\t'))
		i++;
	if (i == len)
		return LOMAS_OK; /* blank */
	if (is_valgrind_line(s, len)) {
		note(s, len, "== Command: ", lk->command);
		note(s, len, "-- Reading syms from ", lk->syms);
		return LOMAS_OK;
	}
	op = s[i++];
	if (op != 'I' && op != 'L' && op != 'S' && op != 'M')
		return bad_line(lk, "not a lackey line (expected I, L, S, M or ==PID==)", line,
		                full);
	if (i == len || s[i] != ' ')
		return bad_line(lk, "expected a space after the operation letter", line, full);
	while (i < len && s[i] == ' ')
		i++;
	for (nd = 0; i < len && is_hex((unsigned char)s[i]); i++, nd++)
		addr = (addr << 4) | hexval[(unsigned char)s[i]];
	if (nd == 0)
		return bad_line(lk, "bad hex address", line, full);
	if (nd > 16)
		return bad_line(lk, "address has more than 16 hex digits", line, full);
	if (i == len || s[i] != ',')
		return bad_line(lk, "expected ',' after the address", line, full);
	i++;
	for (nd = 0; i < len && s[i] >= '0' && s[i] <= '9'; i++, nd++) {
		if (size > (UINT32_MAX - 9) / 10)
			return bad_line(lk, "size too large", line, full);
		size = size * 10 + (uint64_t)(s[i] - '0');
	}
	if (nd == 0)
		return bad_line(lk, "missing or bad decimal size", line, full);
	if (i != len)
		return bad_line(lk, "unexpected text after the size", line, full);
	switch (op) {
	case 'I': lk->pc = addr; return LOMAS_OK;
	case 'L': st = trace_ref_fast(lk->t, 0, addr, lk->pc, LOMAS_REF_LOAD); break;
	case 'S': st = trace_ref_fast(lk->t, 0, addr, lk->pc, LOMAS_REF_STORE); break;
	default: /* 'M': a load then a store by the same instruction */
		st = trace_ref_fast(lk->t, 0, addr, lk->pc, LOMAS_REF_LOAD);
		if (!st)
			st = trace_ref_fast(lk->t, 0, addr, lk->pc, LOMAS_REF_STORE);
		break;
	}
	if (st)
		return error_prefix(st, "%s:%" PRIu64, lk->name, lk->lineno);
	return LOMAS_OK;
}

/* Read the whole stream through the parser in chunks of buf_bytes. */
static lomas_status read_all(lackey *lk, FILE *in, char *buf, size_t cap)
{
	size_t have = 0;
	bool skipping = false; /* inside an overlong Valgrind line */
	lomas_status st;
	for (;;) {
		size_t n = fread(buf + have, 1, cap - have, in);
		char *p = buf, *end, *nl;
		if (n == 0) {
			if (ferror(in))
				return error_set(LOMAS_EIO,
				                 "%s: read error after line %" PRIu64 ": %s",
				                 lk->name, lk->lineno, strerror(errno));
			break;
		}
		end = buf + have + n;
		if (skipping) {
			nl = memchr(p, '\n', (size_t)(end - p));
			if (!nl) {
				have = 0;
				continue;
			}
			p = nl + 1;
			skipping = false;
		}
		while ((nl = memchr(p, '\n', (size_t)(end - p)))) {
			lk->lineno++;
			if ((st = parse_line(lk, p, (size_t)(nl - p))))
				return st;
			p = nl + 1;
		}
		have = (size_t)(end - p);
		if (have > LACKEY_MAX_LINE) {
			/* An unfinished line already too long: skip it or reject it. */
			lk->lineno++;
			if (!is_valgrind_line(p, LACKEY_MAX_LINE))
				return bad_line(lk, "line too long", p, have);
			skipping = true;
			have = 0;
			continue;
		}
		memmove(buf, p, have);
	}
	if (have && !skipping) { /* a last line without '\n' */
		lk->lineno++;
		return parse_line(lk, buf, have);
	}
	return LOMAS_OK;
}

lomas_status lackey_read_stream(const lomas_config *cfg, FILE *in, const char *name,
                                size_t buf_bytes, lomas_profile **out)
{
	lackey lk = {.name = name ? name : "(stream)"};
	lomas_profile *p = NULL;
	lomas_status st;
	char *buf;
	if (!out)
		return error_set(LOMAS_EINVAL, "lomas_trace_analyze_lackey: out is NULL");
	*out = NULL;
	if (!in)
		return error_set(LOMAS_EINVAL, "lomas_trace_analyze_lackey: stream is NULL");
	if (buf_bytes < 2 * LACKEY_MAX_LINE)
		buf_bytes = 2 * LACKEY_MAX_LINE;
	if ((st = lomas_trace_new(cfg, &lk.t)))
		return st;
	buf = malloc(buf_bytes);
	if (!buf) {
		lomas_trace_free(lk.t);
		return error_set(LOMAS_ENOMEM, "%s: out of memory for the read buffer", lk.name);
	}
	st = read_all(&lk, in, buf, buf_bytes);
	free(buf);
	if (!st)
		st = lomas_trace_finish(lk.t, &p);
	lomas_trace_free(lk.t);
	if (!st && (st = lomas_profile_meta_set(p, "source", lk.name)) == LOMAS_OK)
		st = lackey_record_maps(p, lk.syms, lk.command);
	if (st && p) {
		lomas_profile_free(p);
		p = NULL;
	}
	if (st)
		return st;
	error_clear();
	*out = p;
	return LOMAS_OK;
}

lomas_status lomas_trace_analyze_lackey_stream(const lomas_config *cfg, FILE *in, const char *name,
                                               lomas_profile **out)
{
	error_clear();
	return lackey_read_stream(cfg, in, name, LACKEY_BUF_BYTES, out);
}

lomas_status lomas_trace_analyze_lackey(const lomas_config *cfg, const char *path,
                                        lomas_profile **out)
{
	error_clear();
	FILE *f;
	lomas_status st;
	if (!out)
		return error_set(LOMAS_EINVAL, "lomas_trace_analyze_lackey: out is NULL");
	*out = NULL;
	if (!path)
		return error_set(LOMAS_EINVAL, "lomas_trace_analyze_lackey: path is NULL");
	if (strcmp(path, "-") == 0)
		return lackey_read_stream(cfg, stdin, "-", LACKEY_BUF_BYTES, out);
	f = fopen(path, "rb");
	if (!f)
		return error_set(errno == ENOENT ? LOMAS_ENOENT : LOMAS_EIO, "%s: %s", path,
		                 strerror(errno));
	st = lackey_read_stream(cfg, f, path, LACKEY_BUF_BYTES, out);
	fclose(f);
	return st;
}

/*
 * Status names, the thread-local error message and the optional log callback,
 * and the escaping of untrusted text (file contents, paths) that messages
 * quote: a message never carries a control character to a terminal.
 */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "core.h"

#define MSG_MAX 1024

static _Thread_local char msg_buf[MSG_MAX];
/*
 * Threads whose msg_buf is not "": each thread adds one when its message
 * becomes non-empty and takes it back when it clears it, so a thread whose
 * own message is set always reads this above 0 (its own add comes first in
 * the counter's modification order). error_clear, the first statement of
 * every public call (lomas_trace_ref's once per reference), then costs one
 * load of a global while no thread has a message, where the access to
 * msg_buf (a call to __tls_get_addr from a shared library) cost 41
 * instructions a reference: 70 -> 111 for lomas_trace_ref (callgrind).
 */
_Atomic unsigned error_pending;
static lomas_log_fn log_fn;
static void *log_user;

const char *lomas_version(void)
{
	error_clear();
	return LOMAS_VERSION_STRING;
}

unsigned lomas_version_number(void)
{
	error_clear();
	return LOMAS_VERSION_NUMBER;
}

const char *lomas_strerror(lomas_status status)
{
	switch (status) {
	case LOMAS_OK: return "success";
	case LOMAS_EINVAL: return "invalid argument";
	case LOMAS_ENOMEM: return "out of memory";
	case LOMAS_EIO: return "input/output error";
	case LOMAS_EFORMAT: return "malformed input";
	case LOMAS_ENOTSUP: return "not supported";
	case LOMAS_ENOENT: return "not found";
	case LOMAS_EPERM: return "permission denied";
	case LOMAS_ESTATE: return "invalid state";
	case LOMAS_ERANGE: return "out of range";
	case LOMAS_ETARGET: return "target failed";
	default: return "unknown error";
	}
}

const char *lomas_error_message(void)
{
	return msg_buf;
}

/*
 * The length of the UTF-8 sequence at s (of at most len bytes) and its code
 * point in *cp, or 0 when it is not valid UTF-8 (overlong forms, surrogates
 * and code points above U+10FFFF are not: RFC 3629 section 3).
 */
static size_t utf8_decode(const unsigned char *s, size_t len, uint32_t *cp)
{
	unsigned c = s[0];
	size_t n;
	uint32_t v;
	if (c < 0x80) {
		*cp = c;
		return 1;
	}
	if (c >= 0xc2 && c <= 0xdf)
		n = 2, v = c & 0x1f;
	else if (c >= 0xe0 && c <= 0xef)
		n = 3, v = c & 0x0f;
	else if (c >= 0xf0 && c <= 0xf4)
		n = 4, v = c & 0x07;
	else
		return 0;
	if (n > len)
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		v = v << 6 | (s[i] & 0x3f);
	}
	if ((n == 3 && v < 0x800) || (n == 4 && v < 0x10000) || v > 0x10ffff ||
	    (v >= 0xd800 && v <= 0xdfff))
		return 0;
	*cp = v;
	return n;
}

/*
 * Code points a terminal acts on rather than shows: C0 and DEL, C1 (U+0080-
 * U+009F: in UTF-8 mode xterm takes U+009B as CSI), the line and paragraph
 * separators, and the bidirectional controls that reorder what follows
 * (the "Trojan Source" characters, CVE-2021-42574).
 */
static bool cp_unsafe(uint32_t cp)
{
	return cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) || cp == 0x200e || cp == 0x200f ||
	       (cp >= 0x2028 && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
}

size_t text_escape(char *dst, size_t cap, const char *src, size_t len)
{
	const unsigned char *s = (const unsigned char *)src;
	size_t o = 0;
	if (!cap)
		return 0;
	for (size_t i = 0; i < len;) {
		char esc[12];
		const char *out = esc;
		uint32_t cp = 0;
		size_t n = utf8_decode(s + i, len - i, &cp), k;
		if (n == 0) {
			snprintf(esc, sizeof esc, "\\x%02x", s[i]);
			n = 1;
		} else if (!cp_unsafe(cp)) {
			out = (const char *)s + i;
		} else if (cp == '\n' || cp == '\r' || cp == '\t') {
			esc[0] = '\\';
			esc[1] = cp == '\n' ? 'n' : cp == '\r' ? 'r' : 't';
			esc[2] = '\0';
		} else if (cp < 0x80) {
			snprintf(esc, sizeof esc, "\\x%02x", (unsigned)cp);
		} else {
			snprintf(esc, sizeof esc, "\\u%04x", (unsigned)cp);
		}
		k = out == esc ? strlen(esc) : n;
		if (o + k >= cap)
			break; /* whole characters and escapes only */
		memcpy(dst + o, out, k);
		o += k;
		i += n;
	}
	dst[o] = '\0';
	return o;
}

/* msg_buf was (not) empty before a write: keep error_pending in step. */
static void msg_written(bool was_set)
{
	if (!was_set && msg_buf[0])
		atomic_fetch_add_explicit(&error_pending, 1, memory_order_relaxed);
	else if (was_set && !msg_buf[0])
		atomic_fetch_sub_explicit(&error_pending, 1, memory_order_relaxed);
}

lomas_status error_set(lomas_status status, const char *fmt, ...)
{
	char raw[MSG_MAX];
	bool was_set = msg_buf[0] != '\0';
	int n;
	va_list ap;
	va_start(ap, fmt);
	n = vsnprintf(raw, sizeof raw, fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0;
	text_escape(msg_buf, sizeof msg_buf, raw, (size_t)n < sizeof raw ? (size_t)n : strlen(raw));
	msg_written(was_set);
	return status;
}

lomas_status error_prefix(lomas_status status, const char *fmt, ...)
{
	char prefix[MSG_MAX], raw[2 * MSG_MAX];
	bool was_set = msg_buf[0] != '\0';
	int n;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(prefix, sizeof prefix, fmt, ap);
	va_end(ap);
	/* The old message is escaped already, and escaping it again changes nothing. */
	n = snprintf(raw, sizeof raw, "%s: %s", prefix,
	             msg_buf[0] ? msg_buf : lomas_strerror(status));
	if (n < 0)
		n = 0;
	text_escape(msg_buf, sizeof msg_buf, raw, (size_t)n < sizeof raw ? (size_t)n : strlen(raw));
	msg_written(was_set);
	return status;
}

void error_clear_slow(void)
{
	if (msg_buf[0]) {
		msg_buf[0] = '\0';
		msg_written(true);
	}
}

void lomas_set_log_callback(lomas_log_fn fn, void *user)
{
	error_clear();
	log_fn = fn;
	log_user = user;
}

void log_msg(lomas_log_level level, const char *fmt, ...)
{
	char raw[MSG_MAX], line[MSG_MAX];
	int n;
	va_list ap;
	if (!log_fn)
		return;
	va_start(ap, fmt);
	n = vsnprintf(raw, sizeof raw, fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0;
	text_escape(line, sizeof line, raw, (size_t)n < sizeof raw ? (size_t)n : strlen(raw));
	log_fn(level, line, log_user);
}

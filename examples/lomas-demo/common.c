/* Helpers shared by the lomas-demo subcommands: messages, numbers, sizes, output. */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "demo.h"

size_t demo_utf8_decode(const unsigned char *s, size_t len, uint32_t *cp)
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
 * The library escapes its own messages the same way (text_escape in
 * lib/core/error.c); lomas-demo uses the public API only, hence this copy.
 */
const char *demo_escape(const char *s, char *buf, size_t cap)
{
	const unsigned char *u = (const unsigned char *)s;
	size_t len = strlen(s), o = 0;
	if (!cap)
		return "";
	for (size_t i = 0; i < len;) {
		char esc[12];
		const char *out = esc;
		uint32_t cp = 0;
		size_t n = demo_utf8_decode(u + i, len - i, &cp), k;
		bool unsafe = cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) || cp == 0x200e ||
		              cp == 0x200f || (cp >= 0x2028 && cp <= 0x202e) ||
		              (cp >= 0x2066 && cp <= 0x2069);
		if (n == 0) {
			snprintf(esc, sizeof esc, "\\x%02x", u[i]);
			n = 1;
		} else if (!unsafe) {
			out = s + i;
		} else if (cp == '\n' || cp == '\r' || cp == '\t') {
			snprintf(esc, sizeof esc, "\\%c",
			         cp == '\n'   ? 'n'
			         : cp == '\r' ? 'r'
			                      : 't');
		} else if (cp < 0x80) {
			snprintf(esc, sizeof esc, "\\x%02x", (unsigned)cp);
		} else {
			snprintf(esc, sizeof esc, "\\u%04x", (unsigned)cp);
		}
		k = out == esc ? strlen(esc) : n;
		if (o + k >= cap)
			break;
		memcpy(buf + o, out, k);
		o += k;
		i += n;
	}
	buf[o] = '\0';
	return buf;
}

/* "lomas-demo: cmd: message" with the message escaped: it may quote paths and file contents. */
static void vmessage(const char *cmd, const char *fmt, va_list ap)
{
	char raw[2048], safe_cmd[64], safe[4096];
	vsnprintf(raw, sizeof raw, fmt, ap);
	fprintf(stderr, "lomas-demo: %s: %s", demo_escape(cmd, safe_cmd, sizeof safe_cmd),
	        demo_escape(raw, safe, sizeof safe));
}

/* The one body of demo_fail and demo_fail_exit. */
static int vfail(int status, const char *cmd, const char *fmt, va_list ap)
{
	vmessage(cmd, fmt, ap);
	fputc('\n', stderr);
	return status;
}

int demo_fail_exit(int status, const char *cmd, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	status = vfail(status, cmd, fmt, ap);
	va_end(ap);
	return status;
}

int demo_fail(const char *cmd, const char *fmt, ...)
{
	int status;
	va_list ap;
	va_start(ap, fmt);
	status = vfail(EXIT_USAGE, cmd, fmt, ap);
	va_end(ap);
	return status;
}

/* ": <the library's message>" (or the status name) and the newline. */
static void lomas_detail(lomas_status st, const char *detail)
{
	char safe[4096];
	/* Escaped already by the library; again here keeps the promise of one line. */
	fprintf(stderr, ": %s\n",
	        demo_escape(detail[0] ? detail : lomas_strerror(st), safe, sizeof safe));
}

/* The one body of demo_fail_lomas and demo_fail_lomas_exit. */
static int vfail_lomas(int status, const char *cmd, lomas_status st, const char *fmt, va_list ap)
{
	/* Copy first: the message is only valid until the next library call. */
	char detail[1024];
	snprintf(detail, sizeof detail, "%s", lomas_error_message());
	vmessage(cmd, fmt, ap);
	lomas_detail(st, detail);
	return status;
}

int demo_fail_lomas_exit(int status, const char *cmd, lomas_status st, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	status = vfail_lomas(status, cmd, st, fmt, ap);
	va_end(ap);
	return status;
}

int demo_fail_lomas(const char *cmd, lomas_status st, const char *fmt, ...)
{
	int status;
	va_list ap;
	va_start(ap, fmt);
	status = vfail_lomas(EXIT_USAGE, cmd, st, fmt, ap);
	va_end(ap);
	return status;
}

bool demo_names_path(const char *path)
{
	const char *msg = lomas_error_message();
	size_t n = strlen(path);
	return strncmp(msg, path, n) == 0 && msg[n] == ':';
}

int demo_bad_option_exit(int status, const char *cmd, char **argv, int c)
{
	extern int optind, optopt;
	const char *opt = optind > 0 ? argv[optind - 1] : "?";
	if (c == ':')
		return demo_fail_exit(status, cmd,
		                      "option '%s' needs an argument (see 'lomas-demo help %s')",
		                      opt, cmd);
	if (optopt > 0 && optopt < 256)
		return demo_fail_exit(
		    status, cmd, "unknown option '-%c' (see 'lomas-demo help %s')", optopt, cmd);
	return demo_fail_exit(status, cmd, "unknown option '%s' (see 'lomas-demo help %s')", opt,
	                      cmd);
}

int demo_bad_option(const char *cmd, char **argv, int c)
{
	return demo_bad_option_exit(EXIT_USAGE, cmd, argv, c);
}

/* ------------------------------------------------------------ option tables */

#define OPTS_MAX 32

/* A short option is a printable letter key. */
static bool has_short(const struct demo_opt *o)
{
	return o->key > ' ' && o->key < 127;
}

int demo_getopt(int argc, char **argv, const struct demo_opt *opts, bool in_order)
{
	/* getopt_long's tables, made from opts when it changes (one table per run). */
	static const struct demo_opt *made;
	static struct option longopts[OPTS_MAX + 1];
	static char shortopts[3 + 2 * OPTS_MAX + 1];
	if (made != opts) {
		size_t n = 0, k = 0;
		if (in_order)
			shortopts[k++] = '+';
		shortopts[k++] = ':';
		for (const struct demo_opt *o = opts; o->name && n < OPTS_MAX; o++, n++) {
			longopts[n] = (struct option){o->name, o->has_arg, NULL, o->key};
			if (has_short(o)) {
				shortopts[k++] = (char)o->key;
				if (o->has_arg == required_argument)
					shortopts[k++] = ':';
			}
		}
		longopts[n] = (struct option){NULL, 0, NULL, 0};
		shortopts[k] = '\0';
		made = opts;
	}
	opterr = 0;
	return getopt_long(argc, argv, shortopts, longopts, NULL);
}

const struct demo_opt *demo_opt_find(const struct demo_opt *opts, int key)
{
	for (const struct demo_opt *o = opts; o->name; o++)
		if (o->key == key)
			return o;
	return NULL;
}

/*
 * The options' part of a help: "  -o, --output OUT" padded to column col
 * (or two spaces after it when it is longer), then the help's lines, the
 * later ones indented to col.
 */
static void print_opts(const struct demo_opt *opts, int col)
{
	for (const struct demo_opt *o = opts; o->name; o++) {
		char left[128];
		const char *h = o->help;
		int n;
		if (!h)
			continue;
		if (has_short(o))
			n = snprintf(left, sizeof left, "  -%c, --%s%s%s", o->key, o->name,
			             o->arg ? " " : "", o->arg ? o->arg : "");
		else
			n = snprintf(left, sizeof left, "  --%s%s%s", o->name, o->arg ? " " : "",
			             o->arg ? o->arg : "");
		printf("%s%*s", left, n < col ? col - n : 2, "");
		for (;;) {
			const char *nl = strchr(h, '\n');
			printf("%.*s\n", nl ? (int)(nl - h) : (int)strlen(h), h);
			if (!nl)
				break;
			h = nl + 1;
			printf("%*s", col, "");
		}
	}
}

int demo_help(const char *cmd)
{
	for (const struct demo_cmd *d = demo_cmds; d->name; d++) {
		if (strcmp(d->name, cmd) == 0) {
			printf("usage: %s\n\n%s", d->usage, d->summary);
			if (d->opts)
				print_opts(d->opts, d->col);
			printf("\n");
			return demo_finish_stdout(cmd);
		}
	}
	return demo_fail("help", "unknown command '%s'", cmd);
}

bool demo_stdout_gone(void)
{
	/* poll() reports POLLERR for the write end of a pipe without readers. */
	struct pollfd pfd = {.fd = STDOUT_FILENO, .events = POLLOUT};
	return poll(&pfd, 1, 0) == 1 && (pfd.revents & (POLLERR | POLLHUP));
}

int demo_finish_stdout(const char *cmd)
{
	int err;
	errno = 0;
	if (fflush(stdout) == 0 && !ferror(stdout))
		return 0;
	/* A reader that went away (EPIPE; SIGPIPE is ignored) is not worth a message. */
	err = errno;
	if (err == EPIPE || demo_stdout_gone())
		return EXIT_USAGE;
	if (err)
		demo_fail(cmd, "cannot write to standard output: %s", strerror(err));
	else
		demo_fail(cmd, "cannot write to standard output");
	return EXIT_USAGE;
}

bool demo_parse_bytes(const char *s, uint64_t *out)
{
	static const struct {
		const char *suffix;
		unsigned shift;
	} units[] = {
	    {"", 0},     {"K", 10}, {"KiB", 10}, {"k", 10},   {"M", 20},
	    {"MiB", 20}, {"m", 20}, {"G", 30},   {"GiB", 30}, {"g", 30},
	};
	char *end;
	unsigned long long v;
	if (!s || *s < '0' || *s > '9')
		return false;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return false;
	for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
		if (strcmp(end, units[i].suffix) == 0) {
			if (v > (UINT64_MAX >> units[i].shift))
				return false;
			*out = (uint64_t)v << units[i].shift;
			return true;
		}
	}
	return false;
}

bool demo_parse_size_list(const char *s, uint64_t **sizes, size_t *n)
{
	size_t cap = 1, count = 0;
	char *copy, *tok, *save = NULL;
	uint64_t *v;
	for (const char *c = s; *c; c++)
		cap += *c == ',';
	v = calloc(cap, sizeof *v);
	copy = strdup(s);
	if (!v || !copy) {
		free(v);
		free(copy);
		return false;
	}
	/* strtok_r would skip empty fields; an empty field is an error here. */
	for (tok = copy; tok; tok = save) {
		save = strchr(tok, ',');
		if (save)
			*save++ = '\0';
		if (!demo_parse_bytes(tok, &v[count])) {
			free(v);
			free(copy);
			return false;
		}
		count++;
	}
	free(copy);
	*sizes = v;
	*n = count;
	return true;
}

void demo_format_bytes(uint64_t bytes, char *buf, size_t len)
{
	static const char units[] = "BKMGTPE";
	unsigned u = 0;
	double v = (double)bytes;
	while (v >= 1024 && u < sizeof units - 2) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%" PRIu64 "B", bytes);
	else if (v == (double)(uint64_t)v)
		snprintf(buf, len, "%.0f%c", v, units[u]);
	else
		snprintf(buf, len, "%.1f%c", v, units[u]);
}

lomas_profile *demo_load(const char *cmd, const char *path)
{
	lomas_profile *p = NULL;
	lomas_status st = lomas_profile_load(path, &p);
	if (st != LOMAS_OK) {
		/* The library's message names the file already: say it once. */
		if (demo_names_path(path))
			demo_fail_lomas(cmd, st, "cannot load profile");
		else
			demo_fail_lomas(cmd, st, "cannot load profile '%s'", path);
		return NULL;
	}
	return p;
}

int demo_sizes(const char *cmd, const char *list, uint32_t line_bytes, uint64_t **sizes, size_t *n)
{
	lomas_status st;
	size_t count = 0;
	if (list) {
		if (!demo_parse_size_list(list, sizes, n))
			return demo_fail(cmd,
			                 "--sizes: '%s' is not a comma-separated list of sizes "
			                 "(bytes, or with K/KiB, M/MiB, G/GiB)",
			                 list);
		for (size_t i = 0; i < *n; i++) {
			if ((*sizes)[i] == 0 || (*sizes)[i] % line_bytes) {
				int rc = demo_fail(cmd,
				                   "--sizes: %" PRIu64
				                   " is not a positive multiple of the %" PRIu32
				                   "-byte line size",
				                   (*sizes)[i], line_bytes);
				free(*sizes);
				*sizes = NULL;
				return rc;
			}
		}
		return 0;
	}
	/* 81 sizes for 64-byte lines; ask again if the library has more. */
	for (size_t cap = 128;; cap = count) {
		*sizes = calloc(cap, sizeof **sizes);
		if (!*sizes)
			return demo_fail(cmd, "out of memory");
		st = lomas_model_default_sizes(line_bytes, *sizes, cap, &count);
		if (st != LOMAS_OK) {
			free(*sizes);
			*sizes = NULL;
			return demo_fail_lomas(cmd, st, "cannot get the default cache sizes");
		}
		if (count <= cap)
			break;
		free(*sizes);
	}
	*n = count;
	return 0;
}

int demo_check_ratios(const char *cmd, const char *path, const double *ratios, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (!isfinite(ratios[i]))
			return demo_fail(cmd, "cannot model '%s': the model gave %g, not a ratio",
			                 path, ratios[i]);
	return 0;
}

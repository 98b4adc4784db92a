/*
 * The inline runtime's edges with the process around it: its messages on
 * stderr, the LOMAS_* environment, the profile's path and the trace file
 * (both resolved and checked at start-up), the trace's writes, and whether
 * the LOMAS_* settings are this process's at all (lineage, below).
 *
 * The descriptors and files are the program's too: the runtime writes to
 * fd 2 only while it is the stderr the program started with, and to its
 * trace descriptor only after checking it is still the trace file.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "inline.h"

/* ------------------------------------------------------------- messages */

/*
 * Remember what fd 2 is at start-up: the runtime writes its messages there
 * only while fd 2 is still that file (a program that closed its stderr and
 * opened a file of its own that got number 2 must not find our lines in it).
 */
void rt_note_stderr(void)
{
	struct stat sb;
	rt.err_ok = fstat(2, &sb) == 0;
	if (rt.err_ok) {
		rt.err_dev = sb.st_dev;
		rt.err_ino = sb.st_ino;
		rt.err_rdev = sb.st_rdev;
	}
}

/* Is rt.say_fd (fd 2) still the stderr the program started with? (fstat: async-signal-safe.) */
static bool stderr_is_ours(void)
{
	struct stat sb;
	return rt.err_ok && fstat(rt.say_fd, &sb) == 0 && sb.st_dev == rt.err_dev &&
	       sb.st_ino == rt.err_ino && sb.st_rdev == rt.err_rdev;
}

/* One line on stderr (the runtime's only output), with write(2). */
void rt_say(const char *fmt, ...)
{
	char buf[768];
	va_list ap;
	int n;
	if (!stderr_is_ours())
		return;
	n = snprintf(buf, sizeof buf, "lomas-inline: ");
	va_start(ap, fmt);
	n += vsnprintf(buf + n, sizeof buf - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof buf - 2)
		n = (int)sizeof buf - 2;
	buf[n++] = '\n';
	ssize_t w = write(rt.say_fd, buf, (size_t)n);
	(void)w;
}

void rt_env_problem(const char *var, const char *value, const char *what)
{
	size_t used = strlen(rt.env_error);
	rt_say("%s='%s' %s; using the default", var, value, what);
	snprintf(rt.env_error + used, sizeof rt.env_error - used, "%s%s='%s' %s", used ? "; " : "",
	         var, value, what);
}

/* ------------------------------------------------------------ environment */

/*
 * Every LOMAS_* variable is read with secure_getenv: in a secure-execution
 * context (AT_SECURE: a set-user-ID or set-group-ID program, or one with file
 * capabilities) it returns NULL, so a user cannot point a privileged
 * program's profile or trace at a file of the owner's (rt_global_init also
 * turns the sampler off there and writes nothing).
 */
void rt_parse_env_defaults(settings *s)
{
	s->period = 0;
	s->seed = 1;
	s->line_size = 64;
	s->window = 0;
	s->max_live = DEFAULT_MAX_LIVE;
	s->phase_guided = false;
	s->phase.min_samples = PHASE_DEFAULT_SAMPLES;
	s->phase.shift = PHASE_DEFAULT_SHIFT;
	s->exact_budget = EXACT_DEFAULT_BUDGET / 100.0;
}

void rt_parse_env(settings *s)
{
	const char *v;
	uint64_t x;
	rt_parse_env_defaults(s);
	if ((v = secure_getenv("LOMAS_PERIOD")) && strcmp(v, "auto") != 0) {
		if (config_parse_u64(v, &x) && x >= 1)
			s->period = x;
		else
			rt_env_problem("LOMAS_PERIOD", v, "is not a period >= 1 or auto");
	}
	if ((v = secure_getenv("LOMAS_SEED"))) {
		if (config_parse_u64(v, &x))
			s->seed = x;
		else
			rt_env_problem("LOMAS_SEED", v, "is not a 64-bit unsigned integer");
	}
	if ((v = secure_getenv("LOMAS_LINE_SIZE"))) {
		if (config_parse_u64(v, &x) && line_size_valid(x))
			s->line_size = (uint32_t)x;
		else
			rt_env_problem("LOMAS_LINE_SIZE", v,
			               "is not a power of two from 8 to 65536");
	}
	if ((v = secure_getenv("LOMAS_WINDOW")) && strcmp(v, "auto") != 0) {
		if (config_parse_u64(v, &x) && x >= 1)
			s->window = x;
		else
			rt_env_problem("LOMAS_WINDOW", v, "is not a window length >= 1 or auto");
	}
	if ((v = secure_getenv("LOMAS_MAX_LIVE"))) {
		if (config_parse_u64(v, &x) && x >= 1 && x <= (1u << 24))
			s->max_live = (uint32_t)x;
		else
			rt_env_problem("LOMAS_MAX_LIVE", v,
			               "is not a slot count from 1 to 16777216");
	}
	/* Phase-guided sampling (lib/sampler/phase.c): off by default. */
	if ((v = secure_getenv("LOMAS_PHASE_GUIDED"))) {
		if (strcmp(v, "1") == 0 || strcmp(v, "yes") == 0)
			s->phase_guided = true;
		else if (strcmp(v, "0") != 0 && strcmp(v, "no") != 0 && *v)
			rt_env_problem("LOMAS_PHASE_GUIDED", v, "is not 1, 0, yes or no");
	}
	if ((v = secure_getenv("LOMAS_PHASE_SAMPLES"))) {
		if (config_parse_u64(v, &x) && x >= 1 && x <= UINT32_MAX)
			s->phase.min_samples = (uint32_t)x;
		else
			rt_env_problem("LOMAS_PHASE_SAMPLES", v, "is not a sample count >= 1");
	}
	if ((v = secure_getenv("LOMAS_PHASE_DIVIDE"))) {
		/* A power of two: a sample's weight is base period x 2^level. */
		if (config_parse_u64(v, &x) && x >= 2 && x <= (1u << PHASE_MAX_SHIFT) &&
		    !(x & (x - 1)))
			s->phase.shift = (uint8_t)__builtin_ctzll(x);
		else
			rt_env_problem("LOMAS_PHASE_DIVIDE", v,
			               "is not a power of two from 2 to 1024");
	}
	/* Exact-distance bursts (burst.c): percent of references, 0 = off. */
	if ((v = secure_getenv("LOMAS_EXACT_BUDGET"))) {
		char *end;
		double d = strtod(v, &end);
		if (*v && !*end && d >= 0.0 && d <= 100.0)
			s->exact_budget = d / 100.0;
		else
			rt_env_problem("LOMAS_EXACT_BUDGET", v,
			               "is not a percentage from 0 to 100");
	}
}

/* Absolute form of path, relative to the working directory at start-up. */
static bool absolute(const char *path, char *buf, size_t len)
{
	char cwd[PATH_MAX];
	if (path[0] == '/')
		return (size_t)snprintf(buf, len, "%s", path) < len;
	if (!getcwd(cwd, sizeof cwd))
		return false;
	return (size_t)snprintf(buf, len, "%s/%s", cwd, path) < len;
}

/*
 * Can we create files next to path (the profile is written to a temporary
 * file there and renamed over path)? Sets errno when not. Asks the kernel
 * (faccessat with the effective ids; EROFS included) rather than creating a
 * probe file: on ext4 a create and an unlink cost more than a short program's
 * whole run under the sampler.
 */
static bool output_writable(const char *path)
{
	char dir[PATH_MAX];
	struct stat sb;
	char *slash;
	if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
		errno = EISDIR;
		return false;
	}
	snprintf(dir, sizeof dir, "%s", path);
	slash = strrchr(dir, '/');
	if (slash == dir)
		slash[1] = '\0';
	else if (slash)
		*slash = '\0';
	if (stat(dir, &sb) != 0)
		return false;
	if (!S_ISDIR(sb.st_mode)) {
		errno = ENOTDIR;
		return false;
	}
	return faccessat(AT_FDCWD, dir, W_OK | X_OK, AT_EACCESS) == 0;
}

void rt_setup_output(void)
{
	const char *v = secure_getenv("LOMAS_OUTPUT");
	char def[64];
	if (rt.secure)
		return; /* nothing is written (rt_global_init said so) */
	rt.output_set = v != NULL;
	if (v && !*v) {
		rt_env_problem("LOMAS_OUTPUT", v, "is empty");
		v = NULL;
	}
	if (!v) {
		snprintf(def, sizeof def, "lomas-%ld.lomas", (long)getpid());
		v = def;
	}
	if (!absolute(v, rt.output, sizeof rt.output)) {
		rt_say(
		    "LOMAS_OUTPUT: %s: path too long or no working directory; no profile will be "
		    "written",
		    v);
		return;
	}
	if (!output_writable(rt.output)) {
		rt_say("LOMAS_OUTPUT: cannot write %s: %s; no profile will be written", rt.output,
		       strerror(errno));
		return;
	}
	rt.output_ok = true;
}

/*
 * The trace descriptor is kept high (at least TRACE_FD_MIN, where a program
 * that opens a few files of its own will not land) and close-on-exec, and
 * its file's identity is kept: a program may close every descriptor (a
 * daemon does) and open its own file under the same number.
 */
#define TRACE_FD_MIN 200

static int fd_high(int fd)
{
	int high = fcntl(fd, F_DUPFD_CLOEXEC, TRACE_FD_MIN);
	if (high < 0)
		return fd;
	close(fd);
	return high;
}

void rt_setup_trace(void)
{
	const char *v = secure_getenv("LOMAS_TRACE");
	struct stat sb;
	if (!v || rt.secure)
		return;
	if (!*v || !absolute(v, rt.trace_path, sizeof rt.trace_path)) {
		rt_env_problem("LOMAS_TRACE", v, "is not a usable path");
		return;
	}
	rt.trace_fd = open(rt.trace_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (rt.trace_fd < 0 || fstat(rt.trace_fd, &sb) != 0) {
		char what[PATH_MAX + 64];
		snprintf(what, sizeof what, "cannot be opened (%s)", strerror(errno));
		rt_env_problem("LOMAS_TRACE", v, what);
		if (rt.trace_fd >= 0)
			close(rt.trace_fd);
		rt.trace_fd = -1;
		return;
	}
	rt.trace_dev = sb.st_dev;
	rt.trace_ino = sb.st_ino;
	rt.trace_fd = fd_high(rt.trace_fd);
}

/*
 * Is rt.trace_fd still our trace file? If the program closed it (and maybe
 * opened a file of its own under the number), open the trace again, by
 * path, for appending, if it is still the same file; else stop tracing (once,
 * with a line on stderr). rt.trace_lock held. An fstat per 64 KiB written.
 */
static bool trace_fd_ours(void)
{
	struct stat sb;
	int fd;
	if (fstat(rt.trace_fd, &sb) == 0 && sb.st_dev == rt.trace_dev && sb.st_ino == rt.trace_ino)
		return true;
	/* Not ours any more: never close it (it may be the program's now). */
	fd = open(rt.trace_path, O_WRONLY | O_APPEND | O_CLOEXEC);
	if (fd >= 0 && fstat(fd, &sb) == 0 && sb.st_dev == rt.trace_dev &&
	    sb.st_ino == rt.trace_ino) {
		rt.trace_fd = fd_high(fd);
		return true;
	}
	if (fd >= 0)
		close(fd);
	rt.trace_fd = -1;
	rt.trace_broken = true;
	rt_say("LOMAS_TRACE: the program closed the trace's descriptor and %s is gone; the trace "
	       "stops here",
	       rt.trace_path);
	return false;
}

void rt_trace_flush(inline_thread *t)
{
	size_t off = 0;
	if (rt.trace_fd < 0) {
		t->trace_len = 0; /* the trace stopped: drop what the buffer holds */
		return;
	}
	if (!t->trace_len)
		return;
	rt_spin_lock(&rt.trace_lock);
	while (rt.trace_fd >= 0 && off < t->trace_len && trace_fd_ours()) {
		ssize_t w = write(rt.trace_fd, t->trace + off, t->trace_len - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			break;
		off += (size_t)w;
	}
	rt_spin_unlock(&rt.trace_lock);
	t->trace_len = 0;
}

/* ------------------------------------------------------------- lineage */

/*
 * Children. An instrumented program that runs another instrumented program
 * (fork and exec, system(), a shell in between) passes its environment on:
 * the child would write the parent's LOMAS_OUTPUT (the parent, exiting last,
 * then replaces it, or the child, outliving it, writes into a directory
 * lomas-demo record has removed) and truncate its LOMAS_TRACE. The profile
 * named by LOMAS_OUTPUT is the process's that was started with it: a
 * process whose LOMAS_OUTPUT and LOMAS_TRACE (one of them set) are those an
 * instrumented ancestor started with inherited them, and neither samples
 * nor writes anything (as a forked child does). It is found by walking up
 * the parents through /proc (the environment a process was started with,
 * /proc/PID/environ, and its program, /proc/PID/exe, carrying the runtime's
 * marker); a process in between that is not instrumented (a shell, time,
 * env) is passed through, and one whose variables differ ends the walk: the
 * values were set for us there. A child that should write a profile of its
 * own gets its own LOMAS_OUTPUT (or none: lomas-<pid>.lomas).
 *
 * LOMAS_OUTPUT_PID, when set, settles it without the walk: the settings are
 * for that process only (lomas-demo record sets it to the target's pid, so
 * that a child still starting when its parent has ended, an orphan whose
 * parent the walk no longer finds, keeps quiet too).
 */
#define LINEAGE_MAX_DEPTH 64
#define ENVIRON_MAX (1u << 20)

/* The value of name= in a NUL-separated environment block, or NULL. */
static const char *block_get(const char *env, size_t len, const char *name)
{
	size_t nl = strlen(name);
	for (size_t i = 0; i < len;) {
		const char *e = env + i;
		size_t el = strnlen(e, len - i);
		if (el > nl && !memcmp(e, name, nl) && e[nl] == '=')
			return e + nl + 1;
		i += el + 1;
	}
	return NULL;
}

static bool same_value(const char *a, const char *b)
{
	return (!a && !b) || (a && b && !strcmp(a, b));
}

/*
 * A process's start-up environment into buf (cap bytes; *len read, true if
 * it all fit). Most fit in the caller's stack buffer; a larger one is read
 * again into a mapping (*big, ENVIRON_MAX bytes, to release).
 */
static bool read_environ(long pid, char *buf, size_t cap, size_t *len, char **big)
{
	char path[64];
	int fd;
	size_t n = 0;
	*big = NULL;
	snprintf(path, sizeof path, "/proc/%ld/environ", pid);
	for (int pass = 0; pass < 2; pass++) {
		if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
			return false;
		n = 0;
		while (n < cap) {
			ssize_t r = read(fd, buf + n, cap - n);
			if (r < 0 && errno == EINTR)
				continue;
			if (r <= 0)
				break;
			n += (size_t)r;
		}
		close(fd);
		if (n < cap || pass)
			break;
		/* Full: read it again into room for ENVIRON_MAX. */
		if (!(*big = rt_map_alloc.alloc(ENVIRON_MAX)))
			return false;
		buf = *big;
		cap = ENVIRON_MAX;
	}
	*len = n;
	return true;
}

#define SCAN_CHUNK 8192u
static const char marker[] = "lomas_inline_marker";

/* Where the string table strsh of the ELF file fd holds marker (its offset
 * there), or -1: read in chunks, each overlapping the last by the marker's
 * length. */
static int64_t find_marker_string(int fd, const Elf64_Shdr *strsh)
{
	char buf[SCAN_CHUNK];
	const size_t mlen = sizeof marker; /* with its NUL */
	for (uint64_t at = 0; at < strsh->sh_size; at += SCAN_CHUNK - mlen) {
		uint64_t want = strsh->sh_size - at < SCAN_CHUNK ? strsh->sh_size - at : SCAN_CHUNK;
		ssize_t got = pread(fd, buf, want, (off_t)(strsh->sh_offset + at));
		if (got < (ssize_t)mlen)
			return -1;
		for (size_t i = 0; i + mlen <= (size_t)got; i++)
			if (buf[i] == 'l' && (i > 0 ? buf[i - 1] == '\0' : at == 0) &&
			    !memcmp(buf + i, marker, mlen))
				return (int64_t)(at + i);
		if ((uint64_t)got < want || at + (uint64_t)got >= strsh->sh_size)
			break;
	}
	return -1;
}

/* Does the symbol table sh (strings in strsh) of the ELF file fd define marker? */
static bool symtab_defines_marker(int fd, const Elf64_Shdr *sh, const Elf64_Shdr *strsh)
{
	Elf64_Sym syms[SCAN_CHUNK / sizeof(Elf64_Sym)];
	int64_t name = find_marker_string(fd, strsh);
	if (name < 0 || sh->sh_entsize != sizeof(Elf64_Sym))
		return false;
	for (uint64_t at = 0; at < sh->sh_size; at += sizeof syms) {
		uint64_t want = sh->sh_size - at < sizeof syms ? sh->sh_size - at : sizeof syms;
		ssize_t got = pread(fd, syms, want, (off_t)(sh->sh_offset + at));
		if (got <= 0)
			return false;
		for (size_t i = 0; i < (size_t)got / sizeof *syms; i++)
			if (syms[i].st_name == (uint64_t)name && syms[i].st_shndx != SHN_UNDEF)
				return true;
	}
	return false;
}

/* Does process pid run a program built with the runtime (its marker defined)? */
static bool process_instrumented(long pid)
{
	char path[64];
	Elf64_Ehdr eh;
	Elf64_Shdr sh[256];
	bool found = false;
	int fd;
	snprintf(path, sizeof path, "/proc/%ld/exe", pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return false;
	if (pread(fd, &eh, sizeof eh, 0) == (ssize_t)sizeof eh &&
	    !memcmp(eh.e_ident, ELFMAG, SELFMAG) && eh.e_ident[EI_CLASS] == ELFCLASS64 &&
	    eh.e_shentsize == sizeof(Elf64_Shdr) && eh.e_shnum <= 256 &&
	    pread(fd, sh, eh.e_shnum * sizeof *sh, (off_t)eh.e_shoff) ==
	        (ssize_t)(eh.e_shnum * sizeof *sh)) {
		/* .dynsym first (the recipe exports the marker), then .symtab. */
		for (int want = 0; want < 2 && !found; want++)
			for (unsigned i = 0; i < eh.e_shnum && !found; i++)
				if (sh[i].sh_type == (want ? SHT_SYMTAB : SHT_DYNSYM) &&
				    sh[i].sh_link < eh.e_shnum)
					found =
					    symtab_defines_marker(fd, &sh[i], &sh[sh[i].sh_link]);
	}
	close(fd);
	return found;
}

/* The parent of pid (from /proc/PID/stat: the field after the command's ')'), or 0. */
static long parent_of(long pid)
{
	char path[64], buf[1024], *p;
	ssize_t n;
	long ppid = 0;
	int fd;
	snprintf(path, sizeof path, "/proc/%ld/stat", pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return 0;
	n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return 0;
	buf[n] = '\0';
	if ((p = strrchr(buf, ')')) && sscanf(p + 1, " %*c %ld", &ppid) != 1)
		ppid = 0;
	return ppid;
}

bool rt_settings_inherited(void)
{
	const char *out = secure_getenv("LOMAS_OUTPUT"), *trace = secure_getenv("LOMAS_TRACE");
	const char *owner = secure_getenv("LOMAS_OUTPUT_PID");
	long pid = (long)getppid();
	if (!out && !trace)
		return false;
	if (owner && *owner) {
		char *end;
		long v = strtol(owner, &end, 10);
		if (!*end)
			return v != (long)getpid();
	}
	for (int depth = 0; depth < LINEAGE_MAX_DEPTH && pid > 1; depth++) {
		char small[32768], *big;
		size_t len = 0;
		bool same;
		if (!read_environ(pid, small, sizeof small, &len, &big))
			return false; /* not ours to read: another user's process */
		same = same_value(out, block_get(big ? big : small, len, "LOMAS_OUTPUT")) &&
		       same_value(trace, block_get(big ? big : small, len, "LOMAS_TRACE"));
		if (big)
			rt_map_alloc.release(big, ENVIRON_MAX);
		if (!same)
			return false;
		if (process_instrumented(pid))
			return true;
		pid = parent_of(pid);
	}
	return false;
}

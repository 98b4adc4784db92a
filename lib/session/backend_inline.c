/*
 * The session backend for programs built with the lomas-inline hooks: the
 * program samples itself, so the session only runs it (fork + exec, with
 * LOMAS_OUTPUT pointing into a private temporary directory and the config as
 * LOMAS_* variables), waits for it, and loads the profile it wrote at exit.
 *
 * stop = detach: the program keeps running on its own and writes its profile
 * into the temporary directory when it exits; the directory is then left in
 * place (its path is logged) and the session has no profile.
 *
 * interrupt (the caller got SIGINT or SIGTERM): the program's runtime writes
 * its profile on those signals before it ends by them, so the session makes
 * sure the program gets the signal once and waits for it to end as usual.
 * A terminal's ^C reaches the program itself (LOMAS_INTERRUPT_DELIVERED); a
 * kill to the process group does too, a kill to the caller alone does not,
 * and the two cannot be told apart: the session passes the signal on if
 * the program is still running FORWARD_GRACE_MS later and was never seen
 * with it pending or writing its profile. (A program that catches the
 * signal, survives it and runs on for longer gets it a second time when it
 * came by kill to the group.)
 */
#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lomas/inline.h"
#include "session.h"

extern char **environ;

#define MARKER "lomas_inline_marker"
#define FORWARD_GRACE_MS 1000

/* ------------------------------------------------------------- detection */

/* Does the symbol table in section sh (of an image of len bytes) define MARKER? */
static bool symtab_has_marker(const uint8_t *img, size_t len, const Elf64_Shdr *sh,
                              const Elf64_Shdr *strsh)
{
	if (sh->sh_entsize != sizeof(Elf64_Sym) || sh->sh_offset > len ||
	    sh->sh_size > len - sh->sh_offset || strsh->sh_offset > len ||
	    strsh->sh_size > len - strsh->sh_offset)
		return false;
	size_t n = sh->sh_size / sizeof(Elf64_Sym);
	const char *strtab = (const char *)img + strsh->sh_offset;
	for (size_t i = 0; i < n; i++) {
		Elf64_Sym sym;
		memcpy(&sym, img + sh->sh_offset + i * sizeof sym, sizeof sym);
		if (sym.st_shndx == SHN_UNDEF || sym.st_name >= strsh->sh_size)
			continue;
		size_t room = strsh->sh_size - sym.st_name;
		if (room > sizeof MARKER - 1 &&
		    memcmp(strtab + sym.st_name, MARKER, sizeof MARKER) == 0)
			return true;
	}
	return false;
}

/* Read the whole file (a program or a profile: bounded to 1 GiB) of at least min bytes. */
static uint8_t *read_file(const char *path, size_t min, size_t *len)
{
	struct stat sb;
	uint8_t *buf;
	size_t off = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || sb.st_size < (off_t)min ||
	    sb.st_size > (1l << 30) || !(buf = malloc(sb.st_size ? (size_t)sb.st_size : 1))) {
		close(fd);
		return NULL;
	}
	while (off < (size_t)sb.st_size) {
		ssize_t r = read(fd, buf + off, (size_t)sb.st_size - off);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		off += (size_t)r;
	}
	close(fd);
	*len = off;
	return buf;
}

bool inline_backend_detect(const char *program_path)
{
	size_t len = 0;
	uint8_t *img = program_path ? read_file(program_path, sizeof(Elf64_Ehdr), &len) : NULL;
	bool found = false;
	Elf64_Ehdr eh;
	if (!img)
		return false;
	memcpy(&eh, img, sizeof eh);
	if (memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shoff > len ||
	    (size_t)eh.e_shnum * sizeof(Elf64_Shdr) > len - eh.e_shoff)
		goto done;
	for (size_t i = 0; i < eh.e_shnum && !found; i++) {
		Elf64_Shdr sh, strsh;
		memcpy(&sh, img + eh.e_shoff + i * sizeof sh, sizeof sh);
		if ((sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM) ||
		    sh.sh_link >= eh.e_shnum)
			continue;
		memcpy(&strsh, img + eh.e_shoff + sh.sh_link * sizeof strsh, sizeof strsh);
		found = symtab_has_marker(img, len, &sh, &strsh);
	}
done:
	free(img);
	return found;
}

/* --------------------------------------------------------------- session */

typedef struct inline_session {
	pid_t pid;
	int pidfd; /* readable once the target has exited (pidfd_open), or -1 */
	bool running, detached;
	/* lomas_session_interrupt: the signal, whether the target has it (got
	 * it itself, or passed on), and when to pass it on (monotonic ms). */
	int interrupt_sig;
	bool interrupt_done;
	long long forward_at_ms;
	int wait_status;
	char dir[64];
	char output[96];
	char command[1024];
	/* Once the target has ended: the file it wrote (image), decoded
	 * (profile, until the first lomas_session_profile takes it) and its
	 * summary (for stats). */
	uint8_t *image;
	size_t image_len;
	lomas_profile *profile;
	lomas_profile_info info;
	bool loaded;
	lomas_status load_status;
	char load_error[256];
} inline_session;

static void set_env(char **env, size_t *n, const char *key, const char *value, char *storage,
                    size_t cap)
{
	size_t kl = strlen(key);
	snprintf(storage, cap, "%s=%s", key, value);
	for (size_t i = 0; i < *n; i++)
		if (strncmp(env[i], key, kl) == 0 && env[i][kl] == '=') {
			env[i] = storage;
			return;
		}
	env[(*n)++] = storage;
}

/* Decode the target's profile from the image, with the session's metadata. */
static lomas_status decode_profile(inline_session *s, lomas_profile **out)
{
	lomas_status st = profile_load_buffer(s->image, s->image_len, s->output, out);
	if (st)
		return st;
	profile_meta_setf(*out, "clock", "inline");
	if (s->command[0])
		profile_meta_setf(*out, "command", "%s", s->command);
	return LOMAS_OK;
}

/*
 * Empty the session's private directory (mkdtemp's: nothing but the
 * runtime's profile, or a temporary file a killed target left behind) and
 * remove it.
 */
static void remove_dir(inline_session *s)
{
	DIR *d = opendir(s->dir);
	struct dirent *e;
	char path[sizeof s->dir + 256 + 2];
	while (d && (e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
			snprintf(path, sizeof path, "%s/%s", s->dir, e->d_name);
			unlink(path);
		}
	if (d)
		closedir(d);
	rmdir(s->dir);
}

/*
 * The target has ended: read its profile and decode it once (to check it and
 * for stats). The first lomas_session_profile takes that profile as it is
 * (for 40k samples a copy cost 0.9 ms and its free 0.4 ms, a third of what
 * lomas-demo record spent after the target's exit); later ones decode the
 * kept file image again.
 */
static void load_profile(inline_session *s)
{
	lomas_status st;
	errno = 0;
	s->image = read_file(s->output, 0, &s->image_len);
	if (!s->image)
		st = error_set(errno == ENOENT ? LOMAS_ENOENT : LOMAS_EIO, "%s: %s", s->output,
		               errno ? strerror(errno) : "not a readable file");
	else
		st = decode_profile(s, &s->profile);
	if (st) {
		s->load_status = st;
		snprintf(s->load_error, sizeof s->load_error,
		         "the target wrote no readable profile (%s)", lomas_error_message());
		s->profile = NULL;
		free(s->image);
		s->image = NULL;
	} else {
		s->info.size = sizeof s->info;
		s->loaded = lomas_profile_info_get(s->profile, &s->info) == LOMAS_OK;
	}
	remove_dir(s);
}

static void ended(inline_session *s, int status)
{
	s->running = false;
	s->wait_status = status;
	load_profile(s);
}

static long long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Is sig pending for the target (for one of its threads or the whole process)? */
static bool target_has_pending(pid_t pid, int sig)
{
	char path[64], line[256];
	bool found = false;
	FILE *f;
	snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
	if (!(f = fopen(path, "re")))
		return false;
	while (!found && fgets(line, sizeof line, f))
		if (!strncmp(line, "SigPnd:", 7) || !strncmp(line, "ShdPnd:", 7))
			found = (strtoull(line + 7, NULL, 16) >> (sig - 1)) & 1;
	fclose(f);
	return found;
}

/* Has the target's runtime begun to write its profile (a file in the directory)? */
static bool target_writing(const inline_session *s)
{
	DIR *d = opendir(s->dir);
	struct dirent *e;
	bool any = false;
	while (d && !any && (e = readdir(d)))
		any = strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	if (d)
		closedir(d);
	return any;
}

/* Interrupted: pass the signal on once it is due (see the top). */
static void interrupt_step(inline_session *s)
{
	if (!s->interrupt_sig || s->interrupt_done)
		return;
	if (target_has_pending(s->pid, s->interrupt_sig) || target_writing(s)) {
		s->interrupt_done = true;
		return;
	}
	if (now_ms() < s->forward_at_ms)
		return;
	/* Not reaped yet: the pid is still the target's. */
	kill(s->pid, s->interrupt_sig);
	s->interrupt_done = true;
}

static lomas_status isess_interrupt(void *impl, int sig, int flags)
{
	inline_session *s = impl;
	if (!s->running || s->detached)
		return LOMAS_OK;
	if (!s->interrupt_sig) {
		s->interrupt_sig = sig;
		s->interrupt_done = (flags & LOMAS_INTERRUPT_DELIVERED) != 0;
		s->forward_at_ms = now_ms() + FORWARD_GRACE_MS;
		interrupt_step(s);
	}
	return LOMAS_OK;
}

static lomas_status isess_poll(void *impl, int timeout_ms, bool *running)
{
	inline_session *s = impl;
	struct timespec t0, now;
	long nap_us = 100;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (s->running && !s->detached) {
		int status;
		bool block = timeout_ms < 0 && !(s->interrupt_sig && !s->interrupt_done);
		pid_t r = waitpid(s->pid, &status, block ? 0 : WNOHANG);
		if (r == s->pid) {
			ended(s, status);
			break;
		}
		if (r < 0 && errno == EINTR)
			break; /* a signal: back to the caller, still running */
		if (r < 0) {
			s->running = false;
			*running = false;
			return error_set(LOMAS_ETARGET, "waitpid(%d): %s", (int)s->pid,
			                 strerror(errno));
		}
		if (r == 0) {
			long ms, wait_ms;
			interrupt_step(s);
			clock_gettime(CLOCK_MONOTONIC, &now);
			ms = (now.tv_sec - t0.tv_sec) * 1000 + (now.tv_nsec - t0.tv_nsec) / 1000000;
			if (timeout_ms >= 0 && ms >= timeout_ms)
				break;
			wait_ms = timeout_ms < 0 ? INT_MAX : timeout_ms - ms;
			if (s->interrupt_sig && !s->interrupt_done) {
				long long left = s->forward_at_ms - now_ms();
				/* Look again for the signal every 20 ms until it is due. */
				wait_ms = wait_ms < 20 ? wait_ms : 20;
				if (left < wait_ms)
					wait_ms = left < 1 ? 1 : (long)left;
			}
			errno = 0;
			session_wait_exit(s->pidfd, wait_ms, &nap_us);
			if (errno == EINTR)
				break;
		}
	}
	*running = s->running && !s->detached;
	return LOMAS_OK;
}

static lomas_status isess_stop(void *impl)
{
	inline_session *s = impl;
	if (s->running && !s->detached) {
		s->detached = true;
		log_msg(LOMAS_LOG_INFO,
		        "inline clock: detached from pid %d; it writes its profile to %s when it "
		        "exits",
		        (int)s->pid, s->output);
	}
	return LOMAS_OK;
}

static lomas_status isess_stats(void *impl, lomas_stats *out)
{
	inline_session *s = impl;
	if (!s->loaded)
		return LOMAS_OK; /* nothing known until the target exits */
	out->refs = s->info.refs;
	out->samples = s->info.samples;
	out->reused = s->info.reused;
	out->censored = s->info.censored;
	out->threads = s->info.threads;
	return LOMAS_OK;
}

static lomas_status isess_profile(void *impl, lomas_profile **out)
{
	inline_session *s = impl;
	if (s->running || s->detached)
		return error_set(LOMAS_ESTATE,
		                 "the inline clock's profile is written when the "
		                 "target exits%s",
		                 s->detached ? " (the session was detached)" : "");
	if (!s->image)
		return error_set(s->load_status ? s->load_status : LOMAS_EIO, "%s", s->load_error);
	if (s->profile) {
		*out = s->profile;
		s->profile = NULL;
		return LOMAS_OK;
	}
	return decode_profile(s, out);
}

static int isess_wait_status(void *impl)
{
	return ((inline_session *)impl)->wait_status;
}

static void isess_free(void *impl)
{
	inline_session *s = impl;
	if (!s)
		return;
	/* A running target is left alone (never stopped); its directory stays. */
	if (!s->running && !s->detached)
		remove_dir(s);
	if (s->pidfd >= 0)
		close(s->pidfd);
	lomas_profile_free(s->profile);
	free(s->image);
	free(s);
}

static const session_ops inline_ops = {
    .name = "inline",
    .poll = isess_poll,
    .stop = isess_stop,
    .stats = isess_stats,
    .profile = isess_profile,
    .wait_status = isess_wait_status,
    .free = isess_free,
    .interrupt = isess_interrupt,
};

lomas_status inline_backend_start(const struct lomas_config *cfg, const char *program_path,
                                  char *const argv[], const session_ops **ops, void **impl)
{
	inline_session *s;
	size_t nenv = 0, n = 0;
	char **env;
	char vals[8][128];
	char *pid_digits;
	int exec_errno;
	lomas_status st;
	const char *tmp = getenv("TMPDIR");
	if (!cfg || !program_path || !argv || !argv[0] || !ops || !impl)
		return error_set(LOMAS_EINVAL, "inline_backend_start: NULL argument");
	s = calloc(1, sizeof *s);
	if (!s)
		return error_set(LOMAS_ENOMEM, "out of memory");
	s->pidfd = -1;
	if (!tmp || !*tmp || strlen(tmp) > 40)
		tmp = "/tmp";
	snprintf(s->dir, sizeof s->dir, "%s/lomas-inline-XXXXXX", tmp);
	if (!mkdtemp(s->dir)) {
		st = error_set(LOMAS_EIO, "cannot create a temporary directory in %s: %s", tmp,
		               strerror(errno));
		free(s);
		return st;
	}
	snprintf(s->output, sizeof s->output, "%s/profile.lomas", s->dir);
	session_command_line(argv, s->command, sizeof s->command);

	while (environ && environ[nenv])
		nenv++;
	env = calloc(nenv + 9, sizeof *env);
	if (!env) {
		rmdir(s->dir);
		free(s);
		return error_set(LOMAS_ENOMEM, "out of memory");
	}
	for (n = 0; n < nenv; n++)
		env[n] = environ[n];
	set_env(env, &n, LOMAS_ENV_OUTPUT, s->output, vals[0], sizeof vals[0]);
	/* The profile is the target's, not its children's: the child fills in
	 * its pid after the fork (see lib/inline/runtime_env.c, lineage). */
	set_env(env, &n, LOMAS_ENV_OUTPUT_PID, "", vals[6], sizeof vals[6]);
	pid_digits = vals[6] + strlen(vals[6]);
	if (cfg->period_refs == CONFIG_AUTO)
		set_env(env, &n, LOMAS_ENV_PERIOD, "auto", vals[1], sizeof vals[1]);
	else {
		char v[32];
		snprintf(v, sizeof v, "%llu", (unsigned long long)cfg->period_refs);
		set_env(env, &n, LOMAS_ENV_PERIOD, v, vals[1], sizeof vals[1]);
	}
	{
		char v[32];
		snprintf(v, sizeof v, "%llu", (unsigned long long)cfg->seed);
		set_env(env, &n, LOMAS_ENV_SEED, v, vals[2], sizeof vals[2]);
		snprintf(v, sizeof v, "%u", cfg->line_size);
		set_env(env, &n, LOMAS_ENV_LINE_SIZE, v, vals[3], sizeof vals[3]);
		if (cfg->window_refs == CONFIG_AUTO)
			snprintf(v, sizeof v, "auto");
		else
			snprintf(v, sizeof v, "%llu", (unsigned long long)cfg->window_refs);
		set_env(env, &n, LOMAS_ENV_WINDOW, v, vals[4], sizeof vals[4]);
		if (cfg->max_samples_live) {
			snprintf(v, sizeof v, "%llu", (unsigned long long)cfg->max_samples_live);
			set_env(env, &n, LOMAS_ENV_MAX_LIVE, v, vals[5], sizeof vals[5]);
		}
		if (cfg->phase_guided)
			set_env(env, &n, LOMAS_ENV_PHASE_GUIDED, "1", vals[7], sizeof vals[7]);
	}
	env[n] = NULL;

	st = session_spawn(program_path, argv, env, pid_digits, &s->pid, &s->pidfd, &exec_errno);
	free(env);
	if (st) {
		rmdir(s->dir);
		free(s);
		if (exec_errno)
			return error_set(exec_errno == ENOENT ? LOMAS_ENOENT : LOMAS_ETARGET,
			                 "cannot run %s: %s", program_path, strerror(exec_errno));
		return st;
	}
	s->running = true;
	*ops = &inline_ops;
	*impl = s;
	return LOMAS_OK;
}

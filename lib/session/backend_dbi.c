/*
 * The session backend of the dbi clock: the program runs under Valgrind with
 * this library's tool (lib/dbi/tool_*.c), which counts and samples every
 * data reference in-process and hands its threads and sample streams over
 * in a file (dump.h) at exit; the profile is assembled here
 * (dump_read.c). Everything lives in a private temporary directory: the
 * hand-over file, Valgrind's log (so that none of Valgrind's messages reach
 * the program's stderr) and a FIFO on which lomas_session_stop asks the
 * tool for what it has so far.
 *
 * The tool is started directly (not through the valgrind launcher, a shell
 * script on Debian that adds LD_LIBRARY_PATH and GLIBCXX_FORCE_NEW to the
 * program's environment), with VALGRIND_LAUNCHER set as the launcher would
 * (the core needs it, and removes it from the program's environment): the
 * program sees its own environment plus Valgrind's LD_PRELOAD. Children are
 * not followed (--trace-children=no): a program the target executes runs
 * natively, and the profile ends at that exec.
 *
 * stop = detach: the tool writes what it has and stops sampling; the program
 * runs on under Valgrind (it cannot leave it) with its output untouched.
 */
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

#include "dbi/dbi.h"
#include "dbi/dump.h"
#include "session.h"

extern char **environ;

/* How long lomas_session_stop waits for the tool's answer (it looks at its
 * FIFO every few milliseconds of the program's running; a program blocked
 * in a system call answers when the call returns). */
#define STOP_WAIT_MS 5000

typedef struct dbi_session {
	pid_t pid;
	int pidfd; /* readable once the target has exited, or -1 */
	bool running, detached;
	int wait_status;
	char dir[64];
	char out[96], log[96], ctl[96];
	char command[1024];
	bool trace;
	char trace_path[PATH_MAX];
	char valgrind_log[512]; /* what Valgrind said in its log, if anything */
	char ended[64];         /* how the program ended, once it has */
	/* Once the hand-over file is read: its image, the profile decoded from
	 * it (until the first lomas_session_profile takes it), its summary, or
	 * why there is none. */
	uint8_t *image;
	size_t image_len;
	lomas_profile *profile;
	lomas_profile_info info;
	bool loaded;
	lomas_status load_status;
	char load_error[768];
} dbi_session;

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* ---------------------------------------------------------------- profile */

static void remove_files(dbi_session *s)
{
	char tmp[128];
	snprintf(tmp, sizeof tmp, "%s.tmp", s->out);
	unlink(s->out);
	unlink(tmp);
	unlink(s->log);
	unlink(s->ctl);
	rmdir(s->dir);
}

/* The profile from the hand-over image, with the session's metadata. */
static lomas_status decode(const dbi_session *s, const uint8_t *buf, size_t len,
                           lomas_profile **out)
{
	dbi_dump_info info;
	lomas_status st = dbi_dump_read(buf, len, s->out, out, &info);
	if (st)
		return st;
	/* The build id of each mapped file, as the step clock records them, so
	 * that symbolization (lib/sym) can tell a binary rebuilt since the run
	 * from the one that ran. Here, not in the reader: the hand-over file's
	 * paths are only read, never opened, there (it is fuzzed). */
	profile_fill_build_ids(*out);
	if (s->command[0])
		profile_meta_setf(*out, "command", "%s", s->command);
	if (s->trace)
		profile_meta_setf(*out, "trace", "%s", s->trace_path);
	if (s->valgrind_log[0])
		profile_meta_setf(*out, "valgrind_log", "%s", s->valgrind_log);
	/* The program's own end, from its wait status (the tool saw an exit). */
	if (s->ended[0] && info.ended == DUMP_ENDED_EXIT)
		profile_meta_setf(*out, "ended", "%s", s->ended);
	return LOMAS_OK;
}

/* Read the tool's hand-over file (it exists) into the session's profile. */
static void load_profile(dbi_session *s)
{
	uint8_t *buf = NULL;
	size_t len = 0;
	char said[512];
	lomas_status st = file_read_all(s->out, &buf, &len);
	dbi_valgrind_said(s->log, said, sizeof said);
	snprintf(s->valgrind_log, sizeof s->valgrind_log, "%s", said);
	if (!st)
		st = decode(s, buf, len, &s->profile);
	if (st) {
		free(buf);
		s->load_status = st;
		snprintf(s->load_error, sizeof s->load_error,
		         "the dbi clock's tool handed over no readable profile (%s)",
		         lomas_error_message());
		s->profile = NULL;
		return;
	}
	s->image = buf;
	s->image_len = len;
	if (said[0])
		log_msg(LOMAS_LOG_WARN, "valgrind: %s", said);
	s->info.size = sizeof s->info;
	s->loaded = lomas_profile_info_get(s->profile, &s->info) == LOMAS_OK;
}

/* The target has ended (status from waitpid): collect its profile. */
static void ended(dbi_session *s, int status)
{
	char said[512];
	s->running = false;
	s->wait_status = status;
	if (WIFEXITED(status))
		snprintf(s->ended, sizeof s->ended, "exit %d", WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		snprintf(s->ended, sizeof s->ended, "signal %d", WTERMSIG(status));
	if (!s->profile && access(s->out, F_OK) == 0) {
		load_profile(s);
	} else if (!s->profile && !s->load_status) {
		/* No hand-over: Valgrind failed (its log says why), or the program
		 * was killed before Valgrind could run the tool's exit. */
		char file[PATH_MAX];
		dbi_valgrind_said(s->log, said, sizeof said);
		s->load_status = LOMAS_ETARGET;
		if (dbi_valgrind_debuginfo_failed(s->log, file, sizeof file)) {
			/* Before the program ran: a capability of this Valgrind, not the
			 * program's fault. Say what to do instead. */
			s->load_status = LOMAS_ENOTSUP;
			snprintf(s->load_error, sizeof s->load_error,
			         "Valgrind cannot read the debug info of %s (DWARF 5 as clang "
			         "writes it; Valgrind 3.20 reads it), so the dbi clock cannot run "
			         "it: rebuild it with -gdwarf-4, strip its debug info (objcopy "
			         "--strip-debug), or use --clock=inline",
			         file[0] ? file : "the program or one of its libraries");
		} else if (said[0])
			snprintf(s->load_error, sizeof s->load_error,
			         "Valgrind ended without the dbi clock's profile: %s", said);
		else if (WIFSIGNALED(status))
			snprintf(s->load_error, sizeof s->load_error,
			         "the program was killed by signal %d before the dbi clock could "
			         "write its profile",
			         WTERMSIG(status));
		else
			snprintf(s->load_error, sizeof s->load_error,
			         "Valgrind ended (status %d) without the dbi clock's profile",
			         WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	}
	remove_files(s);
}

/* ---------------------------------------------------------------- session */

static lomas_status dsess_poll(void *impl, int timeout_ms, bool *running)
{
	dbi_session *s = impl;
	uint64_t t0 = now_ms();
	/* Without a pidfd, naps of 10 ms: Valgrind's own start-up takes far longer. */
	long nap_us = 10000;
	while (s->running && !s->detached) {
		int status;
		pid_t r = waitpid(s->pid, &status, timeout_ms < 0 ? 0 : WNOHANG);
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
			uint64_t spent = now_ms() - t0;
			if ((long)spent >= timeout_ms)
				break;
			errno = 0;
			session_wait_exit(s->pidfd, timeout_ms - (long)spent, &nap_us);
			if (errno == EINTR)
				break;
		}
	}
	*running = s->running && !s->detached;
	return LOMAS_OK;
}

/*
 * Detach: ask the tool (a byte on its FIFO) for what it has, wait for the
 * hand-over file or the program's end, and leave the program running.
 */
static lomas_status dsess_stop(void *impl)
{
	dbi_session *s = impl;
	uint64_t t0;
	int fd;
	if (!s->running || s->detached)
		return LOMAS_OK;
	fd = open(s->ctl, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
	if (fd >= 0) {
		ssize_t w = write(fd, "s", 1);
		(void)w;
		close(fd);
	}
	t0 = now_ms();
	while (now_ms() - t0 < STOP_WAIT_MS) {
		int status;
		pid_t r = waitpid(s->pid, &status, WNOHANG);
		if (r == s->pid) {
			ended(s, status);
			return LOMAS_OK;
		}
		if (fd >= 0 && access(s->out, F_OK) == 0) {
			load_profile(s);
			break;
		}
		long nap_us = 10000;
		session_wait_exit(s->pidfd, 10, &nap_us);
	}
	s->detached = true;
	if (!s->profile && !s->load_status) {
		s->load_status = LOMAS_ETARGET;
		snprintf(s->load_error, sizeof s->load_error,
		         "the dbi clock's tool did not hand over a profile within %d s (the "
		         "program may be blocked in a system call)",
		         STOP_WAIT_MS / 1000);
	}
	log_msg(LOMAS_LOG_INFO, "dbi clock: detached from pid %d; it runs on under Valgrind",
	        (int)s->pid);
	/* The tool writes nothing more: nothing of ours is left to keep. */
	remove_files(s);
	return LOMAS_OK;
}

static lomas_status dsess_stats(void *impl, lomas_stats *out)
{
	dbi_session *s = impl;
	if (!s->loaded)
		return LOMAS_OK; /* nothing known until the tool hands over */
	out->refs = s->info.refs;
	out->samples = s->info.samples;
	out->reused = s->info.reused;
	out->censored = s->info.censored;
	out->threads = s->info.threads;
	return LOMAS_OK;
}

static lomas_status dsess_profile(void *impl, lomas_profile **out)
{
	dbi_session *s = impl;
	if (s->running && !s->detached)
		return error_set(LOMAS_ESTATE,
		                 "the dbi clock's profile is handed over when the target exits");
	if (!s->image)
		return error_set(s->load_status ? s->load_status : LOMAS_EIO, "%s", s->load_error);
	if (s->profile) {
		*out = s->profile;
		s->profile = NULL;
		return LOMAS_OK;
	}
	return decode(s, s->image, s->image_len, out);
}

static int dsess_wait_status(void *impl)
{
	return ((dbi_session *)impl)->wait_status;
}

static void dsess_free(void *impl)
{
	dbi_session *s = impl;
	if (!s)
		return;
	/* A running target is left alone (never stopped). */
	if (!s->running || s->detached)
		remove_files(s);
	if (s->pidfd >= 0)
		close(s->pidfd);
	lomas_profile_free(s->profile);
	free(s->image);
	free(s);
}

static const session_ops dbi_ops = {
    .name = "dbi",
    .poll = dsess_poll,
    .stop = dsess_stop,
    .stats = dsess_stats,
    .profile = dsess_profile,
    .wait_status = dsess_wait_status,
    .free = dsess_free,
};

/* ------------------------------------------------------------------ start */

#define NOPTS 16
/* Exact stack distances' share of references, percent (lib/dbi/tool_burst.c). */
#define EXACT_BUDGET_DEFAULT 5.0

lomas_status dbi_backend_start(const struct lomas_config *cfg, const char *program_path,
                               char *const argv[], const session_ops **ops, void **impl)
{
	dbi_session *s;
	char tool[PATH_MAX], opt[NOPTS][PATH_MAX + 32], launcher_env[PATH_MAX + 32];
	const char *launcher, *tmp = getenv("TMPDIR"), *trace = getenv("LOMAS_DBI_TRACE");
	size_t nargs = 0, nenv = 0, k = 0, n = 0;
	unsigned exact;
	char **args, **env;
	int exec_errno;
	lomas_status st;
	if (!cfg || !program_path || !argv || !argv[0] || !ops || !impl)
		return error_set(LOMAS_EINVAL, "dbi_backend_start: NULL argument");
	if (!dbi_find(tool, sizeof tool, &launcher))
		return LOMAS_ENOTSUP;
	if ((st = dbi_check_program(program_path)))
		return st;
	/* Exact stack distances (the tool's bursts): percent of references. */
	{
		const char *v = getenv("LOMAS_EXACT_BUDGET");
		char *end;
		double d = v ? strtod(v, &end) : EXACT_BUDGET_DEFAULT;
		if (v && (!*v || *end || !(d >= 0.0 && d <= 100.0)))
			return error_set(LOMAS_EINVAL,
			                 "LOMAS_EXACT_BUDGET=%s: not a percentage from 0 to 100",
			                 v);
		exact = (unsigned)(d * 100.0 + 0.5);
	}
	if (!(s = calloc(1, sizeof *s)))
		return error_set(LOMAS_ENOMEM, "out of memory");
	s->pidfd = -1;
	if (!tmp || !*tmp || strlen(tmp) > 40)
		tmp = "/tmp";
	snprintf(s->dir, sizeof s->dir, "%s/lomas-dbi-XXXXXX", tmp);
	if (!mkdtemp(s->dir)) {
		st = error_set(LOMAS_EIO, "cannot create a temporary directory in %s: %s", tmp,
		               strerror(errno));
		free(s);
		return st;
	}
	snprintf(s->out, sizeof s->out, "%s/profile.dbi", s->dir);
	snprintf(s->log, sizeof s->log, "%s/valgrind.log", s->dir);
	snprintf(s->ctl, sizeof s->ctl, "%s/control", s->dir);
	session_command_line(argv, s->command, sizeof s->command);
	if (mkfifo(s->ctl, 0600) != 0) {
		st = error_set(LOMAS_EIO, "mkfifo %s: %s", s->ctl, strerror(errno));
		rmdir(s->dir);
		free(s);
		return st;
	}

	/* Valgrind's options, the tool's, then the program as given: Valgrind
	 * searches PATH for it as the shell did, and passes argv[0] on as it is. */
	snprintf(opt[k++], sizeof opt[0], "--log-file=%s", s->log);
	snprintf(opt[k++], sizeof opt[0], "--lomas-out=%s", s->out);
	snprintf(opt[k++], sizeof opt[0], "--lomas-control=%s", s->ctl);
	if (cfg->period_refs == CONFIG_AUTO)
		snprintf(opt[k++], sizeof opt[0], "--lomas-period=auto");
	else
		snprintf(opt[k++], sizeof opt[0], "--lomas-period=%llu",
		         (unsigned long long)cfg->period_refs);
	snprintf(opt[k++], sizeof opt[0], "--lomas-seed=%llu", (unsigned long long)cfg->seed);
	snprintf(opt[k++], sizeof opt[0], "--lomas-line-size=%u", cfg->line_size);
	if (cfg->window_refs != CONFIG_AUTO)
		snprintf(opt[k++], sizeof opt[0], "--lomas-window=%llu",
		         (unsigned long long)cfg->window_refs);
	if (cfg->phase_guided)
		snprintf(opt[k++], sizeof opt[0], "--lomas-phase-guided=yes");
	if (cfg->max_samples_live)
		snprintf(opt[k++], sizeof opt[0], "--lomas-max-live=%llu",
		         (unsigned long long)(cfg->max_samples_live > (1u << 24)
		                                  ? (1u << 24)
		                                  : cfg->max_samples_live));
	/* Full-trace mode (tests): LOMAS_DBI_TRACE names the file. */
	if (trace && *trace) {
		snprintf(opt[k++], sizeof opt[0], "--lomas-trace=%s", trace);
		snprintf(s->trace_path, sizeof s->trace_path, "%s", trace);
		s->trace = true;
	}
	snprintf(opt[k++], sizeof opt[0], "--lomas-exact-budget=%u", exact);
	{
		const char *fp = getenv("LOMAS_DBI_FASTPATH");
		if (fp && strcmp(fp, "helper") == 0)
			snprintf(opt[k++], sizeof opt[0], "--lomas-fastpath=helper");
	}
	while (argv[nargs])
		nargs++;
	args = calloc(nargs + k + 8, sizeof *args);
	while (environ && environ[nenv])
		nenv++;
	env = calloc(nenv + 2, sizeof *env);
	if (!args || !env) {
		free(args);
		free(env);
		remove_files(s);
		free(s);
		return error_set(LOMAS_ENOMEM, "out of memory");
	}
	args[n++] = tool;
	args[n++] = "--tool=lomas";
	args[n++] = "-q";
	args[n++] = "--trace-children=no";
	args[n++] = "--child-silent-after-fork=yes";
	for (size_t i = 0; i < k; i++)
		args[n++] = opt[i];
	for (size_t i = 0; i < nargs; i++)
		args[n++] = argv[i];
	args[n] = NULL;
	/* The core wants the launcher's name (it removes it from the program's environment). */
	snprintf(launcher_env, sizeof launcher_env, "VALGRIND_LAUNCHER=%s", launcher);
	n = 0;
	for (size_t i = 0; i < nenv; i++)
		if (strncmp(environ[i], "VALGRIND_LAUNCHER=", 18) != 0 &&
		    strncmp(environ[i], "LOMAS_DBI_", 10) != 0)
			env[n++] = environ[i];
	env[n++] = launcher_env;
	env[n] = NULL;

	st = session_spawn(tool, args, env, NULL, &s->pid, &s->pidfd, &exec_errno);
	if (st) {
		if (exec_errno)
			st = error_set(LOMAS_ENOTSUP,
			               "cannot run the dbi clock's Valgrind tool %s: %s", tool,
			               strerror(exec_errno));
		goto fail;
	}
	free(args);
	free(env);
	s->running = true;
	*ops = &dbi_ops;
	*impl = s;
	return LOMAS_OK;
fail:
	free(args);
	free(env);
	remove_files(s);
	free(s);
	return st;
}

lomas_status dbi_backend_attach(void)
{
	return error_set(LOMAS_ENOTSUP,
	                 "the dbi clock cannot attach to a running process (Valgrind runs a "
	                 "program from its first instruction); use --clock=step to attach");
}

bool dbi_backend_available(void)
{
	char tool[PATH_MAX];
	const char *launcher;
	bool ok = dbi_find(tool, sizeof tool, &launcher);
	error_clear();
	return ok;
}

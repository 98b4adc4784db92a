/* The opaque session: config → clock backend → profile (docs/architecture.md). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "pmu/pmu.h"
#include "session.h"

struct lomas_session {
	const session_ops *ops;
	void *impl;
	bool ended;    /* the target ended while we watched it: wait_status is its own */
	bool stopped;  /* lomas_session_stop detached from a target still running */
	bool attached; /* the target ran before we came: its caches were not empty */
	int wait_status;
	uint64_t start_ns;
};

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/*
 * Check one candidate path; 1 = executable, 0 = absent, -1 = present but not
 * executable, -2 = a directory (access(2) calls a searchable directory
 * executable; execve gives EACCES for it, and a PATH search goes on past it).
 */
static int candidate(const char *path)
{
	struct stat st;
	if (stat(path, &st) != 0)
		return access(path, F_OK) == 0 ? -1 : 0;
	if (S_ISDIR(st.st_mode))
		return -2;
	return access(path, X_OK) == 0 ? 1 : -1;
}

void session_command_line(char *const argv[], char *buf, size_t len)
{
	size_t used = 0;
	buf[0] = '\0';
	for (size_t i = 0; argv[i] && used + 1 < len; i++) {
		int n = snprintf(buf + used, len - used, "%s%s", i ? " " : "", argv[i]);
		if (n < 0)
			break;
		used += (size_t)n;
	}
}

lomas_status session_find_program(const char *argv0, char *buf, size_t len)
{
	const char *path;
	bool denied = false;
	if (!argv0 || !*argv0)
		return error_set(LOMAS_EINVAL, "empty command");
	if (strchr(argv0, '/')) {
		int c = candidate(argv0);
		if (c == 0)
			return error_set(LOMAS_ENOENT, "%s: %s", argv0, strerror(ENOENT));
		if (c < 0)
			return error_set(LOMAS_EPERM, "%s: %s", argv0,
			                 strerror(c == -2 ? EISDIR : EACCES));
		if (strlen(argv0) >= len)
			return error_set(LOMAS_ERANGE, "%s: path too long", argv0);
		strcpy(buf, argv0);
		return LOMAS_OK;
	}
	path = getenv("PATH");
	if (!path)
		path = "/usr/local/bin:/usr/bin:/bin";
	while (*path) {
		const char *colon = strchr(path, ':');
		size_t dl = colon ? (size_t)(colon - path) : strlen(path);
		int n = snprintf(buf, len, "%.*s%s%s", (int)dl, path, dl ? "/" : "", argv0);
		if (n > 0 && (size_t)n < len) {
			int c = candidate(buf);
			if (c > 0)
				return LOMAS_OK;
			denied |= c == -1;
		}
		path += dl + (colon ? 1 : 0);
		if (!colon)
			break;
	}
	if (denied)
		return error_set(LOMAS_EPERM, "%s: %s", argv0, strerror(EACCES));
	return error_set(LOMAS_ENOENT, "%s: command not found", argv0);
}

lomas_status lomas_program_find(const char *command, char *path, size_t len)
{
	error_clear();
	if (!command || !path || !len)
		return error_set(LOMAS_EINVAL, "lomas_program_find: NULL argument");
	return session_find_program(command, path, len);
}

/*
 * Can the pmu clock run here (its events known, counters opening)? LOMAS_OK,
 * or the capability error in one line, naming the clock alt to use instead.
 */
static lomas_status pmu_available(const struct lomas_config *cfg, const char *alt)
{
	pmu_table t;
	lomas_status st = pmu_table_get(NULL, cfg->events, &t);
	if (st == LOMAS_ENOTSUP && alt)
		return error_prefix(st, "the pmu clock cannot run here (use --clock=%s)", alt);
	if (st)
		return st;
	return pmu_probe(&t, getpid(), alt);
}

static lomas_status session_new(const session_ops *ops, void *impl, uint64_t t0,
                                lomas_session **out)
{
	lomas_session *s = calloc(1, sizeof *s);
	if (!s) {
		ops->free(impl);
		return error_set(LOMAS_ENOMEM, "out of memory");
	}
	s->ops = ops;
	s->impl = impl;
	s->start_ns = t0;
	*out = s;
	return LOMAS_OK;
}

lomas_status lomas_session_start(const lomas_config *cfg, char *const argv[], lomas_session **out)
{
	error_clear();
	struct lomas_config defaults;
	char path[PATH_MAX];
	const session_ops *ops = NULL;
	void *impl = NULL;
	uint64_t t0 = now_ns();
	lomas_status st;
	if (!out || !argv || !argv[0])
		return error_set(LOMAS_EINVAL, "lomas_session_start: NULL argument or empty argv");
	*out = NULL;
	if (!cfg) {
		config_defaults(&defaults);
		cfg = &defaults;
	}
	if ((st = session_find_program(argv[0], path, sizeof path)))
		return st;
	switch (cfg->clock) {
	case CLOCK_INLINE:
		/* Refused before it runs: run without the hooks, it would only leave no profile. */
		if (!inline_backend_detect(path))
			return error_set(
			    LOMAS_ENOTSUP,
			    "%s has no lomas-inline hooks (build it with the recipe: "
			    "pkg-config lomas-inline), so the inline clock cannot run it; "
			    "use --clock=step for an unmodified program",
			    path);
		st = inline_backend_start(cfg, path, argv, &ops, &impl);
		break;
	case CLOCK_STEP: st = monitor_backend_start(cfg, path, argv, &ops, &impl); break;
	case CLOCK_DBI: st = dbi_backend_start(cfg, path, argv, &ops, &impl); break;
	case CLOCK_PMU:
		/* Refused before anything runs, naming the cause and the clock to use. */
		if ((st = pmu_available(cfg, inline_backend_detect(path) ? "inline"
		                             : dbi_backend_available()   ? "dbi"
		                                                         : "step")))
			return st;
		st = monitor_backend_start(cfg, path, argv, &ops, &impl);
		break;
	case CLOCK_AUTO:
	default:
		/* docs/architecture.md, the clocks: pmu if its events open, else inline, else dbi,
		 * else step. */
		if (pmu_available(cfg, NULL) == LOMAS_OK) {
			struct lomas_config pc = *cfg;
			pc.clock = CLOCK_PMU;
			st = monitor_backend_start(&pc, path, argv, &ops, &impl);
		} else if (error_clear(), inline_backend_detect(path)) {
			st = inline_backend_start(cfg, path, argv, &ops, &impl);
		} else if (dbi_backend_available() &&
		           (st = dbi_backend_start(cfg, path, argv, &ops, &impl)) !=
		               LOMAS_ENOTSUP) {
			/* started under Valgrind, or failed for a reason step would share */
		} else {
			log_msg(
			    LOMAS_LOG_WARN,
			    "%s has no lomas-inline hooks and the dbi clock cannot run it (%s): "
			    "using the step clock (single-stepping, slow)",
			    path, st ? lomas_error_message() : "Valgrind is not available");
			st = monitor_backend_start(cfg, path, argv, &ops, &impl);
		}
		break;
	}
	if (st)
		return st;
	return session_new(ops, impl, t0, out);
}

lomas_status lomas_session_attach(const lomas_config *cfg, int pid, lomas_session **out)
{
	error_clear();
	struct lomas_config defaults;
	const session_ops *ops = NULL;
	void *impl = NULL;
	uint64_t t0 = now_ns();
	lomas_status st;
	if (!out || pid <= 0)
		return error_set(LOMAS_EINVAL, "lomas_session_attach: bad pid %d", pid);
	*out = NULL;
	if (!cfg) {
		config_defaults(&defaults);
		cfg = &defaults;
	}
	if (cfg->clock == CLOCK_INLINE)
		return error_set(LOMAS_ENOTSUP, "the inline clock cannot attach to a running "
		                                "process; use --clock=step");
	if (cfg->clock == CLOCK_DBI)
		return dbi_backend_attach();
	if (cfg->clock == CLOCK_PMU && (st = pmu_available(cfg, "step")))
		return st;
	if ((st = monitor_backend_attach(cfg, pid, &ops, &impl)) ||
	    (st = session_new(ops, impl, t0, out)))
		return st;
	(*out)->attached = true;
	return LOMAS_OK;
}

lomas_status lomas_session_poll(lomas_session *s, int timeout_ms, int *running)
{
	error_clear();
	bool r = false;
	lomas_status st;
	if (!s || !running)
		return error_set(LOMAS_EINVAL, "lomas_session_poll: NULL argument");
	if (s->stopped)
		return error_set(LOMAS_ESTATE, "lomas_session_poll: the session was stopped; the "
		                               "target runs on without it");
	if (s->ended) {
		*running = 0;
		return LOMAS_OK;
	}
	st = s->ops->poll(s->impl, timeout_ms, &r);
	if (!r && !st) {
		s->ended = true;
		s->wait_status = s->ops->wait_status(s->impl);
	}
	*running = r;
	return st;
}

lomas_status lomas_session_wait(lomas_session *s, int *wait_status)
{
	error_clear();
	int running = 1;
	lomas_status st = LOMAS_OK;
	if (!s)
		return error_set(LOMAS_EINVAL, "lomas_session_wait: NULL session");
	/* No status to give: the target was left running, not waited for. */
	if (s->stopped)
		return error_set(LOMAS_ESTATE, "lomas_session_wait: the session was stopped; the "
		                               "target runs on without it");
	while (running && !(st = lomas_session_poll(s, -1, &running)))
		;
	if (!st && wait_status)
		*wait_status = s->wait_status;
	return st;
}

lomas_status lomas_session_stop(lomas_session *s)
{
	error_clear();
	lomas_status st;
	if (!s)
		return error_set(LOMAS_EINVAL, "lomas_session_stop: NULL session");
	if (s->ended || s->stopped)
		return LOMAS_OK;
	st = s->ops->stop(s->impl);
	if (!st)
		s->stopped = true;
	return st;
}

lomas_status lomas_session_interrupt(lomas_session *s, int sig, int flags)
{
	error_clear();
	if (!s || sig <= 0 || sig >= 65)
		return error_set(LOMAS_EINVAL,
		                 "lomas_session_interrupt: NULL session or bad signal %d", sig);
	if (s->ended)
		return LOMAS_OK;
	if (!s->ops->interrupt)
		return error_set(LOMAS_ENOTSUP,
		                 "the %s clock does not end a run by signal; detach with "
		                 "lomas_session_stop",
		                 s->ops->name);
	return s->ops->interrupt(s->impl, sig, flags);
}

lomas_status lomas_session_stats(const lomas_session *s, lomas_stats *out)
{
	error_clear();
	lomas_status st;
	if (!s || !out)
		return error_set(LOMAS_EINVAL, "lomas_session_stats: NULL argument");
	lomas_stats full = LOMAS_STATS_INIT;
	memset(&full, 0, sizeof full);
	full.size = sizeof full;
	st = s->ops->stats(s->impl, &full);
	full.size = sizeof full; /* a backend may have cleared it */
	full.elapsed_ns = now_ns() - s->start_ns;
	/* What was counted is copied out even when the backend reports an error. */
	if (st != LOMAS_OK) {
		uint32_t size;
		memcpy(&size, out, sizeof size);
		if (size >= 8)
			memcpy(out, &full, size < sizeof full ? size : sizeof full);
		return st;
	}
	return out_sized_copy(out, &full, sizeof full, "lomas_session_stats");
}

lomas_status lomas_session_profile(lomas_session *s, lomas_profile **out)
{
	error_clear();
	lomas_status st;
	if (!s || !out)
		return error_set(LOMAS_EINVAL, "lomas_session_profile: NULL argument");
	if ((st = s->ops->profile(s->impl, out)))
		return st;
	/* The model takes a profile for the program's whole run unless it says
	 * otherwise (lib/model: a cache empty at its start). */
	if (s->attached && (st = profile_meta_setf(*out, "start", "attached"))) {
		lomas_profile_free(*out);
		*out = NULL;
	}
	return st;
}

const char *lomas_session_clock(const lomas_session *s)
{
	error_clear();
	return s && s->ops ? s->ops->name : NULL;
}

void lomas_session_free(lomas_session *s)
{
	if (!s)
		return;
	s->ops->free(s->impl);
	free(s);
}

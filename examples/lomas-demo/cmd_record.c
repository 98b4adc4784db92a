/*
 * lomas-demo record: run or attach to a program under a live clock and save
 * its profile. Exit status as `time` and valgrind: the target's own status
 * (128+N if signal N killed it); 125 when lomas itself fails or the
 * command line is wrong, 126 when the command cannot run, 127 when it is not
 * found (like env and timeout). SIGINT/SIGTERM detach and save what was
 * collected.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "demo.h"

enum {
	OPT_CLOCK = DEMO_OPT_LONG,
	OPT_EVENTS,
	OPT_WATCH,
	OPT_PERIOD,
	OPT_SEED,
	OPT_LINE_SIZE,
	OPT_WINDOW,
	OPT_MAX_SKID,
	OPT_PMU_SAMPLE,
	OPT_PHASE_GUIDED,
};

/* record's options: its getopt table, its help, and the config keys they set. */
const struct demo_opt record_opts[] = {
    {"output", 'o', required_argument, "OUT", "the profile to write (default lomas.lomas)", NULL},
    {"clock", OPT_CLOCK, required_argument, "auto|inline|dbi|step|pmu",
     "the clock (default auto: pmu where the\n"
     "counters open, else inline when the program carries\n"
     "the lomas-inline hooks, else dbi (under Valgrind,\n"
     "any x86-64 program) when Valgrind is installed,\n"
     "else step; says which); dbi cannot attach (-p)",
     "clock"},
    {"events", OPT_EVENTS, required_argument, "LOAD,STORE",
     "pmu: libpfm4 event names (default: the PMU's table)", "events"},
    {"watch", OPT_WATCH, required_argument, "auto|mprotect|debugreg", "the watchpoint engine",
     "watch"},
    {"period", OPT_PERIOD, required_argument, "N|auto", "mean sampling period in references",
     "period"},
    {"seed", OPT_SEED, required_argument, "S", "seed of the sampling generator (default 1)",
     "seed"},
    {"line-size", OPT_LINE_SIZE, required_argument, "B", "cache line size in bytes (default 64)",
     "line_bytes"},
    {"window", OPT_WINDOW, required_argument, "N|auto", "window length in references", "window"},
    {"max-skid", OPT_MAX_SKID, required_argument, "N",
     "simulated (step) or real (pmu) overflow skid", "max_skid"},
    {"pmu-sample", OPT_PMU_SAMPLE, required_argument, "skid|precise|double_trap",
     "pmu: how a sample starts (default skid; precise:\nPEBS/IBS records, docs/pmu-clock.md)",
     "pmu_sample"},
    {"phase-guided", OPT_PHASE_GUIDED, no_argument, NULL,
     "inline, dbi: sample a phase seen for 2000\nsamples 16x less often (weights keep the "
     "model\nunbiased)",
     NULL},
    {"pid", 'p', required_argument, "PID", "attach to a running process instead", NULL},
    {"help", 'h', no_argument, NULL, NULL, NULL},
    {NULL, 0, 0, NULL, NULL, NULL},
};

static volatile sig_atomic_t stop_signal, stop_from_tty;

static void on_stop_signal(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	stop_signal = sig;
	/* A terminal's ^C (SI_KERNEL) went to the target's process group too. */
	stop_from_tty = si && si->si_code == SI_KERNEL;
}

static int fail(const char *what)
{
	return demo_fail_lomas_exit(EXIT_LOMAS, "record", LOMAS_EINVAL, "%s", what);
}

/*
 * The program execvp would run for cmd, found by the library's search (the
 * one lomas_session_start makes): 0 with its path in found (len bytes), else
 * 127 (not found) or 126 (there, but not executable, or a directory) with a
 * message.
 */
static int check_command(const char *cmd, char *found, size_t len)
{
	lomas_status st = lomas_program_find(cmd, found, len);
	if (st == LOMAS_OK)
		return 0;
	return demo_fail_exit(st == LOMAS_EPERM ? EXIT_CANNOT_RUN : EXIT_NOT_FOUND, "record", "%s",
	                      lomas_error_message());
}

/*
 * What execvp (and so env, timeout, nice) does with the file at path: 0 run
 * it (an ELF or a #! script: the kernel decides), 1 run it with /bin/sh (a
 * file without either, which execvp hands to the shell on ENOEXEC), or 126
 * with a message for a binary that is neither: as bash does, a file with a
 * NUL byte before the end of its first line (within 80 bytes) is not given
 * to the shell but refused ("Exec format error").
 */
static int exec_kind(const char *path)
{
	unsigned char b[80];
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0; /* execute-only: the kernel decides */
	do
		n = read(fd, b, sizeof b);
	while (n < 0 && errno == EINTR);
	close(fd);
	if (n >= 4 && !memcmp(b, "\177ELF", 4))
		return 0;
	if (n >= 2 && b[0] == '#' && b[1] == '!')
		return 0;
	for (ssize_t i = 0; i < n && b[i] != '\n'; i++)
		if (!b[i]) {
			return demo_fail_exit(EXIT_CANNOT_RUN, "record",
			                      "%s: cannot execute binary file: %s", path,
			                      strerror(ENOEXEC));
		}
	return 1;
}

/*
 * Can we create the profile at out? Refused before the target runs: a
 * directory, a missing or read-only directory (the save writes a temporary
 * file next to out and renames it, so that is what is tried here). 0 or
 * 125 with one line.
 */
static int check_output(const char *out)
{
	char dir[PATH_MAX], probe[PATH_MAX + 32];
	struct stat st;
	const char *slash = strrchr(out, '/');
	int fd;
	if (!*out)
		return demo_fail_exit(EXIT_LOMAS, "record", "-o: empty path");
	if (stat(out, &st) == 0 && S_ISDIR(st.st_mode))
		return demo_fail_exit(EXIT_LOMAS, "record", "cannot write %s: %s", out,
		                      strerror(EISDIR));
	if (!slash)
		snprintf(dir, sizeof dir, ".");
	else if (slash == out)
		snprintf(dir, sizeof dir, "/");
	else
		snprintf(dir, sizeof dir, "%.*s", (int)(slash - out), out);
	snprintf(probe, sizeof probe, "%s/.lomas-probe-XXXXXX", dir);
	fd = mkostemp(probe, O_CLOEXEC);
	if (fd < 0)
		return demo_fail_exit(EXIT_LOMAS, "record", "cannot write %s: %s", out,
		                      strerror(errno));
	close(fd);
	unlink(probe);
	return 0;
}

/* Does PTRACE_SEIZE work here (on a child of ours)? */
static bool ptrace_works(void)
{
	int st;
	bool ok;
	pid_t pid = fork();
	if (pid == 0) {
		pause();
		_exit(0);
	}
	if (pid < 0)
		return false;
	ok = ptrace(PTRACE_SEIZE, pid, NULL, NULL) == 0;
	kill(pid, SIGKILL);
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	return ok;
}

/* Was the target left stopped (a job-control stop) when we let it go? */
static bool left_stopped(lomas_session *s)
{
	lomas_profile *p;
	const char *pid = NULL;
	char path[64], buf[512];
	bool stopped = false;
	FILE *f;
	if (lomas_session_profile(s, &p))
		return false;
	snprintf(path, sizeof path, "/proc/%s/stat",
	         lomas_profile_meta_get(p, "pid", &pid) == LOMAS_OK && pid ? pid : "0");
	/* Let go of in a group-stop, it goes back to it (T) within microseconds. */
	for (int i = 0; i < 20 && !stopped && (f = fopen(path, "re")); i++) {
		size_t n = fread(buf, 1, sizeof buf - 1, f);
		buf[n] = 0;
		fclose(f);
		const char *rp = strrchr(buf, ')');
		stopped = rp && rp[1] == ' ' && rp[2] == 'T';
		if (!stopped)
			usleep(5000);
	}
	lomas_profile_free(p);
	return stopped;
}

/* One progress line on stderr when it is a terminal. */
static void progress(lomas_session *s)
{
	lomas_stats st = LOMAS_STATS_INIT;
	if (lomas_session_stats(s, &st) == LOMAS_OK)
		fprintf(stderr, "\r[lomas] %.1fs  %llu refs  %llu samples  %llu faults   ",
		        (double)st.elapsed_ns / 1e9, (unsigned long long)st.refs,
		        (unsigned long long)st.samples, (unsigned long long)st.faults);
}

static int save_profile(lomas_session *s, const char *out, int argc, char **argv)
{
	lomas_profile *p;
	lomas_profile_info info = LOMAS_PROFILE_INFO_INIT;
	char cmdline[4096] = "";
	size_t used = 0;
	if (lomas_session_profile(s, &p))
		return fail("collecting the profile");
	for (int i = 0; i < argc && used + 2 < sizeof cmdline; i++) {
		int n =
		    snprintf(cmdline + used, sizeof cmdline - used, "%s%s", i ? " " : "", argv[i]);
		if (n < 0)
			break;
		used += (size_t)n;
	}
	if (argc > 0)
		lomas_profile_meta_set(p, "command", cmdline);
	if (lomas_profile_save(p, out)) {
		lomas_profile_free(p);
		return fail(out);
	}
	if (lomas_profile_info_get(p, &info) == LOMAS_OK)
		fprintf(stderr,
		        "lomas-demo: record: %llu samples (%llu reused, %llu dangling, %llu "
		        "censored) over %llu references written to %s\n",
		        (unsigned long long)info.samples, (unsigned long long)info.reused,
		        (unsigned long long)info.dangling, (unsigned long long)info.censored,
		        (unsigned long long)info.refs, out);
	lomas_profile_free(p);
	return 0;
}

int cmd_record(int argc, char **argv)
{
	const char *out = "lomas.lomas";
	char program[PATH_MAX], *shargv[4096];
	long pid = 0;
	lomas_config *cfg;
	lomas_session *s;
	struct sigaction sa, old_int, old_term;
	int c, rc, running = 1, wait_status = 0, tty = isatty(2);
	lomas_status st;
	bool auto_clock = false;

	/* -h anywhere before the command (after "--" it is the command's). */
	for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
		if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0)
			return demo_help("record");
	if (lomas_config_new(&cfg))
		return fail("config");
	optind = 1;
	while ((c = demo_getopt(argc, argv, record_opts, true)) != -1) {
		const struct demo_opt *o = demo_opt_find(record_opts, c);
		if (o && o->key_name) {
			if (lomas_config_set(cfg, o->key_name, optarg)) {
				rc = demo_fail_exit(EXIT_LOMAS, "record", "%s",
				                    lomas_error_message());
				lomas_config_free(cfg);
				return rc;
			}
			continue;
		}
		switch (c) {
		case 'o': out = optarg; break;
		case OPT_PHASE_GUIDED: lomas_config_set(cfg, "phase_guided", "yes"); break;
		case 'p': {
			char *end;
			pid = strtol(optarg, &end, 10);
			if (*end || pid <= 0 || pid > INT_MAX) {
				lomas_config_free(cfg);
				return demo_fail_exit(EXIT_LOMAS, "record", "-p: '%s' is not a pid",
				                      optarg);
			}
			break;
		}
		default: /* one line, like the other subcommands' */
			lomas_config_free(cfg);
			return demo_bad_option_exit(EXIT_LOMAS, "record", argv, c);
		}
	}
	argc -= optind;
	argv += optind;
	if ((pid != 0) == (argc > 0)) {
		lomas_config_free(cfg);
		return demo_fail_exit(EXIT_LOMAS, "record",
		                      "give either a command after '--' or -p PID");
	}
	if (argc > 0 && (rc = check_command(argv[0], program, sizeof program))) {
		lomas_config_free(cfg);
		return rc;
	}
	if (argc > 0 && (rc = exec_kind(program))) {
		if (rc != 1 || (size_t)argc + 2 > sizeof shargv / sizeof *shargv) {
			lomas_config_free(cfg);
			return EXIT_CANNOT_RUN;
		}
		/* As execvp on ENOEXEC: /bin/sh PROGRAM ARGS... */
		shargv[0] = "/bin/sh";
		shargv[1] = program;
		for (int i = 1; i <= argc; i++)
			shargv[i + 1] = argv[i];
		argv = shargv;
		argc++;
	}
	/* Nothing runs before we know the profile can be written. */
	if ((rc = check_output(out))) {
		lomas_config_free(cfg);
		return rc;
	}

	{
		char clock[16] = "";
		auto_clock = lomas_config_get(cfg, "clock", clock, sizeof clock) == LOMAS_OK &&
		             !strcmp(clock, "auto");
	}
	if (pid)
		st = lomas_session_attach(cfg, (int)pid, &s);
	else
		st = lomas_session_start(cfg, argv, &s);
	lomas_config_free(cfg);
	if (st) {
		if (st == LOMAS_ENOENT && argc > 0)
			return demo_fail_exit(EXIT_NOT_FOUND, "record", "%s",
			                      lomas_error_message());
		/* The program could not be executed (not ptrace): like env, 126. */
		if (st == LOMAS_EPERM && argc > 0) {
			char msg[1024];
			snprintf(msg, sizeof msg, "%s", lomas_error_message());
			if (ptrace_works())
				return demo_fail_exit(EXIT_CANNOT_RUN, "record", "%s", msg);
		}
		return fail(pid ? "attach" : "start");
	}

	/* clock=auto: say which it chose (docs/architecture.md). */
	if (auto_clock && lomas_session_clock(s))
		fprintf(stderr, "lomas-demo: record: --clock auto: using the %s clock\n",
		        lomas_session_clock(s));
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = on_stop_signal;
	sa.sa_flags = SA_SIGINFO;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, &old_int);
	sigaction(SIGTERM, &sa, &old_term);
	/*
	 * The session blocks while the target is quiet (a group-stop, a long
	 * system call); our signals end each poll within 100 ms.
	 */
	for (unsigned k = 0; running && !stop_signal; k++) {
		if ((st = lomas_session_poll(s, 100, &running)))
			break;
		if (tty && running && k % 5 == 0)
			progress(s);
	}
	/* The inline clock: the target writes its profile as the signal ends it;
	 * wait for that (a second signal detaches). */
	if (!st && running && stop_signal &&
	    lomas_session_interrupt(s, stop_signal,
	                            stop_from_tty ? LOMAS_INTERRUPT_DELIVERED : 0) == LOMAS_OK) {
		fprintf(
		    stderr,
		    "lomas-demo: record: signal %d: waiting for the target to end and write its "
		    "profile (another signal leaves it running)\n",
		    (int)stop_signal);
		stop_signal = 0;
		while (running && !stop_signal && !(st = lomas_session_poll(s, 200, &running)))
			;
	}
	if (tty)
		fputc('\n', stderr);
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGTERM, &old_term, NULL);

	if (st) {
		demo_fail_exit(EXIT_LOMAS, "record", "%s", lomas_error_message());
		lomas_session_stop(s);
		save_profile(s, out, argc, argv);
		lomas_session_free(s);
		return EXIT_LOMAS;
	}
	if (running) { /* SIGINT/SIGTERM: detach, keep what we have */
		if (lomas_session_stop(s))
			demo_fail_exit(EXIT_LOMAS, "record", "detach: %s", lomas_error_message());
		else
			fprintf(stderr,
			        "lomas-demo: record: detached on signal %d; the target %s\n",
			        (int)stop_signal,
			        left_stopped(s) ? "stays stopped, as it was" : "runs on");
		rc = save_profile(s, out, argc, argv);
		lomas_session_free(s);
		return rc ? rc : 128 + (int)stop_signal;
	}
	lomas_session_wait(s, &wait_status);
	rc = save_profile(s, out, argc, argv);
	lomas_session_free(s);
	if (rc)
		return rc;
	if (WIFEXITED(wait_status))
		return WEXITSTATUS(wait_status);
	if (WIFSIGNALED(wait_status))
		return 128 + WTERMSIG(wait_status);
	return 0;
}

/*
 * lomas-demo internals: the subcommands and the helpers they share.
 *
 * Exit statuses (docs/cli.md), one set for every command: 0 on success,
 * EXIT_USAGE on usage or input errors (one line on stderr: "lomas-demo:
 * <cmd>: <message>"), EXIT_LOMAS when lomas itself cannot do what was asked
 * (record without a live clock). record, which otherwise exits with its
 * target's status, also uses EXIT_LOMAS for a wrong command line and, like
 * env, EXIT_CANNOT_RUN and EXIT_NOT_FOUND for the command.
 */
#ifndef LOMAS_DEMO_H
#define LOMAS_DEMO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "lomas/lomas.h"

#define EXIT_USAGE 2
#define EXIT_LOMAS 125
#define EXIT_CANNOT_RUN 126
#define EXIT_NOT_FOUND 127

/*
 * One option of a command, declared once: getopt_long's table and the
 * command's help are made from the same rows (demo_getopt, demo_help).
 */
struct demo_opt {
	const char *name;     /* the long name, without "--" */
	int key;              /* getopt's value: its short letter (-o), or a value >= 256 */
	int has_arg;          /* no_argument or required_argument */
	const char *arg;      /* the argument as the help names it ("OUT", "N|auto"), or NULL */
	const char *help;     /* one line per '\n' (wrapped by hand); NULL: not listed */
	const char *key_name; /* the lomas_config key its value sets, or NULL */
};
#define DEMO_OPT_LONG 256 /* the first key of an option without a short letter */

/*
 * One subcommand: name, one-line brief, details, usage line, entry point,
 * and its options (opts, ended by a row without name; the help lists them
 * after summary, their text from column col) or NULL (summary lists them).
 */
struct demo_cmd {
	const char *name;
	const char *brief; /* for the list of commands */
	const char *summary;
	const char *usage;
	int (*run)(int argc, char **argv);
	const struct demo_opt *opts;
	int col;
};

extern const struct demo_cmd demo_cmds[];

/*
 * The one failure helper: print "lomas-demo: <cmd>: <message>" on stderr and
 * return the exit status given (demo_fail_exit) or EXIT_USAGE (demo_fail).
 */
int demo_fail_exit(int status, const char *cmd, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int demo_fail(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The same with ": <lomas_error_message()>" (or the status name) appended. */
int demo_fail_lomas_exit(int status, const char *cmd, lomas_status st, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
int demo_fail_lomas(const char *cmd, lomas_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Does the library's last message begin with "path:" (it names the file)? */
bool demo_names_path(const char *path);
/*
 * Untrusted text (a path, a profile's metadata) made safe for a terminal
 * into buf (cap bytes): control characters, C1 and bidirectional controls
 * and bytes that are not UTF-8 become \n, \r, \t, \xHH or \uHHHH. Returns buf.
 * demo_fail and demo_fail_lomas escape their whole message this way.
 */
const char *demo_escape(const char *s, char *buf, size_t cap);
/* The length of the UTF-8 sequence at s (len bytes left, len >= 1) and its
 * code point in *cp, or 0 if it is malformed (overlong, a surrogate, past
 * U+10FFFF, cut short). demo_escape and the SVG writer read text with it. */
size_t demo_utf8_decode(const unsigned char *s, size_t len, uint32_t *cp);
/* Report a getopt error (unknown option, missing argument) for cmd; EXIT_USAGE. */
int demo_bad_option(const char *cmd, char **argv, int optopt_char);
/* The same, returning status. */
int demo_bad_option_exit(int status, const char *cmd, char **argv, int optopt_char);

/*
 * getopt_long over an option table (quiet: errors come back as '?' or ':'
 * for demo_bad_option). in_order: stop at the first operand (record's
 * command). Set optind = 1 before the first call, as for getopt_long.
 */
int demo_getopt(int argc, char **argv, const struct demo_opt *opts, bool in_order);
/* The row of opts whose key is key, or NULL. */
const struct demo_opt *demo_opt_find(const struct demo_opt *opts, int key);

/* Print the usage of cmd on stdout (help) and return 0. */
int demo_help(const char *cmd);

/*
 * Flush stdout and report a write error (EPIPE stays quiet). Returns 0 if all
 * output was written, EXIT_USAGE otherwise.
 */
int demo_finish_stdout(const char *cmd);
/* Whether standard output is a pipe whose reader went away. */
bool demo_stdout_gone(void);

/* Parse a byte count: plain digits or with K/KiB, M/MiB, G/GiB (binary). */
bool demo_parse_bytes(const char *s, uint64_t *out);
/* Parse a comma-separated list of byte counts into a new array. */
bool demo_parse_size_list(const char *s, uint64_t **sizes, size_t *n);
/* Format bytes as "32K", "1M", "1.5M", ... into buf. */
void demo_format_bytes(uint64_t bytes, char *buf, size_t len);

/* Load a profile, reporting failure for cmd; returns NULL on failure. */
lomas_profile *demo_load(const char *cmd, const char *path);

/*
 * The sizes to model for profiles with the given line size: the user's list
 * (checked: positive multiples of line_bytes) or the default graph sizes.
 * Returns 0 or an exit status after reporting.
 */
int demo_sizes(const char *cmd, const char *list, uint32_t line_bytes, uint64_t **sizes, size_t *n);

/*
 * 0 if every one of the n miss ratios is a finite number, else report
 * it for cmd and return EXIT_USAGE (the library promises this; a NaN must
 * never reach a CSV, a JSON document or a graph as if it were a result).
 */
int demo_check_ratios(const char *cmd, const char *path, const double *ratios, size_t n);

/* ----------------------------------------------------- this machine (machine.c) */

#define MAX_CACHES 16

struct cache_level {
	char name[8]; /* "L1d", "L2", ... */
	uint64_t bytes;
	unsigned ways; /* ways_of_associativity from sysfs; 0 when unknown */
};

/*
 * This machine's data and unified caches from sysfs (cpu0), smallest first,
 * distinct sizes only. Returns how many were found; 0 quietly where sysfs
 * has none.
 */
size_t machine_caches(struct cache_level *out, size_t cap);
/* The L1 data cache's size, or 32 KiB when sysfs has none; *source says which. */
uint64_t machine_l1d_bytes(const char **source);

/* ------------------------------------- per-instruction attribution (hot_common.c) */

enum demo_hot_by { DEMO_BY_PC, DEMO_BY_LINE, DEMO_BY_FUNCTION };

/* One row of hot: a pc, or the pcs of one source line or function. */
struct demo_hot_row {
	uint64_t pc;          /* the pc (by line or function: the one with most misses) */
	const char *function; /* NULL when unknown; strings live as long as the list */
	const char *file;
	uint32_t line; /* 0 when unknown, and by function */
	const char *module;
	uint64_t module_offset;
	lomas_sym_status sym;
	double misses, refs, miss_ratio, share, ratio_fallback;
	size_t pcs;   /* pcs in the row */
	size_t first; /* the list index of its first (largest) pc */
	int delinquent;
};

/*
 * The misses of profile p (read from path) at cache_bytes attributed to
 * its pcs and symbolized (separate debug files under debug_dir, NULL for
 * /usr/lib/debug); notes on stderr for what could not be symbolized unless
 * quiet. Returns 0 or an exit status after reporting.
 */
int demo_hot_make(const char *cmd, const char *path, const lomas_profile *p, lomas_policy policy,
                  uint64_t cache_bytes, unsigned flags, const char *debug_dir, bool quiet,
                  lomas_hot_list **out);
/* The list as rows by pc, source line or function, most misses first (a new array). */
int demo_hot_rows(const lomas_hot_list *l, enum demo_hot_by by, struct demo_hot_row **rows,
                  size_t *n);
/* "file:line", or "module+0xOFFSET" without line information, or ""; escaped.
 * shorten: paths under the current directory relative to it. */
void demo_hot_location(const struct demo_hot_row *r, bool shorten, char *buf, size_t cap);
/* The row's function, escaped ("" when unknown). */
void demo_hot_function(const struct demo_hot_row *r, char *buf, size_t cap);
bool demo_parse_by(const char *s, enum demo_hot_by *by);
bool demo_parse_policy(const char *s, lomas_policy *policy);
/* A decimal count (digits only). */
bool demo_parse_count(const char *s, uint64_t *out);

/*
 * report's instructions section (report_hot.c): the delinquent instructions
 * at the first two of the n caches (or 32K without any), with source lines.
 */
int report_delinquent(const char *path, const lomas_profile *p, const struct cache_level *caches,
                      size_t ncaches, uint32_t line, unsigned flags);

extern const struct demo_opt analyze_opts[], record_opts[], phases_opts[], info_opts[];
extern const struct demo_opt curve_opts[], report_opts[], export_opts[], compare_opts[], hot_opts[],
    annotate_opts[], plot_opts[], bounds_opts[];

int cmd_analyze(int argc, char **argv);
int cmd_curve(int argc, char **argv);
int cmd_compare(int argc, char **argv);
/* compare --csv: both profiles' curves as CSV (cmd_curve.c). */
int compare_csv(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_record(int argc, char **argv);
int cmd_hot(int argc, char **argv);
int cmd_annotate(int argc, char **argv);
int cmd_plot(int argc, char **argv);
int cmd_bounds(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_phases(int argc, char **argv);
/* report: the phase timeline strip and the phases' shares (report_phases.c). */
int report_phases(const char *path, const lomas_profile *p);
/*
 * Each window's phase (lomas_profile_phases; 0 arguments for the defaults)
 * into a new *window_phase[*nwindows], *nphases phases (0 included); 0 or
 * the failure reported for cmd (cmd_phases.c).
 */
int demo_phases_of(const char *cmd, const lomas_profile *p, uint32_t buckets, double threshold,
                   unsigned transition, uint32_t **window_phase, size_t *nwindows, size_t *nphases);
/* The profile of phase `phase` (default phase detection), or NULL with the failure reported. */
lomas_profile *demo_phase_profile(const char *cmd, const lomas_profile *p, uint32_t phase);

#endif /* LOMAS_DEMO_H */

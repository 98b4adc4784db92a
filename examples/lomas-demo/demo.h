/*
 * lomas-demo internals: the subcommands and the helpers they share.
 *
 * Exit statuses (DESIGN.md section 8): 0 on success, 2 on usage or input
 * errors (one line on stderr: "lomas-demo: <cmd>: <message>"), 125 when lomas
 * itself cannot do what was asked (record without a live clock).
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

/* One subcommand: name, one-line brief, details, usage line, entry point. */
struct demo_cmd {
	const char *name;
	const char *brief; /* for the list of commands */
	const char *summary;
	const char *usage;
	int (*run)(int argc, char **argv);
};

extern const struct demo_cmd demo_cmds[];

/* Print "lomas-demo: <cmd>: <message>" on stderr and return EXIT_USAGE. */
int demo_fail(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The same with ": <lomas_error_message()>" (or the status name) appended. */
int demo_fail_lomas(const char *cmd, lomas_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/*
 * Untrusted text (a path, a profile's metadata) made safe for a terminal
 * into buf (cap bytes): control characters, C1 and bidirectional controls
 * and bytes that are not UTF-8 become \n, \r, \t, \xHH or \uHHHH. Returns buf.
 * demo_fail and demo_fail_lomas escape their whole message this way.
 */
const char *demo_escape(const char *s, char *buf, size_t cap);
/* Report a getopt error (unknown option, missing argument) for cmd. */
int demo_bad_option(const char *cmd, char **argv, int optopt_char);

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

int cmd_analyze(int argc, char **argv);
int cmd_curve(int argc, char **argv);
int cmd_compare(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_record(int argc, char **argv);

#endif /* LOMAS_DEMO_H */

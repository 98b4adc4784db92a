/*
 * lib/dbi internal interface (host side): where the dbi clock's Valgrind
 * tool is, and the reader of the file it hands over (dump.h). The tool
 * itself (tool_*.c) is a separate static program; see tool.h.
 */
#ifndef LOMAS_DBI_H
#define LOMAS_DBI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/core.h"

/* What the hand-over file says about its run, beside the profile. */
typedef struct dbi_dump_info {
	int ended; /* DUMP_ENDED_* */
	bool traced;
	uint64_t pid;
	uint64_t lost;
	char valgrind_version[32];
	char tool_version[32];
} dbi_dump_info;

/*
 * Build the profile from a hand-over file image of len bytes (untrusted: any
 * malformed byte gives LOMAS_EFORMAT naming its offset, never a crash). name
 * is used in messages. info may be NULL.
 */
lomas_status dbi_dump_read(const void *data, size_t len, const char *name, lomas_profile **out,
                           dbi_dump_info *info);

/*
 * The tool's path for this library (its build tree's while the library runs
 * from the build tree, else the installed one; LOMAS_DBI_TOOL overrides), and
 * Valgrind's launcher. False with a message when the clock cannot run here:
 * the tool was not built, or Valgrind (its core's files) is not installed.
 */
bool dbi_find(char *tool, size_t tool_len, const char **launcher);

/*
 * Can Valgrind's amd64 tool run path? An x86-64 ELF file or a script ("#!");
 * anything else the kernel would refuse (ENOEXEC: LOMAS_EPERM, "Exec format
 * error"), where Valgrind would hand it to /bin/sh instead.
 */
lomas_status dbi_check_program(const char *path);
/*
 * What Valgrind said in its log (the lines after its "==PID== " prefixes,
 * joined with "; ") into buf of cap bytes; empty when it said nothing.
 */
void dbi_valgrind_said(const char *log, char *buf, size_t cap);
/*
 * Did Valgrind give up reading a file's debug info ("Possibly corrupted
 * debuginfo file")? Then true, with the file it named in file (cap bytes;
 * empty when its log named none).
 */
bool dbi_valgrind_debuginfo_failed(const char *log, char *file, size_t cap);

#endif /* LOMAS_DBI_H */

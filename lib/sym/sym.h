/*
 * lib/sym internal interface: program counters to function, file:line and
 * the inlined-at chain, with libdw (elfutils), from the memory maps a
 * profile recorded. Only reporting uses it (docs/architecture.md): the model
 * never sees a symbol, and libdw stays out of everything else.
 */
#ifndef LOMAS_SYM_H
#define LOMAS_SYM_H

#include "../core/core.h"

/* One call site of the inlined-at chain. */
typedef struct sym_frame {
	const char *function; /* the function that holds the call site */
	const char *file;
	uint32_t line, column;
} sym_frame;

typedef struct sym_result {
	lomas_sym_status status;
	const char *detail;     /* why, when status is not LOMAS_SYM_OK ("" otherwise) */
	const char *module;     /* the mapped file, NULL outside any file */
	uint64_t module_offset; /* the pc as an address of that file (link-time) */
	const char *function;   /* innermost function (an inlined one if inlined) */
	const char *file;       /* NULL without line information */
	uint32_t line, column;
	const sym_frame *frames; /* where the innermost function was inlined, outward */
	size_t nframes;
} sym_result;

typedef struct sym_ctx sym_ctx;

/*
 * A symbolizer for the maps of p (which must outlive it). debug_path: the
 * directories to look for separate debug files in, ':'-separated (each
 * searched as DIR/.build-id/xx/rest.debug and DIR/<the binary's
 * directory>/<debuglink>); NULL means "/usr/lib/debug". The files are
 * opened here: a file that is missing, not ELF, or whose build id differs
 * from the one the run recorded is remembered and reported by sym_lookup.
 */
lomas_status sym_open(const lomas_profile *p, const char *debug_path, sym_ctx **out);
/*
 * Symbolize pc. adjust is subtracted before the lookup (1 for return
 * addresses, which lie just after the instruction that matters). The
 * result's strings and frames are valid until the next sym_lookup or
 * sym_close. Never fails: what is unknown has a status and a detail.
 */
void sym_lookup(sym_ctx *s, uint64_t pc, uint64_t adjust, sym_result *out);
void sym_close(sym_ctx *s);

/* Whether the profile records any maps at all (a lackey trace may not). */
bool sym_profile_has_maps(const lomas_profile *p);

#endif

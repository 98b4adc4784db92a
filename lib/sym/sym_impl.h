/* lib/sym's own internals, shared by its files (not by other modules). */
#ifndef LOMAS_SYM_IMPL_H
#define LOMAS_SYM_IMPL_H

#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>

#include "sym.h"

/* One address range of a compilation unit, in run addresses. */
typedef struct sym_cu {
	uint64_t lo, hi;
	Dwarf_Die die;   /* the unit's DIE */
	Dwarf_Addr bias; /* run address - DWARF address */
} sym_cu;

/* One mapped file of the profile. */
typedef struct sym_file {
	char *path;              /* as the maps recorded it */
	bool opened;             /* file_open ran (at the first pc in it) */
	lomas_sym_status status; /* LOMAS_SYM_OK once reported to libdwfl */
	char *detail;            /* why not, for people */
	uint64_t bias;           /* load bias: run address - file address */
	Dwfl_Module *mod;
	/* Its units' ranges by lo, built at the first lookup: libdwfl finds a
	 * unit through .debug_aranges, which clang does not emit by default. */
	sym_cu *cus;
	size_t ncus;
	bool cus_built;
} sym_file;

/* One recorded mapping, sorted by start. */
typedef struct sym_range {
	uint64_t start, end;
	size_t file;      /* index into files, SIZE_MAX when not a file ([vdso], anonymous) */
	const char *name; /* the map's path (lives as long as the profile) */
} sym_range;

struct sym_ctx {
	const lomas_profile *p; /* whose maps these are */
	Dwfl *dwfl;
	Dwfl_Callbacks cb;
	char *debug_path; /* ':'-separated directories of separate debug files */
	sym_file *files;
	size_t nfiles;
	sym_range *ranges;
	size_t nranges;
	bool has_maps;
	sym_frame *frames; /* the last lookup's inlined-at chain */
	size_t frames_cap;
	char **paths; /* file names the last lookup made absolute (sym_describe.c) */
	size_t npaths, paths_cap;
	char detail[1024];
};

/*
 * libdwfl's find_debuginfo callback (sym_debug.c): a separate debug file by
 * build id under each debug directory, else by .gnu_debuglink next to the
 * binary, in its .debug/ or under each debug directory; checked by build id
 * (or the link's CRC when the binary has no build id). Never asks a
 * debuginfod server.
 */
int sym_find_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
                       const char *file_name, const char *debuglink_file, GElf_Word debuglink_crc,
                       char **debuginfo_file_name);

/* Function, file:line and inlined-at chain of addr in file f into out (sym_describe.c). */
void sym_describe(sym_ctx *s, sym_file *f, uint64_t addr, sym_result *out);
/* Free what sym_describe cached in f. */
void sym_file_forget(sym_file *f);
/* Free the file names of the last lookup (at the next one, and at close). */
void sym_paths_clear(sym_ctx *s);

#endif

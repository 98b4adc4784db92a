/*
 * Where the dbi clock's Valgrind tool is. The library knows two places: its
 * build tree's (lib/dbi/lomas-amd64-linux) and the installed one
 * (libexecdir/lomas). A library loaded from the installed libdir uses the
 * installed tool; one loaded from anywhere else (the build tree, or linked
 * statically into a test) uses the build tree's when it exists, so an older
 * installed copy never stands in for the one just built. LOMAS_DBI_TOOL
 * names another.
 */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dbi.h"
#include "dbi/dbi_config.h"

/* Is the code of this function in a file under the installed libdir? */
static bool loaded_from_install(void)
{
	Dl_info di;
	char dir[PATH_MAX], real_lib[PATH_MAX];
	const char *slash;
	if (!dladdr((void *)(uintptr_t)&loaded_from_install, &di) || !di.dli_fname)
		return false;
	slash = strrchr(di.dli_fname, '/');
	if (!slash || (size_t)(slash - di.dli_fname) >= sizeof dir)
		return false;
	memcpy(dir, di.dli_fname, (size_t)(slash - di.dli_fname));
	dir[slash - di.dli_fname] = '\0';
	if (!realpath(DBI_INSTALLED_LIBDIR, real_lib))
		return false;
	{
		char real_dir[PATH_MAX];
		if (!realpath(dir, real_dir))
			return false;
		return strcmp(real_dir, real_lib) == 0;
	}
}

bool dbi_find(char *tool, size_t tool_len, const char **launcher)
{
	const char *env = getenv("LOMAS_DBI_TOOL"), *pick = NULL;
	char core[PATH_MAX];
	*launcher = DBI_VALGRIND_LAUNCHER;
	if (env && *env) {
		pick = env;
	} else if (!DBI_TOOL_BUILD[0]) {
		error_set(LOMAS_ENOTSUP,
		          "the dbi clock's Valgrind tool was not built (no valgrind with its tool "
		          "headers and archives at build time)");
		return false;
	} else if (!loaded_from_install() && access(DBI_TOOL_BUILD, X_OK) == 0) {
		pick = DBI_TOOL_BUILD;
	} else {
		pick = DBI_TOOL_INSTALLED;
	}
	if (access(pick, X_OK) != 0) {
		error_set(LOMAS_ENOTSUP, "the dbi clock's Valgrind tool %s is missing", pick);
		return false;
	}
	/* The tool's Valgrind core loads its preload library from here. */
	snprintf(core, sizeof core, "%s/vgpreload_core-%s.so", DBI_VALGRIND_LIBEXEC,
	         DBI_VALGRIND_PLATFORM);
	if (!env && access(core, R_OK) != 0) {
		error_set(LOMAS_ENOTSUP, "Valgrind %s is not installed (%s is missing)",
		          DBI_VALGRIND_VERSION, core);
		return false;
	}
	if ((size_t)snprintf(tool, tool_len, "%s", pick) >= tool_len) {
		error_set(LOMAS_ERANGE, "the dbi tool's path is too long");
		return false;
	}
	return true;
}

/*
 * Finding a binary's separate debug file, as gdb and eu-addr2line do but
 * without ever asking a debuginfod server (symbolizing must not wait on the
 * network): by build id under each debug directory
 * (DIR/.build-id/xx/rest.debug, libdwfl's own search over the directories
 * in the callbacks' debuginfo_path), else by the .gnu_debuglink name next
 * to the binary, in its .debug/ subdirectory, or under DIR/<the binary's
 * directory>. A file found by name must carry the binary's build id, or
 * when the binary has none, the CRC the link records.
 */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <elfutils/libdwelf.h>

#include "sym_impl.h"

/* The CRC-32 of the whole file open at fd (as objcopy --add-gnu-debuglink computes it). */
static bool file_crc(int fd, uint32_t *crc)
{
	uint8_t buf[65536];
	off_t off = 0;
	*crc = 0;
	for (;;) {
		ssize_t n = pread(fd, buf, sizeof buf, off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return false;
		if (n == 0)
			return true;
		*crc = crc32_update(*crc, buf, (size_t)n);
		off += n;
	}
}

/* Whether the debug file at fd belongs to mod's binary. */
static bool matches(Dwfl_Module *mod, int fd, GElf_Word crc)
{
	const unsigned char *want;
	GElf_Addr vaddr;
	int want_len = dwfl_module_build_id(mod, &want, &vaddr);
	if (want_len > 0) {
		Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
		const void *have = NULL;
		int have_len = elf ? dwelf_elf_gnu_build_id(elf, &have) : -1;
		bool ok = have_len == want_len && memcmp(have, want, (size_t)want_len) == 0;
		if (elf)
			elf_end(elf);
		return ok;
	}
	uint32_t c;
	return file_crc(fd, &c) && c == crc;
}

/* Try path; on a match return its fd and hand *name a copy of path. */
static int try_path(Dwfl_Module *mod, const char *path, const char *self, GElf_Word crc,
                    char **name)
{
	int fd;
	if (strcmp(path, self) == 0)
		return -1; /* a link naming the binary itself */
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	if (!matches(mod, fd, crc) || !(*name = strdup(path))) {
		close(fd);
		return -1;
	}
	return fd;
}

int sym_find_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
                       const char *file_name, const char *debuglink_file, GElf_Word debuglink_crc,
                       char **debuginfo_file_name)
{
	sym_ctx *s = userdata ? *userdata : NULL;
	char dir[4096], path[8192];
	const char *slash;
	int fd = dwfl_build_id_find_debuginfo(mod, userdata, modname, base, file_name,
	                                      debuglink_file, debuglink_crc, debuginfo_file_name);
	if (fd >= 0)
		return fd;
	errno = 0;
	if (!debuglink_file || !*debuglink_file || !file_name || !(slash = strrchr(file_name, '/')))
		return -1;
	if ((size_t)(slash - file_name) >= sizeof dir)
		return -1;
	memcpy(dir, file_name, (size_t)(slash - file_name));
	dir[slash - file_name] = '\0';
	/* Next to the binary, then in its .debug/ (gdb's order). */
	snprintf(path, sizeof path, "%s/%s", dir, debuglink_file);
	if ((fd = try_path(mod, path, file_name, debuglink_crc, debuginfo_file_name)) >= 0)
		return fd;
	snprintf(path, sizeof path, "%s/.debug/%s", dir, debuglink_file);
	if ((fd = try_path(mod, path, file_name, debuglink_crc, debuginfo_file_name)) >= 0)
		return fd;
	/* Under each debug directory, at the binary's own directory. */
	for (const char *d = s ? s->debug_path : ""; d && *d;) {
		const char *end = strchr(d, ':');
		size_t len = end ? (size_t)(end - d) : strlen(d);
		if (len > 0 && d[0] == '/' && len < sizeof dir) {
			snprintf(path, sizeof path, "%.*s%s/%s", (int)len, d, dir, debuglink_file);
			if ((fd = try_path(mod, path, file_name, debuglink_crc,
			                   debuginfo_file_name)) >= 0)
				return fd;
		}
		d = end ? end + 1 : NULL;
	}
	errno = 0;
	return -1;
}

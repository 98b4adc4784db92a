/*
 * The dbi clock's edges with the program and with Valgrind, apart from the
 * session: whether Valgrind's amd64 tool can run a file, and what Valgrind
 * said in its log.
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dbi.h"

/*
 * Can Valgrind's amd64 tool load program_path? An x86-64 ELF file or a
 * script ("#!"); anything else the kernel would refuse (ENOEXEC), and
 * Valgrind would run it with /bin/sh instead.
 */
lomas_status dbi_check_program(const char *path)
{
	unsigned char head[sizeof(Elf64_Ehdr)];
	struct stat sb = {0};
	ssize_t n;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return error_set(errno == ENOENT ? LOMAS_ENOENT : LOMAS_EPERM,
		                 "cannot execute %s: %s", path, strerror(errno));
	if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
		close(fd);
		return error_set(LOMAS_EPERM, "cannot execute %s: %s", path,
		                 strerror(S_ISDIR(sb.st_mode) ? EISDIR : EACCES));
	}
	n = read(fd, head, sizeof head);
	close(fd);
	if (n >= 2 && head[0] == '#' && head[1] == '!')
		return LOMAS_OK;
	if (n < (ssize_t)sizeof head || memcmp(head, ELFMAG, SELFMAG) != 0)
		return error_set(LOMAS_EPERM, "cannot execute %s: %s", path, strerror(ENOEXEC));
	{
		Elf64_Ehdr eh;
		memcpy(&eh, head, sizeof eh);
		if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_machine != EM_X86_64)
			return error_set(
			    LOMAS_ENOTSUP,
			    "%s is not an x86-64 program: the dbi clock's Valgrind tool "
			    "runs x86-64 programs only",
			    path);
	}
	return LOMAS_OK;
}

/*
 * Valgrind's own messages, from its log: the lines after its "==PID== "
 * prefix, joined with "; ", at most cap bytes. Empty when it said nothing.
 */
void dbi_valgrind_said(const char *log, char *buf, size_t cap)
{
	char line[512];
	size_t used = 0;
	FILE *f = fopen(log, "r");
	buf[0] = '\0';
	if (!f)
		return;
	while (fgets(line, sizeof line, f) && used + 8 < cap) {
		char *s = line, *nl = strchr(line, '\n');
		if (nl)
			*nl = '\0';
		/* "==123== text", "--123-- text", "**123** text" */
		if ((s[0] == '=' || s[0] == '-' || s[0] == '*') && s[1] == s[0]) {
			char *end = strchr(s + 2, s[0]);
			if (end && end[1] == s[0])
				s = end + 2;
		}
		while (*s == ' ')
			s++;
		if (!*s)
			continue;
		used += (size_t)snprintf(buf + used, cap - used, "%s%s", used ? "; " : "", s);
	}
	if (used >= cap)
		buf[cap - 1] = '\0';
	fclose(f);
}

/*
 * Valgrind 3.19's DWARF reader gives up on the DWARF 5 forms clang writes
 * (DW_FORM_strx*, addrx, rnglistx: "### unhandled dwarf2 abbrev form code
 * 0x25"), fixed in Valgrind 3.20 (KDE bug 452758). It stops before the
 * program's main with:
 *   ==PID== Valgrind:   valid image size of N for image:
 *   ==PID== Valgrind:   "/path/of/the/file"
 *   ==PID== Valgrind: debuginfo reader: Possibly corrupted debuginfo file.
 */
bool dbi_valgrind_debuginfo_failed(const char *log, char *file, size_t cap)
{
	char line[PATH_MAX + 64];
	bool image_next = false, failed = false;
	FILE *f = fopen(log, "r");
	file[0] = '\0';
	if (!f)
		return false;
	while (fgets(line, sizeof line, f)) {
		char *q = strstr(line, "Valgrind:   \""), *end;
		if (image_next && q && (end = strrchr(q + 13, '"')) && end > q + 13)
			snprintf(file, cap, "%.*s", (int)(end - (q + 13)), q + 13);
		image_next = strstr(line, "for image:") != NULL;
		if (strstr(line, "Possibly corrupted debuginfo file"))
			failed = true;
	}
	fclose(f);
	if (!failed)
		file[0] = '\0';
	return failed;
}

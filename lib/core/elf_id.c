/*
 * What a profile records so that its pcs can be symbolized later: the
 * file-backed mappings of the program (/proc/PID/maps) and the GNU build id
 * of each mapped file, so that a binary rebuilt since the run is told apart
 * from the one that ran (lib/sym refuses to symbolize it). The build id is
 * read here by hand from the ELF program headers (no libelf: the inline
 * runtime carries this file into instrumented programs).
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core.h"

#define NOTE_READ_MAX 65536u /* bytes of one PT_NOTE segment we look at */
#define PHDR_MAX 256u        /* program headers we look at */

static bool pread_full(int fd, void *buf, size_t len, uint64_t off)
{
	uint8_t *b = buf;
	while (len) {
		ssize_t n = pread(fd, b, len, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return false;
		b += n;
		len -= (size_t)n;
		off += (uint64_t)n;
	}
	return true;
}

static size_t align4(size_t v)
{
	return (v + 3) & ~(size_t)3;
}

/* The NT_GNU_BUILD_ID note in the notes of len bytes at n, into id. */
static size_t find_build_id(const uint8_t *n, size_t len, uint8_t *id, size_t cap)
{
	size_t pos = 0;
	while (len - pos >= 12) {
		uint32_t namesz, descsz, type;
		memcpy(&namesz, n + pos, 4);
		memcpy(&descsz, n + pos + 4, 4);
		memcpy(&type, n + pos + 8, 4);
		pos += 12;
		if (namesz > len - pos || align4(namesz) > len - pos)
			return 0;
		size_t name_at = pos;
		pos += align4(namesz);
		if (descsz > len - pos)
			return 0;
		if (type == NT_GNU_BUILD_ID && namesz == 4 && memcmp(n + name_at, "GNU", 4) == 0 &&
		    descsz > 0) {
			size_t k = descsz < cap ? descsz : cap;
			memcpy(id, n + pos, k);
			return k;
		}
		if (align4(descsz) > len - pos)
			return 0;
		pos += align4(descsz);
	}
	return 0;
}

size_t elf_build_id_fd(int fd, uint8_t *id, size_t cap)
{
	Elf64_Ehdr eh;
	size_t found = 0;
	if (fd < 0 || !id || cap == 0 || !pread_full(fd, &eh, sizeof eh, 0))
		return 0;
	if (memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_ident[EI_DATA] != ELFDATA2LSB || eh.e_phentsize != sizeof(Elf64_Phdr) ||
	    eh.e_phnum == 0 || eh.e_phnum > PHDR_MAX)
		return 0;
	for (unsigned i = 0; i < eh.e_phnum && !found; i++) {
		Elf64_Phdr ph;
		uint8_t *notes;
		if (!pread_full(fd, &ph, sizeof ph, eh.e_phoff + (uint64_t)i * sizeof ph))
			return 0;
		if (ph.p_type != PT_NOTE || ph.p_filesz == 0 || ph.p_filesz > NOTE_READ_MAX)
			continue;
		if (!(notes = malloc(ph.p_filesz)))
			return 0;
		if (pread_full(fd, notes, ph.p_filesz, ph.p_offset))
			found = find_build_id(notes, ph.p_filesz, id, cap);
		free(notes);
	}
	return found;
}

bool elf_load_segments(int fd, unsigned *type, elf_segment *segs, size_t cap, size_t *n)
{
	Elf64_Ehdr eh;
	*n = 0;
	if (fd < 0 || !pread_full(fd, &eh, sizeof eh, 0))
		return false;
	if (memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_ident[EI_DATA] != ELFDATA2LSB || eh.e_phentsize != sizeof(Elf64_Phdr) ||
	    eh.e_phnum > PHDR_MAX)
		return false;
	*type = eh.e_type;
	for (unsigned i = 0; i < eh.e_phnum; i++) {
		Elf64_Phdr ph;
		if (!pread_full(fd, &ph, sizeof ph, eh.e_phoff + (uint64_t)i * sizeof ph))
			return false;
		if (ph.p_type != PT_LOAD)
			continue;
		if (*n < cap)
			segs[*n] = (elf_segment){ph.p_vaddr, ph.p_memsz, ph.p_offset, ph.p_filesz,
			                         ph.p_flags};
		(*n)++;
	}
	return true;
}

size_t elf_build_id_path(const char *path, uint8_t *id, size_t cap)
{
	int fd;
	size_t n;
	struct stat sb;
	if (!path || path[0] != '/')
		return 0;
	/* Only regular files: a device the program mapped is not ours to open. */
	if (stat(path, &sb) != 0 || !S_ISREG(sb.st_mode))
		return 0;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	n = elf_build_id_fd(fd, id, cap);
	close(fd);
	return n;
}

/* Read the build id of each of the n maps at maps that has none. */
static void fill_build_ids(prof_map *maps, size_t nmaps)
{
	const char *last = NULL;
	uint8_t id[PROF_BUILD_ID_MAX];
	size_t n = 0;
	for (size_t i = 0; i < nmaps; i++) {
		prof_map *m = &maps[i];
		/* Only files with code: their ids tell a rebuilt binary (lib/sym). */
		if (m->build_id_len || !m->path || m->path[0] != '/' || !(m->prot & PROT_EXEC))
			continue;
		/* Maps of one file come one after another: read each file once. */
		if (!last || strcmp(last, m->path) != 0) {
			n = elf_build_id_path(m->path, id, sizeof id);
			last = m->path;
		}
		memcpy(m->build_id, id, n);
		m->build_id_len = (uint8_t)n;
	}
}

void profile_fill_build_ids(struct lomas_profile *p)
{
	fill_build_ids(p->maps.items, p->maps.n);
}

/* Parse one /proc/PID/maps line into m (path pointing into line). */
static bool parse_maps_line(char *line, prof_map *m)
{
	char perms[8] = "";
	int pos = 0;
	if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %7s %" SCNx64 " %*s %*s%n", &m->start, &m->end,
	           perms, &m->offset, &pos) < 4 ||
	    m->end <= m->start || pos <= 0)
		return false;
	m->prot = (perms[0] == 'r' ? PROT_READ : 0) | (perms[1] == 'w' ? PROT_WRITE : 0) |
	          (perms[2] == 'x' ? PROT_EXEC : 0);
	m->path = line + pos;
	while (*m->path == ' ')
		m->path++;
	return true;
}

lomas_status profile_add_proc_maps(struct lomas_profile *p, const char *maps_path)
{
	int fd = open(maps_path, O_RDONLY | O_CLOEXEC);
	size_t len = 0, cap = 0;
	char *text = NULL;
	lomas_status st = LOMAS_OK;
	size_t first = p->maps.n;
	if (fd < 0)
		return error_set(LOMAS_EIO, "cannot open %s: %s", maps_path, strerror(errno));
	/* /proc files report no size: read until the end, growing the buffer. */
	for (;;) {
		ssize_t n;
		if (cap - len < 4096) {
			char *t = realloc(text, cap ? cap * 2 : 16384);
			if (!t) {
				st = error_set(LOMAS_ENOMEM, "out of memory reading %s", maps_path);
				break;
			}
			text = t;
			cap = cap ? cap * 2 : 16384;
		}
		n = read(fd, text + len, cap - len - 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			st = error_set(LOMAS_EIO, "cannot read %s: %s", maps_path, strerror(errno));
			break;
		}
		if (n == 0)
			break;
		len += (size_t)n;
	}
	close(fd);
	if (st) {
		free(text);
		return st;
	}
	text[len] = '\0';
	for (char *line = text, *nl; line && *line; line = nl ? nl + 1 : NULL) {
		prof_map m = {0};
		nl = strchr(line, '\n');
		if (nl)
			*nl = '\0';
		/* Only file-backed mappings name code to symbolize; the rest are anonymous
		 * memory, the heap, stacks and the kernel's [vdso]. */
		if (!parse_maps_line(line, &m) || m.path[0] != '/')
			continue;
		if ((st = profile_add_map(p, &m)))
			break;
	}
	free(text);
	if (!st) /* only the maps added here */
		fill_build_ids(p->maps.items + first, p->maps.n - first);
	return st;
}

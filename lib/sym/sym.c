/*
 * pc -> function, file:line, inlined-at chain with libdwfl (elfutils), from
 * the memory maps a profile recorded. Each mapped file is reported to libdwfl
 * at the load bias the maps imply, once its build id has been checked
 * against the one the run recorded (a rebuilt binary would otherwise be
 * symbolized with the wrong lines).
 */
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sym.h"
#include "sym_impl.h"

#define DELETED_SUFFIX " (deleted)"

bool sym_profile_has_maps(const lomas_profile *p)
{
	return p && p->maps.n > 0;
}

static int range_cmp(const void *a, const void *b)
{
	const sym_range *x = a, *y = b;
	return (x->start > y->start) - (x->start < y->start);
}

static void hex_id(char *buf, size_t cap, const uint8_t *id, size_t n)
{
	size_t k = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < n && k + 3 <= cap; i++, k += 2)
		snprintf(buf + k, cap - k, "%02x", id[i]);
}

/* Record why a file cannot be used; status is kept for sym_lookup. */
static void file_fail(sym_file *f, lomas_sym_status status, const char *fmt, const char *a,
                      const char *b)
{
	char msg[512];
	snprintf(msg, sizeof msg, fmt, a, b);
	f->status = status;
	free(f->detail);
	f->detail = strdup(msg);
}

/*
 * The load bias of file f from map m: the PT_LOAD segment holding the map's
 * file offset was placed so that file offset o sits at bias + p_vaddr +
 * (o - p_offset), the kernel mapping whole pages (p_vaddr and p_offset agree
 * modulo the page size). false when no segment holds the offset.
 */
static bool load_bias(Elf *elf, const prof_map *m, bool want_exec, uint64_t *bias)
{
	size_t n;
	if (elf_getphdrnum(elf, &n) != 0)
		return false;
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;
		uint64_t page_off;
		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		if (want_exec && !(ph.p_flags & PF_X))
			continue;
		page_off = ph.p_offset & ~(uint64_t)4095;
		if (m->offset < page_off ||
		    m->offset >= ph.p_offset + (ph.p_filesz ? ph.p_filesz : 1))
			continue;
		*bias = m->start - m->offset - (ph.p_vaddr - ph.p_offset);
		return true;
	}
	return false;
}

/* The recorded map of file path to take the bias from: executable first. */
static const prof_map *bias_map(const lomas_profile *p, const char *path)
{
	const prof_map *any = NULL;
	for (size_t i = 0; i < p->maps.n; i++) {
		const prof_map *m = &p->maps.items[i];
		if (strcmp(m->path, path) != 0)
			continue;
		if (m->prot & PROT_EXEC)
			return m;
		if (!any)
			any = m;
	}
	return any;
}

/* The build id the run recorded for path, if any. */
static const prof_map *recorded_id(const lomas_profile *p, const char *path)
{
	for (size_t i = 0; i < p->maps.n; i++)
		if (p->maps.items[i].build_id_len && strcmp(p->maps.items[i].path, path) == 0)
			return &p->maps.items[i];
	return NULL;
}

/* Open file f, check it against the run, report it to libdwfl. */
static void file_open(sym_ctx *s, const lomas_profile *p, sym_file *f)
{
	const prof_map *m = bias_map(p, f->path), *rec = recorded_id(p, f->path);
	size_t plen = strlen(f->path), slen = strlen(DELETED_SUFFIX);
	char *open_path = strdup(f->path);
	const void *id = NULL;
	int id_len, fd;
	GElf_Ehdr eh;
	Elf *elf;
	uint64_t bias = 0;
	struct stat sb;
	if (!open_path) {
		file_fail(f, LOMAS_SYM_NO_FILE, "out of memory%s%s", "", "");
		return;
	}
	/* The kernel's mark of a file unlinked while mapped: try the name it had. */
	if (plen > slen && strcmp(f->path + plen - slen, DELETED_SUFFIX) == 0)
		open_path[plen - slen] = '\0';
	/* Only regular files: a device the program mapped is not ours to open. */
	if (stat(open_path, &sb) == 0 && !S_ISREG(sb.st_mode)) {
		file_fail(f, LOMAS_SYM_NO_FILE, "%s is not a regular file%s", open_path, "");
		free(open_path);
		return;
	}
	fd = open(open_path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		file_fail(f, LOMAS_SYM_NO_FILE, "cannot open %s: %s", open_path, strerror(errno));
		free(open_path);
		return;
	}
	elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
	if (!elf || elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &eh)) {
		file_fail(f, LOMAS_SYM_NO_FILE, "%s is not an ELF file%s", open_path, "");
		goto fail;
	}
	id_len = dwelf_elf_gnu_build_id(elf, &id);
	if (rec && (id_len != rec->build_id_len || memcmp(id, rec->build_id, (size_t)id_len))) {
		char was[2 * PROF_BUILD_ID_MAX + 1], now[2 * PROF_BUILD_ID_MAX + 1];
		char msg[2 * sizeof now + 64];
		hex_id(was, sizeof was, rec->build_id, rec->build_id_len);
		hex_id(now, sizeof now, id, id_len > 0 ? (size_t)id_len : 0);
		snprintf(msg, sizeof msg, "build id %s, the run's %s", now[0] ? now : "none", was);
		file_fail(f, LOMAS_SYM_CHANGED, "%s changed since the run (%s)", open_path, msg);
		goto fail;
	}
	if (!m || !(load_bias(elf, m, (m->prot & PROT_EXEC) != 0, &bias) ||
	            load_bias(elf, m, false, &bias))) {
		file_fail(f, LOMAS_SYM_CHANGED,
		          "%s does not match the run's mapping of it (no segment at that "
		          "offset)%s",
		          open_path, "");
		goto fail;
	}
	/* A fixed-address executable is where it was linked, or it is not the one
	 * that ran (what a missing build id cannot tell otherwise). */
	if (eh.e_type == ET_EXEC && bias != 0) {
		file_fail(f, LOMAS_SYM_CHANGED,
		          "%s does not match the run's mapping of it (a fixed-address "
		          "executable that moved)%s",
		          open_path, "");
		goto fail;
	}
	elf_end(elf);
	elf = NULL;
	/* libdwfl owns fd from here (dwfl_end closes it). */
	f->mod = dwfl_report_elf(s->dwfl, open_path, open_path, fd, bias, true);
	if (!f->mod) {
		file_fail(f, LOMAS_SYM_NO_FILE, "%s: %s", open_path, dwfl_errmsg(-1));
		free(open_path);
		return;
	}
	{
		/* The debug-file search (sym_debug.c) reads the context from here. */
		void **ud = NULL;
		dwfl_module_info(f->mod, &ud, NULL, NULL, NULL, NULL, NULL, NULL);
		if (ud)
			*ud = s;
	}
	f->bias = bias;
	f->status = LOMAS_SYM_OK;
	free(open_path);
	return;
fail:
	if (elf)
		elf_end(elf);
	close(fd);
	free(open_path);
}

static void ctx_free(sym_ctx *s)
{
	if (!s)
		return;
	if (s->dwfl)
		dwfl_end(s->dwfl);
	for (size_t i = 0; i < s->nfiles; i++) {
		free(s->files[i].path);
		free(s->files[i].detail);
		sym_file_forget(&s->files[i]);
	}
	free(s->files);
	free(s->ranges);
	free(s->frames);
	sym_paths_clear(s);
	free(s->paths);
	free(s->debug_path);
	free(s);
}

void sym_close(sym_ctx *s)
{
	ctx_free(s);
}

/* The index of file path in s->files, added if new; SIZE_MAX when out of memory. */
static size_t file_index(sym_ctx *s, const char *path, size_t *cap)
{
	for (size_t i = s->nfiles; i-- > 0;)
		if (strcmp(s->files[i].path, path) == 0)
			return i;
	if (s->nfiles == *cap) {
		size_t nc = *cap ? *cap * 2 : 16;
		sym_file *nf = realloc(s->files, nc * sizeof *nf);
		if (!nf)
			return SIZE_MAX;
		s->files = nf;
		*cap = nc;
	}
	memset(&s->files[s->nfiles], 0, sizeof s->files[s->nfiles]);
	if (!(s->files[s->nfiles].path = strdup(path)))
		return SIZE_MAX;
	s->files[s->nfiles].status = LOMAS_SYM_NO_FILE;
	return s->nfiles++;
}

lomas_status sym_open(const lomas_profile *p, const char *debug_path, sym_ctx **out)
{
	sym_ctx *s = calloc(1, sizeof *s);
	size_t fcap = 0;
	*out = NULL;
	if (!s)
		return error_set(LOMAS_ENOMEM, "out of memory opening the symbolizer");
	s->debug_path = strdup(debug_path && *debug_path ? debug_path : "/usr/lib/debug");
	s->ranges = malloc((p->maps.n ? p->maps.n : 1) * sizeof *s->ranges);
	if (!s->debug_path || !s->ranges)
		goto nomem;
	elf_version(EV_CURRENT);
	s->cb.find_elf = dwfl_build_id_find_elf;
	s->cb.find_debuginfo = sym_find_debuginfo;
	s->cb.section_address = dwfl_offline_section_address;
	s->cb.debuginfo_path = &s->debug_path;
	if (!(s->dwfl = dwfl_begin(&s->cb))) {
		ctx_free(s);
		return error_set(LOMAS_ENOMEM, "libdwfl: %s", dwfl_errmsg(-1));
	}
	dwfl_report_begin(s->dwfl);
	for (size_t i = 0; i < p->maps.n; i++) {
		const prof_map *m = &p->maps.items[i];
		sym_range *r = &s->ranges[s->nranges];
		if (m->end <= m->start)
			continue;
		r->start = m->start;
		r->end = m->end;
		r->name = m->path;
		r->file = SIZE_MAX;
		if (m->path[0] == '/' && (r->file = file_index(s, m->path, &fcap)) == SIZE_MAX)
			goto nomem;
		s->nranges++;
	}
	qsort(s->ranges, s->nranges, sizeof *s->ranges, range_cmp);
	/* The files are opened when a pc first falls in one (sym_lookup): a
	 * profile maps many files (data, fonts, devices) that hold no pc. */
	dwfl_report_end(s->dwfl, NULL, NULL);
	s->has_maps = p->maps.n > 0;
	s->p = p;
	*out = s;
	return LOMAS_OK;
nomem:
	ctx_free(s);
	return error_set(LOMAS_ENOMEM, "out of memory opening the symbolizer");
}

/* The recorded mapping holding pc, or NULL. */
static const sym_range *range_of(const sym_ctx *s, uint64_t pc)
{
	size_t lo = 0, hi = s->nranges;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (s->ranges[mid].start <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == 0 || pc >= s->ranges[lo - 1].end)
		return NULL;
	return &s->ranges[lo - 1];
}

void sym_lookup(sym_ctx *s, uint64_t pc, uint64_t adjust, sym_result *out)
{
	const sym_range *r;
	sym_file *f;
	uint64_t addr;
	memset(out, 0, sizeof *out);
	out->detail = "";
	sym_paths_clear(s);
	if (pc == 0) {
		out->status = LOMAS_SYM_NONE;
		out->detail = "the clock recorded no pc";
		return;
	}
	if (!s->has_maps) {
		out->status = LOMAS_SYM_NO_MAPS;
		out->detail = "the profile records no memory maps";
		return;
	}
	if (!(r = range_of(s, pc))) {
		out->status = LOMAS_SYM_NO_MAP;
		out->detail = "no recorded mapping holds the pc";
		return;
	}
	if (r->file == SIZE_MAX) {
		out->status = LOMAS_SYM_NO_MAP;
		snprintf(s->detail, sizeof s->detail, "the pc is in %s, not in a file",
		         r->name[0] ? r->name : "anonymous memory");
		out->detail = s->detail;
		return;
	}
	f = &s->files[r->file];
	if (!f->opened) {
		/* Add it to the modules reported so far (they stay). */
		f->opened = true;
		dwfl_report_begin_add(s->dwfl);
		file_open(s, s->p, f);
		dwfl_report_end(s->dwfl, NULL, NULL);
	}
	out->module = f->path;
	if (f->status != LOMAS_SYM_OK) {
		out->status = f->status;
		out->detail = f->detail ? f->detail : "";
		return;
	}
	addr = pc >= adjust ? pc - adjust : pc;
	out->module_offset = addr - f->bias;
	sym_describe(s, f, addr, out);
	if (!out->function && !out->file) {
		out->status = LOMAS_SYM_NO_SYMBOL;
		snprintf(s->detail, sizeof s->detail, "no symbol or line of %s covers 0x%" PRIx64,
		         f->path, out->module_offset);
		out->detail = s->detail;
	}
}

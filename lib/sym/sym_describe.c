/*
 * One address of a reported module: its function, source line and the chain
 * of call sites it was inlined at, as eu-addr2line -f -i reads them:
 * dwarf_getscopes lists the DIEs containing the address innermost first;
 * the first inlined subroutine or subprogram is the function the
 * instruction belongs to, and each inlined subroutine's DW_AT_call_file /
 * DW_AT_call_line is where it was inlined, in the next function outward.
 */
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <stdlib.h>
#include <string.h>

#include "sym_impl.h"

/* A DIE's name: DW_AT_name (through abstract origins), else its linkage name. */
static const char *die_name(Dwarf_Die *die)
{
	Dwarf_Attribute a;
	const char *n = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_name, &a));
	if (!n)
		n = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_linkage_name, &a));
	return n;
}

static bool is_function(int tag)
{
	return tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine ||
	       tag == DW_TAG_entry_point;
}

static uint32_t die_udata(Dwarf_Die *die, unsigned name)
{
	Dwarf_Attribute a;
	Dwarf_Word v;
	if (dwarf_formudata(dwarf_attr(die, name, &a), &v) != 0 || v > UINT32_MAX)
		return 0;
	return (uint32_t)v;
}

void sym_paths_clear(sym_ctx *s)
{
	for (size_t i = 0; i < s->npaths; i++)
		free(s->paths[i]);
	s->npaths = 0;
}

/*
 * name as an absolute path: a relative one (as meson's "../src/x.c" or a
 * DWARF 5 entry of directory 0 comes out of libdw 0.188) joined to the
 * unit's DW_AT_comp_dir, then "." and "dir/.." taken out lexically so that
 * people read /src/x.c, not /build/../src/x.c. Kept until the next lookup;
 * name itself when it is absolute already, or on failure.
 */
static const char *absolute(sym_ctx *s, Dwarf_Die *cu, const char *name)
{
	Dwarf_Attribute a;
	const char *dir;
	char *p, *w, *r;
	size_t n;
	if (!name || name[0] == '/' || !cu)
		return name;
	dir = dwarf_formstring(dwarf_attr(cu, DW_AT_comp_dir, &a));
	if (!dir || dir[0] != '/')
		return name;
	n = strlen(dir) + strlen(name) + 2;
	if (s->npaths == s->paths_cap) {
		size_t nc = s->paths_cap ? 2 * s->paths_cap : 8;
		char **np = realloc(s->paths, nc * sizeof *np);
		if (!np)
			return name;
		s->paths = np;
		s->paths_cap = nc;
	}
	if (!(p = malloc(n)))
		return name;
	snprintf(p, n, "%s/%s", dir, name);
	/* Lexical normalization, component by component, in place. */
	for (r = w = p; *r;) {
		size_t len;
		while (*r == '/')
			r++;
		len = strcspn(r, "/");
		if (len == 0)
			break;
		if (len == 1 && r[0] == '.') {
			/* nothing */
		} else if (len == 2 && r[0] == '.' && r[1] == '.') {
			while (w > p && *--w != '/')
				;
		} else {
			*w++ = '/';
			memmove(w, r, len);
			w += len;
		}
		r += len;
	}
	if (w == p)
		*w++ = '/';
	*w = '\0';
	s->paths[s->npaths++] = p;
	return p;
}

static int cu_cmp(const void *a, const void *b)
{
	const sym_cu *x = a, *y = b;
	return (x->lo > y->lo) - (x->lo < y->lo);
}

void sym_file_forget(sym_file *f)
{
	free(f->cus);
	f->cus = NULL;
	f->ncus = 0;
	f->cus_built = false;
}

/* Every range of every unit of f's module (dwarf_ranges reads DW_AT_ranges and
 * low/high pc alike, DWARF 5's indexed forms included). */
static void build_cus(sym_file *f)
{
	Dwarf_Die *cu = NULL;
	Dwarf_Addr bias;
	size_t cap = 0;
	f->cus_built = true;
	while ((cu = dwfl_module_nextcu(f->mod, cu, &bias))) {
		Dwarf_Addr base, lo, hi;
		ptrdiff_t off = 0;
		while ((off = dwarf_ranges(cu, off, &base, &lo, &hi)) > 0) {
			if (hi <= lo)
				continue;
			if (f->ncus == cap) {
				size_t nc = cap ? cap * 2 : 64;
				sym_cu *n = realloc(f->cus, nc * sizeof *n);
				if (!n)
					return; /* what was found still serves */
				f->cus = n;
				cap = nc;
			}
			f->cus[f->ncus++] = (sym_cu){lo + bias, hi + bias, *cu, bias};
		}
	}
	qsort(f->cus, f->ncus, sizeof *f->cus, cu_cmp);
}

/* The unit holding addr: of the ranges starting at or below it, the nearest
 * that contains it (units' ranges rarely overlap). */
static const sym_cu *cu_of(sym_file *f, uint64_t addr)
{
	size_t lo = 0, hi;
	if (!f->cus_built)
		build_cus(f);
	hi = f->ncus;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (f->cus[mid].lo <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t k = lo, seen = 0; k-- > 0 && seen < 64; seen++)
		if (addr < f->cus[k].hi)
			return &f->cus[k];
	return NULL;
}

/*
 * The innermost function and the inlined-at chain from the DWARF scopes.
 * dwarf_getscopes continues past an inlined subroutine into the scopes of
 * its abstract definition, so (as eu-addr2line -i does) the chain of
 * callers is read with dwarf_getscopes_die from the innermost function's
 * own concrete DIE: each inlined subroutine, then the next function out.
 */
static void scopes(sym_ctx *s, const sym_cu *c, uint64_t addr, sym_result *out)
{
	Dwarf_Die cudie = c->die, *sc = NULL, *chain = NULL;
	Dwarf_Files *files = NULL;
	int n, first = -1;
	size_t nf = 0;
	if ((n = dwarf_getscopes(&cudie, addr - c->bias, &sc)) <= 0)
		return;
	for (int i = 0; i < n && first < 0; i++)
		if (is_function(dwarf_tag(&sc[i])))
			first = i;
	if (first < 0 || (n = dwarf_getscopes_die(&sc[first], &chain)) <= 0) {
		if (first >= 0)
			out->function = die_name(&sc[first]);
		free(sc);
		return;
	}
	free(sc);
	out->function = die_name(&chain[0]);
	if (dwarf_getsrcfiles(&cudie, &files, NULL) != 0)
		files = NULL;
	for (int i = 0; i < n; i++)
		nf += dwarf_tag(&chain[i]) == DW_TAG_inlined_subroutine;
	if (nf > s->frames_cap) {
		sym_frame *f = realloc(s->frames, nf * sizeof *f);
		if (!f) {
			free(chain);
			return; /* the chain is extra: the function and line still stand */
		}
		s->frames = f;
		s->frames_cap = nf;
	}
	nf = 0;
	for (int i = 0; i < n; i++) {
		sym_frame *f;
		Dwarf_Word cf;
		Dwarf_Attribute a;
		if (dwarf_tag(&chain[i]) != DW_TAG_inlined_subroutine)
			continue;
		f = &s->frames[nf++];
		memset(f, 0, sizeof *f);
		/* The caller: the next function outward (lexical blocks may sit between). */
		for (int j = i + 1; j < n; j++) {
			if (is_function(dwarf_tag(&chain[j]))) {
				f->function = die_name(&chain[j]);
				break;
			}
		}
		if (files && dwarf_formudata(dwarf_attr(&chain[i], DW_AT_call_file, &a), &cf) == 0)
			f->file = absolute(s, &cudie, dwarf_filesrc(files, cf, NULL, NULL));
		f->line = die_udata(&chain[i], DW_AT_call_line);
		f->column = die_udata(&chain[i], DW_AT_call_column);
	}
	out->frames = s->frames;
	out->nframes = nf;
	free(chain);
}

void sym_describe(sym_ctx *s, sym_file *f, uint64_t addr, sym_result *out)
{
	const sym_cu *c = cu_of(f, addr);
	Dwfl_Module *mod = f->mod;
	if (c)
		scopes(s, c, addr, out);
	if (!out->function) {
		/* No DWARF for it: the symbol table (a stripped binary keeps .dynsym). */
		GElf_Sym sym;
		GElf_Off off = 0;
		const char *n = dwfl_module_addrinfo(mod, addr, &off, &sym, NULL, NULL, NULL);
		/* Only a symbol that covers addr: the nearest one below may be anything. */
		if (n && sym.st_size > 0 && off < sym.st_size)
			out->function = n;
	}
	if (c) {
		Dwarf_Die cudie = c->die;
		Dwarf_Line *line = dwarf_getsrc_die(&cudie, addr - c->bias);
		int ln = 0, col = 0;
		const char *file = line ? dwarf_linesrc(line, NULL, NULL) : NULL;
		if (file && dwarf_lineno(line, &ln) == 0 && ln > 0) {
			out->file = absolute(s, &cudie, file);
			out->line = (uint32_t)ln;
			out->column = dwarf_linecol(line, &col) == 0 && col > 0 ? (uint32_t)col : 0;
		}
	}
	out->status = out->function || out->file ? LOMAS_SYM_OK : LOMAS_SYM_NO_SYMBOL;
}

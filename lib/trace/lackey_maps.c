/*
 * The memory map of a lackey trace, for symbolization. Lackey records no
 * maps, only pcs, so the map of the traced executable is rebuilt from what
 * the log names and how Valgrind loads a program, and kept only when the
 * sampled pcs agree with it; otherwise the profile says it has none rather
 * than guess.
 *
 * The executable: the first "Reading syms from PATH" line (valgrind -v;
 * an absolute path), else the program of the "Command:" line, resolved as
 * Valgrind resolves it (a name with a '/' against the current directory,
 * else through PATH). Its placement: a fixed-address executable (ET_EXEC)
 * at its link addresses; a position-independent one (ET_DYN) where
 * Valgrind's loader puts it on amd64 Linux, 0x108000 above its link
 * addresses (coregrind/m_ume/elf.c: "ebase = 0x108000" when the client
 * area has no base of its own; Valgrind 3.x). Shared libraries are mapped
 * where Valgrind's address-space manager chooses and are not recorded.
 *
 * The check: some sampled pc lies in an executable segment of the image so
 * placed, and none in its other segments (code never runs from data).
 */
#include <elf.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "trace.h"

#define VALGRIND_PIE_BASE 0x108000u
#define MAX_SEGMENTS 16u

/* The executable path to try, into out (cap bytes); false if none. */
static bool exe_path(const char *syms, const char *command, char *out, size_t cap)
{
	char prog[PATH_MAX];
	size_t n;
	if (syms && syms[0] == '/') {
		snprintf(out, cap, "%s", syms);
		return true;
	}
	if (!command || !command[0])
		return false;
	n = strcspn(command, " ");
	if (n == 0 || n >= sizeof prog)
		return false;
	memcpy(prog, command, n);
	prog[n] = '\0';
	if (strchr(prog, '/')) {
		snprintf(out, cap, "%s", prog);
		return true;
	}
	/* A bare name: the first executable of that name on PATH, as execvp finds it. */
	for (const char *d = getenv("PATH"); d && *d;) {
		const char *end = strchr(d, ':');
		size_t len = end ? (size_t)(end - d) : strlen(d);
		if (len > 0 && (size_t)snprintf(out, cap, "%.*s/%s", (int)len, d, prog) < cap &&
		    access(out, X_OK) == 0)
			return true;
		d = end ? end + 1 : NULL;
	}
	return false;
}

/* Where sampled pcs fall in the image placed at bias: code, data, or neither. */
static void count_pcs(const lomas_profile *p, const elf_segment *seg, size_t nseg, uint64_t bias,
                      uint64_t *in_code, uint64_t *in_data)
{
	*in_code = *in_data = 0;
	for (size_t i = 0; i < p->samples.n; i++) {
		const lomas_sample *s = &p->samples.items[i];
		uint64_t pcs[2] = {s->start_pc, s->state == LOMAS_SAMPLE_REUSED ? s->end_pc : 0};
		for (int k = 0; k < 2; k++) {
			for (size_t j = 0; j < nseg && pcs[k]; j++) {
				uint64_t lo = seg[j].vaddr + bias, hi = lo + seg[j].memsz;
				if (pcs[k] < lo || pcs[k] >= hi)
					continue;
				if (seg[j].flags & PF_X)
					(*in_code)++;
				else
					(*in_data)++;
				break;
			}
		}
	}
}

/* Add the segments of path, placed at bias, to p's maps. */
static lomas_status add_image(lomas_profile *p, const char *path, const elf_segment *seg,
                              size_t nseg, uint64_t bias, const uint8_t *id, size_t id_len)
{
	for (size_t j = 0; j < nseg; j++) {
		uint64_t lo = (seg[j].vaddr + bias) & ~(uint64_t)4095;
		uint64_t hi = (seg[j].vaddr + bias + seg[j].memsz + 4095) & ~(uint64_t)4095;
		prof_map m = {.start = lo,
		              .end = hi,
		              .offset = seg[j].offset & ~(uint64_t)4095,
		              .prot = (seg[j].flags & PF_R ? PROT_READ : 0) |
		                      (seg[j].flags & PF_W ? PROT_WRITE : 0) |
		                      (seg[j].flags & PF_X ? PROT_EXEC : 0),
		              .path = (char *)path,
		              .build_id_len = (uint8_t)id_len};
		lomas_status st;
		memcpy(m.build_id, id, id_len);
		if (hi <= lo)
			continue;
		if ((st = profile_add_map(p, &m)))
			return st;
	}
	return LOMAS_OK;
}

lomas_status lackey_record_maps(lomas_profile *p, const char *syms, const char *command)
{
	char path[PATH_MAX], real[PATH_MAX], why[PATH_MAX + 128];
	elf_segment seg[MAX_SEGMENTS];
	uint8_t id[PROF_BUILD_ID_MAX];
	size_t nseg = 0, id_len;
	unsigned type = 0;
	uint64_t bias, in_code, in_data;
	int fd;
	if (command && command[0] && profile_meta_setf(p, "command", "%s", command))
		return LOMAS_ENOMEM;
	if (!exe_path(syms, command, path, sizeof path))
		return profile_meta_setf(p, "maps", "none: the trace names no program");
	if (!realpath(path, real) || (fd = open(real, O_RDONLY | O_CLOEXEC)) < 0)
		return profile_meta_setf(p, "maps", "none: cannot open the traced program");
	if (!elf_load_segments(fd, &type, seg, MAX_SEGMENTS, &nseg) || nseg == 0 ||
	    nseg > MAX_SEGMENTS || (type != ET_EXEC && type != ET_DYN)) {
		close(fd);
		return profile_meta_setf(p, "maps", "none: the traced program is not ELF");
	}
	id_len = elf_build_id_fd(fd, id, sizeof id);
	close(fd);
	bias = type == ET_DYN ? VALGRIND_PIE_BASE : 0;
	count_pcs(p, seg, nseg, bias, &in_code, &in_data);
	if (in_code == 0 || in_data > 0) {
		snprintf(why, sizeof why, "none: pcs do not fit the program (%llu code, %llu data)",
		         (unsigned long long)in_code, (unsigned long long)in_data);
		return profile_meta_setf(p, "maps", "%s", why);
	}
	if (add_image(p, real, seg, nseg, bias, id, id_len))
		return LOMAS_ENOMEM;
	/* Short: report shows it in a line of 80 columns. */
	return profile_meta_setf(p, "maps", "program as Valgrind loads it (%s); no libraries",
	                         type == ET_DYN ? "PIE at +0x108000" : "fixed address");
}

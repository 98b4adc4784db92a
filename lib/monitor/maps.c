/* The shadow of the target's memory map and page protections (/proc/PID/maps). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "monitor.h"

void maps_free(maps_shadow *m)
{
	for (size_t i = 0; i < m->r.n; i++)
		free(m->r.items[i].path);
	free(m->r.items);
	m->r.items = NULL;
	m->r.n = m->r.cap = 0;
}

lomas_status maps_parse(maps_shadow *m, const char *text)
{
	maps_shadow fresh = {{0}};
	const char *line = text;
	lomas_status st;
	while (line && *line) {
		const char *nl = strchr(line, '\n');
		size_t len = nl ? (size_t)(nl - line) : strlen(line);
		char buf[4352];
		uint64_t s, e, off;
		char perms[8] = "";
		int pos = 0;
		if (len >= sizeof buf)
			len = sizeof buf - 1;
		memcpy(buf, line, len);
		buf[len] = 0;
		line = nl ? nl + 1 : NULL;
		if (!len)
			continue;
		if (sscanf(buf, "%" SCNx64 "-%" SCNx64 " %7s %" SCNx64 " %*s %*s%n", &s, &e, perms,
		           &off, &pos) < 4 ||
		    e <= s) {
			maps_free(&fresh);
			return error_set(LOMAS_EFORMAT, "bad /proc maps line: %s", buf);
		}
		const char *path = buf + pos;
		while (*path == ' ')
			path++;
		map_range r = {.start = s, .end = e, .offset = off};
		r.prot = (perms[0] == 'r' ? PROT_READ : 0) | (perms[1] == 'w' ? PROT_WRITE : 0) |
		         (perms[2] == 'x' ? PROT_EXEC : 0);
		r.special = !strcmp(path, "[vdso]") || !strcmp(path, "[vvar]") ||
		            !strcmp(path, "[vsyscall]") || !strncmp(path, "[vvar", 5);
		r.path = strdup(path);
		if (!r.path || (st = vec_reserve(&fresh.r, fresh.r.n + 1))) {
			free(r.path);
			maps_free(&fresh);
			return error_set(LOMAS_ENOMEM, "out of memory");
		}
		fresh.r.items[fresh.r.n++] = r;
	}
	maps_free(m);
	*m = fresh;
	return LOMAS_OK;
}

lomas_status maps_read(maps_shadow *m, pid_t pid)
{
	char path[64];
	FILE *f;
	char *text = NULL;
	size_t cap = 0, n = 0;
	lomas_status st;
	snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
	f = fopen(path, "re");
	if (!f)
		return error_set(errno == ENOENT ? LOMAS_ETARGET : LOMAS_EIO, "%s: %s", path,
		                 strerror(errno));
	for (;;) {
		if (n + 4096 + 1 > cap) {
			char *t = realloc(text, cap = cap ? cap * 2 : 16384);
			if (!t) {
				free(text);
				fclose(f);
				return error_set(LOMAS_ENOMEM, "out of memory");
			}
			text = t;
		}
		size_t r = fread(text + n, 1, cap - n - 1, f);
		if (!r)
			break;
		n += r;
	}
	fclose(f);
	text[n] = 0;
	st = maps_parse(m, text);
	free(text);
	return st;
}

const map_range *maps_find(const maps_shadow *m, uint64_t addr)
{
	size_t lo = 0, hi = m->r.n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const map_range *r = &m->r.items[mid];
		if (addr < r->start)
			hi = mid;
		else if (addr >= r->end)
			lo = mid + 1;
		else
			return r;
	}
	return NULL;
}

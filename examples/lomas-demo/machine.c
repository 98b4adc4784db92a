/* This machine's caches, from sysfs (for report, hot, plot and compare). */
#include <stdio.h>
#include <string.h>

#include "demo.h"

/* Read one small sysfs file into buf without the trailing newline. */
static bool read_line(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "r");
	bool ok;
	if (!f)
		return false;
	ok = fgets(buf, (int)len, f) != NULL;
	fclose(f);
	if (ok)
		buf[strcspn(buf, "\r\n")] = '\0';
	return ok;
}

size_t machine_caches(struct cache_level *out, size_t cap)
{
	size_t n = 0;
	for (int i = 0; i < 32 && n < cap; i++) {
		char path[128], level[16], type[32], size[32];
		uint64_t bytes;
		bool dup = false;
		int len =
		    snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/", i);
		if (len <= 0 || (size_t)len >= sizeof path - 8)
			break;
		strcpy(path + len, "level");
		if (!read_line(path, level, sizeof level))
			continue;
		strcpy(path + len, "type");
		if (!read_line(path, type, sizeof type) || strcmp(type, "Instruction") == 0)
			continue;
		strcpy(path + len, "size");
		if (!read_line(path, size, sizeof size) || !demo_parse_bytes(size, &bytes) ||
		    bytes == 0)
			continue;
		for (size_t k = 0; k < n; k++)
			dup |= out[k].bytes == bytes;
		if (dup)
			continue;
		snprintf(out[n].name, sizeof out[n].name, "L%.3s%s", level,
		         strcmp(type, "Data") == 0 ? "d" : "");
		out[n++].bytes = bytes;
	}
	/* Insertion sort by size: sysfs order is by index, usually but not surely by size. */
	for (size_t i = 1; i < n; i++)
		for (size_t k = i; k > 0 && out[k].bytes < out[k - 1].bytes; k--) {
			struct cache_level t = out[k];
			out[k] = out[k - 1];
			out[k - 1] = t;
		}
	return n;
}

uint64_t machine_l1d_bytes(const char **source)
{
	struct cache_level c[MAX_CACHES];
	size_t n = machine_caches(c, MAX_CACHES);
	for (size_t i = 0; i < n; i++) {
		if (strncmp(c[i].name, "L1", 2) == 0) {
			*source = "this machine's L1d (sysfs)";
			return c[i].bytes;
		}
	}
	*source = "32K (no cache sizes in sysfs here)";
	return 32 * 1024;
}

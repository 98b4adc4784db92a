/*
 * Fuzz target for the reader of the dbi tool's hand-over file
 * (lib/dbi/dump_read.c): arbitrary bytes either build a profile that passes
 * profile_validate and saves as a profile file, or give LOMAS_EFORMAT (or
 * LOMAS_ENOMEM); never a crash or an out-of-bounds read. The header's magic
 * and version are put right so mutations reach the thread, block, record and
 * mapping parsers.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dbi/dbi.h"
#include "dbi/dump.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void try_one(const uint8_t *data, size_t size)
{
	lomas_profile *p = NULL;
	dbi_dump_info info;
	lomas_status st = dbi_dump_read(data, size, "fuzz", &p, &info);
	if (st == LOMAS_OK) {
		void *img = NULL;
		size_t len = 0;
		if (profile_validate(p) != LOMAS_OK)
			abort();
		if (profile_save_buffer(p, &img, &len) == LOMAS_OK)
			free(img);
		lomas_profile_free(p);
	} else if (st != LOMAS_EFORMAT && st != LOMAS_ENOMEM && st != LOMAS_ERANGE) {
		abort();
	} else if (p) {
		abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *copy;
	try_one(data, size);
	if (size < sizeof(dump_header))
		return 0;
	/* Again with the header's magic and version right. */
	if (!(copy = malloc(size)))
		return 0;
	memcpy(copy, data, size);
	memcpy(copy, DUMP_MAGIC, 8);
	copy[offsetof(dump_header, version)] = (uint8_t)DUMP_VERSION;
	memset(copy + offsetof(dump_header, version) + 1, 0, 3);
	try_one(copy, size);
	free(copy);
	return 0;
}

/*
 * Fuzz target for the profile-file reader: decode arbitrary bytes; when they
 * load, re-encode, reload and re-encode again (the two encodings must match:
 * a loaded profile survives a round trip unchanged), model it (no ratio may
 * be NaN or infinite), and export as JSON and CSV so every field of the
 * loaded object is read. A refused file's message has no control character.
 *
 * Random mutations almost never keep the CRCs right, which would stop the
 * fuzzer at the CRC checks; so each input is also decoded a second time with
 * every CRC that the table lets us locate recomputed (fix_crcs), letting
 * mutations reach the section decoders.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get64(const uint8_t *p)
{
	return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

static void put32(uint8_t *p, uint32_t v)
{
	for (int i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* Recompute the section and table CRCs of a file image in place, where in bounds. */
static void fix_crcs(uint8_t *b, size_t len)
{
	uint32_t n;
	uint64_t toff;
	if (len < 32)
		return;
	n = get32(b + 16);
	toff = get64(b + 24);
	if (toff > len || (uint64_t)n * 32 > len - toff)
		return;
	for (uint32_t i = 0; i < n; i++) {
		uint8_t *e = b + toff + 32 * (uint64_t)i;
		uint64_t off = get64(e + 8), sl = get64(e + 16);
		if (off <= len && sl <= len - off)
			put32(e + 24, crc32_update(0, b + off, (size_t)sl));
	}
	put32(b + 20, crc32_update(0, b + toff, (size_t)n * 32));
}

/* Decode one image and, if it loads, exercise everything on the result. */
static void one(const uint8_t *data, size_t size)
{
	lomas_profile *p, *q;
	void *a, *b;
	size_t alen, blen;
	lomas_profile_info info = LOMAS_PROFILE_INFO_INIT;
	char *text = NULL;
	size_t tlen = 0;
	FILE *f;

	if (profile_load_buffer(data, size, "fuzz", &p) != LOMAS_OK) {
		/* Messages quote keys and names from the file: never a control character. */
		for (const unsigned char *c = (const unsigned char *)lomas_error_message(); *c; c++)
			if (*c < 0x20 || *c == 0x7f)
				abort();
		return;
	}
	/* No model call returns NaN or infinity for a profile that loads. */
	for (int policy = 0; policy < 2; policy++) {
		static const uint64_t sizes[] = {64, 4096, 65536, 1 << 20, 1ull << 34};
		double r[sizeof sizes / sizeof sizes[0]];
		for (unsigned cold = 0; cold < 2; cold++)
			if (lomas_model_curve(p, (lomas_policy)policy, sizes, 5, 0, cold, r) ==
			    LOMAS_OK)
				for (size_t i = 0; i < 5; i++)
					if (!isfinite(r[i]))
						abort();
	}
	if (profile_save_buffer(p, &a, &alen) == LOMAS_OK) {
		if (profile_load_buffer(a, alen, "re-encoded", &q) != LOMAS_OK)
			abort(); /* the encoder wrote what the decoder rejects */
		if (profile_save_buffer(q, &b, &blen) != LOMAS_OK || blen != alen ||
		    memcmp(a, b, alen) != 0)
			abort(); /* the round trip changed the profile */
		free(b);
		lomas_profile_free(q);
		free(a);
	}
	lomas_profile_info_get(p, &info);
	f = open_memstream(&text, &tlen);
	if (f) {
		lomas_profile_export(p, LOMAS_EXPORT_JSON, f);
		lomas_profile_export(p, LOMAS_EXPORT_CSV, f);
		fclose(f);
		free(text);
	}
	lomas_profile_free(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *copy;
	one(data, size);
	copy = malloc(size ? size : 1);
	if (!copy)
		return 0;
	memcpy(copy, data, size);
	fix_crcs(copy, size);
	one(copy, size);
	free(copy);
	return 0;
}

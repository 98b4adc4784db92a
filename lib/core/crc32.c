/* CRC-32 (reflected polynomial 0xEDB88320), table driven, same values as zlib. */
#include "core.h"

static uint32_t table[256];
static int table_ready;

static void table_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
		table[i] = c;
	}
	__atomic_store_n(&table_ready, 1, __ATOMIC_RELEASE);
}

uint32_t crc32_update(uint32_t crc, const void *data, size_t len)
{
	const unsigned char *p = data;
	/* Racing initialisations write identical values, so a plain flag suffices. */
	if (!__atomic_load_n(&table_ready, __ATOMIC_ACQUIRE))
		table_init();
	crc = ~crc;
	while (len--)
		crc = table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return ~crc;
}

/*
 * Groups of two references one byte apart whose blocks straddle the
 * filter's end: in a buffer aligned to 4 MiB, the byte before each 4 MiB
 * boundary (filter byte 0xffff) and the byte after (filter byte 0). The pass
 * plugin tests such a group's two blocks with one 16-bit load, which needs
 * the filter's byte 0 mirrored past its end. Each pass stores to the line
 * after each boundary (some stores are sampled), then reads each pair: the
 * pair's second byte reuses the line, and only the mirror lets the plugin
 * see that when the pair's run is not due for a sample (a run of two
 * references: rarely, at a period of 20; the loops stay rolled for that).
 *   wrap   (prints a checksum)
 */
#include <stdio.h>
#include <stdlib.h>

#define MIB (1024ul * 1024ul)
#define BOUNDARIES 15ul

int main(void)
{
	unsigned char *base = aligned_alloc(4 * MIB, (BOUNDARIES + 1) * 4 * MIB);
	unsigned long s = 0;
	if (!base)
		return 1;
	for (int pass = 0; pass < 400; pass++) {
#pragma clang loop unroll(disable)
		for (unsigned long k = 1; k <= BOUNDARIES; k++)
			base[k * 4 * MIB] = (unsigned char)(k + (unsigned long)pass);
#pragma clang loop unroll(disable)
		for (unsigned long k = 1; k <= BOUNDARIES; k++) {
			const volatile unsigned char *p = base + k * 4 * MIB - 1;
			unsigned char x = p[0], y = p[1];
			s += x * 3u + y;
		}
	}
	printf("wrap %lu\n", s);
	free(base);
	return 0;
}

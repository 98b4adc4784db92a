/*
 * Adjacent references at constant offsets in one basic block, for the pass
 * plugin's next-reference shortcut (REF_NEXT_KNOWN): an array of 12-byte
 * records, each updated field by field (x = r->a; r->b += x; r->c = r->b ^
 * x), so a run holds a load, the load and store of a read-modify-write and a
 * store, each at a small offset from the one before. With 12-byte records
 * some field pairs fall in two 64-byte lines (an offset within the line size
 * that is not the same line), which the runtime must tell apart.
 *   fields N PASSES   (prints a checksum)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

struct rec {
	int32_t a, b, c;
};

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 10000, passes = argc > 2 ? atol(argv[2]) : 4;
	struct rec *v = calloc((size_t)n, sizeof *v);
	uint32_t sum = 0;
	if (!v)
		return 1;
	for (long i = 0; i < n; i++)
		v[i].a = (int32_t)(i * 2654435761u);
	for (long p = 0; p < passes; p++) {
#pragma clang loop vectorize(disable) unroll(disable)
		for (long i = 0; i < n; i++) {
			struct rec *r = &v[i];
			int32_t x = r->a;
			r->b += x;
			r->c = r->b ^ x;
		}
	}
	for (long i = 0; i < n; i++)
		sum += (uint32_t)v[i].c;
	printf("fields %u\n", sum);
	free(v);
	return 0;
}

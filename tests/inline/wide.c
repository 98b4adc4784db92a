/*
 * 32- and 64-byte vector loads and stores (what -mavx2 or -march=native
 * builds make of vector code): each must count as one reference. The
 * vector types are IR-level; the code generator splits them where the CPU
 * is narrower, so this runs on any x86-64. argv[1] rounds: each makes
 * 1024 stores of 32 bytes and 512 loads of 64 bytes.
 */
#include <stdio.h>
#include <stdlib.h>

typedef float v8f __attribute__((vector_size(32)));
typedef double v8d __attribute__((vector_size(64)));

v8f a[1024]; /* not static: the loops must stay */
v8d b[512];

int main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 4;
	v8f s = {1, 2, 3, 4, 5, 6, 7, 8};
	v8d t = {0};
#pragma clang loop vectorize(disable) unroll(disable)
	for (int r = 0; r < rounds; r++) {
#pragma clang loop vectorize(disable) unroll(disable)
		for (int i = 0; i < 1024; i++)
			a[i] = s * (float)(i + r);
#pragma clang loop vectorize(disable) unroll(disable)
		for (int i = 0; i < 512; i++)
			t += b[i] + (double)i;
	}
	printf("wide %d %g %g\n", rounds, (double)t[3], (double)a[rounds & 1023][0]);
	return 0;
}

#include <stdio.h>
#include <stdlib.h>
/* Walk a 4 MiB buffer at strides of 64 B to 8 KiB (powers of two), 2048 lines 6 times each. */
int main(void)
{
	size_t n = 4u << 20;
	char *p = malloc(n);
	long s = 0;
	for (size_t i = 0; i < n; i++)
		p[i] = (char)i;
	for (size_t st = 64; st <= 8192; st *= 2) {
		size_t cnt = 2048; /* lines touched per pass */
		for (int rep = 0; rep < 6; rep++)
			for (size_t k = 0; k < cnt; k++)
				s += p[(k * st) % n];
	}
	printf("%ld\n", s);
	free(p);
	return 0;
}

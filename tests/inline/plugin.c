/*
 * A shared object built with the lomas-inline recipe's compile flags and
 * loaded with dlopen by a program (tests/inline/hostile.c, mode dlopen):
 * its references are the program's runtime's to count. 2 n x 10 of them.
 */
#include <stdlib.h>

long plugin_work(long n);

long plugin_work(long n)
{
	long *a = calloc((size_t)n, sizeof *a), s = 0;
	if (!a)
		return -1;
	for (int r = 0; r < 10; r++)
		for (long i = 0; i < n; i++)
			s += a[i] += i + r;
	free(a);
	return s;
}

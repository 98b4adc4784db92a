/*
 * Built by tests/inline/meson.build with the pass plugin to LLVM IR, for
 * check_contract.py: a loop of loads and stores (the fast path, the slow
 * path, a versioned loop's range test) so the IR names every symbol and
 * type the pass takes from lib/inline/contract.h.
 */
#include <stddef.h>

long probe_sum(long *a, size_t n);
void probe_scatter(long *a, const int *idx, size_t n);

long probe_sum(long *a, size_t n)
{
	long s = 0;
	for (size_t i = 0; i < n; i++) {
		s += a[i];
		a[i] = s;
	}
	return s;
}

void probe_scatter(long *a, const int *idx, size_t n)
{
	for (size_t i = 0; i < n; i++)
		a[idx[i]] += 1;
}

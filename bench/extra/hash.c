/* Open-addressing hash table: counted inserts of random keys, linear probing (args: slots ops). */
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
typedef struct {
	uint64_t key, val;
} slot;
static uint64_t h(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	return x;
}
int main(int argc, char **argv)
{
	size_t cap = argc > 1 ? atol(argv[1]) : 1 << 20, ops = argc > 2 ? atol(argv[2]) : 4000000;
	slot *t = calloc(cap, sizeof *t);
	uint64_t found = 0, r = 1;
	for (size_t i = 0; i < ops; i++) {
		r = r * 6364136223846793005ull + 1442695040888963407ull;
		uint64_t k = (r >> 33) % (cap / 2) + 1;
		size_t p = h(k) & (cap - 1);
		while (t[p].key && t[p].key != k)
			p = (p + 1) & (cap - 1);
		if (t[p].key == k) {
			t[p].val++;
			found++;
		} else {
			t[p].key = k;
			t[p].val = 1;
		}
	}
	printf("%llu\n", (unsigned long long)found);
	return 0;
}

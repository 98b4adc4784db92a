/* Pointer chase through a random cyclic permutation of n 64-byte nodes (default 4096). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

struct node {
	struct node *next;
	char pad[56];
};

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 4096;
	long steps = argc > 2 ? atol(argv[2]) : 200000;
	struct node *nodes, *p;
	long *perm;
	uint64_t x = 88172645463325252ull;
	if (n < 2 || n > (1L << 24) || steps < 1) {
		fprintf(stderr, "usage: chase [nodes (2..16M)] [steps]\n");
		return 2;
	}
	nodes = calloc((size_t)n, sizeof *nodes);
	perm = malloc(sizeof *perm * (size_t)n);
	if (!nodes || !perm)
		return 1;
	for (long i = 0; i < n; i++)
		perm[i] = i;
	for (long i = n - 1; i > 0; i--) { /* Fisher-Yates with xorshift64 */
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		long j = (long)(x % (uint64_t)(i + 1)), t = perm[i];
		perm[i] = perm[j], perm[j] = t;
	}
	for (long i = 0; i < n; i++)
		nodes[perm[i]].next = &nodes[perm[(i + 1) % n]];
	p = &nodes[perm[0]];
	for (long s = 0; s < steps; s++)
		p = p->next;
	printf("chase n=%ld steps=%ld end=%ld\n", n, steps, (long)(p - nodes));
	free(perm);
	free(nodes);
	return 0;
}

/* Unbalanced binary search tree: n random inserts (calloc nodes), then q lookups (args: n q). */
#include <stdio.h>
#include <stdlib.h>
typedef struct node {
	long key;
	struct node *l, *r;
} node;
static node *ins(node *t, long k)
{
	node **p = &t;
	while (*p)
		p = k < (*p)->key ? &(*p)->l : &(*p)->r;
	*p = calloc(1, sizeof(node));
	(*p)->key = k;
	return t;
}
static int find(node *t, long k)
{
	while (t) {
		if (t->key == k)
			return 1;
		t = k < t->key ? t->l : t->r;
	}
	return 0;
}
int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 500000, q = argc > 2 ? atol(argv[2]) : 2000000;
	node *t = NULL;
	unsigned long x = 88172645463325252ull;
	long hits = 0;
	for (long i = 0; i < n; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		t = ins(t, x % (4 * n));
	}
	for (long i = 0; i < q; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		hits += find(t, x % (4 * n));
	}
	printf("%ld\n", hits);
	return 0;
}

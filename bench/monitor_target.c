/* Target of bench_monitor: prints the address of its page, then touches it forever. */
#include <stdio.h>

static volatile long page[512] __attribute__((aligned(4096)));
static volatile long other[4096];

int main(void)
{
	printf("%p\n", (void *)page);
	fflush(stdout);
	for (unsigned long i = 0;; i++) {
		other[i % 4096]++;
		if ((i & 63) == 0)
			page[8]++;
	}
}

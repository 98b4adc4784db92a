/* Attach target: runs until killed, touching a buffer; prints a line when ready. */
#include <stdio.h>
#include <unistd.h>

static volatile long buf[8192];

int main(void)
{
	printf("ready\n");
	fflush(stdout);
	for (unsigned long i = 0;; i++) {
		buf[(i * 8) % 8192] += 1;
		if ((i & 0xfffff) == 0)
			usleep(1000);
	}
}

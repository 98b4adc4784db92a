/* Step-clock target: crashes with the signal named by argv[1] (segv | abort | fpe). */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
	const char *how = argc > 1 ? argv[1] : "segv";
	printf("about to crash\n");
	fflush(stdout);
	if (!strcmp(how, "abort"))
		abort();
	if (!strcmp(how, "kill"))
		raise(SIGTERM);
	*(volatile int *)(long)(argc * 8) = 1; /* SIGSEGV */
	return 0;
}

/* Step-clock target: fork, the child execs argv[1..]; the parent waits. */
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

static char page[4096] __attribute__((aligned(4096)));

int main(int argc, char **argv)
{
	int st = 0;
	pid_t p;
	for (int i = 0; i < 64; i++)
		page[i * 64] = (char)i; /* lines the step clock may watch */
	fflush(stdout);
	p = fork();
	if (p == 0) {
		page[128]++; /* the child touches watched lines: must not fault */
		if (argc > 1)
			execv(argv[1], argv + 1);
		_exit(page[128] == 3 ? 9 : 8);
	}
	waitpid(p, &st, 0);
	printf("child status %d %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1, page[128]);
	return 0;
}

/*
 * A program that makes Valgrind talk: a system call that does not exist
 * (Valgrind warns about it; the kernel says ENOSYS) and a large stack
 * switch. Under the dbi clock none of Valgrind's words may reach the
 * program's stderr; the program's own lines must.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(void)
{
	long r = syscall(987654);
	int e = errno;
	printf("syscall %ld %s\n", r, strerror(e));
	fprintf(stderr, "vgwarn: to stderr\n");
	return 3;
}

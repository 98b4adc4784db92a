/*
 * Proof of running: t_marker PATH [STATUS] creates PATH, prints "ran" and
 * exits with STATUS (default 0). A command lomas-demo record refuses must
 * not have run: the test looks for PATH.
 */
#include "tiny.h"

#include <asm/fcntl.h>

int main(int argc, char **argv)
{
	if (argc > 1) {
		long fd = sys4(__NR_openat, -100 /* AT_FDCWD */, argv[1],
		               O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0644);
		if (fd >= 0) {
			t_write((int)fd, "ran\n", 4);
			sys1(__NR_close, fd);
		}
	}
	t_puts("ran\n");
	t_flush();
	return (int)t_arg(argc, argv, 2, 0);
}

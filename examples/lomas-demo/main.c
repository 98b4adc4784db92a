/* STUB (helper: cli). lomas-demo, the command-line face of liblomas. */
#include <stdio.h>

#include "lomas/lomas.h"

int main(int argc, char **argv)
{
	(void)argc;
	(void)argv;
	fprintf(stderr, "lomas-demo %s: not implemented yet\n", lomas_version());
	return 2;
}

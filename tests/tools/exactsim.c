/* STUB (helper: model). Exact cache simulator over a lackey trace. */
#include <stdio.h>

int main(void)
{
	fprintf(stderr, "exactsim: not implemented\n");
	return 2;
}

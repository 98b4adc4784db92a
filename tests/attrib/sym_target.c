/*
 * A target for tests/attrib/test_sym.c: it copies its own /proc/self/maps to
 * the file named by argv[1] and prints the run-time addresses of markers
 * (global labels on a nop, put by inline assembly on the lines marked
 * MARK_*), then exits. The test symbolizes those addresses from the copied
 * maps after the program is gone: in a function of its own (plain), in an
 * inlined one (inner, inlined into outer at CALL_INNER) and, built with
 * -DWITH_LIB, in a shared library (sym_lib.c).
 */
#include <stdio.h>
#include <stdlib.h>

#define MARK(name) __asm__ volatile(".globl " #name "\n" #name ":\n\tnop" ::: "memory")

extern const char mark_plain[], mark_inlined[];
int plain(int x);
int outer(int x);
#ifdef WITH_LIB
int lib_work(int x);
const void *lib_marker(void);
#endif

__attribute__((noinline)) int plain(int x)
{
	MARK(mark_plain); /* MARK_PLAIN */
	return x * 3 + 1;
}

static inline __attribute__((always_inline)) int inner(int x)
{
	MARK(mark_inlined); /* MARK_INLINED */
	return x ^ 5;
}

__attribute__((noinline)) int outer(int x)
{
	return inner(x) + 2; /* CALL_INNER */
}

int main(int argc, char **argv)
{
	FILE *in = fopen("/proc/self/maps", "r"), *out;
	char buf[4096];
	size_t n;
	int sum;
	if (argc < 2 || !in || !(out = fopen(argv[1], "w")))
		return 2;
	while ((n = fread(buf, 1, sizeof buf, in)) > 0)
		fwrite(buf, 1, n, out);
	fclose(in);
	if (fclose(out) != 0)
		return 2;
	sum = plain(argc) + outer(argc);
	printf("plain %p\ninlined %p\n", (const void *)mark_plain, (const void *)mark_inlined);
#ifdef WITH_LIB
	sum += lib_work(argc);
	printf("lib %p\n", lib_marker());
#endif
	return sum == 12345 ? 3 : 0;
}

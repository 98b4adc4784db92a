/* The shared library of tests/attrib/sym_target.c (built with -DWITH_LIB). */
#define MARK(name) __asm__ volatile(".globl " #name "\n" #name ":\n\tnop" ::: "memory")

int lib_work(int x);
const void *lib_marker(void);
extern const char mark_lib[];

__attribute__((noinline)) int lib_work(int x)
{
	MARK(mark_lib); /* MARK_LIB */
	return x * 7;
}

/* The marker's address, taken here: a reference from the executable could
 * get a copy relocation instead of the library's own address. */
const void *lib_marker(void)
{
	return mark_lib;
}

/* Word count over a NUL-terminated string of n random letters and spaces, reps times (args: n
 * reps). */
#include <stdio.h>
#include <stdlib.h>
static long count_words(const char *s)
{
	long w = 0;
	int in = 0;
	for (; *s; s++) {
		int sp = *s == ' ' || *s == '\n';
		if (!sp && !in)
			w++;
		in = !sp;
	}
	return w;
}
int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 16 << 20;
	int reps = argc > 2 ? atoi(argv[2]) : 8;
	char *s = malloc(n + 1);
	unsigned x = 3;
	for (long i = 0; i < n; i++) {
		x = x * 1103515245u + 12345u;
		s[i] = (x >> 16) % 6 == 0 ? ' ' : 'a' + (x >> 20) % 26;
	}
	s[n] = 0;
	long t = 0;
	for (int r = 0; r < reps; r++)
		t += count_words(s + r);
	printf("%ld\n", t);
	return 0;
}

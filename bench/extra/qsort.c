/* Recursive quicksort with insertion-sort leaves over n random ints (args: n). */
#include <stdio.h>
#include <stdlib.h>
static void sort(int *a, long lo, long hi)
{
	while (hi - lo > 16) {
		int p = a[lo + (hi - lo) / 2];
		long i = lo, j = hi - 1;
		while (i <= j) {
			while (a[i] < p)
				i++;
			while (a[j] > p)
				j--;
			if (i <= j) {
				int t = a[i];
				a[i] = a[j];
				a[j] = t;
				i++;
				j--;
			}
		}
		if (j - lo < hi - i) {
			sort(a, lo, j + 1);
			lo = i;
		} else {
			sort(a, i, hi);
			hi = j + 1;
		}
	}
	for (long i = lo + 1; i < hi; i++) {
		int v = a[i];
		long j = i;
		while (j > lo && a[j - 1] > v) {
			a[j] = a[j - 1];
			j--;
		}
		a[j] = v;
	}
}
int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 4000000;
	int *a = malloc(sizeof(int) * n);
	unsigned x = 7;
	for (long i = 0; i < n; i++) {
		x = x * 1103515245u + 12345u;
		a[i] = x >> 1;
	}
	sort(a, 0, n);
	for (long i = 1; i < n; i++)
		if (a[i - 1] > a[i]) {
			puts("bad");
			return 1;
		}
	printf("%d %d\n", a[0], a[n / 2]);
	return 0;
}

/* Column sums of 1024 x 512 doubles (64-line rows: a power of two), twice, after a row-major fill.
 */
#include <stdio.h>
#include <stdlib.h>
#define R 1024
#define C 512
static double a[R][C];
int main(void)
{
	double s = 0;
	for (int i = 0; i < R; i++)
		for (int j = 0; j < C; j++)
			a[i][j] = i ^ j;
	for (int rep = 0; rep < 2; rep++)
		for (int j = 0; j < C; j++)
			for (int i = 0; i < R; i++)
				s += a[i][j];
	printf("%g\n", s);
	return 0;
}

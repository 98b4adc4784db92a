/* A naive transposition of 512 x 512 floats, 3 times (b written down its columns, 32 lines apart).
 */
#include <stdio.h>
#define N 512
static float a[N][N], b[N][N];
int main(void)
{
	for (int i = 0; i < N; i++)
		for (int j = 0; j < N; j++)
			a[i][j] = i * 3 + j;
	for (int r = 0; r < 3; r++)
		for (int i = 0; i < N; i++)
			for (int j = 0; j < N; j++)
				b[j][i] = a[i][j] + r;
	printf("%g\n", b[7][9]);
	return 0;
}

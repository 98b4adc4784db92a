/* A 5-point stencil over 1024 x 1024 doubles (128-line rows: the neighbours in one set), 2 sweeps.
 */
#include <stdio.h>
#define N 1024
static double u[N][N], v[N][N];
int main(void)
{
	for (int i = 0; i < N; i++)
		for (int j = 0; j < N; j++)
			u[i][j] = (i * 7 + j) % 13;
	for (int t = 0; t < 2; t++) {
		for (int i = 1; i < N - 1; i++)
			for (int j = 1; j < N - 1; j++)
				v[i][j] = 0.2 * (u[i][j] + u[i - 1][j] + u[i + 1][j] + u[i][j - 1] +
				                 u[i][j + 1]);
		for (int i = 1; i < N - 1; i++)
			for (int j = 1; j < N - 1; j++)
				u[i][j] = v[i][j];
	}
	printf("%g\n", u[5][5]);
	return 0;
}

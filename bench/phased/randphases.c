/*
 * Phases of random lengths (a seeded generator picks each phase's kind and
 * length): random reads of a 24 KiB table, a cyclic sweep over 600 KiB, a
 * 40-byte stride over 3 MiB, and a pointer chase through 2 MiB. Each kind
 * keeps its own data, so its reuses span the phases in between.
 *   randphases [phases] [mean_refs] [seed]   (defaults 40, 600000, 1)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static uint64_t state;

static uint64_t next(void)
{
	state ^= state << 13;
	state ^= state >> 7;
	state ^= state << 17;
	return state;
}

int main(int argc, char **argv)
{
	long phases = argc > 1 ? atol(argv[1]) : 40;
	long mean = argc > 2 ? atol(argv[2]) : 600000;
	long seed = argc > 3 ? atol(argv[3]) : 1;
	enum { TABLE = 24 << 10, SWEEP = 600 << 10, STRIDE = 3 << 20, CHASE = 2 << 20 };
	uint32_t *table = malloc(TABLE), *sweep = malloc(SWEEP);
	unsigned char *strided = malloc(STRIDE);
	long nchase = CHASE / 64;
	struct node {
		long next;
		long pad[7];
	} *chase = malloc(sizeof *chase * (size_t)nchase);
	uint64_t sum = 0;
	long pos_sweep = 0, pos_stride = 0, at = 0;
	if (phases < 1 || mean < 1 || !table || !sweep || !strided || !chase) {
		fprintf(stderr, "usage: randphases [phases] [mean_refs] [seed]\n");
		return 2;
	}
	state = 0x9e3779b97f4a7c15ull ^ (uint64_t)seed;
	for (long i = 0; i < TABLE / 4; i++)
		table[i] = (uint32_t)i;
	for (long i = 0; i < SWEEP / 4; i++)
		sweep[i] = (uint32_t)i;
	for (long i = 0; i < STRIDE; i++)
		strided[i] = (unsigned char)i;
	/* One random cycle through all the nodes (Sattolo's shuffle). */
	for (long i = 0; i < nchase; i++)
		chase[i].next = i;
	for (long i = nchase - 1; i > 0; i--) {
		long j = (long)(next() % (uint64_t)i), t = chase[i].next;
		chase[i].next = chase[j].next;
		chase[j].next = t;
	}
	for (long p = 0; p < phases; p++) {
		/* Length: 0.2 to 1.8 times the mean. */
		long len = mean / 5 + (long)(next() % (uint64_t)(mean * 8 / 5 + 1));
		switch (next() % 4) {
		case 0:
			for (long k = 0; k < len; k++)
				sum += table[next() % (TABLE / 4)];
			break;
		case 1:
			for (long k = 0; k < len; k++, pos_sweep = (pos_sweep + 1) % (SWEEP / 4))
				sum += sweep[pos_sweep];
			break;
		case 2:
			for (long k = 0; k < len; k++, pos_stride = (pos_stride + 40) % STRIDE)
				sum += strided[pos_stride];
			break;
		default:
			for (long k = 0; k < len; k++)
				at = chase[at].next;
			sum += (uint64_t)at;
		}
	}
	printf("randphases phases=%ld mean=%ld seed=%ld sum=%llu\n", phases, mean, seed,
	       (unsigned long long)sum);
	free(table);
	free(sweep);
	free(strided);
	free(chase);
	return 0;
}

/*
 * Four threads, each chasing pointers round its own ring of nodes: thread i
 * (0..3) writes its ring (nodes stores) and then makes steps x (i + 1) loads,
 * so its reference count is known: nodes + steps x (i + 1) (+ a few).
 * Defaults: 4096 nodes, 200000 steps.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

struct node {
	struct node *next;
	char pad[56];
};

struct job {
	long nodes, steps, end;
	struct node *ring;
};

static void *worker(void *arg)
{
	struct job *j = arg;
	struct node *p;
	/* A single cycle through every node: 1021 is odd, the ring a power of two. */
	for (long i = 0; i < j->nodes; i++)
		j->ring[i].next = &j->ring[(i + 1021) % j->nodes];
	p = j->ring;
	for (long s = 0; s < j->steps; s++)
		p = p->next;
	j->end = (long)(p - j->ring);
	return NULL;
}

int main(int argc, char **argv)
{
	long nodes = argc > 1 ? atol(argv[1]) : 4096;
	long steps = argc > 2 ? atol(argv[2]) : 200000;
	pthread_t tid[4];
	struct job jobs[4];
	if (nodes < 2048 || nodes > (1L << 24) || (nodes & (nodes - 1)) || steps < 1) {
		fprintf(stderr, "usage: threads [nodes (power of two, 2048..16M)] [steps]\n");
		return 2;
	}
	for (int i = 0; i < 4; i++) {
		jobs[i].nodes = nodes;
		jobs[i].steps = steps * (i + 1);
		jobs[i].ring = calloc((size_t)nodes, sizeof(struct node));
		if (!jobs[i].ring || pthread_create(&tid[i], NULL, worker, &jobs[i]))
			return 1;
	}
	for (int i = 0; i < 4; i++)
		pthread_join(tid[i], NULL);
	for (int i = 0; i < 4; i++) {
		printf("thread %d nodes=%ld steps=%ld end=%ld\n", i, jobs[i].nodes, jobs[i].steps,
		       jobs[i].end);
		free(jobs[i].ring);
	}
	return 0;
}

/*
 * Threads one after another, each ending before the next starts (a server
 * that runs short jobs on fresh threads): THREADS threads, each making
 * STEPS loads of a 64 KiB array, one volatile load a step (the thread
 * library adds the same references around them in every thread).
 *
 *   churn THREADS STEPS
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static long steps;
static volatile long big[8192];

static void *job(void *arg)
{
	unsigned long sum = 0, at = (unsigned long)(size_t)arg;
	for (long s = 0; s < steps; s++) {
		at = at * 6364136223846793005ul + 1442695040888963407ul;
		sum += (unsigned long)big[(at >> 40) & 8191];
	}
	return (void *)sum;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 100;
	steps = argc > 2 ? atol(argv[2]) : 10000;
	for (long i = 0; i < n; i++) {
		pthread_t t;
		if (pthread_create(&t, NULL, job, (void *)(size_t)(i + 1)) || pthread_join(t, NULL))
			return 1;
	}
	printf("%ld threads\n", n);
	return 0;
}

/* Step-clock target: two threads; the second ends the process with exit(5). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static long shared[512];

static void *worker(void *arg)
{
	long id = (long)arg;
	for (int i = 0; i < 200; i++)
		shared[(id * 256 + i) % 512] += i;
	return (void *)(id * 10);
}

static void *exiter(void *arg)
{
	(void)arg;
	printf("exiting from a thread\n");
	fflush(stdout);
	exit(5);
}

int main(void)
{
	pthread_t a, b;
	void *ra, *rb;
	pthread_create(&a, NULL, worker, (void *)1);
	pthread_create(&b, NULL, worker, (void *)2);
	pthread_join(a, &ra);
	pthread_join(b, &rb);
	printf("joined %ld %ld %ld\n", (long)ra, (long)rb, shared[1] + shared[257]);
	fflush(stdout);
	pthread_create(&a, NULL, exiter, NULL);
	for (;;)
		pause();
}

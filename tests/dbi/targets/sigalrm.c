/*
 * Signal handlers under the dbi clock: a SIGALRM every 200 us interrupts a
 * loop; each handler makes 128 references of its own (64 volatile loads and
 * 64 stores). Valgrind saves a thread's shadow state in the signal frame and
 * restores it at sigreturn, where the tool keeps its countdown: the
 * handlers' references must count, and the clock must never step back.
 * Prints the handler calls; the loop's own references are 2 x argv[1] x 4096
 * plus start-up.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/time.h>

static volatile long ring[64], data[4096];
static volatile sig_atomic_t calls;

static void on_alarm(int sig)
{
	(void)sig;
	for (int i = 0; i < 64; i++)
		ring[i] = ring[(i + 7) & 63] + 1;
	calls++;
}

int main(int argc, char **argv)
{
	long rounds = argc > 1 ? atol(argv[1]) : 200;
	struct itimerval it = {{0, 200}, {0, 200}};
	signal(SIGALRM, on_alarm);
	setitimer(ITIMER_REAL, &it, NULL);
	for (long r = 0; r < rounds; r++)
		for (int i = 0; i < 4096; i++)
			data[i] = data[i] + r; /* a load and a store */
	it.it_value.tv_usec = it.it_interval.tv_usec = 0;
	setitimer(ITIMER_REAL, &it, NULL);
	printf("calls %d\n", (int)calls);
	return 0;
}

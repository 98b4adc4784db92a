/*
 * A program that ends abnormally after some work, for the inline clock's
 * exit paths:  crash MODE  with MODE one of
 *   segv   a genuine invalid write (SIGSEGV)      abort  abort() (SIGABRT)
 *   term   kill(getpid(), SIGTERM)                 thread exit(3) from a second thread
 *   small  join a thread created with the smallest stack size allowed, then return 0
 *   alarm  more work while a SIGALRM handler (64 references a call: 32 volatile
 *          read-modify-writes) interrupts it every 100 us, then print the calls
 *   quiet  the same work without the timer
 *   range  the runtime's filter range test (lomas__range_clean) against a
 *          byte-by-byte scan, with some filter bytes set by hand (run it with
 *          sampling off: LOMAS_PERIOD=1000000000000); exit 5 on a mismatch
 *   ok     return 0 from main
 */
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

static long work(long n)
{
	long *a = calloc((size_t)n, sizeof *a), s = 0;
	if (!a)
		exit(1);
	for (int pass = 0; pass < 4; pass++)
		for (long i = 0; i < n; i++)
			a[i] += i ^ pass;
	for (long i = 0; i < n; i++)
		s += a[i];
	free(a);
	return s;
}

static void *exit_thread(void *arg)
{
	(void)arg;
	printf("thread exits %ld\n", work(10000));
	fflush(stdout);
	exit(3);
}

static volatile long alarm_buf[32];
static long alarm_calls; /* the handler's own count; read once the timer is off */

static void on_alarm(int sig)
{
	(void)sig;
	for (int i = 0; i < 32; i++)
		alarm_buf[i] += i;
	alarm_calls++;
}

/* Work under (or without) a 100 us SIGALRM timer; prints the handler's calls. */
static void alarmed_work(int with_timer)
{
	struct itimerval on = {{0, 100}, {0, 100}}, off = {{0, 0}, {0, 0}};
	long s = 0;
	signal(SIGALRM, on_alarm);
	if (with_timer)
		setitimer(ITIMER_REAL, &on, NULL);
	for (int r = 0; r < 40; r++)
		s += work(50000);
	setitimer(ITIMER_REAL, &off, NULL);
	printf("alarm work %ld calls %ld\n", s, alarm_calls);
}

static void *small_thread(void *arg)
{
	(void)arg;
	printf("small thread %ld\n", work(2000));
	return NULL;
}

/* The runtime's filter (64 KiB + padding) and its range test. */
extern __thread unsigned char lomas__filter[] __attribute__((tls_model("initial-exec")));
int lomas__range_clean(unsigned long long first, unsigned long long n);

static int range_check(void)
{
	/* Set bytes at both ends of the filter and inside, so ranges wrap around. */
	static const unsigned set[] = {0, 5, 13, 4095, 4096, 40000, 65534, 65535};
	unsigned long long x = 88172645463325252ull;
	int bad = 0;
	for (size_t i = 0; i < sizeof set / sizeof set[0]; i++)
		lomas__filter[set[i]] = 0x80;
	for (int k = 0; k < 3000; k++) {
		unsigned long long first, n;
		int want = 1;
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		first = x % (3u << 16);
		n = k % 10 == 0 ? (x >> 24) % 70000 : (x >> 24) % 20;
		for (unsigned long long j = 0; j < n && j < (1u << 16); j++)
			if (lomas__filter[(first + j) & 0xffff])
				want = 0;
		if (lomas__range_clean(first, n) != want) {
			printf("range %llu+%llu: want %d\n", first, n, want);
			bad++;
		}
	}
	for (size_t i = 0; i < sizeof set / sizeof set[0]; i++)
		lomas__filter[set[i]] = 0;
	printf("range: %d wrong\n", bad);
	return bad ? 5 : 0;
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "ok";
	volatile long *volatile bad = (long *)16;
	printf("work %ld\n", work(50000));
	fflush(stdout);
	if (!strcmp(mode, "segv"))
		*bad = 1;
	else if (!strcmp(mode, "abort"))
		abort();
	else if (!strcmp(mode, "term"))
		kill(getpid(), SIGTERM);
	else if (!strcmp(mode, "thread")) {
		pthread_t t;
		pthread_create(&t, NULL, exit_thread, NULL);
		pthread_join(t, NULL);
	} else if (!strcmp(mode, "alarm") || !strcmp(mode, "quiet")) {
		alarmed_work(!strcmp(mode, "alarm"));
	} else if (!strcmp(mode, "range")) {
		return range_check();
	} else if (!strcmp(mode, "small")) {
		pthread_attr_t a;
		pthread_t t;
		int rc;
		pthread_attr_init(&a);
		pthread_attr_setstacksize(&a, PTHREAD_STACK_MIN);
		rc = pthread_create(&t, &a, small_thread, NULL);
		pthread_attr_destroy(&a);
		if (rc != 0) {
			printf("pthread_create: %s\n", strerror(rc));
			return 4;
		}
		pthread_join(t, NULL);
	}
	return 0;
}

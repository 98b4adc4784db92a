/*
 * Realtime signals from another process, in bursts, none of which may be
 * lost: a child (forked, not followed) queues N signals (two realtime
 * numbers, each carrying its index) to the parent in bursts of B, while the
 * parent touches its data pages and makes system calls (the monitor's faults
 * and injected calls happen all the while). Realtime signals queue: every
 * one is delivered, so the count and the sum of the indexes are exact, and
 * the output depends on nothing but the arguments. A signal lost on the way
 * would leave the parent waiting: after 20 s a timer ends it with "lost".
 *
 *   t_rtsig [N [B]]   (default 200 signals in bursts of 50)
 */
#include "tiny.h"

#define RT_A 40
#define RT_B 41

#define MAXN 4096

static volatile unsigned long got, sum, bad;
static unsigned long n;
static volatile unsigned char seen[MAXN + 1];
static volatile unsigned long data[4096];

/* siginfo: signo, errno, code (int each), pad, pid, uid, value at 24. */
static void on_rt(int sig, void *si, void *uc)
{
	unsigned long v = *(unsigned long *)((char *)si + 24);
	(void)uc;
	/* Atomic: the handler of one number interrupts the other's. */
	if ((int)(v & 1) != (sig == RT_B))
		__atomic_add_fetch(&bad, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&got, 1, __ATOMIC_RELAXED);
	__atomic_add_fetch(&sum, v, __ATOMIC_RELAXED);
	if (v <= MAXN)
		seen[v] = 1;
}

static void on_alarm(int sig, void *si, void *uc)
{
	(void)sig;
	(void)si;
	(void)uc;
	int status = 0;
	long pid = sys4(__NR_wait4, -1, &status, 1 /* WNOHANG */, 0);
	t_kv("lost, received", got);
	for (unsigned long i = 1; i <= MAXN; i++)
		if (!seen[i] && i <= n) {
			t_kv("first missing", i);
			break;
		}
	t_kv("child ended", pid > 0);
	t_kv("child status", (unsigned long)status);
	t_flush();
	t_exit(3);
}

static void child(int parent, unsigned long n, unsigned long burst)
{
	struct {
		long s, ns;
	} pause_ts = {0, 2000000};
	for (unsigned long i = 1; i <= n; i++) {
		int info[32] = {0};
		int sig = (i & 1) ? RT_B : RT_A;
		info[0] = sig;
		info[2] = -1; /* SI_QUEUE */
		info[4] = t_getpid();
		*(unsigned long *)((char *)info + 24) = i;
		sys3(__NR_rt_sigqueueinfo, parent, sig, info);
		if (i % burst == 0)
			sys2(__NR_nanosleep, &pause_ts, 0);
	}
	t_exit(0);
}

int main(int argc, char **argv)
{
	unsigned long burst = t_arg(argc, argv, 2, 50), acc = 0;
	struct {
		long interval_s, interval_us, value_s, value_us;
	} timer = {0, 0, 20, 0};
	int parent = t_getpid(), status = 0;
	n = t_arg(argc, argv, 1, 200);
	if (!burst)
		burst = 1;
	if (n > MAXN)
		n = MAXN;
	t_sigaction(RT_A, on_rt, SA_SIGINFO | SA_RESTART, 0);
	t_sigaction(RT_B, on_rt, SA_SIGINFO | SA_RESTART, 0);
	t_sigaction(SIGALRM, on_alarm, SA_SIGINFO, 0);
	sys3(__NR_setitimer, 0 /* ITIMER_REAL */, &timer, 0);
	long pid = sys0(__NR_fork);
	if (pid == 0)
		child(parent, n, burst);
	for (unsigned long k = 0; got < n; k++) {
		data[(k * 67) % 4096] += k; /* pages touched throughout */
		acc += data[(k * 131) % 4096];
		if (k % 64 == 0)
			sys0(__NR_getppid);
	}
	sys4(__NR_wait4, pid, &status, 0, 0);
	t_kv("received", got);
	t_kv("sum", sum);
	t_kv("mismatched", bad);
	t_kv("child", (unsigned long)status);
	t_flush();
	(void)acc;
	return 4;
}

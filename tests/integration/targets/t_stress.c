/*
 * Stress for the step clock (issue 16, "Also"): threads that start, run a
 * few references and exit continuously, while SIGALRM (an interval timer,
 * to the process) and SIGUSR1 (from every thread to the main one and to a
 * sibling) arrive throughout. Its output depends on nothing but its
 * arguments, so the run under the step clock must print the same and exit
 * with the same status.
 *
 *   t_stress [THREADS [LIVE [WORK]]]   (default 64 threads, 16 live, 40)
 */
#include "tiny.h"

#define MAXLIVE 64
#define STACK 8192

struct slot {
	int ctid;
	unsigned long id, sum;
	volatile unsigned long buf[64];
};

static struct slot slots[MAXLIVE];
static char stacks[MAXLIVE][STACK] __attribute__((aligned(64)));
static volatile int alarms, usr1;
static int main_tid;
static unsigned long work;

static void on_alarm(int sig, void *si, void *uc)
{
	(void)sig;
	(void)si;
	(void)uc;
	__atomic_add_fetch(&alarms, 1, __ATOMIC_RELAXED);
}

static void on_usr1(int sig, void *si, void *uc)
{
	(void)sig;
	(void)si;
	(void)uc;
	__atomic_add_fetch(&usr1, 1, __ATOMIC_RELAXED);
}

static void thread_main(void *arg)
{
	struct slot *s = arg;
	unsigned long sum = 0;
	for (unsigned long i = 0; i < work; i++) {
		unsigned k = (unsigned)((i * 7 + s->id) & 63);
		s->buf[k] += i ^ s->id;
		sum += s->buf[(k + 32) & 63];
	}
	s->sum = sum;
	/* A signal to the main thread and to a sibling that may be gone already. */
	sys3(__NR_tgkill, t_getpid(), main_tid, SIGUSR1);
	sys3(__NR_tgkill, t_getpid(), slots[(s - slots + 1) % MAXLIVE].ctid, SIGUSR1);
}

static void start(struct slot *s, unsigned long id, unsigned long nlive)
{
	s->id = id;
	s->sum = 0;
	for (int i = 0; i < 64; i++)
		s->buf[i] = 0;
	t_thread(thread_main, s, stacks[s - slots] + STACK, &s->ctid);
	(void)nlive;
}

int main(int argc, char **argv)
{
	unsigned long total = t_arg(argc, argv, 1, 64), live = t_arg(argc, argv, 2, 16), next = 0,
	              done = 0, sum = 0;
	struct {
		long interval_s, interval_us, value_s, value_us;
	} timer = {0, 20000, 0, 20000}, off = {0, 0, 0, 0};
	work = t_arg(argc, argv, 3, 40);
	if (live > MAXLIVE)
		live = MAXLIVE;
	main_tid = t_gettid();
	t_sigaction(SIGALRM, on_alarm, SA_SIGINFO | SA_RESTART, 0);
	t_sigaction(SIGUSR1, on_usr1, SA_SIGINFO, 0); /* no SA_RESTART: joins see EINTR */
	sys3(__NR_setitimer, 0 /* ITIMER_REAL */, &timer, 0);
	for (; next < live && next < total; next++)
		start(&slots[next], next, live);
	/* Join in order, start the next thread in the freed slot: 'live' run at all times. */
	while (done < total) {
		struct slot *s = &slots[done % live];
		t_join(&s->ctid);
		sum += s->sum * (s->id + 1);
		done++;
		if (next < total) {
			start(s, next, live);
			next++;
		}
	}
	/* At least one alarm, so that "alarms" is the same in every run. */
	while (!alarms)
		sys0(__NR_pause);
	sys3(__NR_setitimer, 0, &off, 0);
	t_kv("threads", done);
	t_kv("sum", sum);
	t_kv("alarms", alarms > 0);
	t_kv("usr1", usr1 > 0);
	t_flush();
	return 9;
}

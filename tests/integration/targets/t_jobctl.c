/*
 * Job control under the step clock (issue 16, item 4): a target that works
 * for a while, to be stopped and continued from outside or by itself; it
 * must end with the same output and status as natively.
 *
 *   t_jobctl MODE [ROUNDS [THREADS]]
 *     spin:    work, print, exit 5 (stopped and continued from outside)
 *     self:    work, raise(SIGSTOP) on itself, work, print, exit 5
 *     threads: THREADS threads work (and one stops the group itself, with
 *              SIGSTOP to the process), joined, print, exit 5
 *
 * When descriptor 3 is open, "PID\n" is written there as soon as the target
 * runs (the test's handshake; stdout holds only the deterministic result).
 */
#include "tiny.h"

#define MAXT 8
#define STACK 16384

static volatile unsigned long bufs[MAXT + 1][512]; /* one per thread: no races */
static unsigned long sums[MAXT];
static char stacks[MAXT][STACK] __attribute__((aligned(64)));
static int ctids[MAXT];
static unsigned long rounds;

static unsigned long work(unsigned id, unsigned salt, unsigned long n)
{
	volatile unsigned long *buf = bufs[id];
	unsigned long s = 0;
	for (unsigned long i = 0; i < n; i++) {
		unsigned k = (unsigned)(i * 8 + salt * 64) & 511;
		buf[k] += i;
		s += buf[(k + 256) & 511] & 0xff;
	}
	return s;
}

static void worker(void *arg)
{
	unsigned long id = (unsigned long)arg;
	sums[id] = work((unsigned)id, (unsigned)id, rounds);
	if (id == 1) /* one thread stops the whole group, from inside */
		sys2(__NR_kill, t_getpid(), SIGSTOP);
	sums[id] += work((unsigned)id, (unsigned)id + 8, rounds);
}

static void handshake(void)
{
	char b[24];
	int n = 0, pid = t_getpid();
	char r[24];
	do
		r[n++] = (char)('0' + pid % 10);
	while ((pid /= 10));
	for (int i = 0; i < n; i++)
		b[i] = r[n - 1 - i];
	b[n++] = '\n';
	sys3(__NR_write, 3, b, n); /* EBADF natively unless the test opened it */
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "spin";
	unsigned long nthreads, total = 0;
	rounds = t_arg(argc, argv, 2, 2000);
	nthreads = t_arg(argc, argv, 3, 4);
	if (nthreads > MAXT)
		nthreads = MAXT;
	handshake();
	if (mode[0] == 's' && mode[1] == 'p') { /* spin */
		total = work(MAXT, 0, rounds) + work(MAXT, 1, rounds);
	} else if (mode[0] == 's') { /* self */
		total = work(MAXT, 0, rounds);
		t_raise(SIGSTOP);
		total += work(MAXT, 1, rounds);
	} else { /* threads */
		for (unsigned long i = 0; i < nthreads; i++)
			t_thread(worker, (void *)i, stacks[i] + STACK, &ctids[i]);
		for (unsigned long i = 0; i < nthreads; i++) {
			t_join(&ctids[i]);
			total += sums[i];
		}
	}
	t_kv("total", total);
	t_flush();
	return 5;
}

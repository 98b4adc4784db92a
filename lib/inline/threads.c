/*
 * Thread creation for the inline clock, linked with -Wl,--wrap=pthread_create
 * (the lomas-inline recipe):
 *  - every new thread gets the next index when it is created, in the creating
 *    thread, so a program that creates its threads in a fixed order gets the
 *    same per-thread seeds on every run (without the wrapper a thread's index
 *    is the order in which it first made a reference);
 *  - glibc carves the static TLS, the runtime's 64 KiB filter included, out
 *    of each thread's stack, so every thread whose stack glibc allocates gets
 *    that much more than its size (the program's, or the default: the
 *    RLIMIT_STACK soft limit, 128 KiB under `ulimit -s 128`): the program keeps
 *    the stack it would have had, and pthread_create does not fail (EINVAL)
 *    for a PTHREAD_STACK_MIN stack. pthread_getattr_np reports the larger
 *    size. A stack the program supplies itself (pthread_attr_setstack) is
 *    left as it is.
 * This file is its own archive member: a program that never calls
 * pthread_create does not pull it in.
 */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "inline.h"

int __real_pthread_create(pthread_t *thread, const pthread_attr_t *attr, void *(*start)(void *),
                          void *arg);
int __wrap_pthread_create(pthread_t *thread, const pthread_attr_t *attr, void *(*start)(void *),
                          void *arg);

typedef struct trampoline {
	void *(*start)(void *);
	void *arg;
	uint32_t index;
} trampoline;

static void *start_thread(void *p)
{
	trampoline tr = *(trampoline *)p;
	free(p);
	lomas__fast.index = tr.index;
	return tr.start(tr.arg);
}

/* The runtime's TLS and some room (lomas__fast, alignment). */
#define TLS_ROOM (FILTER_SIZE + 16384u)

/*
 * *out = a copy of attr with TLS_ROOM more stack, when attr supplies no stack
 * of its own. False: use attr.
 */
static bool widen_stack(const pthread_attr_t *attr, pthread_attr_t *out)
{
	struct sched_param sp;
	cpu_set_t cpus, all;
	sigset_t mask;
	size_t size, guard;
	void *addr = NULL;
	int v;
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
	/* The only query that says whether a stack address was set at all. */
	if (pthread_attr_getstackaddr(attr, &addr) != 0 || addr)
		return false;
#pragma GCC diagnostic pop
	if (pthread_attr_getstacksize(attr, &size) != 0 || size > SIZE_MAX / 2)
		return false;
	if (pthread_attr_init(out) != 0)
		return false;
	if (pthread_attr_setstacksize(out, size + TLS_ROOM) != 0)
		goto fail;
	if (pthread_attr_getdetachstate(attr, &v) != 0 || pthread_attr_setdetachstate(out, v) != 0)
		goto fail;
	if (pthread_attr_getguardsize(attr, &guard) != 0 ||
	    pthread_attr_setguardsize(out, guard) != 0)
		goto fail;
	if (pthread_attr_getinheritsched(attr, &v) != 0 ||
	    pthread_attr_setinheritsched(out, v) != 0)
		goto fail;
	if (pthread_attr_getschedpolicy(attr, &v) != 0 || pthread_attr_setschedpolicy(out, v) != 0)
		goto fail;
	if (pthread_attr_getschedparam(attr, &sp) != 0 || pthread_attr_setschedparam(out, &sp) != 0)
		goto fail;
	if (pthread_attr_getscope(attr, &v) != 0 || pthread_attr_setscope(out, v) != 0)
		goto fail;
	/* An attr without an affinity reports every CPU: copy only a real one. */
	memset(&all, 0xff, sizeof all);
	if (pthread_attr_getaffinity_np(attr, sizeof cpus, &cpus) == 0 &&
	    memcmp(&cpus, &all, sizeof cpus) != 0 &&
	    pthread_attr_setaffinity_np(out, sizeof cpus, &cpus) != 0)
		goto fail;
	if (pthread_attr_getsigmask_np(attr, &mask) == 0 &&
	    pthread_attr_setsigmask_np(out, &mask) != 0)
		goto fail;
	return true;
fail:
	pthread_attr_destroy(out);
	return false;
}

__attribute__((visibility("default"))) int __wrap_pthread_create(pthread_t *thread,
                                                                 const pthread_attr_t *attr,
                                                                 void *(*start)(void *), void *arg)
{
	trampoline *tr = malloc(sizeof *tr);
	pthread_attr_t wide, def;
	bool widened;
	int rc;
	/* No attributes: the defaults (pthread_setattr_default_np's, or the
	 * stack size from RLIMIT_STACK), widened the same way. */
	if (!attr && pthread_getattr_default_np(&def) == 0) {
		widened = widen_stack(&def, &wide);
		pthread_attr_destroy(&def);
	} else {
		widened = attr && widen_stack(attr, &wide);
	}
	if (tr) {
		tr->start = start;
		tr->arg = arg;
		tr->index = lomas__next_thread_index();
		rc = __real_pthread_create(thread, widened ? &wide : attr, start_thread, tr);
		if (rc != 0)
			free(tr);
	} else {
		rc = __real_pthread_create(thread, widened ? &wide : attr, start, arg);
	}
	if (widened)
		pthread_attr_destroy(&wide);
	return rc;
}

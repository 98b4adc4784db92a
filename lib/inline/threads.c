/*
 * Thread creation order for the inline clock: linked with
 * -Wl,--wrap=pthread_create (the lomas-inline recipe), every new thread gets
 * the next index when it is created, in the creating thread, so a program that
 * creates its threads in a fixed order gets the same per-thread seeds on
 * every run. (Without the wrapper a thread's index is the order in which it
 * first made a reference.) This file is its own archive member: a program
 * that never calls pthread_create does not pull it in.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

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

__attribute__((visibility("default"))) int __wrap_pthread_create(pthread_t *thread,
                                                                 const pthread_attr_t *attr,
                                                                 void *(*start)(void *), void *arg)
{
	trampoline *tr = malloc(sizeof *tr);
	int rc;
	if (!tr)
		return __real_pthread_create(thread, attr, start, arg);
	tr->start = start;
	tr->arg = arg;
	tr->index = lomas__next_thread_index();
	rc = __real_pthread_create(thread, attr, start_thread, tr);
	if (rc != 0)
		free(tr);
	return rc;
}

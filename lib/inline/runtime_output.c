/*
 * The inline clock's runtime, second half: assembling the profile, writing
 * it at exit and on fatal signals, start-up, fork, and the explicit API
 * (lomas_inline_start/stop).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "inline.h"
#include "lomas/inline.h"
/* --------------------------------------------------------- the profile */

static const int fatal_signals[] = {SIGSEGV, SIGABRT, SIGBUS, SIGFPE, SIGILL, SIGTERM, SIGINT};

static int by_index(const void *a, const void *b)
{
	const inline_thread *x = *(inline_thread *const *)a, *y = *(inline_thread *const *)b;
	return (x->index > y->index) - (x->index < y->index);
}

static void command_line(char *buf, size_t len)
{
	int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, len - 1) : -1;
	if (fd >= 0)
		close(fd);
	if (n <= 0) {
		buf[0] = '\0';
		return;
	}
	buf[n] = '\0';
	while (n > 0 && buf[n - 1] == '\0')
		n--;
	for (ssize_t i = 0; i < n; i++)
		if (buf[i] == '\0')
			buf[i] = ' ';
}

/*
 * The exit path's samples: each thread's store, taken from the thread (with
 * its open samples appended, dangling), its streams copied into the file as
 * they are (each is a block of packed records, the file's own encoding), so
 * nothing is decoded or re-encoded at exit (it was: about 65 ns and 64 bytes
 * of file a sample; 12-20 bytes now). The stores are not given back: the
 * process is ending (write_output runs at exit or on a fatal signal), and
 * unmapping them cost a four-thread program 68 munmap calls, 2.7 ms, in
 * its exit path.
 */
typedef struct taken_store {
	sample_store st;
	inline_sample_place place;
} taken_store;

typedef struct taken_samples {
	taken_store *items;
	size_t n, at;
	unsigned k; /* streams of items[at] done */
} taken_samples;

/* Forget the taken stores (their memory goes with the process). */
static void taken_free(taken_samples *ts)
{
	free(ts->items);
	memset(ts, 0, sizeof *ts);
}

/* The next non-empty stream as a block: stores in thread order, streams
 * in store_iter's. */
static lomas_status taken_next(void *ctx, profile_sample_block *out)
{
	taken_samples *ts = ctx;
	while (ts->at < ts->n) {
		taken_store *t = &ts->items[ts->at];
		if (store_next_block(&t->st, &ts->k, t->place.thread, t->place.base_period, out))
			return LOMAS_OK;
		ts->at++;
		ts->k = 0;
	}
	return error_set(LOMAS_EINVAL, "fewer sample blocks than counted");
}

/*
 * Build the profile of the current session from every thread in it. Called
 * with rt.mu held. in_signal: do not wait long for a thread's lock. taken:
 * leave the samples out of the profile and take the threads' stores into
 * *taken instead (NULL: the profile holds them all).
 */
static lomas_status collect(lomas_profile **out, const char *ending, taken_samples *taken)
{
	inline_thread *stack[64], **list = stack;
	size_t n = 0, cap = 64;
	uint64_t epoch = atomic_load(&rt.epoch), window = rt.set.window, lost = 0;
	double max_period = 0;
	bool incomplete = false;
	lomas_profile *p = NULL;
	lomas_status st;
	char cmd[4096];
	for (int pass = 0; pass < 2; pass++)
		for (inline_thread *t = pass ? rt.exited : rt.threads; t; t = t->next) {
			if (t->epoch != epoch)
				continue;
			if (n == cap) {
				inline_thread **bigger = malloc(sizeof *bigger * cap * 2);
				if (!bigger)
					return error_set(LOMAS_ENOMEM, "out of memory");
				memcpy(bigger, list, sizeof *list * n);
				if (list != stack)
					free(list);
				list = bigger;
				cap *= 2;
			}
			list[n++] = t;
		}
	qsort(list, n, sizeof *list, by_index);
	/* Period auto, one pass under each thread's lock: a thread that exited
	 * (or the caller) before the process level last rose has not followed
	 * it; bring it there now, so the profile holds the budget and not the
	 * budget plus what finished threads kept (other live threads read their
	 * tables without a lock: leave them be). And count the references and
	 * the samples held, for the window: 256 x the mean period, with these
	 * mixed weights the references per sample held (see AUTO_LEVELS). */
	uint64_t refs = 0, held = 0;
	for (size_t i = 0; rt.set.period == 0 && i < n; i++) {
		inline_thread *t = list[i];
		uint32_t level = atomic_load(&rt.auto_level);
		if (!rt_spin_lock_bounded(&t->lock))
			continue;
		if (t->adaptive && t->level < level && (t->exited || t->fast == &lomas__fast))
			rt_thread_to_level(t, level);
		refs += rt_thread_refs(t);
		held += t->done.n + t->wt.live;
		rt_spin_unlock(&t->lock);
	}
	if (!window && held && refs / held > AUTO_START_PERIOD)
		window = 256 * (refs / held);
	if ((st = lomas_profile_new(rt.set.line_size, &p)))
		goto done;
	if (taken && !(taken->items = calloc(n ? n : 1, sizeof *taken->items))) {
		st = error_set(LOMAS_ENOMEM, "out of memory");
		goto done;
	}
	for (size_t i = 0; i < n; i++) {
		double period = list[i]->base_period * (double)(1ull << list[i]->level);
		if (period > max_period)
			max_period = period;
	}
	if (!window)
		window = (uint64_t)(256.0 * (max_period > 0 ? max_period : AUTO_START_PERIOD));
	for (size_t i = 0; i < n; i++) {
		inline_thread *t = list[i];
		inline_thread_data td;
		if (!rt_spin_lock_bounded(&t->lock)) {
			incomplete = true;
			continue;
		}
		td.tid = t->tid;
		td.refs = rt_thread_refs(t);
		td.base_period = t->base_period;
		td.done = &t->done;
		td.open = t->wt_mem ? &t->wt : NULL; /* an exited thread's are in done */
		lost += t->lost;
		if (taken) {
			taken_store *ts = &taken->items[taken->n];
			st = inline_profile_add_thread_head(p, &td, window, &ts->place);
			/* The thread goes on (if live) with an empty store, as below. */
			store_take(&ts->st, &t->done);
			taken->n++;
			if (!st && td.open && !wt_collect(td.open, &ts->st, &rt_map_alloc))
				st = error_set(LOMAS_ENOMEM, "out of memory");
		} else {
			st = inline_profile_add_thread(p, &td, window);
			/* Every caller ends the session after this: give the memory
			 * back now, so the profile is not held on top of it. */
			store_free(&t->done, &rt_map_alloc);
		}
		rt_spin_unlock(&t->lock);
		if (st)
			goto done;
	}
	command_line(cmd, sizeof cmd);
	profile_meta_setf(p, "clock", "inline");
	profile_meta_setf(p, "watch", "inline");
	if (cmd[0])
		profile_meta_setf(p, "command", "%s", cmd);
	profile_meta_setf(p, "pid", "%ld", (long)getpid());
	if (rt.set.period)
		profile_meta_setf(p, "period", "%llu", (unsigned long long)rt.set.period);
	else
		profile_meta_setf(p, "period", "auto (final %.0f)", max_period);
	profile_meta_setf(p, "seed", "%llu", (unsigned long long)rt.set.seed);
	profile_meta_setf(p, "line_size", "%u", rt.set.line_size);
	profile_meta_setf(p, "window", "%llu", (unsigned long long)window);
	profile_meta_setf(p, "max_samples_live", "%u", rt.set.max_live);
	profile_meta_setf(p, "reuse", "per-thread (touches by other threads are not seen)");
	profile_meta_setf(p, "ended", "%s", ending);
	if (rt.env_error[0])
		profile_meta_setf(p, "env_error", "%s", rt.env_error);
	if (rt.trace_fd >= 0)
		profile_meta_setf(p, "trace", "%s", rt.trace_path);
	if (lost)
		profile_meta_setf(p, "samples_lost", "%llu (out of memory)",
		                  (unsigned long long)lost);
	if (incomplete)
		profile_meta_setf(p, "incomplete", "a thread was busy when the profile was taken");
	/* The mapped files and their build ids, for symbolization (lib/sym); best
	 * effort: a profile without maps is still a profile. */
	if (profile_add_proc_maps(p, "/proc/self/maps"))
		profile_meta_setf(p, "maps_error", "%s", lomas_error_message());
	st = profile_validate(p);
done:
	if (list != stack)
		free(list);
	if (st) {
		lomas_profile_free(p);
		if (taken)
			taken_free(taken);
		return st;
	}
	*out = p;
	return LOMAS_OK;
}

static void flush_all_traces(void)
{
	for (int pass = 0; pass < 2; pass++)
		for (inline_thread *t = pass ? rt.exited : rt.threads; t; t = t->next)
			if (t->trace_len && rt_spin_lock_bounded(&t->lock)) {
				rt_trace_flush(t);
				rt_spin_unlock(&t->lock);
			}
}

/* Write the session's profile to LOMAS_OUTPUT (rt.mu held). */
static void write_output(const char *ending)
{
	lomas_profile *p = NULL;
	taken_samples taken = {0};
	profile_sample_source src = {.next = taken_next, .ctx = &taken};
	lomas_status st;
	if (rt.written || !rt.output_ok || !atomic_load(&rt.active))
		return;
	if (rt.explicit_mode && !rt.output_set)
		return;
	rt.written = true;
	st = collect(&p, ending, &taken);
	if (!st) {
		for (size_t i = 0; i < taken.n; i++)
			store_add_totals(&taken.items[i].st, &src);
		st = profile_save_file_src(p, &src, rt.output, false);
	}
	if (st)
		rt_say("cannot write the profile %s: %s", rt.output, lomas_error_message());
	taken_free(&taken);
	lomas_profile_free(p);
}

static void at_exit(void)
{
	inline_fast *f = &lomas__fast;
	if (rt.forked_child)
		return;
	f->busy = 1; /* the rest of the exit path is not counted */
	pthread_mutex_lock(&rt.mu);
	flush_all_traces();
	write_output("exit");
	atomic_store(&rt.active, false);
	atomic_fetch_add(&rt.epoch, 1);
	pthread_mutex_unlock(&rt.mu);
	rt_filter_scrub();
	f->countdown = COUNTDOWN_NEVER;
}

static void on_fatal(int sig)
{
	char ending[32];
	/* Back to the program's dispositions first: a fault while writing ends it. */
	for (size_t i = 0; i < sizeof fatal_signals / sizeof *fatal_signals; i++)
		if (rt.caught[fatal_signals[i]])
			sigaction(fatal_signals[i], &rt.old[fatal_signals[i]], NULL);
	if (!atomic_exchange(&rt.dumping, 1) && !rt.forked_child) {
		lomas__fast.busy = 1;
		/* Best effort: if another thread holds the lock, give up rather than hang. */
		if (pthread_mutex_trylock(&rt.mu) == 0) {
			flush_all_traces();
			snprintf(ending, sizeof ending, "signal %d", sig);
			write_output(ending);
			pthread_mutex_unlock(&rt.mu);
		}
	}
	/* Blocked while we run: delivered with the default action when we return. */
	raise(sig);
}

static void install_signal_handlers(void)
{
	for (size_t i = 0; i < sizeof fatal_signals / sizeof *fatal_signals; i++) {
		int sig = fatal_signals[i];
		struct sigaction sa;
		if (sigaction(sig, NULL, &rt.old[sig]) != 0 || rt.old[sig].sa_handler != SIG_DFL ||
		    (rt.old[sig].sa_flags & SA_SIGINFO))
			continue; /* ignored or handled already: leave it */
		memset(&sa, 0, sizeof sa);
		sa.sa_handler = on_fatal;
		sigemptyset(&sa.sa_mask);
		sa.sa_flags = SA_RESTART;
		if (sigaction(sig, &sa, NULL) == 0)
			rt.caught[sig] = true;
	}
}

static void atfork_child(void)
{
	/* A forked child (without exec) neither samples nor writes. */
	pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
	rt.mu = fresh;
	rt.forked_child = true;
	atomic_store(&rt.active, false);
	atomic_fetch_add(&rt.epoch, 1);
	atomic_flag_clear(&rt.trace_lock);
	if (lomas__fast.state)
		atomic_flag_clear(&lomas__fast.state->lock);
	rt_fast_idle(&lomas__fast);
}

void rt_global_init(void)
{
	inline_fast *f = &lomas__fast;
	f->busy = 1;
	pthread_key_create(&rt.key, rt_key_destructor);
	rt_parse_env(&rt.env);
	rt_setup_output();
	rt_setup_trace();
	rt.set = rt.env;
	atomic_store(&rt.epoch, 1);
	atomic_store(&rt.active, true);
	install_signal_handlers();
	pthread_atfork(NULL, NULL, atfork_child);
	atexit(at_exit);
	f->busy = 0;
}

__attribute__((constructor(101))) static void lomas_inline_init(void)
{
	pthread_once(&rt.once, rt_global_init);
}

/* -------------------------------------------------------- explicit API */

lomas_status lomas_inline_start(const lomas_config *cfg)
{
	error_clear();
	inline_fast *f = &lomas__fast;
	pthread_once(&rt.once, rt_global_init);
	pthread_mutex_lock(&rt.mu);
	if (rt.forked_child) {
		pthread_mutex_unlock(&rt.mu);
		return error_set(LOMAS_ESTATE, "the inline clock is off in a forked child");
	}
	rt.set = rt.env;
	if (cfg) {
		rt.set.period = cfg->period_refs;
		rt.set.seed = cfg->seed;
		rt.set.line_size = cfg->line_size;
		rt.set.window = cfg->window_refs;
		if (cfg->max_samples_live)
			rt.set.max_live = cfg->max_samples_live > (1u << 24)
			                      ? (1u << 24)
			                      : (uint32_t)cfg->max_samples_live;
	}
	rt.explicit_mode = true;
	rt.written = false;
	atomic_store(&rt.auto_taken, 0);
	atomic_store(&rt.auto_level, 0);
	atomic_store(&rt.active, true);
	atomic_fetch_add(&rt.epoch, 1);
	pthread_mutex_unlock(&rt.mu);
	/* The caller's next reference starts its clock. */
	f->countdown = 1;
	f->zero_clock = 1;
	error_clear();
	return LOMAS_OK;
}

/* Free what exited threads left behind in an ended session (rt.mu held). */
static void release_exited(void)
{
	inline_thread *t = rt.exited;
	rt.exited = NULL;
	while (t) {
		inline_thread *next = t->next;
		rt_thread_release_data(t);
		rt_map_alloc.release(t, sizeof *t);
		t = next;
	}
}

lomas_status lomas_inline_stop(lomas_profile **out)
{
	error_clear();
	inline_fast *f = &lomas__fast;
	lomas_profile *p = NULL;
	lomas_status st = LOMAS_OK;
	if (out)
		*out = NULL;
	pthread_once(&rt.once, rt_global_init);
	pthread_mutex_lock(&rt.mu);
	if (!atomic_load(&rt.active)) {
		pthread_mutex_unlock(&rt.mu);
		return error_set(LOMAS_ESTATE, "the inline clock is not running");
	}
	flush_all_traces();
	if (out)
		st = collect(&p, "lomas_inline_stop", NULL);
	atomic_store(&rt.active, false);
	atomic_fetch_add(&rt.epoch, 1);
	release_exited();
	pthread_mutex_unlock(&rt.mu);
	/* The caller goes idle at once; other threads notice at their next visit. */
	if (f->state) {
		pthread_mutex_lock(&rt.mu);
		rt_spin_lock(&f->state->lock);
		rt_thread_release_data(f->state);
		f->state->epoch = 0;
		rt_spin_unlock(&f->state->lock);
		pthread_mutex_unlock(&rt.mu);
	}
	rt_fast_idle(f);
	if (st)
		return st;
	if (out)
		*out = p;
	error_clear();
	return LOMAS_OK;
}

/* The next thread index (threads.c, at pthread_create). */

int lomas_inline_active(void)
{
	error_clear();
	return atomic_load(&rt.active) ? 1 : 0;
}

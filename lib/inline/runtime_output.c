/*
 * The inline clock's runtime, second half: assembling the profile, writing
 * it at exit (signals.c: on fatal signals), start-up, fork, and the explicit API
 * (lomas_inline_start/stop).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <unistd.h>

#include "inline.h"
#include "lomas/inline.h"
/* --------------------------------------------------------- the profile */

/* A thread of the profile: live (t) or exited (r, its record in rt.exited). */
typedef struct thread_entry {
	uint32_t index;
	inline_thread *t;
	const exited_rec *r;
} thread_entry;

/* Append e to *list (stack at first, then malloc'd: *cap entries); false when out of memory. */
static bool entry_push(thread_entry **list, size_t *n, size_t *cap, thread_entry *stack,
                       thread_entry e)
{
	if (*n == *cap) {
		thread_entry *bigger = malloc(sizeof *bigger * *cap * 2);
		if (!bigger)
			return false;
		memcpy(bigger, *list, sizeof **list * *n);
		if (*list != stack)
			free(*list);
		*list = bigger;
		*cap *= 2;
	}
	(*list)[(*n)++] = e;
	return true;
}

static int by_index(const void *a, const void *b)
{
	const thread_entry *x = a, *y = b;
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
	sample_store *st;      /* a live thread's store, taken, or NULL */
	const exited_rec *rec; /* an exited thread's samples, or NULL */
	inline_sample_place place;
} taken_store;

typedef struct taken_samples {
	taken_store *items;
	size_t n, at;
	unsigned k;        /* streams of items[at] done */
	sample_store view; /* items[at].rec as a store, when viewing */
	bool viewing;
} taken_samples;

/* Forget the taken stores (their memory goes with the process). */
static void taken_free(taken_samples *ts)
{
	for (size_t i = 0; i < ts->n; i++)
		free(ts->items[i].st);
	free(ts->items);
	memset(ts, 0, sizeof *ts);
}

/* items[i]'s samples as a store. */
static const sample_store *taken_store_of(taken_samples *ts, size_t i, sample_store *view)
{
	taken_store *t = &ts->items[i];
	if (t->st)
		return t->st;
	exited_view(t->rec, view);
	return view;
}

/* The next non-empty stream as a block: stores in thread order, streams
 * in store_iter's. */
static lomas_status taken_next(void *ctx, profile_sample_block *out)
{
	taken_samples *ts = ctx;
	while (ts->at < ts->n) {
		taken_store *t = &ts->items[ts->at];
		const sample_store *st = t->st ? t->st : &ts->view;
		if (!t->st && !ts->viewing) {
			exited_view(t->rec, &ts->view);
			ts->viewing = true;
		}
		if (store_next_block(st, &ts->k, t->place.thread, t->place.base_period, out))
			return LOMAS_OK;
		ts->at++;
		ts->k = 0;
		ts->viewing = false;
	}
	return error_set(LOMAS_EINVAL, "fewer sample blocks than counted");
}

/*
 * Build the profile of the current session from every thread in it. Called
 * with rt.mu held. in_signal: do not wait long for a thread's lock. taken:
 * leave the samples out of the profile and take the threads' stores into
 * *taken instead (NULL: the profile holds them all). *thread_index: each
 * profile thread's runtime index (malloc'd), for the exact distances.
 */
static lomas_status collect(lomas_profile **out, const char *ending, taken_samples *taken,
                            uint32_t **thread_index)
{
	thread_entry stack[64], *list = stack;
	size_t n = 0, cap = 64;
	uint64_t epoch = atomic_load(&rt.epoch), window = rt.set.window, lost = 0;
	uint32_t level = atomic_load(&rt.auto_level);
	double max_period = 0;
	bool incomplete = false;
	lomas_profile *p = NULL;
	lomas_status st;
	const exited_rec *r = NULL;
	char cmd[4096];
	/* Period auto: an exited thread (or the caller) that ended before the
	 * process level last rose has not followed it; bring it there now, so
	 * the profile holds the budget and not the budget plus what finished
	 * threads kept (other live threads read their tables without a lock:
	 * leave them be). */
	if (rt.set.period == 0)
		exited_thin(&rt.exited, level, auto_floor(level));
	for (inline_thread *t = rt.threads; t; t = t->next)
		if (t->epoch == epoch &&
		    !entry_push(&list, &n, &cap, stack, (thread_entry){t->index, t, NULL}))
			goto nomem;
	while ((r = exited_next(&rt.exited, r)))
		if (!entry_push(&list, &n, &cap, stack, (thread_entry){r->index, NULL, r}))
			goto nomem;
	qsort(list, n, sizeof *list, by_index);
	/* The references and the samples held, for the window: 256 x the mean
	 * period, with these mixed weights the references per sample held (see
	 * AUTO_LEVELS). One pass under each live thread's lock. */
	uint64_t refs = 0, held = 0;
	for (size_t i = 0; rt.set.period == 0 && i < n; i++) {
		inline_thread *t = list[i].t;
		if (!t) {
			refs += list[i].r->refs;
			held += list[i].r->n;
			continue;
		}
		if (!rt_spin_lock_bounded(&t->lock))
			continue;
		if (t->adaptive && t->level < level && t->fast == &lomas__fast)
			rt_thread_to_level(t, level);
		refs += rt_thread_refs(t);
		held += t->done.n + t->wt.live;
		rt_spin_unlock(&t->lock);
	}
	if (!window && held && refs / held > AUTO_START_PERIOD)
		window = 256 * (refs / held);
	if ((st = lomas_profile_new(rt.set.line_size, &p)))
		goto done;
	*thread_index = NULL;
	if (!(*thread_index = malloc((n ? n : 1) * sizeof **thread_index)) ||
	    (taken && !(taken->items = calloc(n ? n : 1, sizeof *taken->items)))) {
		st = error_set(LOMAS_ENOMEM, "out of memory");
		goto done;
	}
	for (size_t i = 0; i < n; i++) {
		double base = list[i].t ? list[i].t->base_period : list[i].r->base_period;
		unsigned lv = list[i].t ? list[i].t->level : list[i].r->level;
		double period = base * (double)(1ull << lv);
		if (period > max_period)
			max_period = period;
	}
	/* Phase-guided: the window its sampler judged phases by (see
	 * phase_window_refs), so one sampled at the lower rate holds enough
	 * samples for the model; not 256 x the references per sample held,
	 * which grows with every window sampled at the lower rate. */
	if (!rt.set.window && rt.set.phase_guided)
		window = phase_window_refs(0, max_period > 0 ? max_period : AUTO_START_PERIOD,
		                           rt.set.phase.shift);
	if (!window)
		window = (uint64_t)(256.0 * (max_period > 0 ? max_period : AUTO_START_PERIOD));
	for (size_t i = 0; i < n; i++) {
		inline_thread *t = list[i].t;
		const exited_rec *x = list[i].r;
		sample_store view;
		inline_thread_data td;
		if (x) {
			exited_view(x, &view);
			td.tid = x->tid;
			td.refs = x->refs;
			td.base_period = x->base_period;
			td.done = &view;
			td.open = NULL; /* its open samples are in its record, dangling */
			lost += x->lost;
		} else {
			if (!rt_spin_lock_bounded(&t->lock)) {
				incomplete = true;
				continue;
			}
			td.tid = t->tid;
			td.refs = rt_thread_refs(t);
			td.base_period = t->base_period;
			td.done = &t->done;
			td.open = t->wt_mem ? &t->wt : NULL;
			lost += t->lost;
		}
		if (taken) {
			taken_store *ts = &taken->items[taken->n];
			st = inline_profile_add_thread_head(p, &td, window, &ts->place);
			/* A live thread goes on with an empty store, as below. */
			if (x) {
				ts->rec = x;
			} else if (!(ts->st = malloc(sizeof *ts->st))) {
				st = st ? st : error_set(LOMAS_ENOMEM, "out of memory");
			} else {
				store_take(ts->st, &t->done);
				if (!st && td.open && !wt_collect(td.open, ts->st, &rt_map_alloc))
					st = error_set(LOMAS_ENOMEM, "out of memory");
			}
			taken->n++;
		} else {
			st = inline_profile_add_thread(p, &td, window);
			/* Every caller ends the session after this: give the memory
			 * back now, so the profile is not held on top of it. */
			if (t)
				store_free(&t->done, &rt_map_alloc);
		}
		if (t)
			rt_spin_unlock(&t->lock);
		if (st)
			goto done;
		(*thread_index)[p->threads.n - 1] = list[i].index;
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
	if (rt.set.exact_budget > 0.0)
		profile_meta_setf(p, "exact_bursts", "%llu, %llu references (budget %g%%)",
		                  (unsigned long long)atomic_load(&rt.bursts),
		                  (unsigned long long)atomic_load(&rt.burst_refs),
		                  100.0 * rt.set.exact_budget);
	if (rt.trace_fd >= 0 || rt.trace_broken)
		profile_meta_setf(
		    p, "trace", "%s%s", rt.trace_path,
		    rt.trace_broken ? " (incomplete: the program closed its descriptor)" : "");
	if (lost)
		profile_meta_setf(p, "samples_lost", "%llu (out of memory)",
		                  (unsigned long long)lost);
	if (incomplete)
		profile_meta_setf(p, "incomplete", "a thread was busy when the profile was taken");
	if (rt.threads_lost)
		profile_meta_setf(p, "threads_lost", "%llu exited threads (out of memory)",
		                  (unsigned long long)rt.threads_lost);
	/* The mapped files and their build ids, for symbolization (lib/sym); best
	 * effort: a profile without maps is still a profile. */
	if (profile_add_proc_maps(p, "/proc/self/maps"))
		profile_meta_setf(p, "maps_error", "%s", lomas_error_message());
	st = profile_validate(p);
	goto done;
nomem:
	st = error_set(LOMAS_ENOMEM, "out of memory");
done:
	if (list != stack)
		free(list);
	if (st) {
		lomas_profile_free(p);
		if (taken)
			taken_free(taken);
		free(*thread_index);
		*thread_index = NULL;
		return st;
	}
	*out = p;
	return LOMAS_OK;
}

/*
 * The EXACTSD varints of the taken samples, in the order taken_next gives
 * them (n samples; *len bytes), or NULL when none has a distance.
 */
static uint8_t *exact_codes(taken_samples *ts, const uint32_t *index, uint64_t n, size_t *len)
{
	size_t nx = 0, k = 0;
	exact_rec *x = rt_exact_sorted(&nx);
	uint8_t *out = x ? malloc((size_t)n * 10 + 1) : NULL;
	bool any = false;
	*len = 0;
	for (size_t i = 0; out && i < ts->n; i++) {
		sample_store view;
		store_iter it;
		isample s;
		store_iter_init(&it, taken_store_of(ts, i, &view));
		while (store_iter_next(&it, &s) && k < (size_t)n * 10) {
			int64_t sd = s.state == LOMAS_SAMPLE_REUSED
			                 ? rt_exact_find(x, nx, index[ts->items[i].place.thread],
			                                 s.start, s.end)
			                 : -1;
			k = (size_t)(put_varint(out + k, sd < 0 ? 0 : (uint64_t)sd + 1) - out);
			any |= sd >= 0;
		}
	}
	free(x);
	if (!any) {
		free(out);
		return NULL;
	}
	*len = k;
	return out;
}

/* Give p's samples their exact distances (lomas_inline_stop's profile holds them all). */
static void exact_apply(lomas_profile *p, const uint32_t *index)
{
	size_t nx = 0;
	exact_rec *x = rt_exact_sorted(&nx);
	for (size_t i = 0; x && i < p->samples.n; i++) {
		lomas_sample *s = &p->samples.items[i];
		int64_t sd = s->state == LOMAS_SAMPLE_REUSED
		                 ? rt_exact_find(x, nx, index[s->thread], s->start, s->end)
		                 : -1;
		if (sd >= 0) {
			s->flags |= LOMAS_SAMPLE_EXACT_SD;
			s->reserved = (uint32_t)sd;
		}
	}
	free(x);
}

static void flush_all_traces(void)
{
	/* Exited threads flushed theirs as they exited. */
	for (inline_thread *t = rt.threads; t; t = t->next)
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
	uint32_t *index = NULL;
	uint8_t *exact = NULL;
	lomas_status st;
	if (rt.written || !rt.output_ok || !atomic_load(&rt.active))
		return;
	if (rt.explicit_mode && !rt.output_set)
		return;
	rt.written = true;
	st = collect(&p, ending, &taken, &index);
	if (!st) {
		for (size_t i = 0; i < taken.n; i++) {
			sample_store view;
			store_add_totals(taken_store_of(&taken, i, &view), &src);
		}
		/* Best effort: without memory, the profile has no exact distances. */
		exact = exact_codes(&taken, index, src.n, &src.exact_len);
		src.exact = exact;
		st = profile_save_file_src(p, &src, rt.output, false);
	}
	free(exact);
	free(index);
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
	rt_lock();
	flush_all_traces();
	write_output("exit");
	atomic_store(&rt.active, false);
	atomic_fetch_add(&rt.epoch, 1);
	rt_unlock();
	rt_filter_scrub();
	f->countdown = COUNTDOWN_NEVER;
}

void rt_dump_locked(const char *ending)
{
	flush_all_traces();
	write_output(ending);
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
	rt_note_stderr();
	pthread_key_create(&rt.key, rt_key_destructor);
	/* A set-user-ID or set-group-ID program (or one with file capabilities)
	 * runs for a user who must not choose the files it writes: every
	 * LOMAS_* variable is ignored (secure_getenv), nothing is sampled and
	 * nothing is written, not even a default profile in the working
	 * directory (lomas_inline_start still profiles into memory). */
	rt.secure = getauxval(AT_SECURE) != 0;
	if (rt.secure)
		rt_say("secure execution (set-user-ID, set-group-ID or capabilities): the LOMAS_* "
		       "variables are ignored and no profile is written");
	/* A child of an instrumented program, with its LOMAS_OUTPUT or
	 * LOMAS_TRACE: they are the parent's; the child keeps quiet. */
	rt.inherited = !rt.secure && rt_settings_inherited();
	if (!rt.inherited) {
		rt_parse_env(&rt.env);
		rt_setup_output();
		rt_setup_trace();
	} else {
		rt_parse_env_defaults(&rt.env);
	}
	rt.set = rt.env;
	atomic_store(&rt.epoch, 1);
	atomic_store(&rt.active, !rt.secure && !rt.inherited);
	if (!rt.secure && !rt.inherited)
		rt_install_signal_handlers();
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
	rt_lock();
	if (rt.forked_child) {
		rt_unlock();
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
	atomic_store(&rt.bursts, 0);
	atomic_store(&rt.burst_refs, 0);
	atomic_store(&rt.burst_floor_refs, 0);
	atomic_store(&rt.burst_long_floor_refs, 0);
	atomic_store(&rt.burst_novel_refs, 0);
	atomic_store(&rt.active, true);
	atomic_fetch_add(&rt.epoch, 1);
	rt_unlock();
	/* The caller's next reference starts its clock. */
	f->countdown = 1;
	f->zero_clock = 1;
	error_clear();
	return LOMAS_OK;
}

/* Free what exited threads left behind in an ended session (rt.mu held). */
static void release_exited(void)
{
	exited_free(&rt.exited, &rt_map_alloc);
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
	rt_lock();
	if (!atomic_load(&rt.active)) {
		rt_unlock();
		return error_set(LOMAS_ESTATE, "the inline clock is not running");
	}
	flush_all_traces();
	if (out) {
		uint32_t *index = NULL;
		if (!(st = collect(&p, "lomas_inline_stop", NULL, &index)))
			exact_apply(p, index);
		free(index);
	}
	atomic_store(&rt.active, false);
	atomic_fetch_add(&rt.epoch, 1);
	release_exited();
	rt_unlock();
	/* The caller goes idle at once; other threads notice at their next visit. */
	if (f->state) {
		rt_lock();
		rt_spin_lock(&f->state->lock);
		rt_thread_release_data(f->state);
		f->state->epoch = 0;
		rt_spin_unlock(&f->state->lock);
		rt_unlock();
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

/*
 * The inline clock's in-process runtime: the hooks' slow path, per-thread
 * state and full-trace mode. (runtime_env.c: the environment, messages, the
 * output and trace files; runtime_output.c: the profile written at exit and
 * lomas_inline_start/stop; signals.c: fatal signals; threads.c:
 * pthread_create.)
 *
 * This file is never compiled with -fsanitize-coverage: the runtime's own
 * references are not counted. Its memory comes from mmap, not malloc, so a
 * program with its own (instrumented) allocator does not re-enter it; the
 * profile itself is assembled with malloc only at exit/stop.
 *
 * Reuse is per thread: a line touched by another thread does not end a
 * sample and such touches are not seen (no LOMAS_SAMPLE_CROSS_THREAD flags).
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "inline.h"

/* The hooks' TLS: a fresh thread visits the slow path at its first reference. */
__thread inline_fast lomas__fast
    __attribute__((tls_model("initial-exec"))) = {.countdown = 1, .index = UINT32_MAX};

/* The thread's filter (see inline.h): all zero while the thread is not sampling. */
__thread uint8_t lomas__filter[FILTER_SIZE + FILTER_PAD] __attribute__((tls_model("initial-exec")));

/* Marker for inline_backend_detect and `nm`: this program carries the runtime. */
__attribute__((visibility("default"), used)) const char lomas_inline_marker[] =
    "lomas-inline " LOMAS_VERSION_STRING;

inline_runtime rt = {.once = PTHREAD_ONCE_INIT,
                     .mu = PTHREAD_MUTEX_INITIALIZER,
                     .trace_fd = -1,
                     .say_fd = 2,
                     .trace_lock = ATOMIC_FLAG_INIT,
                     .sig_lock = ATOMIC_FLAG_INIT,
                     .next_index = 1};

/* ---------------------------------------------------------------- memory */

static void *map_bytes(size_t bytes)
{
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

static void unmap_bytes(void *mem, size_t bytes)
{
	if (mem)
		munmap(mem, bytes);
}

/* The sample store's growth: the kernel moves the pages, nothing is copied or touched. */
static void *remap_bytes(void *mem, size_t old, size_t bytes)
{
	void *p = mremap(mem, old, bytes, MREMAP_MAYMOVE);
	return p == MAP_FAILED ? NULL : p;
}

const inline_alloc rt_map_alloc = {map_bytes, unmap_bytes, remap_bytes};

void rt_spin_lock(atomic_flag *l)
{
	while (atomic_flag_test_and_set_explicit(l, memory_order_acquire))
		;
}

bool rt_spin_lock_bounded(atomic_flag *l)
{
	for (uint32_t i = 0; i < LOCK_SPINS; i++)
		if (!atomic_flag_test_and_set_explicit(l, memory_order_acquire))
			return true;
	return false;
}

void rt_spin_unlock(atomic_flag *l)
{
	atomic_flag_clear_explicit(l, memory_order_release);
}

/*
 * rt.mu. The thread is busy while it holds it: a signal handler of the
 * program that interrupts it there and makes references must not visit
 * the slow path, which may lock rt.mu again (a new thread's first visit
 * does): that was a deadlock.
 */
void rt_lock(void)
{
	uint32_t was = lomas__fast.busy;
	lomas__fast.busy = 1;
	pthread_mutex_lock(&rt.mu);
	rt.mu_busy_was = was;
	atomic_store_explicit(&rt.mu_owner, (uintptr_t)&lomas__fast, memory_order_relaxed);
}

void rt_unlock(void)
{
	uint32_t was = rt.mu_busy_was;
	atomic_store_explicit(&rt.mu_owner, 0, memory_order_relaxed);
	pthread_mutex_unlock(&rt.mu);
	lomas__fast.busy = was;
}

static uint64_t gettid_u64(void)
{
	return (uint64_t)syscall(SYS_gettid);
}

/* ------------------------------------------------------------- threads */

void rt_thread_release_data(inline_thread *t)
{
	/* The filter is the owner's TLS: only the owner clears it (exited: NULL). */
	if (t->fast == &lomas__fast)
		rt_filter_scrub();
	store_free(&t->done, &rt_map_alloc);
	unmap_bytes(t->wt_mem, t->wt_size);
	t->wt_mem = NULL;
	memset(&t->wt, 0, sizeof t->wt);
	unmap_bytes(t->trace, TRACE_BUF);
	t->trace = NULL;
	t->trace_len = 0;
	unmap_bytes(t->phase, sizeof *t->phase);
	t->phase = NULL;
	t->pshift = 0;
	rt_burst_release(t);
}

/*
 * Zero the calling thread's filter, including saturated bytes that the watch
 * table no longer accounts for. Reads first and writes only non-zero words,
 * so pages of the filter that were never touched stay unmapped.
 */
void rt_filter_scrub(void)
{
	uint64_t *w = (uint64_t *)(void *)lomas__filter;
	for (size_t i = 0; i < (FILTER_SIZE + FILTER_PAD) / sizeof *w; i++)
		if (w[i])
			w[i] = 0;
}

/* Make the calling thread idle: no sampling until it next checks for a session. */
void rt_fast_idle(inline_fast *f)
{
	rt_filter_scrub();
	f->countdown = DISABLED_RECHECK;
	f->zero_clock = DISABLED_RECHECK;
}

/*
 * Start or restart the calling thread in the current session (the reference
 * being handled gets clock 0; after: see countdown_at); NULL when idle.
 */
static inline_thread *thread_attach(inline_fast *f, uint64_t after)
{
	inline_thread *t;
	settings s;
	uint64_t epoch;
	pthread_once(&rt.once, rt_global_init);
	rt_lock();
	/* Read under the lock (busy): a signal handler that interrupted this
	 * thread before it took it may have attached it already (reading the
	 * state first, a thread attached twice, and the first state, left in
	 * rt.threads, was read at exit after the thread had gone). */
	t = f->state;
	epoch = atomic_load(&rt.epoch);
	if (t && t->epoch == epoch && atomic_load(&rt.active)) {
		rt_unlock(); /* the handler's attachment stands */
		return t;
	}
	s = rt.set;
	if (!atomic_load(&rt.active)) {
		if (t) {
			rt_spin_lock(&t->lock);
			if (t->trace_len)
				rt_trace_flush(t);
			rt_thread_release_data(t);
			t->epoch = 0; /* in no session: attach again at the next visit */
			rt_spin_unlock(&t->lock);
		}
		rt_unlock();
		rt_fast_idle(f);
		return NULL;
	}
	if (!t) {
		/* An exited thread's, if any (zeroed), else a fresh one. */
		if ((t = rt.spare))
			rt.spare = t->next;
		else
			t = map_bytes(sizeof *t);
		if (!t) {
			rt_unlock();
			rt_fast_idle(f);
			return NULL;
		}
		atomic_flag_clear(&t->lock);
		t->tid = gettid_u64();
		if (f->index == UINT32_MAX)
			f->index =
			    t->tid == (uint64_t)getpid() ? 0 : atomic_fetch_add(&rt.next_index, 1);
		t->index = f->index;
		t->fast = f;
		t->next = rt.threads;
		rt.threads = t;
		f->state = t;
		pthread_setspecific(rt.key, t);
	}
	rt_spin_lock(&t->lock);
	if (t->trace_len)
		rt_trace_flush(t);
	rt_thread_release_data(t);
	t->epoch = epoch;
	t->wt_size = wt_bytes(s.max_live);
	t->wt_mem = map_bytes(t->wt_size);
	if (rt.trace_fd >= 0)
		t->trace = map_bytes(TRACE_BUF);
	/* Phase-guided sampling: without memory for the tracker, plain sampling. */
	if (s.phase_guided && (t->phase = map_bytes(sizeof *t->phase)))
		phase_tracker_init(t->phase, &s.phase);
	t->phase_window = s.window;
	if (!t->wt_mem) {
		t->epoch = 0;
		rt_spin_unlock(&t->lock);
		rt_unlock();
		rt_fast_idle(f);
		return NULL;
	}
	rt_filter_scrub();
	wt_init(&t->wt, t->wt_mem, s.max_live, (unsigned)__builtin_ctz(s.line_size), lomas__filter);
	rng_seed(&t->gaps, s.seed ^ (0x9e3779b97f4a7c15ull * t->index));
	rng_seed(&t->thin, ~s.seed ^ (0xd1b54a32d192ed03ull * (t->index + 1)));
	t->adaptive = s.period == 0;
	/* Period auto thins the finished samples: each gets its fate as it is pushed. */
	t->done.fates = t->adaptive ? &t->thin : NULL;
	{
		/* One mapping for the streams' first allocations (address space
		 * only until used); without it each stream maps its own. */
		void *reserve = map_bytes(STORE_RESERVE_BYTES);
		if (reserve)
			store_reserve(&t->done, reserve);
	}
	t->base_period = t->adaptive ? AUTO_START_PERIOD : (double)s.period;
	/* A thread joining a running session samples at the process's current rate. */
	t->level = 0;
	if (t->adaptive)
		rt_thread_to_level(t, atomic_load(&rt.auto_level));
	t->unpublished = 0;
	t->lost = 0;
	/* The reference being handled gets clock 0. */
	t->gap_log = rng_gap_log(ldexp(t->base_period, t->level));
	t->next_sample = rng_gap_with(&t->gaps, t->gap_log) - 1;
	t->next_gap = rng_gap_with(&t->gaps, t->gap_log);
	t->next_clock = 0;
	f->countdown = -after;
	f->zero_clock = 0;
	rt_spin_unlock(&t->lock);
	rt_unlock();
	return t;
}

static void push_sample(inline_thread *t, const isample *s)
{
	if (!store_push(&t->done, &rt_map_alloc, s))
		t->lost++;
}

void rt_thread_to_level(inline_thread *t, uint32_t level)
{
	if (level > AUTO_MAX_LEVEL)
		level = AUTO_MAX_LEVEL;
	if (t->level >= level)
		return;
	t->level = (uint8_t)level;
	sampler_thin_to(&t->done, &t->wt, &t->thin, level, &rt_map_alloc);
}

/* After a level change: sampling is memoryless, so draw the next gap afresh at the new rate. */
static void redraw_gap(inline_thread *t, uint64_t clock)
{
	t->gap_log = rng_gap_log(ldexp(t->base_period, t->level + t->pshift));
	t->next_sample = clock + rng_gap_with(&t->gaps, t->gap_log);
	t->next_gap = rng_gap_with(&t->gaps, t->gap_log);
}

/*
 * Period auto after a sample start: add the thread's samples to the
 * process's count (in steps of AUTO_PUBLISH), raise the process's level when
 * the count says so, and bring the thread to it.
 */
static inline void auto_publish(inline_thread *t)
{
	uint64_t n =
	    atomic_fetch_add_explicit(&rt.auto_taken, t->unpublished, memory_order_relaxed) +
	    t->unpublished;
	uint32_t want = auto_level_at(n), level;
	t->unpublished = 0;
	level = atomic_load_explicit(&rt.auto_level, memory_order_relaxed);
	while (level < want && !atomic_compare_exchange_weak(&rt.auto_level, &level, want))
		;
}

static void auto_budget(inline_thread *t, uint64_t clock)
{
	uint32_t level;
	if (++t->unpublished >= AUTO_PUBLISH)
		auto_publish(t);
	level = atomic_load_explicit(&rt.auto_level, memory_order_relaxed);
	if (t->level < level) {
		rt_thread_to_level(t, level);
		redraw_gap(t, clock);
	}
}

/*
 * Phase-guided sampling after a sample start (lib/sampler/phase.c, as
 * lib/sampler/thread.c does it for the dbi clock, in the same order of
 * draws): the sample joins the running window's signatures; at a window
 * boundary the rate is decided again, and a new rate redraws the gap
 * (sampling is memoryless). A sample drawn at the lower rate has its level
 * raised by the shift: it weighs 2^shift more.
 */
static void phase_step(inline_thread *t, uint64_t clock, uint64_t addr, uint64_t pc)
{
	uint64_t window = phase_window_refs(t->phase_window, ldexp(t->base_period, t->level),
	                                    t->phase->set.shift);
	if (phase_on_sample(t->phase, clock, window, addr >> t->wt.line_shift, pc)) {
		t->pshift = t->phase->shift_now;
		redraw_gap(t, clock);
	}
}

static void trace_put(inline_thread *t, const void *addr, uint64_t info)
{
	static const char hex[] = "0123456789abcdef";
	char tmp[32], *e = tmp + sizeof tmp, *q = e;
	uintptr_t a = (uintptr_t)addr;
	unsigned size = (unsigned)(info & 0xffu);
	int digits = 0;
	if (!t->trace)
		return;
	if (t->trace_len > TRACE_BUF - 48)
		rt_trace_flush(t);
	*--q = '\n';
	do {
		*--q = (char)('0' + size % 10);
		size /= 10;
	} while (size);
	*--q = ',';
	do {
		*--q = hex[a & 15];
		a >>= 4;
		digits++;
	} while (a || digits < 8);
	*--q = ' ';
	*--q = (info & REF_STORE_BIT) ? 'S' : 'L';
	*--q = ' ';
	memcpy(t->trace + t->trace_len, q, (size_t)(e - q));
	t->trace_len += (size_t)(e - q);
}

/*
 * A full visit of the slow path (see lomas__slow); pc is the reference's.
 * found: where lomas__slow found the reference's line watched (screened), or
 * NULL; it is checked again here (a signal handler's visit may have changed
 * the table since), so a reuse costs one bucket walk, not two.
 */
static __attribute__((noinline)) void slow_visit(const void *addr, uint64_t info, uintptr_t pc,
                                                 bool screened, const wt_pos *found)
{
	inline_fast *f = &lomas__fast;
	inline_thread *t = f->state;
	uint64_t after = ref_after(info), clock;
	int64_t due = countdown_at(f, info);
	isample s;
	if (f->busy) {
		/* Re-entered from a signal handler, or the thread has exited: count
		 * the reference, visit again at the next one. */
		if (due <= 0) {
			f->zero_clock = f->zero_clock - (uint64_t)due + 1;
			f->countdown = 1 - after;
		}
		return;
	}
	if (!t || t->epoch != atomic_load_explicit(&rt.epoch, memory_order_acquire)) {
		t = thread_attach(f, after);
		if (!t)
			return;
		due = countdown_at(f, info);
	}
	/* A filter hit on an unwatched line (an alias), unless lomas__slow looked
	 * already: only the owner writes the table, so look without the lock. */
	if (!screened && due > 0 && !t->trace && !wt_watched(&t->wt, (uintptr_t)addr))
		return;
	f->busy = 1;
	rt_spin_lock(&t->lock);
	clock = f->zero_clock - (uint64_t)due;
	/* Never backwards. A signal handler whose references visit the slow path
	 * between the load and the store of an interrupted countdown update
	 * (there is such a window in both instrumentations) has its visit's new
	 * countdown overwritten with the old one minus a few: the clock can then
	 * step back, and a sample would end before it started. Move it on
	 * instead (the thread's count gains what it lost). */
	if (clock < t->next_clock) {
		f->zero_clock += t->next_clock - clock;
		clock = t->next_clock;
	}
	t->next_clock = clock + 1;
	if (t->trace)
		trace_put(t, addr, info);
	if (t->burst.on)
		rt_burst_step(t, (uintptr_t)addr, clock);
	if (found && wt_pos_valid(&t->wt, (uintptr_t)addr, found)) {
		wt_end(&t->wt, found, clock, pc, &s);
		push_sample(t, &s);
	} else if (wt_touch(&t->wt, (uintptr_t)addr, clock, pc, &s)) {
		push_sample(t, &s);
	}
	if (clock >= t->next_sample) {
		lomas_ref_kind kind = (info & REF_STORE_BIT) ? LOMAS_REF_STORE : LOMAS_REF_LOAD;
		if ((info & REF_NEXT_KNOWN) &&
		    !((((uintptr_t)addr + (uint64_t)ref_next_offset(info)) ^ (uintptr_t)addr) >>
		      t->wt.line_shift)) {
			/* The next reference reuses the line (distance 0): the sample
			 * is complete now, with no watch, table slot or reuse visit.
			 * Its end pc is its start pc (the reuse's is not known here;
			 * a distance-0 reuse never misses, so no miss is attributed). */
			memset(&s, 0, sizeof s);
			s.start = clock;
			s.end = clock + 1;
			s.addr = (uintptr_t)addr;
			s.start_pc = s.end_pc = pc;
			s.kind = (uint8_t)kind;
			s.state = LOMAS_SAMPLE_REUSED;
			s.level = (uint8_t)(t->level + t->pshift);
			push_sample(t, &s);
		} else {
			if (wt_start(&t->wt, (uintptr_t)addr, clock, pc, kind,
			             (uint8_t)(t->level + t->pshift), &s))
				push_sample(t, &s);
			/* Maybe track this one exactly (burst.c); draws nothing. */
			rt_burst_maybe_start(t, (uintptr_t)addr, clock, pc);
		}
		/* The gap drawn at the last start (or redraw): the countdown the
		 * program resumes with needs no log and no division, which run
		 * after it for the next start. */
		t->next_sample = clock + t->next_gap;
		t->next_gap = rng_gap_with(&t->gaps, t->gap_log);
		if (t->adaptive)
			auto_budget(t, clock);
		if (t->phase)
			phase_step(t, clock, (uintptr_t)addr, pc);
	}
	/* Full-trace mode and a running burst see every reference. */
	if (due <= 0 || t->trace || t->burst.on) {
		uint64_t k = (t->trace || t->burst.on) ? 1 : t->next_sample - clock;
		f->countdown = k - after;
		f->zero_clock = clock + k;
	}
	rt_spin_unlock(&t->lock);
	f->busy = 0;
}

/*
 * The hooks' way out of the fast path: the countdown reached zero (a sample
 * is due, or full-trace mode) or the filter flagged the reference's block.
 * Kept small: a filter hit on a line that is not watched (an alias in the
 * filter, the common case while many samples are open) returns from here
 * after one table lookup, without the lock or the register saves of the full
 * visit.
 */
static inline __attribute__((always_inline)) void slow_entry(const void *addr, uint64_t info,
                                                             uintptr_t pc)
{
	const inline_fast *f = &lomas__fast;
	const inline_thread *t = f->state;
	bool screened = countdown_at(f, info) > 0 && t && !f->busy && !t->trace &&
	                t->epoch == atomic_load_explicit(&rt.epoch, memory_order_relaxed);
	wt_pos pos;
	if (screened) {
		if (!wt_lookup(&t->wt, (uintptr_t)addr, &pos))
			return;
		slow_visit(addr, info, pc, true, &pos);
		return;
	}
	slow_visit(addr, info, pc, false, NULL);
}

/* The sanitizer-coverage hooks' entry. Never inlined, so its return address
 * is next to the reference in the instrumented function. */
__attribute__((noinline, cold)) void lomas__slow(const void *addr, uint64_t info, uintptr_t pc_hint)
{
	slow_entry(addr, info, pc_hint ? pc_hint : (uintptr_t)__builtin_return_address(0));
}

#if LOMAS_HAVE_PRESERVE_MOST
/*
 * The pass plugin's entry: the same, in clang's preserve_most convention (all
 * general registers but r11 survive the call), so a loop that may call it
 * keeps its values in registers instead of spilling them around the call.
 */
__attribute__((noinline, cold, preserve_most)) void lomas__slow_pm(const void *addr, uint64_t info)
{
	slow_entry(addr, info, (uintptr_t)__builtin_return_address(0));
}
#endif

int lomas__range_clean(uint64_t first, uint64_t n)
{
	/* Eight bytes a load; the padding past the end reads as zero. */
	uint32_t i = (uint32_t)first & FILTER_MASK;
	if (n > FILTER_SIZE)
		n = FILTER_SIZE;
	while (n) {
		uint64_t w, take = FILTER_SIZE - i;
		memcpy(&w, lomas__filter + i, sizeof w);
		if (take > 8)
			take = 8;
		if (take > n)
			take = n;
		if (take < 8)
			w &= ((uint64_t)1 << (8 * take)) - 1;
		if (w)
			return 0;
		n -= take;
		i = (i + (uint32_t)take) & FILTER_MASK;
	}
	return 1;
}

/* References the thread has made in its session (exact for the caller). */
uint64_t rt_thread_refs(const inline_thread *t)
{
	return t->fast->zero_clock - t->fast->countdown + 1;
}

/*
 * The thread is exiting: its samples (the open ones dangling from now on)
 * go to the exited threads' arena, compactly, and everything else it held
 * (its state, watch table, store and reserve, trace buffer) is given back
 * or kept for the next thread (rt.spare), so a program that runs threads
 * one after another holds its live threads' samplers plus samples, not a
 * sampler per thread it ever ran (lib/sampler/exited.c).
 */
void rt_key_destructor(void *arg)
{
	inline_thread *t = arg;
	inline_fast *f = &lomas__fast;
	uint64_t epoch;
	/* From here on nothing of this thread is counted (later destructors'
	 * instrumented code, a signal handler's). */
	f->busy = 1;
	f->state = NULL;
	rt_lock();
	epoch = atomic_load(&rt.epoch);
	rt_spin_lock(&t->lock);
	if (t->epoch == epoch && atomic_load(&rt.active)) {
		uint32_t level;
		/* Its samples count toward the process's budget, even the last
		 * few (a short thread may never take AUTO_PUBLISH of them). */
		if (t->adaptive && t->unpublished)
			auto_publish(t);
		level = t->adaptive ? atomic_load(&rt.auto_level) : 0;
		exited_info info = {.tid = t->tid,
		                    .refs = rt_thread_refs(t),
		                    .lost = t->lost,
		                    .base_period = t->base_period,
		                    .index = t->index,
		                    .adaptive = t->adaptive};
		if (t->adaptive)
			rt_thread_to_level(t, level);
		info.level = t->level;
		if (t->wt_mem && !wt_collect(&t->wt, &t->done, &rt_map_alloc))
			info.lost += t->wt.live;
		if (!exited_add(&rt.exited, &rt_map_alloc, &info, &t->done, level,
		                t->adaptive ? auto_floor(level) : 0)) {
			/* No memory for its samples: the thread, at least. */
			info.lost += t->done.n;
			if (!exited_add(&rt.exited, &rt_map_alloc, &info, NULL, level, 0))
				rt.threads_lost++;
		}
	}
	if (t->trace_len)
		rt_trace_flush(t);
	t->wt.filter = NULL; /* the TLS it lives in goes with the thread */
	rt_thread_release_data(t);
	for (inline_thread **pp = &rt.threads; *pp; pp = &(*pp)->next)
		if (*pp == t) {
			*pp = t->next;
			break;
		}
	rt_spin_unlock(&t->lock);
	memset(t, 0, sizeof *t);
	t->next = rt.spare;
	rt.spare = t;
	rt_unlock();
	rt_filter_scrub();
	f->countdown = COUNTDOWN_NEVER;
}

uint32_t lomas__next_thread_index(void)
{
	return atomic_fetch_add(&rt.next_index, 1);
}

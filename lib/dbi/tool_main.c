/*
 * The dbi clock's Valgrind tool ("lomas"): registration and options, the
 * threads (one sampler each, in creation order, as the inline runtime
 * numbers them), thread switches, and the ends of a run: exit, a fatal
 * signal (Valgrind calls the tool's fini before it dies of it), execve (the
 * new program runs natively: --trace-children=no), a forked child (it
 * samples nothing and writes nothing) and the host's request for what has
 * been collected so far (a byte on the --lomas-control FIFO, read at thread
 * switches). Its options come from the host (lib/session/backend_dbi.c):
 *   --lomas-out=PATH         the hand-over file (dump.h), written atomically
 *   --lomas-period=N|auto    --lomas-seed=S  --lomas-line-size=B
 *   --lomas-window=N|auto    --lomas-max-live=N
 *   --lomas-trace=PATH       full trace in lackey format (thread k > 0: PATH.k)
 *   --lomas-control=PATH     a FIFO the host writes 's' (snapshot and stop) to
 *   --lomas-fastpath=ir|helper  the countdown in the IR, or a call per reference
 *   --lomas-phase-guided=yes --lomas-phase-samples=N --lomas-phase-divide=N
 *                            phase-guided sampling (lib/sampler/phase.c)
 *   --lomas-exact-budget=N   exact stack distances' share of references, in
 *                            hundredths of a percent (tool_burst.c; 0: none)
 */
#include "pub_tool_aspacemgr.h"
#include "pub_tool_libcassert.h"
#include "pub_tool_libcbase.h"
#include "pub_tool_libcfile.h"
#include "pub_tool_libcprint.h"
#include "pub_tool_libcproc.h"
#include "pub_tool_machine.h"
#include "pub_tool_mallocfree.h"
#include "pub_tool_options.h"
#include "pub_tool_threadstate.h"
#include "pub_tool_vki.h"
#include "pub_tool_vkiscnums.h"

#include "libvex_guest_amd64.h"

#include "dump.h"
#include "tool.h"

/* Valgrind's own: move an fd out of the client's range (m_libcfile.c). */
extern Int VG_(safe_fd)(Int oldfd);

/* Shadow1 follows the guest state (Valgrind's ThreadArchState, Memcheck's offsets). */
Int lt_cd_offset = (Int)sizeof(VexGuestAMD64State);
uint8_t lt_filter[FILTER_SIZE + FILTER_PAD];
tool_thread *lt_cur;
sampler_budget lt_budget;
sampler_settings lt_settings = {
    .period = 0,
    .seed = 1,
    .max_live = DEFAULT_MAX_LIVE,
    .phase = {.min_samples = PHASE_DEFAULT_SAMPLES, .shift = PHASE_DEFAULT_SHIFT}};
Bool lt_tracing;
Bool lt_sampling = True;
const HChar *lt_trace_path;
const HChar *lt_out_path;
tool_thread **lt_threads;
UInt lt_nthreads;
exited_arena lt_exited;
static UInt threads_cap;
static uint32_t next_index; /* the next thread's: creation order */

uint32_t lt_line_size = 64;
uint64_t lt_window_refs; /* 0 = auto */
static const HChar *control_path;
static Int control_fd = -1;
static ULong control_blocks; /* blocks dispatched at the last look at the FIFO */
static UInt control_calls;
static Bool written_at_exec;

/* tool_thread by Valgrind ThreadId (reused after a thread exits). */
static tool_thread **by_tid;
static UInt by_tid_cap;

/* ---------------------------------------------------------------- memory */

/* Fresh anonymous pages (zero, untouched until used) from Valgrind's address space manager. */
static void *pages_alloc(size_t bytes)
{
	return VG_(am_shadow_alloc)(VG_PGROUNDUP(bytes));
}

static void pages_release(void *mem, size_t bytes)
{
	if (mem)
		VG_(am_munmap_valgrind)((Addr)mem, VG_PGROUNDUP(bytes));
}

static void *pages_grow(void *mem, size_t old, size_t bytes)
{
	void *p = pages_alloc(bytes);
	if (!p)
		return NULL;
	VG_(memcpy)(p, mem, old);
	pages_release(mem, old);
	return p;
}

const inline_alloc lt_alloc = {pages_alloc, pages_release, pages_grow};

/* --------------------------------------------------------------- threads */

int64_t lt_get_cd(const tool_thread *t)
{
	int64_t cd;
	VG_(get_shadow_regs_area)(t->tid, (UChar *)&cd, 1, 0, sizeof cd);
	return cd;
}

void lt_set_cd(const tool_thread *t, int64_t cd)
{
	VG_(set_shadow_regs_area)(t->tid, 1, 0, sizeof cd, (const UChar *)&cd);
}

/* The references a thread has made, while no client code runs: its
 * countdown as it was when it last stopped running client code. */
uint64_t lt_thread_refs(const tool_thread *t)
{
	if (!t->live)
		return t->refs;
	return t->zero_clock - (uint64_t)t->stopped_cd + 1;
}

/* A new thread's sampler (index: creation order), not running yet. */
static tool_thread *thread_new(ThreadId tid)
{
	tool_thread *t;
	if (tid >= by_tid_cap) {
		UInt cap = by_tid_cap ? by_tid_cap : 16;
		while (cap <= tid)
			cap *= 2;
		by_tid = VG_(realloc)("lomas.threads", by_tid, cap * sizeof *by_tid);
		VG_(memset)(by_tid + by_tid_cap, 0, (cap - by_tid_cap) * sizeof *by_tid);
		by_tid_cap = cap;
	}
	if (lt_nthreads == threads_cap) {
		threads_cap = threads_cap ? 2 * threads_cap : 16;
		lt_threads =
		    VG_(realloc)("lomas.threads", lt_threads, threads_cap * sizeof *lt_threads);
	}
	t = VG_(calloc)("lomas.thread", 1, sizeof *t);
	t->wt_size = wt_bytes(lt_settings.max_live);
	t->wt_mem = pages_alloc(t->wt_size);
	t->filter = pages_alloc(FILTER_SIZE + FILTER_PAD);
	if (!t->wt_mem || !t->filter)
		VG_(tool_panic)("lomas: out of memory for a thread's watch table");
	sampler_thread_init(&t->s, &lt_settings, next_index++, t->wt_mem, t->filter, &lt_budget,
	                    &lt_alloc);
	/* Its first reference gets clock 0; the countdown reaches zero at the
	 * first sample. Set in its guest state before it first runs (a new
	 * thread's is its parent's copy until then). */
	t->zero_clock = t->s.next_sample;
	t->cd_init = (int64_t)t->s.next_sample + 1;
	t->stopped_cd = t->cd_init;
	t->cd_pending = True;
	t->tid = tid;
	t->live = True;
	t->trace_fd = -1;
	lt_threads[lt_nthreads++] = t;
	by_tid[tid] = t;
	return t;
}

/* Make t the running thread: its filter to the fixed address. */
static void switch_to(tool_thread *t)
{
	tool_thread *old = lt_cur;
	if (old) {
		VG_(memcpy)(old->filter, lt_filter, sizeof lt_filter);
		old->s.wt.filter = old->filter;
	}
	if (t) {
		VG_(memcpy)(lt_filter, t->filter, sizeof lt_filter);
		t->s.wt.filter = lt_filter;
	} else {
		VG_(memset)(lt_filter, 0, sizeof lt_filter);
	}
	lt_cur = t;
}

/*
 * An ended thread's samples go to the exited threads' arena (lib/sampler/
 * exited.c, as the inline runtime keeps them), compactly, and its
 * tool_thread and store are given back: a program that runs threads one
 * after another holds its live threads' samplers plus the samples, not a
 * sampler per thread it ever ran (each kept ~3 KiB of state and a page or
 * more of every stream of its store: 20k short threads, 180 MB peak RSS).
 * False when the arena has no room: the thread then stays in lt_threads,
 * its store with it.
 */
static Bool thread_archive(tool_thread *t)
{
	uint32_t level = t->s.adaptive ? lt_budget.level : 0;
	exited_info info = {.tid = t->os_tid,
	                    .refs = t->refs,
	                    .lost = t->s.lost,
	                    .base_period = t->s.base_period,
	                    .index = t->s.index,
	                    .level = t->s.level,
	                    .adaptive = t->s.adaptive};
	UInt i = 0;
	if (!exited_add(&lt_exited, &lt_alloc, &info, &t->s.done, level,
	                t->s.adaptive ? auto_floor(level) : 0))
		return False;
	store_free(&t->s.done, &lt_alloc);
	/* lt_threads stays in creation order (the hand-over file's). */
	while (lt_threads[i] != t)
		i++;
	for (; i + 1 < lt_nthreads; i++)
		lt_threads[i] = lt_threads[i + 1];
	lt_nthreads--;
	VG_(free)(t);
	return True;
}

/* A thread has run its last instruction: its open samples become dangling,
 * and it goes to the arena (t is freed then). */
static void thread_end(tool_thread *t)
{
	if (!t->live)
		return;
	t->refs = lt_thread_refs(t);
	if (!t->cd_pending)
		lt_set_cd(t, TOOL_NEVER);
	if (t == lt_cur)
		switch_to(NULL);
	t->live = False;
	sampler_thread_finish(&t->s, &lt_budget, &lt_alloc);
	pages_release(t->wt_mem, t->wt_size);
	pages_release(t->filter, FILTER_SIZE + FILTER_PAD);
	t->wt_mem = NULL;
	t->filter = NULL;
	lt_burst_release(t);
	VG_(memset)(&t->s.wt, 0, sizeof t->s.wt);
	t->s.wt.oldest = t->s.wt.newest = t->s.wt.free_head = WT_NONE;
	if (t->trace_fd >= 0) {
		lt_trace_flush(t);
		VG_(close)(t->trace_fd);
		t->trace_fd = -1;
	}
	thread_archive(t);
}

static void on_thread_create(ThreadId parent, ThreadId child)
{
	(void)parent;
	if (!lt_sampling)
		return;
	if (child < by_tid_cap && by_tid[child])
		thread_end(by_tid[child]);
	thread_new(child);
}

static void on_thread_exit(ThreadId tid)
{
	if (tid < by_tid_cap && by_tid[tid]) {
		thread_end(by_tid[tid]);
		by_tid[tid] = NULL;
	}
}

/* ------------------------------------------------------ the host's requests */

/* Stop sampling for good: nothing is counted or written from now on. */
static void stop_sampling(void)
{
	for (UInt i = 0; i < lt_nthreads; i++)
		if (lt_threads[i]->live && !lt_threads[i]->cd_pending)
			lt_set_cd(lt_threads[i], TOOL_NEVER);
	switch_to(NULL);
	lt_sampling = False;
}

/*
 * A byte on the control FIFO: 's' = write what has been collected (the
 * session detaches: lomas_session_stop) and stop. Looked at every 64 thread
 * switches or 2^18 blocks, so a program that makes many system calls pays
 * for few reads.
 */
static void control_poll(ULong blocks)
{
	HChar c;
	if (control_fd < 0 || (++control_calls & 63 && blocks - control_blocks < (1u << 18)))
		return;
	control_blocks = blocks;
	if (VG_(read)(control_fd, &c, 1) == 1 && c == 's') {
		lt_dump(DUMP_ENDED_SNAPSHOT);
		stop_sampling();
		VG_(close)(control_fd);
		control_fd = -1;
	}
}

static void on_stop_client_code(ThreadId tid, ULong blocks)
{
	tool_thread *t = tid < by_tid_cap ? by_tid[tid] : NULL;
	(void)blocks;
	if (t && t->live && !t->cd_pending)
		t->stopped_cd = lt_get_cd(t);
}

static void on_start_client_code(ThreadId tid, ULong blocks)
{
	tool_thread *t;
	if (!lt_sampling)
		return;
	t = tid < by_tid_cap ? by_tid[tid] : NULL;
	if (!t)
		t = thread_new(tid); /* the main thread (or one created before we looked) */
	if (!t->os_tid)
		t->os_tid = (uint64_t)VG_(gettid)();
	if (t->cd_pending) {
		lt_set_cd(t, t->cd_init);
		t->cd_pending = False;
	}
	if (t != lt_cur)
		switch_to(t);
	control_poll(blocks);
}

/* ------------------------------------------------------------ exec, fork */

/* Is [a, a + len) the client's, readable (and writable if asked)? */
static Bool client_mem(Addr a, SizeT len, Bool write)
{
	return a &&
	       VG_(am_is_valid_for_client)(a, len, VKI_PROT_READ | (write ? VKI_PROT_WRITE : 0));
}

/* Does the NUL-terminated client string s (readable) start with prefix? */
static Bool client_starts(Addr s, const HChar *prefix)
{
	for (SizeT i = 0; prefix[i]; i++)
		if (((i == 0 || (s + i) % VKI_PAGE_SIZE == 0) && !client_mem(s + i, 1, False)) ||
		    ((const HChar *)s)[i] != prefix[i])
			return False;
	return True;
}

/* Is the LD_PRELOAD value at v (client memory) only Valgrind's own
 * preloads ("...vgpreload_..." entries, ':'-separated)? */
static Bool only_valgrind_preloads(Addr v)
{
	const HChar *p = (const HChar *)v;
	Bool in_entry = False, saw_vg = False;
	for (SizeT i = 0; i < 4096; i++) {
		if ((i == 0 || (v + i) % VKI_PAGE_SIZE == 0) && !client_mem(v + i, 1, False))
			return False;
		if (p[i] == ':' || p[i] == '\0') {
			if (in_entry && !saw_vg)
				return False;
			if (p[i] == '\0')
				return True;
			in_entry = saw_vg = False;
			continue;
		}
		in_entry = True;
		if (p[i] == 'v' && client_starts(v + i, "vgpreload_"))
			saw_vg = True;
	}
	return False;
}

/*
 * Before an execve without --trace-children Valgrind takes its preloads out
 * of the new program's LD_PRELOAD, and leaves "LD_PRELOAD=" behind when that
 * was all there was: the new program, run natively, would see a variable it
 * does not see natively. Drop that entry from the envp array (when the array
 * is writable), so the new program gets the environment it would have had.
 */
static void drop_valgrind_preload(Addr envp)
{
	Addr *env = (Addr *)envp;
	SizeT n = 0;
	if (!client_mem(envp, sizeof(Addr), False))
		return;
	while (n < 65536 && client_mem(envp + n * sizeof(Addr), sizeof(Addr), False) && env[n])
		n++;
	if (n == 65536 || !client_mem(envp + n * sizeof(Addr), sizeof(Addr), False))
		return;
	for (SizeT i = 0; i < n; i++) {
		if (!client_starts(env[i], "LD_PRELOAD=") || !only_valgrind_preloads(env[i] + 11))
			continue;
		if (!client_mem(envp, (n + 1) * sizeof(Addr), True))
			return;
		for (SizeT j = i; j < n; j++)
			env[j] = env[j + 1];
		n--;
		i--;
	}
}

static void pre_syscall(ThreadId tid, UInt sysno, UWord *args, UInt nargs)
{
	(void)args, (void)nargs;
	/* A signal handler returns: Valgrind is about to restore the thread's
	 * shadow state (the countdown with it) from the signal's frame. Keep
	 * the countdown the handler left, to put back (on_post_deliver). */
	if (sysno == __NR_rt_sigreturn && lt_sampling && tid < by_tid_cap && by_tid[tid] &&
	    !by_tid[tid]->cd_pending) {
		by_tid[tid]->sig_cd = lt_get_cd(by_tid[tid]);
		by_tid[tid]->sig_cd_valid = True;
	}
	/* Without --trace-children the new program runs natively and this
	 * process never reaches fini: hand over what it collected now. (If
	 * the exec fails, the run goes on and fini writes the file again.) */
	if (sysno == __NR_execve && nargs >= 3)
		drop_valgrind_preload(args[2]);
	else if (sysno == __NR_execveat && nargs >= 4)
		drop_valgrind_preload(args[3]);
	if (lt_sampling && (sysno == __NR_execve || sysno == __NR_execveat)) {
		for (UInt i = 0; i < lt_nthreads; i++)
			if (lt_threads[i]->trace_fd >= 0)
				lt_trace_flush(lt_threads[i]);
		written_at_exec = lt_dump(DUMP_ENDED_EXEC);
	}
}

static void post_syscall(ThreadId tid, UInt sysno, UWord *args, UInt nargs, SysRes res)
{
	(void)tid, (void)sysno, (void)args, (void)nargs, (void)res;
}

static void on_post_deliver(ThreadId tid, Int sig)
{
	tool_thread *t = tid < by_tid_cap ? by_tid[tid] : NULL;
	(void)sig;
	if (t && t->sig_cd_valid) {
		lt_set_cd(t, lt_sampling ? t->sig_cd : TOOL_NEVER);
		t->sig_cd_valid = False;
	}
}

static void on_fork_child(ThreadId tid)
{
	/* A forked child (without exec) samples nothing and writes nothing. */
	int64_t never = TOOL_NEVER;
	lt_sampling = False;
	lt_cur = NULL;
	VG_(set_shadow_regs_area)(tid, 1, 0, sizeof never, (const UChar *)&never);
	VG_(memset)(lt_filter, 0, sizeof lt_filter);
	for (UInt i = 0; i < lt_nthreads; i++)
		lt_threads[i]->trace_fd = -1; /* the parent's files */
	control_fd = -1;
}

/* --------------------------------------------------------------- options */

/* "auto" (0) or a decimal integer >= 1 (with *min). */
static Bool parse_u64(const HChar *v, Bool allow_auto, ULong min, ULong max, ULong *out)
{
	HChar *end;
	ULong x;
	if (allow_auto && VG_STREQ(v, "auto")) {
		*out = 0;
		return True;
	}
	if (*v < '0' || *v > '9')
		return False;
	x = VG_(strtoull10)(v, &end);
	if (*end || x < min || x > max)
		return False;
	*out = x;
	return True;
}

static Bool process_option(const HChar *arg)
{
	const HChar *v;
	ULong x;
	if VG_STR_CLO (arg, "--lomas-out", lt_out_path) {
	} else if VG_STR_CLO (arg, "--lomas-trace", lt_trace_path) {
	} else if VG_STR_CLO (arg, "--lomas-control", control_path) {
	} else if VG_STR_CLO (arg, "--lomas-period", v) {
		if (!parse_u64(v, True, 1, ~0ull, &x))
			VG_(fmsg_bad_option)(arg, "not a period >= 1 or auto\n");
		lt_settings.period = x;
	} else if VG_STR_CLO (arg, "--lomas-seed", v) {
		if (!parse_u64(v, False, 0, ~0ull, &x))
			VG_(fmsg_bad_option)(arg, "not a 64-bit unsigned integer\n");
		lt_settings.seed = x;
	} else if VG_STR_CLO (arg, "--lomas-line-size", v) {
		if (!parse_u64(v, False, 8, 65536, &x) || (x & (x - 1)))
			VG_(fmsg_bad_option)(arg, "not a power of two from 8 to 65536\n");
		lt_line_size = (uint32_t)x;
	} else if VG_STR_CLO (arg, "--lomas-window", v) {
		if (!parse_u64(v, True, 1, ~0ull, &x))
			VG_(fmsg_bad_option)(arg, "not a window >= 1 or auto\n");
		lt_window_refs = x;
	} else if VG_STR_CLO (arg, "--lomas-max-live", v) {
		if (!parse_u64(v, False, 1, 1u << 24, &x))
			VG_(fmsg_bad_option)(arg, "not a slot count from 1 to 16777216\n");
		lt_settings.max_live = (uint32_t)x;
	} else if VG_BOOL_CLO (arg, "--lomas-phase-guided", lt_settings.phase_guided) {
	} else if VG_STR_CLO (arg, "--lomas-phase-samples", v) {
		if (!parse_u64(v, False, 1, 0xffffffffull, &x))
			VG_(fmsg_bad_option)(arg, "not a sample count >= 1\n");
		lt_settings.phase.min_samples = (uint32_t)x;
	} else if VG_STR_CLO (arg, "--lomas-phase-divide", v) {
		/* A power of two: a sample's weight is base period x 2^level. */
		if (!parse_u64(v, False, 2, 1u << PHASE_MAX_SHIFT, &x) || (x & (x - 1)))
			VG_(fmsg_bad_option)(arg, "not a power of two from 2 to 1024\n");
		lt_settings.phase.shift = (uint8_t)__builtin_ctzll(x);
	} else if VG_STR_CLO (arg, "--lomas-exact-budget", v) {
		/* Percent of references, in hundredths (the host writes 2% as 200). */
		if (!parse_u64(v, False, 0, 10000, &x))
			VG_(fmsg_bad_option)(arg, "not hundredths of a percent from 0 to 10000\n");
		lt_exact_budget = (double)x / 10000.0;
	} else if VG_STR_CLO (arg, "--lomas-fastpath", v) {
		if (VG_STREQ(v, "helper"))
			lt_helper_per_ref = True;
		else if (!VG_STREQ(v, "ir"))
			VG_(fmsg_bad_option)(arg, "not ir or helper\n");
	} else {
		return False;
	}
	return True;
}

static void print_usage(void)
{
	VG_(printf)
	("    --lomas-out=PATH          hand-over file for liblomas [required]\n"
	 "    --lomas-period=N|auto     mean sampling period in references [auto]\n"
	 "    --lomas-seed=S            seed of the sampling generator [1]\n"
	 "    --lomas-line-size=B       cache line size in bytes [64]\n"
	 "    --lomas-window=N|auto     window length in references [auto]\n"
	 "    --lomas-max-live=N        watch-table slots per thread [8192]\n"
	 "    --lomas-trace=PATH        also write every reference (lackey format)\n"
	 "    --lomas-control=PATH      FIFO on which liblomas asks for a snapshot\n"
	 "    --lomas-fastpath=ir|helper  countdown in the IR or a call per reference [ir]\n"
	 "    --lomas-exact-budget=N    exact distances' share of references, 1/100 %% [500]\n"
	 "    --lomas-phase-guided=no|yes  lower the rate inside known phases [no]\n"
	 "    --lomas-phase-samples=N   a phase's samples before its rate drops [2000]\n"
	 "    --lomas-phase-divide=N    the rate there divided by N, a power of two [16]\n");
}

static void print_debug_usage(void)
{
	VG_(printf)("    (none)\n");
}

/* ------------------------------------------------------- start and finish */

static void post_clo_init(void)
{
	if (!lt_out_path) {
		VG_(fmsg)("lomas: --lomas-out=PATH is required (the tool is run by liblomas)\n");
		VG_(exit)(1);
	}
	lt_settings.window = lt_window_refs;
	lt_settings.line_shift = 0;
	while ((1u << lt_settings.line_shift) < lt_line_size)
		lt_settings.line_shift++;
	lt_tracing = lt_trace_path != NULL;
	if (control_path) {
		SysRes r = VG_(open)(control_path, VKI_O_RDONLY | VKI_O_NONBLOCK, 0);
		if (sr_isError(r))
			VG_(umsg)("lomas: cannot open the control FIFO %s\n", control_path);
		else
			control_fd = VG_(safe_fd)((Int)sr_Res(r));
	}
	VG_(track_start_client_code)(on_start_client_code);
	VG_(track_stop_client_code)(on_stop_client_code);
	VG_(track_pre_thread_ll_create)(on_thread_create);
	VG_(track_pre_thread_ll_exit)(on_thread_exit);
	VG_(track_post_deliver_signal)(on_post_deliver);
	VG_(atfork)(NULL, NULL, on_fork_child);
}

static void fini(Int exitcode)
{
	(void)exitcode;
	if (!lt_sampling)
		return;
	for (UInt i = 0; i < lt_nthreads; i++)
		if (lt_threads[i]->trace_fd >= 0)
			lt_trace_flush(lt_threads[i]);
	lt_dump(DUMP_ENDED_EXIT);
	(void)written_at_exec;
}

static void pre_clo_init(void)
{
	VG_(details_name)("lomas");
	VG_(details_version)(LOMAS_TOOL_VERSION);
	VG_(details_description)("the dbi clock of liblomas");
	VG_(details_copyright_author)("liblomas contributors (MIT)");
	VG_(details_bug_reports_to)("the liblomas repository");
	VG_(details_avg_translation_sizeB)(400);
	VG_(basic_tool_funcs)(post_clo_init, lt_instrument, fini);
	VG_(needs_command_line_options)(process_option, print_usage, print_debug_usage);
	VG_(needs_syscall_wrapper)(pre_syscall, post_syscall);
}

VG_DETERMINE_INTERFACE_VERSION(pre_clo_init)

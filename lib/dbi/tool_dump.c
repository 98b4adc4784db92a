/*
 * The tool's output: the hand-over file for the host (dump.h), written to a
 * temporary name and renamed, so the host sees it whole or not at all, and
 * the full trace of full-trace mode (Valgrind lackey's format, a file per
 * thread). The tool has no libc: Valgrind's own I/O, buffered here.
 */
#include "pub_tool_aspacemgr.h"
#include "pub_tool_libcbase.h"
#include "pub_tool_libcfile.h"
#include "pub_tool_libcprint.h"
#include "pub_tool_libcproc.h"
#include "pub_tool_mallocfree.h"
#include "pub_tool_vki.h"

#include "dump.h"
#include "tool.h"

extern Int VG_(safe_fd)(Int oldfd);

#define OUT_BUF (64u * 1024u)

typedef struct writer {
	Int fd;
	Bool failed;
	UInt len;
	HChar *buf;
} writer;

static void w_flush(writer *w)
{
	UInt off = 0;
	while (!w->failed && off < w->len) {
		Int n = VG_(write)(w->fd, w->buf + off, (Int)(w->len - off));
		if (n <= 0)
			w->failed = True;
		else
			off += (UInt)n;
	}
	w->len = 0;
}

static void w_put(writer *w, const void *p, SizeT n)
{
	const HChar *s = p;
	while (n) {
		SizeT take = OUT_BUF - w->len < n ? OUT_BUF - w->len : n;
		VG_(memcpy)(w->buf + w->len, s, take);
		w->len += (UInt)take;
		s += take;
		n -= take;
		if (w->len == OUT_BUF)
			w_flush(w);
	}
}

/* An fd for path in Valgrind's own range (the program never sees it), or -1. */
static Int open_private(const HChar *path, Int flags)
{
	SysRes r = VG_(open)(path, flags, 0644);
	if (sr_isError(r))
		return -1;
	return VG_(safe_fd)((Int)sr_Res(r));
}

/* The open samples of t as one block of packed records, dangling (the
 * table is not changed: the run may go on after a snapshot). */
static void put_open_block(writer *w, const tool_thread *t)
{
	const watch_table *wt = &t->s.wt;
	dump_block b = {.floor = t->s.done.level, .n = wt->live};
	isample prev, s;
	uint8_t *buf, *q;
	if (!wt->live)
		return;
	buf = VG_(malloc)("lomas.dump.open", (SizeT)wt->live * PACKED_MAX_RECORD);
	q = buf;
	VG_(memset)(&prev, 0, sizeof prev);
	for (uint32_t i = wt->oldest; i != WT_NONE; i = wt->slots[i].newer) {
		wt_slot_to_dangling(&wt->slots[i], &s);
		q = packed_put(q, &s, &prev);
		prev = s;
	}
	b.len = (uint64_t)(q - buf);
	w_put(w, &b, sizeof b);
	w_put(w, buf, (SizeT)b.len);
	VG_(free)(buf);
}

/* A thread (d, less its block count) with the streams of st as blocks,
 * then t's open samples (t: NULL for none). */
static void put_blocks(writer *w, dump_thread *d, const sample_store *st, const tool_thread *t)
{
	profile_sample_block blk;
	unsigned k = 0;
	while (store_next_block(st, &k, 0, 0, &blk))
		d->nblocks++;
	if (t && t->s.wt.live)
		d->nblocks++;
	w_put(w, d, sizeof *d);
	k = 0;
	while (store_next_block(st, &k, 0, 0, &blk)) {
		dump_block b = {.floor = blk.level_floor, .n = blk.n, .len = blk.len};
		w_put(w, &b, sizeof b);
		w_put(w, blk.data, blk.len);
	}
	if (t)
		put_open_block(w, t);
}

static void put_thread(writer *w, tool_thread *t)
{
	dump_thread d;
	/* Bring the thread to the process's period (auto), as the inline
	 * runtime's exit path does, so the profile holds the budget. */
	if (t->s.adaptive)
		sampler_thread_to_level(&t->s, lt_budget.level, &lt_alloc);
	VG_(memset)(&d, 0, sizeof d);
	d.index = t->s.index;
	d.tid = t->os_tid;
	d.refs = lt_thread_refs(t);
	d.base_period = t->s.base_period;
	d.level = t->s.level;
	put_blocks(w, &d, &t->s.done, t);
}

/* An ended thread, from its record in the arena (its open samples are in
 * it, dangling). */
static void put_exited(writer *w, const exited_rec *r)
{
	dump_thread d;
	sample_store view;
	exited_view(r, &view);
	VG_(memset)(&d, 0, sizeof d);
	d.index = r->index;
	d.tid = r->tid;
	d.refs = r->refs;
	d.base_period = r->base_period;
	d.level = r->level;
	put_blocks(w, &d, &view, NULL);
}

static Int by_index(const void *a, const void *b)
{
	uint32_t x = (*(const exited_rec *const *)a)->index;
	uint32_t y = (*(const exited_rec *const *)b)->index;
	return (x > y) - (x < y);
}

/* The program's file mappings (for symbolization), as the address space manager knows them. */
static UInt put_maps(writer *w, Bool count_only)
{
	Int cap = 256, n;
	Addr *starts = VG_(malloc)("lomas.dump.maps", (SizeT)cap * sizeof *starts);
	UInt written = 0;
	/* A negative count: the buffer was too small by that much. */
	while ((n = VG_(am_get_segment_starts)(SkFileC, starts, cap)) < 0) {
		cap = -n;
		starts = VG_(realloc)("lomas.dump.maps", starts, (SizeT)cap * sizeof *starts);
	}
	for (Int i = 0; i < n; i++) {
		NSegment const *seg = VG_(am_find_nsegment)(starts[i]);
		const HChar *path;
		dump_map m;
		if (!seg || seg->kind != SkFileC)
			continue;
		path = VG_(am_get_filename)(seg);
		written++;
		if (count_only)
			continue;
		m.start = seg->start;
		m.end = seg->end + 1; /* NSegment.end is the last byte */
		m.offset = (uint64_t)seg->offset;
		m.prot = (seg->hasR ? 1u : 0) | (seg->hasW ? 2u : 0) | (seg->hasX ? 4u : 0);
		m.path_len = path ? (uint32_t)VG_(strlen)(path) : 0;
		w_put(w, &m, sizeof m);
		if (m.path_len)
			w_put(w, path, m.path_len);
	}
	VG_(free)(starts);
	return written;
}

Bool lt_dump(Int ended)
{
	SizeT plen = VG_(strlen)(lt_out_path);
	HChar *tmp = VG_(malloc)("lomas.dump.path", plen + 8);
	dump_header h;
	uint64_t lost = 0;
	writer w = {.fd = -1};
	const exited_rec **recs, *r = NULL;
	UInt nrecs = 0, i = 0, j = 0;
	VG_(snprintf)(tmp, (Int)(plen + 8), "%s.tmp", lt_out_path);
	w.fd = open_private(tmp, VKI_O_WRONLY | VKI_O_CREAT | VKI_O_TRUNC);
	if (w.fd < 0) {
		VG_(umsg)("lomas: cannot create %s\n", tmp);
		VG_(free)(tmp);
		return False;
	}
	w.buf = VG_(malloc)("lomas.dump.buf", OUT_BUF);
	/* The ended threads: brought to the process's period (auto), as the
	 * inline runtime does its arena, and in creation order with the live
	 * ones (the reader wants thread k k-th; the arena holds them in the
	 * order they ended). */
	if (lt_settings.period == 0)
		exited_thin(&lt_exited, lt_budget.level, auto_floor(lt_budget.level));
	recs = VG_(malloc)("lomas.dump.exited", (lt_exited.count + 1) * sizeof *recs);
	while ((r = exited_next(&lt_exited, r))) {
		recs[nrecs++] = r;
		lost += r->lost;
	}
	VG_(ssort)(recs, nrecs, sizeof *recs, by_index);
	VG_(memset)(&h, 0, sizeof h);
	VG_(memcpy)(h.magic, DUMP_MAGIC, sizeof h.magic);
	h.version = DUMP_VERSION;
	h.header_bytes = sizeof h;
	h.line_size = lt_line_size;
	h.max_live = lt_settings.max_live;
	h.period = lt_settings.period;
	h.seed = lt_settings.seed;
	h.window = lt_window_refs;
	/* Phase-guided: the window the sampler judged phases by, as the inline
	 * runtime's profile has it (phase_window_refs; the threads are at the
	 * process's level). */
	if (!h.window && lt_settings.phase_guided)
		h.window = phase_window_refs(
		    0,
		    (lt_settings.period ? (double)lt_settings.period : AUTO_START_PERIOD) *
		        (double)(1ull << lt_budget.level),
		    lt_settings.phase.shift);
	h.nthreads = lt_nthreads + nrecs;
	h.nmaps = put_maps(&w, True);
	h.auto_level = lt_budget.level;
	h.flags =
	    (lt_tracing ? DUMP_FLAG_TRACE : 0) | (lt_exact_budget > 0.0 ? DUMP_FLAG_EXACT : 0);
	h.ended = ended;
	h.pid = (uint64_t)VG_(getpid)();
	for (UInt k = 0; k < lt_nthreads; k++)
		lost += lt_threads[k]->s.lost;
	h.lost = lost;
	VG_(snprintf)(h.valgrind_version, sizeof h.valgrind_version, "%s", LOMAS_VALGRIND_VERSION);
	VG_(snprintf)(h.tool_version, sizeof h.tool_version, "%s", LOMAS_TOOL_VERSION);
	w_put(&w, &h, sizeof h);
	while (i < lt_nthreads || j < nrecs) {
		if (j == nrecs || (i < lt_nthreads && lt_threads[i]->s.index < recs[j]->index))
			put_thread(&w, lt_threads[i++]);
		else
			put_exited(&w, recs[j++]);
	}
	VG_(free)(recs);
	put_maps(&w, False);
	if (h.flags & DUMP_FLAG_EXACT) {
		dump_exact_head e = {.n = lt_nexact,
		                     .bursts = lt_bursts,
		                     .refs = lt_burst_refs,
		                     .budget = lt_exact_budget};
		w_put(&w, &e, sizeof e);
		if (lt_nexact)
			w_put(&w, lt_exact, (SizeT)(lt_nexact * sizeof *lt_exact));
	}
	w_flush(&w);
	VG_(close)(w.fd);
	VG_(free)(w.buf);
	if (w.failed || VG_(rename)(tmp, lt_out_path) != 0) {
		VG_(umsg)("lomas: cannot write %s\n", lt_out_path);
		VG_(unlink)(tmp);
		VG_(free)(tmp);
		return False;
	}
	VG_(free)(tmp);
	return True;
}

/* ------------------------------------------------------------ full trace */

void lt_trace_open(tool_thread *t)
{
	HChar *path;
	SizeT plen = VG_(strlen)(lt_trace_path) + 16;
	path = VG_(malloc)("lomas.trace.path", plen);
	if (t->s.index == 0)
		VG_(snprintf)(path, (Int)plen, "%s", lt_trace_path);
	else
		VG_(snprintf)(path, (Int)plen, "%s.%u", lt_trace_path, t->s.index);
	t->trace_fd = open_private(path, VKI_O_WRONLY | VKI_O_CREAT | VKI_O_TRUNC);
	if (t->trace_fd < 0)
		VG_(umsg)("lomas: cannot create the trace %s\n", path);
	VG_(free)(path);
	if (!t->trace)
		t->trace = VG_(malloc)("lomas.trace.buf", OUT_BUF);
	t->trace_len = 0;
}

void lt_trace_flush(tool_thread *t)
{
	writer w = {.fd = t->trace_fd, .buf = t->trace, .len = (UInt)t->trace_len};
	if (t->trace_fd >= 0)
		w_flush(&w);
	t->trace_len = 0;
}

/* Lowercase hex of v, at least 8 digits (lackey's "%08lx"), at q; returns the end. */
static HChar *put_hex(HChar *q, uint64_t v)
{
	static const HChar digits[] = "0123456789abcdef";
	HChar tmp[16];
	Int n = 0;
	do {
		tmp[n++] = digits[v & 15];
		v >>= 4;
	} while (v || n < 8);
	while (n)
		*q++ = tmp[--n];
	return q;
}

static HChar *put_dec(HChar *q, uint64_t v)
{
	HChar tmp[20];
	Int n = 0;
	do {
		tmp[n++] = (HChar)('0' + v % 10);
		v /= 10;
	} while (v);
	while (n)
		*q++ = tmp[--n];
	return q;
}

void lt_trace_put(tool_thread *t, Addr addr, ULong info, Bool store, Addr pc)
{
	HChar *q;
	if (!t->trace)
		lt_trace_open(t);
	if (t->trace_fd < 0)
		return;
	if (t->trace_len > OUT_BUF - 96)
		lt_trace_flush(t);
	q = t->trace + t->trace_len;
	if (pc != t->trace_pc) {
		/* "I  %08lx,%lu": the instruction, whose pc the reader gives the references after
		 * it */
		*q++ = 'I';
		*q++ = ' ';
		*q++ = ' ';
		q = put_hex(q, pc);
		*q++ = ',';
		q = put_dec(q, (info >> INFO_ILEN_SHIFT) & 0xf);
		*q++ = '\n';
		t->trace_pc = pc;
	}
	*q++ = ' ';
	*q++ = store ? 'S' : 'L';
	*q++ = ' ';
	q = put_hex(q, addr);
	*q++ = ',';
	q = put_dec(q, info & INFO_SIZE_MASK);
	*q++ = '\n';
	t->trace_len = (SizeT)(q - t->trace);
}

/*
 * Decoding the instruction at a traced process's rip: reading its bytes and
 * the per-address template cache.
 *
 * The cache is direct-mapped, indexed by the low bits of the pc, with
 * DECODE_CACHE_SLOTS slots (bounded memory, about 1.4 MiB, allocated lazily by
 * calloc). Instructions less than DECODE_CACHE_SLOTS bytes apart never
 * collide, so any loop body smaller than that decodes once; an instruction
 * mapping to an occupied slot replaces it (an eviction). Only the register-
 * independent template is cached; addresses are recomputed per call.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/uio.h>

#include "decode_impl.h"

#define PAGE_BYTES 4096u /* x86-64 base page: reads split at this boundary */

struct cache_slot {
	bool valid;
	tmpl t;
};

lomas_status decoder_new(decoder **out)
{
	decoder *d;
	cs_err err;
	if (!out)
		return error_set(LOMAS_EINVAL, "decoder_new: NULL argument");
	*out = NULL;
	d = calloc(1, sizeof *d);
	if (!d)
		return error_set(LOMAS_ENOMEM, "decoder_new: out of memory");
	err = cs_open(CS_ARCH_X86, CS_MODE_64, &d->cs);
	if (err != CS_ERR_OK) {
		free(d);
		return error_set(err == CS_ERR_MEM ? LOMAS_ENOMEM : LOMAS_ENOTSUP,
		                 "capstone: cs_open: %s", cs_strerror(err));
	}
	err = cs_option(d->cs, CS_OPT_DETAIL, CS_OPT_ON);
	if (err == CS_ERR_OK)
		d->ci = cs_malloc(d->cs);
	d->cache = calloc(DECODE_CACHE_SLOTS, sizeof *d->cache);
	if (err != CS_ERR_OK || !d->ci || !d->cache) {
		decoder_free(d);
		return error_set(err != CS_ERR_OK ? LOMAS_ENOTSUP : LOMAS_ENOMEM, "capstone: %s",
		                 err != CS_ERR_OK ? cs_strerror(err) : "out of memory");
	}
	*out = d;
	return LOMAS_OK;
}

void decoder_free(decoder *d)
{
	if (!d)
		return;
	if (d->ci)
		cs_free(d->ci, 1);
	cs_close(&d->cs);
	free(d->cache);
	free(d);
}

/* Read up to DECODE_MAX_LEN bytes at pc with PTRACE_PEEKDATA; stops at the first unreadable word.
 */
static size_t read_peek(const decoder *d, pid_t pid, uint64_t pc, uint8_t *buf)
{
	size_t got = 0;
	uint64_t word = pc & ~(uint64_t)7;
	while (got < DECODE_MAX_LEN) {
		long v;
		size_t skip = (size_t)(pc + got - word), n;
		errno = 0;
		v = d->mem.peek ? d->mem.peek(pid, word)
		                : ptrace(PTRACE_PEEKDATA, pid, (void *)(uintptr_t)word, NULL);
		if (errno != 0)
			break;
		n = sizeof v - skip;
		if (n > DECODE_MAX_LEN - got)
			n = DECODE_MAX_LEN - got;
		memcpy(buf + got, (const uint8_t *)&v + skip, n);
		got += n;
		word += sizeof v;
	}
	return got;
}

/*
 * Read the code at pc into buf; *got is how many bytes could be read (a read
 * that runs into an unmapped page stops there: the remote range is split at
 * the page boundary, and process_vm_readv transfers whole iovecs).
 */
static lomas_status read_code(const decoder *d, pid_t pid, uint64_t pc, uint8_t *buf, size_t *got)
{
	*got = 0;
	if (!d->peek_only) {
		uint64_t page_end = (pc | (PAGE_BYTES - 1)) + 1;
		size_t n1 =
		    page_end - pc < DECODE_MAX_LEN ? (size_t)(page_end - pc) : DECODE_MAX_LEN;
		struct iovec local = {buf, DECODE_MAX_LEN};
		struct iovec remote[2] = {
		    {(void *)(uintptr_t)pc, n1},
		    {(void *)(uintptr_t)page_end, DECODE_MAX_LEN - n1},
		};
		unsigned long nremote = n1 < DECODE_MAX_LEN ? 2 : 1;
		ssize_t r = d->mem.vm_readv ? d->mem.vm_readv(pid, &local, 1, remote, nremote, 0)
		                            : process_vm_readv(pid, &local, 1, remote, nremote, 0);
		if (r > 0) {
			*got = (size_t)r;
			return LOMAS_OK;
		}
		if (r < 0 && errno != EPERM && errno != ENOSYS) {
			if (errno == ESRCH)
				return error_set(LOMAS_ETARGET,
				                 "reading code of pid %d: no such process",
				                 (int)pid);
			return error_set(LOMAS_ETARGET,
			                 "cannot read code of pid %d at 0x%" PRIx64 ": %s",
			                 (int)pid, pc, strerror(errno));
		}
	}
	*got = read_peek(d, pid, pc, buf);
	if (*got == 0)
		return error_set(LOMAS_ETARGET, "cannot read code of pid %d at 0x%" PRIx64 ": %s",
		                 (int)pid, pc, errno ? strerror(errno) : "unreadable");
	return LOMAS_OK;
}

lomas_status decoder_at(decoder *d, pid_t pid, const struct user_regs_struct *regs,
                        decode_insn *out)
{
	struct cache_slot *s;
	uint64_t pc;
	uint8_t buf[DECODE_MAX_LEN];
	size_t got;
	tmpl t;
	lomas_status st;

	if (!d || !regs || !out)
		return error_set(LOMAS_EINVAL, "decoder_at: NULL argument");
	pc = regs->rip;
	s = &d->cache[pc & (DECODE_CACHE_SLOTS - 1)];
	if (s->valid && s->t.pc == pc) {
		d->stats.hits++;
		tmpl_eval(&s->t, regs, out);
		return LOMAS_OK;
	}
	d->stats.misses++;
	st = read_code(d, pid, pc, buf, &got);
	if (st != LOMAS_OK)
		return st;
	st = tmpl_build(d, buf, got, pc, &t);
	if (st != LOMAS_OK)
		return st;
	if (s->valid)
		d->stats.evictions++;
	else
		d->stats.cached++;
	s->t = t;
	s->valid = true;
	tmpl_eval(&s->t, regs, out);
	return LOMAS_OK;
}

static void drop_if_overlapping(decoder *d, struct cache_slot *s, uint64_t start, uint64_t end)
{
	if (s->valid && s->t.pc < end && s->t.pc + s->t.len > start) {
		s->valid = false;
		d->stats.cached--;
	}
}

void decoder_invalidate(decoder *d, uint64_t start, uint64_t end)
{
	uint64_t first;
	if (!d || end <= start)
		return;
	/*
	 * An instruction overlapping [start, end) starts in [start - 14, end).
	 * Small ranges (a poked breakpoint, a patched word) visit just those
	 * slots; larger ones scan the whole table.
	 */
	first = start >= DECODE_MAX_LEN - 1 ? start - (DECODE_MAX_LEN - 1) : 0;
	if (end - first < DECODE_CACHE_SLOTS) {
		for (uint64_t a = first; a < end; a++)
			drop_if_overlapping(d, &d->cache[a & (DECODE_CACHE_SLOTS - 1)], start, end);
		return;
	}
	for (size_t i = 0; i < DECODE_CACHE_SLOTS; i++)
		drop_if_overlapping(d, &d->cache[i], start, end);
}

void decoder_stats(const decoder *d, decode_stats *out)
{
	if (d && out)
		*out = d->stats;
}

void decoder_set_peek_only(decoder *d, bool on)
{
	if (d)
		d->peek_only = on;
}

void decoder_set_mem_ops(decoder *d, const decode_mem_ops *ops)
{
	if (d)
		d->mem = ops ? *ops : (decode_mem_ops){0};
}

/*
 * Fuzz target for the perf sample ring reader (lib/pmu/ring.c): the input is
 * a ring's control fields and data area, as a kernel (or a corrupted page)
 * could leave them.
 *
 * Input: byte 0 flags, byte 1 the data size (2^n bytes, as perf_mmap()
 * makes it; the mapping is one page more), 3-10 data_tail, 11-18
 * data_head, byte 19 how many records a read may return, then the bytes of
 * the data area, laid in from the tail on (so records straddle the end as
 * often as the tail sits near it).
 *   flags bit 0: data_offset/data_size taken raw from bytes 20-35 (a page
 *                whose geometry lies: the reader must refuse it, never
 *                index outside the mapping);
 *   flags bit 1: data_head raw (else tail + head % (size + 1): a sane head);
 *   flags bit 2: a sample_type drawn from bytes 1-2 (fields ring.c lays out
 *                or not) instead of the clock's PMU_RING_SAMPLE_TYPE;
 *   flags bit 3: round trip: the data bytes are record specs, laid out by
 *                pmu_record_layout (and THROTTLE by hand) into a ring that
 *                wraps, then read back in reads of at most max records:
 *                every sample must come back equal, in order, and LOST must
 *                add up, with nothing counted corrupt.
 * The mapping is malloc'd at its exact length with the data area at its
 * end, so a read past it is a sanitizer report. After every read: no more
 * than max samples, the tail never passes the head nor moves backwards.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pmu/pmu.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define HDR 20
#define MAX_OUT 32

static uint64_t get(const uint8_t *p, unsigned n)
{
	uint64_t v = 0;
	for (unsigned i = 0; i < n; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

static void check(bool ok)
{
	if (!ok)
		abort();
}

/* Put n bytes at the ring's head, wrapping (the kernel's writer, written apart from ring.c's). */
static void put(unsigned char *area, uint64_t asize, uint64_t *head, const void *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		area[(*head + i) % asize] = ((const unsigned char *)b)[i];
	*head += n;
}

/* Read once and check what every read must hold; the number of samples. */
static unsigned read_once(struct perf_event_mmap_page *pg, size_t len, uint64_t st_type,
                          pmu_record *out, unsigned max, pmu_ring_stats *st)
{
	uint64_t tail0 = pg->data_tail, head = pg->data_head, corrupt0 = st->corrupt;
	unsigned n = pmu_ring_read(pg, len, st_type, out, max, st);
	check(n <= max);
	check(pg->data_head == head); /* the head is the kernel's: never written */
	/* The tail moves forward, to the head at most, unless the ring was given up on. */
	if (st->corrupt == corrupt0)
		check(pg->data_tail - tail0 <= head - tail0);
	for (unsigned i = 0; i < n; i++)
		check(out[i].type == PERF_RECORD_SAMPLE);
	return n;
}

/* Raw mode: whatever the bytes say. */
static void raw(const uint8_t *d, size_t sz, long ps)
{
	unsigned flags = d[0];
	uint64_t asize = (uint64_t)8 << d[1] % 12, tail = get(d + 3, 8), head = get(d + 11, 8),
	         st_type = PMU_RING_SAMPLE_TYPE;
	unsigned max = 1 + d[19] % MAX_OUT;
	size_t len = (size_t)ps + (size_t)asize;
	unsigned char *mem = calloc(1, len);
	struct perf_event_mmap_page *pg = (struct perf_event_mmap_page *)mem;
	pmu_record out[MAX_OUT];
	pmu_ring_stats st = {0};
	const uint8_t *body = d + HDR;
	size_t blen = sz - HDR;
	if (!mem)
		return;
	pg->data_offset = len - asize; /* the data area ends where the mapping does */
	pg->data_size = asize;
	if (flags & 1 && blen >= 16) {
		pg->data_offset = get(body, 8);
		pg->data_size = get(body + 8, 8);
		body += 16;
		blen -= 16;
	}
	if (!(flags & 2))
		head = tail + head % (asize + 1);
	if (flags & 4)
		st_type = get(d + 1, 2) * 0x9e3779b97f4a7c15ull & 0xffffull;
	pg->data_tail = tail;
	pg->data_head = head;
	for (size_t i = 0; i < blen && i < asize; i++)
		mem[len - asize + (tail + i) % asize] = body[i];
	/* Read until nothing more comes: a ring is drained in a bounded number of reads. */
	for (int round = 0; round < 64; round++)
		if (!read_once(pg, len, st_type, out, max, &st))
			break;
	/* No record is shorter than its 8-byte header: never more samples than that allows. */
	check(st.samples <= asize / 8 || (flags & 1));
	free(mem);
}

/* Round trip: records laid out as the kernel would, read back exactly. */
static void round_trip(const uint8_t *d, size_t sz, long ps)
{
	uint64_t asize = (uint64_t)64 << d[1] % 8, tail = get(d + 3, 8);
	unsigned max = 1 + d[19] % MAX_OUT;
	size_t len = (size_t)ps + (size_t)asize;
	unsigned char *mem = calloc(1, len), rec[256];
	struct perf_event_mmap_page *pg = (struct perf_event_mmap_page *)mem;
	pmu_record out[MAX_OUT], want[64];
	pmu_ring_stats st = {0};
	unsigned nwant = 0, ngot = 0;
	uint64_t want_lost = 0, want_throttle = 0, head = tail;
	if (!mem)
		return;
	pg->data_offset = len - asize;
	pg->data_size = asize;
	pg->data_tail = tail;
	/* Each spec: 1 byte kind, 32 bytes of fields. */
	for (size_t at = HDR; at + 33 <= sz && nwant < 64; at += 33) {
		const uint8_t *s = d + at;
		pmu_record r = {0};
		size_t n;
		switch (s[0] % 4) {
		case 0:
			r.type = PERF_RECORD_LOST;
			r.lost = get(s + 1, 4);
			break;
		case 1: {
			struct perf_event_header h = {
			    .type = PERF_RECORD_THROTTLE, .misc = 0, .size = sizeof h + 24};
			uint64_t z[3] = {get(s + 1, 8), get(s + 9, 8), get(s + 17, 8)};
			if (head - tail + h.size > asize)
				goto full;
			put(mem + len - asize, asize, &head, &h, sizeof h);
			put(mem + len - asize, asize, &head, z, sizeof z);
			want_throttle++;
			continue;
		}
		default:
			r.type = PERF_RECORD_SAMPLE;
			r.misc = (uint16_t)get(s + 1, 2);
			r.ip = get(s + 1, 8);
			r.addr = get(s + 9, 8);
			r.data_src = get(s + 17, 8);
			r.pid = (uint32_t)get(s + 25, 4);
			r.tid = (uint32_t)get(s + 29, 4);
			break;
		}
		n = pmu_record_layout(&r, PMU_RING_SAMPLE_TYPE, rec, sizeof rec);
		check(n >= sizeof(struct perf_event_header) && n % 8 == 0);
		if (head - tail + n > asize)
			break;
		put(mem + len - asize, asize, &head, rec, n);
		if (r.type == PERF_RECORD_LOST)
			want_lost += r.lost;
		else
			want[nwant++] = r;
	}
full:
	pg->data_head = head;
	for (int round = 0; round < 200 && pg->data_tail != head; round++) {
		unsigned n = read_once(pg, len, PMU_RING_SAMPLE_TYPE, out, max, &st);
		for (unsigned i = 0; i < n; i++, ngot++) {
			check(ngot < nwant);
			check(out[i].ip == want[ngot].ip && out[i].addr == want[ngot].addr &&
			      out[i].data_src == want[ngot].data_src &&
			      out[i].pid == want[ngot].pid && out[i].tid == want[ngot].tid &&
			      out[i].misc == want[ngot].misc);
		}
	}
	check(pg->data_tail == head);
	check(ngot == nwant && st.samples == nwant);
	check(st.lost == want_lost && st.throttles == want_throttle && st.corrupt == 0);
	free(mem);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	long ps = sysconf(_SC_PAGESIZE);
	if (size < HDR || ps <= 0)
		return 0;
	if (data[0] & 8)
		round_trip(data, size, ps);
	else
		raw(data, size, ps);
	return 0;
}

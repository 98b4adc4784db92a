/*
 * The sample ring reader (lib/pmu/ring.c) against rings laid out here by
 * hand, byte by byte, as include/uapi/linux/perf_event.h describes them:
 * records that wrap and straddle the end of the data area, PERF_RECORD_LOST
 * and THROTTLE among samples, a reader that stops at max and goes on, bad
 * headers, and random rings (valid ones read back exactly; garbage never
 * read past its head).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "pmu/pmu.h"

#define ST PMU_RING_SAMPLE_TYPE

typedef struct ring {
	unsigned char *mem;
	size_t len, ps, size;
	struct perf_event_mmap_page *pg;
} ring;

static void ring_new(ring *r, size_t data_pages)
{
	r->ps = (size_t)sysconf(_SC_PAGESIZE);
	r->len = r->ps * (1 + data_pages);
	r->mem = aligned_alloc(r->ps, r->len);
	assert_non_null(r->mem);
	memset(r->mem, 0, r->len);
	r->pg = (struct perf_event_mmap_page *)r->mem;
	r->size = r->len - r->ps;
	r->pg->data_offset = r->ps;
	r->pg->data_size = r->size;
}

/* Put bytes at the head, wrapping (the kernel's writer, independently of ring.c). */
static void put(ring *r, const void *b, size_t n)
{
	for (size_t i = 0; i < n; i++)
		r->mem[r->ps + (r->pg->data_head + i) % r->size] = ((const unsigned char *)b)[i];
	r->pg->data_head += n;
}

static void put_u64(ring *r, uint64_t v)
{
	put(r, &v, 8);
}

static void put_header(ring *r, uint32_t type, uint16_t size)
{
	struct perf_event_header h = {.type = type, .misc = PERF_RECORD_MISC_USER, .size = size};
	put(r, &h, sizeof h);
}

/* ip, pid/tid, addr, data_src: the fields of PMU_RING_SAMPLE_TYPE, in order. */
static void put_sample(ring *r, uint64_t ip, uint32_t tid, uint64_t addr, uint64_t src)
{
	put_header(r, PERF_RECORD_SAMPLE, 8 + 32);
	put_u64(r, ip);
	put_u64(r, (uint64_t)tid << 32 | tid);
	put_u64(r, addr);
	put_u64(r, src);
}

static void put_lost(ring *r, uint64_t lost)
{
	put_header(r, PERF_RECORD_LOST, 8 + 16);
	put_u64(r, 7); /* id */
	put_u64(r, lost);
}

static void put_throttle(ring *r)
{
	put_header(r, PERF_RECORD_THROTTLE, 8 + 24);
	put_u64(r, 1);
	put_u64(r, 2);
	put_u64(r, 3);
}

static void test_straddle_and_wrap(void **state)
{
	ring r;
	pmu_record out[8];
	pmu_ring_stats st = {0};
	ring_new(&r, 1);
	/* Start 16 bytes before the end: the first sample straddles it. */
	r.pg->data_head = r.pg->data_tail = 3 * r.size - 16;
	put_sample(&r, 0x401000, 42, 0x7000, 0x2);
	put_sample(&r, 0x401004, 42, 0x7008, 0x4);
	assert_int_equal(pmu_ring_read(r.pg, r.len, ST, out, 8, &st), 2);
	assert_int_equal(out[0].ip, 0x401000);
	assert_int_equal(out[0].tid, 42);
	assert_int_equal(out[0].pid, 42);
	assert_int_equal(out[0].addr, 0x7000);
	assert_int_equal(out[0].data_src, 0x2);
	assert_int_equal(out[1].ip, 0x401004);
	assert_int_equal(out[1].addr, 0x7008);
	assert_int_equal(out[1].data_src, 0x4);
	assert_int_equal(r.pg->data_tail, r.pg->data_head);
	assert_int_equal(st.samples, 2);
	free(r.mem);
}

static void test_lost_throttle_max(void **state)
{
	ring r;
	pmu_record out[8];
	pmu_ring_stats st = {0};
	ring_new(&r, 1);
	put_lost(&r, 5);
	put_sample(&r, 1, 9, 0x10, 0x2);
	put_throttle(&r);
	put_sample(&r, 2, 9, 0x20, 0x2);
	put_sample(&r, 3, 9, 0x30, 0x2);
	assert_int_equal(pmu_ring_read(r.pg, r.len, ST, out, 2, &st), 2);
	assert_int_equal(out[0].ip, 1);
	assert_int_equal(out[1].ip, 2);
	assert_int_equal(st.lost, 5);
	assert_int_equal(st.throttles, 1);
	/* The third is still there: the tail stopped after the second. */
	assert_true(r.pg->data_tail < r.pg->data_head);
	assert_int_equal(pmu_ring_read(r.pg, r.len, ST, out, 2, &st), 1);
	assert_int_equal(out[0].ip, 3);
	assert_int_equal(pmu_ring_read(r.pg, r.len, ST, out, 2, &st), 0);
	assert_int_equal(r.pg->data_tail, r.pg->data_head);
	free(r.mem);
}

static void test_bad_rings(void **state)
{
	ring r;
	pmu_record out[4];
	pmu_ring_stats st = {0};
	ring_new(&r, 1);
	/* A header of size 0 would loop forever: dropped with the rest. */
	put_header(&r, PERF_RECORD_SAMPLE, 0);
	put_sample(&r, 1, 1, 1, 1);
	assert_int_equal(pmu_ring_read(r.pg, r.len, ST, out, 4, &st), 0);
	assert_int_equal(st.corrupt, 1);
	assert_int_equal(r.pg->data_tail, r.pg->data_head);
	/* A head further than the ring holds. */
	r.pg->data_head = r.pg->data_tail + r.size + 8;
	assert_int_equal(pmu_ring_read(r.pg, r.len, ST, out, 4, &st), 0);
	assert_int_equal(st.corrupt, 2);
	assert_int_equal(r.pg->data_tail, r.pg->data_head);
	/* A sample too short for its type. */
	put_header(&r, PERF_RECORD_SAMPLE, 16);
	put_u64(&r, 1);
	put_sample(&r, 5, 1, 1, 1);
	assert_int_equal(pmu_ring_read(r.pg, r.len, ST, out, 4, &st), 1);
	assert_int_equal(out[0].ip, 5);
	assert_int_equal(st.corrupt, 3);
	/* A sample type with fields ring.c does not lay out is read as none. */
	put_sample(&r, 6, 1, 1, 1);
	assert_int_equal(pmu_ring_read(r.pg, r.len, ST | PERF_SAMPLE_CALLCHAIN, out, 4, &st), 0);
	assert_int_equal(r.pg->data_tail, r.pg->data_head);
	/* Too short a mapping: nothing read, nothing touched. */
	assert_int_equal(pmu_ring_read(r.pg, r.ps, ST, out, 4, &st), 0);
	/*
	 * A control page whose data_offset + data_size wraps around to less
	 * than the mapping (the check was off + size > len, which let the
	 * reader index 2^64 - page size bytes away; fuzz_pmu_ring/seed-geometry-wrap):
	 * refused, counted corrupt, the tail left alone.
	 */
	put_sample(&r, 7, 1, 1, 1);
	r.pg->data_offset = (uint64_t)0 - r.ps;
	r.pg->data_size = 2 * r.ps;
	uint64_t tail = r.pg->data_tail;
	assert_int_equal(pmu_ring_read(r.pg, r.len, ST, out, 4, &st), 0);
	assert_int_equal(st.corrupt, 5);
	assert_int_equal(r.pg->data_tail, tail);
	/* Data said to start inside the control page, or to run past the mapping. */
	r.pg->data_offset = 64;
	r.pg->data_size = r.size;
	assert_int_equal(pmu_ring_read(r.pg, r.len, ST, out, 4, &st), 0);
	r.pg->data_offset = r.ps;
	r.pg->data_size = r.size + 8;
	assert_int_equal(pmu_ring_read(r.pg, r.len, ST, out, 4, &st), 0);
	/* Not 2^n bytes (perf_mmap() maps 2^n pages): pos % size would jump where pos wraps. */
	r.pg->data_size = r.size / 2 + 8;
	assert_int_equal(pmu_ring_read(r.pg, r.len, ST, out, 4, &st), 0);
	assert_int_equal(st.corrupt, 8);
	/* The true geometry again: the sample is still there. */
	r.pg->data_size = r.size;
	assert_int_equal(pmu_ring_read(r.pg, r.len, ST, out, 4, &st), 1);
	assert_int_equal(out[0].ip, 7);
	free(r.mem);
}

static uint64_t next(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* Random streams of records through a small ring, read as the writer goes. */
static void test_random_streams(void **state)
{
	uint64_t seed = 88172645463325252ull, want_ip = 0, got = 0, lost = 0, want_lost = 0;
	ring r;
	pmu_record out[5];
	pmu_ring_stats st = {0};
	ring_new(&r, 1);
	for (int round = 0; round < 20000; round++) {
		unsigned n = (unsigned)(next(&seed) % 4);
		for (unsigned k = 0; k < n; k++) {
			if (r.pg->data_head - r.pg->data_tail + 40 > r.size)
				break;
			switch (next(&seed) % 5) {
			case 0:
				put_lost(&r, 3);
				want_lost += 3;
				break;
			case 1: put_throttle(&r); break;
			default:
				want_ip++;
				put_sample(&r, want_ip, 1, want_ip * 8, 2);
				break;
			}
		}
		unsigned m =
		    pmu_ring_read(r.pg, r.len, ST, out, 1 + (unsigned)(next(&seed) % 5), &st);
		for (unsigned k = 0; k < m; k++) {
			got++;
			assert_int_equal(out[k].ip, got);
			assert_int_equal(out[k].addr, got * 8);
		}
	}
	while (pmu_ring_read(r.pg, r.len, ST, out, 5, &st))
		;
	lost = st.lost;
	assert_int_equal(st.samples, want_ip);
	assert_int_equal(lost, want_lost);
	assert_int_equal(st.corrupt, 0);
	/* Garbage: never read past the head, never a sample that is not in it. */
	for (int round = 0; round < 20000; round++) {
		for (size_t i = 0; i < r.size; i += 8) {
			uint64_t v = next(&seed);
			memcpy(r.mem + r.ps + i, &v, 8);
		}
		r.pg->data_tail = next(&seed) % (1u << 20);
		r.pg->data_head = r.pg->data_tail + next(&seed) % (r.size + 64);
		pmu_ring_read(r.pg, r.len, ST, out, 5, &st);
		assert_true(r.pg->data_tail <= r.pg->data_head);
	}
	free(r.mem);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_straddle_and_wrap),
	    cmocka_unit_test(test_lost_throttle_max),
	    cmocka_unit_test(test_bad_rings),
	    cmocka_unit_test(test_random_streams),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

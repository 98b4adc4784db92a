/*
 * The sample ring of a precise counter (PEBS, IBS op): the reader the pmu
 * clock drains at each overflow signal, and the layout of a record, which
 * the replay kernel writes with. The ring is the kernel's
 * (include/uapi/linux/perf_event.h, struct perf_event_mmap_page): one
 * control page, then data_size bytes of records; the kernel advances
 * data_head after writing, we advance data_tail after reading. Records are
 * 8-byte aligned, headed by struct perf_event_header, and may wrap around
 * the end of the data area.
 */
#include <string.h>
#include <unistd.h>

#include "pmu.h"

/* The fields ring.c lays out, in the order the kernel writes them (perf_output_sample()). */
#define KNOWN                                                                           \
	(PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | \
	 PERF_SAMPLE_ADDR | PERF_SAMPLE_ID | PERF_SAMPLE_STREAM_ID | PERF_SAMPLE_CPU |  \
	 PERF_SAMPLE_PERIOD | PERF_SAMPLE_WEIGHT | PERF_SAMPLE_DATA_SRC)

static const uint64_t order[] = {
    PERF_SAMPLE_IDENTIFIER, PERF_SAMPLE_IP,     PERF_SAMPLE_TID,       PERF_SAMPLE_TIME,
    PERF_SAMPLE_ADDR,       PERF_SAMPLE_ID,     PERF_SAMPLE_STREAM_ID, PERF_SAMPLE_CPU,
    PERF_SAMPLE_PERIOD,     PERF_SAMPLE_WEIGHT, PERF_SAMPLE_DATA_SRC,
};

/* The body of a sample (after its header): false when it is not one of sample_type. */
static bool parse_sample(const unsigned char *b, size_t len, uint64_t sample_type, pmu_record *r)
{
	size_t off = 0;
	if (sample_type & ~(uint64_t)KNOWN)
		return false;
	for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
		uint64_t v;
		if (!(sample_type & order[i]))
			continue;
		if (off + 8 > len)
			return false;
		memcpy(&v, b + off, 8);
		off += 8;
		switch (order[i]) {
		case PERF_SAMPLE_IP: r->ip = v; break;
		case PERF_SAMPLE_ADDR: r->addr = v; break;
		case PERF_SAMPLE_DATA_SRC: r->data_src = v; break;
		case PERF_SAMPLE_TID: /* u32 pid, u32 tid */
			r->pid = (uint32_t)v;
			r->tid = (uint32_t)(v >> 32);
			break;
		default: break;
		}
	}
	return true;
}

size_t pmu_record_layout(const pmu_record *r, uint64_t sample_type, unsigned char *buf, size_t cap)
{
	struct perf_event_header h = {.type = r->type, .misc = r->misc};
	uint64_t body[16];
	size_t n = 0;
	if (r->type == PERF_RECORD_LOST) {
		body[n++] = 0; /* id */
		body[n++] = r->lost;
	} else if (r->type == PERF_RECORD_SAMPLE) {
		if (sample_type & ~(uint64_t)KNOWN)
			return 0;
		for (size_t i = 0; i < sizeof order / sizeof order[0]; i++) {
			if (!(sample_type & order[i]))
				continue;
			switch (order[i]) {
			case PERF_SAMPLE_IP: body[n++] = r->ip; break;
			case PERF_SAMPLE_ADDR: body[n++] = r->addr; break;
			case PERF_SAMPLE_DATA_SRC: body[n++] = r->data_src; break;
			case PERF_SAMPLE_TID: body[n++] = r->pid | (uint64_t)r->tid << 32; break;
			default: body[n++] = 0; break;
			}
		}
	} else {
		return 0;
	}
	h.size = (uint16_t)(sizeof h + n * 8);
	if (h.size > cap)
		return 0;
	memcpy(buf, &h, sizeof h);
	memcpy(buf + sizeof h, body, n * 8);
	return h.size;
}

/* len bytes of the data area from offset pos (mod size): a record that straddles the end. */
static void copy_out(const unsigned char *data, uint64_t size, uint64_t pos, void *dst, size_t len)
{
	size_t at = (size_t)(pos % size), first = len < size - at ? len : (size_t)(size - at);
	memcpy(dst, data + at, first);
	memcpy((unsigned char *)dst + first, data, len - first);
}

unsigned pmu_ring_read(struct perf_event_mmap_page *pg, size_t len, uint64_t sample_type,
                       pmu_record *out, unsigned max, pmu_ring_stats *st)
{
	long ps = sysconf(_SC_PAGESIZE);
	uint64_t head, tail, size, off;
	const unsigned char *data;
	unsigned n = 0;
	if (!pg || ps <= 0 || len <= (size_t)ps)
		return 0;
	/* data_offset/data_size exist since Linux 4.1; before, data is the pages after the first.
	 */
	off = pg->data_offset ? pg->data_offset : (uint64_t)ps;
	size = pg->data_size ? pg->data_size : len - (size_t)ps;
	/*
	 * The control page says where the data lies; it must lie after that
	 * page and inside the mapping (compared without off + size, which a
	 * lying page makes wrap around to a small number), and be 2^n pages
	 * as perf_mmap() requires: head and tail are free-running u64
	 * positions, and only a power-of-two size keeps pos % size contiguous
	 * where they wrap past 2^64.
	 */
	if (off < (uint64_t)ps || off > len || size > len - off || size == 0 ||
	    (size & (size - 1))) {
		st->corrupt++;
		return 0;
	}
	data = (const unsigned char *)pg + off;
	/* Pairs with the kernel's smp_store_release of data_head after the record's bytes. */
	head = __atomic_load_n(&pg->data_head, __ATOMIC_ACQUIRE);
	tail = pg->data_tail;
	if (head - tail > size) {
		/* The kernel never overruns an unread tail (overwrite mode is not ours). */
		st->corrupt++;
		__atomic_store_n(&pg->data_tail, head, __ATOMIC_RELEASE);
		return 0;
	}
	while (tail != head && n < max) {
		struct perf_event_header h;
		unsigned char body[65536];
		if (head - tail < sizeof h)
			break;
		copy_out(data, size, tail, &h, sizeof h);
		if (h.size < sizeof h || h.size > head - tail) {
			st->corrupt++;
			tail = head; /* nothing past a bad header can be found: drop the rest */
			break;
		}
		copy_out(data, size, tail + sizeof h, body, h.size - sizeof h);
		switch (h.type) {
		case PERF_RECORD_SAMPLE: {
			pmu_record *r = &out[n];
			memset(r, 0, sizeof *r);
			r->type = h.type;
			r->misc = h.misc;
			if (parse_sample(body, h.size - sizeof h, sample_type, r)) {
				n++;
				st->samples++;
			} else {
				st->corrupt++;
			}
			break;
		}
		case PERF_RECORD_LOST: {
			uint64_t lost = 0;
			if (h.size >= sizeof h + 16)
				memcpy(&lost, body + 8, 8); /* u64 id, u64 lost */
			st->lost += lost;
			break;
		}
		case PERF_RECORD_THROTTLE: st->throttles++; break;
		default: st->other++; break;
		}
		tail += h.size;
	}
	/* Our reads of the records happen before the kernel may overwrite them. */
	__atomic_store_n(&pg->data_tail, tail, __ATOMIC_RELEASE);
	return n;
}

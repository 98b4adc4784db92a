/*
 * The dbi clock's hand-over file: what the Valgrind tool (lib/dbi/tool_*.c)
 * writes at the target's exit, exec or on request, and the host process
 * (lib/dbi/dump_read.c) turns into a profile with the library. The tool has
 * no libc, so it does no profile assembly: it writes each thread's clock and
 * its sample store's streams as they are (packed records, core.h), the
 * settings it sampled with and the program's file mappings.
 *
 * Little-endian, every field fixed width, in this order:
 *   dump_header
 *   nthreads x (dump_thread, then nblocks x (dump_block, len bytes of records))
 *   nmaps x (dump_map, then path_len bytes of path)
 *   with DUMP_FLAG_EXACT: dump_exact_head, then n x dump_exact_rec
 * A block's records are packed_sample records relative to the previous one
 * in the block (all zero before the first); a record's weight is
 * base_period x 2^max(its level byte, the block's floor).
 */
#ifndef LOMAS_DBI_DUMP_H
#define LOMAS_DBI_DUMP_H

#include <stdint.h>

#define DUMP_MAGIC "LOMASDBI"
#define DUMP_VERSION 1u

/* How the run the dump describes ended (dump_header.ended). */
enum {
	DUMP_ENDED_EXIT = 0,     /* the process exited (value: its status) */
	DUMP_ENDED_SIGNAL = 1,   /* a signal killed it (value: the signal) */
	DUMP_ENDED_EXEC = 2,     /* it called execve: the new program runs natively */
	DUMP_ENDED_SNAPSHOT = 3, /* the host asked (lomas_session_stop): it runs on */
};

/* dump_header.flags */
#define DUMP_FLAG_TRACE 0x1u /* a full trace was written too */
#define DUMP_FLAG_EXACT 0x2u /* exact stack distances follow the maps */

typedef struct dump_header {
	char magic[8];
	uint32_t version;
	uint32_t header_bytes; /* sizeof(dump_header) as written */
	uint32_t line_size;
	uint32_t max_live;
	uint64_t period; /* 0 = auto */
	uint64_t seed;
	uint64_t window; /* 0 = auto */
	uint32_t nthreads;
	uint32_t nmaps;
	uint32_t auto_level; /* period auto: the process's final level */
	uint32_t flags;
	int32_t ended;
	int32_t ended_value;
	uint64_t lost; /* samples lost for want of memory (all threads) */
	uint64_t pid;  /* the process (Valgrind runs in it) */
	char valgrind_version[24];
	char tool_version[24];
} dump_header;

typedef struct dump_thread {
	uint32_t index; /* creation order: 0 = the main thread */
	uint32_t nblocks;
	uint64_t tid;  /* OS thread id */
	uint64_t refs; /* the thread's final clock */
	double base_period;
	uint32_t level; /* its period's level (period = base x 2^level) */
	uint32_t reserved;
} dump_thread;

typedef struct dump_block {
	uint32_t floor; /* the store's level: each record's level is at least this */
	uint32_t reserved;
	uint64_t n;   /* records */
	uint64_t len; /* bytes of records that follow */
} dump_block;

typedef struct dump_map {
	uint64_t start, end, offset; /* [start, end) */
	uint32_t prot;               /* PROT_READ 1 | PROT_WRITE 2 | PROT_EXEC 4 */
	uint32_t path_len;
} dump_map;

/* The exact stack distances the tool's bursts found (tool_burst.c). */
typedef struct dump_exact_head {
	uint64_t n;      /* records */
	uint64_t bursts; /* bursts run (found or gave up) */
	uint64_t refs;   /* references they followed */
	double budget;   /* their share of references allowed */
} dump_exact_head;

typedef struct dump_exact_rec {
	uint32_t index;      /* the thread's (dump_thread.index) */
	uint32_t sd;         /* distinct other lines touched strictly between the two */
	uint64_t start, end; /* the sample's clocks */
} dump_exact_rec;

#endif /* LOMAS_DBI_DUMP_H */

/*
 * lib/watch: the watch table against a naive model, and the mprotect engine
 * against a fake target (a page → protection map) that records every call.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "watch/watch.h"

/* ----------------------------------------------------------- table vs model */

typedef struct model_entry {
	uint64_t line, sample, seq;
	uint32_t thread;
	int live;
} model_entry;

static void test_table_random(void **state)
{
	watch_table t;
	model_entry *m = calloc(20000, sizeof *m);
	size_t nm = 0;
	rng r;
	uint64_t seq = 0;
	(void)state;
	assert_int_equal(watch_table_init(&t, 64, 4096, 0), LOMAS_OK);
	rng_seed(&r, 42);
	for (int op = 0; op < 20000; op++) {
		uint64_t addr = (rng_next(&r) % 64) * 4096 + (rng_next(&r) % 4096);
		uint64_t line = addr & ~63ull;
		uint32_t th = (uint32_t)(rng_next(&r) % 3);
		int kind = (int)(rng_next(&r) % 3);
		model_entry *found = NULL;
		for (size_t i = 0; i < nm; i++)
			if (m[i].live && m[i].line == line && m[i].thread == th)
				found = &m[i];
		if (kind == 0) {
			watch_entry old;
			bool disp;
			assert_int_equal(watch_table_add(&t, addr, th, (uint64_t)op, &old, &disp),
			                 LOMAS_OK);
			assert_int_equal(disp, found != NULL);
			if (found) {
				assert_int_equal(old.sample, found->sample);
				found->sample = (uint64_t)op;
			} else {
				m[nm++] = (model_entry){line, (uint64_t)op, seq++, th, 1};
			}
		} else if (kind == 1) {
			watch_entry e;
			bool ok = watch_table_remove(&t, addr, th, &e);
			assert_int_equal(ok, found != NULL);
			if (found) {
				assert_int_equal(e.sample, found->sample);
				found->live = 0;
			}
		} else {
			watch_entry e;
			assert_int_equal(watch_table_find(&t, addr, th, &e), found != NULL);
			if (found)
				assert_int_equal(e.sample, found->sample);
			/* page count and other-thread watchers from the model */
			uint32_t pc = 0;
			size_t others = 0;
			for (size_t i = 0; i < nm; i++) {
				if (!m[i].live)
					continue;
				pc += (m[i].line & ~4095ull) == (addr & ~4095ull);
				others += m[i].line == line && m[i].thread != th;
			}
			assert_int_equal(watch_table_page_count(&t, addr), pc);
			assert_int_equal(watch_table_others(&t, addr, th, NULL, 0), others);
		}
		size_t live = 0;
		for (size_t i = 0; i < nm; i++)
			live += m[i].live;
		assert_int_equal(watch_table_size(&t), live);
	}
	watch_table_free(&t);
	free(m);
}

static void test_table_capacity(void **state)
{
	watch_table t;
	watch_entry old;
	bool disp;
	(void)state;
	assert_int_equal(watch_table_init(&t, 64, 4096, 3), LOMAS_OK);
	for (uint64_t i = 0; i < 3; i++) {
		assert_int_equal(watch_table_add(&t, 0x10000 + i * 64, 0, i, &old, &disp),
		                 LOMAS_OK);
		assert_false(disp);
	}
	/* Full: the oldest (sample 0) is evicted for the caller to censor. */
	assert_int_equal(watch_table_add(&t, 0x20000, 0, 3, &old, &disp), LOMAS_OK);
	assert_true(disp);
	assert_int_equal(old.sample, 0);
	assert_int_equal(watch_table_size(&t), 3);
	assert_false(watch_table_find(&t, 0x10000, 0, NULL));
	assert_int_equal(watch_table_add(&t, 0x20008, 1, 4, &old, &disp), LOMAS_OK);
	assert_true(disp);
	assert_int_equal(old.sample, 1);
	assert_int_equal(watch_table_page_count(&t, 0x10000), 1);
	assert_int_equal(watch_table_page_count(&t, 0x20000), 2);
	watch_table_free(&t);
}

/* ------------------------------------------------------ engine, fake target */

#define NPAGES 16
#define BASE 0x100000ull

typedef struct fake {
	int orig[NPAGES]; /* the target's own protection */
	int real[NPAGES]; /* what the pages have now */
	int calls;
	bool pin[NPAGES];
} fake;

static int fake_mprotect(void *ctx, uint64_t addr, uint64_t len, int prot)
{
	fake *f = ctx;
	assert_int_equal(len, 4096);
	assert_true(addr >= BASE && addr < BASE + NPAGES * 4096 && addr % 4096 == 0);
	f->real[(addr - BASE) / 4096] = prot;
	f->calls++;
	return 0;
}

static int fake_prot(void *ctx, uint64_t page)
{
	fake *f = ctx;
	if (page < BASE || page >= BASE + NPAGES * 4096)
		return -1;
	return f->orig[(page - BASE) / 4096];
}

static bool fake_may(void *ctx, uint64_t page)
{
	fake *f = ctx;
	return !f->pin[(page - BASE) / 4096];
}

static void test_engine(void **state)
{
	fake f;
	mprot_engine e;
	mprot_ops ops = {fake_mprotect, fake_prot, fake_may, &f};
	watch_entry old;
	bool disp;
	(void)state;
	memset(&f, 0, sizeof f);
	for (int i = 0; i < NPAGES; i++)
		f.orig[i] = f.real[i] = (i % 3 == 0) ? PROT_READ : PROT_READ | PROT_WRITE;
	f.pin[5] = true;
	assert_int_equal(mprot_init(&e, &ops, 64, 4096, 0), LOMAS_OK);
	/* Unmapped: refused. */
	assert_int_equal(mprot_watch(&e, 0x1000, 0, 0, &old, &disp), LOMAS_EPERM);
	/* Two lines on page 1, one on page 2, one on the pinned page 5. */
	assert_int_equal(mprot_watch(&e, BASE + 4096 + 8, 0, 1, &old, &disp), LOMAS_OK);
	assert_int_equal(mprot_watch(&e, BASE + 4096 + 640, 1, 2, &old, &disp), LOMAS_OK);
	assert_int_equal(mprot_watch(&e, BASE + 2 * 4096, 0, 3, &old, &disp), LOMAS_OK);
	assert_int_equal(mprot_watch(&e, BASE + 5 * 4096, 0, 4, &old, &disp), LOMAS_OK);
	assert_int_equal(mprot_sync(&e), LOMAS_OK);
	assert_int_equal(f.real[1], PROT_NONE);
	assert_int_equal(f.real[2], PROT_NONE);
	assert_int_equal(f.real[5], f.orig[5]); /* pinned: never protected */
	assert_true(mprot_is_ours(&e, BASE + 4096 + 100));
	assert_false(mprot_is_ours(&e, BASE + 5 * 4096));
	assert_true(mprot_is_lifted(&e, BASE + 5 * 4096));
	assert_int_equal(mprot_protected_pages(&e), 2);
	/* A fault on page 1 by thread 0: lifted for its step, then protected again. */
	assert_int_equal(mprot_fault_lift(&e, BASE + 4096 + 8, 0), LOMAS_OK);
	assert_int_equal(f.real[1], f.orig[1]);
	assert_int_equal(e.stats.faults, 1);
	assert_true(mprot_unwatch(&e, BASE + 4096 + 8, 0, &old));
	assert_int_equal(old.sample, 1);
	mprot_fault_done(&e, 0);
	assert_int_equal(f.real[1], PROT_NONE); /* thread 1 still watches a line there */
	assert_int_equal(e.stats.reprotects, 1);
	/* Nested lifts (syscall + signal): everything back to its own protection. */
	assert_int_equal(mprot_lift(&e), LOMAS_OK);
	assert_int_equal(mprot_lift(&e), LOMAS_OK);
	for (int i = 0; i < NPAGES; i++)
		assert_int_equal(f.real[i], f.orig[i]);
	assert_int_equal(mprot_unlift(&e), LOMAS_OK);
	assert_int_equal(f.real[1], f.orig[1]);
	assert_int_equal(mprot_unlift(&e), LOMAS_OK);
	assert_int_equal(f.real[1], PROT_NONE);
	/* The target changes page 2's protection while lifted: restored to the new one. */
	mprot_lift(&e);
	f.orig[2] = f.real[2] = PROT_READ | PROT_EXEC;
	mprot_maps_changed(&e);
	mprot_unlift(&e);
	assert_int_equal(f.real[2], PROT_NONE);
	/* The last watch on a page goes: the page is released at the next sync. */
	assert_true(mprot_unwatch(&e, BASE + 4096 + 640, 1, NULL));
	mprot_sync(&e);
	assert_int_equal(f.real[1], f.orig[1]);
	/* Detach: every page as the target had it. */
	assert_int_equal(mprot_restore_all(&e), LOMAS_OK);
	for (int i = 0; i < NPAGES; i++)
		assert_int_equal(f.real[i], f.orig[i]);
	assert_int_equal(mprot_protected_pages(&e), 0);
	assert_int_equal(watch_table_size(&e.table), 0);
	mprot_free(&e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_table_random),
	    cmocka_unit_test(test_table_capacity),
	    cmocka_unit_test(test_engine),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}

/*
 * Shared by the unit suites that compare profiles (test_profile_file.c,
 * test_inline.c): field-by-field equality of two profiles' threads, windows
 * and samples. Include after <cmocka.h> and "core/core.h".
 */
#ifndef LOMAS_TEST_PROFILE_ASSERTS_H
#define LOMAS_TEST_PROFILE_ASSERTS_H

#include <string.h>

/* The same double, bit for bit (NaN included). */
static inline bool same_bits(double a, double b)
{
	return memcmp(&a, &b, sizeof a) == 0;
}

/* a's and b's threads, windows and samples are the same, in the same order
 * (reserved fields excluded). */
static inline void assert_same_threads_windows_samples(const lomas_profile *a,
                                                       const lomas_profile *b)
{
	assert_int_equal(a->threads.n, b->threads.n);
	for (size_t i = 0; i < a->threads.n; i++) {
		assert_int_equal(a->threads.items[i].tid, b->threads.items[i].tid);
		assert_int_equal(a->threads.items[i].refs, b->threads.items[i].refs);
	}
	assert_int_equal(a->windows.n, b->windows.n);
	for (size_t i = 0; i < a->windows.n; i++) {
		assert_int_equal(a->windows.items[i].start, b->windows.items[i].start);
		assert_int_equal(a->windows.items[i].refs, b->windows.items[i].refs);
		assert_int_equal(a->windows.items[i].thread, b->windows.items[i].thread);
	}
	assert_int_equal(a->samples.n, b->samples.n);
	for (size_t i = 0; i < a->samples.n; i++) {
		const lomas_sample *x = &a->samples.items[i], *y = &b->samples.items[i];
		assert_int_equal(x->start, y->start);
		assert_int_equal(x->end, y->end);
		assert_int_equal(x->addr, y->addr);
		assert_int_equal(x->start_pc, y->start_pc);
		assert_int_equal(x->end_pc, y->end_pc);
		assert_true(same_bits(x->weight, y->weight));
		assert_int_equal(x->thread, y->thread);
		assert_int_equal(x->window, y->window);
		assert_int_equal(x->kind, y->kind);
		assert_int_equal(x->state, y->state);
		assert_int_equal(x->flags, y->flags);
	}
}

#endif /* LOMAS_TEST_PROFILE_ASSERTS_H */

/* The step clock's profile: threads, windows, samples, metadata, maps. */
#include <stdlib.h>
#include <string.h>

#include "monitor.h"

lomas_status step_profile(monitor *m, lomas_profile **out)
{
	lomas_profile *p = NULL;
	uint32_t *first = NULL; /* first window index of each thread */
	lomas_status st;
	uint64_t W = m->window_refs;
	*out = NULL;
	if ((st = lomas_profile_new(m->cfg.line_size, &p)))
		return st;
	first = calloc(m->threads.n + 1, sizeof *first);
	if (!first) {
		lomas_profile_free(p);
		return error_set(LOMAS_ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < m->threads.n; i++) {
		const mon_thread *t = &m->threads.items[i];
		lomas_thread th = {.tid = (uint64_t)t->tid, .refs = t->clock};
		if ((st = profile_add_thread(p, &th)))
			goto fail;
		first[i] = (uint32_t)p->windows.n;
		for (uint64_t s = 0; s < t->clock; s += W) {
			lomas_window w = {.start = s,
			                  .refs = t->clock - s < W ? t->clock - s : W,
			                  .thread = (uint32_t)i};
			if ((st = profile_add_window(p, &w)))
				goto fail;
		}
	}
	for (size_t i = 0; i < m->samples.n; i++) {
		lomas_sample s = m->samples.items[i];
		const mon_thread *t = &m->threads.items[s.thread];
		uint64_t k = s.start / W;
		if (s.start >= t->clock) {
			/* Only possible mid-instruction in a live snapshot: skip nothing, clamp. */
			lomas_window w = {.start = k * W, .refs = 0, .thread = s.thread};
			if (p->windows.n == 0 ||
			    p->windows.items[p->windows.n - 1].thread != s.thread ||
			    p->windows.items[p->windows.n - 1].start != k * W)
				if ((st = profile_add_window(p, &w)))
					goto fail;
			s.window = (uint32_t)(p->windows.n - 1);
		} else {
			s.window = first[s.thread] + (uint32_t)k;
		}
		if (s.state == LOMAS_SAMPLE_DANGLING) {
			s.end = LOMAS_CLOCK_NONE;
			s.end_pc = 0;
		}
		if ((st = profile_add_sample(p, &s)))
			goto fail;
	}
	if ((st = profile_meta_setf(p, "clock", m->pmu_mode ? "pmu" : "step")) ||
	    (st = profile_meta_setf(p, "watch", m->dreg_mode ? "debugreg" : "mprotect")) ||
	    (st = profile_meta_setf(p, "period", "%.17g", m->period)) ||
	    (st = profile_meta_setf(p, "seed", "%llu", (unsigned long long)m->cfg.seed)) ||
	    (st = profile_meta_setf(p, "max_skid", "%u", m->cfg.max_skid)) ||
	    (st = profile_meta_setf(p, "line_size", "%u", m->cfg.line_size)) ||
	    (st = profile_meta_setf(p, "window", "%llu", (unsigned long long)W)) ||
	    (st = profile_meta_setf(p, "command", "%s", m->command ? m->command : "")) ||
	    (st = profile_meta_setf(p, "pid", "%d", (int)m->pid)) ||
	    (st = profile_meta_setf(p, "step.reuse_by_fault", "%llu",
	                            (unsigned long long)m->stats.reuse_by_fault)) ||
	    (st = profile_meta_setf(p, "step.reuse_by_decode", "%llu",
	                            (unsigned long long)m->stats.reuse_by_decode)) ||
	    (st = profile_meta_setf(p, "step.false_positives", "%llu",
	                            (unsigned long long)m->eng.stats.false_positives)) ||
	    (st = profile_meta_setf(p, "step.unwatchable_samples", "%llu",
	                            (unsigned long long)m->stats.unwatchable)) ||
	    (st = profile_meta_setf(p, "step.masked_moves", "%llu",
	                            (unsigned long long)m->stats.masked)) ||
	    (st = profile_meta_setf(p, "step.cpuid_run", "%llu",
	                            (unsigned long long)m->stats.cpuid_run)) ||
	    (st = profile_meta_setf(p, "step.held_signals_merged", "%llu",
	                            (unsigned long long)m->stats.held_merged)) ||
	    (st = profile_meta_setf(p, "step.held_signals_lost", "%llu",
	                            (unsigned long long)m->stats.held_lost)) ||
	    (m->stats.mask_unread &&
	     (st = profile_meta_setf(p, "step.masked_moves_full_size", "%llu",
	                             (unsigned long long)m->stats.mask_unread))))
		goto fail;
	if (m->pmu_mode && (st = pmu_profile_meta(m, p)))
		goto fail;
	if (m->dreg_mode && (st = dwatch_profile_meta(m, p)))
		goto fail;
	/* The step clock counts exactly: nothing to compensate. */
	for (int k = 0; k < LEDGER_NKINDS && !m->pmu_mode; k++) {
		char key[64];
		snprintf(key, sizeof key, "step.%s", ledger_kind_name((ledger_kind)k));
		if ((st = profile_set_calib(p, key, 0.0)))
			goto fail;
	}
	for (size_t i = 0; i < m->maps.r.n; i++) {
		const map_range *r = &m->maps.r.items[i];
		prof_map pm = {.start = r->start,
		               .end = r->end,
		               .offset = r->offset,
		               .prot = (uint32_t)r->prot,
		               .path = r->path};
		if ((st = profile_add_map(p, &pm)))
			goto fail;
	}
	/* The build id of each mapped file, so that symbolization can tell a
	 * binary rebuilt since the run from the one that ran. */
	profile_fill_build_ids(p);
	free(first);
	if ((st = profile_validate(p))) {
		lomas_profile_free(p);
		return error_prefix(st, "internal error in the step clock's profile");
	}
	*out = p;
	return LOMAS_OK;
fail:
	free(first);
	lomas_profile_free(p);
	return st;
}

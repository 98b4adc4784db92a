/* The config object: string keys parsed into typed fields. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"

void config_defaults(struct lomas_config *cfg)
{
	cfg->period_refs = CONFIG_AUTO;
	cfg->seed = 1;
	cfg->line_size = 64;
	cfg->window_refs = CONFIG_AUTO;
	cfg->max_samples_live = 0;
	cfg->clock = CLOCK_AUTO;
	cfg->watch = WATCH_AUTO;
	cfg->max_skid = 0;
	cfg->events[0] = 0;
	cfg->pmu_sample = PMU_SAMPLE_SKID;
	cfg->period_sem = PERIOD_SEM_AUTO;
	cfg->pmu_calibrate = true;
	cfg->phase_guided = false;
}

static const char *const pmu_sample_names[] = {"skid", "precise", "double_trap"};
static const char *const period_sem_names[] = {"auto", "immediate", "next_overflow"};

static const char *const clock_names[] = {"auto", "inline", "step", "pmu", "dbi"};
#define NCLOCKS (sizeof clock_names / sizeof clock_names[0])
static const char *const watch_names[] = {"auto", "mprotect", "debugreg"};

const char *config_clock_name(config_clock c)
{
	return (unsigned)c < NCLOCKS ? clock_names[c] : "?";
}

const char *config_watch_name(config_watch w)
{
	return (unsigned)w < 3 ? watch_names[w] : "?";
}

/* Index of value in names[n], or -1. */
static int name_index(const char *const *names, int n, const char *value)
{
	for (int i = 0; i < n; i++)
		if (strcmp(names[i], value) == 0)
			return i;
	return -1;
}

lomas_status lomas_config_new(lomas_config **out)
{
	error_clear();
	if (!out)
		return error_set(LOMAS_EINVAL, "lomas_config_new: out is NULL");
	*out = calloc(1, sizeof **out);
	if (!*out)
		return error_set(LOMAS_ENOMEM, "lomas_config_new: out of memory");
	config_defaults(*out);
	return LOMAS_OK;
}

void lomas_config_free(lomas_config *cfg)
{
	free(cfg);
}

bool config_parse_u64(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	uint64_t mul = 1;
	if (!s || !*s || *s == '-' || *s == '+' || *s == ' ')
		return false;
	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || end == s)
		return false;
	if (*end) {
		switch (*end) {
		case 'k':
		case 'K': mul = 1000ull; break;
		case 'M': mul = 1000000ull; break;
		case 'G': mul = 1000000000ull; break;
		default: return false;
		}
		if (end[1])
			return false;
	}
	if (v > UINT64_MAX / mul)
		return false;
	*out = (uint64_t)v * mul;
	return true;
}

/* Parse "auto" or an integer >= 1. */
static bool parse_auto_u64(const char *value, uint64_t *out)
{
	if (strcmp(value, "auto") == 0) {
		*out = CONFIG_AUTO;
		return true;
	}
	return config_parse_u64(value, out) && *out >= 1;
}

lomas_status lomas_config_set(lomas_config *cfg, const char *key, const char *value)
{
	error_clear();
	uint64_t v;
	if (!cfg || !key || !value)
		return error_set(LOMAS_EINVAL, "lomas_config_set: NULL argument");
	if (strcmp(key, "period") == 0) {
		if (!parse_auto_u64(value, &v))
			return error_set(LOMAS_EINVAL,
			                 "period: '%s' is not an integer >= 1 or 'auto'", value);
		cfg->period_refs = v;
	} else if (strcmp(key, "seed") == 0) {
		if (!config_parse_u64(value, &v))
			return error_set(LOMAS_EINVAL, "seed: '%s' is not an unsigned integer",
			                 value);
		cfg->seed = v;
	} else if (strcmp(key, "line_bytes") == 0 || strcmp(key, "line_size") == 0) {
		/* line_size: the key's name before 0.2, kept as an alias (lomas.h). */
		if (!config_parse_u64(value, &v) || !line_size_valid(v))
			return error_set(LOMAS_EINVAL,
			                 "%s: '%s' is not a power of two from 8 to 65536", key,
			                 value);
		cfg->line_size = (uint32_t)v;
	} else if (strcmp(key, "window") == 0) {
		if (!parse_auto_u64(value, &v))
			return error_set(LOMAS_EINVAL,
			                 "window: '%s' is not an integer >= 1 or 'auto'", value);
		cfg->window_refs = v;
	} else if (strcmp(key, "max_samples_live") == 0) {
		if (!config_parse_u64(value, &v))
			return error_set(LOMAS_EINVAL,
			                 "max_samples_live: '%s' is not an unsigned integer",
			                 value);
		cfg->max_samples_live = v;
	} else if (strcmp(key, "clock") == 0) {
		int i = name_index(clock_names, (int)NCLOCKS, value);
		if (i < 0)
			return error_set(LOMAS_EINVAL,
			                 "clock: '%s' is not one of auto, inline, dbi, step, pmu",
			                 value);
		cfg->clock = (config_clock)i;
	} else if (strcmp(key, "watch") == 0) {
		int i = name_index(watch_names, 3, value);
		if (i < 0)
			return error_set(LOMAS_EINVAL,
			                 "watch: '%s' is not one of auto, mprotect, debugreg",
			                 value);
		cfg->watch = (config_watch)i;
	} else if (strcmp(key, "max_skid") == 0) {
		if (!config_parse_u64(value, &v) || v > 4096)
			return error_set(LOMAS_EINVAL, "max_skid: '%s' is not an integer 0..4096",
			                 value);
		cfg->max_skid = (uint32_t)v;
	} else if (strcmp(key, "events") == 0) {
		if (strlen(value) >= sizeof cfg->events)
			return error_set(LOMAS_EINVAL, "events: longer than %zu bytes",
			                 sizeof cfg->events - 1);
		strcpy(cfg->events, value);
	} else if (strcmp(key, "pmu_sample") == 0) {
		int i = name_index(pmu_sample_names, 3, value);
		if (i < 0)
			return error_set(
			    LOMAS_EINVAL,
			    "pmu_sample: '%s' is not one of skid, precise, double_trap", value);
		cfg->pmu_sample = (uint8_t)i;
	} else if (strcmp(key, "period_semantics") == 0) {
		int i = name_index(period_sem_names, 3, value);
		if (i < 0)
			return error_set(LOMAS_EINVAL,
			                 "period_semantics: '%s' is not one of auto, immediate, "
			                 "next_overflow",
			                 value);
		cfg->period_sem = (uint8_t)i;
	} else if (strcmp(key, "pmu_calibrate") == 0) {
		if (strcmp(value, "yes") && strcmp(value, "no"))
			return error_set(LOMAS_EINVAL, "pmu_calibrate: '%s' is not yes or no",
			                 value);
		cfg->pmu_calibrate = value[0] == 'y';
	} else if (strcmp(key, "phase_guided") == 0) {
		if (strcmp(value, "yes") && strcmp(value, "no"))
			return error_set(LOMAS_EINVAL, "phase_guided: '%s' is not yes or no",
			                 value);
		cfg->phase_guided = value[0] == 'y';
	} else {
		return error_set(LOMAS_EINVAL, "unknown config key '%s'", key);
	}
	return LOMAS_OK;
}

static lomas_status put_u64(char *buf, size_t len, uint64_t v, bool auto_zero)
{
	int n = (auto_zero && v == CONFIG_AUTO) ? snprintf(buf, len, "auto")
	                                        : snprintf(buf, len, "%" PRIu64, v);
	if (n < 0 || (size_t)n >= len)
		return error_set(LOMAS_ERANGE, "lomas_config_get: buffer too small");
	return LOMAS_OK;
}

lomas_status lomas_config_get(const lomas_config *cfg, const char *key, char *buf, size_t len)
{
	error_clear();
	if (!cfg || !key || !buf)
		return error_set(LOMAS_EINVAL, "lomas_config_get: NULL argument");
	if (strcmp(key, "period") == 0)
		return put_u64(buf, len, cfg->period_refs, true);
	if (strcmp(key, "seed") == 0)
		return put_u64(buf, len, cfg->seed, false);
	if (strcmp(key, "line_bytes") == 0 || strcmp(key, "line_size") == 0)
		return put_u64(buf, len, cfg->line_size, false);
	if (strcmp(key, "window") == 0)
		return put_u64(buf, len, cfg->window_refs, true);
	if (strcmp(key, "max_samples_live") == 0)
		return put_u64(buf, len, cfg->max_samples_live, false);
	if (strcmp(key, "max_skid") == 0)
		return put_u64(buf, len, cfg->max_skid, false);
	{
		const char *v = NULL;
		if (strcmp(key, "events") == 0)
			v = cfg->events;
		else if (strcmp(key, "pmu_sample") == 0)
			v = pmu_sample_names[cfg->pmu_sample % 3];
		else if (strcmp(key, "period_semantics") == 0)
			v = period_sem_names[cfg->period_sem % 3];
		else if (strcmp(key, "pmu_calibrate") == 0)
			v = cfg->pmu_calibrate ? "yes" : "no";
		else if (strcmp(key, "phase_guided") == 0)
			v = cfg->phase_guided ? "yes" : "no";
		if (v) {
			if (strlen(v) >= len)
				return error_set(LOMAS_ERANGE,
				                 "lomas_config_get: buffer too small");
			strcpy(buf, v);
			return LOMAS_OK;
		}
	}
	if (strcmp(key, "clock") == 0 || strcmp(key, "watch") == 0) {
		const char *name =
		    key[0] == 'c' ? config_clock_name(cfg->clock) : config_watch_name(cfg->watch);
		if (strlen(name) >= len)
			return error_set(LOMAS_ERANGE, "lomas_config_get: buffer too small");
		strcpy(buf, name);
		return LOMAS_OK;
	}
	return error_set(LOMAS_ENOENT, "unknown config key '%s'", key);
}

/* Status names, the thread-local error message and the optional log callback. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core.h"

#define MSG_MAX 1024

static _Thread_local char msg_buf[MSG_MAX];
static lomas_log_fn log_fn;
static void *log_user;

const char *lomas_version(void)
{
	return LOMAS_VERSION_STRING;
}

unsigned lomas_version_number(void)
{
	return LOMAS_VERSION_NUMBER;
}

const char *lomas_strerror(lomas_status status)
{
	switch (status) {
	case LOMAS_OK: return "success";
	case LOMAS_EINVAL: return "invalid argument";
	case LOMAS_ENOMEM: return "out of memory";
	case LOMAS_EIO: return "input/output error";
	case LOMAS_EFORMAT: return "malformed input";
	case LOMAS_ENOTSUP: return "not supported";
	case LOMAS_ENOENT: return "not found";
	case LOMAS_EPERM: return "permission denied";
	case LOMAS_ESTATE: return "invalid state";
	case LOMAS_ERANGE: return "out of range";
	case LOMAS_ETARGET: return "target failed";
	default: return "unknown error";
	}
}

const char *lomas_error_message(void)
{
	return msg_buf;
}

lomas_status error_set(lomas_status status, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg_buf, sizeof msg_buf, fmt, ap);
	va_end(ap);
	return status;
}

lomas_status error_prefix(lomas_status status, const char *fmt, ...)
{
	char prefix[MSG_MAX];
	char old[MSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(prefix, sizeof prefix, fmt, ap);
	va_end(ap);
	memcpy(old, msg_buf, sizeof old);
	snprintf(msg_buf, sizeof msg_buf, "%s: %s", prefix, old[0] ? old : lomas_strerror(status));
	return status;
}

void error_clear(void)
{
	msg_buf[0] = '\0';
}

void lomas_set_log_callback(lomas_log_fn fn, void *user)
{
	log_fn = fn;
	log_user = user;
}

void log_msg(lomas_log_level level, const char *fmt, ...)
{
	char line[MSG_MAX];
	va_list ap;
	if (!log_fn)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof line, fmt, ap);
	va_end(ap);
	log_fn(level, line, log_user);
}

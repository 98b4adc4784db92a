/*
 * Profile files on disk: load (one read of the whole file, then the decoder of
 * profile_codec.c) and atomic save (temporary file in the same directory,
 * fsync, rename over the target).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core.h"

/* Read all of fd into a malloc'd buffer; size_hint is the expected length. */
static lomas_status read_all(int fd, const char *path, size_t size_hint, uint8_t **out, size_t *len)
{
	size_t cap = size_hint + 1, n = 0; /* +1 so EOF is seen without a realloc */
	uint8_t *b = malloc(cap);
	if (!b)
		return error_set(LOMAS_ENOMEM, "%s: out of memory reading %zu bytes", path,
		                 size_hint);
	for (;;) {
		ssize_t k;
		if (n == cap) {
			uint8_t *nb;
			if (cap > SIZE_MAX / 2 || !(nb = realloc(b, cap * 2))) {
				free(b);
				return error_set(LOMAS_ENOMEM, "%s: out of memory", path);
			}
			b = nb;
			cap *= 2;
		}
		k = read(fd, b + n, cap - n);
		if (k < 0) {
			int e = errno;
			if (e == EINTR)
				continue;
			free(b);
			return error_set(LOMAS_EIO, "%s: %s", path, strerror(e));
		}
		if (k == 0)
			break;
		n += (size_t)k;
	}
	*out = b;
	*len = n;
	return LOMAS_OK;
}

lomas_status lomas_profile_load(const char *path, lomas_profile **out)
{
	struct stat sb;
	uint8_t *buf = NULL;
	size_t len = 0;
	lomas_status st;
	int fd;

	if (!out)
		return error_set(LOMAS_EINVAL, "lomas_profile_load: out is NULL");
	*out = NULL;
	if (!path || !*path)
		return error_set(LOMAS_EINVAL, "lomas_profile_load: no path");
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;
		return error_set(e == ENOENT ? LOMAS_ENOENT : LOMAS_EIO, "%s: %s", path,
		                 strerror(e));
	}
	if (fstat(fd, &sb) != 0) {
		int e = errno;
		close(fd);
		return error_set(LOMAS_EIO, "%s: %s", path, strerror(e));
	}
	if (S_ISDIR(sb.st_mode)) {
		close(fd);
		return error_set(LOMAS_EIO, "%s: %s", path, strerror(EISDIR));
	}
	st = read_all(fd, path, S_ISREG(sb.st_mode) && sb.st_size > 0 ? (size_t)sb.st_size : 65536,
	              &buf, &len);
	close(fd);
	if (st)
		return st;
	st = profile_load_buffer(buf, len, path, out);
	free(buf);
	return st;
}

/* fsync the directory holding path so the rename itself is durable (best effort). */
static void sync_parent(const char *path)
{
	const char *slash = strrchr(path, '/');
	char *dir;
	int fd;
	if (!slash) {
		dir = strdup(".");
	} else {
		size_t n = slash == path ? 1 : (size_t)(slash - path);
		dir = strndup(path, n);
	}
	if (!dir)
		return;
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	free(dir);
	if (fd >= 0) {
		fsync(fd);
		close(fd);
	}
}

lomas_status lomas_profile_save(const lomas_profile *p, const char *path)
{
	return profile_save_file(p, path, true);
}

lomas_status profile_save_file(const lomas_profile *p, const char *path, bool durable)
{
	return profile_save_file_src(p, NULL, path, durable);
}

lomas_status profile_save_file_src(const lomas_profile *p, const profile_sample_source *src,
                                   const char *path, bool durable)
{
	char *tmp;
	struct stat sb;
	mode_t mode = 0644;
	lomas_status st;
	int fd, e;

	if (!p || !path || !*path)
		return error_set(LOMAS_EINVAL, "lomas_profile_save: NULL profile or path");
	tmp = malloc(strlen(path) + 8);
	if (!tmp)
		return error_set(LOMAS_ENOMEM, "out of memory");
	strcpy(tmp, path);
	strcat(tmp, ".XXXXXX");
	fd = mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		e = errno;
		st = error_set(LOMAS_EIO, "%s: cannot create a temporary file %s: %s", path, tmp,
		               strerror(e));
		free(tmp);
		return st;
	}
	/* mkstemp makes the file 0600; keep an existing target's permissions. */
	if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode))
		mode = sb.st_mode & 07777;
	if (fchmod(fd, mode) != 0) {
		e = errno;
		close(fd);
		goto fail;
	}
	/* Encoded straight into the file: no image of it in memory. */
	if ((st = profile_save_fd_src(p, src, fd))) {
		char why[256];
		snprintf(why, sizeof why, "%s", lomas_error_message());
		close(fd);
		unlink(tmp);
		free(tmp);
		return error_set(st, "%s: %s", path, why);
	}
	if ((durable && fsync(fd) != 0)) {
		e = errno;
		close(fd);
		goto fail;
	}
	if (close(fd) != 0) {
		e = errno;
		goto fail;
	}
	if (rename(tmp, path) != 0) {
		e = errno;
		goto fail;
	}
	if (durable)
		sync_parent(path);
	free(tmp);
	return LOMAS_OK;
fail:
	unlink(tmp);
	st = error_set(LOMAS_EIO, "%s: %s", path, strerror(e));
	free(tmp);
	return st;
}

/*
 * Profile files on disk: load (one read of the whole file, then the decoder of
 * profile_encode.c, profile_decode.c) and atomic save (temporary file in the same directory,
 * fsync, rename over the target).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
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

lomas_status file_read_all(const char *path, uint8_t **out, size_t *len)
{
	struct stat sb;
	lomas_status st;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
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
	              out, len);
	close(fd);
	return st;
}

lomas_status lomas_profile_load(const char *path, lomas_profile **out)
{
	error_clear();
	uint8_t *buf = NULL;
	size_t len = 0;
	lomas_status st;

	if (!out)
		return error_set(LOMAS_EINVAL, "lomas_profile_load: out is NULL");
	*out = NULL;
	if (!path || !*path)
		return error_set(LOMAS_EINVAL, "lomas_profile_load: no path");
	if ((st = file_read_all(path, &buf, &len)))
		return st;
	st = profile_load_buffer(buf, len, path, out);
	free(buf);
	return st;
}

/* ------------------------------------------------------------ save-path I/O */

save_io_fault save_io_faults;

/* Whether this wrapped call is the one a test asked to fail (errno set). */
static bool io_fails(void)
{
	save_io_fault *f = &save_io_faults;
	if (!f->armed || ++f->calls != f->fail_at)
		return false;
	errno = f->err;
	return true;
}

int save_io_open(const char *path, int flags, mode_t mode)
{
	return io_fails() ? -1 : open(path, flags, mode);
}

ssize_t save_io_pwrite(int fd, const void *buf, size_t len, off_t off)
{
	if (!io_fails())
		return pwrite(fd, buf, len, off);
	if (save_io_faults.short_write && len > 1) {
		save_io_faults.fail_at++; /* half now, the error on the next call */
		return pwrite(fd, buf, len / 2, off);
	}
	return -1;
}

int save_io_fchmod(int fd, mode_t mode)
{
	return io_fails() ? -1 : fchmod(fd, mode);
}

int save_io_fsync(int fd)
{
	return io_fails() ? -1 : fsync(fd);
}

int save_io_close(int fd)
{
	/* A failed close(2) has still released fd (Linux): never retried. */
	if (io_fails()) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return close(fd);
}

int save_io_rename(const char *from, const char *to)
{
	return io_fails() ? -1 : rename(from, to);
}

/* ------------------------------------------------------------------- save */

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
	fd = save_io_open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
	free(dir);
	if (fd >= 0) {
		save_io_fsync(fd);
		save_io_close(fd);
	}
}

/*
 * Create a new temporary file "path.XXXXXX" (tmp: room for it) for writing.
 * open(2) with mode 0666 lets the kernel apply the umask (and a default
 * ACL) as it does for every other tool's output; mkstemp would make it 0600
 * whatever the umask. -1 with errno set on failure.
 */
static int create_temp(const char *path, char *tmp)
{
	static const char set[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
	static _Atomic uint64_t counter;
	size_t n = strlen(path);
	struct timespec ts;
	rng r;
	clock_gettime(CLOCK_REALTIME, &ts);
	rng_seed(&r, (uint64_t)ts.tv_nsec ^ (uint64_t)ts.tv_sec << 30 ^ (uint64_t)getpid() << 20 ^
	                 atomic_fetch_add(&counter, 1) ^ (uint64_t)(uintptr_t)tmp);
	memcpy(tmp, path, n);
	tmp[n] = '.';
	tmp[n + 7] = '\0';
	for (int tries = 0; tries < 100; tries++) {
		uint64_t x = rng_next(&r);
		int fd;
		for (size_t i = 0; i < 6; i++, x /= sizeof set - 1)
			tmp[n + 1 + i] = set[x % (sizeof set - 1)];
		fd = save_io_open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
		if (fd >= 0 || errno != EEXIST)
			return fd;
	}
	errno = EEXIST;
	return -1;
}

lomas_status lomas_profile_save(const lomas_profile *p, const char *path)
{
	error_clear();
	return profile_save_file(p, path, true);
}

lomas_status profile_save_file(const lomas_profile *p, const char *path, bool durable)
{
	return profile_save_file_src(p, NULL, path, durable);
}

lomas_status profile_save_file_src(const lomas_profile *p, const profile_sample_source *src,
                                   const char *path, bool durable)
{
	char *tmp, why[512];
	const char *step;
	struct stat sb;
	lomas_status st;
	int fd, e;

	if (!p || !path || !*path)
		return error_set(LOMAS_EINVAL, "lomas_profile_save: NULL profile or path");
	tmp = malloc(strlen(path) + 8);
	if (!tmp)
		return error_set(LOMAS_ENOMEM, "%s: out of memory", path);
	fd = create_temp(path, tmp);
	if (fd < 0) {
		e = errno;
		st = error_set(LOMAS_EIO, "%s: cannot create a temporary file %s: %s", path, tmp,
		               strerror(e));
		free(tmp);
		return st;
	}
	/*
	 * Replacing a regular file of ours: keep its permission bits, as cp and
	 * sed -i do (a profile made private stays private). Another user's file
	 * (say in /tmp) lends us nothing: the umask's mode stays.
	 */
	if (stat(path, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_uid == geteuid() &&
	    save_io_fchmod(fd, sb.st_mode & 0777) != 0) {
		step = "cannot set the file mode";
		goto fail_errno;
	}
	/* Encoded straight into the file: no image of it in memory. */
	if ((st = profile_save_fd_src(p, src, fd))) {
		snprintf(why, sizeof why, "%s", lomas_error_message());
		save_io_close(fd);
		unlink(tmp);
		free(tmp);
		return error_set(st, "%s: %s", path, why);
	}
	if (durable && save_io_fsync(fd) != 0) {
		step = "fsync failed";
		goto fail_errno;
	}
	/* close(2) is where NFS and quotas may report a failed write. */
	e = save_io_close(fd) != 0 ? errno : 0;
	fd = -1;
	if (e) {
		errno = e;
		step = "close failed";
		goto fail_errno;
	}
	if (save_io_rename(tmp, path) != 0) {
		step = "rename failed";
		goto fail_errno;
	}
	if (durable)
		sync_parent(path);
	free(tmp);
	return LOMAS_OK;
fail_errno:
	e = errno;
	if (fd >= 0)
		save_io_close(fd);
	unlink(tmp);
	st = error_set(LOMAS_EIO, "%s: %s (temporary file %s): %s", path, step, tmp, strerror(e));
	free(tmp);
	return st;
}

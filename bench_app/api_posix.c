/* The POSIX backend: open/lseek/write/read/close, as IOR's and HACC-IO's POSIX paths do
 * (both seek then write by default), so libiez sees the calls a real run makes. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench.h"

struct bench_file {
    int fd;
    char path[];
};

static struct bench_file *posix_open_flags(const char *path, int flags)
{
    size_t n = strlen(path) + 1;
    struct bench_file *f = malloc(sizeof *f + n);
    if (!f) {
        bench_fail("open", path, UINT64_MAX, ENOMEM);
        return NULL;
    }
    memcpy(f->path, path, n);
    do
        f->fd = open(path, flags, 0664);
    while (f->fd < 0 && errno == EINTR);
    if (f->fd < 0) {
        bench_fail(flags & O_CREAT ? "create" : "open", path, UINT64_MAX, errno);
        free(f);
        return NULL;
    }
    return f;
}

/* Each process opens on its own: `shared` changes nothing, and the size comes from the writes. */
static struct bench_file *posix_create(const char *path, int shared, uint64_t size)
{
    (void)shared, (void)size;
    return posix_open_flags(path, O_WRONLY | O_CREAT);
}

static struct bench_file *posix_open(const char *path, enum bench_access access, int shared)
{
    (void)shared;
    return posix_open_flags(path, access == BENCH_WRITE ? O_WRONLY : O_RDONLY);
}

static int posix_xfer(enum bench_access access, struct bench_file *f, void *buf, uint64_t len, uint64_t offset)
{
    const char *op = access == BENCH_WRITE ? "write" : "read";
    if (lseek(f->fd, (off_t)offset, SEEK_SET) < 0) {
        bench_fail("seek", f->path, offset, errno);
        return -1;
    }
    char *p = buf;
    uint64_t done = 0;
    while (done < len) {
        size_t want = (size_t)(len - done);
        ssize_t n = access == BENCH_WRITE ? write(f->fd, p + done, want) : read(f->fd, p + done, want);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            bench_fail(op, f->path, offset + done, errno);
            return -1;
        }
        if (n == 0) {
            if (access == BENCH_READ)
                bench_fail_msg("read %s at offset %llu: the file ends there, %llu bytes short", f->path,
                               (unsigned long long)(offset + done), (unsigned long long)(len - done));
            else
                bench_fail("write", f->path, offset + done, EIO);
            return -1;
        }
        done += (uint64_t)n;
    }
    return 0;
}

static int posix_set_size(struct bench_file *f, uint64_t size)
{
    if (ftruncate(f->fd, (off_t)size) < 0) {
        bench_fail("ftruncate", f->path, size, errno);
        return -1;
    }
    return 0;
}

static int posix_fsync(struct bench_file *f)
{
    if (fsync(f->fd) < 0) {
        bench_fail("fsync", f->path, UINT64_MAX, errno);
        return -1;
    }
    return 0;
}

static int posix_close(struct bench_file *f)
{
    /* close is not retried on EINTR: on Linux the descriptor is gone either way */
    int rc = close(f->fd);
    if (rc < 0)
        bench_fail("close", f->path, UINT64_MAX, errno);
    free(f);
    return rc < 0 ? -1 : 0;
}

/* Only a regular file or a symlink: a typo must not unlink a device node or a socket. The
 * other backends remove files this way too. */
int bench_posix_remove(const char *path)
{
    struct stat st;
    if (lstat(path, &st) < 0 || !(S_ISREG(st.st_mode) || S_ISLNK(st.st_mode)))
        return 0;
    if (unlink(path) < 0 && errno != ENOENT) {
        bench_fail("remove", path, UINT64_MAX, errno);
        return -1;
    }
    return 0;
}

const struct bench_api bench_posix_api = {
    .name = "POSIX",
    .create = posix_create,
    .open = posix_open,
    .xfer = posix_xfer,
    .set_size = posix_set_size,
    .fsync = posix_fsync,
    .close = posix_close,
    .remove = bench_posix_remove,
};

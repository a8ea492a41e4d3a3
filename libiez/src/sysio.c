#include "sysio.h"
#include "hot.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

IEZ_HOT int iez_sys_openat(int dirfd, const char *path, int flags, mode_t mode)
{
    return (int)syscall(SYS_openat, dirfd, path, flags, mode);
}

IEZ_HOT int iez_sys_close(int fd) { return (int)syscall(SYS_close, fd); }

ssize_t iez_sys_read(int fd, void *buf, size_t n) { return syscall(SYS_read, fd, buf, n); }

ssize_t iez_sys_write(int fd, const void *buf, size_t n) { return syscall(SYS_write, fd, buf, n); }

ssize_t iez_sys_pread(int fd, void *buf, size_t n, off_t off) { return syscall(SYS_pread64, fd, buf, n, off); }

off_t iez_sys_lseek(int fd, off_t off, int whence) { return (off_t)syscall(SYS_lseek, fd, off, whence); }

int iez_sys_fstat(int fd, struct stat *st) { return (int)syscall(SYS_fstat, fd, st); }

int iez_write_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n) {
        ssize_t w = iez_sys_write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* n bytes, in 2 MiB pages where it is that large (a hint: without it, as with THP off or no huge
 * page free, 4 KiB pages), zeroed if asked */
static void *alloc_pages(size_t n, int zero)
{
    const size_t huge = (size_t)2 << 20;
    if (n < huge)
        return zero ? calloc(1, n ? n : 1) : malloc(n ? n : 1);
    size_t len = (n + huge - 1) & ~(huge - 1);
    void *p = NULL;
    if (len < n || posix_memalign(&p, huge, len))
        return NULL;
    int e = errno; /* a kernel without THP refuses the hint: not the caller's error */
    madvise(p, len, MADV_HUGEPAGE);
    errno = e;
    return zero ? memset(p, 0, len) : p;
}

void *iez_alloc_table(size_t n) { return alloc_pages(n, 1); }

int iez_read_file(const char *path, size_t max, char **out, size_t *outlen)
{
    int fd = iez_sys_openat(AT_FDCWD, path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY, 0);
    if (fd < 0)
        return -errno;
    struct stat st;
    int e = iez_sys_fstat(fd, &st) < 0 ? errno : !S_ISREG(st.st_mode) ? EINVAL : (uint64_t)st.st_size > max ? EFBIG : 0;
    if (e) {
        iez_sys_close(fd);
        return -e;
    }
    /* the file, one byte more to see its end without growing (realloc would lose the huge pages:
     * moved off their 2 MiB alignment, or copied), and the NUL; not zeroed, the read fills it */
    size_t cap = (size_t)st.st_size + 2, len = 0;
    char *buf = alloc_pages(cap, 0);
    if (!buf) {
        iez_sys_close(fd);
        return -ENOMEM;
    }
    for (;;) {
        if (len + 1 == cap) { /* the file grew while we read it: up to one byte past max */
            size_t grow = cap * 2 < max + 2 ? cap * 2 : max + 2;
            char *b = len <= max ? realloc(buf, grow) : NULL;
            if (!b) {
                free(buf);
                iez_sys_close(fd);
                return len <= max ? -ENOMEM : -EFBIG;
            }
            buf = b;
            cap = grow;
        }
        ssize_t r = iez_sys_read(fd, buf + len, cap - 1 - len);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            int e = errno;
            free(buf);
            iez_sys_close(fd);
            return -e;
        }
        if (r == 0)
            break;
        len += (size_t)r;
    }
    iez_sys_close(fd);
    if (len > max) {
        free(buf);
        return -EFBIG;
    }
    buf[len] = 0;
    *out = buf;
    *outlen = len;
    return 0;
}

/* mkdir -p, each missing directory 0700 */
static void make_dirs(const char *dir)
{
    if (syscall(SYS_mkdirat, AT_FDCWD, dir, 0700) == 0 || errno != ENOENT)
        return;
    char p[PATH_MAX];
    size_t n = strlen(dir);
    if (n >= sizeof p)
        return;
    memcpy(p, dir, n + 1);
    for (char *s = p + 1; (s = strchr(s, '/')); s++) {
        *s = 0;
        syscall(SYS_mkdirat, AT_FDCWD, p, 0700);
        *s = '/';
    }
    syscall(SYS_mkdirat, AT_FDCWD, p, 0700);
}

int iez_trusted_dir(const char *what, const char *dir, char *why, size_t cap)
{
    int saved = errno, rc = -1;
    make_dirs(dir);
    struct stat st;
    unsigned euid = (unsigned)geteuid();
    if (syscall(SYS_newfstatat, AT_FDCWD, dir, &st, 0) < 0)
        snprintf(why, cap, "%s %s cannot be made: %s", what, dir, strerror(errno));
    else if (!S_ISDIR(st.st_mode))
        snprintf(why, cap, "%s %s is not a directory", what, dir);
    else if (st.st_uid != euid && st.st_uid != 0)
        snprintf(why, cap, "%s %s belongs to uid %u, not to this user (uid %u) or root", what, dir, (unsigned)st.st_uid, euid);
    else if ((st.st_mode & (S_IWGRP | S_IWOTH)) && !(st.st_mode & S_ISVTX))
        snprintf(why, cap, "%s %s is writable by %s without the sticky bit (mode %04o)", what, dir,
                 st.st_mode & S_IWOTH ? "others" : "its group", (unsigned)(st.st_mode & 07777));
    else
        rc = 0;
    errno = saved;
    return rc;
}

int iez_own_create(struct iez_own *f, mode_t mode)
{
    int fd = iez_sys_openat(AT_FDCWD, f->path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    struct stat st;
    if (fd >= 0 && iez_sys_fstat(fd, &st) < 0) {
        int e = errno;
        iez_sys_close(fd);
        errno = e;
        return -1;
    }
    if (fd >= 0) {
        f->dev = st.st_dev;
        f->ino = st.st_ino;
    }
    return fd;
}

int iez_own_open(const struct iez_own *f)
{
    /* O_NONBLOCK: a FIFO put in its place cannot block the application */
    int fd = iez_sys_openat(AT_FDCWD, f->path, O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0);
    struct stat st;
    if (fd < 0)
        return -1;
    if (iez_sys_fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_dev == f->dev && st.st_ino == f->ino)
        return fd;
    iez_sys_close(fd);
    errno = ESTALE;
    return -1;
}

int iez_own_truncate(const struct iez_own *f, off_t size)
{
    int fd = iez_own_open(f);
    if (fd < 0)
        return -1;
    int rc = (int)syscall(SYS_ftruncate, fd, size);
    iez_sys_close(fd);
    return rc;
}

int iez_own_read(const struct iez_own *f, size_t n, char **out)
{
    int fd = iez_own_open(f);
    char *buf = fd < 0 ? NULL : malloc(n ? n : 1);
    size_t got = 0;
    while (buf && got < n) {
        ssize_t r = iez_sys_pread(fd, buf + got, n - got, (off_t)got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    if (fd >= 0)
        iez_sys_close(fd);
    if (got < n) {
        free(buf);
        return -1;
    }
    *out = buf;
    return 0;
}

int iez_own_unlink(const struct iez_own *f)
{
    struct stat st;
    if (syscall(SYS_newfstatat, AT_FDCWD, f->path, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return -1;
    if (st.st_dev != f->dev || st.st_ino != f->ino) {
        errno = ESTALE;
        return -1;
    }
    return (int)syscall(SYS_unlinkat, AT_FDCWD, f->path, 0);
}

char *iez_map_reserved(int fd, off_t off, size_t len)
{
    if (syscall(SYS_fallocate, fd, 0, off, (off_t)len) != 0) {
        if (errno != EOPNOTSUPP && errno != ENOSYS)
            return NULL;
        static const char zeros[4096];
        for (size_t o = 0; o < len; o += sizeof zeros)
            if (syscall(SYS_pwrite64, fd, zeros, sizeof zeros, off + (off_t)o) != (long)sizeof zeros)
                return NULL;
    }
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, off);
    return p == MAP_FAILED ? NULL : p;
}

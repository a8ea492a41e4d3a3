#include "sysio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

int iez_sys_openat(int dirfd, const char *path, int flags, mode_t mode)
{
    return (int)syscall(SYS_openat, dirfd, path, flags, mode);
}

int iez_sys_close(int fd) { return (int)syscall(SYS_close, fd); }

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

int iez_read_file(const char *path, char **out, size_t *outlen)
{
    int fd = iez_sys_openat(AT_FDCWD, path, O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    struct stat st;
    int e = iez_sys_fstat(fd, &st) < 0 ? errno : S_ISREG(st.st_mode) ? 0 : EINVAL;
    if (e) {
        iez_sys_close(fd);
        return -e;
    }
    size_t cap = (size_t)st.st_size + 1, len = 0;
    char *buf = malloc(cap);
    if (!buf) {
        iez_sys_close(fd);
        return -ENOMEM;
    }
    for (;;) {
        if (len + 1 == cap) { /* the file grew while we read it */
            char *b = realloc(buf, cap * 2);
            if (!b) {
                free(buf);
                iez_sys_close(fd);
                return -ENOMEM;
            }
            buf = b;
            cap *= 2;
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
    buf[len] = 0;
    *out = buf;
    *outlen = len;
    return 0;
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

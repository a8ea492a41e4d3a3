/* The POSIX layer: opens and creates (placement, then tracing), descriptor bookkeeping
 * (close, dup, fcntl), and byte accounting for the write and read families. Each wrapper calls
 * the real function first and does its own work only for a traced descriptor; errno is the
 * real call's. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/sendfile.h>
#include <sys/uio.h>
#include <unistd.h>

#include "access.h"
#include "hot.h"
#include "core.h"
#include "open.h"
#include "real.h"
#include "trace.h"

int __open_2(const char *, int);
int __open64_2(const char *, int);
int __openat_2(int, const char *, int);
int __openat64_2(int, const char *, int);

#define NEEDS_MODE(f) (((f)&O_CREAT) || ((f)&__O_TMPFILE) == __O_TMPFILE)
#define MODE_ARG(flags)                          \
    mode_t mode = 0;                             \
    if (NEEDS_MODE(flags)) {                     \
        va_list ap;                              \
        va_start(ap, flags);                     \
        mode = (mode_t)va_arg(ap, int);          \
        va_end(ap);                              \
    }

/* Every open wrapper: CALL(f) is the real call with open flags f. */
#define IEZ_OPEN(dirfd_, path_, flags_, mode_, CALL)                  \
    struct iez_open op;                                               \
    iez_init();                                                       \
    iez_open_begin(&op, dirfd_, path_, flags_, mode_, IEZ_API_POSIX); \
    int fd = CALL(op.flags);                                          \
    if (iez_open_retry(&op, fd))                                      \
        fd = CALL(flags_);                                            \
    iez_open_end(&op, fd);                                            \
    return fd

IEZ_HOT IEZ_EXPORT int open(const char *path, int flags, ...)
{
    MODE_ARG(flags);
#define CALL(f) iez_real.open(path, f, mode)
    IEZ_OPEN(AT_FDCWD, path, flags, mode, CALL);
#undef CALL
}

IEZ_HOT IEZ_EXPORT int open64(const char *path, int flags, ...)
{
    MODE_ARG(flags);
#define CALL(f) iez_real.open64(path, f, mode)
    IEZ_OPEN(AT_FDCWD, path, flags, mode, CALL);
#undef CALL
}

IEZ_HOT IEZ_EXPORT int openat(int dirfd, const char *path, int flags, ...)
{
    MODE_ARG(flags);
#define CALL(f) iez_real.openat(dirfd, path, f, mode)
    IEZ_OPEN(dirfd, path, flags, mode, CALL);
#undef CALL
}

IEZ_HOT IEZ_EXPORT int openat64(int dirfd, const char *path, int flags, ...)
{
    MODE_ARG(flags);
#define CALL(f) iez_real.openat64(dirfd, path, f, mode)
    IEZ_OPEN(dirfd, path, flags, mode, CALL);
#undef CALL
}

/* creat never has O_EXCL, so placement never changes its flags */
IEZ_HOT IEZ_EXPORT int creat(const char *path, mode_t mode)
{
#define CALL(f) ((void)(f), iez_real.creat(path, mode))
    IEZ_OPEN(AT_FDCWD, path, O_CREAT | O_WRONLY | O_TRUNC, mode, CALL);
#undef CALL
}

IEZ_HOT IEZ_EXPORT int creat64(const char *path, mode_t mode)
{
#define CALL(f) ((void)(f), iez_real.creat64(path, mode))
    IEZ_OPEN(AT_FDCWD, path, O_CREAT | O_WRONLY | O_TRUNC, mode, CALL);
#undef CALL
}

/* _FORTIFY_SOURCE's variants: open(path, flags) with flags unknown at compile time */
IEZ_HOT IEZ_EXPORT int __open_2(const char *path, int flags)
{
#define CALL(f) iez_real.__open_2(path, f)
    IEZ_OPEN(AT_FDCWD, path, flags, 0, CALL);
#undef CALL
}

IEZ_HOT IEZ_EXPORT int __open64_2(const char *path, int flags)
{
#define CALL(f) iez_real.__open64_2(path, f)
    IEZ_OPEN(AT_FDCWD, path, flags, 0, CALL);
#undef CALL
}

IEZ_HOT IEZ_EXPORT int __openat_2(int dirfd, const char *path, int flags)
{
#define CALL(f) iez_real.__openat_2(dirfd, path, f)
    IEZ_OPEN(dirfd, path, flags, 0, CALL);
#undef CALL
}

IEZ_HOT IEZ_EXPORT int __openat64_2(int dirfd, const char *path, int flags)
{
#define CALL(f) iez_real.__openat64_2(dirfd, path, f)
    IEZ_OPEN(dirfd, path, flags, 0, CALL);
#undef CALL
}

/* -- descriptors -------------------------------------------------------------------------- */

IEZ_HOT IEZ_EXPORT int close(int fd)
{
    if (IEZ_UNLIKELY(iez_tracing))
        iez_trace_closed(fd); /* before: the number may be reused as soon as it is closed */
    if (IEZ_LIKELY(!iez_access_files))
        return iez_real.close(fd);
    int r = iez_real.close(fd); /* the token is given back after the file's last bytes */
    int saved = errno;
    iez_access_closed(fd);
    errno = saved;
    return r;
}

IEZ_EXPORT int close_range(unsigned first, unsigned last, int flags)
{
    if (IEZ_UNLIKELY(iez_tracing) && !(flags & CLOSE_RANGE_CLOEXEC))
        iez_trace_close_range(first, last);
    if (IEZ_UNLIKELY(iez_access_files) && !(flags & CLOSE_RANGE_CLOEXEC))
        for (unsigned fd = first; fd <= last && fd < 65536; fd++)
            iez_access_closed((int)fd);
    return iez_real.close_range(first, last, flags);
}

IEZ_EXPORT void closefrom(int lowfd)
{
    if (IEZ_UNLIKELY(iez_tracing) && lowfd >= 0)
        iez_trace_close_range((unsigned)lowfd, ~0u);
    if (IEZ_UNLIKELY(iez_access_files))
        for (int fd = lowfd < 0 ? 0 : lowfd; fd < 65536; fd++)
            iez_access_closed(fd);
    iez_real.closefrom(lowfd);
}

IEZ_EXPORT int dup(int fd)
{
    int r = iez_real.dup(fd);
    if (IEZ_UNLIKELY(iez_access_files) && r >= 0)
        iez_access_dup(fd, r);
    if (IEZ_UNLIKELY(iez_tracing) && r >= 0)
        iez_trace_dup(fd, r);
    return r;
}

IEZ_EXPORT int dup2(int fd, int to)
{
    int r = iez_real.dup2(fd, to);
    if (IEZ_UNLIKELY(iez_access_files) && r >= 0)
        iez_access_dup(fd, r);
    if (IEZ_UNLIKELY(iez_tracing) && r >= 0)
        iez_trace_dup(fd, r);
    return r;
}

IEZ_EXPORT int dup3(int fd, int to, int flags)
{
    int r = iez_real.dup3(fd, to, flags);
    if (IEZ_UNLIKELY(iez_access_files) && r >= 0)
        iez_access_dup(fd, r);
    if (IEZ_UNLIKELY(iez_tracing) && r >= 0)
        iez_trace_dup(fd, r);
    return r;
}

static int after_fcntl(int fd, int cmd, void *arg, int r)
{
    if (IEZ_UNLIKELY(iez_access_files) && r >= 0 && (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC))
        iez_access_dup(fd, r);
    if (IEZ_LIKELY(!iez_tracing) || r < 0)
        return r;
    if (cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC)
        iez_trace_dup(fd, r);
    else if (cmd == F_SETFL)
        iez_trace_set_append(fd, !!((long)arg & O_APPEND));
    return r;
}

IEZ_EXPORT int fcntl(int fd, int cmd, ...)
{
    va_list ap;
    va_start(ap, cmd);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    return after_fcntl(fd, cmd, arg, iez_real.fcntl(fd, cmd, arg));
}

IEZ_EXPORT int fcntl64(int fd, int cmd, ...)
{
    va_list ap;
    va_start(ap, cmd);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    return after_fcntl(fd, cmd, arg, iez_real.fcntl64(fd, cmd, arg));
}

/* -- data: a few instructions unless the descriptor is traced (t0: only with IEZ_IOLOG) ----- */

/* The write system call made here rather than by libc's function, when that is all libc's
 * would do: its function is the next one (real.c) and the process has one thread, where glibc's
 * makes the bare system call (with threads it makes it a cancellation point; a pthread_cancel,
 * which a process of one thread may call on itself, turns this off too). libc's function would
 * add a frame to return through after the system call, each such return mispredicted here (the
 * kernel's "Safe RET", docs/libiez.md "Performance"): without it a traced write has as many as
 * without libiez. */
#if defined(__x86_64__)
/* Only small writes, where the 10-20 ns saved count: from 8 KiB on, the wrapper's own call
 * measured slower than glibc's (+40 ns at 8 KiB, +130 ns at 16 KiB, where 512 B was 25-35 ns
 * faster); why is not known (docs/libiez.md). */
#define DIRECT_MAX 4096u

static inline int direct_sys(size_t n)
{
    return IEZ_LIKELY(iez_real_libc_writes) && n <= DIRECT_MAX && __libc_single_threaded &&
           !__atomic_load_n(&iez_cancel_seen, __ATOMIC_RELAXED);
}

static inline ssize_t sys_ret(long r)
{
    if (IEZ_UNLIKELY((unsigned long)r > -4096ul)) {
        errno = (int)-r;
        return -1;
    }
    return r;
}

#define SYS3(nr, a, b, c)                                                                        \
    ({                                                                                           \
        long r_;                                                                                 \
        __asm__ volatile("syscall" : "=a"(r_) : "0"((long)(nr)), "D"((long)(a)), "S"((long)(b)), \
                         "d"((long)(c)) : "rcx", "r11", "memory");                               \
        sys_ret(r_);                                                                             \
    })
#define SYS4(nr, a, b, c, d)                                                                     \
    ({                                                                                           \
        long r_;                                                                                 \
        register long r10_ __asm__("r10") = (long)(d);                                           \
        __asm__ volatile("syscall" : "=a"(r_) : "0"((long)(nr)), "D"((long)(a)), "S"((long)(b)), \
                         "d"((long)(c)), "r"(r10_) : "rcx", "r11", "memory");                    \
        sys_ret(r_);                                                                             \
    })
#define WRITE_CALL(fd, buf, n) (direct_sys(n) ? SYS3(SYS_write, fd, buf, n) : iez_real.write(fd, buf, n))
#define PWRITE_CALL(real, fd, buf, n, off) \
    (direct_sys(n) ? SYS4(SYS_pwrite64, fd, buf, n, off) : iez_real.real(fd, buf, n, off))
#else
#define WRITE_CALL(fd, buf, n) iez_real.write(fd, buf, n)
#define PWRITE_CALL(real, fd, buf, n, off) iez_real.real(fd, buf, n, off)
#endif

IEZ_EXPORT ssize_t write(int fd, const void *buf, size_t n)
{
    uint64_t t0 = iez_io_t0();
    ssize_t r = WRITE_CALL(fd, buf, n);
    iez_wrote(fd, r, -1, t0);
    return r;
}

IEZ_EXPORT ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
    uint64_t t0 = iez_io_t0();
    ssize_t r = PWRITE_CALL(pwrite, fd, buf, n, off);
    iez_wrote(fd, r, off, t0);
    return r;
}

IEZ_EXPORT ssize_t pwrite64(int fd, const void *buf, size_t n, off_t off)
{
    uint64_t t0 = iez_io_t0();
    ssize_t r = PWRITE_CALL(pwrite64, fd, buf, n, off);
    iez_wrote(fd, r, off, t0);
    return r;
}

IEZ_EXPORT ssize_t writev(int fd, const struct iovec *iov, int cnt)
{
    uint64_t t0 = iez_io_t0();
    ssize_t r = iez_real.writev(fd, iov, cnt);
    iez_wrote(fd, r, -1, t0);
    return r;
}

IEZ_EXPORT ssize_t pwritev(int fd, const struct iovec *iov, int cnt, off_t off)
{
    uint64_t t0 = iez_io_t0();
    ssize_t r = iez_real.pwritev(fd, iov, cnt, off);
    iez_wrote(fd, r, off, t0);
    return r;
}

IEZ_EXPORT ssize_t pwritev64(int fd, const struct iovec *iov, int cnt, off_t off)
{
    uint64_t t0 = iez_io_t0();
    ssize_t r = iez_real.pwritev64(fd, iov, cnt, off);
    iez_wrote(fd, r, off, t0);
    return r;
}

/* offset -1: at the file position, as writev */
IEZ_EXPORT ssize_t pwritev2(int fd, const struct iovec *iov, int cnt, off_t off, int flags)
{
    uint64_t t0 = iez_io_t0();
    ssize_t r = iez_real.pwritev2(fd, iov, cnt, off, flags);
    iez_wrote(fd, r, off, t0);
    return r;
}

IEZ_EXPORT ssize_t pwritev64v2(int fd, const struct iovec *iov, int cnt, off_t off, int flags)
{
    uint64_t t0 = iez_io_t0();
    ssize_t r = iez_real.pwritev64v2(fd, iov, cnt, off, flags);
    iez_wrote(fd, r, off, t0);
    return r;
}

IEZ_EXPORT ssize_t read(int fd, void *buf, size_t n)
{
    uint64_t t0 = iez_io_t0();
    ssize_t r = iez_real.read(fd, buf, n);
    iez_read(fd, r, -1, t0);
    return r;
}

IEZ_EXPORT ssize_t readv(int fd, const struct iovec *iov, int cnt)
{
    uint64_t t0 = iez_io_t0();
    ssize_t r = iez_real.readv(fd, iov, cnt);
    iez_read(fd, r, -1, t0);
    return r;
}

IEZ_EXPORT ssize_t pread(int fd, void *buf, size_t n, off_t off)
{
    uint64_t t0 = iez_io_t0();
    ssize_t r = iez_real.pread(fd, buf, n, off);
    iez_read(fd, r, off, t0);
    return r;
}

IEZ_EXPORT ssize_t pread64(int fd, void *buf, size_t n, off_t off)
{
    uint64_t t0 = iez_io_t0();
    ssize_t r = iez_real.pread64(fd, buf, n, off);
    iez_read(fd, r, off, t0);
    return r;
}

IEZ_EXPORT ssize_t preadv(int fd, const struct iovec *iov, int cnt, off_t off)
{
    uint64_t t0 = iez_io_t0();
    ssize_t r = iez_real.preadv(fd, iov, cnt, off);
    iez_read(fd, r, off, t0);
    return r;
}

IEZ_EXPORT ssize_t preadv64(int fd, const struct iovec *iov, int cnt, off_t off)
{
    uint64_t t0 = iez_io_t0();
    ssize_t r = iez_real.preadv64(fd, iov, cnt, off);
    iez_read(fd, r, off, t0);
    return r;
}

IEZ_EXPORT off_t lseek(int fd, off_t off, int whence)
{
    off_t r = iez_real.lseek(fd, off, whence);
    iez_seeked(fd, r);
    return r;
}

IEZ_EXPORT off_t lseek64(int fd, off_t off, int whence)
{
    off_t r = iez_real.lseek64(fd, off, whence);
    iez_seeked(fd, r);
    return r;
}

/* In-kernel copies (cp uses copy_file_range, Python's shutil sendfile): bytes written too. */
IEZ_EXPORT ssize_t sendfile(int out, int in, off_t *off, size_t n)
{
    uint64_t t0 = iez_io_t0();
    ssize_t r = IEZ_REAL(sendfile)(out, in, off, n);
    iez_wrote(out, r, -1, t0);
    iez_read(in, r, off && r > 0 ? *off - r : -1, t0);
    return r;
}

IEZ_EXPORT ssize_t sendfile64(int out, int in, off_t *off, size_t n)
{
    uint64_t t0 = iez_io_t0();
    ssize_t r = IEZ_REAL(sendfile64)(out, in, off, n);
    iez_wrote(out, r, -1, t0);
    iez_read(in, r, off && r > 0 ? *off - r : -1, t0);
    return r;
}

IEZ_EXPORT ssize_t copy_file_range(int in, off_t *inoff, int out, off_t *outoff, size_t n, unsigned flags)
{
    uint64_t t0 = iez_io_t0();
    ssize_t r = IEZ_REAL(copy_file_range)(in, inoff, out, outoff, n, flags);
    iez_wrote(out, r, outoff && r > 0 ? *outoff - r : -1, t0); /* the kernel has moved *outoff past the copy */
    iez_read(in, r, inoff && r > 0 ? *inoff - r : -1, t0);
    return r;
}

IEZ_EXPORT ssize_t splice(int in, off_t *inoff, int out, off_t *outoff, size_t n, unsigned flags)
{
    uint64_t t0 = iez_io_t0();
    ssize_t r = IEZ_REAL(splice)(in, inoff, out, outoff, n, flags);
    iez_wrote(out, r, outoff && r > 0 ? *outoff - r : -1, t0);
    iez_read(in, r, inoff && r > 0 ? *inoff - r : -1, t0);
    return r;
}

/* -- renames: the trace learns a file's final name (rsync writes under a temporary one) ------- */

/* Every rename this process makes (not only of files it traced: `mv` after the writer exits is
 * the common case), as what happened: a failed one (EXDEV included: the caller copies, and
 * that copy is a create of its own) is not traced, an exchange is not a rename. */
static void renamed(int r, int olddir, const char *old, int newdir, const char *new)
{
    if (IEZ_LIKELY(!iez_tracing) || r != 0 || !old || !new || !iez_owner() || !iez_enter())
        return;
    int saved = errno;
    char from[PATH_MAX], to[PATH_MAX];
    int n = iez_absolute(olddir, old, from, sizeof from), m = iez_absolute(newdir, new, to, sizeof to);
    if (n >= 0 && m >= 0 && !iez_system_path(from, (size_t)n))
        iez_trace_renamed(from, (size_t)n, to, (size_t)m);
    errno = saved;
    iez_leave();
}

IEZ_EXPORT int rename(const char *old, const char *new)
{
    int r = IEZ_REAL(rename)(old, new);
    renamed(r, AT_FDCWD, old, AT_FDCWD, new);
    return r;
}

IEZ_EXPORT int renameat(int olddir, const char *old, int newdir, const char *new)
{
    int r = IEZ_REAL(renameat)(olddir, old, newdir, new);
    renamed(r, olddir, old, newdir, new);
    return r;
}

IEZ_EXPORT int renameat2(int olddir, const char *old, int newdir, const char *new, unsigned flags)
{
    int r = IEZ_REAL(renameat2)(olddir, old, newdir, new, flags);
    renamed((flags & RENAME_EXCHANGE) ? -1 : r, olddir, old, newdir, new);
    return r;
}

/* -- process end without exit(): finish the trace first -------------------------------------- */

IEZ_EXPORT void _exit(int status)
{
    iez_fini();
    iez_real._exit(status);
    __builtin_unreachable();
}

IEZ_EXPORT void _Exit(int status)
{
    iez_fini();
    iez_real._Exit(status);
    __builtin_unreachable();
}

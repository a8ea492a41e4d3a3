/* The stdio layer: fopen creates are placed and traced like open's (api "stdio"), and bytes
 * are counted where the application hands them to stdio, since glibc's own flushes reach the
 * kernel through internal calls no wrapper sees. */
#define __NO_INLINE__ 1 /* no inline putchar etc. from <bits/stdio.h>: we define them */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "access.h"
#include "core.h"
#include "open.h"
#include "real.h"
#include "trace.h"

int __fprintf_chk(FILE *, int, const char *, ...);
int __vfprintf_chk(FILE *, int, const char *, va_list);
int __printf_chk(int, const char *, ...);
int __vprintf_chk(int, const char *, va_list);

/* The traced descriptor under a stream (writing, reading: adopted on its first use, as a
 * descriptor is: stdout redirected to a file by the shell that exec'd this program), or NULL. */
static struct iez_ofd *stream_ofd(FILE *fp, int *fd, int writing)
{
    if (IEZ_LIKELY(!iez_tracing) || !fp)
        return NULL;
    int saved = errno;
    *fd = fileno_unlocked(fp);
    errno = saved;
    return writing < 0 ? iez_fd_get(*fd) : iez_fd_use(*fd, writing);
}

static void stream_wrote(FILE *fp, long n)
{
    int fd;
    struct iez_ofd *o = n > 0 ? stream_ofd(fp, &fd, 1) : NULL;
    if (!o)
        return;
    int64_t off = -1;
    if (__atomic_load_n(&o->ask_pos, __ATOMIC_RELAXED)) {
        /* the stream's own position (what it has buffered is not in the file yet) costs a
         * system call: asked for bulk writes only, the facts a layout needs; a putc or printf
         * to a redirected stdout counts its bytes and size without it */
        if (n < BUFSIZ) {
            iez_trace_wrote(o, fd, (uint64_t)n, IEZ_OFF_UNKNOWN, 0);
            return;
        }
        int saved = errno;
        off_t p = ftello(fp);
        errno = saved;
        if (p < n)
            return;
        off = p - n;
    }
    iez_trace_wrote(o, fd, (uint64_t)n, off, iez_io_t0());
}

static void stream_read(FILE *fp, long n)
{
    int fd;
    struct iez_ofd *o = n > 0 ? stream_ofd(fp, &fd, 0) : NULL;
    if (o)
        iez_trace_read(o, fd, (uint64_t)n, -1, iez_io_t0());
}

static void stream_seeked(FILE *fp)
{
    int fd;
    struct iez_ofd *o = stream_ofd(fp, &fd, -1);
    if (!o || iez_fd_is_none(o))
        return;
    int saved = errno;
    off_t p = ftello(fp);
    errno = saved;
    if (p >= 0)
        iez_trace_seeked(o, (uint64_t)p);
}

/* open(2) flags of an fopen mode ("r", "w+", "ax", "we", ...), or -1 */
static int mode_flags(const char *mode)
{
    int acc, f;
    switch (mode[0]) {
    case 'r': acc = O_RDONLY, f = 0; break;
    case 'w': acc = O_WRONLY, f = O_CREAT | O_TRUNC; break;
    case 'a': acc = O_WRONLY, f = O_CREAT | O_APPEND; break;
    default: return -1;
    }
    for (const char *p = mode + 1; *p && *p != ','; p++) {
        if (*p == '+')
            acc = O_RDWR;
        else if (*p == 'x')
            f |= O_EXCL;
        else if (*p == 'e')
            f |= O_CLOEXEC;
    }
    return acc | f;
}

static FILE *do_fopen(FILE *(*real)(const char *, const char *), const char *path, const char *mode)
{
    int flags = mode ? mode_flags(mode) : -1;
    if (flags < 0)
        return real(path, mode);
    struct iez_open op;
    iez_init();
    iez_open_begin(&op, AT_FDCWD, path, flags, 0666, IEZ_API_STDIO);
    char m[64];
    const char *use = mode;
    if (op.flags != flags && strlen(mode) < sizeof m) {
        /* our create was the exclusive one: the stream opens the file that now exists */
        char *q = m;
        const char *p = mode;
        for (; *p && *p != ','; p++)
            if (*p != 'x')
                *q++ = *p;
        strcpy(q, p); /* ",ccs=..." as given */
        use = m;
    }
    FILE *fp = real(path, use);
    if (iez_open_retry(&op, fp ? 0 : -1))
        fp = real(path, mode);
    iez_open_end(&op, fp ? fileno_unlocked(fp) : -1);
    return fp;
}

IEZ_EXPORT FILE *fopen(const char *path, const char *mode) { return do_fopen(IEZ_REAL(fopen), path, mode); }

IEZ_EXPORT FILE *fopen64(const char *path, const char *mode) { return do_fopen(IEZ_REAL(fopen64), path, mode); }

IEZ_EXPORT int fclose(FILE *fp)
{
    int fd;
    if (stream_ofd(fp, &fd, -1))
        iez_trace_closed(fd);
    if (IEZ_LIKELY(!iez_access_files) || !fp)
        return IEZ_REAL(fclose)(fp);
    int saved = errno, ofd = fileno_unlocked(fp);
    errno = saved;
    int r = IEZ_REAL(fclose)(fp); /* the token is given back after the stream's buffered bytes */
    saved = errno;
    iez_access_closed(ofd);
    errno = saved;
    return r;
}

IEZ_EXPORT size_t fwrite(const void *buf, size_t size, size_t n, FILE *fp)
{
    size_t r = IEZ_REAL(fwrite)(buf, size, n, fp);
    stream_wrote(fp, (long)(r * size));
    return r;
}

IEZ_EXPORT size_t fread(void *buf, size_t size, size_t n, FILE *fp)
{
    size_t r = IEZ_REAL(fread)(buf, size, n, fp);
    stream_read(fp, (long)(r * size));
    return r;
}

IEZ_EXPORT int fputs(const char *s, FILE *fp)
{
    int r = IEZ_REAL(fputs)(s, fp);
    if (r >= 0)
        stream_wrote(fp, (long)strlen(s));
    return r;
}

IEZ_EXPORT int puts(const char *s)
{
    int r = IEZ_REAL(puts)(s);
    if (r >= 0)
        stream_wrote(stdout, (long)strlen(s) + 1);
    return r;
}

IEZ_EXPORT int fputc(int c, FILE *fp)
{
    int r = IEZ_REAL(fputc)(c, fp);
    if (r != EOF)
        stream_wrote(fp, 1);
    return r;
}

IEZ_EXPORT int putc(int c, FILE *fp)
{
    int r = IEZ_REAL(putc)(c, fp);
    if (r != EOF)
        stream_wrote(fp, 1);
    return r;
}

IEZ_EXPORT int putchar(int c)
{
    int r = IEZ_REAL(putchar)(c);
    if (r != EOF)
        stream_wrote(stdout, 1);
    return r;
}

/* the _unlocked variants (coreutils' head, cat and dd write stdout with them) */
IEZ_EXPORT size_t fwrite_unlocked(const void *buf, size_t size, size_t n, FILE *fp)
{
    size_t r = IEZ_REAL(fwrite_unlocked)(buf, size, n, fp);
    stream_wrote(fp, (long)(r * size));
    return r;
}

IEZ_EXPORT size_t fread_unlocked(void *buf, size_t size, size_t n, FILE *fp)
{
    size_t r = IEZ_REAL(fread_unlocked)(buf, size, n, fp);
    stream_read(fp, (long)(r * size));
    return r;
}

IEZ_EXPORT int fputs_unlocked(const char *s, FILE *fp)
{
    int r = IEZ_REAL(fputs_unlocked)(s, fp);
    if (r >= 0)
        stream_wrote(fp, (long)strlen(s));
    return r;
}

IEZ_EXPORT int fputc_unlocked(int c, FILE *fp)
{
    int r = IEZ_REAL(fputc_unlocked)(c, fp);
    if (r != EOF)
        stream_wrote(fp, 1);
    return r;
}

IEZ_EXPORT int putc_unlocked(int c, FILE *fp)
{
    int r = IEZ_REAL(putc_unlocked)(c, fp);
    if (r != EOF)
        stream_wrote(fp, 1);
    return r;
}

IEZ_EXPORT int putchar_unlocked(int c)
{
    int r = IEZ_REAL(putchar_unlocked)(c);
    if (r != EOF)
        stream_wrote(stdout, 1);
    return r;
}

IEZ_EXPORT int vfprintf(FILE *fp, const char *fmt, va_list ap)
{
    int r = IEZ_REAL(vfprintf)(fp, fmt, ap);
    stream_wrote(fp, r);
    return r;
}

IEZ_EXPORT int fprintf(FILE *fp, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = IEZ_REAL(vfprintf)(fp, fmt, ap);
    va_end(ap);
    stream_wrote(fp, r);
    return r;
}

IEZ_EXPORT int vprintf(const char *fmt, va_list ap)
{
    int r = IEZ_REAL(vprintf)(fmt, ap);
    stream_wrote(stdout, r);
    return r;
}

IEZ_EXPORT int printf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = IEZ_REAL(vprintf)(fmt, ap);
    va_end(ap);
    stream_wrote(stdout, r);
    return r;
}

IEZ_EXPORT int __vfprintf_chk(FILE *fp, int flag, const char *fmt, va_list ap)
{
    int r = IEZ_REAL(__vfprintf_chk)(fp, flag, fmt, ap);
    stream_wrote(fp, r);
    return r;
}

IEZ_EXPORT int __fprintf_chk(FILE *fp, int flag, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = IEZ_REAL(__vfprintf_chk)(fp, flag, fmt, ap);
    va_end(ap);
    stream_wrote(fp, r);
    return r;
}

IEZ_EXPORT int __vprintf_chk(int flag, const char *fmt, va_list ap)
{
    int r = IEZ_REAL(__vprintf_chk)(flag, fmt, ap);
    stream_wrote(stdout, r);
    return r;
}

IEZ_EXPORT int __printf_chk(int flag, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = IEZ_REAL(__vprintf_chk)(flag, fmt, ap);
    va_end(ap);
    stream_wrote(stdout, r);
    return r;
}

IEZ_EXPORT int fseek(FILE *fp, long off, int whence)
{
    int r = IEZ_REAL(fseek)(fp, off, whence);
    if (r == 0)
        stream_seeked(fp);
    return r;
}

IEZ_EXPORT int fseeko(FILE *fp, off_t off, int whence)
{
    int r = IEZ_REAL(fseeko)(fp, off, whence);
    if (r == 0)
        stream_seeked(fp);
    return r;
}

IEZ_EXPORT int fseeko64(FILE *fp, off_t off, int whence)
{
    int r = IEZ_REAL(fseeko64)(fp, off, whence);
    if (r == 0)
        stream_seeked(fp);
    return r;
}

IEZ_EXPORT void rewind(FILE *fp)
{
    IEZ_REAL(rewind)(fp);
    stream_seeked(fp);
}

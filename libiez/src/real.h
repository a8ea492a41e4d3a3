/* The real functions behind libiez's wrappers, resolved once with dlsym(RTLD_NEXT) as Darshan's
 * preload build does. The system-call ones start out as raw-syscall stand-ins, so a wrapper
 * called before resolution (or from inside dlsym) still works and never waits for it. */
#ifndef IEZ_REAL_H
#define IEZ_REAL_H

#include <mqueue.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <threads.h>
#include <time.h>

#define IEZ_REAL_LIST(X)                                                          \
    X(open, int, (const char *, int, ...))                                        \
    X(open64, int, (const char *, int, ...))                                      \
    X(openat, int, (int, const char *, int, ...))                                 \
    X(openat64, int, (int, const char *, int, ...))                               \
    X(creat, int, (const char *, mode_t))                                         \
    X(creat64, int, (const char *, mode_t))                                       \
    X(__open_2, int, (const char *, int))                                         \
    X(__open64_2, int, (const char *, int))                                       \
    X(__openat_2, int, (int, const char *, int))                                  \
    X(__openat64_2, int, (int, const char *, int))                                \
    X(close, int, (int))                                                          \
    X(close_range, int, (unsigned, unsigned, int))                                \
    X(closefrom, void, (int))                                                     \
    X(dup, int, (int))                                                            \
    X(dup2, int, (int, int))                                                      \
    X(dup3, int, (int, int, int))                                                 \
    X(fcntl, int, (int, int, ...))                                                \
    X(fcntl64, int, (int, int, ...))                                              \
    X(write, ssize_t, (int, const void *, size_t))                                \
    X(pwrite, ssize_t, (int, const void *, size_t, off_t))                        \
    X(pwrite64, ssize_t, (int, const void *, size_t, off_t))                      \
    X(writev, ssize_t, (int, const struct iovec *, int))                          \
    X(pwritev, ssize_t, (int, const struct iovec *, int, off_t))                  \
    X(pwritev64, ssize_t, (int, const struct iovec *, int, off_t))                \
    X(pwritev2, ssize_t, (int, const struct iovec *, int, off_t, int))            \
    X(pwritev64v2, ssize_t, (int, const struct iovec *, int, off_t, int))         \
    X(read, ssize_t, (int, void *, size_t))                                       \
    X(pread, ssize_t, (int, void *, size_t, off_t))                               \
    X(pread64, ssize_t, (int, void *, size_t, off_t))                             \
    X(readv, ssize_t, (int, const struct iovec *, int))                           \
    X(preadv, ssize_t, (int, const struct iovec *, int, off_t))                   \
    X(preadv64, ssize_t, (int, const struct iovec *, int, off_t))                 \
    X(lseek, off_t, (int, off_t, int))                                            \
    X(lseek64, off_t, (int, off_t, int))                                          \
    X(sendfile, ssize_t, (int, int, off_t *, size_t))                             \
    X(sendfile64, ssize_t, (int, int, off_t *, size_t))                           \
    X(copy_file_range, ssize_t, (int, off_t *, int, off_t *, size_t, unsigned))   \
    X(splice, ssize_t, (int, off_t *, int, off_t *, size_t, unsigned))            \
    X(_exit, void, (int))                                                         \
    X(_Exit, void, (int))                                                         \
    X(fopen, FILE *, (const char *, const char *))                                \
    X(fopen64, FILE *, (const char *, const char *))                              \
    X(fclose, int, (FILE *))                                                      \
    X(fwrite, size_t, (const void *, size_t, size_t, FILE *))                     \
    X(fread, size_t, (void *, size_t, size_t, FILE *))                            \
    X(fputs, int, (const char *, FILE *))                                         \
    X(puts, int, (const char *))                                                  \
    X(fputc, int, (int, FILE *))                                                  \
    X(putc, int, (int, FILE *))                                                   \
    X(putchar, int, (int))                                                        \
    X(vfprintf, int, (FILE *, const char *, va_list))                             \
    X(vprintf, int, (const char *, va_list))                                      \
    X(__vfprintf_chk, int, (FILE *, int, const char *, va_list))                  \
    X(__vprintf_chk, int, (int, const char *, va_list))                           \
    X(fseek, int, (FILE *, long, int))                                            \
    X(fseeko, int, (FILE *, off_t, int))                                          \
    X(fseeko64, int, (FILE *, off_t, int))                                        \
    X(rewind, void, (FILE *))                                                     \
    X(fwrite_unlocked, size_t, (const void *, size_t, size_t, FILE *))            \
    X(fread_unlocked, size_t, (void *, size_t, size_t, FILE *))                   \
    X(fputs_unlocked, int, (const char *, FILE *))                                \
    X(fputc_unlocked, int, (int, FILE *))                                         \
    X(putc_unlocked, int, (int, FILE *))                                          \
    X(putchar_unlocked, int, (int))                                               \
    X(rename, int, (const char *, const char *))                                  \
    X(renameat, int, (int, const char *, int, const char *))                      \
    X(renameat2, int, (int, const char *, int, const char *, unsigned))           \
    X(mkstemp, int, (char *))                                                     \
    X(mkstemp64, int, (char *))                                                   \
    X(mkostemp, int, (char *, int))                                               \
    X(mkostemp64, int, (char *, int))                                             \
    X(mkstemps, int, (char *, int))                                               \
    X(mkstemps64, int, (char *, int))                                             \
    X(mkostemps, int, (char *, int, int))                                         \
    X(mkostemps64, int, (char *, int, int))                                       \
    X(pthread_create, int, (pthread_t *, const pthread_attr_t *, void *(*)(void *), void *)) \
    X(thrd_create, int, (thrd_t *, thrd_start_t, void *))                          \
    X(timer_create, int, (clockid_t, struct sigevent *, timer_t *))               \
    X(mq_notify, int, (mqd_t, const struct sigevent *))                           \
    X(pthread_cancel, int, (pthread_t))

struct iez_real_table {
#define IEZ_REAL_FIELD(name, ret, args) ret(*name) args;
    IEZ_REAL_LIST(IEZ_REAL_FIELD)
#undef IEZ_REAL_FIELD
};

extern struct iez_real_table iez_real;
extern int iez_real_done;
/* write, pwrite and pwrite64 are libc's own (no library after libiez interposes them): their
 * wrappers may make the system call themselves (posix.c) */
extern int iez_real_libc_writes;

void iez_real_resolve(void);

/* The real function `name`, resolving the table first if that has not happened yet. */
#define IEZ_REAL(name) ((__builtin_expect(iez_real_done, 1) ? (void)0 : iez_real_resolve()), iez_real.name)

#endif

#include "real.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Raw-syscall stand-ins, in force until dlsym has answered (see real.h). */
static int sc_open(const char *p, int f, ...)
{
    va_list ap;
    va_start(ap, f);
    mode_t m = (f & (O_CREAT | __O_TMPFILE)) ? (mode_t)va_arg(ap, int) : 0;
    va_end(ap);
    return (int)syscall(SYS_openat, AT_FDCWD, p, f, m);
}
static int sc_openat(int d, const char *p, int f, ...)
{
    va_list ap;
    va_start(ap, f);
    mode_t m = (f & (O_CREAT | __O_TMPFILE)) ? (mode_t)va_arg(ap, int) : 0;
    va_end(ap);
    return (int)syscall(SYS_openat, d, p, f, m);
}
static int sc_creat(const char *p, mode_t m) { return (int)syscall(SYS_openat, AT_FDCWD, p, O_CREAT | O_WRONLY | O_TRUNC, m); }
static int sc_open_2(const char *p, int f) { return (int)syscall(SYS_openat, AT_FDCWD, p, f, 0); }
static int sc_openat_2(int d, const char *p, int f) { return (int)syscall(SYS_openat, d, p, f, 0); }
static int sc_close(int fd) { return (int)syscall(SYS_close, fd); }
static int sc_close_range(unsigned a, unsigned b, int f) { return (int)syscall(SYS_close_range, a, b, f); }
static void sc_closefrom(int fd) { syscall(SYS_close_range, (unsigned)fd, ~0u, 0); }
static int sc_dup(int fd) { return (int)syscall(SYS_dup, fd); }
static int sc_dup2(int a, int b) { return a == b ? (int)syscall(SYS_fcntl, a, F_GETFD) < 0 ? -1 : b : (int)syscall(SYS_dup3, a, b, 0); }
static int sc_dup3(int a, int b, int f) { return (int)syscall(SYS_dup3, a, b, f); }
static int sc_fcntl(int fd, int cmd, ...)
{
    va_list ap;
    va_start(ap, cmd);
    long arg = va_arg(ap, long);
    va_end(ap);
    return (int)syscall(SYS_fcntl, fd, cmd, arg);
}
static ssize_t sc_write(int fd, const void *b, size_t n) { return syscall(SYS_write, fd, b, n); }
static ssize_t sc_pwrite(int fd, const void *b, size_t n, off_t o) { return syscall(SYS_pwrite64, fd, b, n, o); }
static ssize_t sc_writev(int fd, const struct iovec *v, int n) { return syscall(SYS_writev, fd, v, n); }
static ssize_t sc_pwritev(int fd, const struct iovec *v, int n, off_t o) { return syscall(SYS_pwritev, fd, v, n, o, 0); }
static ssize_t sc_pwritev2(int fd, const struct iovec *v, int n, off_t o, int f) { return syscall(SYS_pwritev2, fd, v, n, o, 0, f); }
static ssize_t sc_read(int fd, void *b, size_t n) { return syscall(SYS_read, fd, b, n); }
static ssize_t sc_pread(int fd, void *b, size_t n, off_t o) { return syscall(SYS_pread64, fd, b, n, o); }
static ssize_t sc_readv(int fd, const struct iovec *v, int n) { return syscall(SYS_readv, fd, v, n); }
static ssize_t sc_preadv(int fd, const struct iovec *v, int n, off_t o) { return syscall(SYS_preadv, fd, v, n, o, 0); }
static off_t sc_lseek(int fd, off_t o, int w) { return (off_t)syscall(SYS_lseek, fd, o, w); }
static ssize_t sc_sendfile(int a, int b, off_t *o, size_t n) { return syscall(SYS_sendfile, a, b, o, n); }
static ssize_t sc_cfr(int a, off_t *ao, int b, off_t *bo, size_t n, unsigned f) { return syscall(SYS_copy_file_range, a, ao, b, bo, n, f); }
static ssize_t sc_splice(int a, off_t *ao, int b, off_t *bo, size_t n, unsigned f) { return syscall(SYS_splice, a, ao, b, bo, n, f); }
static void sc_exit(int s)
{
    for (;;)
        syscall(SYS_exit_group, s);
}

struct iez_real_table iez_real = {
    .open = sc_open, .open64 = sc_open, .openat = sc_openat, .openat64 = sc_openat,
    .creat = sc_creat, .creat64 = sc_creat, .__open_2 = sc_open_2, .__open64_2 = sc_open_2,
    .__openat_2 = sc_openat_2, .__openat64_2 = sc_openat_2, .close = sc_close,
    .close_range = sc_close_range, .closefrom = sc_closefrom, .dup = sc_dup, .dup2 = sc_dup2,
    .dup3 = sc_dup3, .fcntl = sc_fcntl, .fcntl64 = sc_fcntl, .write = sc_write,
    .pwrite = sc_pwrite, .pwrite64 = sc_pwrite, .writev = sc_writev, .pwritev = sc_pwritev,
    .pwritev64 = sc_pwritev, .pwritev2 = sc_pwritev2, .pwritev64v2 = sc_pwritev2, .read = sc_read,
    .pread = sc_pread, .pread64 = sc_pread, .readv = sc_readv, .preadv = sc_preadv,
    .preadv64 = sc_preadv, .lseek = sc_lseek, .lseek64 = sc_lseek, .sendfile = sc_sendfile,
    .sendfile64 = sc_sendfile, .copy_file_range = sc_cfr, .splice = sc_splice, ._exit = sc_exit,
    ._Exit = sc_exit,
};
int iez_real_done;
int iez_real_libc_writes;

/* Whether write, pwrite and pwrite64 are libc's own: no library loaded after libiez interposes
 * them (another tracer would miss the calls a wrapper made itself). */
static int libc_writes(void)
{
    void *libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
    if (!libc)
        return 0;
    int own = dlsym(libc, "write") == (void *)iez_real.write && dlsym(libc, "pwrite") == (void *)iez_real.pwrite &&
              dlsym(libc, "pwrite64") == (void *)iez_real.pwrite64;
    dlclose(libc);
    return own;
}

static __thread int resolving __attribute__((tls_model("initial-exec")));

void iez_real_resolve(void)
{
    if (resolving) /* dlsym called one of our wrappers: the stand-ins serve it */
        return;
    resolving = 1;
#define IEZ_REAL_DLSYM(name, ret, args)                   \
    {                                                     \
        void *p = dlsym(RTLD_NEXT, #name);                \
        if (p)                                            \
            __atomic_store_n((void **)&iez_real.name, p, __ATOMIC_RELAXED); \
    }
    IEZ_REAL_LIST(IEZ_REAL_DLSYM)
#undef IEZ_REAL_DLSYM
    __atomic_store_n(&iez_real_libc_writes, libc_writes(), __ATOMIC_RELAXED);
    __atomic_store_n(&iez_real_done, 1, __ATOMIC_RELEASE);
    resolving = 0;
}

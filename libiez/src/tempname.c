/* The mkstemp family: glibc creates the file inside itself (its own open, which no wrapper
 * sees), so a program's temporary files would be neither placed nor traced. Each wrapper does
 * what glibc's __gen_tempname does (the template's six X's before the suffix replaced by
 * letters and digits, a new name on EEXIST, up to 62^3 names) and creates each name through
 * libiez's create path, as open(O_CREAT | O_EXCL | O_RDWR, 0600) would: placed from the plan,
 * traced as created, the record noting how many characters at the end of its name were
 * generated (docs/trace-format.md). When libiez neither traces nor places, the real call. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core.h"
#include "open.h"
#include "real.h"
#include "shard.h"

#define X_LEN 6                      /* glibc's x_suffix_len */
#define ATTEMPTS (62 * 62 * 62)      /* glibc's ATTEMPTS_MIN (above TMP_MAX) */

static const char letters[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

/* 64 random bits: the kernel's (without waiting for entropy at boot), else the clocks mixed
 * into the previous value as glibc's fallback does. */
static uint64_t random_bits(uint64_t prev)
{
    uint64_t r;
    if (syscall(SYS_getrandom, &r, sizeof r, GRND_NONBLOCK) == (long)sizeof r)
        return r;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    r = (prev ^ (uint64_t)ts.tv_sec) * 2862933555777941757u + 3037000493u;
    r = (r ^ (uint64_t)ts.tv_nsec) * 2862933555777941757u + 3037000493u;
    return (r ^ (uint64_t)getpid()) * 2862933555777941757u + 3037000493u;
}

/* One create of name as open(name, flags, 0600) goes through libiez (posix.c's IEZ_OPEN), the
 * generated characters noted for the trace when they end the name (no suffix after them). */
static int create(const char *name, int flags, int suffixlen)
{
    struct iez_open op;
    iez_open_begin(&op, AT_FDCWD, name, flags, S_IRUSR | S_IWUSR, IEZ_API_POSIX);
    op.name_random = suffixlen ? 0 : X_LEN;
    int fd = IEZ_REAL(open)(name, op.flags, S_IRUSR | S_IWUSR);
    if (iez_open_retry(&op, fd))
        fd = IEZ_REAL(open)(name, flags, S_IRUSR | S_IWUSR);
    iez_open_end(&op, fd);
    return fd;
}

/* glibc's __gen_tempname for __GT_FILE: the descriptor, or -1 with errno (EINVAL: no six X's
 * before the suffix; EEXIST: every name tried was taken; else the create's). */
static int gen_tempname(char *tmpl, int suffixlen, int flags)
{
    size_t len = strlen(tmpl);
    if (suffixlen < 0 || len < X_LEN + (size_t)suffixlen ||
        strspn(tmpl + len - X_LEN - suffixlen, "X") < X_LEN) {
        errno = EINVAL;
        return -1;
    }
    char *x = tmpl + len - X_LEN - suffixlen;
    int saved = errno;
    flags = (flags & ~O_ACCMODE) | O_RDWR | O_CREAT | O_EXCL;
    /* 10 base-62 digits per 64 bits, drawn below the largest multiple of 62^10 so each is fair */
    const uint64_t unfair_min = UINT64_MAX - UINT64_MAX % 839299365868340224u;
    uint64_t v = 0;
    int digits = 0;
    for (int n = 0; n < ATTEMPTS; n++) {
        for (int i = 0; i < X_LEN; i++) {
            if (!digits) {
                do
                    v = random_bits(v);
                while (v >= unfair_min);
                digits = 10;
            }
            x[i] = letters[v % 62];
            v /= 62;
            digits--;
        }
        int fd = create(tmpl, flags, suffixlen);
        if (fd >= 0) {
            errno = saved;
            return fd;
        }
        if (errno != EEXIST)
            return -1;
    }
    errno = EEXIST;
    return -1;
}

/* Ours when libiez has work to do and glibc's name generation is the one mirrored (not inside
 * libiez's own work, whose files are not the application's); else the real call, if found. */
static int ours(int have_real)
{
    iez_init();
    return !have_real || ((iez_tracing || iez_placing()) && !iez_busy);
}

#define TEMPNAME(name, args, call, suffixlen, flags)                                 \
    IEZ_EXPORT int name args                                                         \
    {                                                                                \
        if (!ours(IEZ_REAL(name) != NULL))                                            \
            return iez_real.name call;                                               \
        return gen_tempname(tmpl, suffixlen, flags);                                 \
    }

TEMPNAME(mkstemp, (char *tmpl), (tmpl), 0, 0)
TEMPNAME(mkstemp64, (char *tmpl), (tmpl), 0, O_LARGEFILE)
TEMPNAME(mkostemp, (char *tmpl, int flags), (tmpl, flags), 0, flags)
TEMPNAME(mkostemp64, (char *tmpl, int flags), (tmpl, flags), 0, flags | O_LARGEFILE)
TEMPNAME(mkstemps, (char *tmpl, int suffixlen), (tmpl, suffixlen), suffixlen, 0)
TEMPNAME(mkstemps64, (char *tmpl, int suffixlen), (tmpl, suffixlen), suffixlen, O_LARGEFILE)
TEMPNAME(mkostemps, (char *tmpl, int suffixlen, int flags), (tmpl, suffixlen, flags), suffixlen, flags)
TEMPNAME(mkostemps64, (char *tmpl, int suffixlen, int flags), (tmpl, suffixlen, flags), suffixlen,
         flags | O_LARGEFILE)

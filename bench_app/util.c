/* Errors as one line, byte sizes as IOR takes them, a clock every rank shares. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"

static char error_line[1536];

void bench_fail(const char *op, const char *path, uint64_t offset, int err)
{
    if (error_line[0])
        return; /* the first error is the one that explains the rest */
    const char *name = strerrorname_np(err);
    char at[48] = "";
    if (offset != UINT64_MAX)
        snprintf(at, sizeof at, " at offset %llu", (unsigned long long)offset);
    snprintf(error_line, sizeof error_line, "%s %s%s: %s (errno %d%s%s)", op, path, at, strerror(err), err,
             name ? " " : "", name ? name : "");
}

void bench_fail_msg(const char *fmt, ...)
{
    if (error_line[0])
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(error_line, sizeof error_line, fmt, ap);
    va_end(ap);
}

const char *bench_error(void) { return error_line[0] ? error_line : "unknown error"; }

int bench_failed(void) { return error_line[0] != '\0'; }

/* 1048576, 64k, 1m, 2g, 1t (IOR's suffixes, powers of 1024), also 64K, 64KiB, 64KB. */
int bench_parse_size(const char *s, uint64_t *out)
{
    if (!s || *s < '0' || *s > '9')
        return -1;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno)
        return -1;
    unsigned shift = 0;
    switch (*end) {
    case 'k': case 'K': shift = 10; break;
    case 'm': case 'M': shift = 20; break;
    case 'g': case 'G': shift = 30; break;
    case 't': case 'T': shift = 40; break;
    case 'p': case 'P': shift = 50; break;
    default: break;
    }
    if (shift) {
        end++;
        if (*end == 'i' && end[1] == 'B')
            end += 2;
        else if (*end == 'B')
            end++;
    } else if (*end == 'B') {
        end++;
    }
    if (*end || (shift && v > (UINT64_MAX >> shift)))
        return -1;
    *out = (uint64_t)v << shift;
    return 0;
}

/* CLOCK_MONOTONIC is one clock for every process of the machine, so ranks' times compare. */
double bench_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

void *bench_alloc(size_t n)
{
    void *p = NULL;
    if (posix_memalign(&p, 4096, n ? n : 1)) {
        bench_fail_msg("cannot allocate %zu bytes of buffer", n);
        return NULL;
    }
    return p;
}

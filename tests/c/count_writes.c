/* libiez-test-countwrites.so: a library preloaded after libiez that interposes write, pwrite and
 * pwrite64 as another tracer would, and counts the calls that reach it (printed to stderr at
 * exit as "countwrites N"), for tests/test_libiez_core.py: libiez's wrappers must still call it. */
#include <dlfcn.h>
#include <stdio.h>
#include <sys/types.h>

static long calls;

#define PASS(name, params, args)                                          \
    __attribute__((visibility("default"))) ssize_t name params            \
    {                                                                     \
        static ssize_t(*real) params;                                     \
        if (!real)                                                        \
            real = (ssize_t(*) params)dlsym(RTLD_NEXT, #name);            \
        __atomic_add_fetch(&calls, 1, __ATOMIC_RELAXED);                  \
        return real args;                                                 \
    }

PASS(write, (int fd, const void *b, size_t n), (fd, b, n))
PASS(pwrite, (int fd, const void *b, size_t n, off_t o), (fd, b, n, o))
PASS(pwrite64, (int fd, const void *b, size_t n, off_t o), (fd, b, n, o))

__attribute__((destructor)) static void report(void) { fprintf(stderr, "countwrites %ld\n", calls); }

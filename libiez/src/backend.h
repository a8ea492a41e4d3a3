/* Where a file lives decides how libiez gives it a layout: one table of operations per
 * backend, as IOR's aiori backends are (hpc/ior src/aiori.h), and as src/iez/backend/ is on
 * the Python side. Selection: a path under IEZ_EMULATED's fs/ is on the emulated cluster;
 * a parent directory whose statfs f_type is LL_SUPER_MAGIC is on Lustre; anything else gets
 * `none` (trace only). */
#ifndef IEZ_BACKEND_H
#define IEZ_BACKEND_H

#include <stddef.h>
#include <sys/types.h>

/* A layout as lov_user_md bytes (malloc'd). */
struct iez_lum_bytes {
    void *data;
    size_t len;
};

/* What a backend can do, as IOR's aiori table says what each backend supports: callers test
 * these flags and never which backend they hold. */
enum iez_backend_caps {
    IEZ_BE_LUSTRE = 1u << 0,       /* Lustre, real or emulated: its files get layouts and are the
                                      job's files for IO-Cop's file and coarse modes */
    IEZ_BE_EVERY_CREATE = 1u << 1, /* its MDS must see every create, in trace-only mode too, as a
                                      real MDS does (the emulated one allocates and counts) */
    IEZ_BE_IOLOG = 1u << 2,        /* reads and writes go to the I/O event log (IEZ_IOLOG) */
};

struct iez_backend {
    const char *name;
    unsigned caps;                   /* enum iez_backend_caps */
    /* Create the file (dirfd, path), whose absolute name is abs, exclusively and with the
     * layout spec (plan grammar; NULL: the file system's default), then close it. The
     * exclusive create is Algorithm 1's fileExists(): an existing file is never touched.
     * 0: created (and *set, if not NULL, holds the layout it got, when the backend knows it);
     * -EEXIST: the file exists; -ENOTSUP: the file system does this itself at the
     * application's open; any other -errno: nothing was created. */
    int (*create)(int dirfd, const char *path, const char *abs, mode_t mode, const char *spec, size_t speclen,
                  struct iez_lum_bytes *set);
    /* The layout of an open file, as the lov_user_md bytes the file system returns: the
     * length, or -errno (-ERANGE: cap is too small). */
    ssize_t (*layout)(int fd, void *buf, size_t cap);
};

extern const struct iez_backend iez_backend_lustre, iez_backend_emulated, iez_backend_none;

/* statfs f_type of a Lustre client (references: l-abi-super-magic) */
#define IEZ_LL_SUPER_MAGIC 0x0BD00BD0

const struct iez_backend *iez_backend_of_path(const char *abs, size_t len);
/* dev: the open file's st_dev (the answer for a device is remembered, per thread) */
const struct iez_backend *iez_backend_of_fd(int fd, dev_t dev, const char *abs, size_t len);

#endif

#include "backend.h"
#include "hot.h"

#include <errno.h>
#include <string.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "state.h"

IEZ_HOT static int under_emulated(const char *abs, size_t len)
{
    return (iez_cfg.emu_fs_len && len > iez_cfg.emu_fs_len && !memcmp(abs, iez_cfg.emu_fs, iez_cfg.emu_fs_len)) ||
           (iez_cfg.emu_fs_real_len && len > iez_cfg.emu_fs_real_len &&
            !memcmp(abs, iez_cfg.emu_fs_real, iez_cfg.emu_fs_real_len));
}

IEZ_HOT const struct iez_backend *iez_backend_of_path(const char *abs, size_t len)
{
    if (under_emulated(abs, len))
        return &iez_backend_emulated;
    /* the parent directory: the file itself does not exist yet */
    char parent[4096];
    const char *slash = memrchr(abs, '/', len);
    size_t plen = slash == abs ? 1 : (size_t)(slash - abs);
    if (!slash || plen >= sizeof parent)
        return &iez_backend_none;
    memcpy(parent, abs, plen);
    parent[plen] = 0;
    struct statfs sf;
    int saved = errno;
    int lustre = syscall(SYS_statfs, parent, &sf) == 0 && (unsigned)sf.f_type == IEZ_LL_SUPER_MAGIC;
    errno = saved;
    return lustre ? &iez_backend_lustre : &iez_backend_none;
}

const struct iez_backend *iez_backend_of_fd(int fd, dev_t dev, const char *abs, size_t len)
{
    /* initial-exec: a static of a shared library is read through __tls_get_addr otherwise */
    static __thread dev_t known_dev __attribute__((tls_model("initial-exec")));
    static __thread int known __attribute__((tls_model("initial-exec")));
    static __thread int lustre __attribute__((tls_model("initial-exec")));
    if (under_emulated(abs, len))
        return &iez_backend_emulated;
    if (!known || dev != known_dev) {
        struct statfs sf;
        int saved = errno;
        if (syscall(SYS_fstatfs, fd, &sf) < 0) {
            errno = saved;
            return &iez_backend_none;
        }
        errno = saved;
        lustre = (unsigned)sf.f_type == IEZ_LL_SUPER_MAGIC;
        known_dev = dev;
        known = 1;
    }
    return lustre ? &iez_backend_lustre : &iez_backend_none;
}

static int none_create(int dirfd, const char *path, const char *abs, mode_t mode, const char *spec, size_t speclen,
                       struct iez_lum_bytes *set)
{
    (void)dirfd, (void)path, (void)abs, (void)mode, (void)spec, (void)speclen, (void)set;
    return -ENOTSUP;
}

static ssize_t none_layout(int fd, void *buf, size_t cap)
{
    (void)fd, (void)buf, (void)cap;
    return -ENODATA;
}

const struct iez_backend iez_backend_none = {.name = "none", .caps = 0, .create = none_create, .layout = none_layout};

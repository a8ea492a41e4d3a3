/* Real Lustre: iez-PL's file creation as llapi_file_open_param does it (references: s000-alg1,
 * l-abi-recipe): a delay-create open, LL_IOC_LOV_SETSTRIPE with the lov_user_md, close. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "backend.h"
#include "log.h"
#include "lum.h"
#include "sysio.h"

/* O_LOV_DELAY_CREATE since 2.6 is O_NOCTTY|FASYNC; the 1.8 bit is useless on modern kernels
 * (references: l-abi-delay-create) */
#define IEZ_O_LOV_DELAY_CREATE (O_NOCTTY | FASYNC)
/* _IOW('f', 154, long) = 0x4008669a on LP64 (references: l-abi-setstripe) */
#define IEZ_LL_IOC_LOV_SETSTRIPE _IOW('f', 154, long)

static int lustre_create(int dirfd, const char *path, const char *abs, mode_t mode, const char *spec, size_t speclen,
                         struct iez_lum_bytes *set)
{
    (void)set; /* the layout Lustre made is read back from the file (the 2.16 gid rule may ignore ours) */
    if (!spec) /* not in the plan: Lustre's own allocator places it at the application's open */
        return -ENOTSUP;
    struct iez_layout lay = {0};
    char err[200];
    if (iez_layout_parse(spec, speclen, &lay, err, sizeof err)) {
        iez_layout_free(&lay);
        return -EINVAL;
    }
    size_t n;
    void *buf = iez_lum_alloc(&lay, &n);
    int rc = 0;
    if (!buf) {
        rc = -ENOMEM;
        goto out;
    }
    int fd = iez_sys_openat(dirfd, path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | IEZ_O_LOV_DELAY_CREATE, mode | 0600);
    if (fd < 0) {
        rc = -errno;
        goto out;
    }
    if (ioctl(fd, IEZ_LL_IOC_LOV_SETSTRIPE, buf) < 0) {
        int e = errno;
        iez_log_once(IEZ_LOG_SETSTRIPE, "LL_IOC_LOV_SETSTRIPE on %s failed (%s): default layout", abs, strerror(e));
        iez_sys_close(fd);
        syscall(SYS_unlinkat, dirfd, path, 0); /* ours, layout-less: the application creates it plainly */
        rc = e == EEXIST ? -EIO : -e;
        goto out;
    }
    iez_sys_close(fd);
out:
    free(buf);
    iez_layout_free(&lay);
    return rc;
}

static ssize_t lustre_layout(int fd, void *buf, size_t cap)
{
    ssize_t n = fgetxattr(fd, "lustre.lov", buf, cap);
    return n < 0 ? -errno : n;
}

const struct iez_backend iez_backend_lustre = {
    .name = "lustre", .caps = IEZ_BE_LUSTRE, .create = lustre_create, .layout = lustre_layout};

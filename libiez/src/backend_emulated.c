/* The emulated cluster (docs/emulated.md): the MDS allocates, the client creates the file and
 * stores the lov_user_md in the user.lustre.lov xattr. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>

#include "backend.h"
#include "hot.h"
#include "log.h"
#include "lum.h"
#include "mds.h"
#include "state.h"
#include "sysio.h"

#define XATTR "user.lustre.lov" /* the real client's lustre.lov, in the namespace users may write */

IEZ_HOT static void store_layout(int fd, const char *abs, const char *text, struct iez_lum_bytes *set)
{
    struct iez_layout lay = {0};
    char err[200];
    if (iez_layout_parse(text, strlen(text), &lay, err, sizeof err)) {
        iez_log_once(IEZ_LOG_MDS, "the emulated MDS gave %s a layout libiez cannot read (%s): %s", abs, err, text);
    } else {
        /* the stored form, as the MDS keeps it (docs/emulated.md, iez.emulated.clusterdir.stored_form) */
        size_t n;
        void *buf = iez_lum_alloc(&lay, &n);
        if (buf)
            iez_lum_number_components(buf, &lay);
        if (!buf || fsetxattr(fd, XATTR, buf, n, 0) != 0) {
            iez_log_once(IEZ_LOG_XATTR, "cannot store the layout of %s in %s: %s", abs, XATTR, strerror(errno));
            free(buf);
        } else if (set) {
            set->data = buf;
            set->len = n;
        } else {
            free(buf);
        }
    }
    iez_layout_free(&lay);
}

IEZ_HOT static int emulated_create(int dirfd, const char *path, const char *abs, mode_t mode, const char *spec, size_t speclen,
                           struct iez_lum_bytes *set)
{
    /* owner read/write until the application's own open has the file (open.c restores the mode) */
    int fd = iez_sys_openat(dirfd, path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode | 0600);
    if (fd < 0)
        return -errno;
    /* the MDS's answer: a layout is short, a long one goes to the heap (mds.h) */
    char small[1024], *got = small;
    char why[512], refused[512] = "";
    int rc = iez_mds_alloc(iez_cfg.emu_run, abs, spec ? spec : "", spec ? speclen : 0, &got, sizeof small, why,
                           sizeof why);
    if (rc == -1 && spec) {
        /* as on Lustre, a layout the MDS refuses leaves the file to the default one; an MDS that
         * cannot be asked is not asked twice */
        snprintf(refused, sizeof refused, "%s", why);
        rc = iez_mds_alloc(iez_cfg.emu_run, abs, "", 0, &got, got == small ? sizeof small : IEZ_MDS_REPLY_MAX, why,
                           sizeof why);
    }
    if (rc == 0)
        store_layout(fd, abs, got, set);
    if (got != small)
        free(got);
    iez_sys_close(fd);
    /* said once the file's descriptor is closed: writing the log may need the last one */
    if (refused[0])
        iez_log_once(IEZ_LOG_MDS, "planned layout of %s refused (%s): default layout", abs, refused);
    if (rc)
        iez_log_once(IEZ_LOG_MDS, "%s: %s is created without a layout", why, abs);
    return 0;
}

static ssize_t emulated_layout(int fd, void *buf, size_t cap)
{
    ssize_t n = fgetxattr(fd, XATTR, buf, cap);
    return n < 0 ? -errno : n;
}

const struct iez_backend iez_backend_emulated = {.name = "emulated",
                                                 .caps = IEZ_BE_LUSTRE | IEZ_BE_EVERY_CREATE | IEZ_BE_IOLOG,
                                                 .create = emulated_create,
                                                 .layout = emulated_layout};

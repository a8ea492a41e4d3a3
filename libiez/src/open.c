#include "open.h"
#include "hot.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "access.h"
#include "log.h"
#include "module.h"
#include "path.h"
#include "state.h"
#include "sysio.h"
#include "trace.h"

IEZ_HOT int iez_absolute(int dirfd, const char *path, char *out, size_t cap)
{
    char base[PATH_MAX];
    base[0] = 0;
    if (path[0] != '/') {
        if (dirfd == AT_FDCWD) {
            if (syscall(SYS_getcwd, base, sizeof base) < 0)
                return -1;
        } else {
            char link[64];
            snprintf(link, sizeof link, "/proc/self/fd/%d", dirfd);
            ssize_t n = syscall(SYS_readlinkat, AT_FDCWD, link, base, sizeof base - 1);
            if (n <= 0 || base[0] != '/')
                return -1;
            base[n] = 0;
        }
    }
    return iez_path_normalize(base, path, out, cap);
}

IEZ_HOT void iez_open_place(int dirfd, const char *path, const char *abs, size_t len, mode_t mode, int use_plan, int owner,
                    struct iez_placement *out)
{
    iez_place(dirfd, path, abs, len, mode, use_plan, owner, out);
    if (out->counted)
        iez_trace_plan_count(out->plan, out->plan_entries, out->plan_rejected);
}

/* Whether a file could be on the traced file system (the emulated cluster, or a Lustre mount
 * on this host): read-only opens are traced there only, so elsewhere they cost one test. Read
 * once (mount tables rarely change under a job); racing first calls find the same answer. */
static int traced_fs_possible(void)
{
    static int known; /* 0 not yet looked, 1 no, 2 yes */
    int k = __atomic_load_n(&known, __ATOMIC_RELAXED);
    if (IEZ_LIKELY(k))
        return k == 2;
    char *buf = NULL;
    size_t len;
    int lustre = iez_cfg.emu_fs_len || (iez_read_file("/proc/self/mounts", 4u << 20, &buf, &len) == 0 &&
                                        strstr(buf, " lustre ") != NULL);
    free(buf);
    __atomic_store_n(&known, lustre ? 2 : 1, __ATOMIC_RELAXED);
    return lustre;
}

IEZ_HOT void iez_open_begin(struct iez_open *op, int dirfd, const char *path, int flags, mode_t mode, int api)
{
    op->flags = op->orig_flags = flags;
    op->entered = op->active = op->name_random = 0;
    if (!path || !iez_enter())
        return;
    op->entered = 1;
    op->dirfd = dirfd;
    op->path = path;
    int saved = errno;
    op->creating = (flags & O_CREAT) && (flags & __O_TMPFILE) != __O_TMPFILE && !(flags & (O_DIRECTORY | O_PATH));
    /* a vfork child shares the parent's memory, trace included: it places, but is not traced.
     * A file opened only to read is traced on the traced file system (open_end decides). */
    op->reading = !op->creating && (flags & O_ACCMODE) == O_RDONLY;
    /* the emulated cluster's MDS sees every create, traced or placed (IEZ_MODE=off: nothing) */
    int place = op->creating && iez_placing();
    /* a create is placed with or without the owner: its name first, so that the plan's cold
     * line loads while the kernel answers getpid */
    int n = place ? iez_absolute(dirfd, path, op->abs, sizeof op->abs) : 0;
    if (n > 0 && iez_cfg.place)
        iez_place_prefetch(op->abs, (size_t)n);
    op->owner = (iez_tracing || place) && iez_owner();
    op->track = iez_tracing && !(flags & O_PATH) && (!op->reading || traced_fs_possible()) && op->owner;
    if (!op->track && !place)
        goto out;
    if (!place)
        n = iez_absolute(dirfd, path, op->abs, sizeof op->abs);
    if (n < 0) {
        iez_log_once(IEZ_LOG_PATH, "cannot form the absolute name of %s: not placed or traced", path);
        goto out;
    }
    if (iez_system_path(op->abs, (size_t)n))
        goto out;
    op->active = 1;
    op->abslen = (size_t)n;
    op->mode = mode;
    op->api = api;
    memset(&op->pl, 0, sizeof op->pl);
    op->existed = 0;
    if (op->creating) {
        if (place) {
            iez_open_place(dirfd, path, op->abs, op->abslen, mode, iez_cfg.place, op->owner, &op->pl);
            if (op->pl.outcome == IEZ_PLACE_CREATED)
                op->flags &= ~O_EXCL; /* our create was the exclusive one */
        }
        /* whether this open creates the file, for the trace (with O_EXCL, if it succeeds) */
        if (iez_place_known(&op->pl))
            op->existed = op->pl.outcome == IEZ_PLACE_EXISTS;
        else if (op->track && !(flags & O_EXCL))
            op->existed = syscall(SYS_faccessat, dirfd, path, F_OK) == 0;
    }
out:
    errno = saved;
}

IEZ_HOT int iez_open_retry(struct iez_open *op, int fd)
{
    if (!op->active || op->pl.outcome != IEZ_PLACE_CREATED || fd >= 0)
        return 0;
    int saved = errno;
    syscall(SYS_unlinkat, op->dirfd, op->path, 0);
    iez_log_once(IEZ_LOG_CREATE, "opening %s after placing it failed (%s): plain create", op->abs, strerror(saved));
    op->pl.outcome = IEZ_PLACE_FAILED;
    op->pl.error = saved;
    op->pl.plan = IEZ_PLAN_NONE;
    op->flags = op->orig_flags;
    errno = saved;
    return 1;
}

/* The layout of an open file from its backend: lov_user_md bytes in *buf (stack or malloc'd). */
static size_t read_layout(const struct iez_backend *be, int fd, char *stack, size_t cap, char **heap)
{
    *heap = NULL;
    ssize_t n = be->layout(fd, stack, cap);
    if (n == -ERANGE) {
        *heap = malloc(65536);
        n = *heap ? be->layout(fd, *heap, 65536) : -ENOMEM;
    }
    return n > 0 ? (size_t)n : 0;
}

/* Trace fd (reading: only if it is on the traced file system); 0, or -1 when it is not traced. */
IEZ_HOT static int trace_fd(int fd, int api, const char *abs, size_t len, int oflags, uint64_t pos, int shared, int created,
                    int plan, const struct iez_backend *be, const struct iez_lum_bytes *known, int reading,
                    int name_random)
{
    struct stat st = {0};
    if (!known && (iez_sys_fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)))
        return -1; /* what placement created is a regular file; anything else is looked at */
    if (!be)
        be = iez_backend_of_fd(fd, st.st_dev, abs, len);
    if (reading && !(be->caps & IEZ_BE_LUSTRE))
        return -1;
    char stack[4096], *heap = NULL;
    const void *lum = known ? known->data : stack;
    size_t lumlen = known ? known->len : read_layout(be, fd, stack, sizeof stack, &heap);
    if (heap)
        lum = heap;
    struct iez_file_info fi = {api, abs, len, oflags, pos, shared, created, plan, lum, lumlen, 0,
                               (be->caps & IEZ_BE_IOLOG) != 0, created ? name_random : 0};
    iez_trace_opened(fd, &fi);
    free(heap);
    return 0;
}

struct iez_rec *iez_open_record(int api, const char *abs, size_t len, int created, int plan, int comm_size,
                                const struct iez_lum_bytes *known)
{
    if (!iez_tracing || iez_system_path(abs, len))
        return NULL;
    char stack[4096], *heap = NULL;
    const void *lum = known && known->data ? known->data : stack;
    size_t lumlen = known && known->data ? known->len : 0;
    int fd = lumlen ? -1 : iez_sys_openat(AT_FDCWD, abs, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY, 0);
    struct stat st;
    if (fd >= 0 && iez_sys_fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
        lumlen = read_layout(iez_backend_of_fd(fd, st.st_dev, abs, len), fd, stack, sizeof stack, &heap);
    if (fd >= 0)
        iez_sys_close(fd);
    if (heap)
        lum = heap;
    struct iez_file_info fi = {api, abs, len, 0, 0, 0, created, plan, lum, lumlen, comm_size, 0, 0};
    struct iez_rec *r = iez_trace_file_opened(&fi);
    free(heap);
    return r;
}

/* IEZ_ACCESS file and coarse: whether fd is one of the job's files (emulated cluster, Lustre). */
static void access_open(struct iez_open *op, int fd)
{
    char abs[PATH_MAX];
    int n = op->active ? (int)op->abslen : iez_absolute(op->dirfd, op->path, abs, sizeof abs);
    struct stat st;
    if (n < 0 || iez_sys_fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
        return;
    if (iez_backend_of_fd(fd, st.st_dev, op->active ? op->abs : abs, (size_t)n)->caps & IEZ_BE_LUSTRE)
        iez_access_opened(fd);
}

IEZ_HOT void iez_open_end(struct iez_open *op, int fd)
{
    if (!op->entered)
        return;
    int saved = errno;
    if (op->active && fd >= 0) {
        int placed = op->pl.outcome == IEZ_PLACE_CREATED;
        if (placed && (op->mode & 0600) != 0600) {
            /* placement made it owner read/write; take back what the application did not ask for */
            struct stat st;
            if (iez_sys_fstat(fd, &st) == 0)
                syscall(SYS_fchmod, fd, st.st_mode & 07777 & ~(0600 & ~op->mode));
        }
        /* not traced: what the number held before (closed unseen) is not this file either */
        if (op->track &&
            trace_fd(fd, op->api, op->abs, op->abslen, op->flags, 0, 0, placed || (op->creating && !op->existed),
                     op->pl.plan, op->pl.be, op->pl.set.data && placed ? &op->pl.set : NULL, op->reading,
                     op->name_random))
            iez_trace_mark(fd, &iez_fd_none[0]);
    }
    /* an open not traced forgets what the number held (not iez_trace_closed: this thread is
     * inside libiez's work); a vfork child's table is its parent's */
    if (fd >= 0 && IEZ_UNLIKELY(iez_tracing) && !(op->active && op->track) && iez_fd_get(fd) && op->owner)
        iez_trace_mark(fd, NULL);
    if (IEZ_UNLIKELY(iez_access_files) && fd >= 0 && !(op->orig_flags & O_PATH))
        access_open(op, fd);
    if (op->active)
        free(op->pl.set.data);
    errno = saved;
    iez_leave();
}

struct iez_ofd *iez_fd_adopt(int fd, int writing)
{
    if (!iez_tracing || (unsigned)fd >= IEZ_FD_CHUNK * IEZ_FD_CHUNKS || !iez_owner() || !iez_enter())
        return NULL;
    int saved = errno;
    struct iez_ofd *none = &iez_fd_none[0];
    if (!writing && !traced_fs_possible()) {
        none = &iez_fd_none[1];
        goto out;
    }
    int fl = (int)syscall(SYS_fcntl, fd, F_GETFL);
    char link[32], path[PATH_MAX];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t len = fl < 0 ? -1 : syscall(SYS_readlinkat, AT_FDCWD, link, path, sizeof path - 1);
    if (len <= 0 || path[0] != '/')
        goto out;
    path[len] = 0;
    /* a removed file, or a name only the kernel has (anon_inode:, pipe:, socket:) */
    if ((len > 10 && !strcmp(path + len - 10, " (deleted)")) || iez_system_path(path, (size_t)len))
        goto out;
    off_t pos = iez_sys_lseek(fd, 0, SEEK_CUR);
    int reading = (fl & O_ACCMODE) == O_RDONLY || !writing;
    if (trace_fd(fd, IEZ_API_POSIX, path, (size_t)len, fl, pos < 0 ? 0 : (uint64_t)pos, 1, 0, IEZ_PLAN_NONE, NULL,
                 NULL, reading, 0) == 0) {
        struct iez_ofd *o = iez_fd_get(fd);
        errno = saved;
        iez_leave();
        return o && !iez_fd_is_none(o) ? o : NULL;
    }
    /* not on the traced file system: a later write may still adopt it */
    none = reading && (fl & O_ACCMODE) != O_RDONLY ? &iez_fd_none[1] : &iez_fd_none[0];
out:
    iez_trace_mark(fd, none);
    errno = saved;
    iez_leave();
    return NULL;
}

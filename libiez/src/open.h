/* What libiez does around every intercepted open or create, whichever layer it comes from
 * (posix.c, stdio.c): placement before the real call, tracing after it.
 *
 *   struct iez_open op;
 *   iez_init();
 *   iez_open_begin(&op, dirfd, path, flags, mode, api);
 *   fd = real(..., op.flags ...);
 *   if (iez_open_retry(&op, fd)) fd = real(..., flags ...);
 *   iez_open_end(&op, fd);
 */
#ifndef IEZ_OPEN_H
#define IEZ_OPEN_H

#include <limits.h>
#include <sys/types.h>

#include "place.h"
#include "state.h"
#include "shard.h"

struct iez_open {
    int entered, active, track, creating;
    int owner;                       /* iez_owner(), asked once per open */
    int reading;                     /* opened only to read: traced on the traced file system */
    int dirfd, flags, orig_flags, api;
    mode_t mode;
    const char *path;
    int existed;                     /* the file was there before this call */
    int name_random;                 /* the name ends in this many generated characters (mkstemp) */
    struct iez_placement pl;
    size_t abslen;
    char abs[PATH_MAX];
};

/* Placement (iez_place) of a file about to be created, its outcome against the plan counted in
 * the trace: every layer that creates files places them through this. */
void iez_open_place(int dirfd, const char *path, const char *abs, size_t len, mode_t mode, int use_plan, int owner,
                    struct iez_placement *out);
void iez_open_begin(struct iez_open *op, int dirfd, const char *path, int flags, mode_t mode, int api);
/* The real call failed on the file placement had created: it is removed again and the caller
 * must repeat the call with the application's own flags (1). */
int iez_open_retry(struct iez_open *op, int fd);
void iez_open_end(struct iez_open *op, int fd);

/* The absolute, lexically normalised name of (dirfd, path), as plan keys are written: its
 * length, or -1. */
int iez_absolute(int dirfd, const char *path, char *out, size_t cap);
/* In an MPI process (iez_cfg.mpi_process), MPI's and UCX's shared
 * memory segments in /dev/shm and /proc's links to other processes' descriptors (which UCX
 * opens to share them) are not the application's files: neither placed nor traced, as
 * Darshan excludes /dev/ and /proc/. Elsewhere they are files like any other. */
static inline int iez_system_path(const char *abs, size_t len)
{
    return iez_cfg.mpi_process && ((len > 9 && !__builtin_memcmp(abs, "/dev/shm/", 9)) ||
                               (len > 6 && !__builtin_memcmp(abs, "/proc/", 6)));
}
/* A file opened through a layer without descriptors (MPI-IO, HDF5): its trace record, with the
 * layout placement gave it (known) or, if not known, the one the file system returns for its
 * name. NULL when not tracing. */
struct iez_rec *iez_open_record(int api, const char *abs, size_t len, int created, int plan, int comm_size,
                                const struct iez_lum_bytes *known);

#endif

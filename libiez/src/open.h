/* What libiez does around every intercepted open or create, whichever layer it comes from
 * (posix.c, stdio.c): placement before the real call, tracing after it.
 *
 *   struct iez_open op;
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

struct iez_open {
    int entered, active, track, creating;
    int dirfd, flags, orig_flags, api;
    mode_t mode;
    const char *path;
    int existed;                     /* the file was there before this call */
    struct iez_placement pl;
    size_t abslen;
    char abs[PATH_MAX];
};

void iez_open_begin(struct iez_open *op, int dirfd, const char *path, int flags, mode_t mode, int api);
/* The real call failed on the file placement had created: it is removed again and the caller
 * must repeat the call with the application's own flags (1). */
int iez_open_retry(struct iez_open *op, int fd);
void iez_open_end(struct iez_open *op, int fd);
/* Trace the writable files this process was started with (a shell redirect, say). */
void iez_open_inherited(void);

#endif

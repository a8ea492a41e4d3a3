/* Placement (seed 000's iez-PL, Algorithm 1): give a file about to be created its planned
 * layout, or on the emulated cluster the MDS's default one. */
#ifndef IEZ_PLACE_H
#define IEZ_PLACE_H

#include <stddef.h>
#include <sys/types.h>

#include "backend.h"

struct iez_placement {
    const struct iez_backend *be;    /* the backend that created the file, or NULL */
    int created;                     /* the file now exists, made by us */
    int exists;                      /* another process created it first */
    int plan;                        /* IEZ_PLAN_* */
};

/* The absent file (dirfd, path), absolute name abs, is about to be created with mode. */
void iez_place(int dirfd, const char *path, const char *abs, size_t len, mode_t mode, struct iez_placement *out);

#endif

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
    int exists;                      /* it existed (or another process created it first) */
    int known;                       /* whether the file existed is known (created or exists) */
    int plan;                        /* IEZ_PLAN_* */
    struct iez_lum_bytes set;        /* the layout it got, if the backend knows it (malloc'd) */
};

/* The file (dirfd, path), absolute name abs, may be created with mode (open with O_CREAT).
 * use_plan = 0 (trace-only mode): the plan is not consulted; only the emulated cluster acts, since
 * its MDS must see every create as a real one does (a real Lustre places the file itself). */
void iez_place(int dirfd, const char *path, const char *abs, size_t len, mode_t mode, int use_plan,
               struct iez_placement *out);

#endif

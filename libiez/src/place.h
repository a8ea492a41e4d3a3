/* Placement (iez-PL, references: s000-alg1): give a file about to be created its planned
 * layout, or on the emulated cluster the MDS's default one. */
#ifndef IEZ_PLACE_H
#define IEZ_PLACE_H

#include <stddef.h>
#include <sys/types.h>

#include "backend.h"

/* What placement did with a file about to be created. */
enum iez_place_outcome {
    IEZ_PLACE_NOT_OURS = 0,          /* not on Lustre, or trace-only on a real Lustre: nothing done */
    IEZ_PLACE_CREATED,               /* created by us, with the planned layout (plan IEZ_PLAN_HIT)
                                        or the default one; set holds it if the backend knows it */
    IEZ_PLACE_EXISTS,                /* it existed (or another process created it first): untouched */
    IEZ_PLACE_LEFT,                  /* not in the plan on a real Lustre, whose allocator places it
                                        at the application's open; it does not exist yet */
    IEZ_PLACE_FAILED,                /* nothing created (error: the errno): a plain create follows */
};

struct iez_placement {
    enum iez_place_outcome outcome;
    int error;                       /* IEZ_PLACE_FAILED: why */
    const struct iez_backend *be;    /* IEZ_PLACE_CREATED: the backend that created the file */
    struct iez_lum_bytes set;        /* the layout it got, if the backend knows it (malloc'd) */
    /* The plan's count of this create (a run whose creates the plan mostly does not know is
     * traced again, references: s000-retrace): counted only for a file that did not exist,
     * created by the process that owns the trace (not a vfork child) while a plan was given. */
    int counted;
    int plan;                        /* IEZ_PLAN_* (IEZ_PLAN_NONE unless counted) */
    size_t plan_entries;             /* the plan's size; 0 when it was rejected */
    int plan_rejected;
};

/* Whether the file existed before is known from placement. */
static inline int iez_place_known(const struct iez_placement *pl)
{
    return pl->outcome == IEZ_PLACE_CREATED || pl->outcome == IEZ_PLACE_EXISTS || pl->outcome == IEZ_PLACE_LEFT;
}

/* The file (dirfd, path), absolute name abs, may be created with mode (open with O_CREAT).
 * use_plan = 0 (trace-only mode): the plan is not consulted; only the emulated cluster acts, since
 * its MDS must see every create as a real one does (a real Lustre places the file itself). */
/* Placement does no tracing: its caller records the outcome (open.c). owner: iez_owner(), which
 * the caller has asked already (a system call). */
void iez_place(int dirfd, const char *path, const char *abs, size_t len, mode_t mode, int use_plan, int owner,
               struct iez_placement *out);
/* Start loading the plan's line for abs, if the plan is loaded, for an iez_place soon after. */
void iez_place_prefetch(const char *abs, size_t len);
/* The plan's layout text for abs (not NUL-terminated), or NULL: no plan, not in it, or not the
 * process that owns the plan (a vfork child). */
const char *iez_place_planned(const char *abs, size_t len, size_t *speclen);
/* The process's plan, loaded at the first call that needs it; NULL: none, rejected, or not the
 * process that owns it. */
struct iez_plan;
const struct iez_plan *iez_place_plan(void);

#endif

/* The Lustre-aware collective read (references: s003-figs4-5) under libiez-mpi: MPI_File_read_all
 * and MPI_File_read_at_all (and their split and large-count forms) on a file whose layout iez can
 * read are served by one aggregator per OST, each reading only its OST's stripes, and the data
 * are then moved to the ranks that asked for them (docs/libiez.md, "Lustre-aware collective
 * read"). Anything it cannot do goes to the MPI library's own collective read. */
#ifndef IEZ_COLLREAD_H
#define IEZ_COLLREAD_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "layout.h"

/* IEZ_COLLREAD=lustre: the new read is on for the files opened from now (read once, at the
 * first MPI_File_open). The hot path's only test when it is off. */
extern int iez_collread_on;

/* The collective reads it serves; IEZ_CR_LARGE: the MPI 4 _c form (an MPI_Count count). */
enum { IEZ_CR_NONE, IEZ_CR_ALL, IEZ_CR_AT_ALL, IEZ_CR_ALL_BEGIN, IEZ_CR_AT_ALL_BEGIN, IEZ_CR_LARGE = 8 };

/* The kind of the MPI-IO data call MPI_File_<name>: a constant once inlined (mpiio.c's wrappers
 * pass a string literal), so the other calls pay nothing. */
static inline int iez_collread_kind(const char *name)
{
    int large = __builtin_strlen(name) > 2 && !__builtin_strcmp(name + __builtin_strlen(name) - 2, "_c");
    size_t n = __builtin_strlen(name) - (large ? 2 : 0);
    int k = n == 8 && !__builtin_strncmp(name, "read_all", 8)                ? IEZ_CR_ALL
            : n == 11 && !__builtin_strncmp(name, "read_at_all", 11)         ? IEZ_CR_AT_ALL
            : n == 14 && !__builtin_strncmp(name, "read_all_begin", 14)      ? IEZ_CR_ALL_BEGIN
            : n == 17 && !__builtin_strncmp(name, "read_at_all_begin", 17)   ? IEZ_CR_AT_ALL_BEGIN
                                                                             : IEZ_CR_NONE;
    return k ? k | (large ? IEZ_CR_LARGE : 0) : IEZ_CR_NONE;
}

/* A collective read of kind (its arguments as the MPI call's, after the kind and &rc): 1 when
 * the new read served it (its return code in *rc), 0 when the caller must make the MPI call.
 * Collective: every rank of the file's communicator takes the same branch. */
int iez_collread_try(int kind, int *rc, ...);
/* A wrapper's parenthesized argument list, spliced into iez_collread_try's. */
#define IEZ_CR_ARGS(...) __VA_ARGS__

/* MPI_File_open has opened fh on comm (every rank that opened it calls this, with the file's
 * absolute name, len < 0 when none could be formed, and the access mode). */
void iez_collread_opened(MPI_Comm comm, MPI_File fh, const char *abs, int len, int amode);
/* Before MPI_File_close(fh), on every rank. */
void iez_collread_closing(MPI_File fh);

/* Which OST holds each stripe of a file of layout lay, as group numbers 0..ngroups-1 (the OSTs
 * in the order they are first met; a slot whose OST is unknown is a group of its own), so that
 * aggregator g mod A reads group g: with A >= ngroups, one aggregator per OST. Pure.
 * iez_cr_map_build: 0, or -1 when the layout cannot be served (no stripe size or count, a
 * pattern other than RAID-0 or overstriping, no memory). */
struct iez_cr_map {                  /* one array, so that rank 0 can broadcast it as it is: */
    int64_t *v;                      /* ncomp, ngroups, per component {start, end, stripe size,
                                        count, index of its first slot}, then each slot's group */
    size_t len;
};
#define IEZ_CR_HEAD 2
#define IEZ_CR_COMP 5
int iez_cr_map_build(const struct iez_layout *lay, struct iez_cr_map *m);
/* The group of byte off and the end of its stripe (capped at its component's end); -1 if off is
 * in no component. */
int iez_cr_map_owner(const struct iez_cr_map *m, uint64_t off, uint64_t *stripe_end);
void iez_cr_map_free(struct iez_cr_map *m);

#endif

/* libiez-mpi's own collective I/O, the part the Lustre-aware collective read (collread.c) and
 * split writing's aggregation (collwrite.c) share: the files it may serve, their stripe map read
 * once by rank 0, the aggregators spread over the nodes, and each rank's request flattened from
 * its file view into pieces, each for one aggregator (docs/libiez.md, "Lustre-aware collective
 * read" and "Split writing"). Anything it cannot do goes to the MPI library's own call. */
#ifndef IEZ_COLLIO_H
#define IEZ_COLLIO_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>

#include "layout.h"

/* Some file may be served (IEZ_COLLREAD=lustre, or a file opened for split writing's own
 * aggregation): the hot path's only test when none is. */
extern int iez_collio_on;
/* IEZ_COLLREAD=lustre: collective reads of the files opened from now are served. */
extern int iez_collread_on;

/* The collective calls it serves; IEZ_CIO_LARGE: the MPI 4 _c form (an MPI_Count count);
 * IEZ_CIO_WRITE: a write. */
enum { IEZ_CIO_NONE, IEZ_CIO_ALL, IEZ_CIO_AT_ALL, IEZ_CIO_ALL_BEGIN, IEZ_CIO_AT_ALL_BEGIN, IEZ_CIO_LARGE = 8,
       IEZ_CIO_WRITE = 16 };

static inline int iez_collio_base(const char *s, size_t n)
{
    return n == 3 && !__builtin_strncmp(s, "all", 3)                ? IEZ_CIO_ALL
           : n == 6 && !__builtin_strncmp(s, "at_all", 6)           ? IEZ_CIO_AT_ALL
           : n == 9 && !__builtin_strncmp(s, "all_begin", 9)        ? IEZ_CIO_ALL_BEGIN
           : n == 12 && !__builtin_strncmp(s, "at_all_begin", 12)   ? IEZ_CIO_AT_ALL_BEGIN
                                                                    : IEZ_CIO_NONE;
}

/* The kind of the MPI-IO data call MPI_File_<name>: a constant once inlined (mpiio.c's wrappers
 * pass a string literal), so the other calls pay nothing. */
static inline int iez_collio_kind(const char *name)
{
    size_t n = __builtin_strlen(name);
    int large = n > 2 && !__builtin_strcmp(name + n - 2, "_c");
    int write = !__builtin_strncmp(name, "write_", 6);
    size_t skip = write ? 6 : !__builtin_strncmp(name, "read_", 5) ? 5 : 0;
    int k = skip ? iez_collio_base(name + skip, n - skip - (large ? 2 : 0)) : IEZ_CIO_NONE;
    return k ? k | (large ? IEZ_CIO_LARGE : 0) | (write ? IEZ_CIO_WRITE : 0) : IEZ_CIO_NONE;
}

/* A collective call of kind (its arguments as the MPI call's, after the kind and &rc): 1 when
 * libiez served it (its return code in *rc), 0 when the caller must make the MPI call.
 * Collective: every rank of the file's communicator takes the same branch. */
int iez_collio_try(int kind, int *rc, ...);
/* A wrapper's parenthesized argument list, spliced into iez_collio_try's. */
#define IEZ_CIO_ARGS(...) __VA_ARGS__

/* MPI_File_open has opened fh on comm (every rank that opened it calls this, with the file's
 * absolute name, len < 0 when none could be formed, the access mode, and whether split writing
 * aggregates its collective writes: the same on every rank). */
void iez_collio_opened(MPI_Comm comm, MPI_File fh, const char *abs, int len, int amode, int aggregate);
/* Before MPI_File_close(fh), on every rank. */
void iez_collio_closing(MPI_File fh);

/* Which OST holds each stripe of a file of layout lay, as group numbers 0..ngroups-1 (the OSTs
 * in the order they are first met; a slot whose OST is unknown is a group of its own), so that
 * aggregator g mod A reads group g: with A >= ngroups, one aggregator per OST. Pure.
 * iez_cio_map_build: 0, or -1 when the layout cannot be served (no stripe size or count, a
 * pattern other than RAID-0 or overstriping, no memory). */
struct iez_cio_map {                 /* one array, so that rank 0 can broadcast it as it is: */
    int64_t *v;                      /* ncomp, ngroups, per component {start, end, stripe size,
                                        count, index of its first slot}, then each slot's group */
    size_t len;
};
#define IEZ_CIO_HEAD 2
#define IEZ_CIO_COMP 5
int iez_cio_map_build(const struct iez_layout *lay, struct iez_cio_map *m);
/* The group of byte off and the end of its stripe (capped at its component's end); -1 if off is
 * in no component. */
int iez_cio_map_owner(const struct iez_cio_map *m, uint64_t off, uint64_t *stripe_end);
/* The component of byte off and its end; -1 if off is in none. */
int iez_cio_map_component(const struct iez_cio_map *m, uint64_t off, uint64_t *comp_end);
void iez_cio_map_free(struct iez_cio_map *m);

/* ---- between collio.c and the calls (collread.c, collwrite.c) ---------------------------- */

/* The MPI functions beyond pmpi.h's. */
struct iez_cio_fn {
    int (*alltoall)(const void *, int, MPI_Datatype, void *, int, MPI_Datatype, MPI_Comm);
    int (*alltoallv)(const void *, const int *, const int *, MPI_Datatype, void *, const int *, const int *,
                     MPI_Datatype, MPI_Comm);
    int (*allgather)(const void *, int, MPI_Datatype, void *, int, MPI_Datatype, MPI_Comm);
    int (*split_type)(MPI_Comm, int, int, MPI_Info, MPI_Comm *);
    int (*get_view)(MPI_File, MPI_Offset *, MPI_Datatype *, MPI_Datatype *, char *);
    int (*get_amode)(MPI_File, int *);
    int (*get_atomicity)(MPI_File, int *);
    int (*seek)(MPI_File, MPI_Offset, int);
    int (*envelope)(MPI_Datatype, int *, int *, int *, int *);
    int (*contents)(MPI_Datatype, int, int, int, int *, MPI_Aint *, MPI_Datatype *);
    int (*extent)(MPI_Datatype, MPI_Count *, MPI_Count *);
    int (*true_extent)(MPI_Datatype, MPI_Count *, MPI_Count *);
    int (*type_free)(MPI_Datatype *);
    int (*unpack)(const void *, int, int *, void *, int, MPI_Datatype, MPI_Comm);
    int (*pack)(const void *, int, MPI_Datatype, void *, int, int *, MPI_Comm);
    int (*set_elements)(MPI_Status *, MPI_Datatype, MPI_Count);
    int (*read_all_end)(MPI_File, void *, MPI_Status *);
    int (*read_at_all_end)(MPI_File, void *, MPI_Status *);
    int (*write_all_end)(MPI_File, const void *, MPI_Status *);
    int (*write_at_all_end)(MPI_File, const void *, MPI_Status *);
};
extern struct iez_cio_fn iez_cio_fn;

struct iez_cio_file {
    MPI_File fh;
    MPI_Comm comm;                   /* a private duplicate of the file's communicator */
    int rank, size;
    int read, write;                 /* its collective reads (IEZ_COLLREAD), writes (split writing) served */
    int state;                       /* 0: not set up yet; 1: served; -1: left to MPI */
    char *path;                      /* NULL: no name could be formed on this rank */
    size_t path_len;
    struct iez_cio_map map;
    int *order;                      /* the ranks as aggregators are taken, one per node in turn */
    int *cnt;                        /* room for a call's counts and displacements (8 per rank) */
    int64_t dev, ino;                /* the file rank 0 read the layout of */
    int iolog;                       /* the file is on the emulated cluster: log its I/O */
    int fd, wfd;                     /* the aggregator's own read-only, write-only descriptors, or -1 */
    int split;                       /* a split collective's begin was served: its status */
    MPI_Status split_status;
    struct iez_cio_file *next;
};

/* One call's pieces: each inside one stripe (reads) or component (writes), for one aggregator. */
struct iez_cio_piece {
    int64_t off, len, pos;           /* file offset, length, position in the rank's data */
    int aggr;                        /* the rank of its aggregator */
};
struct iez_cio_call {
    struct iez_cio_piece *p;
    size_t n, cap;
    int64_t bytes;                   /* count x type size; < 0: this rank leaves the call to MPI */
    int64_t etypes;                  /* the same in etypes (how far the file pointer moves) */
};

/* An aggregator's piece: where it is in the file and where its bytes are (reads: go): at `at` in
 * the exchange's buffer, or at dst. iez_cio_by_off: qsort's order by offset. */
struct iez_cio_item {
    int64_t off, len, at;
    char *dst;
};
int iez_cio_by_off(const void *a, const void *b);

/* The file fh, if registered; configure once (IEZ_COLLREAD, MPI's functions) before any use. */
struct iez_cio_file *iez_cio_find(MPI_File fh);
void iez_cio_configure(void);
/* The file's first collective call served: rank 0's map to everyone, the aggregators' order
 * (f->state 1), or left to MPI (-1); `what` and `op` name the call in the log. */
void iez_cio_set_up(struct iez_cio_file *f, const char *what, const char *op);

/* This rank's pieces for a call at etype offset off (at) or the individual pointer: 0, or -1
 * when the call is left to MPI. */
int iez_cio_prepare(const struct iez_cio_file *f, MPI_File fh, int write, int at, MPI_Offset off, MPI_Count count,
                    MPI_Datatype type, struct iez_cio_call *c);
/* Where the data of count x type at buf are: *base, when contiguous (1), else 0. */
int iez_cio_contiguous(const void *buf, MPI_Datatype type, const char **base);
/* The pieces' (offset, length) to their aggregators: c->p sorted by aggregator; on return 0, *in
 * holds the pairs this rank serves, rank by rank (counts in f->cnt[2P..3P), displacements in
 * [3P..4P), in int64 units), and *self the index of its own first piece; -1: every rank goes
 * to MPI (a rank with c->bytes < 0 says so to all). */
int iez_cio_requests(struct iez_cio_file *f, struct iez_cio_call *c, int64_t **in, size_t *self);
/* After iez_cio_requests: the data's counts and displacements, in bytes, of this rank's pieces
 * for each other aggregator (f->cnt[4P..6P), *mine bytes in all) and of the pieces each other
 * rank has for this one (f->cnt[6P..8P), *theirs in all), and the items this rank serves, rank by
 * rank: its own at their place in stream, the others' at `at` in the exchange's buffer (dst
 * NULL). 0, or -1 (no memory, over 2 GiB) for the agreement that follows. */
int iez_cio_items(struct iez_cio_file *f, const struct iez_cio_call *c, const int64_t *in, size_t self, char *stream,
                  struct iez_cio_item **it, size_t *n, int64_t *mine, int64_t *theirs);
/* An aggregator's descriptor of the file, opened with flags (O_RDONLY or O_WRONLY) and checked
 * to be the very file rank 0 read the layout of: -1 if not. */
int iez_cio_open(const struct iez_cio_file *f, int flags);
/* The individual file pointer moved past c's data, as ROMIO's collective calls move it. */
int iez_cio_advance(MPI_File fh, const struct iez_cio_call *c);
static inline int iez_cio_too_big(int64_t v) { return v < 0 || v > INT32_MAX; }
#define IEZ_CIO_MAX_RUN (16ll << 20) /* one pread/pwrite moves at most this much, unless one piece is larger */

/* The calls, with the file set up: their MPI return code, or -1: left to MPI (every rank alike);
 * collective.c sends each call to its own. */
int iez_collread_call(struct iez_cio_file *f, MPI_File fh, int at, MPI_Offset off, void *buf, MPI_Count count,
                      MPI_Datatype type, MPI_Status *st);
int iez_collwrite_call(struct iez_cio_file *f, MPI_File fh, int at, MPI_Offset off, const void *buf, MPI_Count count,
                       MPI_Datatype type, MPI_Status *st);

#endif

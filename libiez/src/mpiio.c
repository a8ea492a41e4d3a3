/* The MPI-IO layer (libiez-mpi.so), as Darshan's MPI-IO module wraps it: MPI_File_open places
 * a file it creates (rank 0 of the communicator creates it with the planned layout before
 * anyone opens it) and traces every open file as an MPI-IO record with its communicator size
 * (1: file per process on MPI_COMM_SELF; more: a shared file); the MPI_File_write* and
 * MPI_File_read* families, blocking and not, independent and collective, at an explicit
 * offset, the individual or the shared file pointer, count their bytes per rank and file.
 *
 * libiez's own work is guarded as everywhere, but the real MPI calls are not: the POSIX calls
 * ROMIO makes beneath them are traced (and logged to IEZ_IOLOG) by posix.c as well, so a trace
 * holds both layers of a file, as Darshan's does, and iez.trace.ingest counts its bytes once. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "access.h"
#include "collio.h"
#include "core.h"
#include "hdf5_mpi.h"
#include "log.h"
#include "open.h"
#include "pmpi.h"
#include "split.h"
#include "trace.h"

/* ---- placement over a communicator ------------------------------------------------------- */

int iez_mpi_placing(void)
{
    iez_init();
    return iez_placing();
}

void iez_mpi_place(MPI_Comm comm, const char *path, const char *abs, int len, int place, struct iez_mpi_create *out)
{
    memset(out, 0, sizeof *out);
    out->size = 1;
    iez_pmpi.PMPI_Comm_rank(comm, &out->rank);
    iez_pmpi.PMPI_Comm_size(comm, &out->size);
    int outcome[2] = {0, 0};
    if (out->rank == 0 && len >= 0 && iez_enter()) {
        int saved = errno;
        if (place && !iez_system_path(abs, (size_t)len))
            iez_open_place(AT_FDCWD, path, abs, (size_t)len, 0666, iez_cfg.place, iez_owner(), &out->pl);
        outcome[0] = out->pl.outcome == IEZ_PLACE_CREATED;
        if (iez_place_known(&out->pl))
            outcome[1] = out->pl.outcome == IEZ_PLACE_EXISTS;
        else if (iez_tracing) /* whether this open creates the file, for the trace */
            outcome[1] = syscall(SYS_faccessat, AT_FDCWD, path, F_OK) == 0;
        errno = saved;
        iez_leave();
    }
    /* no rank leaves the broadcast before rank 0 has created the file: it is the barrier */
    if (place && out->size > 1)
        iez_pmpi.PMPI_Bcast(outcome, 2, MPI_INT, 0, comm);
    out->created = outcome[0];
    out->existed = outcome[1];
}

/* For hdf5.c: placement of a file parallel HDF5 creates through its MPI-IO driver, over the
 * communicator of its file access property list (HDF5's H5Pget_fapl_mpio gives a copy). */
int iez_h5_mpi_place(void *get_fapl_mpio, int64_t fapl, const char *path, const char *abs, int len,
                     struct iez_h5_collective *out)
{
    int (*get)(int64_t, MPI_Comm *, MPI_Info *) = (int (*)(int64_t, MPI_Comm *, MPI_Info *))get_fapl_mpio;
    MPI_Comm comm;
    MPI_Info info = MPI_INFO_NULL;
    if (!get || iez_pmpi_ready(get_fapl_mpio) || get(fapl, &comm, &info) < 0)
        return -1;
    struct iez_mpi_create mc;
    iez_mpi_place(comm, path, abs, len, iez_mpi_placing(), &mc);
    iez_split_expect(&mc, abs, len); /* its hints at HDF5's own MPI_File_open (split.c) */
    *out = (struct iez_h5_collective){mc.rank, mc.size, mc.created, mc.existed, mc.pl.plan, mc.pl.set};
    iez_pmpi.PMPI_Comm_free(&comm);
    if (info != MPI_INFO_NULL)
        iez_pmpi.PMPI_Info_free(&info);
    return 0;
}

/* ---- the open files ------------------------------------------------------------------------ */

struct mfile {
    MPI_File fh;                     /* NULL: free (atomic: the lock-free lookup reads it) */
    struct iez_rec *rec;
    MPI_Offset disp;                 /* the view's displacement */
    MPI_Count etype;                 /* the etype's size in bytes */
    int bytes;                       /* the view is bytes (etype and filetype MPI_BYTE) */
    struct mfile *next;              /* all of them, never freed: a racing lookup stays safe */
};

static pthread_mutex_t files_lock = PTHREAD_MUTEX_INITIALIZER;
static struct mfile *files;
/* The last file this thread moved data of: the data calls find it without the lock. */
static __thread struct mfile *last __attribute__((tls_model("initial-exec")));

static struct mfile *find(MPI_File fh)
{
    for (struct mfile *f = files; f; f = f->next)
        if (__atomic_load_n(&f->fh, __ATOMIC_ACQUIRE) == fh)
            return f;
    return NULL;
}

static void remember(MPI_File fh, struct iez_rec *rec)
{
    pthread_mutex_lock(&files_lock);
    struct mfile *f = find(fh);
    if (!f)
        f = find(NULL); /* a closed file's */
    if (!f && (f = calloc(1, sizeof *f))) {
        f->next = files;
        files = f;
    }
    if (f) {
        f->rec = rec;
        f->disp = 0;
        f->etype = 1;
        f->bytes = 1;
        __atomic_store_n(&f->fh, fh, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&files_lock);
}

static __attribute__((noinline)) struct mfile *lookup_locked(MPI_File fh)
{
    pthread_mutex_lock(&files_lock);
    struct mfile *f = find(fh);
    pthread_mutex_unlock(&files_lock);
    if (f)
        last = f;
    return f;
}

/* What is known of fh (NULL: not traced): inline, the last file without the lock. */
static inline struct mfile *lookup(MPI_File fh)
{
    struct mfile *f = last;
    if (IEZ_LIKELY(f && __atomic_load_n(&f->fh, __ATOMIC_ACQUIRE) == fh))
        return f;
    return lookup_locked(fh);
}

static struct iez_rec *forget(MPI_File fh)
{
    pthread_mutex_lock(&files_lock);
    struct mfile *f = find(fh);
    struct iez_rec *rec = f ? f->rec : NULL;
    if (f)
        __atomic_store_n(&f->fh, NULL, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&files_lock);
    return rec;
}

/* ROMIO takes a file-system prefix before the name ("ufs:", "lustre:", ...): the file's own
 * name is after it (romio adio/common/ad_fstype.c). */
static const char *strip_prefix(const char *name)
{
    static const char *const fs[] = {"ufs:", "nfs:", "lustre:", "gpfs:", "pvfs2:", "panfs:", "xfs:",
                                     "testfs:", "daos:", "ime:", "quobyte:", "pfs:", "piofs:"};
    for (size_t i = 0; i < sizeof fs / sizeof *fs; i++)
        if (!strncmp(name, fs[i], strlen(fs[i])))
            return name + strlen(fs[i]);
    return name;
}

/* The amodes MPI allows (MPI 4.0 §14.2.1); placement is not tried on anything else. */
static int valid_amode(int amode)
{
    int acc = amode & (MPI_MODE_RDONLY | MPI_MODE_RDWR | MPI_MODE_WRONLY);
    if (acc != MPI_MODE_RDONLY && acc != MPI_MODE_RDWR && acc != MPI_MODE_WRONLY)
        return 0;
    if ((amode & MPI_MODE_RDONLY) && (amode & (MPI_MODE_CREATE | MPI_MODE_EXCL)))
        return 0;
    return !((amode & MPI_MODE_RDWR) && (amode & MPI_MODE_SEQUENTIAL));
}

/* ---- IEZ_ACCESS=file in an MPI job --------------------------------------------------------- */

/* The token is held from the first MPI_File_open to the last MPI_File_close of the files opened
 * on MPI_COMM_WORLD's group. Both calls are collective over it, so every rank counts the same
 * files and enters rank 0's broadcast (access.c) at the same call. A file of another
 * communicator is opened by its ranks at their own time: it is not counted. */
struct held {
    MPI_File fh;
    struct held *next;
};
static pthread_mutex_t held_lock = PTHREAD_MUTEX_INITIALIZER;
static struct held *held;            /* the counted open files */

static int access_counts(MPI_Comm comm, MPI_File *fh)
{
    if (IEZ_LIKELY(iez_access_level != IEZ_ACCESS_FILE) || comm == MPI_COMM_NULL || !fh)
        return 0;
    int same = MPI_UNEQUAL;
    if (iez_pmpi.PMPI_Comm_compare(comm, MPI_COMM_WORLD, &same) != MPI_SUCCESS ||
        (same != MPI_IDENT && same != MPI_CONGRUENT)) {
        iez_log_once(IEZ_LOG_ACCESS, "IEZ_ACCESS=file: a file opened on a communicator other than MPI_COMM_WORLD's "
                     "ranks is not coordinated: no token for it");
        return 0;
    }
    return 1;
}

/* After the open: every rank agrees whether the file counts (only if it opened, with memory to
 * count it, everywhere), so the counts, and the collectives at the last close, stay the same. */
static void access_opened(MPI_Comm comm, int rc, MPI_File fh)
{
    struct held *h = rc == MPI_SUCCESS ? malloc(sizeof *h) : NULL;
    int ok = h != NULL;
    if (iez_pmpi.PMPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, comm) != MPI_SUCCESS)
        ok = 0; /* a collective on one communicator fails on every rank alike */
    if (!ok) {
        free(h);
        iez_access_exit(IEZ_ACCESS_FILE);
        return;
    }
    pthread_mutex_lock(&held_lock);
    *h = (struct held){fh, held};
    held = h;
    pthread_mutex_unlock(&held_lock);
}

static int access_closing(MPI_File fh)
{
    struct held *found = NULL;
    pthread_mutex_lock(&held_lock);
    for (struct held **p = &held; *p; p = &(*p)->next)
        if ((*p)->fh == fh) {
            found = *p;
            *p = found->next;
            break;
        }
    pthread_mutex_unlock(&held_lock);
    free(found);
    return found != NULL;
}

static int open_file(MPI_Comm comm, const char *filename, int amode, MPI_Info info, MPI_File *fh);

IEZ_EXPORT int MPI_File_open(MPI_Comm comm, const char *filename, int amode, MPI_Info info, MPI_File *fh)
{
    if (iez_pmpi_ready(__builtin_return_address(0)))
        return MPI_ERR_INTERN;
    iez_init();
    int counts = access_counts(comm, fh);
    if (counts)
        iez_access_enter(IEZ_ACCESS_FILE, "files");
    int rc = open_file(comm, filename, amode, info, fh);
    if (counts)
        access_opened(comm, rc, rc == MPI_SUCCESS ? *fh : MPI_FILE_NULL);
    return rc;
}

static int open_file(MPI_Comm comm, const char *filename, int amode, MPI_Info info, MPI_File *fh)
{
    /* an erroneous call gets MPI's own answer, not one from libiez's calls on its arguments */
    if ((!iez_cfg.trace && !iez_cfg.place) || !filename || !fh || comm == MPI_COMM_NULL || !iez_owner())
        return iez_pmpi.PMPI_File_open(comm, filename, amode, info, fh);
    const char *path = strip_prefix(filename);
    char abs[PATH_MAX];
    int len = -1;
    if (iez_enter()) {
        len = iez_absolute(AT_FDCWD, path, abs, sizeof abs);
        iez_leave();
    }
    struct iez_mpi_create mc = {0};
    int creating = (amode & MPI_MODE_CREATE) && valid_amode(amode);
    if (creating) {
        iez_mpi_place(comm, path, abs, len, iez_mpi_placing(), &mc);
    } else {
        iez_pmpi.PMPI_Comm_rank(comm, &mc.rank);
        iez_pmpi.PMPI_Comm_size(comm, &mc.size);
    }
    /* split writing: a hierarchical file's aggregators one per component (split.c) */
    int aggregate = 0;
    MPI_Info used = creating ? iez_split_info(comm, &mc, abs, len, info, &aggregate) : info;
    /* libiez's create was the exclusive one (every rank knows: same amode everywhere) */
    int rc = iez_pmpi.PMPI_File_open(comm, filename, mc.created ? amode & ~MPI_MODE_EXCL : amode, used, fh);
    iez_split_done(used, info);
    if (rc == MPI_SUCCESS)
        iez_collio_opened(comm, *fh, abs, len, amode, aggregate);
    if (iez_enter()) {
        int saved = errno;
        int placed = mc.pl.outcome == IEZ_PLACE_CREATED;
        if (rc != MPI_SUCCESS && placed) /* as if libiez had not been there */
            syscall(SYS_unlinkat, AT_FDCWD, path, 0);
        if (rc == MPI_SUCCESS && len >= 0 && iez_tracing) {
            int created = mc.rank == 0 && creating && !mc.existed;
            struct iez_rec *rec = iez_open_record(IEZ_API_MPIIO, abs, (size_t)len, created,
                                                  mc.rank == 0 ? mc.pl.plan : IEZ_PLAN_NONE, mc.size,
                                                  placed ? &mc.pl.set : NULL);
            if (rec)
                remember(*fh, rec);
        }
        free(mc.pl.set.data);
        errno = saved;
        iez_leave();
    }
    return rc;
}

IEZ_EXPORT int MPI_File_close(MPI_File *fh)
{
    if (iez_pmpi_ready(__builtin_return_address(0)))
        return MPI_ERR_INTERN;
    struct iez_rec *rec = fh && iez_tracing ? forget(*fh) : NULL;
    int counted = IEZ_UNLIKELY(iez_access_level == IEZ_ACCESS_FILE) && fh && access_closing(*fh);
    if (IEZ_UNLIKELY(iez_collio_on) && fh)
        iez_collio_closing(*fh);
    int rc = iez_pmpi.PMPI_File_close(fh);
    if (rec)
        iez_trace_file_closed(rec);
    if (counted)
        iez_access_exit(IEZ_ACCESS_FILE);
    return rc;
}

IEZ_EXPORT int MPI_File_set_view(MPI_File fh, MPI_Offset disp, MPI_Datatype etype, MPI_Datatype filetype,
                                 const char *datarep, MPI_Info info)
{
    if (iez_pmpi_ready(__builtin_return_address(0)))
        return MPI_ERR_INTERN;
    int rc = iez_pmpi.PMPI_File_set_view(fh, disp, etype, filetype, datarep, info);
    MPI_Count size = 0;
    if (rc == MPI_SUCCESS && iez_tracing && iez_pmpi.PMPI_Type_size_x(etype, &size) == MPI_SUCCESS) {
        struct mfile *f = lookup(fh);
        if (f) {
            f->disp = disp;
            f->etype = size > 0 ? size : 1;
            f->bytes = etype == MPI_BYTE && filetype == MPI_BYTE;
        }
    }
    return rc;
}

/* ---- byte accounting ----------------------------------------------------------------------- */

enum where { IND, AT, SHR };         /* the individual pointer, an explicit offset, the shared pointer */

/* The byte just past an access of n bytes that starts at etype offset `off` of the view (the
 * individual pointer's position after it, for IND), or 0 when unknown. indep: an independent
 * write at the individual pointer, before which iez_write_end was cleared. */
static uint64_t end_of(const struct mfile *f, MPI_File fh, enum where w, int indep, MPI_Offset off, MPI_Count n)
{
    /* a contiguous view's write ends where the system call beneath it ended (ROMIO writes it in
     * order): MPI_File_get_position would cost more than the rest of the call's accounting */
    if (indep && f->bytes && iez_write_end > (uint64_t)f->disp)
        return iez_write_end;
    if (w == IND && iez_pmpi.PMPI_File_get_position(fh, &off) != MPI_SUCCESS)
        return 0;
    else if (w == AT) /* a 64-bit division costs more than the rest of the accounting */
        off += f->etype == 1 ? n : n / f->etype;
    if (w == SHR || off <= 0)
        return 0;
    if (f->bytes)
        return (uint64_t)(f->disp + off);
    MPI_Offset last;
    if (iez_pmpi.PMPI_File_get_byte_offset(fh, off - 1, &last) != MPI_SUCCESS)
        return 0;
    return (uint64_t)(last + f->etype);
}

/* After a successful call moving count items of type (the bytes of a nonblocking or split
 * call count when it starts, as Darshan counts them); coll: a collective read; indep: as end_of. */
static inline __attribute__((always_inline)) void account(MPI_File fh, int write, int coll, enum where w, int indep,
                                                         MPI_Offset off, MPI_Count count, MPI_Datatype type)
{
    struct mfile *f;
    MPI_Count size = 1; /* MPI_BYTE's without asking: most I/O moves bytes */
    if (IEZ_LIKELY(!iez_tracing) || count <= 0 || !(f = lookup(fh)) ||
        (type != MPI_BYTE && (iez_pmpi.PMPI_Type_size_x(type, &size) != MPI_SUCCESS || size <= 0)))
        return;
    MPI_Count n = count * size;
    /* below MPI_THREAD_MULTIPLE no two threads are in MPI at once: no atomic updates needed */
    int mt = iez_mpi_thread_multiple;
    if (write)
        iez_trace_rec_wrote(f->rec, (uint64_t)n, end_of(f, fh, w, indep, off, n), f->bytes, mt);
    else
        iez_trace_rec_read(f->rec, (uint64_t)n, coll, mt);
}

/* An independent write at the individual pointer (the name folds to a constant). */
#define IEZ_INDEP_WRITE(W, WH, NAME) ((W) && (WH) == IND && !__builtin_strstr(NAME, "_all"))
/* A collective read call (the name folds to a constant): _all, _at_all, _ordered and their forms. */
#define IEZ_COLL_READ(W, NAME) (!(W) && (__builtin_strstr(NAME, "_all") || __builtin_strstr(NAME, "ordered")))

/* The wrapper of one data call: PARAMS and ARGS its parameters and the real call's arguments,
 * OFF its explicit offset (0 if none). Each finds its PMPI function at its first call. */
#define IEZ_WRAP(NAME, PARAMS, ARGS, OFF, W, WH)                                                   \
    IEZ_EXPORT int MPI_File_##NAME PARAMS                                                          \
    {                                                                                              \
        static __typeof__(int(*) PARAMS) real;                                                     \
        if (IEZ_UNLIKELY(!__atomic_load_n(&real, __ATOMIC_ACQUIRE))) {                             \
            __typeof__(real) p = (__typeof__(real))iez_pmpi_sym("PMPI_File_" #NAME, __builtin_return_address(0)); \
            if (!p)                                                                                \
                return MPI_ERR_INTERN;                                                             \
            __atomic_store_n(&real, p, __ATOMIC_RELEASE);                                          \
        }                                                                                          \
        /* nothing to do after the call: a tail call, no frame of ours to return through (a   \
         * return after a system call mispredicts, a few ns each) */                             \
        if (IEZ_LIKELY(!(iez_tracing | iez_collio_on | (iez_access_level == IEZ_ACCESS_CALL)))) \
            return real ARGS;                                                                      \
        /* IEZ_ACCESS=fine: a token for each MPI_File_write_at (references: s004-fig8) */          \
        int fine = IEZ_UNLIKELY(iez_access_level == IEZ_ACCESS_CALL) &&                            \
                   (!__builtin_strcmp(#NAME, "write_at") || !__builtin_strcmp(#NAME, "write_at_c")); \
        if (fine)                                                                                  \
            iez_access_enter(IEZ_ACCESS_CALL, "call");                                             \
        int rc;                                                                                    \
        if (IEZ_INDEP_WRITE(W, WH, #NAME))                                                         \
            iez_write_end = 0;                                                                     \
        /* libiez's collective read or write (collio.c) serves it, or the real call does */       \
        if (!(IEZ_UNLIKELY(iez_collio_on) && iez_collio_kind(#NAME) &&                             \
              iez_collio_try(iez_collio_kind(#NAME), &rc, IEZ_CIO_ARGS ARGS)))                     \
            rc = real ARGS;                                                                        \
        if (fine)                                                                                  \
            iez_access_exit(IEZ_ACCESS_CALL);                                                      \
        if (rc == MPI_SUCCESS)                                                                     \
            account(fh, W, IEZ_COLL_READ(W, #NAME), WH, IEZ_INDEP_WRITE(W, WH, #NAME), OFF, (MPI_Count)count, type); \
        return rc;                                                                                 \
    }

/* The call shapes: S with a status, R with a request, B a split collective's begin; O with an
 * explicit offset. Q: the buffer's qualifier (const for writes); C: the count's type. */
#define IEZ_S(Q, C) (MPI_File fh, Q void *buf, C count, MPI_Datatype type, MPI_Status *st), (fh, buf, count, type, st), 0
#define IEZ_SO(Q, C) (MPI_File fh, MPI_Offset off, Q void *buf, C count, MPI_Datatype type, MPI_Status *st), \
    (fh, off, buf, count, type, st), off
#define IEZ_R(Q, C) (MPI_File fh, Q void *buf, C count, MPI_Datatype type, MPI_Request *rq), (fh, buf, count, type, rq), 0
#define IEZ_RO(Q, C) (MPI_File fh, MPI_Offset off, Q void *buf, C count, MPI_Datatype type, MPI_Request *rq), \
    (fh, off, buf, count, type, rq), off
#define IEZ_B(Q, C) (MPI_File fh, Q void *buf, C count, MPI_Datatype type), (fh, buf, count, type), 0
#define IEZ_BO(Q, C) (MPI_File fh, MPI_Offset off, Q void *buf, C count, MPI_Datatype type), \
    (fh, off, buf, count, type), off
#define IEZ_WRAP_SHAPED(NAME, SHAPE, W, WH) IEZ_WRAP(NAME, SHAPE, W, WH) /* SHAPE: 3 arguments once expanded */

/* Every data call of MPI-IO: (name, shape, write?, which file position). */
#define IEZ_MPIIO_CALLS(X)                                                                         \
    X(write, S, 1, IND) X(write_all, S, 1, IND) X(read, S, 0, IND) X(read_all, S, 0, IND)          \
    X(write_shared, S, 1, SHR) X(write_ordered, S, 1, SHR)                                         \
    X(read_shared, S, 0, SHR) X(read_ordered, S, 0, SHR)                                           \
    X(write_at, SO, 1, AT) X(write_at_all, SO, 1, AT) X(read_at, SO, 0, AT) X(read_at_all, SO, 0, AT) \
    X(iwrite, R, 1, IND) X(iwrite_all, R, 1, IND) X(iread, R, 0, IND) X(iread_all, R, 0, IND)      \
    X(iwrite_shared, R, 1, SHR) X(iread_shared, R, 0, SHR)                                         \
    X(iwrite_at, RO, 1, AT) X(iwrite_at_all, RO, 1, AT) X(iread_at, RO, 0, AT) X(iread_at_all, RO, 0, AT) \
    X(write_all_begin, B, 1, IND) X(read_all_begin, B, 0, IND)                                     \
    X(write_ordered_begin, B, 1, SHR) X(read_ordered_begin, B, 0, SHR)                             \
    X(write_at_all_begin, BO, 1, AT) X(read_at_all_begin, BO, 0, AT)

#define IEZ_Q1 const
#define IEZ_Q0
#define IEZ_WRAP_INT(NAME, SHAPE, W, WH) IEZ_WRAP_SHAPED(NAME, IEZ_##SHAPE(IEZ_Q##W, int), W, WH)
IEZ_MPIIO_CALLS(IEZ_WRAP_INT)

#if MPI_VERSION >= 4 /* the large-count forms */
#define IEZ_WRAP_LARGE(NAME, SHAPE, W, WH) IEZ_WRAP_SHAPED(NAME##_c, IEZ_##SHAPE(IEZ_Q##W, MPI_Count), W, WH)
IEZ_MPIIO_CALLS(IEZ_WRAP_LARGE)
#endif

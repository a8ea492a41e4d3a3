/* The collective data calls libiez-mpi serves itself (collio.h): MPI_File_read_all,
 * MPI_File_read_at_all, MPI_File_write_all, MPI_File_write_at_all, their split and large-count
 * forms, each sent to the Lustre-aware read (collread.c) or split writing's aggregation
 * (collwrite.c) when the file is served, and the ends of the split forms. Above collio.c,
 * collread.c and collwrite.c, which never call up into it. */
#include <stdarg.h>

#include "collio.h"
#include "log.h"
#include "pmpi.h"
#include "state.h"

int iez_collio_try(int kind, int *rc, ...)
{
    va_list ap;
    va_start(ap, rc);
    MPI_File fh = va_arg(ap, MPI_File);
    int k = kind & ~(IEZ_CIO_LARGE | IEZ_CIO_WRITE), at = k == IEZ_CIO_AT_ALL || k == IEZ_CIO_AT_ALL_BEGIN;
    int write = (kind & IEZ_CIO_WRITE) != 0;
    MPI_Offset off = at ? va_arg(ap, MPI_Offset) : 0;
    void *buf = va_arg(ap, void *);
    MPI_Count count = kind & IEZ_CIO_LARGE ? va_arg(ap, MPI_Count) : va_arg(ap, int);
    MPI_Datatype type = va_arg(ap, MPI_Datatype);
    MPI_Status *st = k == IEZ_CIO_ALL || k == IEZ_CIO_AT_ALL ? va_arg(ap, MPI_Status *) : NULL;
    va_end(ap);
    struct iez_cio_file *f = iez_cio_find(fh);
    if (!f || !(write ? f->write : f->read))
        return 0;
    const char *what = write ? "split writing's own aggregation" : "Lustre-aware collective read";
    const char *op = write ? "write" : "read";
    if (!f->state)
        iez_cio_set_up(f, what, op);
    if (f->state < 0)
        return 0;
    MPI_Status own;
    int begin = k == IEZ_CIO_ALL_BEGIN || k == IEZ_CIO_AT_ALL_BEGIN;
    int done = write ? iez_collwrite_call(f, fh, at, off, buf, count, type, begin ? &own : st)
                     : iez_collread_call(f, fh, at, off, buf, count, type, begin ? &own : st);
    if (done < 0) {
        iez_log_once(IEZ_LOG_COLLREAD, "%s: a view, type or file it cannot serve (%s): MPI's own %s", what,
                     f->path ? f->path : "?", op);
        return 0;
    }
    if (begin) { /* the data have moved; MPI_File_*_end gives the status */
        f->split_status = own;
        f->split = 1;
    }
    *rc = done;
    return 1;
}

/* The end of a split collective: the status of a begin this file served, else MPI's. */
static int split_end(MPI_File fh, MPI_Status *st)
{
    struct iez_cio_file *f = __atomic_load_n(&iez_collio_on, __ATOMIC_RELAXED) ? iez_cio_find(fh) : NULL;
    if (!f || !f->split)
        return 0;
    f->split = 0;
    if (st != MPI_STATUS_IGNORE)
        *st = f->split_status;
    return 1;
}

#define IEZ_CIO_END(NAME, Q)                                                                       \
    IEZ_EXPORT int MPI_File_##NAME(MPI_File fh, Q void *buf, MPI_Status *st)                       \
    {                                                                                              \
        if (iez_pmpi_ready(__builtin_return_address(0)))                                           \
            return MPI_ERR_INTERN;                                                                 \
        iez_cio_configure();                                                                       \
        if (split_end(fh, st))                                                                     \
            return MPI_SUCCESS;                                                                    \
        return iez_cio_fn.NAME ? iez_cio_fn.NAME(fh, buf, st) : MPI_ERR_INTERN;                    \
    }
IEZ_CIO_END(read_all_end, )
IEZ_CIO_END(read_at_all_end, )
IEZ_CIO_END(write_all_end, const)
IEZ_CIO_END(write_at_all_end, const)

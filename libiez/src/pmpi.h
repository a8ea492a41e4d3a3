/* The MPI layer's view of MPI (libiez-mpi.so only): the PMPI functions it calls, looked up at
 * run time (dynsym.h) so that the library needs no libmpi in processes that are no MPI ranks,
 * and what mpi_init.c and mpiio.c share. */
#ifndef IEZ_PMPI_H
#define IEZ_PMPI_H

#include <mpi.h>
#include <stddef.h>

#include "place.h"

#define IEZ_PMPI_LIST(X)                                                                  \
    X(PMPI_Init, int, (int *, char ***))                                                  \
    X(PMPI_Init_thread, int, (int *, char ***, int, int *))                               \
    X(PMPI_Finalize, int, (void))                                                         \
    X(PMPI_Initialized, int, (int *))                                                     \
    X(PMPI_Comm_rank, int, (MPI_Comm, int *))                                             \
    X(PMPI_Comm_size, int, (MPI_Comm, int *))                                             \
    X(PMPI_Comm_dup, int, (MPI_Comm, MPI_Comm *))                                         \
    X(PMPI_Comm_free, int, (MPI_Comm *))                                                  \
    X(PMPI_Comm_compare, int, (MPI_Comm, MPI_Comm, int *))                                \
    X(PMPI_Comm_set_errhandler, int, (MPI_Comm, MPI_Errhandler))                          \
    X(PMPI_Barrier, int, (MPI_Comm))                                                      \
    X(PMPI_Bcast, int, (void *, int, MPI_Datatype, int, MPI_Comm))                        \
    X(PMPI_Allreduce, int, (const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm))   \
    X(PMPI_Exscan, int, (const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm))      \
    X(PMPI_Gather, int, (const void *, int, MPI_Datatype, void *, int, MPI_Datatype, int, MPI_Comm)) \
    X(PMPI_Type_size_x, int, (MPI_Datatype, MPI_Count *))                                 \
    X(PMPI_Info_free, int, (MPI_Info *))                                                  \
    X(PMPI_File_open, int, (MPI_Comm, const char *, int, MPI_Info, MPI_File *))           \
    X(PMPI_File_close, int, (MPI_File *))                                                 \
    X(PMPI_File_set_view, int, (MPI_File, MPI_Offset, MPI_Datatype, MPI_Datatype, const char *, MPI_Info)) \
    X(PMPI_File_get_position, int, (MPI_File, MPI_Offset *))                              \
    X(PMPI_File_get_byte_offset, int, (MPI_File, MPI_Offset, MPI_Offset *))               \
    X(PMPI_File_write_at_all, int, (MPI_File, MPI_Offset, const void *, int, MPI_Datatype, MPI_Status *))

struct iez_pmpi_table {
#define IEZ_PMPI_FIELD(name, ret, args) ret(*name) args;
    IEZ_PMPI_LIST(IEZ_PMPI_FIELD)
#undef IEZ_PMPI_FIELD
};

extern struct iez_pmpi_table iez_pmpi;

/* Resolve the table (once), with the caller of the first MPI wrapper as the place to look when
 * libmpi was loaded privately. 0, or -1 if MPI's functions cannot be found (then every wrapper
 * fails with MPI_ERR_INTERN: there is no MPI to call). */
int iez_pmpi_ready(const void *caller);
/* One PMPI function by name, for the I/O wrappers (each resolves its own once). */
void *iez_pmpi_sym(const char *name, const void *caller);

/* Placement over a communicator, as MPI_File_open and parallel H5Fcreate need it: rank 0 of
 * comm creates the file with its planned layout, and through a broadcast (which no rank leaves
 * before rank 0 has created the file) every rank learns whether it did. Every rank of comm
 * calls it with the same `place` (placement is on); `abs` is this rank's absolute name
 * (len < 0: none could be formed). */
struct iez_mpi_create {
    int rank, size;
    int created;                     /* rank 0 of comm created the file just now */
    int existed;                     /* rank 0 saw the file exist before (known when tracing) */
    struct iez_placement pl;         /* rank 0's placement; pl.set is malloc'd */
};
void iez_mpi_place(MPI_Comm comm, const char *path, const char *abs, int len, int place, struct iez_mpi_create *out);
/* MPI_Init_thread gave MPI_THREAD_MULTIPLE: threads may be in MPI-IO calls at once. */
extern int iez_mpi_thread_multiple;

/* Whether placement applies to creates in this process (IEZ_MODE place, or the emulated
 * cluster's MDS, which sees every create). Identical in every rank that has the same
 * environment, so it may decide whether to enter a collective. */
int iez_mpi_placing(void);

#endif

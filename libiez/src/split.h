/* Split writing (references: s001-hierarchical) under libiez-mpi: a shared file the plan lays out
 * hierarchically (one PFL component per group of writers, each on its own OSTs) is opened with
 * ROMIO hints that make each collective-buffering aggregator's file domain one component
 * (docs/libiez.md, "Split writing"). */
#ifndef IEZ_SPLIT_H
#define IEZ_SPLIT_H

#include <mpi.h>

#include "layout.h"
#include "pmpi.h"

/* The hints' values, in the order of iez_split_keys; 0: not set. */
enum { IEZ_SPLIT_CB_NODES, IEZ_SPLIT_STRIPING_FACTOR, IEZ_SPLIT_STRIPING_UNIT, IEZ_SPLIT_CB_BUFFER_SIZE,
       IEZ_SPLIT_VALUES };

/* The hints' values for a file of layout lay opened by nprocs ranks: 0, or -1 when lay is not
 * hierarchical (a composite whose components all have an explicit OST list, one stripe count
 * and one stripe size) or its components cannot each get an aggregator of their own. Pure. */
int iez_split_values(const struct iez_layout *lay, int nprocs, long long v[IEZ_SPLIT_VALUES]);

/* A copy of user (MPI_INFO_NULL: an empty one) with the hints of v, for a job on `nodes` hosts,
 * added where user has no value for the key: 0 with the copy in *out, or -1 with *out = user
 * when any MPI_Info call failed. */
int iez_split_hints(const long long v[IEZ_SPLIT_VALUES], int nodes, MPI_Info user, MPI_Info *out);

/* The info MPI_File_open passes to PMPI_File_open for a file iez_mpi_place has just dealt with
 * (mc): rank 0, if it created the file from the plan, finds its planned layout and broadcasts
 * the hints (IEZ_SPLIT=hints) or, in *aggregate, that libiez aggregates the file's collective
 * writes itself (IEZ_SPLIT=aggregate, collwrite.c); every rank of comm calls it. user itself
 * when there are no hints. Free the result with iez_split_done. */
MPI_Info iez_split_info(MPI_Comm comm, const struct iez_mpi_create *mc, const char *abs, int len, MPI_Info user,
                        int *aggregate);
void iez_split_done(MPI_Info used, MPI_Info user);

/* Parallel H5Fcreate has placed abs over its communicator (mc): a file rank 0 created from the
 * plan qualifies at HDF5's own MPI_File_open of it until iez_h5_mpi_end (hdf5_mpi.h). */
void iez_split_expect(const struct iez_mpi_create *mc, const char *abs, int len);

#endif

/* Between the HDF5 layer (hdf5.c, in both libraries) and the MPI layer (libiez-mpi.so only). */
#ifndef IEZ_HDF5_MPI_H
#define IEZ_HDF5_MPI_H

#include <stdint.h>

#include "backend.h"

struct iez_h5_collective {
    int rank, size;                  /* in the file's communicator */
    int created, existed;            /* by rank 0 of it, before the real call (as iez_mpi_create) */
    int plan;                        /* IEZ_PLAN_* of rank 0's placement */
    struct iez_lum_bytes set;        /* the layout rank 0 gave it (malloc'd), if known */
};

/* Placement of a file that parallel HDF5 creates through its MPI-IO driver, collective over the
 * communicator of the file access property list fapl (get_fapl_mpio: that HDF5's
 * H5Pget_fapl_mpio). 0, or -1 when the communicator cannot be had. Defined by libiez-mpi.so's
 * MPI layer; NULL in libiez.so. */
int iez_h5_mpi_place(void *get_fapl_mpio, int64_t fapl, const char *path, const char *abs, int len,
                     struct iez_h5_collective *out) __attribute__((weak));
/* After the real parallel H5Fcreate: what iez_h5_mpi_place left for HDF5's MPI_File_open of the
 * file (split writing's hints, split.c) is forgotten. */
void iez_h5_mpi_end(void) __attribute__((weak));

#endif

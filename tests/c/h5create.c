/* iez-test-h5 (serial HDF5) and iez-test-h5-mpi (parallel HDF5, the MPI-IO driver): an HDF5
 * program the libiez tests run.
 *
 *   iez-test-h5[-mpi] [--excl] [--fpp] FILE BYTES
 *
 * Creates FILE with H5Fcreate (H5F_ACC_TRUNC, or H5F_ACC_EXCL with --excl) and writes a 1-D
 * dataset "data" of BYTES bytes per rank. Parallel: every rank of MPI_COMM_WORLD writes its
 * slice of one shared file collectively, or with --fpp its own file FILE.%08d on MPI_COMM_SELF.
 * Exit status 0, or 1 with the failing call on stderr. */
#include <hdf5.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef H5_HAVE_PARALLEL
#include <mpi.h>
#endif

static int rank = 0, size = 1;

static void fail(const char *what)
{
    fprintf(stderr, "rank %d: %s failed\n", rank, what);
#ifdef H5_HAVE_PARALLEL
    fflush(stderr); /* the launcher forwards stderr; an abort tears that down at once */
    nanosleep(&(struct timespec){0, 200000000}, NULL);
    MPI_Abort(MPI_COMM_WORLD, 1);
#endif
    exit(1);
}

int main(int argc, char **argv)
{
    int excl = 0, fpp = 0;
    const char *name = NULL, *count = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--excl"))
            excl = 1;
        else if (!strcmp(argv[i], "--fpp"))
            fpp = 1;
        else if (!name)
            name = argv[i];
        else
            count = argv[i];
    }
    if (!name || !count) {
        fprintf(stderr, "usage: iez-test-h5 [--excl] [--fpp] FILE BYTES\n");
        return 2;
    }
    hsize_t bytes = strtoull(count, NULL, 10);
    char file[4096];
    snprintf(file, sizeof file, "%s", name);
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS), dxpl = H5Pcreate(H5P_DATASET_XFER);
#ifdef H5_HAVE_PARALLEL
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (fpp)
        snprintf(file, sizeof file, "%s.%08d", name, rank);
    if (H5Pset_fapl_mpio(fapl, fpp ? MPI_COMM_SELF : MPI_COMM_WORLD, MPI_INFO_NULL) < 0)
        fail("H5Pset_fapl_mpio");
    if (H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_COLLECTIVE) < 0)
        fail("H5Pset_dxpl_mpio");
#else
    (void)fpp;
#endif
    int parts = fpp ? 1 : size;
    hid_t f = H5Fcreate(file, excl ? H5F_ACC_EXCL : H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
    if (f < 0)
        fail("H5Fcreate");
    hsize_t dims = bytes * (hsize_t)parts, start = fpp ? 0 : bytes * (hsize_t)rank;
    hid_t space = H5Screate_simple(1, &dims, NULL);
    hid_t dset = H5Dcreate2(f, "data", H5T_NATIVE_UCHAR, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    if (dset < 0)
        fail("H5Dcreate2");
    hid_t mem = H5Screate_simple(1, &bytes, NULL);
    H5Sselect_hyperslab(space, H5S_SELECT_SET, &start, NULL, &bytes, NULL);
    unsigned char *buf = malloc(bytes ? bytes : 1);
    for (hsize_t i = 0; i < bytes; i++)
        buf[i] = (unsigned char)((rank * 7 + i) % 251);
    if (H5Dwrite(dset, H5T_NATIVE_UCHAR, mem, space, dxpl, buf) < 0)
        fail("H5Dwrite");
    H5Sclose(mem);
    H5Sclose(space);
    H5Dclose(dset);
    if (H5Fclose(f) < 0)
        fail("H5Fclose");
    H5Pclose(fapl);
    H5Pclose(dxpl);
    free(buf);
    printf("rank %d of %d: %s\n", rank, size, file);
#ifdef H5_HAVE_PARALLEL
    MPI_Finalize();
#endif
    return 0;
}

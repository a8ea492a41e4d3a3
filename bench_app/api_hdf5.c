/* The HDF5 backend, after IOR's: each file holds one dataset "data" of bytes, as long as the
 * job's bytes for the file, and a transfer at offset x writes or reads the hyperslab
 * [x, x + len) of it through parallel HDF5's MPI-IO driver (a shared file on MPI_COMM_WORLD, a
 * rank's own on MPI_COMM_SELF), independently or, with -c, collectively. The file is larger
 * than the data by HDF5's own metadata (a few KiB). */
#include <hdf5.h>
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#define DATASET "data"

struct bench_file {
    hid_t file, dset, dxpl;
    char path[];
};

static int collective;

static void configure(const struct bench_params *p)
{
    collective = p->collective;
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* errors are ours to report, as one line */
}

static struct bench_file *new_file(const char *path)
{
    size_t n = strlen(path) + 1;
    struct bench_file *f = calloc(1, sizeof *f + n);
    if (!f) {
        bench_fail_msg("open %s: out of memory", path);
        return NULL;
    }
    memcpy(f->path, path, n);
    f->file = f->dset = f->dxpl = H5I_INVALID_HID;
    return f;
}

static void drop(struct bench_file *f)
{
    if (f->dset >= 0)
        H5Dclose(f->dset);
    if (f->file >= 0)
        H5Fclose(f->file);
    if (f->dxpl >= 0)
        H5Pclose(f->dxpl);
    free(f);
}

/* The file access and transfer properties: MPI-IO over the file's ranks. */
static int properties(struct bench_file *f, int shared, hid_t *fapl)
{
    *fapl = H5Pcreate(H5P_FILE_ACCESS);
    f->dxpl = H5Pcreate(H5P_DATASET_XFER);
    if (*fapl < 0 || f->dxpl < 0 || H5Pset_fapl_mpio(*fapl, shared ? MPI_COMM_WORLD : MPI_COMM_SELF, MPI_INFO_NULL) < 0 ||
        H5Pset_dxpl_mpio(f->dxpl, collective ? H5FD_MPIO_COLLECTIVE : H5FD_MPIO_INDEPENDENT) < 0) {
        bench_fail_msg("HDF5 property lists for %s cannot be made", f->path);
        return -1;
    }
    return 0;
}

static struct bench_file *hdf5_create(const char *path, int shared, uint64_t size)
{
    struct bench_file *f = new_file(path);
    hid_t fapl = H5I_INVALID_HID, space = H5I_INVALID_HID, dcpl = H5I_INVALID_HID;
    if (!f || properties(f, shared, &fapl))
        goto fail;
    if ((f->file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, fapl)) < 0) {
        bench_fail_msg("create %s: H5Fcreate failed", path);
        goto fail;
    }
    hsize_t dims = size;
    space = H5Screate_simple(1, &dims, NULL);
    dcpl = H5Pcreate(H5P_DATASET_CREATE);
    /* no fill values: the job writes every byte, and filling would write the file twice */
    if (space < 0 || dcpl < 0 || H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER) < 0 ||
        (f->dset = H5Dcreate2(f->file, DATASET, H5T_NATIVE_UCHAR, space, H5P_DEFAULT, dcpl, H5P_DEFAULT)) < 0) {
        bench_fail_msg("create %s: the %llu-byte dataset cannot be made", path, (unsigned long long)size);
        goto fail;
    }
    H5Sclose(space);
    H5Pclose(dcpl);
    H5Pclose(fapl);
    return f;
fail:
    if (space >= 0)
        H5Sclose(space);
    if (dcpl >= 0)
        H5Pclose(dcpl);
    if (fapl >= 0)
        H5Pclose(fapl);
    if (f)
        drop(f);
    return NULL;
}

static struct bench_file *hdf5_open(const char *path, enum bench_access access, int shared)
{
    struct bench_file *f = new_file(path);
    hid_t fapl = H5I_INVALID_HID;
    if (!f || properties(f, shared, &fapl))
        goto fail;
    if ((f->file = H5Fopen(path, access == BENCH_WRITE ? H5F_ACC_RDWR : H5F_ACC_RDONLY, fapl)) < 0) {
        bench_fail_msg("open %s: H5Fopen failed (missing, or not an HDF5 file)", path);
        goto fail;
    }
    if ((f->dset = H5Dopen2(f->file, DATASET, H5P_DEFAULT)) < 0) {
        bench_fail_msg("open %s: it has no dataset \"%s\"", path, DATASET);
        goto fail;
    }
    H5Pclose(fapl);
    return f;
fail:
    if (fapl >= 0)
        H5Pclose(fapl);
    if (f)
        drop(f);
    return NULL;
}

static int hdf5_xfer(enum bench_access access, struct bench_file *f, void *buf, uint64_t len, uint64_t offset)
{
    hsize_t start = offset, count = len;
    hid_t file_space = H5Dget_space(f->dset), mem = H5Screate_simple(1, &count, NULL);
    hssize_t have = file_space < 0 ? -1 : H5Sget_simple_extent_npoints(file_space);
    herr_t rc = -1;
    if (have >= 0 && offset + len > (uint64_t)have)
        bench_fail_msg("%s %s at offset %llu: the dataset ends at %lld", access == BENCH_WRITE ? "write" : "read",
                       f->path, (unsigned long long)offset, (long long)have);
    else if (file_space >= 0 && mem >= 0 &&
             H5Sselect_hyperslab(file_space, H5S_SELECT_SET, &start, NULL, &count, NULL) >= 0)
        rc = access == BENCH_WRITE ? H5Dwrite(f->dset, H5T_NATIVE_UCHAR, mem, file_space, f->dxpl, buf)
                                   : H5Dread(f->dset, H5T_NATIVE_UCHAR, mem, file_space, f->dxpl, buf);
    if (rc < 0 && !bench_failed())
        bench_fail_msg("%s %s at offset %llu: %s failed", access == BENCH_WRITE ? "write" : "read", f->path,
                       (unsigned long long)offset, access == BENCH_WRITE ? "H5Dwrite" : "H5Dread");
    if (mem >= 0)
        H5Sclose(mem);
    if (file_space >= 0)
        H5Sclose(file_space);
    return rc < 0 ? -1 : 0;
}

/* The dataset was made as large as the file's bytes: HACC-IO's preallocation is done. */
static int hdf5_set_size(struct bench_file *f, uint64_t size)
{
    (void)f, (void)size;
    return 0;
}

static int hdf5_fsync(struct bench_file *f)
{
    if (H5Fflush(f->file, H5F_SCOPE_LOCAL) < 0) {
        bench_fail_msg("flush %s: H5Fflush failed", f->path);
        return -1;
    }
    return 0;
}

static int hdf5_close(struct bench_file *f)
{
    herr_t d = H5Dclose(f->dset), c = H5Fclose(f->file);
    f->dset = f->file = H5I_INVALID_HID;
    if (d < 0 || c < 0)
        bench_fail_msg("close %s: H5Fclose failed", f->path);
    drop(f);
    return d < 0 || c < 0 ? -1 : 0;
}

const struct bench_api bench_hdf5_api = {
    .name = "HDF5",
    .mpi = 1,
    .collective_open = 1,
    .configure = configure,
    .create = hdf5_create,
    .open = hdf5_open,
    .xfer = hdf5_xfer,
    .set_size = hdf5_set_size,
    .fsync = hdf5_fsync,
    .close = hdf5_close,
    .remove = bench_posix_remove,
};

/* The MPI-IO backend, as IOR's MPIIO backend and HACC-IO's MPI-IO path use it: a shared file is
 * opened by every rank on MPI_COMM_WORLD, a rank's own file on MPI_COMM_SELF (HACC-IO's file
 * per process), and data moves with MPI_File_write_at / read_at, or their collective _all forms
 * with -c. */
#include <mpi.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

struct bench_file {
    MPI_File fh;
    char path[];
};

static int collective;

static void configure(const struct bench_params *p) { collective = p->collective; }

static void fail(const char *op, const char *path, uint64_t offset, int rc)
{
    char why[MPI_MAX_ERROR_STRING];
    int n = 0;
    if (MPI_Error_string(rc, why, &n) != MPI_SUCCESS)
        n = 0;
    why[n] = 0;
    for (char *c = why; *c; c++) /* MPICH's strings carry an error stack, one frame a line */
        if (*c == '\n')
            *c = c[1] ? ' ' : 0;
    if (offset == UINT64_MAX)
        bench_fail_msg("%s %s: %s (MPI error %d)", op, path, n ? why : "unknown", rc);
    else
        bench_fail_msg("%s %s at offset %llu: %s (MPI error %d)", op, path, (unsigned long long)offset,
                       n ? why : "unknown", rc);
}

static struct bench_file *open_mode(const char *path, int amode, int shared)
{
    size_t n = strlen(path) + 1;
    struct bench_file *f = malloc(sizeof *f + n);
    if (!f) {
        bench_fail_msg("open %s: out of memory", path);
        return NULL;
    }
    memcpy(f->path, path, n);
    int rc = MPI_File_open(shared ? MPI_COMM_WORLD : MPI_COMM_SELF, path, amode, MPI_INFO_NULL, &f->fh);
    if (rc != MPI_SUCCESS) {
        fail(amode & MPI_MODE_CREATE ? "create" : "open", path, UINT64_MAX, rc);
        free(f);
        return NULL;
    }
    return f;
}

static struct bench_file *mpiio_create(const char *path, int shared, uint64_t size)
{
    (void)size;
    return open_mode(path, MPI_MODE_CREATE | MPI_MODE_WRONLY, shared);
}

static struct bench_file *mpiio_open(const char *path, enum bench_access access, int shared)
{
    return open_mode(path, access == BENCH_WRITE ? MPI_MODE_WRONLY : MPI_MODE_RDONLY, shared);
}

static int mpiio_xfer(enum bench_access access, struct bench_file *f, void *buf, uint64_t len, uint64_t offset)
{
    MPI_Status st;
    int rc, n = (int)len; /* a transfer is at most 1 GiB (options.c), a HACC-IO call 16 MiB */
    if (access == BENCH_WRITE)
        rc = collective ? MPI_File_write_at_all(f->fh, (MPI_Offset)offset, buf, n, MPI_BYTE, &st)
                        : MPI_File_write_at(f->fh, (MPI_Offset)offset, buf, n, MPI_BYTE, &st);
    else
        rc = collective ? MPI_File_read_at_all(f->fh, (MPI_Offset)offset, buf, n, MPI_BYTE, &st)
                        : MPI_File_read_at(f->fh, (MPI_Offset)offset, buf, n, MPI_BYTE, &st);
    if (rc != MPI_SUCCESS) {
        fail(access == BENCH_WRITE ? "write" : "read", f->path, offset, rc);
        return -1;
    }
    int got = 0;
    MPI_Get_count(&st, MPI_BYTE, &got);
    if (got != n) {
        bench_fail_msg("%s %s at offset %llu: %d of %d bytes moved%s", access == BENCH_WRITE ? "write" : "read",
                       f->path, (unsigned long long)offset, got, n,
                       access == BENCH_READ ? " (the file ends there)" : "");
        return -1;
    }
    return 0;
}

static int mpiio_set_size(struct bench_file *f, uint64_t size)
{
    int rc = MPI_File_set_size(f->fh, (MPI_Offset)size);
    if (rc != MPI_SUCCESS)
        fail("set_size", f->path, size, rc);
    return rc == MPI_SUCCESS ? 0 : -1;
}

static int mpiio_fsync(struct bench_file *f)
{
    int rc = MPI_File_sync(f->fh);
    if (rc != MPI_SUCCESS)
        fail("sync", f->path, UINT64_MAX, rc);
    return rc == MPI_SUCCESS ? 0 : -1;
}

static int mpiio_close(struct bench_file *f)
{
    int rc = MPI_File_close(&f->fh);
    if (rc != MPI_SUCCESS)
        fail("close", f->path, UINT64_MAX, rc);
    free(f);
    return rc == MPI_SUCCESS ? 0 : -1;
}

const struct bench_api bench_mpiio_api = {
    .name = "MPIIO",
    .mpi = 1,
    .collective_open = 1,
    .configure = configure,
    .create = mpiio_create,
    .open = mpiio_open,
    .xfer = mpiio_xfer,
    .set_size = mpiio_set_size,
    .fsync = mpiio_fsync,
    .close = mpiio_close,
    .remove = bench_posix_remove,
};

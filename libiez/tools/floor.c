/* libiez-floor.so and libiez-floor-after.so: the least an interposer of the MPI-IO data path
 * costs, for bench_mpi's floors. Like libiez-mpi, each wraps the MPI-IO call (a PMPI
 * pass-through) and the POSIX call ROMIO makes beneath it (its real function found once with
 * dlsym(RTLD_NEXT)), and does nothing else. libiez-floor.so tail-calls the real function (what
 * libiez-mpi does with nothing to trace); libiez-floor-after.so (IEZ_FLOOR_AFTER) returns
 * through a frame of its own after the call, as any wrapper that counts what the call did must:
 * that return, after a system call, is the cost a tracer cannot avoid. The data calls bench_mpi
 * times: MPI_File_write_at, MPI_File_write, and beneath them ROMIO's pwrite. */
#include <dlfcn.h>
#include <mpi.h>
#include <sys/types.h>

/* the result seen after the call: a frame to return through */
#ifdef IEZ_FLOOR_AFTER
#define AFTER(r) __asm__ volatile("" : "+r"(r))
#else
#define AFTER(r) (void)(r)
#endif

static ssize_t (*real_pwrite)(int, const void *, size_t, off_t);

__attribute__((visibility("default"))) ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
    if (__builtin_expect(!real_pwrite, 0))
        real_pwrite = (ssize_t(*)(int, const void *, size_t, off_t))dlsym(RTLD_NEXT, "pwrite");
    ssize_t r = real_pwrite(fd, buf, n, off);
    AFTER(r);
    return r;
}

__attribute__((visibility("default"))) int MPI_File_write_at(MPI_File fh, MPI_Offset off, const void *buf, int count,
                                                             MPI_Datatype type, MPI_Status *st)
{
    int r = PMPI_File_write_at(fh, off, buf, count, type, st);
    AFTER(r);
    return r;
}

__attribute__((visibility("default"))) int MPI_File_write(MPI_File fh, const void *buf, int count, MPI_Datatype type,
                                                          MPI_Status *st)
{
    int r = PMPI_File_write(fh, buf, count, type, st);
    AFTER(r);
    return r;
}

/* The MPI-IO data path in a tight loop, for bench/bench_mpi.py and bench/bench_collread.py: the
 * CPU time of one call, with or without libiez-mpi preloaded.
 *
 *   iez-bench-mpicalls FILE CALL SIZE COUNT
 *
 * Every rank opens FILE (created) on MPI_COMM_WORLD, makes COUNT calls of CALL (write_at,
 * write, write_at_all, write_all, read_at, read, read_at_all, read_all) of SIZE bytes each, to
 * its own block of the file (its SIZE x 64 bytes, cycled: the page cache holds it), after 1/8 as
 * many untimed ones. Prints, per rank: NANOSECONDS-PER-CALL CPU-NANOSECONDS-PER-CALL, the CPU of
 * the calling thread (user and system), so other processes on the machine do not count. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SPAN 64 /* calls per cycle over the rank's block */

static double ns(clockid_t clock)
{
    struct timespec t;
    clock_gettime(clock, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static const char *const calls[] = {"write_at", "write_at_all", "read_at", "read_at_all",
                                    "write", "write_all", "read", "read_all"};

/* count calls number `call` of calls[]; the individual pointer goes back to base every SPAN */
static int loop(MPI_File fh, int call, char *buf, int size, long count, MPI_Offset base)
{
    MPI_Status st;
    for (long i = 0; i < count; i++) {
        MPI_Offset off = base + (MPI_Offset)(i % SPAN) * size;
        if (call >= 4 && i % SPAN == 0)
            MPI_File_seek(fh, base, MPI_SEEK_SET);
        int rc;
        switch (call) {
        case 0: rc = MPI_File_write_at(fh, off, buf, size, MPI_BYTE, &st); break;
        case 1: rc = MPI_File_write_at_all(fh, off, buf, size, MPI_BYTE, &st); break;
        case 2: rc = MPI_File_read_at(fh, off, buf, size, MPI_BYTE, &st); break;
        case 3: rc = MPI_File_read_at_all(fh, off, buf, size, MPI_BYTE, &st); break;
        case 4: rc = MPI_File_write(fh, buf, size, MPI_BYTE, &st); break;
        case 5: rc = MPI_File_write_all(fh, buf, size, MPI_BYTE, &st); break;
        case 6: rc = MPI_File_read(fh, buf, size, MPI_BYTE, &st); break;
        default: rc = MPI_File_read_all(fh, buf, size, MPI_BYTE, &st); break;
        }
        if (rc != MPI_SUCCESS)
            return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    if (argc != 5) {
        fprintf(stderr, "usage: iez-bench-mpicalls FILE CALL SIZE COUNT\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    int rank, size = atoi(argv[3]), call = 0;
    while (call < 8 && strcmp(argv[2], calls[call]))
        call++;
    long count = atol(argv[4]);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    char *buf = calloc(1, (size_t)size);
    MPI_File fh;
    if (!buf || size < 1 || count < 1 || call == 8 ||
        MPI_File_open(MPI_COMM_WORLD, argv[1], MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh) != MPI_SUCCESS) {
        fprintf(stderr, "iez-bench-mpicalls: cannot open %s\n", argv[1]);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Offset base = (MPI_Offset)rank * size * SPAN;
    /* the block exists before any read of it, and the first calls' costs stay out */
    if (loop(fh, 0, buf, size, SPAN, base) || loop(fh, call, buf, size, count / 8 + 1, base)) {
        fprintf(stderr, "iez-bench-mpicalls: %s failed\n", argv[2]);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = ns(CLOCK_MONOTONIC), c0 = ns(CLOCK_THREAD_CPUTIME_ID);
    int bad = loop(fh, call, buf, size, count, base);
    double c1 = ns(CLOCK_THREAD_CPUTIME_ID), t1 = ns(CLOCK_MONOTONIC);
    if (bad) {
        fprintf(stderr, "iez-bench-mpicalls: %s failed\n", argv[2]);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    printf("%.1f %.1f\n", (t1 - t0) / (double)count, (c1 - c0) / (double)count);
    MPI_File_close(&fh);
    MPI_Finalize();
    return 0;
}

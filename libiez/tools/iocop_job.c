/* A job for the IO-Cop tests (tests/test_iocop_libiez.py), run with libiez preloaded; its
 * iez_io_begin/iez_io_end are the preloaded library's (weak here: without libiez it says so).
 *
 *   iez-test-iocop[-mpi] phase N HOLD_MS     N phases: iez_io_begin("ckpt"), hold, iez_io_end()
 *   iez-test-iocop files FILE N HOLD_MS      N times: open FILE, write, hold, close
 *   iez-test-iocop-mpi run HOLD_MS           MPI_Init, hold, MPI_Finalize (coarse)
 *   iez-test-iocop-mpi fine FILE N           N MPI_File_write_at calls of 4 KiB per rank
 *   iez-test-iocop-mpi mpifiles FILE N HOLD_MS COMPUTE_MS
 *                                            N times: MPI_File_open FILE.I on MPI_COMM_WORLD, write,
 *                                            hold, close; then "compute", writing FILE.self.RANK
 *                                            on MPI_COMM_SELF (file mode: no token for that one)
 * Prints one line per event: EVENT <TAB> RANK <TAB> VALUE <TAB> WALL-CLOCK SECONDS. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "iez.h"
#ifdef IEZ_JOB_MPI
#include <mpi.h>
#endif

#pragma weak iez_io_begin
#pragma weak iez_io_end

static int rank;

static void event(const char *what, long value)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    printf("%s\t%d\t%ld\t%.6f\n", what, rank, value, t.tv_sec + t.tv_nsec / 1e9);
    fflush(stdout);
}

static void hold(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) && errno == EINTR)
        ;
}

int main(int argc, char **argv)
{
    if (!iez_io_begin || !iez_io_end) {
        fprintf(stderr, "iez-test-iocop: error: libiez is not loaded (LD_PRELOAD=libiez.so)\n");
        return 1;
    }
    if (argc < 3) {
        fprintf(stderr, "iez-test-iocop: error: usage: phase N HOLD_MS | files FILE N HOLD_MS | run HOLD_MS | "
                        "fine FILE N | mpifiles FILE N HOLD_MS COMPUTE_MS\n");
        return 2;
    }
#ifdef IEZ_JOB_MPI
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    event("init", 0);
#endif
    const char *cmd = argv[1];
    if (!strcmp(cmd, "phase") && argc == 4) {
        for (int i = 0; i < atoi(argv[2]); i++) {
            event("begin", iez_io_begin("ckpt"));
            hold(atol(argv[3]));
            event("held", 0); /* the phase's I/O is over: before the token goes */
            event("end", iez_io_end());
        }
    } else if (!strcmp(cmd, "files") && argc == 5) {
        char buf[4096];
        memset(buf, 'x', sizeof buf);
        for (int i = 0; i < atoi(argv[3]); i++) {
            int fd = open(argv[2], O_WRONLY | O_CREAT | O_APPEND, 0644);
            if (fd < 0 || write(fd, buf, sizeof buf) != (ssize_t)sizeof buf) {
                perror(argv[2]);
                return 1;
            }
            event("open", fd);
            hold(atol(argv[4]));
            event("close", close(fd));
        }
    } else if (!strcmp(cmd, "run") && argc == 3) {
        hold(atol(argv[2]));
#ifdef IEZ_JOB_MPI
    } else if (!strcmp(cmd, "fine") && argc == 4) {
        MPI_File fh;
        char buf[4096];
        memset(buf, 'x', sizeof buf);
        if (MPI_File_open(MPI_COMM_WORLD, argv[2], MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL, &fh))
            return 1;
        int n = atoi(argv[3]);
        for (int i = 0; i < n; i++)
            MPI_File_write_at(fh, ((MPI_Offset)i * 64 + rank) * (MPI_Offset)sizeof buf, buf, sizeof buf, MPI_BYTE,
                              MPI_STATUS_IGNORE);
        MPI_File_close(&fh);
        event("written", n);
    } else if (!strcmp(cmd, "mpifiles") && argc == 6) {
        char buf[4096], name[4096];
        memset(buf, 'x', sizeof buf);
        for (int i = 0; i < atoi(argv[3]); i++) {
            MPI_File fh;
            snprintf(name, sizeof name, "%s.%d", argv[2], i);
            if (MPI_File_open(MPI_COMM_WORLD, name, MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL, &fh) ||
                MPI_File_write_at(fh, (MPI_Offset)rank * (MPI_Offset)sizeof buf, buf, sizeof buf, MPI_BYTE,
                                  MPI_STATUS_IGNORE))
                return 1;
            event("open", i);
            hold(atol(argv[4]));
            event("close", MPI_File_close(&fh));
            snprintf(name, sizeof name, "%s.self.%d", argv[2], rank);
            if (MPI_File_open(MPI_COMM_SELF, name, MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL, &fh) ||
                MPI_File_write_at(fh, 0, buf, sizeof buf, MPI_BYTE, MPI_STATUS_IGNORE) || MPI_File_close(&fh))
                return 1;
            hold(atol(argv[5]));
        }
#endif
    } else {
        fprintf(stderr, "iez-test-iocop: error: unknown command %s\n", cmd);
        return 2;
    }
#ifdef IEZ_JOB_MPI
    event("finalize", 0);
    MPI_Finalize();
#endif
    event("exit", 0);
    return 0;
}

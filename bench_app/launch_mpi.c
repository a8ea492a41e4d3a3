/* The MPI launcher: under mpiexec (or srun, or Open MPI's mpirun) the ranks are MPI's. Each
 * parses the options (only rank 0 says what is wrong), runs its part with MPI_Barrier for the
 * barriers, and the results are gathered to rank 0, which reports as the fork launcher does. A
 * rank that fails prints its error as one line and aborts the job, as IOR does: the others may
 * be waiting in a collective call for it. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "bench.h"

static int mpi_barrier(void) { return MPI_Barrier(MPI_COMM_WORLD) == MPI_SUCCESS ? 0 : -1; }

int bench_mpi_main(int argc, char **argv)
{
    int rank = 0, size = 1;
    if (MPI_Init(&argc, &argv) != MPI_SUCCESS) {
        fprintf(stderr, "iez-bench: error: MPI_Init failed\n");
        return BENCH_EXIT_IO;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    struct bench_params p;
    int child, up, down;
    int rc = bench_parse(argc, argv, &p, &child, &up, &down, size, rank != 0);
    if (rc) {
        MPI_Finalize();
        return rc > 0 ? 0 : BENCH_EXIT_USAGE;
    }
    p.launcher = "mpi";
    if (p.api->configure)
        p.api->configure(&p);
    struct bench_comm comm = {.rank = rank, .size = size, .barrier = mpi_barrier};
    struct bench_result mine = {.rank = rank};
    if ((p.workload == BENCH_IOR ? ior_run : hacc_run)(&p, &comm, &mine)) {
        fprintf(stderr, "iez-bench: error: rank %d: %s\n", rank, bench_error());
        fflush(stderr);
        /* the launcher forwards our stderr; the abort tears that down at once, line or not */
        nanosleep(&(struct timespec){0, 200000000}, NULL);
        MPI_Abort(MPI_COMM_WORLD, BENCH_EXIT_IO);
    }
    struct bench_result *all = rank == 0 ? calloc((size_t)size, sizeof *all) : NULL;
    if (rank == 0 && !all) {
        fprintf(stderr, "iez-bench: error: cannot allocate the results of %d ranks\n", size);
        fflush(stderr);
        MPI_Abort(MPI_COMM_WORLD, BENCH_EXIT_IO);
    }
    MPI_Gather(&mine, (int)sizeof mine, MPI_BYTE, all, (int)sizeof mine, MPI_BYTE, 0, MPI_COMM_WORLD);
    rc = rank == 0 ? bench_report(&p, all, size) : 0;
    free(all);
    MPI_Finalize();
    return rc;
}

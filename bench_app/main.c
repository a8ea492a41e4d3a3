/* iez-bench: the workload program iez's demo, tests and benchmarks run as the real
 * application (docs/iez-bench.md). Without --fork-rank this process is the launcher; with it,
 * one rank the launcher started. */
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"

/* Started as one of several processes by an MPI launcher: each would run the whole job on the
 * same files. This build has no MPI, so say so instead. */
static const char *mpi_launched(void)
{
    static const char *const sizes[] = {"PMI_SIZE", "OMPI_COMM_WORLD_SIZE"};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        const char *v = getenv(sizes[i]);
        if (v && atoi(v) > 1)
            return sizes[i];
    }
    return NULL;
}

int main(int argc, char **argv)
{
    struct bench_params p;
    int rank, up, down;
    int rc = bench_parse(argc, argv, &p, &rank, &up, &down);
    if (rc)
        return rc > 0 ? 0 : BENCH_EXIT_USAGE;
    if (rank >= 0)
        return bench_child(&p, rank, up, down);
    const char *launcher = mpi_launched();
    if (launcher) {
        fprintf(stderr, "iez-bench: error: started by an MPI launcher (%s=%s) but this build has no MPI: "
                "run one iez-bench with -n RANKS instead\n", launcher, getenv(launcher));
        return BENCH_EXIT_USAGE;
    }
    return bench_launch(&p, argv);
}

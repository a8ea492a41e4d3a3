/* iez-bench: the workload program iez's demo, tests and benchmarks run as the real
 * application (docs/iez-bench.md). Without --fork-rank this process is the launcher; with it,
 * one rank the launcher started. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

/* Started as one of several processes of an MPI launcher that this process cannot join (this
 * build has no MPI, or no PMI connection came with the variables): each would run the whole
 * job on the same files, so say so instead. */
static const char *several_ranks(void)
{
    static const char *const sizes[] = {"PMI_SIZE", "OMPI_COMM_WORLD_SIZE"};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        const char *v = getenv(sizes[i]);
        if (v && atoi(v) > 1)
            return sizes[i];
    }
    return NULL;
}

const char *bench_mpi_launched(void)
{
    static const char *const vars[] = {"PMI_FD", "PMI_PORT", "PMIX_RANK", "OMPI_COMM_WORLD_SIZE"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++)
        if (getenv(vars[i]))
            return vars[i];
    return NULL;
}

static int forked_rank(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strncmp(argv[i], "--fork-rank", 11))
            return 1;
    return 0;
}

int main(int argc, char **argv)
{
#ifdef BENCH_HAVE_MPI
    if (!forked_rank(argc, argv) && bench_mpi_launched())
        return bench_mpi_main(argc, argv);
#else
    (void)forked_rank;
#endif
    struct bench_params p;
    int rank, up, down;
    int rc = bench_parse(argc, argv, &p, &rank, &up, &down, 0, 0);
    if (rc)
        return rc > 0 ? 0 : BENCH_EXIT_USAGE;
    if (rank >= 0)
        return bench_child(&p, rank, up, down);
    const char *launcher = several_ranks();
    if (launcher) {
        fprintf(stderr, "iez-bench: error: started by an MPI launcher (%s=%s) but this build has no MPI%s: "
                "run one iez-bench with -n RANKS instead\n", launcher, getenv(launcher),
#ifdef BENCH_HAVE_MPI
                " connection to it (no PMI_FD, PMI_PORT or PMIX_RANK)"
#else
                ""
#endif
        );
        return BENCH_EXIT_USAGE;
    }
    return bench_launch(&p, argv);
}

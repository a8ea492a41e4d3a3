/* The backends this build has, chosen with -a/--api: MPI-IO and HDF5 when CMake found MPI and
 * parallel HDF5 (each in its own api_<name>.c). */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "bench.h"

static const struct bench_api *const apis[] = {
    &bench_posix_api,
#ifdef BENCH_HAVE_MPI
    &bench_mpiio_api,
#endif
#ifdef BENCH_HAVE_HDF5
    &bench_hdf5_api,
#endif
};

const struct bench_api *bench_api_find(const char *name)
{
    for (size_t i = 0; i < sizeof apis / sizeof *apis; i++)
        if (!strcasecmp(apis[i]->name, name))
            return apis[i];
    return NULL;
}

const char *bench_api_names(void)
{
    static char names[64];
    if (!names[0])
        for (size_t i = 0; i < sizeof apis / sizeof *apis; i++)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", i ? ", " : "", apis[i]->name);
    return names;
}

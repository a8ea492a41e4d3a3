/* The backends this build has, chosen with -a/--api. MPI-IO and HDF5 add their tables here
 * (each in its own api_<name>.c, built when CMake finds the library). */
#include <strings.h>

#include "bench.h"

static const struct bench_api *const apis[] = {&bench_posix_api};

const struct bench_api *bench_api_find(const char *name)
{
    for (size_t i = 0; i < sizeof apis / sizeof *apis; i++)
        if (!strcasecmp(apis[i]->name, name))
            return apis[i];
    return NULL;
}

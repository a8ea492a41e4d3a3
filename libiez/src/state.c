#include "state.h"
#include "hot.h"

#include <time.h>

struct iez_config iez_cfg;
int iez_tracing;
pid_t iez_pid;
unsigned iez_gen;
int iez_fork_single;
int iez_threads_mpi_own;
int iez_mpi_starting;
int iez_cancel_seen;
__thread int iez_busy __attribute__((tls_model("initial-exec")));

IEZ_HOT uint64_t iez_now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* Lifecycle: the constructor resolves the real functions and reads the configuration; fork
 * handlers give a child its own trace; the destructor (and _exit) finish the trace. */
#include "core.h"

#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include "access.h"
#include "config.h"
#include "iolog.h"
#include "log.h"
#include "real.h"
#include "open.h"
#include "trace.h"

struct iez_config iez_cfg;
int iez_tracing;
pid_t iez_pid;
unsigned iez_gen;
int iez_fork_single;
__thread int iez_busy __attribute__((tls_model("initial-exec")));

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int inited;

static void fork_prepare(void) { iez_trace_lock(); }
static void fork_parent(void)
{
    iez_trace_forked();
    iez_trace_unlock();
}
static void fork_child(void)
{
    iez_pid = getpid();
    iez_gen++;
    iez_fork_single = 1;
    iez_log_forget();
    iez_access_forked();
    iez_trace_forked();
    iez_trace_fork_child();
}

static void init_once(void)
{
    int entered = iez_enter();
    iez_config_load(&iez_cfg);
    iez_pid = getpid();
    iez_tracing = iez_cfg.trace && iez_cfg.trace_dir[0];
    if (iez_cfg.trace && !iez_cfg.trace_dir[0])
        iez_log_once(IEZ_LOG_CONFIG, "tracing asked for but IEZ_TRACE_DIR is not set: no trace");
    iez_iolog_init();
    iez_access_init();
    pthread_atfork(fork_prepare, fork_parent, fork_child);
    __atomic_store_n(&inited, 1, __ATOMIC_RELEASE);
    if (entered)
        iez_leave();
}

void iez_init(void)
{
    if (!__atomic_load_n(&inited, __ATOMIC_ACQUIRE))
        pthread_once(&once, init_once);
}

int iez_owner(void) { return getpid() == iez_pid; }

uint64_t iez_now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

void iez_fini(void)
{
    if (!__atomic_load_n(&inited, __ATOMIC_ACQUIRE) || !iez_owner())
        return;
    int entered = iez_enter();
    iez_access_fini();
    iez_trace_fini();
    iez_iolog_fini();
    if (entered)
        iez_leave();
}

__attribute__((constructor)) static void iez_constructor(void)
{
    iez_real_resolve();
    iez_init();
    if (iez_cfg.trace || iez_cfg.place)
        iez_config_export_run();
    iez_open_inherited();
}

__attribute__((destructor)) static void iez_destructor(void) { iez_fini(); }

/* Only to know that counters now need atomic updates (iez_multithreaded). */
IEZ_EXPORT int pthread_create(pthread_t *t, const pthread_attr_t *attr, void *(*start)(void *), void *arg)
{
    __atomic_store_n(&iez_fork_single, 0, __ATOMIC_SEQ_CST);
    return IEZ_REAL(pthread_create)(t, attr, start, arg);
}

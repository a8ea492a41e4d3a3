/* Lifecycle: the constructor resolves the real functions and reads the configuration, then the
 * modules start; fork handlers give a child its own state; the destructor (and _exit) finish
 * them. core.c names no module but in the table below. */
#include "core.h"
#include "hot.h"

#include <errno.h>
#include <pthread.h>
#include <unistd.h>

#include "config.h"
#include "log.h"
#include "module.h"
#include "real.h"

/* The order of every walk (fini: reversed): the log first, so that any module may report;
 * the trace after the I/O event log it feeds. */
static const struct iez_module *const modules[] = {
    &iez_log_module, &iez_iolog_module, &iez_trace_module, &iez_access_module,
};
#define NMODULES (sizeof modules / sizeof *modules)

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int inited;

static void fork_prepare(void)
{
    for (size_t i = 0; i < NMODULES; i++)
        if (modules[i]->fork_prepare)
            modules[i]->fork_prepare();
}

static void fork_parent(void)
{
    for (size_t i = 0; i < NMODULES; i++)
        if (modules[i]->fork_parent)
            modules[i]->fork_parent();
}

static void fork_child(void)
{
    iez_pid = getpid();
    iez_gen++;
    iez_fork_single = 1;
    for (size_t i = 0; i < NMODULES; i++)
        if (modules[i]->fork_child)
            modules[i]->fork_child();
}

static void init_once(void)
{
    int entered = iez_enter(), saved = errno;
    iez_config_load(&iez_cfg);
    iez_pid = getpid();
    iez_tracing = iez_cfg.trace && iez_cfg.trace_dir[0];
    if (iez_cfg.trace && !iez_cfg.trace_dir[0])
        iez_log_once(IEZ_LOG_CONFIG, "tracing asked for but IEZ_TRACE_DIR is not set: no trace");
    for (size_t i = 0; i < NMODULES; i++)
        if (modules[i]->init)
            modules[i]->init();
    pthread_atfork(fork_prepare, fork_parent, fork_child);
    __atomic_store_n(&inited, 1, __ATOMIC_RELEASE);
    errno = saved;
    if (entered)
        iez_leave();
}

IEZ_HOT void iez_init(void)
{
    if (!__atomic_load_n(&inited, __ATOMIC_ACQUIRE) && !iez_busy)
        pthread_once(&once, init_once);
}

void iez_fini(void)
{
    if (!__atomic_load_n(&inited, __ATOMIC_ACQUIRE) || !iez_owner())
        return;
    int entered = iez_enter();
    for (size_t i = NMODULES; i-- > 0;)
        if (modules[i]->fini)
            modules[i]->fini();
    if (entered)
        iez_leave();
}

__attribute__((constructor)) static void iez_constructor(void)
{
    iez_real_resolve();
    iez_init();
    if (iez_cfg.trace || iez_cfg.place)
        iez_config_export_run();
}

__attribute__((destructor)) static void iez_destructor(void) { iez_fini(); }

/* Only to know that counters now need atomic updates (iez_multithreaded): before the thread
 * runs, so its first write sees it. */
static void thread_created(void)
{
    if (!__atomic_load_n(&iez_mpi_starting, __ATOMIC_RELAXED))
        __atomic_store_n(&iez_threads_mpi_own, 0, __ATOMIC_SEQ_CST);
    __atomic_store_n(&iez_fork_single, 0, __ATOMIC_SEQ_CST);
}

IEZ_EXPORT int pthread_create(pthread_t *t, const pthread_attr_t *attr, void *(*start)(void *), void *arg)
{
    thread_created();
    return IEZ_REAL(pthread_create)(t, attr, start, arg);
}

/* Only to know that a thread may be cancelled: the write wrappers then leave the system call to
 * libc, whose cancellation point it is (posix.c). */
IEZ_EXPORT int pthread_cancel(pthread_t t)
{
    __atomic_store_n(&iez_cancel_seen, 1, __ATOMIC_SEQ_CST);
    return IEZ_REAL(pthread_cancel)(t);
}

/* C11's threads: glibc's thrd_create does not go through pthread_create's symbol */
IEZ_EXPORT int thrd_create(thrd_t *t, thrd_start_t start, void *arg)
{
    thread_created();
    return IEZ_REAL(thrd_create) ? IEZ_REAL(thrd_create)(t, start, arg) : thrd_error;
}

/* SIGEV_THREAD: glibc runs each notification in a thread it creates inside libc, not through
 * pthread_create's symbol, and that thread runs the application's function */
static void notify_thread(const struct sigevent *ev)
{
    if (ev && ev->sigev_notify == SIGEV_THREAD)
        thread_created();
}

IEZ_EXPORT int timer_create(clockid_t clock, struct sigevent *ev, timer_t *t)
{
    notify_thread(ev);
    if (!IEZ_REAL(timer_create))
        return errno = ENOSYS, -1;
    return IEZ_REAL(timer_create)(clock, ev, t);
}

IEZ_EXPORT int mq_notify(mqd_t q, const struct sigevent *ev)
{
    notify_thread(ev);
    if (!IEZ_REAL(mq_notify))
        return errno = ENOSYS, -1;
    return IEZ_REAL(mq_notify)(q, ev);
}

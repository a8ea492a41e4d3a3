/* libiez's global state: the configuration and what every module reads of this process (who
 * owns the state, its fork generation, whether it is traced) and the per-thread recursion guard
 * that keeps libiez's own work out of its wrappers. A leaf: it depends on no other part of
 * libiez, so every part may read it (core.c fills it in, docs/libiez.md "Inside libiez"). */
#ifndef IEZ_STATE_H
#define IEZ_STATE_H

#include <limits.h>
#include <stdint.h>
#include <sys/single_threaded.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

#define IEZ_EXPORT __attribute__((visibility("default")))
#define IEZ_LIKELY(x) __builtin_expect(!!(x), 1)
#define IEZ_UNLIKELY(x) __builtin_expect(!!(x), 0)

enum iez_api { IEZ_API_POSIX = 0, IEZ_API_STDIO = 1, IEZ_API_MPIIO = 2, IEZ_API_HDF5 = 3 };

/* What every open reads first, then the names: the create path touches as few of this
 * struct's lines and pages as it can (each is cold after the process did other work). */
struct iez_config {
    int trace, place;            /* IEZ_MODE */
    int rank;
    /* an MPI process: libiez-mpi's MPI_Init sets it before MPI starts, the environment of a rank
     * an MPI launcher started (PMI_RANK, PMIX_RANK, OMPI_COMM_WORLD_RANK) at load (open.h) */
    int mpi_process;
    int app_given;               /* app came from IEZ_APP */
    size_t emu_fs_len, emu_fs_real_len; /* of emu_fs and emu_fs_real below */
    char trace_dir[PATH_MAX];    /* "" = no tracing */
    /* IEZ_EMULATED: "<DIR>/fs/" as given (made absolute) and resolved, and the MDS socket */
    char emu_fs[PATH_MAX], emu_fs_real[PATH_MAX], emu_run[PATH_MAX];
    char app[128], run[128], host[64];
    char program[128];           /* this process's program name (app: IEZ_APP, else this) */
    char job_id[64], array_task[32]; /* the batch system's, "" outside a job */
    char plan[PATH_MAX];         /* "" = no plan */
    char log[PATH_MAX];          /* "" = silent; "-" = stderr */
    char iolog[PATH_MAX];        /* IEZ_IOLOG: the I/O event log directory; "" = none */
    char nid[64];                /* IEZ_NID: the client NID of I/O events; "" = this host's */
};

extern struct iez_config iez_cfg;
extern int iez_tracing;          /* trace mode with a trace directory: the hot-path test */
extern pid_t iez_pid;            /* the process libiez's state belongs to */
extern unsigned iez_gen;         /* bumped in each fork child: records of the parent are not ours */
extern int iez_fork_single;      /* a fork child that has not created a thread (yet) */
/* The other threads are MPI's own, started inside MPI_Init of a process that had none (UCX's
 * async thread, progress threads): they make no I/O calls on the application's files. Cleared
 * by the next thread created elsewhere. */
extern int iez_threads_mpi_own;
extern int iez_mpi_starting;     /* inside MPI_Init: threads created now are MPI's own */
extern int iez_cancel_seen;      /* pthread_cancel was called: a thread may be cancelled */

/* Whether another thread may update the same counters: glibc's flag says whether a thread was
 * ever created, but stays false in a fork child, where only the forking thread lives on; MPI's
 * own threads do not count (under MPICH with UCX every rank has one: each write would pay two
 * locked instructions for nothing). */
static inline int iez_multithreaded(void)
{
    return !__libc_single_threaded && !iez_fork_single && !__atomic_load_n(&iez_threads_mpi_own, __ATOMIC_RELAXED);
}

/* Whether creates go through placement: IEZ_MODE place, or the emulated cluster, whose MDS sees
 * every create (trace mode too), as a real MDS lays out every file. */
static inline int iez_placing(void) { return iez_cfg.place || (iez_cfg.trace && iez_cfg.emu_fs_len); }

/* Not a vfork child (or a child made by a raw clone) sharing the parent's memory: asked of the
 * kernel each time, since no wrapper sees a raw clone and nothing in user space tells such a
 * child from its parent (docs/libiez.md "Performance"). The system call inline: glibc's
 * getpid and a function of ours around it would add two returns to frames made before the
 * call, each mispredicted after a system call here (the kernel's "Safe RET"). */
static inline int iez_owner(void)
{
#if defined(__x86_64__)
    long pid;
    __asm__ volatile("syscall" : "=a"(pid) : "0"((long)SYS_getpid) : "rcx", "r11");
    return pid == iez_pid;
#else
    return getpid() == iez_pid;
#endif
}
uint64_t iez_now_ns(void);       /* CLOCK_REALTIME */

/* initial-exec, as defined (state.c): in the declaration too, or every other file reads it through
 * a call of __tls_get_addr (a cold line of ld.so's code and of the thread's DTV at each open) */
extern __thread int iez_busy __attribute__((tls_model("initial-exec")));
/* Enter libiez's own work; 0 if this thread is already inside it (then pass through). */
static inline int iez_enter(void)
{
    if (iez_busy)
        return 0;
    iez_busy = 1;
    return 1;
}
static inline void iez_leave(void) { iez_busy = 0; }

#endif

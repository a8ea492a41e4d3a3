/* MPI's start and end (libiez-mpi.so). MPI_Init and MPI_Init_thread give the process its real
 * rank, and the job its run id (rank 0's, so that every rank traces one run however the
 * library was preloaded). MPI_Finalize writes the job's trace as Darshan writes its log: every
 * rank's shard, finished as at exit, goes into one merged file by a collective MPI-IO write
 * (format: docs/trace-format.md, "Merged job trace"), and once that file is complete each rank
 * removes its own shard. If anything fails on the way, the shards stay as they are and nothing
 * is lost. Like Darshan, nothing a rank does after MPI_Finalize is traced. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "access.h"
#include "core.h"
#include "dynsym.h"
#include "log.h"
#include "open.h"
#include "pmpi.h"
#include "sysio.h"
#include "trace.h"

struct iez_pmpi_table iez_pmpi;
int iez_mpi_thread_multiple = 1; /* until MPI_Init or MPI_Init_thread says otherwise */

static pthread_mutex_t resolve_lock = PTHREAD_MUTEX_INITIALIZER;
static int resolved; /* 1 done, -1 failed */
static MPI_Comm job_comm = MPI_COMM_NULL; /* ours: a duplicate of MPI_COMM_WORLD that returns errors */

void *iez_pmpi_sym(const char *name, const void *caller) { return iez_dynsym(name, NULL, caller); }

int iez_pmpi_ready(const void *caller)
{
    int r = __atomic_load_n(&resolved, __ATOMIC_ACQUIRE);
    if (IEZ_LIKELY(r))
        return r > 0 ? 0 : -1;
    pthread_mutex_lock(&resolve_lock);
    if (!resolved) {
        struct iez_pmpi_table t;
        int ok = 1;
#define IEZ_PMPI_RESOLVE(name, ret, args) ok &= !!(*(void **)&t.name = iez_pmpi_sym(#name, caller));
        IEZ_PMPI_LIST(IEZ_PMPI_RESOLVE)
#undef IEZ_PMPI_RESOLVE
        if (ok)
            iez_pmpi = t;
        else
            iez_log_once(IEZ_LOG_CONFIG, "libiez-mpi is loaded but this process's MPI functions cannot be found");
        __atomic_store_n(&resolved, ok ? 1 : -1, __ATOMIC_RELEASE);
    }
    r = resolved;
    pthread_mutex_unlock(&resolve_lock);
    return r > 0 ? 0 : -1;
}

static int job_comm_ready(void)
{
    if (job_comm != MPI_COMM_NULL)
        return 0;
    if (iez_pmpi.PMPI_Comm_dup(MPI_COMM_WORLD, &job_comm) != MPI_SUCCESS) {
        job_comm = MPI_COMM_NULL;
        return -1;
    }
    iez_pmpi.PMPI_Comm_set_errhandler(job_comm, MPI_ERRORS_RETURN);
    return 0;
}

/* IO-Cop (access.c): rank 0 of MPI_COMM_WORLD is the job's local coordinator
 * (references: s004-controller). */
static int coord_bcast(long *token) { return iez_pmpi.PMPI_Bcast(token, 1, MPI_LONG, 0, job_comm) != MPI_SUCCESS; }
static int coord_barrier(void) { return iez_pmpi.PMPI_Barrier(job_comm) != MPI_SUCCESS; }
static struct iez_access_coord coord = {0, coord_bcast, coord_barrier};

/* coarse: the token from MPI_Init to MPI_Finalize. Collective, as below. */
static void access_started(void)
{
    if (job_comm_ready() || iez_pmpi.PMPI_Comm_rank(job_comm, &coord.rank) != MPI_SUCCESS) {
        iez_log_once(IEZ_LOG_ACCESS, "cannot duplicate MPI_COMM_WORLD: every rank is its own IO-Cop coordinator");
        return;
    }
    iez_access_set_coord(&coord);
    iez_access_enter(IEZ_ACCESS_JOB, "job");
}

/* After a successful MPI_Init: the real rank, rank 0's run id for every rank. Collective over
 * MPI_COMM_WORLD, entered by every rank that runs libiez (all of a job's, as they share its
 * environment). */
static void started(void)
{
    iez_init();
    if (iez_access_level)
        access_started();
    if (!iez_cfg.trace && !iez_cfg.place)
        return;
    int rank = 0;
    char run[sizeof iez_cfg.run];
    if (job_comm_ready() || iez_pmpi.PMPI_Comm_rank(job_comm, &rank) != MPI_SUCCESS) {
        iez_log_once(IEZ_LOG_CONFIG, "cannot duplicate MPI_COMM_WORLD: ranks and run from the environment");
        return;
    }
    memcpy(run, iez_cfg.run, sizeof run);
    if (iez_pmpi.PMPI_Bcast(run, (int)sizeof run, MPI_CHAR, 0, job_comm) != MPI_SUCCESS)
        memcpy(run, iez_cfg.run, sizeof run);
    run[sizeof run - 1] = 0;
    iez_trace_set_ident(rank, run);
}

/* Around PMPI_Init: the threads MPI starts in it are its own when the process had no other
 * (iez_multithreaded); a thread created by the application later clears it (core.c). */
static int starting(void)
{
    int alone = __libc_single_threaded;
    __atomic_store_n(&iez_mpi_starting, 1, __ATOMIC_SEQ_CST);
    return alone;
}

static void threads_started(int alone, int rc)
{
    __atomic_store_n(&iez_mpi_starting, 0, __ATOMIC_SEQ_CST);
    if (alone && rc == MPI_SUCCESS)
        __atomic_store_n(&iez_threads_mpi_own, 1, __ATOMIC_SEQ_CST);
}

IEZ_EXPORT int MPI_Init(int *argc, char ***argv)
{
    if (iez_pmpi_ready(__builtin_return_address(0)))
        return MPI_ERR_INTERN;
    iez_cfg.mpi_process = 1;
    int alone = starting();
    int rc = iez_pmpi.PMPI_Init(argc, argv);
    threads_started(alone, rc);
    if (rc == MPI_SUCCESS) {
        iez_mpi_thread_multiple = 0; /* MPI_Init is MPI_Init_thread(MPI_THREAD_SINGLE) */
        started();
    }
    return rc;
}

IEZ_EXPORT int MPI_Init_thread(int *argc, char ***argv, int required, int *provided)
{
    if (iez_pmpi_ready(__builtin_return_address(0)))
        return MPI_ERR_INTERN;
    iez_cfg.mpi_process = 1;
    int alone = starting();
    int rc = iez_pmpi.PMPI_Init_thread(argc, argv, required, provided);
    threads_started(alone, rc);
    if (rc == MPI_SUCCESS) {
        iez_mpi_thread_multiple = !provided || *provided >= MPI_THREAD_MULTIPLE;
        started();
    }
    return rc;
}

/* ---- the merged job trace ------------------------------------------------------------------ */

#define JOB_MAGIC "IEZJOBTR"
#define JOB_VERSION 1
#define JOB_HEADER 64
#define JOB_ENTRY 24

struct job_entry {                   /* what rank 0 gathers from every rank */
    uint64_t size;                   /* the shard's bytes; 0: none */
    int32_t rank;
    uint32_t crc;                    /* CRC-32 of them */
};
_Static_assert(sizeof(struct job_entry) == 16, "gathered as 16 bytes");

static void put32(unsigned char *p, uint32_t v) { memcpy(p, &v, 4); }
static void put64(unsigned char *p, uint64_t v) { memcpy(p, &v, 8); }

/* The header and index of the merged file (rank 0): n entries of those with a shard. */
static unsigned char *job_head(const struct job_entry *all, int ranks, uint32_t n, uint64_t *len)
{
    *len = JOB_HEADER + (uint64_t)JOB_ENTRY * n;
    unsigned char *h = calloc(1, *len);
    if (!h)
        return NULL;
    uint64_t at = (*len + 7) & ~(uint64_t)7;
    unsigned char *e = h + JOB_HEADER;
    for (int i = 0; i < ranks; i++) {
        if (!all[i].size)
            continue;
        put64(e, at);
        put64(e + 8, all[i].size);
        put32(e + 16, (uint32_t)all[i].rank);
        put32(e + 20, all[i].crc);
        e += JOB_ENTRY;
        at += (all[i].size + 7) & ~(uint64_t)7;
    }
    memcpy(h, JOB_MAGIC, 8);
    put32(h + 8, JOB_VERSION);
    put32(h + 12, JOB_HEADER);
    put32(h + 16, n);
    put32(h + 20, (uint32_t)ranks);
    put64(h + 24, iez_now_ns());
    put32(h + 32, iez_crc32(0, h + JOB_HEADER, (size_t)JOB_ENTRY * n));
    put32(h + 36, iez_crc32(0, h, 36));
    return h;
}

/* Rank 0: the final name, taken without replacing anything (iez.<host>.<pid>.<n>.job). */
static int publish(const char *tmp, char *out, size_t cap)
{
    for (int seq = 0; seq < 1000; seq++) {
        snprintf(out, cap, "%s/iez.%s.%d.%d.job", iez_cfg.trace_dir, iez_cfg.host, (int)getpid(), seq);
        if (syscall(SYS_renameat2, AT_FDCWD, tmp, AT_FDCWD, out, 1 /* RENAME_NOREPLACE */) == 0)
            return 0;
        if (errno != EEXIST)
            return -1;
    }
    return -1;
}

/* Rank 0: the merged file under a temporary name, created exclusively (never through a link)
 * in the trace directory, which only this user can change: MPI-IO then opens it by that name
 * without creating anything. 0, or -1. */
static int make_tmp(struct iez_own *tmp)
{
    char why[PATH_MAX + 200];
    if (iez_trusted_dir("the trace directory", iez_cfg.trace_dir, why, sizeof why)) {
        iez_log_once(IEZ_LOG_TRACE, "no merged job trace: %s", why);
        return -1;
    }
    int fd = -1;
    for (int seq = 0; fd < 0 && seq < 1000; seq++) {
        snprintf(tmp->path, sizeof tmp->path, "%s/.iez.%s.%d.%d.job.tmp", iez_cfg.trace_dir, iez_cfg.host,
                 (int)getpid(), seq);
        fd = iez_own_create(tmp, 0600);
        if (fd < 0 && errno != EEXIST)
            break;
    }
    if (fd < 0)
        return -1;
    iez_sys_close(fd);
    return 0;
}

/* Collective over job_comm. Returns 1 when the merged file holds this rank's shard. */
static int merge(const struct iez_own *shard, uint64_t size, int rank, int ranks)
{
    char *mine = NULL;
    struct job_entry me = {0, rank, 0};
    if (size && size <= INT_MAX && !iez_own_read(shard, (size_t)size, &mine))
        me = (struct job_entry){size, rank, iez_crc32(0, mine, size)};
    struct job_entry *all = rank == 0 ? calloc((size_t)ranks, sizeof *all) : NULL;
    uint64_t counts[2] = {me.size != 0, (me.size + 7) & ~(uint64_t)7}, before[2] = {0, 0}, total[2];
    int ok = (rank != 0 || all) &&
             iez_pmpi.PMPI_Gather(&me, (int)sizeof me, MPI_BYTE, all, (int)sizeof me, MPI_BYTE, 0, job_comm) == MPI_SUCCESS &&
             iez_pmpi.PMPI_Exscan(counts, before, 2, MPI_UINT64_T, MPI_SUM, job_comm) == MPI_SUCCESS &&
             iez_pmpi.PMPI_Allreduce(counts, total, 2, MPI_UINT64_T, MPI_SUM, job_comm) == MPI_SUCCESS;
    if (rank == 0)
        before[0] = before[1] = 0; /* MPI_Exscan leaves rank 0's undefined */
    struct iez_own tmp = {0}; /* rank 0's; its name for everyone ("": none could be made) */
    if (rank == 0 && ok && total[0] && make_tmp(&tmp))
        tmp.path[0] = 0;
    int all_ok = 0, renamed = 0;
    if (ok && total[0] && iez_pmpi.PMPI_Bcast(tmp.path, (int)sizeof tmp.path, MPI_CHAR, 0, job_comm) == MPI_SUCCESS &&
        tmp.path[0]) {
        uint64_t head_len = 0;
        unsigned char *head = rank == 0 && all ? job_head(all, ranks, (uint32_t)total[0], &head_len) : NULL;
        uint64_t at = ((JOB_HEADER + JOB_ENTRY * total[0] + 7) & ~(uint64_t)7) + before[1];
        MPI_File fh;
        int mine_ok = rank != 0 || head;
        if (iez_pmpi.PMPI_File_open(job_comm, tmp.path, MPI_MODE_WRONLY, MPI_INFO_NULL, &fh) == MPI_SUCCESS) {
            mine_ok &= iez_pmpi.PMPI_File_write_at_all(fh, 0, head, head ? (int)head_len : 0, MPI_BYTE,
                                                       MPI_STATUS_IGNORE) == MPI_SUCCESS;
            mine_ok &= iez_pmpi.PMPI_File_write_at_all(fh, (MPI_Offset)at, mine, me.size ? (int)me.size : 0, MPI_BYTE,
                                                       MPI_STATUS_IGNORE) == MPI_SUCCESS;
            mine_ok &= iez_pmpi.PMPI_File_close(&fh) == MPI_SUCCESS;
        } else {
            mine_ok = 0;
        }
        free(head);
        iez_pmpi.PMPI_Allreduce(&mine_ok, &all_ok, 1, MPI_INT, MPI_LAND, job_comm);
        char final[PATH_MAX];
        if (rank == 0) {
            int fd = all_ok ? iez_own_open(&tmp) : -1; /* still the file rank 0 made */
            if (fd >= 0)
                iez_sys_close(fd);
            renamed = fd >= 0 && !publish(tmp.path, final, sizeof final);
            if (!renamed)
                iez_own_unlink(&tmp);
            else
                iez_log("the job's trace is %s (%llu shards)", final, (unsigned long long)total[0]);
        }
        if (iez_pmpi.PMPI_Bcast(&renamed, 1, MPI_INT, 0, job_comm) != MPI_SUCCESS)
            renamed = 0;
    }
    if (ok && total[0] && !renamed)
        iez_log_once(IEZ_LOG_TRACE, "the job's merged trace could not be written in %s: the shards stay",
                     iez_cfg.trace_dir);
    free(all);
    free(mine);
    return renamed && me.size;
}

IEZ_EXPORT int MPI_Finalize(void)
{
    if (iez_pmpi_ready(__builtin_return_address(0)))
        return MPI_ERR_INTERN;
    if (iez_access_level && job_comm != MPI_COMM_NULL) {
        iez_access_exit(IEZ_ACCESS_JOB);
        iez_access_set_coord(NULL);
    }
    /* shards exist in place mode too (plan hits and misses): the same environment everywhere,
     * so every rank enters the collective merge or none does */
    if (iez_cfg.trace_dir[0] && (iez_cfg.trace || iez_cfg.place) && iez_owner() && !job_comm_ready() &&
        iez_enter()) {
        int rank = 0, ranks = 1;
        iez_pmpi.PMPI_Comm_rank(job_comm, &rank);
        iez_pmpi.PMPI_Comm_size(job_comm, &ranks);
        struct iez_own shard;
        uint64_t size = iez_trace_finish(&shard);
        if (merge(&shard, size, rank, ranks))
            iez_own_unlink(&shard);
        iez_leave();
    }
    if (job_comm != MPI_COMM_NULL)
        iez_pmpi.PMPI_Comm_free(&job_comm);
    return iez_pmpi.PMPI_Finalize();
}

/* The environment libiez reads, once (documented in docs/libiez.md):
 *   IEZ_MODE       trace | place | trace,place (default) | off
 *   IEZ_APP        application id (default: the program's name; the header keeps both)
 *   IEZ_RUN        run or job id (default: SLURM_JOB_ID, else the pid, exported to children)
 *   IEZ_TRACE_DIR  where each process writes its trace shard (unset: no tracing)
 *   IEZ_PLAN       the plan file (unset: no plan)
 *   IEZ_LOG        diagnostics: "stderr" (or "1", "/dev/stderr") or a file (unset: silent)
 *   IEZ_EMULATED   an emulated cluster DIR: paths under DIR/fs/ are on its Lustre
 *   IEZ_IOLOG      a directory for I/O event logs of reads and writes on the emulated cluster
 *   IEZ_NID        the client NID those events carry (%r: the rank); default: this host's
 *   IEZ_HOST       the node name of this process (trace header, {host}); default: the host's
 * The rank comes from PMI_RANK, PMIX_RANK, OMPI_COMM_WORLD_RANK, SLURM_PROCID or ALPS_APP_PE; the
 * job and array task ids of the trace header from the batch system's (IEZ_JOB_VARS, IEZ_ARRAY_VARS). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "config.h"
#include "log.h"
#include "path.h"
#include "plan.h"
#include "state.h"

static void copy(char *dst, size_t cap, const char *src)
{
    snprintf(dst, cap, "%s", src ? src : "");
}

/* An absolute, normalised form of a configured path (the application may chdir later). */
static int absolute(char *dst, size_t cap, const char *src)
{
    char cwd[PATH_MAX];
    if (!src || !*src) {
        dst[0] = 0;
        return 0;
    }
    if (src[0] != '/' && syscall(SYS_getcwd, cwd, sizeof cwd) < 0)
        return -1;
    return iez_path_normalize(cwd, src, dst, cap) < 0 ? -1 : 0;
}

static const char *const job_ids[] = {IEZ_JOB_VARS};
static const char *const array_tasks[] = {IEZ_ARRAY_VARS};

/* The first of names set and non-empty, cut to cap ("" if none) */
static void first_env(char *dst, size_t cap, const char *const *names, size_t n)
{
    dst[0] = 0;
    for (size_t i = 0; i < n && !dst[0]; i++)
        copy(dst, cap, getenv(names[i]));
}

static int parse_mode(const char *m, int *trace, int *place)
{
    *trace = *place = 0;
    if (!m || !*m) {
        *trace = *place = 1;
        return 0;
    }
    if (!strcmp(m, "off"))
        return 0;
    const char *p = m;
    while (*p) {
        size_t n = strcspn(p, ",");
        if (n == 5 && !strncmp(p, "trace", 5))
            *trace = 1;
        else if (n == 5 && !strncmp(p, "place", 5))
            *place = 1;
        else
            return -1;
        p += n;
        if (*p == ',')
            p++;
    }
    return 0;
}

void iez_config_load(struct iez_config *c)
{
    memset(c, 0, sizeof *c);
    const char *log = getenv("IEZ_LOG");
    /* /dev/stderr is a symbolic link, which a log file never follows: name it as what it is */
    if (log && (!strcmp(log, "stderr") || !strcmp(log, "1") || !strcmp(log, "/dev/stderr")))
        strcpy(c->log, "-");
    else if (log && *log && absolute(c->log, sizeof c->log, log))
        strcpy(c->log, "-"); /* a log path we cannot form still deserves its message */

    const char *mode = getenv("IEZ_MODE");
    if (parse_mode(mode, &c->trace, &c->place)) {
        c->trace = c->place = 0;
        iez_log_once(IEZ_LOG_CONFIG, "IEZ_MODE=%s is not trace, place, trace,place or off: libiez is off", mode);
        return;
    }
    extern char *program_invocation_short_name;
    copy(c->program, sizeof c->program, program_invocation_short_name);
    const char *app = getenv("IEZ_APP");
    c->app_given = app && *app;
    copy(c->app, sizeof c->app, c->app_given ? app : c->program);
    first_env(c->job_id, sizeof c->job_id, job_ids, sizeof job_ids / sizeof *job_ids);
    first_env(c->array_task, sizeof c->array_task, array_tasks, sizeof array_tasks / sizeof *array_tasks);
    const char *run = getenv("IEZ_RUN");
    if (!run || !*run)
        run = getenv("SLURM_JOB_ID");
    if (run && *run)
        copy(c->run, sizeof c->run, run);
    else
        snprintf(c->run, sizeof c->run, "%d", (int)getpid());

    static const char *ranks[] = {IEZ_RANK_VARS};
    for (size_t i = 0; i < sizeof ranks / sizeof *ranks; i++) {
        const char *r = getenv(ranks[i]);
        char *end;
        long v;
        if (r && *r && (errno = 0, v = strtol(r, &end, 10), !*end && !errno && v >= 0 && v <= INT32_MAX)) {
            c->rank = (int)v;
            break;
        }
    }
    /* A rank an MPI launcher started is an MPI process even with libiez.so alone preloaded: its
     * MPI's shared memory in /dev/shm is not the application's (open.h, iez_system_path). */
    if (getenv("PMI_RANK") || getenv("PMIX_RANK") || getenv("OMPI_COMM_WORLD_RANK"))
        c->mpi_process = 1;
    const char *nid = getenv("IEZ_NID");
    if (nid && strlen(nid) < sizeof c->nid && !strpbrk(nid, " \t\n"))
        copy(c->nid, sizeof c->nid, nid);
    else if (nid && *nid)
        iez_log_once(IEZ_LOG_CONFIG, "IEZ_NID=%s is not one word of at most %zu bytes: the host's NID", nid,
                     sizeof c->nid - 1);
    struct utsname u;
    const char *host = iez_host_env();
    if (host)
        copy(c->host, sizeof c->host, host);
    else if (uname(&u) == 0)
        copy(c->host, sizeof c->host, u.nodename);
    if (!host && getenv("IEZ_HOST") && *getenv("IEZ_HOST"))
        iez_log_once(IEZ_LOG_CONFIG, "IEZ_HOST is not 1 to 63 of [A-Za-z0-9._-]: the host's name");

    if (absolute(c->trace_dir, sizeof c->trace_dir, getenv("IEZ_TRACE_DIR")) ||
        absolute(c->plan, sizeof c->plan, getenv("IEZ_PLAN")) ||
        absolute(c->iolog, sizeof c->iolog, getenv("IEZ_IOLOG"))) {
        iez_log_once(IEZ_LOG_CONFIG, "IEZ_TRACE_DIR, IEZ_PLAN or IEZ_IOLOG is too long: libiez is off");
        c->trace = c->place = 0;
        return;
    }
    const char *emu = getenv("IEZ_EMULATED");
    char root[PATH_MAX], real[PATH_MAX];
    if (emu && *emu) {
        if (absolute(root, sizeof root - 8, emu)) {
            iez_log_once(IEZ_LOG_CONFIG, "IEZ_EMULATED is too long: no emulated cluster");
        } else {
            size_t n = strlen(root);
            const char *sep = n > 1 ? "/" : "";
            c->emu_fs_len = (size_t)snprintf(c->emu_fs, sizeof c->emu_fs, "%s%sfs/", root, sep);
            snprintf(c->emu_run, sizeof c->emu_run, "%s%srun", root, sep);
            /* applications may reach fs/ through the resolved path (getcwd returns it) */
            if (realpath(root, real) && strlen(real) + 5 < sizeof c->emu_fs_real)
                c->emu_fs_real_len = (size_t)snprintf(c->emu_fs_real, sizeof c->emu_fs_real, "%s%sfs/", real,
                                                      strlen(real) > 1 ? "/" : "");
            else
                iez_log_once(IEZ_LOG_CONFIG, "IEZ_EMULATED=%s: %s", emu, strerror(errno));
        }
    }
}

int iez_config_export_run(void)
{
    if (getenv("IEZ_RUN") || getenv("SLURM_JOB_ID"))
        return 0;
    return setenv("IEZ_RUN", iez_cfg.run, 0);
}

/* IO-Cop's client in libiez: the same semantics as src/iez/access/token_client.py, over iocop/iocop.c
 * (the line socket, no ZeroMQ inside an LD_PRELOAD library). The environment, read once:
 *   IEZ_ACCESS          off (default) | coarse | file | phase | fine
 *   IEZ_ACCESS_LINE     the controller's line socket HOST:PORT (default 127.0.0.1:5581)
 *   IEZ_ACCESS_APPID    default JOBID:NAME: IEZ_RUN, else SLURM_JOB_ID, else pid<PID>; IEZ_APP,
 *                       else the program
 *   IEZ_ACCESS_OSTS     the OST set declared at REGISTER
 *   IEZ_ACCESS_WAIT     seconds to wait for a controller that does not answer (default 10)
 *   IEZ_TOKEN_FILE, IEZ_TOKEN  the site token requests are signed with (read at the first connect;
 *                       none: unsigned, for a controller on --trusted-network)
 * Every failure is "proceed without a token", logged once (IEZ_LOG). */
#include "access.h"

#include <errno.h>
#include <pthread.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "iocop.h"
#include "log.h"
#include "module.h"
#include "state.h"
#include "sysio.h"

#define TRY_MS 1000         /* one attempt once the controller was found down (token_client.py TRY_TIMEOUT) */
#define FD_SLOTS 65536      /* descriptors file mode can count */

int iez_access_level;
int iez_access_files;

static int mpi_rank_env;    /* started as an MPI rank: POSIX triggers wait for libiez-mpi's MPI_Init */
static char addr[300], appid[160], reg_opts[600];
static int wait_ms = 10000;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER; /* the connection and the token */
static pthread_cond_t cv;
static struct iocop cl;
static int connected, registered, disabled;
static pid_t owner;
static pthread_t hb;
static int hb_on, hb_stop;

/* depth and the counted files; recursive: the first open and the last close enter and leave */
static pthread_mutex_t levels_mu = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
static int depth, coarse_taken, nfiles;
static long job_token;      /* the token the job holds (a non-zero rank: rank 0's, broadcast) */
static unsigned char files[FD_SLOTS / 8];
static const struct iez_access_coord *coord;

static const char *const mode_names[] = {"off", "coarse", "file", "phase", "fine"};

static long now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000L + t.tv_nsec / 1000000L;
}

static const char *user_name(void)
{
    static const char *vars[] = {"LOGNAME", "USER", "LNAME", "USERNAME"}; /* as getpass.getuser() */
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++)
        if (getenv(vars[i]) && *getenv(vars[i]))
            return getenv(vars[i]);
    struct passwd *pw = getpwuid(getuid());
    return pw ? pw->pw_name : "";
}

/* key=value for REGISTER, only a value the protocol can carry (no blanks or braces). */
static void add_opt(size_t *at, const char *key, const char *v)
{
    if (!v || !*v || strpbrk(v, " \t\n{}") || *at >= sizeof reg_opts)
        return;
    *at += (size_t)snprintf(reg_opts + *at, sizeof reg_opts - *at, "%s%s=%s", *at ? "\t" : "", key, v);
}

/* Read IEZ_ACCESS*. */
static void access_init(void)
{
    const char *mode = getenv("IEZ_ACCESS");
    int level = IEZ_ACCESS_NONE;
    for (int i = 1; mode && *mode && i < 5; i++)
        if (!strcmp(mode, mode_names[i]))
            level = i;
    if (mode && *mode && strcmp(mode, "off") && !level) {
        iez_log_once(IEZ_LOG_ACCESS, "IEZ_ACCESS=%s is not off, coarse, file, phase or fine: no access control", mode);
        return;
    }
    const char *w = getenv("IEZ_ACCESS_WAIT");
    if (w && *w) {
        char *end;
        double s = strtod(w, &end);
        if (*end || s < 0 || s > 86400)
            iez_log_once(IEZ_LOG_ACCESS, "IEZ_ACCESS_WAIT=%s is not a number of seconds: 10 s", w);
        else
            wait_ms = (int)(s * 1000);
    }
    const char *line = getenv("IEZ_ACCESS_LINE");
    snprintf(addr, sizeof addr, "%s", line && *line ? line : "127.0.0.1:5581");
    const char *id = getenv("IEZ_ACCESS_APPID");
    if (id && *id) {
        snprintf(appid, sizeof appid, "%s", id);
    } else {
        extern char *program_invocation_short_name;
        const char *run = getenv("IEZ_RUN"), *app = getenv("IEZ_APP");
        if (!run || !*run)
            run = getenv("SLURM_JOB_ID");
        char pid[32];
        snprintf(pid, sizeof pid, "pid%d", (int)getpid());
        snprintf(appid, sizeof appid, "%s:%s", run && *run ? run : pid,
                 app && *app ? app : program_invocation_short_name);
    }
    size_t at = 0;
    add_opt(&at, "user", user_name());
    add_opt(&at, "project", getenv("SLURM_JOB_ACCOUNT"));
    add_opt(&at, "osts", getenv("IEZ_ACCESS_OSTS"));
    mpi_rank_env = getenv("PMI_RANK") || getenv("PMIX_RANK") || getenv("OMPI_COMM_WORLD_RANK");
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&cv, &ca);
    pthread_condattr_destroy(&ca);
    iez_access_level = level;
    iez_access_files = level == IEZ_ACCESS_FILE || level == IEZ_ACCESS_JOB;
}

/* ---- the coordinator's side: one connection, registered once ------------------------------- */

static int transport(int rc)
{
    return rc == -ETIMEDOUT || rc == -ECONNREFUSED || rc == -ECONNRESET || rc == -EPIPE || rc == -ENOTCONN ||
           rc == -EHOSTUNREACH || rc == -ENETUNREACH || rc == -ECONNABORTED;
}

static int do_register(void)
{
    if (registered)
        return 0;
    if (!connected) {
        /* a refused connect is retried by the first request, for up to wait_ms */
        int rc = iocop_connect(&cl, addr, wait_ms);
        if (rc == -EINVAL)
            return rc;
        connected = 1;
        owner = getpid();
        char token[IOCOP_TOKEN_MAX + 1];
        rc = iocop_token_from_env(token, sizeof token, cl.error, sizeof cl.error);
        if (rc == 1)
            rc = iocop_set_token(&cl, token);
        memset(token, 0, sizeof token);
        if (rc < 0) {
            disabled = 1; /* a token that cannot be read does not get better: no token, no hang */
            return -EINVAL;
        }
    }
    int rc = iocop_register(&cl, appid, reg_opts);
    registered = rc == 0;
    return rc;
}

/* Register (again, if the controller forgot us: ENOENT) and ACQUIRE until granted: 1, or -errno. */
static int claim(const char *phase)
{
    int rc = do_register();
    if (!rc)
        rc = iocop_acquire_wait(&cl, phase, NULL);
    if (rc == -ENOENT) {
        registered = 0;
        if (!(rc = do_register()))
            rc = iocop_acquire_wait(&cl, phase, NULL);
    }
    return rc;
}

static void *beat(void *arg)
{
    (void)arg;
    iez_busy = 1; /* this thread's socket calls are libiez's own */
    pthread_mutex_lock(&mu);
    while (!hb_stop) {
        long due = now_ms() + cl.heartbeat_ms;
        struct timespec at = {due / 1000, (due % 1000) * 1000000L};
        while (!hb_stop && pthread_cond_timedwait(&cv, &mu, &at) != ETIMEDOUT)
            ;
        if (hb_stop)
            break;
        int rc = iocop_heartbeat(&cl);
        if (rc == -ESTALE || rc == -EPERM || rc == -ENOENT) {
            iez_log("iez access: token %ld of %s lost: %s", cl.token, appid, cl.error);
            break;
        }
    }
    pthread_mutex_unlock(&mu);
    return NULL;
}

static void stop_beats(void)
{
    pthread_mutex_lock(&mu);
    int on = hb_on;
    hb_stop = 1;
    hb_on = 0;
    pthread_cond_signal(&cv);
    pthread_mutex_unlock(&mu);
    if (on)
        pthread_join(hb, NULL);
}

/* The coordinator's ACQUIRE: the token, or 0 when the phase runs without one (logged once). */
static long acquire(const char *phase)
{
    pthread_mutex_lock(&mu);
    long token = 0;
    if (disabled) {
        pthread_mutex_unlock(&mu);
        return 0;
    }
    long t0 = now_ms();
    int rc = claim(phase);
    if (rc == 1) {
        cl.timeout_ms = wait_ms; /* the controller answers again: a full wait next time */
        token = cl.token;
        hb_stop = 0;
        hb_on = pthread_create(&hb, NULL, beat, NULL) == 0;
        if (!hb_on)
            iez_log_once(IEZ_LOG_ACCESS, "iez access: no heartbeat thread: token %ld may expire", token);
    } else if (transport(rc)) {
        cl.timeout_ms = TRY_MS; /* once per phase until it answers, never a hang */
        iez_log_once(IEZ_LOG_ACCESS_DOWN, "iez access: controller %s did not answer within %.3g s (%s): phase '%s' "
                     "of %s runs without a token", addr, (now_ms() - t0) / 1000.0, cl.error, phase, appid);
    } else {
        if (rc == -EINVAL && !registered)
            disabled = 1; /* a bad address or appID does not get better */
        iez_log_once(IEZ_LOG_ACCESS, "iez access: %s: phase '%s' of %s runs without a token", cl.error, phase, appid);
    }
    pthread_mutex_unlock(&mu);
    return token;
}

static void release(void)
{
    stop_beats();
    pthread_mutex_lock(&mu);
    if (cl.token) {
        long token = cl.token;
        int rc = iocop_release(&cl);
        if (rc == -ESTALE || rc == -EPERM)
            iez_log("iez access: token %ld of %s was revoked before its release: %s", token, appid, cl.error);
        else if (rc < 0)
            iez_log("iez access: the release of token %ld of %s failed (%s): its lease will run out", token, appid,
                    cl.error);
        cl.token = 0;
    }
    pthread_mutex_unlock(&mu);
}

/* ---- the job's side: every rank ------------------------------------------------------------- */

static long take(const char *phase)
{
    long t = 0;
    if (!coord || coord->rank == 0)
        t = acquire(phase);
    if (coord && coord->bcast(&t) && coord->rank != 0)
        t = 0;
    return t;
}

static void give(void)
{
    if (coord)
        coord->barrier();
    if (!coord || coord->rank == 0)
        release();
}

int iez_access_enter(int level, const char *phase)
{
    if (level != iez_access_level)
        return 0;
    int entered = iez_enter(), saved = errno;
    pthread_mutex_lock(&levels_mu);
    if (depth++ == 0)
        job_token = take(phase);
    int held = job_token != 0;
    pthread_mutex_unlock(&levels_mu);
    errno = saved;
    if (entered)
        iez_leave();
    return held;
}

int iez_access_exit(int level)
{
    if (level != iez_access_level)
        return 0;
    int entered = iez_enter(), saved = errno, gave = 0;
    pthread_mutex_lock(&levels_mu);
    if (depth > 0 && --depth == 0) {
        gave = job_token != 0;
        give();
        job_token = 0;
    }
    pthread_mutex_unlock(&levels_mu);
    errno = saved;
    if (entered)
        iez_leave();
    return gave;
}

void iez_access_set_coord(const struct iez_access_coord *c) { coord = c; }

/* ---- file mode, and coarse in a process without MPI ----------------------------------------- */

static int posix_triggers(void)
{
    if (!mpi_rank_env)
        return 1;
    iez_log_once(IEZ_LOG_ACCESS, "IEZ_ACCESS=%s in an MPI rank: POSIX opens take no token; libiez-mpi coordinates "
                 "the ranks at MPI_Init (coarse) and MPI_File_open on MPI_COMM_WORLD (file)",
                 mode_names[iez_access_level]);
    return 0;
}

void iez_access_opened(int fd)
{
    if (!iez_owner() || !posix_triggers())
        return;
    if (iez_access_level == IEZ_ACCESS_JOB) {
        if (!__atomic_exchange_n(&coarse_taken, 1, __ATOMIC_ACQ_REL))
            iez_access_enter(IEZ_ACCESS_JOB, "job"); /* released at exit */
        return;
    }
    if (fd < 0 || fd >= FD_SLOTS) {
        iez_log_once(IEZ_LOG_ACCESS, "iez access: descriptor %d is beyond the %d file mode counts: not counted", fd,
                     FD_SLOTS);
        return;
    }
    pthread_mutex_lock(&levels_mu);
    if (!(files[fd / 8] & (1 << fd % 8))) {
        files[fd / 8] |= (unsigned char)(1 << fd % 8);
        if (nfiles++ == 0)
            iez_access_enter(IEZ_ACCESS_FILE, "files");
    }
    pthread_mutex_unlock(&levels_mu);
}

void iez_access_closed(int fd)
{
    if (iez_access_level != IEZ_ACCESS_FILE || fd < 0 || fd >= FD_SLOTS || !(files[fd / 8] & (1 << fd % 8)))
        return;
    pthread_mutex_lock(&levels_mu);
    if (files[fd / 8] & (1 << fd % 8)) {
        files[fd / 8] &= (unsigned char)~(1 << fd % 8);
        if (--nfiles == 0)
            iez_access_exit(IEZ_ACCESS_FILE);
    }
    pthread_mutex_unlock(&levels_mu);
}

void iez_access_dup(int from, int to)
{
    if (iez_access_level != IEZ_ACCESS_FILE || from == to || to < 0 || to >= FD_SLOTS)
        return;
    iez_access_closed(to); /* dup2 onto a counted descriptor closed it */
    if (from >= 0 && from < FD_SLOTS && (files[from / 8] & (1 << from % 8))) {
        pthread_mutex_lock(&levels_mu);
        files[to / 8] |= (unsigned char)(1 << to % 8);
        nfiles++;
        pthread_mutex_unlock(&levels_mu);
    }
}

/* ---- process life ---------------------------------------------------------------------------- */

/* In a fork child: the parent's connection and token are not the child's. */
static void access_fork_child(void)
{
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER, fresh_levels = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
    mu = fresh;
    levels_mu = fresh_levels;
    if (!connected)
        return;
    if (cl.fd >= 0)
        iez_sys_close(cl.fd); /* the child's copy of the parent's connection */
    memset(&cl, 0, sizeof cl);
    cl.fd = -1;
    connected = registered = hb_on = depth = coarse_taken = nfiles = 0;
    job_token = 0;
    memset(files, 0, sizeof files);
}

/* Process end: release and unregister (only the process that registered). */
static void access_fini(void)
{
    if (!connected || owner != getpid())
        return;
    release();
    pthread_mutex_lock(&mu);
    if (registered)
        iocop_unregister(&cl);
    registered = 0;
    iocop_close(&cl);
    connected = 0;
    pthread_mutex_unlock(&mu);
}

const struct iez_module iez_access_module = {
    .name = "access", .init = access_init, .fork_child = access_fork_child, .fini = access_fini};

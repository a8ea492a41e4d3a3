/* The fork launcher: the parent starts -n ranks and serves their barriers; it is no rank itself.
 *
 * Each rank is forked and then re-executes this program (/proc/self/exe) with PMI_RANK and
 * PMI_SIZE set, as mpiexec starts ranks: an LD_PRELOADed libiez reads the rank when it loads,
 * so a fork alone would leave every rank with the parent's. A rank talks to the parent over
 * two pipes: up (barrier arrivals, its result, or its error) and down (one byte releases a
 * barrier). The first error, or a rank that dies, stops the job: the others get SIGTERM, every
 * child is reaped, and the error is printed as one line. A rank whose parent dies gets SIGTERM
 * (PR_SET_PDEATHSIG), and a rank waiting at a barrier sees the pipe close; nothing is left behind. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

enum { MSG_BARRIER = 1, MSG_RESULT, MSG_ERROR };

struct msg {
    int32_t type;
    union {
        struct bench_result result;
        char error[1536];
    } u;
};
_Static_assert(sizeof(struct msg) <= PIPE_BUF, "a message must be one atomic pipe write");

static int write_all(int fd, const void *buf, size_t n)
{
    const char *p = buf;
    while (n) {
        ssize_t k = write(fd, p, n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

static size_t read_all(int fd, void *buf, size_t n)
{
    char *p = buf;
    size_t got = 0;
    while (got < n) {
        ssize_t k = read(fd, p + got, n - got);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            break;
        got += (size_t)k;
    }
    return got;
}

/* ---- a rank ---------------------------------------------------------------------------- */

static int up_fd = -1, down_fd = -1;

static int child_barrier(void)
{
    struct msg m = {.type = MSG_BARRIER};
    char go;
    if (!write_all(up_fd, &m, sizeof m) && read_all(down_fd, &go, 1) == 1)
        return 0;
    bench_fail_msg("the launcher went away");
    return -1;
}

int bench_child(const struct bench_params *p, int rank, int up, int down)
{
    up_fd = up;
    down_fd = down;
    signal(SIGPIPE, SIG_IGN); /* a launcher that went away is an EPIPE, reported as such */
    struct bench_comm comm = {.rank = rank, .size = p->ranks, .barrier = child_barrier};
    static struct msg m;
    m.u.result.rank = rank;
    if ((p->workload == BENCH_IOR ? ior_run : hacc_run)(p, &comm, &m.u.result)) {
        m.type = MSG_ERROR;
        snprintf(m.u.error, sizeof m.u.error, "%s", bench_error());
        write_all(up_fd, &m, sizeof m);
        return BENCH_EXIT_IO;
    }
    m.type = MSG_RESULT;
    return write_all(up_fd, &m, sizeof m) ? BENCH_EXIT_IO : 0;
}

/* ---- the launcher ---------------------------------------------------------------------- */

struct rank_proc {
    pid_t pid;
    int up, down;
    int ended;    /* sent its result or error, or closed its pipe */
    int waiting;  /* at a barrier */
    int reaped, status;
};

static volatile sig_atomic_t stop_signal;
static void on_signal(int sig) { stop_signal = sig; }

static void fail_errno(int rank, const char *what, int err)
{
    const char *name = strerrorname_np(err);
    bench_fail_msg("cannot start rank %d: %s: %s (errno %d %s)", rank, what, strerror(err), err, name ? name : "");
}

/* In the forked child: become rank `rank` by re-executing this program; never returns. */
static void exec_rank(int rank, int ranks, int up, int down, pid_t parent, char **args, const sigset_t *mask)
{
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent)
        _exit(BENCH_EXIT_IO);
    signal(SIGPIPE, SIG_DFL);
    sigprocmask(SIG_SETMASK, mask, NULL);
    fcntl(up, F_SETFD, 0);
    fcntl(down, F_SETFD, 0);
    char value[32], spec[64];
    snprintf(value, sizeof value, "%d", rank);
    setenv("PMI_RANK", value, 1);
    snprintf(value, sizeof value, "%d", ranks);
    setenv("PMI_SIZE", value, 1);
    snprintf(spec, sizeof spec, "%d:%d:%d", rank, up, down);
    args[2] = spec;
    execv("/proc/self/exe", args);
    struct msg m = {.type = MSG_ERROR};
    int err = errno;
    snprintf(m.u.error, sizeof m.u.error, "exec /proc/self/exe: %s (errno %d)", strerror(err), err);
    write_all(up, &m, sizeof m);
    _exit(127);
}

static int start_rank(struct rank_proc *pr, int rank, int ranks, char **args, const sigset_t *mask)
{
    int up[2], down[2];
    if (pipe2(up, O_CLOEXEC)) {
        fail_errno(rank, "pipe", errno);
        return -1;
    }
    if (pipe2(down, O_CLOEXEC)) {
        fail_errno(rank, "pipe", errno);
        close(up[0]);
        close(up[1]);
        return -1;
    }
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid == 0)
        exec_rank(rank, ranks, up[1], down[0], parent, args, mask);
    int err = errno;
    close(up[1]);
    close(down[0]);
    if (pid < 0) {
        close(up[0]);
        close(down[1]);
        fail_errno(rank, "fork", err);
        return -1;
    }
    *pr = (struct rank_proc){.pid = pid, .up = up[0], .down = down[1]};
    return 0;
}

static void describe_death(int rank, int status)
{
    if (WIFSIGNALED(status))
        bench_fail_msg("rank %d was killed by signal %d (%s)", rank, WTERMSIG(status), strsignal(WTERMSIG(status)));
    else
        bench_fail_msg("rank %d exited with status %d", rank, WEXITSTATUS(status));
}

static void reap(struct rank_proc *pr)
{
    while (!pr->reaped) {
        if (waitpid(pr->pid, &pr->status, 0) == pr->pid)
            pr->reaped = 1;
        else if (errno != EINTR)
            break;
    }
}

/* One message from rank i; returns how many ranks ended with it (0 or 1). */
static int receive(struct rank_proc *procs, int i, struct bench_result *results, int *waiting)
{
    static struct msg m;
    struct rank_proc *pr = &procs[i];
    if (read_all(pr->up, &m, sizeof m) != sizeof m) {
        pr->ended = 1;
        reap(pr);
        describe_death(i, pr->status);
        return 1;
    }
    switch (m.type) {
    case MSG_BARRIER:
        if (pr->waiting) {
            bench_fail_msg("rank %d arrived twice at one barrier", i);
            return 0;
        }
        pr->waiting = 1;
        ++*waiting;
        return 0;
    case MSG_RESULT:
        results[i] = m.u.result;
        pr->ended = 1;
        return 1;
    case MSG_ERROR:
        m.u.error[sizeof m.u.error - 1] = '\0';
        bench_fail_msg("rank %d: %s", i, m.u.error);
        pr->ended = 1;
        return 1;
    default:
        bench_fail_msg("rank %d sent an unknown message %d", i, m.type);
        return 0;
    }
}

static void release(struct rank_proc *procs, int n)
{
    for (int i = 0; i < n; i++) {
        procs[i].waiting = 0;
        write_all(procs[i].down, "g", 1); /* a rank that went away: its pipe's EOF tells how */
    }
}

/* Serve barriers and collect results until every rank ended or something failed. */
static void serve(struct rank_proc *procs, int n, struct bench_result *results, const sigset_t *mask)
{
    struct pollfd *pfd = calloc((size_t)n, sizeof *pfd);
    int *who = calloc((size_t)n, sizeof *who);
    if (!pfd || !who) {
        bench_fail_msg("cannot allocate the launcher's tables for %d ranks", n);
        goto out;
    }
    int ended = 0, waiting = 0;
    while (ended < n && !bench_failed() && !stop_signal) {
        int m = 0;
        for (int i = 0; i < n; i++)
            if (!procs[i].ended) { /* waiting ranks too: one may die there */
                pfd[m] = (struct pollfd){.fd = procs[i].up, .events = POLLIN};
                who[m++] = i;
            }
        if (ppoll(pfd, (nfds_t)m, NULL, mask) < 0) {
            if (errno != EINTR)
                bench_fail_msg("poll: %s (errno %d)", strerror(errno), errno);
            continue;
        }
        for (int k = 0; k < m; k++)
            if (pfd[k].revents)
                ended += receive(procs, who[k], results, &waiting);
        if (waiting == n) {
            waiting = 0;
            release(procs, n);
        } else if (waiting && waiting + ended == n && !bench_failed()) {
            bench_fail_msg("ranks disagree on barriers: %d wait, %d have ended", waiting, ended);
        }
    }
out:
    free(pfd);
    free(who);
}

static void raise_fd_limit(void)
{
    struct rlimit rl;
    if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max; /* two descriptors a rank */
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

int bench_launch(const struct bench_params *p, char **argv)
{
    int n = p->ranks, argc = 0;
    while (argv[argc])
        argc++;
    struct rank_proc *procs = calloc((size_t)n, sizeof *procs);
    struct bench_result *results = calloc((size_t)n, sizeof *results);
    char **args = calloc((size_t)argc + 3, sizeof *args);
    if (!procs || !results || !args) {
        fprintf(stderr, "iez-bench: error: cannot allocate the launcher's tables for %d ranks\n", n);
        return BENCH_EXIT_IO;
    }
    args[0] = argv[0];
    args[1] = "--fork-rank";
    for (int i = 1; i < argc; i++)
        args[i + 2] = argv[i];

    raise_fd_limit();
    struct sigaction sa = {.sa_handler = on_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    sigset_t stops, mask;
    sigemptyset(&stops);
    sigaddset(&stops, SIGINT);
    sigaddset(&stops, SIGTERM);
    sigaddset(&stops, SIGHUP);
    sigprocmask(SIG_BLOCK, &stops, &mask); /* delivered only inside ppoll: no wake-up is lost */
    fflush(NULL);

    int started = 0;
    while (started < n && !stop_signal && !start_rank(&procs[started], started, n, args, &mask))
        started++;
    if (started == n)
        serve(procs, n, results, &mask);

    int stopping = bench_failed() || stop_signal || started < n;
    for (int i = 0; i < started; i++) {
        if (stopping && !procs[i].reaped)
            kill(procs[i].pid, SIGTERM);
        close(procs[i].down);
    }
    for (int i = 0; i < started; i++) {
        reap(&procs[i]);
        close(procs[i].up);
        int s = procs[i].status;
        if (!stopping && (!WIFEXITED(s) || WEXITSTATUS(s)))
            describe_death(i, s);
    }
    int rc;
    if (stop_signal) {
        fprintf(stderr, "iez-bench: error: stopped by signal %d (%s)\n", stop_signal, strsignal(stop_signal));
        rc = 128 + stop_signal;
    } else if (bench_failed()) {
        fprintf(stderr, "iez-bench: error: %s\n", bench_error());
        rc = BENCH_EXIT_IO;
    } else {
        rc = bench_report(p, results, n);
    }
    free(procs);
    free(results);
    free(args);
    return rc;
}

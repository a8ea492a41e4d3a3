/* Many threads writing one traced descriptor at once, for tests/test_libiez_threads.py: the
 * trace's counters must come out exact, which they do only if libiez counts with atomic updates
 * whenever another application thread may write (state.h, iez_multithreaded).
 *
 *   iez-test-threadcounts[-mpi] FILE HOW NTHREADS NWRITES [before]
 *
 * HOW: pthread, thrd (C11 thrd_create), omp (an OpenMP parallel region, -mpi only), timer
 * (the threads glibc starts for SIGEV_THREAD timers, -mpi only) or fork (not -mpi).
 * The main thread and NTHREADS others each make NWRITES write()s of 1 + (writer % 4) bytes at
 * the shared position of one descriptor, then 4 x NWRITES preads of as many bytes at offset 0,
 * all at once (writer 0 is the main thread).
 * -mpi: each rank writes FILE.<rank>; the threads are created after MPI_Init, or with "before"
 * before it (they wait until it returns).
 * fork: pthread threads write FILE, then a fork child writes FILE.child alone and then with
 * threads of its own made by thrd_create (only the wrapper tells libiez that a fork child has
 * threads again), while the parent writes on. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <threads.h>
#include <unistd.h>
#ifdef IEZ_TEST_MPI
#include <mpi.h>
#include <omp.h>
#include <semaphore.h>
#include <signal.h>
#include <time.h>
#endif

#define READS 4 /* preads per write */

static int fd;
static long nwrites;
static pthread_barrier_t go;

static void must(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "threadcounts: %s: %s\n", what, strerror(errno));
        exit(1);
    }
}

/* Writes, then READS times as many preads of the same size (together: the writers start reading at once):
 * a buffered write holds the file's lock in the kernel, so writers seldom account at the same
 * instant; readers run side by side. */
static void put(long writer, int together)
{
    static const char buf[4] = "abcd";
    char back[4];
    size_t n = 1 + (size_t)(writer % 4);
    for (long i = 0; i < nwrites; i++)
        must(write(fd, buf, n) == (ssize_t)n, "write");
    for (long i = 0; i < READS * nwrites; i++) {
        if (together && i % 1000 == 0) /* the readers together again, whoever was preempted */
            pthread_barrier_wait(&go);
        must(pread(fd, back, n, 0) == (ssize_t)n, "pread");
    }
}

static void *pthread_writer(void *arg)
{
    pthread_barrier_wait(&go);
    put((long)arg, 1);
    return NULL;
}

static int thrd_writer(void *arg)
{
    pthread_barrier_wait(&go);
    put((long)arg, 1);
    return 0;
}

/* The main thread and n others write fd together; how: pthread or thrd. between, when not
 * NULL, runs after the threads' creation and before their first write. */
static void write_together(const char *how, long n, void (*between)(void))
{
    pthread_t *pt = calloc((size_t)n, sizeof *pt);
    thrd_t *ct = calloc((size_t)n, sizeof *ct);
    must(pt && ct, "calloc");
    pthread_barrier_init(&go, NULL, (unsigned)n + 1);
    for (long i = 0; i < n; i++)
        if (!strcmp(how, "thrd"))
            must(thrd_create(&ct[i], thrd_writer, (void *)(i + 1)) == thrd_success, "thrd_create");
        else
            must(pthread_create(&pt[i], NULL, pthread_writer, (void *)(i + 1)) == 0, "pthread_create");
    if (between)
        between();
    pthread_barrier_wait(&go);
    put(0, 1);
    for (long i = 0; i < n; i++)
        if (!strcmp(how, "thrd"))
            thrd_join(ct[i], NULL);
        else
            pthread_join(pt[i], NULL);
    pthread_barrier_destroy(&go);
    free(pt);
    free(ct);
}

static int open_file(const char *path)
{
    int f = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);
    must(f >= 0, path);
    return f;
}

#ifdef IEZ_TEST_MPI
static const char *base;
static sem_t done;

static void timer_writer(union sigval v)
{
    put(v.sival_int, 1);
    sem_post(&done);
}

/* The main thread and the threads of n one-shot timers write fd together: glibc runs each
 * expiration in a thread of its own, created inside libc, not through pthread_create's symbol. */
static void timer_writers(long n)
{
    timer_t *t = calloc((size_t)n, sizeof *t);
    must(t && sem_init(&done, 0, 0) == 0, "sem_init");
    pthread_barrier_init(&go, NULL, (unsigned)n + 1);
    for (long i = 0; i < n; i++) {
        struct sigevent ev = {.sigev_notify = SIGEV_THREAD, .sigev_notify_function = timer_writer,
                              .sigev_value.sival_int = (int)i + 1};
        struct itimerspec when = {.it_value = {0, 1000}};
        must(timer_create(CLOCK_MONOTONIC, &ev, &t[i]) == 0 && timer_settime(t[i], 0, &when, NULL) == 0,
             "timer_create");
    }
    put(0, 1);
    for (long i = 0; i < n; i++)
        while (sem_wait(&done) && errno == EINTR)
            ;
    for (long i = 0; i < n; i++)
        timer_delete(t[i]);
    free(t);
}

/* MPI_Init, then this rank's own file: BASE.<rank> */
static void start(void)
{
    must(MPI_Init(NULL, NULL) == MPI_SUCCESS, "MPI_Init");
    int rank;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    char path[4096];
    snprintf(path, sizeof path, "%s.%d", base, rank);
    fd = open_file(path);
}

int main(int argc, char **argv)
{
    if (argc < 5 || argc > 6) {
        fprintf(stderr, "usage: iez-test-threadcounts-mpi FILE HOW NTHREADS NWRITES [before]\n");
        return 2;
    }
    base = argv[1];
    const char *how = argv[2];
    long n = atol(argv[3]);
    nwrites = atol(argv[4]);
    if (argc == 6 && !strcmp(argv[5], "before")) {
        write_together(how, n, start);
    } else if (!strcmp(how, "omp")) {
        start();
        pthread_barrier_init(&go, NULL, (unsigned)n + 1);
#pragma omp parallel num_threads(n + 1)
        {
            pthread_barrier_wait(&go);
            put(omp_get_thread_num(), 1);
        }
    } else if (!strcmp(how, "timer")) {
        start();
        timer_writers(n);
    } else {
        start();
        write_together(how, n, NULL);
    }
    must(close(fd) == 0, "close");
    MPI_Finalize();
    return 0;
}
#else
int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: iez-test-threadcounts FILE HOW NTHREADS NWRITES\n");
        return 2;
    }
    const char *how = argv[2];
    long n = atol(argv[3]);
    nwrites = atol(argv[4]);
    int fork_after = !strcmp(how, "fork");
    fd = open_file(argv[1]);
    write_together(fork_after ? "pthread" : how, n, NULL);
    if (fork_after) {
        pid_t pid = fork();
        must(pid >= 0, "fork");
        if (pid == 0) {
            /* alone first (plain updates), then with threads of its own */
            char path[4096];
            snprintf(path, sizeof path, "%s.child", argv[1]);
            must(close(fd) == 0, "close");
            fd = open_file(path);
            put(0, 0);
            write_together("thrd", n, NULL);
            must(close(fd) == 0, "close");
            exit(0);
        }
        int status;
        /* the parent writes on meanwhile, its shard apart from the child's */
        put(0, 0);
        must(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0, "child");
    }
    must(close(fd) == 0, "close");
    return 0;
}
#endif

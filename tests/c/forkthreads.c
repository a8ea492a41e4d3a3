/* A threaded and forking program for the libiez tests (tests/test_libiez_programs.py).
 *
 *   iez-test-forkthreads DIR NTHREADS NBYTES
 *
 * - NTHREADS threads each create DIR/t<i> and write NBYTES to it in 4 KiB writes, at the same
 *   time; every thread also races the others to create DIR/race with O_EXCL: exactly one wins.
 * - DIR/shared: the parent writes 1000 bytes, forks; the child writes 2000 bytes on the
 *   inherited descriptor, creates DIR/child with 3000 bytes and leaves with _exit() without
 *   closing anything; the parent then writes 4000 bytes more through a dup2'd descriptor.
 * - DIR/stream: fopen("w"), fwrite 5000 bytes, fprintf 6 bytes, fclose.
 * Prints "race winners N" (expected 1). Exit 0 on success. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static const char *dir;
static long nbytes;
static int winners;
static pthread_barrier_t start;

static void must(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "forkthreads: %s: %s\n", what, strerror(errno));
        exit(1);
    }
}

static void put(int fd, long n)
{
    static char buf[4096];
    memset(buf, 'x', sizeof buf);
    while (n > 0) {
        ssize_t w = write(fd, buf, n < (long)sizeof buf ? (size_t)n : sizeof buf);
        must(w > 0, "write");
        n -= w;
    }
}

static void *worker(void *arg)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/t%ld", dir, (long)arg);
    pthread_barrier_wait(&start);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    must(fd >= 0, path);
    put(fd, nbytes);
    must(close(fd) == 0, "close");
    snprintf(path, sizeof path, "%s/race", dir);
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd >= 0) {
        __atomic_add_fetch(&winners, 1, __ATOMIC_RELAXED);
        put(fd, 10);
        close(fd);
    } else {
        must(errno == EEXIST, "race open");
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: iez-test-forkthreads DIR NTHREADS NBYTES\n");
        return 2;
    }
    dir = argv[1];
    long n = atol(argv[2]);
    nbytes = atol(argv[3]);
    pthread_t *t = calloc((size_t)n, sizeof *t);
    pthread_barrier_init(&start, NULL, (unsigned)n);
    for (long i = 0; i < n; i++)
        must(pthread_create(&t[i], NULL, worker, (void *)i) == 0, "pthread_create");
    for (long i = 0; i < n; i++)
        pthread_join(t[i], NULL);

    char path[4096];
    snprintf(path, sizeof path, "%s/shared", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    must(fd >= 0, path);
    put(fd, 1000);
    pid_t pid = fork();
    must(pid >= 0, "fork");
    if (pid == 0) {
        put(fd, 2000);
        snprintf(path, sizeof path, "%s/child", dir);
        int c = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        must(c >= 0, path);
        put(c, 3000);
        _exit(0);
    }
    int status;
    must(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0, "child");
    must(dup2(fd, 42) == 42, "dup2");
    must(close(fd) == 0, "close");
    put(42, 4000);
    must(close(42) == 0, "close 42");

    snprintf(path, sizeof path, "%s/stream", dir);
    FILE *f = fopen(path, "w");
    must(f != NULL, path);
    static char block[5000];
    must(fwrite(block, 1, sizeof block, f) == sizeof block, "fwrite");
    must(fprintf(f, "%s", "hello\n") == 6, "fprintf");
    must(fclose(f) == 0, "fclose");
    printf("race winners %d\n", winners);
    return winners == 1 ? 0 : 1;
}

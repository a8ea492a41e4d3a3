/* The data path in a tight loop, for bench/bench_libiez.py: the time of one small write.
 *
 *   iez-test-writes FILE COUNT SIZE write|pwrite [THREADS]
 *
 * Writes COUNT blocks of SIZE bytes to FILE (created), sequentially, from THREADS threads
 * (default 1) that share the descriptor. Prints: NANOSECONDS-PER-CALL CPU-NANOSECONDS-PER-CALL */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int fd, use_pwrite;
static long count, size, nthreads;
static char *buf;

static void *loop(void *arg)
{
    long t = (long)arg;
    for (long i = t; i < count; i += nthreads) {
        ssize_t w = use_pwrite ? pwrite(fd, buf, (size_t)size, (off_t)(i * size)) : write(fd, buf, (size_t)size);
        if (w != size) {
            perror("write");
            exit(1);
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 5) {
        fprintf(stderr, "usage: iez-test-writes FILE COUNT SIZE write|pwrite [THREADS]\n");
        return 2;
    }
    count = atol(argv[2]);
    size = atol(argv[3]);
    use_pwrite = !strcmp(argv[4], "pwrite");
    nthreads = argc > 5 ? atol(argv[5]) : 1;
    buf = calloc(1, (size_t)size);
    fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || !buf || nthreads < 1) {
        perror(argv[1]);
        return 1;
    }
    struct timespec t0, t1, c0, c1;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    pthread_t *t = calloc((size_t)nthreads, sizeof *t);
    for (long i = 1; i < nthreads; i++)
        pthread_create(&t[i], NULL, loop, (void *)i);
    loop(0);
    for (long i = 1; i < nthreads; i++)
        pthread_join(t[i], NULL);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
    printf("%.1f %.1f\n", ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) / (double)count,
           ((double)(c1.tv_sec - c0.tv_sec) * 1e9 + (double)(c1.tv_nsec - c0.tv_nsec)) / (double)count);
    return close(fd);
}

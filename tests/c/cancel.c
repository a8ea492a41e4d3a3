/* Cancellation points of the write family under LD_PRELOAD, for tests/test_libiez_core.py.
 *
 *   iez-test-cancel FILE self|thread
 *
 * self: the only thread cancels itself, then writes FILE: glibc acts on the pending cancellation
 * at the write (a cancellation point), so "after" is never printed. thread: a second thread blocks
 * writing a full pipe, the main thread cancels it and joins it: prints "cancelled" once it has
 * left the write. Each prints "before" first; exits 0.
 *
 * It reads __libc_single_threaded, as C++ programs do (libstdc++'s headers inline it): the
 * executable then holds the copy of the variable every library reads, and glibc's own
 * pthread_cancel, which clears libc's, leaves it saying one thread. */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/single_threaded.h>
#include <sys/syscall.h>
#include <unistd.h>

static int pipefd[2];

static void *fill(void *arg)
{
    (void)arg;
    static char block[4096];
    for (;;)
        if (write(pipefd[1], block, sizeof block) < 0)
            return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 3 || (strcmp(argv[2], "self") && strcmp(argv[2], "thread"))) {
        fprintf(stderr, "usage: iez-test-cancel FILE self|thread\n");
        return 2;
    }
    int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        perror(argv[1]);
        return 1;
    }
    if (!__libc_single_threaded)
        return 3;
    printf("before\n");
    fflush(stdout);
    if (!strcmp(argv[2], "self")) {
        /* disabled while asked, or glibc acts on it inside pthread_cancel: pending until the
         * next cancellation point */
        pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
        pthread_cancel(pthread_self());
        pthread_setcancelstate(PTHREAD_CANCEL_ENABLE, NULL);
        if (write(fd, "x", 1) != 1)
            perror("write");
        syscall(SYS_write, 1, "after\n", 6); /* not a cancellation point, unlike stdio's flush */
        return 0;
    }
    pthread_t t;
    void *res = NULL;
    if (pipe(pipefd) || pthread_create(&t, NULL, fill, NULL))
        return 1;
    usleep(100000); /* the pipe is full and the thread blocked in write */
    if (pthread_cancel(t) || pthread_join(t, &res) || res != PTHREAD_CANCELED)
        return 1;
    printf("cancelled\n");
    return close(fd);
}

#include "mds.h"
#include "hot.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "sysio.h"

IEZ_HOT static long ms_left(const struct timespec *deadline)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (deadline->tv_sec - now.tv_sec) * 1000 + (deadline->tv_nsec - now.tv_nsec) / 1000000;
}

IEZ_HOT static int wait_for(int fd, short ev, const struct timespec *deadline)
{
    for (;;) {
        long left = ms_left(deadline);
        if (left <= 0) {
            errno = ETIMEDOUT;
            return -1;
        }
        struct pollfd p = {fd, ev, 0};
        int r = poll(&p, 1, (int)left);
        if (r > 0)
            return 0;
        if (r < 0 && errno != EINTR)
            return -1;
    }
}

/* Connect to DIR/run/mds.sock. */
IEZ_HOT static int dial(const char *rundir, const struct timespec *deadline)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    if ((size_t)snprintf(a.sun_path, sizeof a.sun_path, "%s/mds.sock", rundir) >= sizeof a.sun_path) {
        errno = ENAMETOOLONG; /* the MDS could not have bound it either */
        return -1;
    }
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    while (s >= 0 && connect(s, (struct sockaddr *)&a, sizeof a) < 0) {
        /* a full listen backlog answers EAGAIN at once: try again until the deadline */
        if ((errno != EAGAIN && errno != EINTR) || ms_left(deadline) <= 0) {
            int e = errno == EAGAIN ? ETIMEDOUT : errno;
            iez_sys_close(s);
            errno = e;
            return -1;
        }
        struct timespec pause = {0, 1000000};
        nanosleep(&pause, NULL);
    }
    return s;
}

/* Send req, read one line into *reply (cap bytes; a longer answer moves to a buffer of
 * IEZ_MDS_REPLY_MAX bytes from malloc, which replaces *reply). */
IEZ_HOT static int exchange(int s, const char *req, size_t n, char **reply, size_t cap, const struct timespec *deadline)
{
    while (n) {
        ssize_t w = send(s, req, n, MSG_NOSIGNAL);
        if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
            if (wait_for(s, POLLOUT, deadline))
                return -1;
            continue;
        }
        if (w < 0)
            return -1;
        req += w;
        n -= (size_t)w;
    }
    size_t got = 0;
    char *buf = *reply;
    for (;;) {
        if (got + 1 >= cap) {
            char *big = cap < IEZ_MDS_REPLY_MAX ? malloc(IEZ_MDS_REPLY_MAX) : NULL;
            if (!big) {
                errno = cap < IEZ_MDS_REPLY_MAX ? ENOMEM : EMSGSIZE;
                return -1;
            }
            memcpy(big, buf, got);
            *reply = buf = big;
            cap = IEZ_MDS_REPLY_MAX;
        }
        ssize_t r = recv(s, buf + got, cap - 1 - got, 0);
        if (r < 0 && (errno == EAGAIN || errno == EINTR)) {
            if (wait_for(s, POLLIN, deadline))
                return -1;
            continue;
        }
        if (r <= 0) {
            errno = r ? errno : ECONNRESET;
            return -1;
        }
        char *nl = memchr(buf + got, '\n', (size_t)r);
        got += (size_t)r;
        if (nl) {
            *nl = 0;
            return 0;
        }
    }
}

IEZ_HOT int iez_mds_alloc(const char *rundir, const char *abs, const char *spec, size_t speclen, char **reply, size_t cap,
                  char *why, size_t whylen)
{
    size_t alen = strlen(abs);
    if (strpbrk(abs, "\t\n") || memchr(spec, '\t', speclen) || memchr(spec, '\n', speclen)) {
        snprintf(why, whylen, "the path holds a tab or a newline");
        return -2;
    }
    /* on the stack unless long: a create's every malloc and free cost it */
    char small[1024], *req = alen + speclen + 16 <= sizeof small ? small : malloc(alen + speclen + 16);
    if (!req) {
        snprintf(why, whylen, "out of memory");
        return -2;
    }
    int n = sprintf(req, "ALLOC\t%s\t", abs);
    memcpy(req + n, spec, speclen);
    req[(size_t)n + speclen] = '\n';

    static int slow; /* the last request timed out: a short wait until the MDS answers again */
    int wait_ms = __atomic_load_n(&slow, __ATOMIC_RELAXED) ? IEZ_MDS_RETRY_MS : IEZ_MDS_TIMEOUT_MS;
    int saved = errno;
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_nsec += (long)wait_ms * 1000000L;
    deadline.tv_sec += deadline.tv_nsec / 1000000000L;
    deadline.tv_nsec %= 1000000000L;
    int rc = -2;
    int s = dial(rundir, &deadline);
    if (s < 0) {
        if (errno == ETIMEDOUT) /* its listen backlog stayed full */
            __atomic_store_n(&slow, 1, __ATOMIC_RELAXED);
        snprintf(why, whylen, "cannot reach the emulated MDS at %s/mds.sock: %s%s", rundir,
                 errno == EMFILE || errno == ENFILE ? "no free descriptor, " : "", strerror(errno));
    } else if (exchange(s, req, (size_t)n + speclen + 1, reply, cap, &deadline)) {
        if (errno == ETIMEDOUT)
            __atomic_store_n(&slow, 1, __ATOMIC_RELAXED);
        snprintf(why, whylen, "no answer from the emulated MDS within %d ms: %s", wait_ms, strerror(errno));
    } else {
        __atomic_store_n(&slow, 0, __ATOMIC_RELAXED); /* it answers again */
        char *out = *reply;
        if (!strncmp(out, "OK\t", 3)) {
            memmove(out, out + 3, strlen(out + 3) + 1);
            rc = 0;
        } else {
            rc = -1;
            /* ERR<TAB>ENOSPC<TAB>message */
            char *tab = strchr(out, '\t');
            snprintf(why, whylen, "the emulated MDS says %s", tab ? tab + 1 : out);
            for (char *t = why; (t = strchr(t, '\t'));)
                *t = ' ';
        }
    }
    if (s >= 0)
        iez_sys_close(s);
    if (req != small)
        free(req);
    errno = saved;
    return rc;
}

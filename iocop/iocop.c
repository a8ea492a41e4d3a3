/* The iocop/1 line protocol over TCP (docs/iocop.md). */
#include "iocop.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static const struct { const char *name; int err; } errnos[] = {
    {"EPROTO", EPROTO}, {"EINVAL", EINVAL}, {"ENOENT", ENOENT}, {"EACCES", EACCES},
    {"EEXIST", EEXIST}, {"EPERM", EPERM}, {"ESTALE", ESTALE}, {"EBUSY", EBUSY},
};

static int fail(struct iocop *c, int err, const char *what)
{
    snprintf(c->error, sizeof c->error, "%s", what);
    return -err;
}

static long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

static int dial(struct iocop *c);

int iocop_connect(struct iocop *c, const char *addr, int timeout_ms)
{
    memset(c, 0, sizeof *c);
    c->fd = -1;
    c->timeout_ms = timeout_ms > 0 ? timeout_ms : 2000;
    c->heartbeat_ms = 1000;
    if (strncmp(addr, "tcp://", 6) == 0)
        addr += 6;
    if (strlen(addr) >= sizeof c->addr)
        return fail(c, EINVAL, "address too long");
    snprintf(c->addr, sizeof c->addr, "%s", addr);
    return dial(c);
}

static int dial(struct iocop *c)
{
    const char *addr = c->addr;
    char host[256];
    const char *colon = strrchr(addr, ':');
    if (!colon || colon == addr || (size_t)(colon - addr) >= sizeof host)
        return fail(c, EINVAL, "address must be HOST:PORT");
    memcpy(host, addr, colon - addr);
    host[colon - addr] = '\0';
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res, *ai;
    int rc = getaddrinfo(host, colon + 1, &hints, &res);
    if (rc)
        return fail(c, EINVAL, gai_strerror(rc));
    int err = ECONNREFUSED;
    for (ai = res; ai; ai = ai->ai_next) {
        int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) {
            err = errno;
            continue;
        }
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
            int one = 1;
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            c->fd = fd;
            break;
        }
        err = errno;
        close(fd);
    }
    freeaddrinfo(res);
    if (c->fd < 0)
        return fail(c, err, strerror(err));
    return 0;
}

static int send_all(struct iocop *c, const char *p, size_t n)
{
    while (n) {
        ssize_t w = send(c->fd, p, n, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return fail(c, errno, strerror(errno));
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Read until a newline, for at most timeout_ms. */
static int read_line(struct iocop *c, char *out, size_t n, int timeout_ms)
{
    long deadline = now_ms() + timeout_ms;
    for (;;) {
        char *nl = memchr(c->buf, '\n', c->len);
        if (nl) {
            size_t len = (size_t)(nl - c->buf);
            if (len >= n)
                return fail(c, EMSGSIZE, "reply longer than the caller's buffer");
            memcpy(out, c->buf, len);
            out[len] = '\0';
            c->len -= len + 1;
            memmove(c->buf, nl + 1, c->len);
            return 0;
        }
        if (c->len >= IOCOP_LINE_MAX)
            return fail(c, EPROTO, "reply line too long");
        long left = deadline - now_ms();
        if (left <= 0)
            return fail(c, ETIMEDOUT, "the controller did not answer in time");
        struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
        int r = poll(&pfd, 1, (int)left);
        if (r < 0 && errno != EINTR)
            return fail(c, errno, strerror(errno));
        if (r <= 0)
            continue;
        ssize_t got = recv(c->fd, c->buf + c->len, IOCOP_LINE_MAX - c->len, 0);
        if (got == 0)
            return fail(c, ECONNRESET, "the controller closed the connection");
        if (got < 0) {
            if (errno == EINTR)
                continue;
            return fail(c, errno, strerror(errno));
        }
        c->len += (size_t)got;
    }
}

/* ERR<TAB>ERRNO<TAB>message -> -errno, with the message in c->error. */
static int reply_status(struct iocop *c, const char *reply)
{
    if (strncmp(reply, "ERR\t", 4) != 0)
        return 0;
    const char *name = reply + 4, *tab = strchr(name, '\t');
    size_t len = tab ? (size_t)(tab - name) : strlen(name);
    snprintf(c->error, sizeof c->error, "%s", tab ? tab + 1 : name);
    for (size_t i = 0; i < sizeof errnos / sizeof errnos[0]; i++)
        if (strlen(errnos[i].name) == len && strncmp(name, errnos[i].name, len) == 0)
            return -errnos[i].err;
    return -EPROTO;
}

static int broken(int rc)
{
    return rc == -ECONNRESET || rc == -EPIPE || rc == -ENOTCONN || rc == -ECONNREFUSED;
}

/* Connect again, every 100 ms until the deadline. */
static int redial(struct iocop *c, long deadline)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    c->len = 0;
    for (;;) {
        int rc = dial(c);
        if (rc == 0 || now_ms() >= deadline)
            return rc;
        struct timespec ts = {0, 100000000L};
        nanosleep(&ts, NULL);
    }
}

int iocop_request(struct iocop *c, const char *line, char *reply, size_t n, int wait_ms)
{
    size_t len = strlen(line);
    if (len > IOCOP_LINE_MAX || memchr(line, '\n', len))
        return fail(c, EINVAL, "a request is one line of at most 4096 bytes");
    char out[IOCOP_LINE_MAX + 1];
    memcpy(out, line, len);
    out[len] = '\n';
    /* A broken connection (the controller restarting) is retried until timeout_ms has passed. */
    long deadline = now_ms() + c->timeout_ms;
    int rc;
    for (;;) {
        if (c->fd < 0 && (rc = redial(c, deadline)))
            return rc;
        rc = send_all(c, out, len + 1);
        if (!rc)
            rc = read_line(c, reply, n, c->timeout_ms + (wait_ms > 0 ? wait_ms : 0));
        if (!broken(rc) || now_ms() >= deadline)
            break;
        close(c->fd);
        c->fd = -1;
    }
    if (rc)
        return rc;
    return reply_status(c, reply);
}

/* The value of key=... among a reply's TAB-separated fields, or -1. */
static long field_long(const char *reply, const char *key)
{
    size_t k = strlen(key);
    for (const char *p = reply; p; p = strchr(p, '\t')) {
        if (*p == '\t')
            p++;
        if (strncmp(p, key, k) == 0 && p[k] == '=')
            return strtol(p + k + 1, NULL, 10);
    }
    return -1;
}

int iocop_register(struct iocop *c, const char *appid, const char *opts)
{
    char line[IOCOP_LINE_MAX + 1], reply[IOCOP_LINE_MAX + 1];
    if (strlen(appid) >= sizeof c->appid)
        return fail(c, EINVAL, "appID longer than 128 bytes");
    snprintf(line, sizeof line, "REGISTER\t%s%s%s", appid, opts && *opts ? "\t" : "", opts ? opts : "");
    int rc = iocop_request(c, line, reply, sizeof reply, 0);
    if (rc)
        return rc;
    /* OK<TAB>SECRET<TAB>policy=...<TAB>heartbeat_ms=...<TAB>lease_ms=... */
    if (strncmp(reply, "OK\t", 3) != 0 || strlen(reply) < 3 + 32 || reply[3 + 32] != '\t')
        return fail(c, EPROTO, "unexpected REGISTER reply");
    memcpy(c->secret, reply + 3, 32);
    c->secret[32] = '\0';
    snprintf(c->appid, sizeof c->appid, "%s", appid);
    long hb = field_long(reply, "heartbeat_ms"), lease = field_long(reply, "lease_ms");
    c->heartbeat_ms = hb > 0 ? (int)hb : 1000;
    c->lease_ms = lease > 0 ? (int)lease : 2 * c->heartbeat_ms;
    return 0;
}

int iocop_acquire(struct iocop *c, const char *phase, const char *opts, int wait_ms)
{
    char line[IOCOP_LINE_MAX + 1], reply[IOCOP_LINE_MAX + 1];
    snprintf(line, sizeof line, "ACQUIRE\t%s\t%s\t%s\twait_ms=%d%s%s", c->appid, c->secret, phase, wait_ms,
             opts && *opts ? "\t" : "", opts ? opts : "");
    int rc = iocop_request(c, line, reply, sizeof reply, wait_ms);
    if (rc)
        return rc;
    if (strncmp(reply, "GRANT\t", 6) == 0) {
        c->token = strtol(reply + 6, NULL, 10);
        c->position = 0;
        return 1;
    }
    if (strncmp(reply, "QUEUED", 6) == 0) {
        c->position = (int)field_long(reply, "position");
        return 0;
    }
    return fail(c, EPROTO, "unexpected ACQUIRE reply");
}

int iocop_acquire_wait(struct iocop *c, const char *phase, const char *opts)
{
    for (;;) {
        int rc = iocop_acquire(c, phase, opts, c->heartbeat_ms);
        if (rc != 0)
            return rc;
    }
}

static int simple(struct iocop *c, const char *verb, const char *extra)
{
    char line[IOCOP_LINE_MAX + 1], reply[IOCOP_LINE_MAX + 1];
    snprintf(line, sizeof line, "%s\t%s\t%s%s", verb, c->appid, c->secret, extra ? extra : "");
    return iocop_request(c, line, reply, sizeof reply, 0);
}

int iocop_heartbeat(struct iocop *c)
{
    char extra[32];
    snprintf(extra, sizeof extra, "\ttoken=%ld", c->token);
    return simple(c, "HEARTBEAT", c->token ? extra : NULL);
}

int iocop_release(struct iocop *c)
{
    char extra[32];
    snprintf(extra, sizeof extra, "\t%ld", c->token);
    int rc = simple(c, "RELEASE", extra);
    if (rc == 0 || rc == -ESTALE || rc == -EPERM)
        c->token = 0;
    return rc;
}

int iocop_unregister(struct iocop *c)
{
    int rc = simple(c, "UNREGISTER", NULL);
    if (rc == 0)
        c->token = 0;
    return rc;
}

void iocop_close(struct iocop *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
}

/* The iocop/1 line protocol over TCP (docs/iocop.md). */
#include "iocop.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const struct { const char *name; int err; } errnos[] = {
    {"EPROTO", EPROTO}, {"EINVAL", EINVAL}, {"ENOENT", ENOENT}, {"EACCES", EACCES},
    {"EEXIST", EEXIST}, {"EPERM", EPERM}, {"ESTALE", ESTALE}, {"EBUSY", EBUSY}, {"EAGAIN", EAGAIN},
};

/* ---- SHA-256 (FIPS 180-4) and HMAC (RFC 2104) -------------------------------------------------
 * Our own, not OpenSSL's: this file is compiled into libiez, which is LD_PRELOADed into
 * applications that often link their own libcrypto (of another version); linking one into every
 * process risks symbol clashes. Checked against Python's hmac and RFC 4231's vectors
 * (tests/test_access_hardening.py). */
struct sha256 {
    unsigned int h[8];
    unsigned char block[64];
    unsigned long long bytes;
};

static const unsigned int K256[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void sha256_block(struct sha256 *s, const unsigned char *p)
{
    unsigned int w[64], v[8];
    for (int i = 0; i < 16; i++)
        w[i] = (unsigned int)p[4 * i] << 24 | (unsigned int)p[4 * i + 1] << 16 | (unsigned int)p[4 * i + 2] << 8 |
               p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        unsigned int s0 = ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
        unsigned int s1 = ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    memcpy(v, s->h, sizeof v);
    for (int i = 0; i < 64; i++) {
        unsigned int t1 = v[7] + (ROR(v[4], 6) ^ ROR(v[4], 11) ^ ROR(v[4], 25)) + ((v[4] & v[5]) ^ (~v[4] & v[6])) +
                          K256[i] + w[i];
        unsigned int t2 = (ROR(v[0], 2) ^ ROR(v[0], 13) ^ ROR(v[0], 22)) + ((v[0] & v[1]) ^ (v[0] & v[2]) ^ (v[1] & v[2]));
        memmove(v + 1, v, 7 * sizeof *v);
        v[4] += t1;
        v[0] = t1 + t2;
    }
    for (int i = 0; i < 8; i++)
        s->h[i] += v[i];
}

static void sha256_init(struct sha256 *s)
{
    static const unsigned int h0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                       0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(s->h, h0, sizeof s->h);
    s->bytes = 0;
}

static void sha256_update(struct sha256 *s, const void *data, size_t n)
{
    const unsigned char *p = data;
    while (n) {
        size_t at = s->bytes % 64, take = 64 - at < n ? 64 - at : n;
        memcpy(s->block + at, p, take);
        s->bytes += take;
        p += take;
        n -= take;
        if (at + take == 64)
            sha256_block(s, s->block);
    }
}

static void sha256_final(struct sha256 *s, unsigned char out[32])
{
    unsigned long long bits = s->bytes * 8;
    unsigned char pad[72] = {0x80}, len[8];
    for (int i = 0; i < 8; i++)
        len[i] = (unsigned char)(bits >> (56 - 8 * i));
    sha256_update(s, pad, 1 + (119 - s->bytes % 64) % 64);
    sha256_update(s, len, 8);
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 4; j++)
            out[4 * i + j] = (unsigned char)(s->h[i] >> (24 - 8 * j));
}

void iocop_hmac_sha256_hex(const void *key, size_t keylen, const void *a, size_t alen, const void *b, size_t blen,
                           char out[65])
{
    unsigned char k[64] = {0}, pad[64], inner[32], mac[32];
    struct sha256 s;
    if (keylen > 64) { /* a long key is its hash (RFC 2104) */
        sha256_init(&s);
        sha256_update(&s, key, keylen);
        sha256_final(&s, k);
    } else {
        memcpy(k, key, keylen);
    }
    for (int i = 0; i < 64; i++)
        pad[i] = k[i] ^ 0x36;
    sha256_init(&s);
    sha256_update(&s, pad, 64);
    sha256_update(&s, a, alen);
    sha256_update(&s, b, blen);
    sha256_final(&s, inner);
    for (int i = 0; i < 64; i++)
        pad[i] = k[i] ^ 0x5c;
    sha256_init(&s);
    sha256_update(&s, pad, 64);
    sha256_update(&s, inner, 32);
    sha256_final(&s, mac);
    for (int i = 0; i < 32; i++)
        snprintf(out + 2 * i, 3, "%02x", mac[i]);
}

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
    /* The session only has to be unique among the controller's live sessions, not secret. */
    unsigned long long r;
    if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        r = ((unsigned long long)ts.tv_sec * 1000000000ULL + (unsigned long long)ts.tv_nsec) ^
            ((unsigned long long)getpid() << 40) ^ (unsigned long long)(size_t)c;
    }
    snprintf(c->session, sizeof c->session, "%016llx", r);
    return dial(c);
}

int iocop_set_token(struct iocop *c, const char *token)
{
    size_t n = strlen(token);
    if (n < 16 || n > IOCOP_TOKEN_MAX || strpbrk(token, " \t\r\n\v\f"))
        return fail(c, EINVAL, "the site token must be 16 to 512 characters without blanks");
    memcpy(c->key, token, n + 1);
    return 0;
}

/* The token in text: its first line without surrounding blanks (as iez.tokens reads it). */
static int token_of(const char *text, char *out, size_t n, char *err, size_t errn, const char *where)
{
    while (*text == ' ' || *text == '\t' || *text == '\r')
        text++;
    size_t len = strcspn(text, "\n");
    while (len && strchr(" \t\r\v\f", text[len - 1]))
        len--;
    if (len < 16 || len > IOCOP_TOKEN_MAX || len >= n || memchr(text, ' ', len) || memchr(text, '\t', len)) {
        snprintf(err, errn, "the site token in %s must be 16 to %d characters without spaces", where,
                 IOCOP_TOKEN_MAX);
        return -EINVAL;
    }
    memcpy(out, text, len);
    out[len] = '\0';
    return 1;
}

int iocop_token_from_env(char *out, size_t n, char *err, size_t errn)
{
    const char *path = getenv("IEZ_TOKEN_FILE"), *tok = getenv("IEZ_TOKEN");
    if (!path || !*path) {
        if (!tok || !*tok)
            return 0;
        return token_of(tok, out, n, err, errn, "$IEZ_TOKEN");
    }
    /* Not through a symlink someone else planted, never a FIFO that would block, never a huge
     * file: a regular file of at most 4 KiB, read through the descriptor we checked. */
    char text[4097];
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
    if (fd < 0) {
        int e = errno;
        snprintf(err, errn, "cannot open IEZ_TOKEN_FILE %s: %s", path, strerror(e));
        return -e;
    }
    struct stat st;
    int rc = 0;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_size > 4096) {
        snprintf(err, errn, "IEZ_TOKEN_FILE %s is not a regular file of at most 4 KiB", path);
        rc = -EINVAL;
    }
    size_t got = 0;
    while (!rc && got < sizeof text - 1) {
        ssize_t r = read(fd, text + got, sizeof text - 1 - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            rc = -errno;
            snprintf(err, errn, "cannot read IEZ_TOKEN_FILE %s: %s", path, strerror(errno));
        }
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    if (rc)
        return rc;
    text[got] = '\0';
    if (strlen(text) != got) {
        snprintf(err, errn, "IEZ_TOKEN_FILE %s holds a NUL byte", path);
        return -EINVAL;
    }
    return token_of(text, out, n, err, errn, path);
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
int iocop_read_line(struct iocop *c, char *out, size_t n, int timeout_ms)
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

/* The request as it goes on the wire, newline included: signed if we have a token. */
static size_t wire(struct iocop *c, const char *line, size_t len, char *out, size_t n)
{
    size_t at = 0;
    if (c->key[0]) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        char rest[IOCOP_ENVELOPE_MAX];
        int k = snprintf(rest, sizeof rest, "%lld\t%s\t%llu\t", (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000,
                         c->session, ++c->seq);
        /* the MAC covers "iocop/1\n" + rest + line (auth.py's CONTEXT and envelope) */
        char head[8 + IOCOP_ENVELOPE_MAX];
        int h = snprintf(head, sizeof head, "iocop/1\n%s", rest);
        iocop_hmac_sha256_hex(c->key, strlen(c->key), head, (size_t)h, line, len, out);
        out[64] = '\t';
        memcpy(out + 65, rest, (size_t)k);
        at = 65 + (size_t)k;
    }
    if (at + len + 1 > n)
        return 0;
    memcpy(out + at, line, len);
    out[at + len] = '\n';
    return at + len + 1;
}

int iocop_request(struct iocop *c, const char *line, char *reply, size_t n, int wait_ms)
{
    size_t len = strlen(line);
    if (len > IOCOP_LINE_MAX || memchr(line, '\n', len))
        return fail(c, EINVAL, "a request is one line of at most 4096 bytes");
    char out[IOCOP_ENVELOPE_MAX + IOCOP_LINE_MAX + 1];
    /* A broken connection (the controller restarting) is retried until timeout_ms has passed;
     * each attempt is signed afresh, so the controller never sees a sequence number twice. */
    long deadline = now_ms() + c->timeout_ms;
    int rc;
    for (;;) {
        if (c->fd < 0 && (rc = redial(c, deadline)))
            return rc;
        size_t w = wire(c, line, len, out, sizeof out);
        rc = send_all(c, out, w);
        if (!rc)
            rc = iocop_read_line(c, reply, n, c->timeout_ms + (wait_ms > 0 ? wait_ms : 0));
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

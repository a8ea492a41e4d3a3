/* iocop: a reference C client of the IO-Cop access controller (docs/iocop.md), protocol iocop/1
 * over the controller's raw-TCP line socket. No library beyond libc, so that libiez (an
 * LD_PRELOAD library) can embed the same code without linking ZeroMQ.
 *
 * Every call returns >= 0 on success or a negative errno: the controller's ERR replies map to
 * -EPROTO, -EINVAL, -ENOENT, -EACCES, -EEXIST, -EPERM, -ESTALE, -EBUSY, -EAGAIN; transport failures
 * to -ETIMEDOUT, -ECONNREFUSED, -ECONNRESET, ... The last error's text is in c->error.
 *
 * With a site token (iocop_set_token) every request is signed as src/iez/access/auth.py says:
 *   HMAC-SHA256(token, "iocop/1\n" TIME TAB SESSION TAB SEQ TAB request) TAB TIME TAB SESSION TAB SEQ TAB request
 * with a random SESSION per connect and SEQ counting up; without one requests go unsigned (a
 * controller on --trusted-network).
 */
#ifndef IOCOP_H
#define IOCOP_H

#include <stddef.h>

#define IOCOP_LINE_MAX 4096
#define IOCOP_TOKEN_MAX 512   /* bytes of a site token */
#define IOCOP_ENVELOPE_MAX 120 /* bytes the signature adds in front of a request */

struct iocop {
    int fd;
    char addr[300];                /* HOST:PORT, to reconnect after the controller restarts */
    int timeout_ms;                /* for one reply beyond any long-poll wait */
    char appid[129];
    char secret[33];
    long token;                    /* held token, 0 if none */
    int heartbeat_ms, lease_ms;    /* from the controller */
    int position;                  /* place in the queue, from the last QUEUED reply */
    char error[256];
    char buf[IOCOP_LINE_MAX + 2];  /* bytes received and not yet consumed */
    size_t len;
    char key[IOCOP_TOKEN_MAX + 1]; /* the site token; "" sends requests unsigned */
    char session[17];              /* 16 hex digits, fresh at each iocop_connect */
    unsigned long long seq;        /* requests signed in this session */
};

/* Connect to "HOST:PORT" (or "tcp://HOST:PORT"). */
int iocop_connect(struct iocop *c, const char *addr, int timeout_ms);
/* Send one request line (no newline) and read the reply line into reply (NUL-terminated).
 * If the connection breaks (the controller restarted), reconnect for up to timeout_ms and send
 * the request once more: every iocop/1 request may be repeated safely. */
int iocop_request(struct iocop *c, const char *line, char *reply, size_t n, int wait_ms);
/* REGISTER; opts is NULL or extra TAB-separated key=value fields (user=, project=, jobid=, osts=). */
int iocop_register(struct iocop *c, const char *appid, const char *opts);
/* One ACQUIRE long poll of at most wait_ms: 1 granted (c->token set), 0 still queued (c->position). */
int iocop_acquire(struct iocop *c, const char *phase, const char *opts, int wait_ms);
/* ACQUIRE until granted: each poll lasts one heartbeat and keeps the claim alive. */
int iocop_acquire_wait(struct iocop *c, const char *phase, const char *opts);
int iocop_heartbeat(struct iocop *c);
int iocop_release(struct iocop *c);
int iocop_unregister(struct iocop *c);
void iocop_close(struct iocop *c);
/* Read one more reply line (the rows after "OK status lines=N"); 0 or -errno. */
int iocop_read_line(struct iocop *c, char *out, size_t n, int timeout_ms);

/* Sign requests with this site token from now on (after iocop_connect); -EINVAL if it is not
 * 16..512 characters without blanks. */
int iocop_set_token(struct iocop *c, const char *token);
/* The site token of a client: the first line of the file $IEZ_TOKEN_FILE (opened with O_NOFOLLOW,
 * a regular file of at most 4 KiB), else $IEZ_TOKEN. 1 found (into out), 0 none set, or -errno
 * with the reason in err. */
int iocop_token_from_env(char *out, size_t n, char *err, size_t errn);

/* HMAC-SHA256 (RFC 2104) of the concatenation of parts a and b, as 64 lowercase hex digits + NUL. */
void iocop_hmac_sha256_hex(const void *key, size_t keylen, const void *a, size_t alen, const void *b, size_t blen,
                           char out[65]);

#endif

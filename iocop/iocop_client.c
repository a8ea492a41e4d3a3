/* iocop-client: the reference C client (docs/iocop.md), used by the tests and the benchmark.
 *
 *   iocop-client ADDR APPID [--phase P] [--cycles N] [--hold-ms MS] [--opts FIELDS]
 *                [--register-opts FIELDS] [--timeout-ms MS]
 *       register, then N times: acquire (long polls of one heartbeat), hold for MS sending
 *       heartbeats, release; then unregister. Prints one line per event:
 *         grant <TAB> APPID <TAB> TOKEN <TAB> ASKED <TAB> GRANTED     (wall-clock seconds)
 *         release <TAB> APPID <TAB> TOKEN <TAB> TIME <TAB> RC
 *         done <TAB> APPID <TAB> CYCLES
 *   iocop-client ADDR --raw
 *       send each line of stdin as a request and print each reply (protocol tests); a reply that
 *       announces rows (STATUS: lines=N) is printed with its rows.
 *   iocop-client --hmac KEYHEX
 *       print HMAC-SHA256(key, stdin) in hex (tests of iocop.c's own SHA-256).
 * Requests are signed with the site token of $IEZ_TOKEN_FILE or $IEZ_TOKEN, if one is set.
 * Exit 0 on success; 1 with "iocop-client: error: ..." on stderr otherwise.
 */
#include "iocop.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double wall(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) && errno == EINTR)
        ;
}

static int die(struct iocop *c, const char *what, int rc)
{
    fprintf(stderr, "iocop-client: error: %s %s: %s (%s)\n", c->appid[0] ? c->appid : "", what, c->error,
            strerror(-rc));
    return 1;
}

static int raw(struct iocop *c)
{
    char line[IOCOP_LINE_MAX + 2], reply[IOCOP_LINE_MAX + 1];
    while (fgets(line, sizeof line, stdin)) {
        line[strcspn(line, "\n")] = '\0';
        reply[0] = '\0';
        int rc = iocop_request(c, line, reply, sizeof reply, 0);
        if (rc < 0 && strncmp(reply, "ERR", 3) != 0)
            return die(c, "request", rc);
        printf("%s\n", reply);
        const char *rows = rc == 0 ? strstr(reply, "\tlines=") : NULL;
        for (long k = rows ? strtol(rows + 7, NULL, 10) : 0; k > 0; k--) {
            if ((rc = iocop_read_line(c, reply, sizeof reply, c->timeout_ms)))
                return die(c, "reply row", rc);
            printf("%s\n", reply);
        }
        fflush(stdout);
    }
    return 0;
}

static int hmac_hex(const char *keyhex)
{
    unsigned char key[1024];
    size_t klen = strlen(keyhex) / 2;
    if (klen > sizeof key || strlen(keyhex) % 2)
        return 2;
    for (size_t i = 0; i < klen; i++)
        if (sscanf(keyhex + 2 * i, "%2hhx", &key[i]) != 1)
            return 2;
    static char msg[1 << 20];
    size_t n = fread(msg, 1, sizeof msg, stdin);
    char out[65];
    iocop_hmac_sha256_hex(key, klen, msg, n, "", 0, out);
    printf("%s\n", out);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: iocop-client ADDR APPID [--phase P] [--cycles N] [--hold-ms MS] [--opts F] "
                        "[--register-opts F] [--timeout-ms MS]\n       iocop-client ADDR --raw\n");
        return 2;
    }
    if (!strcmp(argv[1], "--hmac"))
        return hmac_hex(argv[2]);
    const char *phase = "io", *opts = NULL, *ropts = NULL;
    long cycles = 1, hold_ms = 0;
    int timeout_ms = 5000;
    for (int i = 3; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--phase"))
            phase = argv[i + 1];
        else if (!strcmp(argv[i], "--cycles"))
            cycles = strtol(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--hold-ms"))
            hold_ms = strtol(argv[i + 1], NULL, 10);
        else if (!strcmp(argv[i], "--opts"))
            opts = argv[i + 1];
        else if (!strcmp(argv[i], "--register-opts"))
            ropts = argv[i + 1];
        else if (!strcmp(argv[i], "--timeout-ms"))
            timeout_ms = (int)strtol(argv[i + 1], NULL, 10);
        else {
            fprintf(stderr, "iocop-client: error: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    struct iocop c;
    /* A thousand clients may connect at once: retry a refused or reset connect briefly. */
    int rc = -1;
    for (int attempt = 0; attempt < 50 && rc; attempt++) {
        rc = iocop_connect(&c, argv[1], timeout_ms);
        if (rc && rc != -ECONNREFUSED && rc != -ECONNRESET && rc != -ETIMEDOUT)
            break;
        if (rc)
            sleep_ms(100);
    }
    if (rc)
        return die(&c, "connect", rc);
    char token[IOCOP_TOKEN_MAX + 1];
    rc = iocop_token_from_env(token, sizeof token, c.error, sizeof c.error);
    if (rc < 0 || (rc == 1 && (rc = iocop_set_token(&c, token))))
        return die(&c, "site token", rc);
    if (!strcmp(argv[2], "--raw"))
        return raw(&c);
    if ((rc = iocop_register(&c, argv[2], ropts)))
        return die(&c, "register", rc);
    for (long k = 0; k < cycles; k++) {
        double asked = wall();
        if ((rc = iocop_acquire_wait(&c, phase, opts)) < 0)
            return die(&c, "acquire", rc);
        long token = c.token;
        printf("grant\t%s\t%ld\t%.6f\t%.6f\n", c.appid, token, asked, wall());
        fflush(stdout);
        for (long left = hold_ms; left > 0;) {
            long step = left < c.heartbeat_ms ? left : c.heartbeat_ms;
            sleep_ms(step);
            left -= step;
            if (left > 0 && (rc = iocop_heartbeat(&c)))
                return die(&c, "heartbeat", rc);
        }
        double t = wall();
        rc = iocop_release(&c);
        printf("release\t%s\t%ld\t%.6f\t%d\n", c.appid, token, t, rc);
        fflush(stdout);
        if (rc)
            return die(&c, "release", rc);
    }
    if ((rc = iocop_unregister(&c)))
        return die(&c, "unregister", rc);
    printf("done\t%s\t%ld\n", c.appid, cycles);
    iocop_close(&c);
    return 0;
}

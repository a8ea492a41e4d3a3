/* liopprof-rpctrace: parse a Lustre debug log (file or stdin) and print its rpctrace records
 * as tab-separated lines, then the line counts on stderr. For use on an OSS without Python,
 * and for the parser's fuzz test (built with ASan/UBSan as liopprof-rpctrace-asan). */
#include "rpctrace.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK (1 << 20)
#define CAP 8192

static const char *str(lp_parser *p, uint32_t id) {
    size_t n;
    const char *s = lp_string(p, id, &n);
    return s && n ? s : "-";
}

int main(int argc, char **argv) {
    FILE *f = stdin;
    if (argc > 2 || (argc == 2 && strcmp(argv[1], "-h") == 0)) {
        fprintf(stderr, "usage: liopprof-rpctrace [DEBUG_LOG]\n");
        return 2;
    }
    if (argc == 2 && !(f = fopen(argv[1], "rb"))) {
        fprintf(stderr, "liopprof-rpctrace: %s: %s\n", argv[1], strerror(errno));
        return 1;
    }
    lp_parser *p = lp_new();
    char *buf = malloc(2 * CHUNK);
    lp_rec *recs = malloc(CAP * sizeof *recs);
    if (!p || !buf || !recs) return 1;
    size_t have = 0;
    int eof = 0;
    printf("line\tkind\tt_us\tcpu\tthread\tpname\tuuid\tref\tclient_pid\txid\tnid\topc\tjob\tproc_us\ttotal_us\trc\tstatus\n");
    while (!eof || have) {
        if (!eof && have < CHUNK) {
            size_t got = fread(buf + have, 1, 2 * CHUNK - have, f);
            have += got;
            eof = got == 0;
        }
        size_t n, used = lp_feed(p, buf, have, eof, recs, CAP, &n);
        for (size_t i = 0; i < n; i++) {
            lp_rec *r = &recs[i];
            printf("%llu\t%s\t%lld\t%d\t%d\t%s\t%s\t%d\t%d\t%llu\t%s\t%d\t%s\t%lld\t%lld\t%d\t%d\n",
                   (unsigned long long)r->line, r->kind == LP_HANDLING ? "handling" : "handled", (long long)r->t_us,
                   r->cpu, r->thread, str(p, r->pname), str(p, r->uuid), r->ref, r->client_pid,
                   (unsigned long long)r->xid, str(p, r->nid), r->opc, str(p, r->job), (long long)r->proc_us,
                   (long long)r->total_us, r->rc, r->status);
        }
        memmove(buf, buf + used, have - used);
        have -= used;
        if (eof && used == 0 && n == 0) break;
        if (!eof && have == 2 * CHUNK) { /* a line longer than the buffer: count it and drop it */
            have = 0;
        }
    }
    uint64_t c[LP_NCOUNTS];
    lp_counts(p, c);
    fprintf(stderr, "lines %llu rpc %llu other %llu malformed %llu\n", (unsigned long long)c[LP_LINES],
            (unsigned long long)c[LP_RPC], (unsigned long long)c[LP_OTHER], (unsigned long long)c[LP_MALFORMED]);
    uint64_t line;
    char text[256];
    for (int i = 0; lp_bad(p, i, &line, text, sizeof text) >= 0; i++) fprintf(stderr, "bad line %llu: %s\n", (unsigned long long)line, text);
    lp_free(p);
    free(buf);
    free(recs);
    if (f != stdin) fclose(f);
    return 0;
}

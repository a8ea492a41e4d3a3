/* The results of all ranks, reduced as IOR reduces them: a phase starts at the earliest rank's
 * start and ends at the latest rank's end (open, wr/rd, close and total each so), and its
 * bandwidth is all ranks' bytes over that total. Printed as IOR-like text or one JSON line. */
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "bench.h"

#define MIB (1024.0 * 1024.0)

struct phase_sum {
    int ran;
    double open, xfer, close, total;
    uint64_t bytes, ops;
};

static struct phase_sum reduce(const struct bench_result *res, int n, int access)
{
    struct phase_sum s = {0};
    struct bench_times lo = {0}, hi = {0};
    for (int i = 0; i < n; i++) {
        if (!res[i].ran[access])
            continue;
        const struct bench_times *t = &res[i].phase[access];
        if (!s.ran++) {
            lo = hi = *t;
        }
        lo.open_start = t->open_start < lo.open_start ? t->open_start : lo.open_start;
        lo.xfer_start = t->xfer_start < lo.xfer_start ? t->xfer_start : lo.xfer_start;
        lo.close_start = t->close_start < lo.close_start ? t->close_start : lo.close_start;
        hi.open_end = t->open_end > hi.open_end ? t->open_end : hi.open_end;
        hi.xfer_end = t->xfer_end > hi.xfer_end ? t->xfer_end : hi.xfer_end;
        hi.close_end = t->close_end > hi.close_end ? t->close_end : hi.close_end;
        s.bytes += t->bytes;
        s.ops += t->ops;
    }
    s.open = hi.open_end - lo.open_start;
    s.xfer = hi.xfer_end - lo.xfer_start;
    s.close = hi.close_end - lo.close_start;
    s.total = hi.close_end - lo.open_start;
    return s;
}

static double per_second(double x, double seconds) { return seconds > 0 ? x / seconds : 0.0; }

static uint64_t aggregate_bytes(const struct bench_params *p)
{
    if (p->workload == BENCH_IOR)
        return p->block * p->segments * (uint64_t)p->ranks;
    uint64_t sum = 0;
    for (int i = 0; i < p->ranks; i++)
        sum += p->particles[i] * HACC_RECORD;
    return sum + p->header * (uint64_t)bench_files(p);
}

static const char *human(uint64_t n, char *buf, size_t size)
{
    static const char *const units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB"};
    int u = 0;
    uint64_t v = n;
    while (u < 5 && v && v % 1024 == 0) {
        v /= 1024;
        u++;
    }
    if (u || n < 1024)
        snprintf(buf, size, "%llu %s", (unsigned long long)v, units[u]);
    else
        snprintf(buf, size, "%llu bytes (%.1f MiB)", (unsigned long long)n, (double)n / MIB);
    return buf;
}

static void json_string(const char *s)
{
    putchar('"');
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\')
            printf("\\%c", *c);
        else if (*c < 0x20)
            printf("\\u%04x", *c);
        else
            putchar(*c);
    }
    putchar('"');
}

static void name_of(const struct bench_params *p, int rank, char *out, size_t n)
{
    if (p->workload == BENCH_IOR)
        ior_file_name(p, rank, out, n);
    else
        hacc_file_name(p, rank, out, n);
}

static const struct bench_result *first_mismatch(const struct bench_result *res, int n, uint64_t *checked,
                                                 uint64_t *bad)
{
    const struct bench_result *first = NULL;
    *checked = *bad = 0;
    for (int i = 0; i < n; i++) {
        *checked += res[i].checked;
        *bad += res[i].mismatched;
        if (res[i].mismatched && !first)
            first = &res[i];
    }
    return first;
}

static void report_json(const struct bench_params *p, const struct bench_result *res, int n)
{
    char file[PATH_MAX];
    printf("{\"workload\":\"%s\",\"api\":\"%s\",\"launcher\":\"%s\",\"ranks\":%d,\"mode\":\"%s\","
           "\"collective\":%s,\"test_file\":", p->workload == BENCH_IOR ? "ior" : "hacc-io", p->api->name, p->launcher,
           p->ranks, p->fpp ? "fpp" : "ssf", p->collective ? "true" : "false");
    json_string(p->test_file);
    printf(",\"files\":[");
    for (int i = 0; i < bench_files(p); i++) {
        name_of(p, i, file, sizeof file);
        printf(i ? "," : "");
        json_string(file);
    }
    printf("]");
    if (p->workload == BENCH_IOR) {
        printf(",\"block\":%llu,\"transfer\":%llu,\"segments\":%llu,\"signature\":%llu",
               (unsigned long long)p->block, (unsigned long long)p->transfer, (unsigned long long)p->segments,
               (unsigned long long)p->signature);
    } else {
        printf(",\"record\":%d,\"header\":%llu,\"particles\":[", HACC_RECORD, (unsigned long long)p->header);
        for (int i = 0; i < p->ranks; i++)
            printf("%s%llu", i ? "," : "", (unsigned long long)p->particles[i]);
        printf("]");
    }
    printf(",\"aggregate_bytes\":%llu,\"phases\":[", (unsigned long long)aggregate_bytes(p));
    int first = 1;
    for (int a = BENCH_WRITE; a <= BENCH_READ; a++) {
        struct phase_sum s = reduce(res, n, a);
        if (!s.ran)
            continue;
        printf("%s{\"access\":\"%s\",\"bytes\":%llu,\"ops\":%llu,\"bw_mib_s\":%.6f,\"iops\":%.3f,"
               "\"open_s\":%.9f,\"xfer_s\":%.9f,\"close_s\":%.9f,\"total_s\":%.9f}",
               first ? "" : ",", a == BENCH_WRITE ? "write" : "read", (unsigned long long)s.bytes,
               (unsigned long long)s.ops, per_second((double)s.bytes / MIB, s.total), per_second((double)s.ops, s.total),
               s.open, s.xfer, s.close, s.total);
        first = 0;
    }
    printf("]");
    if (p->verify) {
        uint64_t checked, bad;
        const struct bench_result *m = first_mismatch(res, n, &checked, &bad);
        printf(",\"verify\":{\"checked\":%llu,\"mismatched\":%llu", (unsigned long long)checked,
               (unsigned long long)bad);
        if (m) {
            printf(",\"first\":{\"rank\":%d,\"file\":", m->rank);
            json_string(m->bad_file);
            printf(",\"offset\":%llu,\"expected\":%d,\"found\":%d}", (unsigned long long)m->bad_offset,
                   m->bad_expected, m->bad_found);
        }
        printf("}");
    }
    printf("}\n");
}

static void report_text(const struct bench_params *p, const struct bench_result *res, int n)
{
    char a[64], b[64], file[PATH_MAX];
    int ior = p->workload == BENCH_IOR;
    printf("iez-bench: %s workload, api %s%s, %d rank%s (%s), %s\n", ior ? "IOR-like" : "HACC-IO-like",
           p->api->name, p->collective ? " (collective)" : "", p->ranks, p->ranks == 1 ? "" : "s",
           strcmp(p->launcher, "mpi") ? "forked" : "MPI", p->fpp ? "file per process" : "single shared file");
    name_of(p, 0, file, sizeof file);
    printf("%-19s: %s%s (%d file%s)\n", "files", file, bench_files(p) > 1 ? " ..." : "", bench_files(p),
           bench_files(p) == 1 ? "" : "s");
    if (ior) {
        printf("%-19s: %llu\n", "segments", (unsigned long long)p->segments);
        printf("%-19s: %s\n", "block size", human(p->block, a, sizeof a));
        printf("%-19s: %s\n", "transfer size", human(p->transfer, a, sizeof a));
    } else {
        uint64_t total = 0, lo = UINT64_MAX, hi = 0;
        for (int i = 0; i < p->ranks; i++) {
            total += p->particles[i];
            lo = p->particles[i] < lo ? p->particles[i] : lo;
            hi = p->particles[i] > hi ? p->particles[i] : hi;
        }
        if (lo == hi)
            printf("%-19s: %llu per rank, %llu in all, %d bytes each\n", "particles", (unsigned long long)lo,
                   (unsigned long long)total, HACC_RECORD);
        else
            printf("%-19s: %llu to %llu per rank, %llu in all, %d bytes each\n", "particles",
                   (unsigned long long)lo, (unsigned long long)hi, (unsigned long long)total, HACC_RECORD);
        printf("%-19s: %s per file\n", "header", human(p->header, a, sizeof a));
    }
    printf("%-19s: %s\n\n", "aggregate filesize", human(aggregate_bytes(p), a, sizeof a));
    printf("%-8s %12s %12s %11s %11s %11s %11s %11s\n", "access", "bw(MiB/s)", "IOPS", "calls", "open(s)",
           "wr/rd(s)", "close(s)", "total(s)");
    printf("%-8s %12s %12s %11s %11s %11s %11s %11s\n", "------", "---------", "----", "-----", "-------",
           "--------", "--------", "--------");
    for (int acc = BENCH_WRITE; acc <= BENCH_READ; acc++) {
        struct phase_sum s = reduce(res, n, acc);
        if (!s.ran)
            continue;
        printf("%-8s %12.2f %12.2f %11llu %11.6f %11.6f %11.6f %11.6f\n", acc == BENCH_WRITE ? "write" : "read",
               per_second((double)s.bytes / MIB, s.total), per_second((double)s.ops, s.total),
               (unsigned long long)s.ops, s.open, s.xfer, s.close, s.total);
    }
    if (p->verify) {
        uint64_t checked, bad;
        const struct bench_result *m = first_mismatch(res, n, &checked, &bad);
        if (!m)
            printf("\nverify: %s checked, all as written\n", human(checked, a, sizeof a));
        else
            printf("\nverify: %llu of %s differ; first: rank %d, %s at offset %llu (expected 0x%02x, found 0x%02x)\n",
                   (unsigned long long)bad, human(checked, b, sizeof b), m->rank, m->bad_file,
                   (unsigned long long)m->bad_offset, m->bad_expected, m->bad_found);
    }
}

int bench_report(const struct bench_params *p, const struct bench_result *res, int n)
{
    if (p->json)
        report_json(p, res, n);
    else
        report_text(p, res, n);
    fflush(stdout);
    uint64_t checked, bad;
    const struct bench_result *m = first_mismatch(res, n, &checked, &bad);
    if (!m)
        return 0;
    fprintf(stderr, "iez-bench: error: verify: %llu of %llu bytes differ from what was written; first: rank %d, %s at "
            "offset %llu\n", (unsigned long long)bad, (unsigned long long)checked, m->rank, m->bad_file,
            (unsigned long long)m->bad_offset);
    return BENCH_EXIT_VERIFY;
}

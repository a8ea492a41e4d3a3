/* iez-probe: runs libiez's pure core (plan parser, layout format, lov_user_md encoder, path
 * normalisation) on its arguments, so the Python tests can hold it against iez.plan and
 * iez.layout.lum, and the benchmark can time a plan load.
 *
 *   iez-probe plan FILE            OK <n> <collread: "", lustre or off> then PATH<TAB>LAYOUT<TAB>LUM-HEX
 *                                  per entry, or ERR <why>
 *   iez-probe load FILE            OK <n> <seconds> <max RSS KiB>, or ERR <why>
 *   iez-probe read FILE            OK <bytes> <seconds> <max RSS KiB>: only reading it (a baseline)
 *   iez-probe find FILE PATH...    LAYOUT, or "-" per path (fields filled from this process)
 *   iez-probe findtime FILE N NAMES   OK <n> <ns a lookup> <hits>: N lookups of NAMES' lines in turn
 *   iez-probe layout SPEC [PATTERN]   LAYOUT<TAB>LUM-HEX, or ERR <why>
 *   iez-probe path BASE PATH       the normalised absolute path
 *   iez-probe crc HEX SPLIT        CRC-32 of the bytes HEX (the first SPLIT, then the rest continued
 *                                  from it): the one libiez uses, then the tables' (decimal)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "crc32.h"
#include "layout.h"
#include "lum.h"
#include "path.h"
#include "plan.h"
#include "sysio.h"

static int print_layout(const char *spec, size_t len, unsigned pattern)
{
    struct iez_layout lay = {0};
    char err[256];
    if (iez_layout_parse(spec, len, &lay, err, sizeof err)) {
        printf("ERR %s\n", err);
        iez_layout_free(&lay);
        return 1;
    }
    for (uint32_t i = 0; i < lay.ncomp; i++)
        lay.comp[i].s.pattern = pattern;
    size_t cap = iez_lum_size(&lay), fcap = 2 * len + 64;
    unsigned char *buf = aligned_alloc(8, (cap + 7) / 8 * 8);
    char *text = malloc(fcap);
    size_t n = iez_lum_encode(&lay, buf, cap);
    if (iez_layout_format(&lay, text, fcap) < 0 || n != cap) {
        printf("ERR cannot format or encode\n");
        return 1;
    }
    printf("%s\t", text);
    for (size_t i = 0; i < n; i++)
        printf("%02x", buf[i]);
    putchar('\n');
    free(buf);
    free(text);
    iez_layout_free(&lay);
    return 0;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    char err[512];
    struct iez_plan_env env;
    iez_plan_env_read(&env);
    if (argc >= 3 && !strcmp(argv[1], "plan")) {
        struct iez_plan *plan = iez_plan_load(argv[2], &env, err, sizeof err);
        if (!plan) {
            printf("ERR %s\n", err);
            return 2;
        }
        static const char *const collread[] = {"", "lustre", "off"};
        printf("OK %zu %s\n", iez_plan_size(plan), collread[iez_plan_collread(plan)]);
        size_t it = 0, plen, slen;
        const char *path, *spec;
        while (iez_plan_next(plan, &it, &path, &plen, &spec, &slen)) {
            /* paths as version 2 writes them: a version-1 path's braces are literal */
            for (size_t i = 0; i < plen; i++)
                printf(iez_plan_version(plan) == 1 && (path[i] == '{' || path[i] == '}') ? "%c%c" : "%c", path[i], path[i]);
            putchar('\t');
            if (print_layout(spec, slen, IEZ_PATTERN_RAID0))
                return 1;
        }
        iez_plan_free(plan);
        return 0;
    }
    if (argc >= 3 && !strcmp(argv[1], "load")) {
        double t0 = now();
        struct iez_plan *plan = iez_plan_load(argv[2], &env, err, sizeof err);
        double dt = now() - t0;
        if (!plan) {
            printf("ERR %s\n", err);
            return 2;
        }
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        printf("OK %zu %.6f %ld\n", iez_plan_size(plan), dt, ru.ru_maxrss);
        return 0;
    }
    if (argc >= 3 && !strcmp(argv[1], "read")) {
        double t0 = now();
        char *buf;
        size_t len;
        int rc = iez_read_file(argv[2], IEZ_PLAN_MAX_BYTES, &buf, &len);
        double dt = now() - t0;
        if (rc) {
            printf("ERR %s\n", strerror(-rc));
            return 2;
        }
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        printf("OK %zu %.6f %ld\n", len, dt, ru.ru_maxrss);
        free(buf);
        return 0;
    }
    if (argc >= 3 && !strcmp(argv[1], "find")) {
        struct iez_plan *plan = iez_plan_load(argv[2], &env, err, sizeof err);
        if (!plan) {
            printf("ERR %s\n", err);
            return 2;
        }
        for (int i = 3; i < argc; i++) {
            size_t slen;
            const char *spec = iez_plan_find(plan, argv[i], strlen(argv[i]), &slen);
            printf("%.*s\n", spec ? (int)slen : 1, spec ? spec : "-");
        }
        iez_plan_free(plan);
        return 0;
    }
    if (argc == 5 && !strcmp(argv[1], "findtime")) {
        struct iez_plan *plan = iez_plan_load(argv[2], &env, err, sizeof err);
        char *names;
        size_t nlen;
        if (!plan || iez_read_file(argv[4], IEZ_PLAN_MAX_BYTES, &names, &nlen)) {
            printf("ERR %s\n", plan ? "cannot read the names" : err);
            return 2;
        }
        size_t npaths = 0, cap = 1024;
        const char **paths = malloc(cap * sizeof *paths);
        size_t *lens = malloc(cap * sizeof *lens);
        for (char *p = names, *nl; p < names + nlen; p = nl + 1) {
            nl = memchr(p, '\n', (size_t)(names + nlen - p));
            if (!nl)
                nl = names + nlen;
            if (npaths == cap) {
                cap *= 2;
                paths = realloc(paths, cap * sizeof *paths);
                lens = realloc(lens, cap * sizeof *lens);
            }
            paths[npaths] = p;
            lens[npaths++] = (size_t)(nl - p);
        }
        long n = strtol(argv[3], NULL, 10), hits = 0;
        double t0 = now();
        for (long i = 0; i < n && npaths; i++) {
            size_t slen, k = (size_t)i % npaths;
            hits += iez_plan_find(plan, paths[k], lens[k], &slen) != NULL;
        }
        double dt = now() - t0;
        printf("OK %zu %.1f %ld\n", iez_plan_size(plan), dt * 1e9 / (double)(n > 0 ? n : 1), hits);
        free(paths);
        free(lens);
        free(names);
        iez_plan_free(plan);
        return 0;
    }
    if (argc >= 3 && !strcmp(argv[1], "layout"))
        return print_layout(argv[2], strlen(argv[2]), argc > 3 ? (unsigned)strtoul(argv[3], NULL, 0) : IEZ_PATTERN_RAID0);
    if (argc == 4 && !strcmp(argv[1], "path")) {
        char out[8192];
        if (iez_path_normalize(argv[2], argv[3], out, sizeof out) < 0)
            return 1;
        puts(out);
        return 0;
    }
    if (argc == 4 && !strcmp(argv[1], "crc")) {
        size_t n = strlen(argv[2]) / 2, split = strtoul(argv[3], NULL, 10);
        unsigned char *b = malloc(n + 1);
        for (size_t i = 0; i < n; i++)
            sscanf(argv[2] + 2 * i, "%2hhx", &b[i]);
        split = split < n ? split : n;
        printf("%u %u\n", (unsigned)iez_crc32(iez_crc32(0, b, split), b + split, n - split),
               (unsigned)iez_crc32_tables(iez_crc32_tables(0, b, split), b + split, n - split));
        free(b);
        return 0;
    }
    fprintf(stderr, "usage: iez-probe plan|load|read|find|findtime|layout|path|crc ...\n");
    return 2;
}

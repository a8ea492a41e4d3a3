/* The HACC-IO-like workload, after HACC-IO's POSIX path (CORAL benchmark, RestartIO_GLEAN).
 *
 * Files: <path>-Part%08d-of-%08d.data, one per rank (-F) or one shared (Part00000000-of-00000001).
 * Each file is a header of --header-size bytes (HACC-IO: 24 MiB) then, for each rank in the
 * file, its particles variable by variable: xx yy zz vx vy vz phi (float), pid (int64), mask
 * (uint16), 38 bytes a particle; a rank's block starts at header + 38 * (particles of the
 * ranks before it in the file). Writing: the file's first rank creates it and sets its full
 * size (HACC-IO preallocates), everyone opens it, writes its variables in order, and the first
 * rank writes the header last. Reading: the first rank reads the header, then everyone reads
 * its variables. Each variable is one contiguous run of calls of at most CHUNK bytes, so a
 * rank's memory stays bounded however many particles it has. HACC-IO keeps its files. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#define CHUNK (16u << 20)

int hacc_file_name(const struct bench_params *p, int rank, char *out, size_t n)
{
    int part = p->fpp ? rank : 0, parts = p->fpp ? p->ranks : 1;
    int k = snprintf(out, n, "%s-Part%08d-of-%08d.data", p->test_file, part, parts);
    return k < 0 || (size_t)k >= n ? -1 : 0;
}

/* The ranks that share this rank's file: [first, first + members). */
struct hacc_file {
    char name[PATH_MAX];
    int first, members;
    uint64_t before;      /* particles of all ranks before this one (its first particle id) */
    uint64_t in_file;     /* particles of the ranks before this one in the same file */
    uint64_t particles;   /* in the whole file */
    uint64_t total;       /* in the whole job */
};

static void describe(const struct bench_params *p, int rank, struct hacc_file *h)
{
    h->first = p->fpp ? rank : 0;
    h->members = p->fpp ? 1 : p->ranks;
    h->before = h->in_file = h->particles = h->total = 0;
    for (int i = 0; i < p->ranks; i++) {
        h->total += p->particles[i];
        h->before += i < rank ? p->particles[i] : 0;
        if (i >= h->first && i < h->first + h->members) {
            h->particles += p->particles[i];
            h->in_file += i < rank ? p->particles[i] : 0;
        }
    }
}

/* HACC-IO's header: int64 words; the per-rank particle counts and global ranks follow word 16. */
static int64_t *header_of(const struct bench_params *p, const struct hacc_file *h)
{
    int64_t *w = calloc(1, p->header); /* mostly zero: calloc leaves the pages untouched */
    if (!w) {
        bench_fail_msg("cannot allocate the %llu-byte header", (unsigned long long)p->header);
        return NULL;
    }
    w[1] = HACC_HEADER_META;
    w[2] = (int64_t)p->header;
    w[3] = HACC_RECORD;
    w[4] = (int64_t)h->particles;
    w[5] = (int64_t)h->total;
    w[6] = h->members;
    w[7] = p->fpp ? p->ranks : 1;
    w[8] = h->first;
    for (int i = 0; i < h->members; i++) {
        w[HACC_HEADER_META + i] = (int64_t)p->particles[h->first + i];
        w[HACC_HEADER_META + h->members + i] = h->first + i;
    }
    return w;
}

/* Move this rank's nine variables; on read, compare them with what was written when verifying.
 * Collective (-c): every rank of the file makes as many calls as the one with the most
 * particles, the calls past its own particles moving nothing, as collective calls must. */
static int variables(const struct bench_params *p, const struct bench_comm *c, struct bench_result *r,
                     enum bench_access access, struct bench_file *f, const struct hacc_file *h, void *buf,
                     void *want)
{
    struct bench_times *t = &r->phase[access];
    uint64_t count = p->particles[c->rank], most = count;
    for (int i = 0; p->collective && i < h->members; i++)
        if (p->particles[h->first + i] > most)
            most = p->particles[h->first + i];
    uint64_t off = p->header + h->in_file * HACC_RECORD;
    for (int v = 0; v < HACC_VARS; v++) {
        uint64_t size = hacc_var_size(v), step = CHUNK / size;
        for (uint64_t i = 0; i < most; i += step) {
            uint64_t n = i >= count ? 0 : count - i < step ? count - i : step;
            if (!n) { /* a collective call with nothing of this rank's */
                if (p->api->xfer(access, f, buf, 0, off))
                    return -1;
                continue;
            }
            if (access == BENCH_WRITE)
                hacc_fill(v, buf, h->before + i, n, c->rank);
            if (p->api->xfer(access, f, buf, n * size, off + i * size))
                return -1;
            if (want) {
                hacc_fill(v, want, h->before + i, n, c->rank);
                bench_compare(r, h->name, off + i * size, want, buf, n * size);
            }
            t->bytes += n * size;
            t->ops++;
        }
        off += count * size;
    }
    return 0;
}

static int sync_file(const struct bench_params *p, const struct bench_comm *c)
{
    return p->fpp ? 0 : c->barrier(); /* HACC-IO's barriers are over the ranks of one file */
}

static int header_io(const struct bench_params *p, struct bench_result *r, enum bench_access access,
                     struct bench_file *f, const struct hacc_file *h, void *hdr)
{
    if (p->api->xfer(access, f, hdr, p->header, 0))
        return -1;
    r->phase[access].bytes += p->header;
    r->phase[access].ops++;
    if (access == BENCH_READ && p->verify) {
        int64_t *want = header_of(p, h);
        if (!want)
            return -1;
        bench_compare(r, h->name, 0, want, hdr, p->header);
        free(want);
    }
    return 0;
}

/* The file's first rank creates it at its full size (HACC-IO preallocates); with MPI-IO or
 * HDF5 all the file's ranks do it at once. */
static int preallocate(const struct bench_params *p, const struct hacc_file *h)
{
    struct bench_file *f = p->api->create(h->name, !p->fpp, p->header + h->particles * HACC_RECORD);
    if (!f)
        return -1;
    int rc = p->api->set_size(f, p->header + h->particles * HACC_RECORD);
    return p->api->close(f) || rc ? -1 : 0;
}

static int read_header(const struct bench_params *p, struct bench_result *r, const struct hacc_file *h)
{
    struct bench_file *f = p->api->open(h->name, BENCH_READ, 0); /* the first rank alone */
    void *hdr = f ? calloc(1, p->header) : NULL;
    if (f && !hdr)
        bench_fail_msg("cannot allocate the %llu-byte header", (unsigned long long)p->header);
    int rc = hdr ? header_io(p, r, BENCH_READ, f, h, hdr) : -1;
    free(hdr);
    if (f && p->api->close(f))
        rc = -1;
    return rc;
}

static int write_header(const struct bench_params *p, struct bench_result *r, struct bench_file *f,
                        const struct hacc_file *h)
{
    int64_t *hdr = header_of(p, h);
    int rc = hdr ? header_io(p, r, BENCH_WRITE, f, h, hdr) : -1;
    free(hdr);
    return rc;
}

/* One phase in HACC-IO's order. Writing: preallocate, open, variables, header, barrier, close.
 * Reading: header, open, variables, close. */
static int phase(const struct bench_params *p, const struct bench_comm *c, struct bench_result *r,
                 enum bench_access access, const struct hacc_file *h, void *buf, void *want)
{
    struct bench_times *t = &r->phase[access];
    int leader = c->rank == h->first, writing = access == BENCH_WRITE;
    int together = p->api->collective_open && !p->fpp; /* the file's ranks create it at once */
    if (c->barrier())
        return -1;
    t->open_start = bench_now();
    if (writing ? (leader || together) && preallocate(p, h) : leader && p->header && read_header(p, r, h))
        return -1;
    struct bench_file *f = NULL;
    if (sync_file(p, c) || !(f = p->api->open(h->name, access, !p->fpp)) || sync_file(p, c))
        goto fail;
    t->open_end = t->xfer_start = bench_now();
    if (variables(p, c, r, access, f, h, buf, want))
        goto fail;
    t->xfer_end = t->close_start = bench_now();
    /* collective: the other ranks of the file join the header's write with nothing */
    if (writing && !leader && p->header && p->collective && p->api->xfer(access, f, buf, 0, 0))
        goto fail;
    if (writing && ((leader && p->header && write_header(p, r, f, h)) || sync_file(p, c) ||
                    (p->fsync && p->api->fsync(f))))
        goto fail;
    int rc = p->api->close(f);
    if (rc || sync_file(p, c))
        return -1;
    t->close_end = bench_now();
    r->ran[access] = 1;
    return 0;
fail:
    if (f)
        p->api->close(f);
    return -1;
}

int hacc_run(const struct bench_params *p, const struct bench_comm *c, struct bench_result *r)
{
    struct hacc_file h;
    describe(p, c->rank, &h);
    if (hacc_file_name(p, c->rank, h.name, sizeof h.name)) {
        bench_fail_msg("the file name of rank %d is longer than PATH_MAX", c->rank);
        return -1;
    }
    uint64_t most = p->particles[c->rank] * sizeof(int64_t); /* the widest variable */
    size_t size = most < CHUNK ? (size_t)most : CHUNK;
    void *buf = bench_alloc(size);
    void *want = p->verify ? bench_alloc(size) : NULL;
    int rc = -1;
    if (buf && (want || !p->verify) && (!p->write || !phase(p, c, r, BENCH_WRITE, &h, buf, NULL)) &&
        (!p->read || !phase(p, c, r, BENCH_READ, &h, buf, want)))
        rc = 0;
    free(buf);
    free(want);
    return rc;
}

/* The IOR-like workload: segments x block per rank, moved in transfer-size calls.
 *
 * File per process (-F): rank r uses <testFile>.%08d and writes block b of segment s at
 * s*block. Shared file: every rank uses <testFile>, and block (s, r) sits at
 * (s*ranks + r)*block, as IOR lays it out (segment-major). The creating rank (rank 0 of a shared
 * file, each rank of its own) removes an existing file first, as IOR does unless -E, so the file
 * is created anew and gets a new layout; the others open it after a barrier (with MPI-IO and
 * HDF5 every rank opens the shared file at once, creating it, as IOR's MPIIO backend does).
 * Files are removed at the end unless -k. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"

int ior_file_name(const struct bench_params *p, int rank, char *out, size_t n)
{
    int k = p->fpp ? snprintf(out, n, "%s.%08d", p->test_file, rank) : snprintf(out, n, "%s", p->test_file);
    return k < 0 || (size_t)k >= n ? -1 : 0;
}

static uint64_t offset_of(const struct bench_params *p, int rank, uint64_t seg, uint64_t k)
{
    uint64_t block_index = p->fpp ? seg : seg * (uint64_t)p->ranks + (uint64_t)rank;
    return block_index * p->block + k * p->transfer;
}

static struct bench_file *open_phase(const struct bench_params *p, const struct bench_comm *c,
                                     enum bench_access access, const char *file, int creator)
{
    int shared = !p->fpp;
    uint64_t size = p->block * p->segments * (uint64_t)(shared ? p->ranks : 1);
    if (access == BENCH_READ)
        return p->api->open(file, BENCH_READ, shared);
    if (shared && p->api->collective_open) /* MPI-IO, HDF5: every rank creates the shared file at once */
        return p->api->create(file, 1, size);
    struct bench_file *f = NULL;
    if (creator && !(f = p->api->create(file, shared, size)))
        return NULL;
    if (shared && c->barrier()) {
        if (f)
            p->api->close(f);
        return NULL;
    }
    return creator ? f : p->api->open(file, BENCH_WRITE, shared);
}

static int phase(const struct bench_params *p, const struct bench_comm *c, struct bench_result *r,
                 enum bench_access access, const char *file, int creator, uint64_t *buf, uint64_t *want)
{
    struct bench_times *t = &r->phase[access];
    if (c->barrier())
        return -1;
    t->open_start = bench_now();
    struct bench_file *f = open_phase(p, c, access, file, creator);
    if (!f)
        return -1;
    t->open_end = t->xfer_start = bench_now();
    uint64_t words = p->transfer / 8, per_block = p->block / p->transfer;
    for (uint64_t seg = 0; seg < p->segments; seg++) {
        for (uint64_t k = 0; k < per_block; k++) {
            uint64_t off = offset_of(p, c->rank, seg, k);
            if (access == BENCH_WRITE)
                ior_fill(buf, words, c->rank, off, p->signature);
            if (p->api->xfer(access, f, buf, p->transfer, off)) {
                p->api->close(f);
                return -1;
            }
            if (want) {
                ior_fill(want, words, c->rank, off, p->signature);
                bench_compare(r, file, off, want, buf, p->transfer);
            }
            t->bytes += p->transfer;
            t->ops++;
        }
    }
    t->xfer_end = t->close_start = bench_now();
    int rc = access == BENCH_WRITE && p->fsync ? p->api->fsync(f) : 0;
    rc |= p->api->close(f);
    t->close_end = bench_now();
    r->ran[access] = 1;
    return rc ? -1 : 0;
}

int ior_run(const struct bench_params *p, const struct bench_comm *c, struct bench_result *r)
{
    char file[PATH_MAX];
    if (ior_file_name(p, c->rank, file, sizeof file)) {
        bench_fail_msg("the file name of rank %d is longer than PATH_MAX", c->rank);
        return -1;
    }
    int creator = p->fpp || c->rank == 0;
    uint64_t *buf = bench_alloc(p->transfer);
    uint64_t *want = p->verify ? bench_alloc(p->transfer) : NULL;
    int rc = -1;
    if (!buf || (p->verify && !want))
        goto out;
    if (p->write && creator && !p->use_existing && p->api->remove(file))
        goto out;
    if (p->write && phase(p, c, r, BENCH_WRITE, file, creator, buf, NULL))
        goto out;
    if (p->read && phase(p, c, r, BENCH_READ, file, creator, buf, want))
        goto out;
    if (!p->keep && (c->barrier() || (creator && p->api->remove(file))))
        goto out;
    rc = 0;
out:
    free(buf);
    free(want);
    return rc;
}

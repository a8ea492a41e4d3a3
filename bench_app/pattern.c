/* The data every rank writes, so that reading back can tell each byte's rank and offset.
 *
 * IOR-like: each 8-byte little-endian word holds (rank << 48 | file offset of the word) XOR the
 * signature (-G), in the spirit of IOR's offset packets: a misplaced or corrupted byte shows.
 * HACC-IO-like: particle i of a rank has the global id g (the particles of lower ranks come
 * first); xx..phi = (float)g + 0.25 * variable number, pid = g, mask = rank (as HACC-IO). */
#include <endian.h>
#include <stdio.h>
#include <string.h>

#include "bench.h"

void ior_fill(uint64_t *buf, uint64_t words, int rank, uint64_t offset, uint64_t signature)
{
    uint64_t hi = (uint64_t)rank << 48;
    for (uint64_t i = 0; i < words; i++)
        buf[i] = htole64((hi | (offset + 8 * i)) ^ signature);
}

static const char *const hacc_names[HACC_VARS] = {"xx", "yy", "zz", "vx", "vy", "vz", "phi", "pid", "mask"};

const char *hacc_var_name(int var) { return hacc_names[var]; }

size_t hacc_var_size(int var) { return var < 7 ? sizeof(float) : var == 7 ? sizeof(int64_t) : sizeof(uint16_t); }

void hacc_fill(int var, void *buf, uint64_t first_id, uint64_t count, int rank)
{
    if (var < 7) {
        float *f = buf;
        for (uint64_t i = 0; i < count; i++)
            f[i] = (float)(first_id + i) + 0.25f * (float)var;
    } else if (var == 7) {
        int64_t *pid = buf;
        for (uint64_t i = 0; i < count; i++)
            pid[i] = (int64_t)(first_id + i);
    } else {
        uint16_t *mask = buf;
        for (uint64_t i = 0; i < count; i++)
            mask[i] = (uint16_t)rank;
    }
}

void bench_compare(struct bench_result *r, const char *file, uint64_t offset, const void *want, const void *got,
                   uint64_t len)
{
    r->checked += len;
    if (!memcmp(want, got, len))
        return;
    const unsigned char *w = want, *g = got;
    for (uint64_t i = 0; i < len; i++) {
        if (w[i] == g[i])
            continue;
        if (!r->mismatched++) {
            r->bad_offset = offset + i;
            r->bad_expected = w[i];
            r->bad_found = g[i];
            snprintf(r->bad_file, sizeof r->bad_file, "%s", file);
        }
    }
}

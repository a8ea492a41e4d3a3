/* lov_user_md encoder and decoder; offsets and sizes from lustre_user.h @2.16.0 (references: l-abi-structs).
 * Byte-for-byte equal to iez.layout.lum.encode (tests/vectors/lum). */
#include "lum.h"
#include "hot.h"

#include <stdlib.h>
#include <string.h>

#define LUM_V1_SIZE 32       /* sizeof(struct lov_user_md_v1) */
#define LUM_V3_SIZE 48       /* sizeof(struct lov_user_md_v3) */
#define LUM_OST_SIZE 24      /* sizeof(struct lov_user_ost_data_v1) */
#define LCM_SIZE 32          /* sizeof(struct lov_comp_md_v1) */
#define LCME_SIZE 48         /* sizeof(struct lov_comp_md_entry_v1) */
#define LOV_OFFSET_DEFAULT 0xFFFF

static void put16(unsigned char *p, uint16_t v) { memcpy(p, &v, 2); }
static void put32(unsigned char *p, uint32_t v) { memcpy(p, &v, 4); }
static void put64(unsigned char *p, uint64_t v) { memcpy(p, &v, 8); }

static uint32_t stripe_magic(const struct iez_stripe *s)
{
    return s->nosts ? IEZ_LOV_USER_MAGIC_SPECIFIC : s->pool_len ? IEZ_LOV_USER_MAGIC_V3 : IEZ_LOV_USER_MAGIC_V1;
}

static size_t stripe_size(const struct iez_stripe *s)
{
    return (stripe_magic(s) == IEZ_LOV_USER_MAGIC_V1 ? LUM_V1_SIZE : LUM_V3_SIZE) + (size_t)LUM_OST_SIZE * s->nosts;
}

/* buf is zeroed by the caller */
static void encode_stripe(const struct iez_stripe *s, unsigned char *b)
{
    uint32_t magic = stripe_magic(s);
    put32(b + 0, magic);                                  /* lmm_magic */
    put32(b + 4, s->pattern);                             /* lmm_pattern */
    put32(b + 24, (uint32_t)s->size);                     /* lmm_stripe_size */
    put16(b + 28, (uint16_t)s->count);                    /* lmm_stripe_count; -1 = 0xFFFF, all OSTs */
    put16(b + 30, s->offset < 0 ? LOV_OFFSET_DEFAULT : (uint16_t)s->offset); /* lmm_stripe_offset */
    unsigned char *objects = b + LUM_V1_SIZE;
    if (magic != IEZ_LOV_USER_MAGIC_V1) {
        memcpy(b + 32, s->pool, s->pool_len);             /* lmm_pool_name[16], NUL-padded */
        objects = b + LUM_V3_SIZE;
    }
    for (uint32_t i = 0; i < s->nosts; i++)
        put32(objects + (size_t)LUM_OST_SIZE * i + 20, s->osts[i]); /* l_ost_idx */
}

IEZ_HOT size_t iez_lum_size(const struct iez_layout *lay)
{
    if (!lay->composite)
        return stripe_size(&lay->comp[0].s);
    size_t n = LCM_SIZE + (size_t)LCME_SIZE * lay->ncomp;
    for (uint32_t i = 0; i < lay->ncomp; i++)
        n += stripe_size(&lay->comp[i].s);
    return n;
}

IEZ_HOT size_t iez_lum_encode(const struct iez_layout *lay, void *buf, size_t cap)
{
    size_t total = iez_lum_size(lay);
    if (total > cap || total > UINT32_MAX || lay->ncomp > UINT16_MAX)
        return 0;
    unsigned char *b = buf;
    memset(b, 0, total);
    if (!lay->composite) {
        encode_stripe(&lay->comp[0].s, b);
        return total;
    }
    put32(b + 0, IEZ_LOV_USER_MAGIC_COMP_V1);             /* lcm_magic */
    put32(b + 4, (uint32_t)total);                        /* lcm_size */
    put16(b + 14, (uint16_t)lay->ncomp);                  /* lcm_entry_count */
    size_t at = LCM_SIZE + (size_t)LCME_SIZE * lay->ncomp;
    for (uint32_t i = 0; i < lay->ncomp; i++) {
        const struct iez_comp *c = &lay->comp[i];
        unsigned char *e = b + LCM_SIZE + (size_t)LCME_SIZE * i;
        size_t sz = stripe_size(&c->s);
        put64(e + 8, c->start);                           /* lcme_extent.e_start */
        put64(e + 16, c->end);                            /* lcme_extent.e_end */
        put32(e + 24, (uint32_t)at);                      /* lcme_offset, from the header's start */
        put32(e + 28, (uint32_t)sz);                      /* lcme_size */
        encode_stripe(&c->s, b + at);
        at += sz;
    }
    return total;
}

IEZ_HOT void *iez_lum_alloc(const struct iez_layout *lay, size_t *len)
{
    size_t n = iez_lum_size(lay);
    void *buf = aligned_alloc(8, (n + 7) & ~(size_t)7);
    if (buf && iez_lum_encode(lay, buf, n) != n) {
        free(buf);
        buf = NULL;
    }
    *len = n;
    return buf;
}

IEZ_HOT void iez_lum_number_components(void *buf, const struct iez_layout *lay)
{
    if (!lay->composite)
        return;
    for (uint32_t i = 0; i < lay->ncomp; i++)
        put32((unsigned char *)buf + LCM_SIZE + (size_t)LCME_SIZE * i, i + 1); /* lcme_id */
}

static uint16_t get16(const unsigned char *p) { uint16_t v; memcpy(&v, p, 2); return v; }
static uint32_t get32(const unsigned char *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint64_t get64(const unsigned char *p) { uint64_t v; memcpy(&v, p, 8); return v; }

#define LCM_MIRROR_COUNT_AT 16
#define LOV_ALL_STRIPES 0xFFFF

/* One lov_mds_md_v1/v3 blob of n bytes at b into s, its objects' OST indices into osts (room
 * for IEZ_MAX_STRIPE_COUNT): 0 or -1. */
static int decode_stripe(const unsigned char *b, size_t n, struct iez_stripe *s, uint16_t *osts)
{
    if (n < LUM_V1_SIZE)
        return -1;
    uint32_t magic = get32(b);
    size_t objects = magic == IEZ_LOV_USER_MAGIC_V1 ? LUM_V1_SIZE : LUM_V3_SIZE;
    if ((magic != IEZ_LOV_USER_MAGIC_V1 && magic != IEZ_LOV_USER_MAGIC_V3 && magic != IEZ_LOV_USER_MAGIC_SPECIFIC) ||
        n < objects)
        return -1;
    s->pattern = get32(b + 4);
    s->size = get32(b + 24);
    uint16_t count = get16(b + 28);
    size_t nobj = (n - objects) / LUM_OST_SIZE;
    if (nobj > IEZ_MAX_STRIPE_COUNT || (count != LOV_ALL_STRIPES && nobj > count))
        return -1;
    s->count = count == LOV_ALL_STRIPES ? (nobj ? (int32_t)nobj : -1) : count;
    s->offset = -1;
    s->nosts = (uint32_t)nobj;
    s->osts = osts;
    for (size_t i = 0; i < nobj; i++) {
        uint32_t idx = get32(b + objects + LUM_OST_SIZE * i + 20); /* l_ost_idx */
        if (idx > IEZ_MAX_OST_INDEX) /* a slot without an object yet (DUMMY_OST) */
            s->nosts = 0;
        else
            osts[i] = (uint16_t)idx;
    }
    if (s->nosts && (uint32_t)s->count != s->nosts)
        s->nosts = 0;
    return 0;
}

int iez_lum_decode(const void *buf, size_t n, struct iez_layout *out)
{
    const unsigned char *b = buf;
    memset(out, 0, sizeof *out);
    if (n < 4)
        return -1;
    int composite = get32(b) == IEZ_LOV_USER_MAGIC_COMP_V1;
    uint32_t ncomp = 1;
    if (composite) {
        if (n < LCM_SIZE || get32(b + 4) > n || get16(b + 14) == 0 || get16(b + LCM_MIRROR_COUNT_AT))
            return -1; /* a mirrored (FLR) file's bytes are in several places */
        ncomp = get16(b + 14);
        if (LCM_SIZE + (size_t)LCME_SIZE * ncomp > n)
            return -1;
    }
    out->comp = calloc(ncomp, sizeof *out->comp);
    out->osts_mem = malloc((size_t)ncomp * IEZ_MAX_STRIPE_COUNT * sizeof *out->osts_mem);
    if (!out->comp || !out->osts_mem)
        goto bad;
    out->composite = composite;
    out->ncomp = ncomp;
    for (uint32_t i = 0; i < ncomp; i++) {
        struct iez_comp *c = &out->comp[i];
        const unsigned char *blob = b;
        size_t len = n;
        c->start = 0;
        c->end = IEZ_LUSTRE_EOF;
        if (composite) {
            const unsigned char *e = b + LCM_SIZE + (size_t)LCME_SIZE * i;
            uint32_t at = get32(e + 24), sz = get32(e + 28);
            if ((uint64_t)at + sz > n)
                goto bad;
            c->start = get64(e + 8);
            c->end = get64(e + 16);
            blob = b + at;
            len = sz;
        }
        if (decode_stripe(blob, len, &c->s, out->osts_mem + (size_t)i * IEZ_MAX_STRIPE_COUNT))
            goto bad;
    }
    return 0;
bad:
    iez_layout_free(out);
    return -1;
}

#include <ctype.h>
/* The plan grammar's layouts (docs/plan-format.md): parse with every rule iez.layout.layout
 * applies, and format canonically. Pure: no I/O, no global state. */
#include "layout.h"
#include "hot.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* int := "-"? digit+ (ASCII); overflow of int64 is an error. */
IEZ_HOT static int parse_int(const char *s, size_t n, int64_t *out)
{
    size_t i = 0;
    int neg = 0;
    uint64_t v = 0;
    if (n && s[0] == '-') {
        neg = 1;
        i = 1;
    }
    if (i == n)
        return -1;
    for (; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        if (v > (UINT64_MAX - 9) / 10)
            return -1;
        v = v * 10 + (uint64_t)(s[i] - '0');
        if (v > (uint64_t)INT64_MAX + (uint64_t)neg)
            return -1;
    }
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return 0;
}

/* An extent bound: digits only, up to LUSTRE_EOF; a negative bound is never valid. */
static int parse_u64(const char *s, size_t n, uint64_t *out)
{
    uint64_t v = 0;
    if (!n)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        unsigned d = (unsigned)(s[i] - '0');
        if (v > (UINT64_MAX - d) / 10)
            return -1;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

static const char *memchr_or_end(const char *p, const char *end, char c)
{
    const char *q = memchr(p, c, (size_t)(end - p));
    return q ? q : end;
}

IEZ_HOT static int validate_stripe(const struct iez_stripe *s, char *err, size_t errlen)
{
    if (s->size >= IEZ_STRIPE_SIZE_LIMIT)
        return fail(err, errlen, "stripe size %" PRIu64 " out of range (0 or 64 KiB .. < 4 GiB)", s->size);
    if (s->size % IEZ_MIN_STRIPE_SIZE)
        return fail(err, errlen, "stripe size %" PRIu64 " is not a multiple of 64 KiB", s->size);
    if (s->count < -1 || s->count > IEZ_MAX_STRIPE_COUNT)
        return fail(err, errlen, "stripe count %d out of range (-1 .. %d)", s->count, IEZ_MAX_STRIPE_COUNT);
    if (s->offset < -1 || s->offset > IEZ_MAX_OST_INDEX)
        return fail(err, errlen, "stripe offset %d out of range (-1 .. 65534)", s->offset);
    if (!s->nosts)
        return 0;
    /* a repeated OST: pairwise for the usual short lists, one bit per OST index for long ones */
    int in_list = s->offset == -1;
    for (uint32_t i = 0; i < s->nosts; i++)
        in_list |= (int)s->osts[i] == s->offset;
    if (s->nosts <= 32) {
        for (uint32_t i = 1; i < s->nosts; i++)
            for (uint32_t j = 0; j < i; j++)
                if (s->osts[i] == s->osts[j])
                    return fail(err, errlen, "OST list repeats OST %u (only overstriping may)", s->osts[i]);
    } else {
        uint64_t seen[(IEZ_MAX_OST_INDEX + 64) / 64];
        memset(seen, 0, sizeof seen);
        for (uint32_t i = 0; i < s->nosts; i++) {
            unsigned o = s->osts[i];
            if (seen[o / 64] & (1ull << (o % 64)))
                return fail(err, errlen, "OST list repeats OST %u (only overstriping may)", o);
            seen[o / 64] |= 1ull << (o % 64);
        }
    }
    if (s->count != 0 && (uint32_t)s->count != s->nosts)
        return fail(err, errlen, "stripe count %d differs from the OST list length %u", s->count, s->nosts);
    if (!in_list)
        return fail(err, errlen, "stripe offset %d is not in the OST list", s->offset);
    return 0;
}

/* plain := field ("," field)*, as iez.plan.parse_plain. OSTs go to *osts (capacity checked by
 * the caller's sizing). */
IEZ_HOT static int parse_plain(const char *p, const char *end, struct iez_stripe *s, uint16_t *osts,
                       char *err, size_t errlen)
{
    unsigned have = 0;
    memset(s, 0, sizeof *s);
    s->offset = -1;
    s->pattern = IEZ_PATTERN_RAID0;
    s->osts = osts;
    for (;;) {
        const char *item_end = memchr_or_end(p, end, ',');
        const char *eq = memchr(p, '=', (size_t)(item_end - p));
        size_t klen = eq ? (size_t)(eq - p) : 0;
        static const char keys[] = "Scipo";
        const char *k = (eq && klen == 1) ? strchr(keys, p[0]) : NULL;
        if (!k || !p[0])
            return fail(err, errlen, "bad layout field '%.*s' (fields: S, c, i, p, o)",
                        (int)(item_end - p > 40 ? 40 : item_end - p), p);
        unsigned bit = 1u << (k - keys);
        if (have & bit)
            return fail(err, errlen, "layout field %c given twice", *k);
        have |= bit;
        const char *v = eq + 1;
        size_t vlen = (size_t)(item_end - v);
        int64_t n = 0;
        if (*k == 'p') {
            if (vlen > IEZ_MAXPOOLNAME)
                return fail(err, errlen, "pool name is longer than %d bytes", IEZ_MAXPOOLNAME);
            for (size_t i = 0; i < vlen; i++) /* as iez.plan: no separator or blank in a pool name */
                if (!isalnum((unsigned char)v[i]) && v[i] != '_' && v[i] != '.' && v[i] != '-')
                    return fail(err, errlen, "bad pool name (letters, digits, '_', '.', '-')");
            memcpy(s->pool, v, vlen);
            s->pool[vlen] = 0;
            s->pool_len = (uint32_t)vlen;
        } else if (*k == 'o') {
            const char *q = v;
            for (;;) {
                const char *colon = memchr_or_end(q, item_end, ':');
                if (parse_int(q, (size_t)(colon - q), &n))
                    return fail(err, errlen, "bad number in layout field 'o=%.*s'", (int)(vlen > 40 ? 40 : vlen), v);
                if (n < 0 || n > IEZ_MAX_OST_INDEX)
                    return fail(err, errlen, "OST index %" PRId64 " out of range (0 .. 65534)", n);
                osts[s->nosts++] = (uint16_t)n;
                if (colon == item_end)
                    break;
                q = colon + 1;
            }
        } else {
            if (parse_int(v, vlen, &n))
                return fail(err, errlen, "bad number in layout field '%c=%.*s'", *k, (int)(vlen > 40 ? 40 : vlen), v);
            if (*k == 'S') {
                if (n < 0 || (uint64_t)n >= IEZ_STRIPE_SIZE_LIMIT)
                    return fail(err, errlen, "stripe size %" PRId64 " out of range (0 or 64 KiB .. < 4 GiB)", n);
                s->size = (uint64_t)n;
            } else if (n < -1 || n > (*k == 'c' ? IEZ_MAX_STRIPE_COUNT : IEZ_MAX_OST_INDEX)) {
                return fail(err, errlen, "stripe %s %" PRId64 " out of range", *k == 'c' ? "count" : "offset", n);
            } else if (*k == 'c') {
                s->count = (int32_t)n;
            } else {
                s->offset = (int32_t)n;
            }
        }
        if (item_end == end)
            break;
        p = item_end + 1;
    }
    if (s->nosts && s->count == 0)
        s->count = (int32_t)s->nosts;
    return validate_stripe(s, err, errlen);
}

static int reserve(struct iez_layout *lay, size_t ncomp, size_t nosts)
{
    if (ncomp > lay->comp_cap) {
        struct iez_comp *c = realloc(lay->comp, ncomp * sizeof *c);
        if (!c)
            return -1;
        lay->comp = c;
        lay->comp_cap = ncomp;
    }
    if (nosts > lay->osts_cap) {
        uint16_t *o = realloc(lay->osts_mem, nosts * sizeof *o);
        if (!o)
            return -1;
        lay->osts_mem = o;
        lay->osts_cap = nosts;
    }
    return 0;
}

IEZ_HOT int iez_layout_parse(const char *spec, size_t len, struct iez_layout *lay, char *err, size_t errlen)
{
    const char *end = spec + len;
    size_t ncomp = 1;
    for (size_t i = 0; i < len; i++)
        ncomp += spec[i] == ';';
    /* every OST takes a digit and the ':' or '=' before it */
    if (reserve(lay, ncomp, len / 2 + 1))
        return fail(err, errlen, "out of memory");
    lay->ncomp = 0;
    uint16_t *osts = lay->osts_mem;
    if (!memchr(spec, '/', len)) {
        struct iez_comp *c = &lay->comp[0];
        lay->composite = 0;
        c->start = 0;
        c->end = IEZ_LUSTRE_EOF;
        if (parse_plain(spec, end, &c->s, osts, err, errlen))
            return -1;
        lay->ncomp = 1;
        return 0;
    }
    lay->composite = 1;
    const char *p = spec;
    uint64_t prev_end = 0;
    for (;;) {
        const char *part_end = memchr_or_end(p, end, ';');
        const char *slash = memchr(p, '/', (size_t)(part_end - p));
        const char *dash = slash ? memchr(p, '-', (size_t)(slash - p)) : NULL;
        if (!slash || !dash)
            return fail(err, errlen, "bad component '%.*s' (expected START-END/FIELDS)",
                        (int)(part_end - p > 40 ? 40 : part_end - p), p);
        struct iez_comp *c = &lay->comp[lay->ncomp];
        const char *hi = dash + 1;
        size_t hilen = (size_t)(slash - hi);
        if (parse_u64(p, (size_t)(dash - p), &c->start) ||
            !((hilen == 3 && !memcmp(hi, "EOF", 3) && (c->end = IEZ_LUSTRE_EOF, 1)) || !parse_u64(hi, hilen, &c->end)))
            return fail(err, errlen, "bad extent in component '%.*s'", (int)(part_end - p > 40 ? 40 : part_end - p), p);
        if (parse_plain(slash + 1, part_end, &c->s, osts, err, errlen))
            return -1;
        osts += c->s.nosts;
        if (c->start >= c->end)
            return fail(err, errlen, "bad component extent [%" PRIu64 ", %" PRIu64 ")", c->start, c->end);
        if (lay->ncomp == 0 && c->start != 0)
            return fail(err, errlen, "the first component must start at offset 0");
        if (lay->ncomp > 0 && c->start != prev_end)
            return fail(err, errlen, "component extents are not contiguous at %" PRIu64, c->start);
        if (c->end != IEZ_LUSTRE_EOF && c->end % IEZ_MIN_STRIPE_SIZE)
            return fail(err, errlen, "component end %" PRIu64 " is not a multiple of 64 KiB", c->end);
        if (c->s.size && c->end != IEZ_LUSTRE_EOF && c->end % c->s.size)
            return fail(err, errlen, "component end %" PRIu64 " is not a multiple of its stripe size %" PRIu64,
                        c->end, c->s.size);
        prev_end = c->end;
        lay->ncomp++;
        if (part_end == end)
            return 0;
        p = part_end + 1;
    }
}

static int format_stripe(const struct iez_stripe *s, char *buf, size_t cap)
{
    size_t n = 0;
    int w;
#define PUT(...)                                                        \
    do {                                                                \
        w = snprintf(buf + n, cap - n, "%s" __VA_ARGS__);              \
        if (w < 0 || (size_t)w >= cap - n)                              \
            return -1;                                                  \
        n += (size_t)w;                                                 \
    } while (0)
    if (s->size)
        PUT("S=%" PRIu64, n ? "," : "", s->size);
    if (s->count)
        PUT("c=%d", n ? "," : "", s->count);
    if (s->offset != -1)
        PUT("i=%d", n ? "," : "", s->offset);
    if (s->pool_len)
        PUT("p=%.*s", n ? "," : "", (int)s->pool_len, s->pool);
    for (uint32_t i = 0; i < s->nosts; i++)
        PUT("%u", i ? ":" : n ? ",o=" : "o=", s->osts[i]);
    if (!n)
        PUT("c=0", "");
#undef PUT
    return (int)n;
}

int iez_layout_format(const struct iez_layout *lay, char *buf, size_t cap)
{
    if (!lay->composite)
        return format_stripe(&lay->comp[0].s, buf, cap);
    size_t n = 0;
    for (uint32_t i = 0; i < lay->ncomp; i++) {
        const struct iez_comp *c = &lay->comp[i];
        char end[24];
        if (c->end == IEZ_LUSTRE_EOF)
            strcpy(end, "EOF");
        else
            snprintf(end, sizeof end, "%" PRIu64, c->end);
        int w = snprintf(buf + n, cap - n, "%s%" PRIu64 "-%s/", i ? ";" : "", c->start, end);
        if (w < 0 || (size_t)w >= cap - n)
            return -1;
        n += (size_t)w;
        w = format_stripe(&c->s, buf + n, cap - n);
        if (w < 0)
            return -1;
        n += (size_t)w;
    }
    return (int)n;
}

IEZ_HOT void iez_layout_free(struct iez_layout *lay)
{
    free(lay->comp);
    free(lay->osts_mem);
    memset(lay, 0, sizeof *lay);
}

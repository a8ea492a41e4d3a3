/* The plan file, version 1 (docs/plan-format.md). The grammar and every rule are those of
 * iez.plan.load: the file is strict UTF-8 text read with universal newlines, the header is
 * split on Python's whitespace, and a layout obeys iez.layout.layout's validation. The one
 * deliberate difference: an int is "-"? [0-9]+ exactly as the grammar says, where Python's
 * int() would also take "+1", " 1" or "1_0".
 *
 * The table keeps only (offset, hash, path length) per entry and points into the file's bytes,
 * so 1M entries cost the file plus 32 MB; a hit re-parses its layout (well under 1 µs). */
#include "plan.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"
#include "layout.h"
#include "sysio.h"

#define MAGIC "#iez-plan"
#define VERSION "1"

struct slot {
    uint64_t off;  /* of the path in buf */
    uint32_t hash; /* high half of the 64-bit hash (the low half picks the slot) */
    uint32_t plen; /* 0 = empty slot (a planned path is never empty) */
};

struct iez_plan {
    char *buf;
    size_t len;
    struct slot *slots;
    size_t mask, n;
};

/* Strict UTF-8, as Python's decoder: no overlongs, no surrogates, nothing above U+10FFFF. */
static int utf8_valid(const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        if (n - i >= 8) { /* ASCII, 8 bytes at a time */
            uint64_t w;
            memcpy(&w, s + i, 8);
            if (!(w & 0x8080808080808080ull)) {
                i += 8;
                continue;
            }
        }
        unsigned c = s[i];
        if (c < 0x80) {
            i++;
            continue;
        }
        size_t need;
        unsigned lo = 0x80, hi = 0xBF;
        if (c >= 0xC2 && c <= 0xDF)
            need = 1;
        else if (c >= 0xE0 && c <= 0xEF) {
            need = 2;
            if (c == 0xE0)
                lo = 0xA0;
            if (c == 0xED)
                hi = 0x9F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            need = 3;
            if (c == 0xF0)
                lo = 0x90;
            if (c == 0xF4)
                hi = 0x8F;
        } else
            return 0;
        if (n - i <= need)
            return 0;
        if (s[i + 1] < lo || s[i + 1] > hi)
            return 0;
        for (size_t k = 2; k <= need; k++)
            if (s[i + k] < 0x80 || s[i + k] > 0xBF)
                return 0;
        i += need + 1;
    }
    return 1;
}

/* Byte length of the whitespace character at p (Python's str.split() set), or 0. */
static size_t py_space(const unsigned char *p, const unsigned char *end)
{
    size_t n = (size_t)(end - p);
    unsigned c = p[0];
    if (c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F))
        return 1;
    if (n >= 2 && c == 0xC2 && (p[1] == 0x85 || p[1] == 0xA0))
        return 2;
    if (n >= 3 && c == 0xE1 && p[1] == 0x9A && p[2] == 0x80)
        return 3; /* U+1680 */
    if (n >= 3 && c == 0xE2 && p[1] == 0x80 && ((p[2] >= 0x80 && p[2] <= 0x8A) || p[2] == 0xA8 || p[2] == 0xA9 || p[2] == 0xAF))
        return 3; /* U+2000..200A, 2028, 2029, 202F */
    if (n >= 3 && c == 0xE2 && p[1] == 0x81 && p[2] == 0x9F)
        return 3; /* U+205F */
    if (n >= 3 && c == 0xE3 && p[1] == 0x80 && p[2] == 0x80)
        return 3; /* U+3000 */
    return 0;
}

/* The header line holds exactly the tokens "#iez-plan" and "1". */
static int check_header(const char *line, size_t n, const char *source, char *err, size_t errlen)
{
    const unsigned char *p = (const unsigned char *)line, *end = p + n;
    const unsigned char *tok[3];
    size_t toklen[3], ntok = 0;
    while (p < end) {
        size_t w = py_space(p, end);
        if (w) {
            p += w;
            continue;
        }
        const unsigned char *start = p;
        while (p < end && !py_space(p, end))
            p++;
        if (ntok < 3) {
            tok[ntok] = start;
            toklen[ntok] = (size_t)(p - start);
        }
        ntok++;
    }
    if (ntok != 2 || toklen[0] != strlen(MAGIC) || memcmp(tok[0], MAGIC, toklen[0])) {
        snprintf(err, errlen, "%s: not an iez plan (first line must be '" MAGIC " " VERSION "')", source);
        return -1;
    }
    if (toklen[1] != 1 || tok[1][0] != VERSION[0]) {
        snprintf(err, errlen, "%s: plan version %.*s is not supported (this iez reads " VERSION ")", source,
                 (int)(toklen[1] > 20 ? 20 : toklen[1]), (const char *)tok[1]);
        return -1;
    }
    return 0;
}

/* The end of the line starting at p: the first CR or LF (universal newlines). */
static const char *line_end(const char *p, const char *end)
{
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    if (!nl)
        nl = end;
    const char *cr = memchr(p, '\r', (size_t)(nl - p));
    return cr ? cr : nl;
}

static const char *next_line(const char *eol, const char *end)
{
    if (eol < end && *eol == '\r' && eol + 1 < end && eol[1] == '\n')
        return eol + 2;
    return eol < end ? eol + 1 : end;
}

static struct slot *probe(const struct iez_plan *plan, const char *path, size_t plen, uint64_t h)
{
    for (size_t i = h & plan->mask;; i = (i + 1) & plan->mask) {
        struct slot *s = &plan->slots[i];
        if (!s->plen)
            return s;
        if (s->hash == (uint32_t)(h >> 32) && s->plen == plen && !memcmp(plan->buf + s->off, path, plen))
            return s;
    }
}

static int line_error(char *err, size_t errlen, const char *source, size_t no, const char *fmt, ...)
{
    int n = snprintf(err, errlen, "%s:%zu: ", source, no);
    if (n >= 0 && (size_t)n < errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* Entries wait in a short queue between parsing and insertion, so the table slot each one
 * lands in can be prefetched: the inserts are random accesses to a table far larger than the
 * caches, and would otherwise stall on memory one after another. */
#define PENDING 16
struct pending {
    const char *path;
    size_t plen, no;
    uint64_t hash;
};

/* Insert the oldest queued entries until n remain; -1 at a path planned twice. */
static int insert_pending(struct iez_plan *plan, struct pending *q, size_t *head, size_t *count, size_t keep,
                          const char *source, char *err, size_t errlen)
{
    for (; *count > keep; (*count)--, *head = (*head + 1) % PENDING) {
        struct pending *e = &q[*head];
        struct slot *s = probe(plan, e->path, e->plen, e->hash);
        if (s->plen)
            return line_error(err, errlen, source, e->no, "plan: %.*s is planned twice",
                              (int)(e->plen > 200 ? 200 : e->plen), e->path);
        s->off = (uint64_t)(e->path - plan->buf);
        s->hash = (uint32_t)(e->hash >> 32);
        s->plen = (uint32_t)e->plen;
        plan->n++;
    }
    return 0;
}

static int parse_entries(struct iez_plan *plan, const char *source, char *err, size_t errlen)
{
    const char *p = plan->buf, *end = plan->buf + plan->len;
    const char *eol = line_end(p, end);
    if (check_header(p, (size_t)(eol - p), source, err, errlen))
        return -1;
    struct iez_layout lay = {0};
    struct pending q[PENDING];
    size_t head = 0, count = 0;
    char why[200];
    int rc = 0;
    size_t no = 1;
    for (p = next_line(eol, end); p < end && rc == 0; p = next_line(eol, end)) {
        eol = line_end(p, end);
        no++;
        size_t n = (size_t)(eol - p);
        if (!n || p[0] == '#')
            continue;
        const char *tab = memchr(p, '\t', n);
        size_t plen = tab ? (size_t)(tab - p) : 0;
        const char *bad = NULL;
        if (!tab)
            bad = "expected PATH<TAB>LAYOUT";
        else if (!plen || p[0] != '/')
            bad = why, snprintf(why, sizeof why, "plan: path '%.*s' is not absolute", (int)(plen > 80 ? 80 : plen), p);
        else if (memchr(p, '\0', plen))
            bad = "plan: a path holds a NUL byte";
        else if (plen > UINT32_MAX)
            bad = "path too long";
        else if (iez_layout_parse(tab + 1, (size_t)(eol - tab - 1), &lay, why, sizeof why))
            bad = why;
        if (bad) {
            /* an earlier line's duplicate comes first */
            rc = insert_pending(plan, q, &head, &count, 0, source, err, errlen);
            if (rc == 0)
                rc = line_error(err, errlen, source, no, "%s", bad);
            break;
        }
        uint64_t h = iez_hash(p, plen, 0);
        __builtin_prefetch(&plan->slots[h & plan->mask], 1);
        q[(head + count++) % PENDING] = (struct pending){p, plen, no, h};
        if (count == PENDING)
            rc = insert_pending(plan, q, &head, &count, PENDING - 1, source, err, errlen);
    }
    if (rc == 0)
        rc = insert_pending(plan, q, &head, &count, 0, source, err, errlen);
    iez_layout_free(&lay);
    return rc;
}

struct iez_plan *iez_plan_parse(char *buf, size_t len, const char *source, char *err, size_t errlen)
{
    struct iez_plan *plan = calloc(1, sizeof *plan);
    if (!plan) {
        free(buf);
        snprintf(err, errlen, "%s: out of memory", source);
        return NULL;
    }
    plan->buf = buf;
    plan->len = len;
    if (!utf8_valid((const unsigned char *)buf, len)) {
        snprintf(err, errlen, "%s: not an iez plan (not UTF-8 text)", source);
        iez_plan_free(plan);
        return NULL;
    }
    /* at most one entry per line; a load factor <= 1/2 keeps probes short */
    size_t lines = 1;
    for (const char *q = buf; (q = memchr(q, '\n', len - (size_t)(q - buf))); q++)
        lines++;
    for (const char *q = buf; (q = memchr(q, '\r', len - (size_t)(q - buf))); q++)
        lines++;
    size_t cap = 16;
    while (cap < 2 * lines)
        cap *= 2;
    plan->slots = calloc(cap, sizeof *plan->slots);
    plan->mask = cap - 1;
    if (!plan->slots) {
        snprintf(err, errlen, "%s: out of memory for %zu lines", source, lines);
        iez_plan_free(plan);
        return NULL;
    }
    if (parse_entries(plan, source, err, errlen)) {
        iez_plan_free(plan);
        return NULL;
    }
    return plan;
}

struct iez_plan *iez_plan_load(const char *file, char *err, size_t errlen)
{
    char *buf;
    size_t len;
    int rc = iez_read_file(file, IEZ_PLAN_MAX_BYTES, &buf, &len);
    if (rc == -EINVAL)
        snprintf(err, errlen, "cannot read plan %s: not a regular file", file);
    else if (rc == -EFBIG)
        snprintf(err, errlen, "cannot read plan %s: larger than %zu MiB", file, IEZ_PLAN_MAX_BYTES >> 20);
    else if (rc)
        snprintf(err, errlen, "cannot read plan %s: %s", file, strerror(-rc));
    if (rc)
        return NULL;
    return iez_plan_parse(buf, len, file, err, errlen);
}

void iez_plan_free(struct iez_plan *plan)
{
    if (!plan)
        return;
    free(plan->buf);
    free(plan->slots);
    free(plan);
}

size_t iez_plan_size(const struct iez_plan *plan) { return plan->n; }

static const char *spec_of(const struct iez_plan *plan, const struct slot *s, size_t *speclen)
{
    const char *spec = plan->buf + s->off + s->plen + 1;
    *speclen = (size_t)(line_end(spec, plan->buf + plan->len) - spec);
    return spec;
}

const char *iez_plan_find(const struct iez_plan *plan, const char *path, size_t plen, size_t *speclen)
{
    if (!plen || plen > UINT32_MAX)
        return NULL;
    const struct slot *s = probe(plan, path, plen, iez_hash(path, plen, 0));
    return s->plen ? spec_of(plan, s, speclen) : NULL;
}

int iez_plan_next(const struct iez_plan *plan, size_t *iter, const char **path, size_t *plen,
                  const char **spec, size_t *speclen)
{
    for (; *iter <= plan->mask; (*iter)++) {
        const struct slot *s = &plan->slots[*iter];
        if (s->plen) {
            *path = plan->buf + s->off;
            *plen = s->plen;
            *spec = spec_of(plan, s, speclen);
            (*iter)++;
            return 1;
        }
    }
    return 0;
}

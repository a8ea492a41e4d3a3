/* The plan file, versions 1 and 2 (docs/plan-format.md). The grammar and every rule are those of
 * iez.plan.load: the file is strict UTF-8 text read with universal newlines, the header is
 * split on Python's whitespace, and a layout obeys iez.layout.layout's validation. The one
 * deliberate difference: an int is "-"? [0-9]+ exactly as the grammar says, where Python's
 * int() would also take "+1", " 1" or "1_0".
 *
 * The table keeps only (offset, hash, path length) per entry and points into the file's bytes,
 * so 1M entries cost the file plus 32 MB; a hit re-parses its layout (well under 1 µs).
 * A version-2 entry whose path the process's fields change is copied, filled in, to an arena.
 * Entries left with date or random fields (all of fixed width) are keyed by their path with
 * those bytes zeroed, under a shape: where the variable bytes sit, counted from the path's start
 * or, when they are all in the last component, from the basename's. A lookup probes once per
 * shape of its length, never per entry. */
#include "plan.h"
#include "hot.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hash.h"
#include "layout.h"
#include "sysio.h"

#define MAGIC "#iez-plan"
#define VERSIONS "1 and 2"
#define MAX_FIELDS 16 /* fields in one path */
#define MAX_FMT 32    /* bytes of a date/time format */
#define MAX_RAND 64   /* characters of a random field */
#define MAX_KEY 4096  /* PATH_MAX: a longer filled-in name never matches */
#define IN_ARENA (1ull << 63)
#define EXPANDED (1ull << 62) /* filled in from the process's fields: a collision is no error */
#define OFF_MASK (EXPANDED - 1)

struct slot {
    uint64_t off;  /* of the path in buf, or in the arena (IN_ARENA), and EXPANDED */
    uint32_t hash; /* high half of the 64-bit hash (the low half picks the slot) */
    uint32_t plen; /* 0 = empty slot (a planned path is never empty) */
};

/* A variable conversion: len bytes at `at`; kind 'r' ([A-Za-z0-9]) or a strftime letter. */
struct conv {
    uint16_t at;
    uint8_t len;
    char kind;
};

struct shape {
    uint32_t rel;  /* 0: at counts from the path's start; 1: from its basename's */
    uint32_t len;  /* of the path (rel 0) or of the basename (rel 1) */
    uint32_t ncv, cv; /* its conversions: convs[cv .. cv + ncv) */
};

struct tentry {
    uint64_t off;  /* in the arena: the path with variable bytes zeroed, TAB, layout, LF */
    uint32_t plen, hash, shape, line;
};

struct iez_plan {
    char *buf;
    size_t len;
    int version;
    int collread; /* IEZ_COLLREAD_*: the collread meta key */
    struct slot *slots;
    size_t mask, n;
    char *arena; /* filled-in paths, each followed by TAB, its layout and LF */
    size_t alen, acap;
    struct tentry *tents; /* templated entries, in file order */
    size_t nt, tcap;
    uint32_t *tidx; /* hash index of tents (index + 1; 0 = empty) */
    size_t tmask;
    struct shape *shapes;
    size_t nshapes, scap;
    uint32_t *sorder; /* shapes sorted by (rel, len) */
    struct conv *convs;
    size_t ncv, ccap;
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
static int check_header(const char *line, size_t n, const char *source, int *version, char *err, size_t errlen)
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
        snprintf(err, errlen, "%s: not an iez plan (first line must be '" MAGIC " 2')", source);
        return -1;
    }
    if (toklen[1] != 1 || (tok[1][0] != '1' && tok[1][0] != '2')) {
        snprintf(err, errlen, "%s: plan version %.*s is not supported (this iez reads " VERSIONS ")", source,
                 (int)(toklen[1] > 20 ? 20 : toklen[1]), (const char *)tok[1]);
        return -1;
    }
    *version = tok[1][0] - '0';
    return 0;
}

/* The end of the line starting at p: the first CR or LF (universal newlines). */
IEZ_HOT static const char *line_end(const char *p, const char *end)
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

static const char *slot_text(const struct iez_plan *plan, uint64_t off)
{
    return ((off & IN_ARENA) ? plan->arena : plan->buf) + (off & OFF_MASK);
}

IEZ_HOT static struct slot *probe(const struct iez_plan *plan, const char *path, size_t plen, uint64_t h)
{
    for (size_t i = h & plan->mask;; i = (i + 1) & plan->mask) {
        struct slot *s = &plan->slots[i];
        if (!s->plen)
            return s;
        if (s->hash == (uint32_t)(h >> 32) && s->plen == plen && !memcmp(slot_text(plan, s->off), path, plen))
            return s;
    }
}

/* The first error in file order wins, as iez.plan reports it. */
struct first_err {
    size_t no; /* 0 = none yet */
    char msg[300];
};

static void note_err(struct first_err *fe, size_t no, const char *fmt, ...)
{
    if (fe->no && fe->no <= no)
        return;
    fe->no = no;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(fe->msg, sizeof fe->msg, fmt, ap);
    va_end(ap);
}

/* Grow *p (of *cap elements of size sz) to hold need; 0 or -1. */
static int grow(void **p, size_t *cap, size_t need, size_t sz)
{
    if (need <= *cap)
        return 0;
    size_t c = *cap ? *cap : 64;
    while (c < need)
        c *= 2;
    void *q = realloc(*p, c * sz);
    if (!q)
        return -1;
    *p = q;
    *cap = c;
    return 0;
}

/* --- version-2 paths ------------------------------------------------------------------------ */

static const struct {
    const char *name;
    int known; /* IEZ_FIELD_* of a field the process knows, or -1 */
    char kind; /* 'd' date/time, 'r' random, 0 known */
} FIELDS[] = {
    {"job", IEZ_FIELD_JOB, 0},   {"array", IEZ_FIELD_ARRAY, 0}, {"host", IEZ_FIELD_HOST, 0},
    {"fqdn", IEZ_FIELD_FQDN, 0}, {"rank", IEZ_FIELD_RANK, 0},   {"date", -1, 'd'},
    {"time", -1, 'd'},           {"rand", -1, 'r'},
};

/* A parsed version-2 path: the name with known fields filled in and variable bytes zeroed. */
struct parsed {
    char key[MAX_KEY];
    size_t klen;
    int dead;    /* can never match in this process: a field unknown here, or too long */
    int fields;  /* fields written in it */
    int escaped; /* holds "{{" or "}}" */
    struct conv cv[MAX_FIELDS * (MAX_FMT / 2)]; /* a format of 32 bytes holds 16 conversions */
    size_t ncv;
};

static void put(struct parsed *o, const char *s, size_t n)
{
    if (o->dead || o->klen + n > MAX_KEY) {
        o->dead = 1;
        return;
    }
    memcpy(o->key + o->klen, s, n);
    o->klen += n;
}

static void put_conv(struct parsed *o, char kind, size_t len)
{
    size_t at = o->klen;
    static const char zeros[MAX_RAND];
    put(o, zeros, len);
    if (!o->dead)
        o->cv[o->ncv++] = (struct conv){(uint16_t)at, (uint8_t)len, kind};
}

/* A date/time format: %Y %m %d %H %M %S and the separators - _ . : T, at least one conversion. */
static int date_format(const char *f, size_t n, struct parsed *o)
{
    int convs = 0;
    if (!n || n > MAX_FMT)
        return -1;
    for (size_t i = 0; i < n; i++) {
        if (f[i] == '%' && i + 1 < n && strchr("YmdHMS", f[i + 1]) && f[i + 1]) {
            put_conv(o, f[i + 1], f[i + 1] == 'Y' ? 4 : 2);
            convs++;
            i++;
        } else if (strchr("-_.:T", f[i]) && f[i]) {
            put(o, &f[i], 1);
        } else
            return -1;
    }
    return convs ? 0 : -1;
}

static int parse_field(const char *b, size_t n, const struct iez_plan_env *env, struct parsed *o, char *why,
                       size_t whylen)
{
    const char *colon = memchr(b, ':', n);
    size_t nlen = colon ? (size_t)(colon - b) : n;
    const char *arg = colon ? colon + 1 : NULL;
    size_t alen = colon ? n - nlen - 1 : 0;
    for (size_t k = 0; k < sizeof FIELDS / sizeof *FIELDS; k++) {
        if (strlen(FIELDS[k].name) != nlen || memcmp(FIELDS[k].name, b, nlen))
            continue;
        if (!FIELDS[k].kind) {
            if (arg)
                return snprintf(why, whylen, "plan: field {%s} takes no argument", FIELDS[k].name), -1;
            const char *v = env ? env->val[FIELDS[k].known] : NULL;
            if (!v || !*v || strchr(v, '/'))
                o->dead = 1;
            else
                put(o, v, strlen(v));
            return 0;
        }
        if (!arg)
            return snprintf(why, whylen, "plan: field {%s} needs an argument", FIELDS[k].name), -1;
        if (FIELDS[k].kind == 'd') {
            if (date_format(arg, alen, o))
                return snprintf(why, whylen, "plan: bad %s format '%.*s'", FIELDS[k].name,
                                (int)(alen > 40 ? 40 : alen), arg), -1;
            return 0;
        }
        /* rand: 1 to 64, no leading zero */
        unsigned v = 0;
        int ok = alen >= 1 && alen <= 2 && arg[0] >= '1' && arg[0] <= '9';
        for (size_t i = 0; ok && i < alen; i++)
            ok = arg[i] >= '0' && arg[i] <= '9', v = v * 10 + (unsigned)(arg[i] - '0');
        if (!ok || v > MAX_RAND)
            return snprintf(why, whylen, "plan: bad random field length '%.*s' (1 to %d)",
                            (int)(alen > 40 ? 40 : alen), arg, MAX_RAND), -1;
        put_conv(o, 'r', v);
        return 0;
    }
    return snprintf(why, whylen, "plan: unknown field {%.*s}", (int)(nlen > 40 ? 40 : nlen), b), -1;
}

static int parse_path(const char *p, size_t n, const struct iez_plan_env *env, struct parsed *o, char *why,
                      size_t whylen)
{
    o->klen = o->ncv = 0;
    o->dead = o->fields = o->escaped = 0;
    size_t i = 0;
    while (i < n) {
        const char *brace = p + i;
        while (brace < p + n && *brace != '{' && *brace != '}')
            brace++;
        put(o, p + i, (size_t)(brace - p - i));
        i = (size_t)(brace - p);
        if (i >= n)
            break;
        if (i + 1 < n && p[i + 1] == p[i]) { /* {{ or }} */
            put(o, p + i, 1);
            o->escaped = 1;
            i += 2;
            continue;
        }
        if (p[i] == '}')
            return snprintf(why, whylen, "plan: a lone '}' in a path (write '}}')"), -1;
        const char *close = memchr(p + i + 1, '}', n - i - 1);
        if (!close)
            return snprintf(why, whylen, "plan: a field without its '}' (a literal '{' is '{{')"), -1;
        if (++o->fields > MAX_FIELDS)
            return snprintf(why, whylen, "plan: more than %d fields in a path", MAX_FIELDS), -1;
        if (parse_field(p + i + 1, (size_t)(close - p - i - 1), env, o, why, whylen))
            return -1;
        i = (size_t)(close - p) + 1;
    }
    return 0;
}

/* Append the path, TAB, the layout and LF to the arena: its offset, or UINT64_MAX. */
static uint64_t to_arena(struct iez_plan *plan, const char *path, size_t plen, const char *spec, size_t slen)
{
    if (grow((void **)&plan->arena, &plan->acap, plan->alen + plen + slen + 2, 1))
        return UINT64_MAX;
    uint64_t off = plan->alen;
    memcpy(plan->arena + off, path, plen);
    plan->arena[off + plen] = '\t';
    memcpy(plan->arena + off + plen + 1, spec, slen);
    plan->arena[off + plen + slen + 1] = '\n';
    plan->alen += plen + slen + 2;
    return off;
}

static int same_shape(const struct iez_plan *plan, const struct shape *s, uint32_t rel, uint32_t len,
                      const struct conv *cv, size_t ncv)
{
    return s->rel == rel && s->len == len && s->ncv == ncv && !memcmp(plan->convs + s->cv, cv, ncv * sizeof *cv);
}

/* The shape of a templated entry, shared by every entry with the same conversions. Shapes are
 * few (one per way of naming a kind of file): the newest SHAPE_REUSE are tried, so a load stays
 * linear; a plan of more shapes repeats some, and a lookup tries each copy. */
#define SHAPE_REUSE 64
static int64_t shape_of(struct iez_plan *plan, struct parsed *o)
{
    const char *slash = o->key;
    for (size_t i = 0; i < o->klen; i++)
        if (o->key[i] == '/')
            slash = o->key + i;
    uint32_t base = (uint32_t)(slash - o->key) + 1;
    uint32_t rel = o->cv[0].at >= base;
    for (size_t i = 0; i < o->ncv; i++)
        o->cv[i].at = (uint16_t)(o->cv[i].at - (rel ? base : 0));
    uint32_t len = (uint32_t)o->klen - (rel ? base : 0);
    for (size_t k = plan->nshapes; k-- > 0 && plan->nshapes - k <= SHAPE_REUSE;)
        if (same_shape(plan, &plan->shapes[k], rel, len, o->cv, o->ncv))
            return (int64_t)k;
    if (grow((void **)&plan->shapes, &plan->scap, plan->nshapes + 1, sizeof *plan->shapes) ||
        grow((void **)&plan->convs, &plan->ccap, plan->ncv + o->ncv, sizeof *plan->convs))
        return -1;
    memcpy(plan->convs + plan->ncv, o->cv, o->ncv * sizeof *o->cv);
    plan->shapes[plan->nshapes] = (struct shape){rel, len, (uint32_t)o->ncv, (uint32_t)plan->ncv};
    plan->ncv += o->ncv;
    return (int64_t)plan->nshapes++;
}

static int add_templated(struct iez_plan *plan, struct parsed *o, const char *spec, size_t slen, size_t no)
{
    int64_t shape = shape_of(plan, o);
    uint64_t off = shape < 0 ? UINT64_MAX : to_arena(plan, o->key, o->klen, spec, slen);
    if (off == UINT64_MAX || grow((void **)&plan->tents, &plan->tcap, plan->nt + 1, sizeof *plan->tents))
        return -1;
    plan->tents[plan->nt++] = (struct tentry){off, (uint32_t)o->klen, (uint32_t)(iez_hash(o->key, o->klen, 0) >> 32),
                                              (uint32_t)shape, (uint32_t)no};
    return 0;
}

/* --- loading -------------------------------------------------------------------------------- */

/* Entries wait in a short queue between parsing and insertion, so the table slot each one
 * lands in can be prefetched: the inserts are random accesses to a table far larger than the
 * caches, and would otherwise stall on memory one after another. */
#define PENDING 16
struct pending {
    uint64_t off; /* as struct slot's */
    size_t plen, no;
    uint64_t hash;
};

/* Insert the oldest queued entries until n remain; stops at a path planned twice. */
static int insert_pending(struct iez_plan *plan, struct pending *q, size_t *head, size_t *count, size_t keep,
                          struct first_err *fe)
{
    for (; *count > keep; (*count)--, *head = (*head + 1) % PENDING) {
        struct pending *e = &q[*head];
        const char *path = slot_text(plan, e->off);
        struct slot *s = probe(plan, path, e->plen, e->hash);
        if (s->plen && !((s->off | e->off) & EXPANDED)) {
            note_err(fe, e->no, "plan: %.*s is planned twice", (int)(e->plen > 200 ? 200 : e->plen), path);
            return -1;
        }
        if (s->plen)
            continue; /* filled in to a planned name: the earlier line wins */
        s->off = e->off;
        s->hash = (uint32_t)(e->hash >> 32);
        s->plen = (uint32_t)e->plen;
    }
    return 0;
}

/* A version-2 path with fields, as written, for the duplicate check. */
struct raw {
    const char *p;
    uint32_t len, no;
};

static int raw_cmp(const void *a, const void *b)
{
    const struct raw *x = a, *y = b;
    size_t n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->p, y->p, n);
    if (c)
        return c;
    if (x->len != y->len)
        return x->len < y->len ? -1 : 1;
    return x->no < y->no ? -1 : x->no > y->no;
}

/* Paths with fields written twice: their second line. */
static void raw_duplicates(struct raw *raws, size_t n, struct first_err *fe)
{
    if (n < 2)
        return;
    qsort(raws, n, sizeof *raws, raw_cmp);
    for (size_t i = 1; i < n; i++)
        if (raws[i].len == raws[i - 1].len && !memcmp(raws[i].p, raws[i - 1].p, raws[i].len))
            note_err(fe, raws[i].no, "plan: %.*s is planned twice", (int)(raws[i].len > 200 ? 200 : raws[i].len),
                     raws[i].p);
}

/* A metadata line's words (KEY=VALUE, separated by spaces): only collread is read, the rest is
 * the control plane's. The last collread given wins, as iez.plan's dictionary keeps it. */
static const char *parse_meta(struct iez_plan *plan, const char *p, size_t n, char *why, size_t cap)
{
    for (size_t i = 1, j; i < n; i = j + 1) {
        for (j = i; j < n && p[j] != ' ';)
            j++;
        static const char key[] = "collread=";
        size_t k = sizeof key - 1, vlen = j - i - k;
        if (j - i < k || memcmp(p + i, key, k))
            continue;
        const char *v = p + i + k;
        if (vlen == 6 && !memcmp(v, "lustre", 6))
            plan->collread = IEZ_COLLREAD_LUSTRE;
        else if (vlen == 3 && !memcmp(v, "off", 3))
            plan->collread = IEZ_COLLREAD_OFF;
        else {
            snprintf(why, cap, "plan: collread=%.*s is neither lustre nor off", (int)(vlen > 40 ? 40 : vlen), v);
            return why;
        }
    }
    return NULL;
}

static int parse_entries(struct iez_plan *plan, const struct iez_plan_env *env, const char *source, char *err,
                         size_t errlen)
{
    const char *p = plan->buf, *end = plan->buf + plan->len;
    const char *eol = line_end(p, end);
    if (check_header(p, (size_t)(eol - p), source, &plan->version, err, errlen))
        return -1;
    struct iez_layout lay = {0};
    struct pending q[PENDING];
    struct first_err fe = {0};
    struct raw *raws = NULL;
    size_t head = 0, count = 0, nraw = 0, rawcap = 0;
    struct parsed *o = plan->version == 2 ? malloc(sizeof *o) : NULL;
    char why[200];
    size_t no = 1;
    if (plan->version == 2 && !o)
        note_err(&fe, 1, "out of memory");
    for (p = next_line(eol, end); p < end && !fe.no; p = next_line(eol, end)) {
        eol = line_end(p, end);
        no++;
        size_t n = (size_t)(eol - p);
        if (n && p[0] == '#' && parse_meta(plan, p, n, why, sizeof why)) {
            note_err(&fe, no, "%s", why);
            break;
        }
        if (!n || p[0] == '#')
            continue;
        const char *tab = memchr(p, '\t', n);
        size_t plen = tab ? (size_t)(tab - p) : 0;
        const char *bad = NULL;
        /* a name without braces is its own key, parsed or not: no copy */
        int braces = o && (memchr(p, '{', plen) || memchr(p, '}', plen));
        if (o && !braces)
            o->fields = o->escaped = o->dead = 0;
        if (!tab)
            bad = "expected PATH<TAB>LAYOUT";
        else if (!plen || p[0] != '/')
            bad = why, snprintf(why, sizeof why, "plan: path '%.*s' is not absolute", (int)(plen > 80 ? 80 : plen), p);
        else if (memchr(p, '\0', plen))
            bad = "plan: a path holds a NUL byte";
        else if (plen > UINT32_MAX)
            bad = "path too long";
        else if (braces && parse_path(p, plen, env, o, why, sizeof why))
            bad = why;
        else if (iez_layout_parse(tab + 1, (size_t)(eol - tab - 1), &lay, why, sizeof why))
            bad = why;
        if (bad) {
            note_err(&fe, no, "%s", bad);
            break;
        }
        plan->n++;
        uint64_t off = (uint64_t)(p - plan->buf);
        const char *spec = tab + 1;
        size_t slen = (size_t)(eol - spec);
        if (o && (o->fields || (o->escaped && o->dead))) {
            if (grow((void **)&raws, &rawcap, nraw + 1, sizeof *raws)) {
                note_err(&fe, no, "out of memory");
                break;
            }
            raws[nraw++] = (struct raw){p, (uint32_t)plen, (uint32_t)no};
            if (o->dead)
                continue; /* a field this process does not know: the entry never matches here */
            if (o->ncv) {
                if (add_templated(plan, o, spec, slen, no))
                    note_err(&fe, no, "out of memory");
                continue;
            }
        }
        if (o && (o->fields || o->escaped)) {
            off = to_arena(plan, o->key, o->klen, spec, slen);
            if (off == UINT64_MAX) {
                note_err(&fe, no, "out of memory");
                break;
            }
            off |= IN_ARENA | (o->fields ? EXPANDED : 0);
            plen = o->klen;
        }
        uint64_t h = iez_hash(slot_text(plan, off), plen, 0);
        __builtin_prefetch(&plan->slots[h & plan->mask], 1);
        q[(head + count++) % PENDING] = (struct pending){off, plen, no, h};
        if (count == PENDING)
            insert_pending(plan, q, &head, &count, PENDING - 1, &fe);
    }
    /* an earlier line's duplicate comes before a later line's error */
    insert_pending(plan, q, &head, &count, 0, &fe);
    raw_duplicates(raws, nraw, &fe);
    free(raws);
    free(o);
    iez_layout_free(&lay);
    if (fe.no) {
        int m = snprintf(err, errlen, "%s:%zu: ", source, fe.no);
        if (m >= 0 && (size_t)m < errlen)
            snprintf(err + m, errlen - (size_t)m, "%s", fe.msg);
        return -1;
    }
    return 0;
}

struct shape_key {
    uint32_t rel, len, id;
};

static int shape_cmp(const void *a, const void *b)
{
    const struct shape_key *x = a, *y = b;
    if (x->rel != y->rel)
        return x->rel < y->rel ? -1 : 1;
    if (x->len != y->len)
        return x->len < y->len ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* The templated entries' index: in file order, so among equal keys the earlier line is met first. */
static int index_templated(struct iez_plan *plan)
{
    if (!plan->nt)
        return 0;
    size_t cap = 16;
    while (cap < 2 * plan->nt)
        cap *= 2;
    plan->tidx = calloc(cap, sizeof *plan->tidx);
    plan->sorder = malloc(plan->nshapes * sizeof *plan->sorder);
    if (!plan->tidx || !plan->sorder)
        return -1;
    plan->tmask = cap - 1;
    for (size_t i = 0; i < plan->nt; i++) {
        uint64_t h = iez_hash(plan->arena + plan->tents[i].off, plan->tents[i].plen, 0);
        size_t k = h & plan->tmask;
        while (plan->tidx[k])
            k = (k + 1) & plan->tmask;
        plan->tidx[k] = (uint32_t)i + 1;
    }
    struct shape_key *keys = malloc(plan->nshapes * sizeof *keys);
    if (!keys)
        return -1;
    for (size_t i = 0; i < plan->nshapes; i++)
        keys[i] = (struct shape_key){plan->shapes[i].rel, plan->shapes[i].len, (uint32_t)i};
    qsort(keys, plan->nshapes, sizeof *keys, shape_cmp);
    for (size_t i = 0; i < plan->nshapes; i++)
        plan->sorder[i] = keys[i].id;
    free(keys);
    return 0;
}

struct iez_plan *iez_plan_parse(char *buf, size_t len, const char *source, const struct iez_plan_env *env,
                                char *err, size_t errlen)
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
    plan->slots = cap <= SIZE_MAX / sizeof *plan->slots ? iez_alloc_table(cap * sizeof *plan->slots) : NULL;
    plan->mask = cap - 1;
    if (!plan->slots) {
        snprintf(err, errlen, "%s: out of memory for %zu lines", source, lines);
        iez_plan_free(plan);
        return NULL;
    }
    if (parse_entries(plan, env, source, err, errlen)) {
        iez_plan_free(plan);
        return NULL;
    }
    if (index_templated(plan)) {
        snprintf(err, errlen, "%s: out of memory for %zu templated entries", source, plan->nt);
        iez_plan_free(plan);
        return NULL;
    }
    return plan;
}

struct iez_plan *iez_plan_load(const char *file, const struct iez_plan_env *env, char *err, size_t errlen)
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
    return iez_plan_parse(buf, len, file, env, err, errlen);
}

void iez_plan_free(struct iez_plan *plan)
{
    if (!plan)
        return;
    free(plan->buf);
    free(plan->slots);
    free(plan->arena);
    free(plan->tents);
    free(plan->tidx);
    free(plan->shapes);
    free(plan->sorder);
    free(plan->convs);
    free(plan);
}

size_t iez_plan_size(const struct iez_plan *plan) { return plan->n; }

int iez_plan_version(const struct iez_plan *plan) { return plan->version; }

int iez_plan_collread(const struct iez_plan *plan) { return plan ? plan->collread : IEZ_COLLREAD_UNSET; }

/* The layout after the TAB that ends the path at text (its line ends at LF, CR or the end). */
IEZ_HOT static const char *spec_after(const char *text, size_t plen, const char *end, size_t *speclen)
{
    const char *spec = text + plen + 1;
    *speclen = (size_t)(line_end(spec, end) - spec);
    return spec;
}

IEZ_HOT static const char *spec_of(const struct iez_plan *plan, uint64_t off, size_t plen, size_t *speclen)
{
    const char *end = (off & IN_ARENA) ? plan->arena + plan->alen : plan->buf + plan->len;
    return spec_after(slot_text(plan, off), plen, end, speclen);
}

/* --- lookup --------------------------------------------------------------------------------- */

static int conv_ok(const char *s, const struct conv *c)
{
    static const int lo[128] = {['m'] = 1, ['d'] = 1}, hi[128] = {['m'] = 12, ['d'] = 31, ['H'] = 23, ['M'] = 59, ['S'] = 60};
    if (c->kind == 'r') {
        for (size_t i = 0; i < c->len; i++) {
            unsigned char ch = (unsigned char)s[i];
            if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z')))
                return 0;
        }
        return 1;
    }
    int v = 0;
    for (size_t i = 0; i < c->len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return 0;
        v = v * 10 + (s[i] - '0');
    }
    return c->kind == 'Y' || (v >= lo[(int)c->kind] && v <= hi[(int)c->kind]);
}

/* The earliest templated entry of shape k that path matches (line below *best), or NULL. */
static const struct tentry *match_shape(const struct iez_plan *plan, uint32_t k, const char *path, size_t plen,
                                        size_t base, char *key, uint32_t best)
{
    const struct shape *s = &plan->shapes[k];
    const struct conv *cv = plan->convs + s->cv;
    for (size_t i = 0; i < s->ncv; i++)
        memset(key + base + cv[i].at, 0, cv[i].len);
    uint64_t h = iez_hash(key, plen, 0);
    const struct tentry *hit = NULL;
    for (size_t i = h & plan->tmask; plan->tidx[i] && !hit; i = (i + 1) & plan->tmask) {
        const struct tentry *e = &plan->tents[plan->tidx[i] - 1];
        if (e->line >= best || e->shape != k || e->hash != (uint32_t)(h >> 32) || e->plen != plen ||
            memcmp(plan->arena + e->off, key, plen))
            continue;
        size_t c = 0;
        while (c < s->ncv && conv_ok(path + base + cv[c].at, &cv[c]))
            c++;
        if (c == s->ncv)
            hit = e;
    }
    for (size_t i = 0; i < s->ncv; i++)
        memcpy(key + base + cv[i].at, path + base + cv[i].at, cv[i].len);
    return hit;
}

/* Shapes of (rel, len): their range in sorder. */
static size_t shapes_from(const struct iez_plan *plan, uint32_t rel, uint32_t len)
{
    size_t lo = 0, hi = plan->nshapes;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const struct shape *s = &plan->shapes[plan->sorder[mid]];
        if (s->rel < rel || (s->rel == rel && s->len < len))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static const char *find_templated(const struct iez_plan *plan, const char *path, size_t plen, size_t *speclen)
{
    char key[MAX_KEY];
    if (!plan->nt || plen > MAX_KEY)
        return NULL;
    size_t base = 0;
    for (size_t i = plen; i-- > 0;)
        if (path[i] == '/') {
            base = i + 1;
            break;
        }
    memcpy(key, path, plen);
    const struct tentry *best = NULL;
    for (uint32_t rel = 0; rel < 2; rel++) {
        uint32_t len = (uint32_t)(rel ? plen - base : plen);
        for (size_t j = shapes_from(plan, rel, len); j < plan->nshapes; j++) {
            uint32_t k = plan->sorder[j];
            if (plan->shapes[k].rel != rel || plan->shapes[k].len != len)
                break;
            const struct tentry *e = match_shape(plan, k, path, plen, rel ? base : 0, key, best ? best->line : UINT32_MAX);
            if (e)
                best = e;
        }
    }
    return best ? spec_of(plan, best->off | IN_ARENA, best->plen, speclen) : NULL;
}

IEZ_HOT void iez_plan_prefetch(const struct iez_plan *plan, const char *path, size_t plen)
{
    __builtin_prefetch(&plan->slots[iez_hash(path, plen, 0) & plan->mask]);
}

IEZ_HOT const char *iez_plan_find(const struct iez_plan *plan, const char *path, size_t plen, size_t *speclen)
{
    if (!plen || plen > UINT32_MAX)
        return NULL;
    const struct slot *s = probe(plan, path, plen, iez_hash(path, plen, 0));
    if (s->plen)
        return spec_of(plan, s->off, s->plen, speclen);
    return find_templated(plan, path, plen, speclen);
}

int iez_plan_next(const struct iez_plan *plan, size_t *iter, const char **path, size_t *plen,
                  const char **spec, size_t *speclen)
{
    const char *end = plan->buf + plan->len;
    const char *p = *iter ? plan->buf + *iter : next_line(line_end(plan->buf, end), end);
    for (; p < end; p = next_line(line_end(p, end), end)) {
        const char *eol = line_end(p, end);
        if (eol == p || p[0] == '#')
            continue;
        const char *tab = memchr(p, '\t', (size_t)(eol - p));
        *path = p;
        *plen = (size_t)(tab - p);
        *spec = spec_after(p, *plen, end, speclen);
        *iter = (size_t)(next_line(eol, end) - plan->buf);
        return 1;
    }
    *iter = plan->len;
    return 0;
}

/* --- the process's fields ------------------------------------------------------------------- */

static const char *first_env(const char *const *names, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const char *v = getenv(names[i]);
        if (v && *v)
            return v;
    }
    return NULL;
}

const char *iez_host_env(void)
{
    const char *h = getenv("IEZ_HOST");
    size_t n = h ? strlen(h) : 0;
    if (!n || n > 63 || strspn(h, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") != n)
        return NULL;
    return h;
}

void iez_plan_env_read(struct iez_plan_env *env)
{
    static const char *const job[] = {IEZ_JOB_VARS};
    static const char *const array[] = {IEZ_ARRAY_VARS};
    static const char *const ranks[] = {IEZ_RANK_VARS};
    memset(env, 0, sizeof *env);
    env->val[IEZ_FIELD_JOB] = first_env(job, sizeof job / sizeof *job);
    env->val[IEZ_FIELD_ARRAY] = first_env(array, sizeof array / sizeof *array);
    for (size_t i = 0; i < sizeof ranks / sizeof *ranks && !env->val[IEZ_FIELD_RANK]; i++) {
        const char *r = getenv(ranks[i]);
        char *e;
        errno = 0;
        long v = r && *r ? strtol(r, &e, 10) : -1;
        if (v >= 0 && v <= INT32_MAX && !errno && !*e) {
            snprintf(env->buf[0], sizeof env->buf[0], "%ld", v);
            env->val[IEZ_FIELD_RANK] = env->buf[0];
        }
    }
    const char *host = iez_host_env();
    if (host)
        snprintf(env->buf[1], sizeof env->buf[1], "%s", host);
    if (host || (gethostname(env->buf[1], sizeof env->buf[1] - 1) == 0 && env->buf[1][0])) {
        env->buf[1][sizeof env->buf[1] - 1] = 0;
        env->val[IEZ_FIELD_FQDN] = env->buf[1];
        memcpy(env->buf[2], env->buf[1], sizeof env->buf[2]);
        char *dot = strchr(env->buf[2], '.');
        if (dot && dot != env->buf[2])
            *dot = 0;
        env->val[IEZ_FIELD_HOST] = env->buf[2];
    }
}

/* Streaming rpctrace parser; see rpctrace.h. One pass over each line, no allocation per line. */
#include "rpctrace.h"

#include <stdlib.h>
#include <string.h>

#define BAD_TEXT 200

struct lp_parser {
    uint64_t counts[LP_NCOUNTS];
    /* interned strings: arena of (len, bytes) and an open-addressing table of ids */
    char *arena;
    size_t arena_len, arena_cap;
    size_t *offs; /* offs[id] = offset of the string in the arena */
    uint32_t *lens;
    uint32_t nstr, str_cap;
    uint32_t *table; /* ids, 0 = free slot */
    uint32_t table_cap;
    int nbad;
    uint64_t bad_line[LP_MAX_BAD];
    char bad_text[LP_MAX_BAD][BAD_TEXT];
};

static uint64_t hash(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
    return h;
}

static int grow_table(lp_parser *p) {
    uint32_t cap = p->table_cap ? p->table_cap * 2 : 1024;
    uint32_t *t = calloc(cap, sizeof *t);
    if (!t) return -1;
    for (uint32_t id = 1; id < p->nstr; id++) {
        uint64_t h = hash(p->arena + p->offs[id], p->lens[id]);
        uint32_t i = (uint32_t)h & (cap - 1);
        while (t[i]) i = (i + 1) & (cap - 1);
        t[i] = id;
    }
    free(p->table);
    p->table = t;
    p->table_cap = cap;
    return 0;
}

/* The id of s[0, n); 0 for the empty string, UINT32_MAX when out of memory. */
static uint32_t intern(lp_parser *p, const char *s, size_t n) {
    if (n == 0) return 0;
    if ((uint64_t)(p->nstr + 1) * 2 > p->table_cap && grow_table(p)) return UINT32_MAX;
    uint64_t h = hash(s, n);
    uint32_t i = (uint32_t)h & (p->table_cap - 1);
    for (uint32_t id; (id = p->table[i]); i = (i + 1) & (p->table_cap - 1))
        if (p->lens[id] == n && memcmp(p->arena + p->offs[id], s, n) == 0) return id;
    if (p->nstr == p->str_cap) {
        uint32_t cap = p->str_cap * 2;
        size_t *o = realloc(p->offs, cap * sizeof *o);
        if (!o) return UINT32_MAX;
        p->offs = o;
        uint32_t *l = realloc(p->lens, cap * sizeof *l);
        if (!l) return UINT32_MAX;
        p->lens = l;
        p->str_cap = cap;
    }
    if (p->arena_len + n + 1 > p->arena_cap) {
        size_t cap = (p->arena_cap + n + 1) * 2;
        char *a = realloc(p->arena, cap);
        if (!a) return UINT32_MAX;
        p->arena = a;
        p->arena_cap = cap;
    }
    memcpy(p->arena + p->arena_len, s, n);
    p->arena[p->arena_len + n] = 0;
    uint32_t id = p->nstr++;
    p->offs[id] = p->arena_len;
    p->lens[id] = (uint32_t)n;
    p->arena_len += n + 1;
    p->table[i] = id;
    return id;
}

lp_parser *lp_new(void) {
    lp_parser *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->str_cap = 64;
    p->offs = calloc(p->str_cap, sizeof *p->offs);
    p->lens = calloc(p->str_cap, sizeof *p->lens);
    p->arena_cap = 4096;
    p->arena = malloc(p->arena_cap);
    if (!p->offs || !p->lens || !p->arena || grow_table(p)) {
        lp_free(p);
        return NULL;
    }
    p->arena[0] = 0;
    p->arena_len = 1;
    p->nstr = 1; /* id 0: "" */
    return p;
}

void lp_free(lp_parser *p) {
    if (!p) return;
    free(p->arena);
    free(p->offs);
    free(p->lens);
    free(p->table);
    free(p);
}

size_t lp_rec_size(void) { return sizeof(lp_rec); }

void lp_counts(const lp_parser *p, uint64_t out[LP_NCOUNTS]) { memcpy(out, p->counts, sizeof p->counts); }

int lp_bad(const lp_parser *p, int i, uint64_t *line, char *buf, size_t buflen) {
    if (i < 0 || i >= p->nbad || buflen == 0) return -1;
    *line = p->bad_line[i];
    size_t n = strlen(p->bad_text[i]);
    if (n >= buflen) n = buflen - 1;
    memcpy(buf, p->bad_text[i], n);
    buf[n] = 0;
    return (int)n;
}

uint32_t lp_nstrings(const lp_parser *p) { return p->nstr; }

const char *lp_string(const lp_parser *p, uint32_t id, size_t *len) {
    if (id >= p->nstr) return NULL;
    *len = p->lens[id];
    return p->arena + p->offs[id];
}

/* -- field scanners: each advances *s on success and never reads at or past e ------------------ */

static int u64(const char **s, const char *e, uint64_t *v) {
    const char *q = *s;
    uint64_t x = 0;
    while (q < e && *q >= '0' && *q <= '9') {
        if (x > (UINT64_MAX - 9) / 10) return 0;
        x = x * 10 + (uint64_t)(*q++ - '0');
    }
    if (q == *s) return 0;
    *v = x;
    *s = q;
    return 1;
}

static int i64(const char **s, const char *e, int64_t *v) {
    const char *q = *s;
    int neg = q < e && *q == '-';
    uint64_t x;
    if (neg) q++;
    if (!u64(&q, e, &x) || x > (uint64_t)INT64_MAX) return 0;
    *v = neg ? -(int64_t)x : (int64_t)x;
    *s = q;
    return 1;
}

static int i32(const char **s, const char *e, int32_t *v) {
    int64_t x;
    const char *q = *s;
    if (!i64(&q, e, &x) || x < INT32_MIN || x > INT32_MAX) return 0;
    *v = (int32_t)x;
    *s = q;
    return 1;
}

static int hexfield(const char **s, const char *e) {
    const char *q = *s;
    while (q < e && ((*q >= '0' && *q <= '9') || (*q >= 'a' && *q <= 'f') || (*q >= 'A' && *q <= 'F'))) q++;
    if (q == *s) return 0;
    *s = q;
    return 1;
}

static int lit(const char **s, const char *e, const char *t, size_t n) {
    if ((size_t)(e - *s) < n || memcmp(*s, t, n) != 0) return 0;
    *s += n;
    return 1;
}

static int ch(const char **s, const char *e, char c) {
    if (*s >= e || **s != c) return 0;
    (*s)++;
    return 1;
}

static const char *find(const char *s, const char *e, char c) {
    const char *q = memchr(s, c, (size_t)(e - s));
    return q ? q : e;
}

static const char *findstr(const char *s, const char *e, const char *t, size_t n) {
    while (s + n <= e) {
        const char *q = memchr(s, t[0], (size_t)(e - s));
        if (!q || q + n > e) return NULL;
        if (memcmp(q, t, n) == 0) return q;
        s = q + 1;
    }
    return NULL;
}

#define LIT(s, e, t) lit(s, e, t, sizeof(t) - 1)

enum { NOT_RPC, RPC_OK, RPC_BAD };

/* Parse the debug header; on success *msg points at the message. */
static int header(const char *s, const char *e, lp_rec *r, const char **msg) {
    uint64_t sec, frac, v;
    int32_t type;
    if (!hexfield(&s, e) || !ch(&s, e, ':') || !hexfield(&s, e) || !ch(&s, e, ':')) return 0;
    if (!i32(&s, e, &r->cpu) || !ch(&s, e, '.') || !i32(&s, e, &type)) return 0;
    while (s < e && *s >= 'A' && *s <= 'Z') s++; /* "F": first record of a buffer */
    if (!ch(&s, e, ':') || !u64(&s, e, &sec) || !ch(&s, e, '.')) return 0;
    const char *f0 = s;
    if (!u64(&s, e, &frac) || s - f0 > 9) return 0;
    for (long d = s - f0; d < 6; d++) frac *= 10;
    for (long d = s - f0; d > 6; d--) frac /= 10;
    if (sec > (uint64_t)INT64_MAX / 1000000 - 1) return 0;
    r->t_us = (int64_t)(sec * 1000000 + frac);
    if (!ch(&s, e, ':') || !u64(&s, e, &v) || !ch(&s, e, ':') || !i32(&s, e, &r->thread) || !ch(&s, e, ':') ||
        !u64(&s, e, &v) || !ch(&s, e, ':') || !ch(&s, e, '('))
        return 0;
    const char *q = findstr(s, e, ") ", 2);
    if (!q) {
        *msg = e; /* a header without a message */
        return 1;
    }
    *msg = q + 2;
    return 1;
}

static int message(lp_parser *p, const char *s, const char *e, lp_rec *r) {
    if (LIT(&s, e, "Handling RPC "))
        r->kind = LP_HANDLING;
    else if (LIT(&s, e, "Handled RPC "))
        r->kind = LP_HANDLED;
    else
        return NOT_RPC;
    r->style = LP_STYLE_OLD;
    if (LIT(&s, e, "req@")) {
        if (!hexfield(&s, e) || !ch(&s, e, ' ')) return RPC_BAD;
        r->style = LP_STYLE_REQ;
    }
    int has_job;
    if (LIT(&s, e, "pname:cluuid+ref:pid:xid:nid:opc:job "))
        has_job = 1;
    else if (LIT(&s, e, "pname:cluuid+ref:pid:xid:nid:opc "))
        has_job = 0;
    else
        return RPC_BAD;
    /* the values end where the Handled suffix starts */
    const char *ve = e, *suffix = NULL;
    if (r->kind == LP_HANDLED) {
        suffix = findstr(s, e, " Request proc", 13);
        if (suffix) ve = suffix;
    }
    while (ve > s && (ve[-1] == ' ' || ve[-1] == '\r')) ve--;
    const char *q = find(s, ve, ':');
    if (q == s || q == ve) return RPC_BAD;
    r->pname = intern(p, s, (size_t)(q - s));
    s = q + 1;
    q = find(s, ve, ':');
    if (q == ve) return RPC_BAD;
    const char *plus = q;
    while (plus > s && *plus != '+') plus--;
    if (*plus != '+') return RPC_BAD;
    const char *rs = plus + 1;
    if (!i32(&rs, q, &r->ref) || rs != q) return RPC_BAD;
    r->uuid = intern(p, s, (size_t)(plus - s));
    s = q + 1;
    if (!i32(&s, ve, &r->client_pid) || !ch(&s, ve, ':') || !ch(&s, ve, 'x') || !u64(&s, ve, &r->xid) ||
        !ch(&s, ve, ':'))
        return RPC_BAD;
    /* nid: "lnetpid-addr@net", where addr may hold ':' (IPv6); the net name ends it */
    const char *at = find(s, ve, '@');
    if (at == ve) return RPC_BAD;
    q = at + 1;
    while (q < ve && ((*q >= 'a' && *q <= 'z') || (*q >= 'A' && *q <= 'Z') || (*q >= '0' && *q <= '9'))) q++;
    if (q == at + 1) return RPC_BAD;
    r->nid = intern(p, s, (size_t)(q - s));
    s = q;
    if (!ch(&s, ve, ':') || !i32(&s, ve, &r->opc)) return RPC_BAD;
    r->job = 0;
    if (has_job) {
        if (!ch(&s, ve, ':')) return RPC_BAD;
        r->job = intern(p, s, (size_t)(ve - s));
        s = ve;
    }
    if (s != ve) return RPC_BAD;
    if (r->pname == UINT32_MAX || r->uuid == UINT32_MAX || r->nid == UINT32_MAX || r->job == UINT32_MAX)
        return RPC_BAD; /* out of memory for strings */
    r->proc_us = r->total_us = -1;
    r->transno = 0;
    r->rc = r->status = 0;
    if (suffix) {
        s = suffix + 13;
        if (!LIT(&s, e, "essed in ") && !LIT(&s, e, "esed in ")) return RPC_BAD;
        uint64_t tr;
        if (!i64(&s, e, &r->proc_us) || !LIT(&s, e, "us (") || !i64(&s, e, &r->total_us) ||
            !LIT(&s, e, "us total) trans ") || !u64(&s, e, &tr) || !LIT(&s, e, " rc ") || !i32(&s, e, &r->rc) ||
            !ch(&s, e, '/') || !i32(&s, e, &r->status))
            return RPC_BAD;
        r->transno = tr;
    }
    return RPC_OK;
}

static void keep_bad(lp_parser *p, const char *s, const char *e) {
    p->counts[LP_MALFORMED]++;
    if (p->nbad >= LP_MAX_BAD) return;
    size_t n = (size_t)(e - s);
    if (n > BAD_TEXT - 1) n = BAD_TEXT - 1;
    for (size_t i = 0; i < n; i++) p->bad_text[p->nbad][i] = (s[i] >= 32 && s[i] < 127) ? s[i] : '?';
    p->bad_text[p->nbad][n] = 0;
    p->bad_line[p->nbad++] = p->counts[LP_LINES];
}

size_t lp_feed(lp_parser *p, const char *buf, size_t len, int final, lp_rec *out, size_t cap, size_t *nout) {
    const char *s = buf, *end = buf + len;
    size_t n = 0;
    while (s < end && n < cap) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        const char *e = nl ? nl : end;
        if (!nl && !final) break;
        p->counts[LP_LINES]++;
        const char *te = e;
        while (te > s && (te[-1] == '\r' || te[-1] == ' ' || te[-1] == '\t')) te--;
        if (te > s) {
            lp_rec *r = &out[n];
            const char *msg;
            if (!header(s, te, r, &msg)) {
                keep_bad(p, s, te);
            } else {
                switch (message(p, msg, te, r)) {
                case RPC_OK:
                    r->line = p->counts[LP_LINES];
                    memset(r->pad, 0, sizeof r->pad);
                    p->counts[LP_RPC]++;
                    n++;
                    break;
                case NOT_RPC: p->counts[LP_OTHER]++; break;
                default: keep_bad(p, s, te);
                }
            }
        }
        s = nl ? nl + 1 : end;
    }
    *nout = n;
    return (size_t)(s - buf);
}

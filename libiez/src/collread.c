/* The Lustre-aware collective read (references: s003-figs4-5). ROMIO's two-phase read gives each
 * aggregator a contiguous file domain that spans every OST, so each OST serves many clients at
 * once; seed 003 dedicates one process to each OST instead. Here, for a collective read of a file
 * whose layout iez can read:
 *
 *   1. every rank flattens its request (the file view from its position, for count x type
 *      bytes) into file extents, cuts them at stripe ends and sends each piece's (offset,
 *      length) to the aggregator of that stripe's OST (MPI_Alltoallv);
 *   2. each aggregator reads the pieces it was sent, sorted and merged into runs inside its
 *      stripes (one pread per run, on a descriptor it opened read-only itself);
 *   3. the data go back (MPI_Alltoallv) and each rank places them in its buffer.
 *
 * Aggregators: one per OST of the file (at most one per rank), ranks taken one per node in turn
 * (the first rank of every node, then the second, ...) so they spread over the nodes as the
 * paper's clients do; with fewer ranks than OSTs, aggregator a reads OSTs a, a + A, ...
 * Every step that can fail on one rank only ends in an agreement (MPI_Allreduce) after which all
 * ranks either go on or make the MPI library's own collective read, which then does the whole
 * call: nothing was written to the buffer or the file pointer before. */
#include "collread.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backend.h"
#include "dynsym.h"
#include "iolog.h"
#include "log.h"
#include "lum.h"
#include "pmpi.h"
#include "state.h"
#include "sysio.h"

int iez_collread_on;

/* ---- the stripe map (pure) ----------------------------------------------------------------- */

int iez_cr_map_build(const struct iez_layout *lay, struct iez_cr_map *m)
{
    m->v = NULL;
    m->len = 0;
    size_t slots = 0;
    for (uint32_t c = 0; c < lay->ncomp; c++) {
        const struct iez_stripe *s = &lay->comp[c].s;
        if (s->size == 0 || s->count <= 0 || (s->pattern & ~(uint32_t)0x201) || !(s->pattern & 0x1) ||
            lay->comp[c].end <= lay->comp[c].start)
            return -1; /* RAID-0 (0x1), optionally overstriped (0x200) (references: l-abi-lum-magics) */
        slots += (size_t)s->count;
    }
    size_t len = IEZ_CR_HEAD + (size_t)IEZ_CR_COMP * lay->ncomp + slots;
    int64_t *v = malloc(len * sizeof *v);
    int *seen = calloc(IEZ_MAX_OST_INDEX + 1, sizeof *seen); /* OST -> group + 1 */
    if (!v || !seen) {
        free(v);
        free(seen);
        return -1;
    }
    int64_t groups = 0;
    size_t at = IEZ_CR_HEAD + (size_t)IEZ_CR_COMP * lay->ncomp, first = at;
    for (uint32_t c = 0; c < lay->ncomp; c++) {
        const struct iez_comp *k = &lay->comp[c];
        int64_t *e = v + IEZ_CR_HEAD + (size_t)IEZ_CR_COMP * c;
        e[0] = (int64_t)k->start;
        e[1] = k->end == IEZ_LUSTRE_EOF ? INT64_MAX : (int64_t)k->end;
        e[2] = (int64_t)k->s.size;
        e[3] = k->s.count;
        e[4] = (int64_t)(at - first);
        for (int32_t i = 0; i < k->s.count; i++) {
            if (!k->s.nosts)
                v[at++] = groups++;
            else if (seen[k->s.osts[i]])
                v[at++] = seen[k->s.osts[i]] - 1;
            else
                v[at++] = (seen[k->s.osts[i]] = (int)++groups) - 1;
        }
    }
    free(seen);
    v[0] = lay->ncomp;
    v[1] = groups;
    m->v = v;
    m->len = len;
    return 0;
}

int iez_cr_map_owner(const struct iez_cr_map *m, uint64_t off, uint64_t *stripe_end)
{
    const int64_t *v = m->v;
    for (int64_t c = 0; c < v[0]; c++) {
        const int64_t *e = v + IEZ_CR_HEAD + IEZ_CR_COMP * c;
        if (off < (uint64_t)e[0] || off >= (uint64_t)e[1])
            continue;
        /* Lustre's RAID-0: stripe number from the file offset, not the component's (lov_stripe_number) */
        uint64_t size = (uint64_t)e[2], stripe = off / size, end = (stripe + 1) * size;
        *stripe_end = end < (uint64_t)e[1] ? end : (uint64_t)e[1];
        size_t first = IEZ_CR_HEAD + (size_t)IEZ_CR_COMP * (size_t)v[0] + (size_t)e[4];
        return (int)v[first + stripe % (uint64_t)e[3]];
    }
    return -1;
}

void iez_cr_map_free(struct iez_cr_map *m)
{
    free(m->v);
    m->v = NULL;
    m->len = 0;
}

/* ---- the MPI functions it needs beyond pmpi.h's --------------------------------------------- */

static struct {
    int (*alltoall)(const void *, int, MPI_Datatype, void *, int, MPI_Datatype, MPI_Comm);
    int (*alltoallv)(const void *, const int *, const int *, MPI_Datatype, void *, const int *, const int *,
                     MPI_Datatype, MPI_Comm);
    int (*allgather)(const void *, int, MPI_Datatype, void *, int, MPI_Datatype, MPI_Comm);
    int (*split_type)(MPI_Comm, int, int, MPI_Info, MPI_Comm *);
    int (*get_view)(MPI_File, MPI_Offset *, MPI_Datatype *, MPI_Datatype *, char *);
    int (*get_amode)(MPI_File, int *);
    int (*get_atomicity)(MPI_File, int *);
    int (*seek)(MPI_File, MPI_Offset, int);
    int (*envelope)(MPI_Datatype, int *, int *, int *, int *);
    int (*contents)(MPI_Datatype, int, int, int, int *, MPI_Aint *, MPI_Datatype *);
    int (*extent)(MPI_Datatype, MPI_Count *, MPI_Count *);
    int (*true_extent)(MPI_Datatype, MPI_Count *, MPI_Count *);
    int (*type_free)(MPI_Datatype *);
    int (*unpack)(const void *, int, int *, void *, int, MPI_Datatype, MPI_Comm);
    int (*set_elements)(MPI_Status *, MPI_Datatype, MPI_Count);
    int (*read_all_end)(MPI_File, void *, MPI_Status *);
    int (*read_at_all_end)(MPI_File, void *, MPI_Status *);
} fn;
static int fn_ok;

static void resolve(void)
{
    const void *mpi = (const void *)iez_pmpi.PMPI_File_open;
    static const char *const names[] = {
        "PMPI_Alltoall", "PMPI_Alltoallv", "PMPI_Allgather", "PMPI_Comm_split_type", "PMPI_File_get_view",
        "PMPI_File_get_amode", "PMPI_File_get_atomicity", "PMPI_File_seek", "PMPI_Type_get_envelope",
        "PMPI_Type_get_contents", "PMPI_Type_get_extent_x", "PMPI_Type_get_true_extent_x", "PMPI_Type_free",
        "PMPI_Unpack", "PMPI_Status_set_elements_x", "PMPI_File_read_all_end", "PMPI_File_read_at_all_end"};
    void **slot = (void **)&fn;
    fn_ok = 1;
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        fn_ok &= (slot[i] = iez_dynsym_beside(names[i], mpi)) != NULL;
}

/* ---- the files ----------------------------------------------------------------------------- */

struct crfile {
    MPI_File fh;                     /* MPI_FILE_NULL: free */
    MPI_Comm comm;                   /* a private duplicate of the file's communicator */
    int rank, size;
    int state;                       /* 0: not set up yet; 1: served; -1: left to MPI */
    char *path;                      /* NULL: no name could be formed on this rank */
    size_t path_len;
    struct iez_cr_map map;
    int naggr, me;                   /* aggregators; my index among them, or -1 */
    int *aggr;                       /* aggregator index -> rank */
    int *cnt;                        /* room for a call's counts and displacements (8 per rank) */
    int64_t dev, ino;                /* the file rank 0 read the layout of */
    int iolog;                       /* the file is on the emulated cluster: log reads */
    int fd;                          /* the aggregator's own read-only descriptor, or -1 */
    int split;                       /* a split collective's begin was served: its status */
    MPI_Status split_status;
    struct crfile *next;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct crfile *files;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void configure(void)
{
    /* off unless asked: the plan may turn it on for a file later (iez_collread_wanted) */
    const char *v = getenv("IEZ_COLLREAD");
    iez_collread_on = v && !strcmp(v, "lustre");
    if (v && *v && strcmp(v, "lustre") && strcmp(v, "off"))
        iez_log_once(IEZ_LOG_COLLREAD, "IEZ_COLLREAD=%s is neither lustre nor off: off", v);
    resolve();
    if (iez_collread_on) {
        if (!fn_ok) {
            iez_log_once(IEZ_LOG_COLLREAD, "IEZ_COLLREAD=lustre: MPI lacks a function it needs: off");
            iez_collread_on = 0;
        }
    }
}

static struct crfile *find(MPI_File fh)
{
    pthread_mutex_lock(&lock);
    struct crfile *f = files;
    while (f && f->fh != fh)
        f = f->next;
    pthread_mutex_unlock(&lock);
    return f;
}

void iez_collread_opened(MPI_Comm comm, MPI_File fh, const char *abs, int len, int amode)
{
    pthread_once(&once, configure);
    /* the same on every rank (the environment, the amode): all enter the Comm_dup or none */
    if (!iez_collread_on || (amode & (MPI_MODE_WRONLY | MPI_MODE_SEQUENTIAL)))
        return;
    struct crfile *f = calloc(1, sizeof *f);
    MPI_Comm dup = MPI_COMM_NULL;
    if (iez_pmpi.PMPI_Comm_dup(comm, &dup) != MPI_SUCCESS || !f) {
        free(f); /* a rank without memory leaves this file to MPI: the first read agrees on it */
        if (dup != MPI_COMM_NULL)
            iez_pmpi.PMPI_Comm_free(&dup);
        return;
    }
    f->fh = fh;
    f->comm = dup;
    f->fd = -1;
    iez_pmpi.PMPI_Comm_rank(dup, &f->rank);
    iez_pmpi.PMPI_Comm_size(dup, &f->size);
    if (len >= 0 && (f->path = malloc((size_t)len + 1))) {
        memcpy(f->path, abs, (size_t)len + 1);
        f->path_len = (size_t)len;
    }
    pthread_mutex_lock(&lock);
    f->next = files;
    files = f;
    pthread_mutex_unlock(&lock);
}

void iez_collread_closing(MPI_File fh)
{
    if (!iez_collread_on)
        return;
    pthread_mutex_lock(&lock);
    struct crfile **p = &files, *f = NULL;
    while (*p && (*p)->fh != fh)
        p = &(*p)->next;
    if (*p) {
        f = *p;
        *p = f->next;
    }
    pthread_mutex_unlock(&lock);
    if (!f)
        return;
    iez_pmpi.PMPI_Comm_free(&f->comm);
    if (f->fd >= 0)
        iez_sys_close(f->fd);
    iez_cr_map_free(&f->map);
    free(f->aggr);
    free(f->cnt);
    free(f->path);
    free(f);
}

/* Rank 0: the stripe map of the file, with its device and inode and whether it is on the
 * emulated cluster, or -1. */
static int read_map(const struct crfile *f, struct iez_cr_map *m, int64_t id[3])
{
    if (!f->path)
        return -1;
    int fd = iez_sys_openat(AT_FDCWD, f->path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY, 0);
    struct stat st;
    int rc = -1;
    if (fd >= 0 && iez_sys_fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
        const struct iez_backend *be = iez_backend_of_fd(fd, st.st_dev, f->path, f->path_len);
        char *lum = malloc(65536);
        ssize_t n = lum && (be->caps & IEZ_BE_LUSTRE) ? be->layout(fd, lum, 65536) : -1;
        struct iez_layout lay;
        if (n > 0 && iez_lum_decode(lum, (size_t)n, &lay) == 0) {
            rc = iez_cr_map_build(&lay, m);
            iez_layout_free(&lay);
        }
        free(lum);
        id[0] = (int64_t)st.st_dev;
        id[1] = (int64_t)st.st_ino;
        id[2] = (be->caps & IEZ_BE_IOLOG) != 0;
    }
    if (fd >= 0)
        iez_sys_close(fd);
    return rc;
}

/* Whether the new read serves this file: IEZ_COLLREAD=lustre and a layout iez can read. The
 * plan's per-file choice belongs here, decided on rank 0 as the layout is. */
static int wanted(struct crfile *f, struct iez_cr_map *m, int64_t id[3])
{
    return read_map(f, m, id) == 0;
}

/* First collective read of the file: rank 0's map to everyone, the aggregators chosen. */
static void set_up(struct crfile *f)
{
    int64_t head[5] = {0, 0, 0, 0, 0}; /* map length (0: left to MPI), dev, ino, iolog, groups */
    struct iez_cr_map m = {0};
    if (f->rank == 0 && wanted(f, &m, head + 1)) {
        head[0] = (int64_t)m.len;
        head[4] = m.v[1];
    }
    if (f->rank == 0 && !head[0])
        iez_log_once(IEZ_LOG_COLLREAD, "Lustre-aware collective read: %s is not on Lustre, or its layout is not "
                     "one it serves: MPI's own read", f->path ? f->path : "a file");
    if (iez_pmpi.PMPI_Bcast(head, 5, MPI_LONG_LONG, 0, f->comm) != MPI_SUCCESS || head[0] <= 0 || head[0] > INT_MAX) {
        iez_cr_map_free(&m);
        f->state = -1;
        return;
    }
    f->naggr = (int)(head[4] < f->size ? head[4] : f->size);
    if (f->rank != 0)
        m.v = malloc((size_t)head[0] * sizeof *m.v);
    m.len = (size_t)head[0];
    int *all = malloc(2 * sizeof(int) * (size_t)f->size);
    f->aggr = malloc(sizeof *f->aggr * (size_t)f->naggr);
    f->cnt = malloc(8 * sizeof *f->cnt * (size_t)f->size); /* here, so that no call lacks it */
    int ok = m.v && all && f->aggr && f->cnt;
    if (iez_pmpi.PMPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, f->comm) != MPI_SUCCESS || !ok ||
        iez_pmpi.PMPI_Bcast(m.v, (int)head[0], MPI_LONG_LONG, 0, f->comm) != MPI_SUCCESS) {
        free(all);
        iez_cr_map_free(&m);
        f->state = -1;
        iez_log_once(IEZ_LOG_COLLREAD, "Lustre-aware collective read: no memory for %s: MPI's own read",
                     f->path ? f->path : "a file");
        return;
    }
    /* the nodes: each rank's (node, rank on it), node = its first rank in the communicator */
    int mine[2] = {f->rank, 0};
    MPI_Comm node;
    if (fn.split_type(f->comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
        iez_pmpi.PMPI_Comm_rank(node, &mine[1]);
        iez_pmpi.PMPI_Bcast(&mine[0], 1, MPI_INT, 0, node);
        iez_pmpi.PMPI_Comm_free(&node);
    }
    fn.allgather(mine, 2, MPI_INT, all, 2, MPI_INT, f->comm);
    /* ranks by (rank on the node, node): the first rank of every node, then the second, ... */
    int n = 0;
    f->me = -1;
    for (int depth = 0; n < f->naggr && depth < f->size; depth++)
        for (int r = 0; r < f->size && n < f->naggr; r++)
            if (all[2 * r + 1] == depth) {
                if (r == f->rank)
                    f->me = n;
                f->aggr[n++] = r;
            }
    free(all);
    f->map = m;
    f->dev = head[1];
    f->ino = head[2];
    f->iolog = (int)head[3] && iez_iolog_on;
    f->state = 1;
}

/* ---- the file view, flattened ------------------------------------------------------------ */

struct blocks {
    int64_t *off, *len;
    size_t n, cap;
};

#define MAX_BLOCKS (1u << 21)        /* a filetype with more is left to MPI (32 MiB of list) */
#define MAX_DEPTH 16

static int add_block(struct blocks *b, int64_t off, int64_t len)
{
    if (len <= 0)
        return 0;
    if (b->n && b->off[b->n - 1] + b->len[b->n - 1] == off) {
        b->len[b->n - 1] += len;
        return 0;
    }
    if (b->n == b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 64;
        int64_t *o, *l;
        if (cap > MAX_BLOCKS || !(o = realloc(b->off, cap * sizeof *o)))
            return -1;
        b->off = o;
        if (!(l = realloc(b->len, cap * sizeof *l)))
            return -1;
        b->len = l;
        b->cap = cap;
    }
    b->off[b->n] = off;
    b->len[b->n++] = len;
    return 0;
}

/* A datatype MPI handed out (MPI_File_get_view, MPI_Type_get_contents) is freed unless named. */
static void free_derived(MPI_Datatype *t)
{
    int a, c, d, k;
    if (fn.envelope(*t, &a, &c, &d, &k) == MPI_SUCCESS && k != MPI_COMBINER_NAMED)
        fn.type_free(t);
}

static int flatten(MPI_Datatype t, int64_t base, struct blocks *b, int depth);

/* count copies of t, copy i at base + disp(i) (disp in bytes) for blocklen consecutive extents */
static int repeat(MPI_Datatype t, int64_t base, int64_t disp, int64_t blocklen, struct blocks *b, int depth)
{
    MPI_Count lb, ext;
    if (fn.extent(t, &lb, &ext) != MPI_SUCCESS)
        return -1;
    for (int64_t j = 0; j < blocklen; j++)
        if (flatten(t, base + disp + j * ext, b, depth + 1))
            return -1;
    return 0;
}

/* The typemap of one t at base, as (offset, length) blocks appended to b, in typemap order. */
static int flatten(MPI_Datatype t, int64_t base, struct blocks *b, int depth)
{
    int ni, na, nd, comb;
    if (depth > MAX_DEPTH || fn.envelope(t, &ni, &na, &nd, &comb) != MPI_SUCCESS)
        return -1;
    if (comb == MPI_COMBINER_NAMED) {
        MPI_Count size;
        return iez_pmpi.PMPI_Type_size_x(t, &size) == MPI_SUCCESS ? add_block(b, base, size) : -1;
    }
    int *in = malloc(sizeof *in * (size_t)(ni + 1));
    MPI_Aint *ad = malloc(sizeof *ad * (size_t)(na + 1));
    MPI_Datatype *ty = malloc(sizeof *ty * (size_t)(nd + 1));
    int rc = -1;
    if (!in || !ad || !ty || fn.contents(t, ni, na, nd, in, ad, ty) != MPI_SUCCESS) {
        nd = 0;
        goto out;
    }
    MPI_Count lb, ext;
    if (fn.extent(ty[0], &lb, &ext) != MPI_SUCCESS)
        goto out;
    rc = 0;
    switch (comb) {
    case MPI_COMBINER_DUP:
    case MPI_COMBINER_RESIZED: /* the same typemap, another extent */
        rc = flatten(ty[0], base, b, depth + 1);
        break;
    case MPI_COMBINER_CONTIGUOUS:
        rc = repeat(ty[0], base, 0, in[0], b, depth);
        break;
    case MPI_COMBINER_VECTOR:
    case MPI_COMBINER_HVECTOR:
        for (int i = 0; i < in[0] && !rc; i++)
            rc = repeat(ty[0], base, comb == MPI_COMBINER_VECTOR ? (int64_t)i * in[2] * ext : (int64_t)i * ad[0],
                        in[1], b, depth);
        break;
    case MPI_COMBINER_INDEXED:
    case MPI_COMBINER_HINDEXED:
        for (int i = 0; i < in[0] && !rc; i++)
            rc = repeat(ty[0], base, comb == MPI_COMBINER_INDEXED ? (int64_t)in[1 + in[0] + i] * ext : ad[i],
                        in[1 + i], b, depth);
        break;
    case MPI_COMBINER_INDEXED_BLOCK:
    case MPI_COMBINER_HINDEXED_BLOCK:
        for (int i = 0; i < in[0] && !rc; i++)
            rc = repeat(ty[0], base, comb == MPI_COMBINER_INDEXED_BLOCK ? (int64_t)in[2 + i] * ext : ad[i], in[1],
                        b, depth);
        break;
    case MPI_COMBINER_STRUCT:
        for (int i = 0; i < in[0] && !rc; i++)
            rc = repeat(ty[i], base, ad[i], in[1 + i], b, depth);
        break;
    case MPI_COMBINER_SUBARRAY: {
        /* ndims, sizes, subsizes, starts, order: the elements in array order (MPI 4.0 §5.1.3) */
        int nd2 = in[0], *sizes = in + 1, *sub = in + 1 + nd2, *start = in + 1 + 2 * nd2;
        int c_order = in[1 + 3 * nd2] == MPI_ORDER_C;
        int64_t idx[32] = {0}, stride[32];
        if (nd2 < 1 || nd2 > 32) {
            rc = -1;
            break;
        }
        for (int k = 0; k < nd2; k++) {
            int d = c_order ? nd2 - 1 - k : k; /* k-th fastest dimension */
            stride[d] = k ? stride[c_order ? d + 1 : d - 1] * sizes[c_order ? d + 1 : d - 1] : 1;
            if (sub[d] <= 0)
                goto out;
        }
        int fast = c_order ? nd2 - 1 : 0;
        for (;;) {
            int64_t lin = 0;
            for (int d = 0; d < nd2; d++)
                lin += (start[d] + idx[d]) * stride[d];
            if ((rc = repeat(ty[0], base, lin * ext, sub[fast], b, depth)))
                break;
            int k = 1; /* the next row: carry from the second fastest dimension */
            for (; k < nd2; k++) {
                int d = c_order ? nd2 - 1 - k : k;
                if (++idx[d] < sub[d])
                    break;
                idx[d] = 0;
            }
            if (k == nd2)
                break;
        }
        break;
    }
    default: /* darray, Fortran types, ...: left to MPI */
        rc = -1;
    }
out:
    for (int i = 0; i < nd; i++)
        free_derived(&ty[i]);
    free(in);
    free(ad);
    free(ty);
    return rc;
}

/* ---- one call ------------------------------------------------------------------------------- */

struct piece {
    int64_t off, len, pos;           /* file offset, length, position in the rank's data */
    int aggr;                        /* the rank of its aggregator */
};

struct call {
    struct piece *p;
    size_t n, cap;
    int64_t bytes;                   /* count x type size */
    int64_t etypes;                  /* the same in etypes (how far the file pointer moves) */
};

static int add_piece(struct call *c, int64_t off, int64_t len, int64_t pos, int aggr)
{
    if (c->n && c->p[c->n - 1].aggr == aggr && c->p[c->n - 1].off + c->p[c->n - 1].len == off &&
        c->p[c->n - 1].pos + c->p[c->n - 1].len == pos) {
        c->p[c->n - 1].len += len;
        return 0;
    }
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 64;
        struct piece *p = realloc(c->p, cap * sizeof *p);
        if (!p)
            return -1;
        c->p = p;
        c->cap = cap;
    }
    c->p[c->n++] = (struct piece){off, len, pos, aggr};
    return 0;
}

/* This rank's pieces, each inside one stripe, for n bytes of the view from byte `from` of its
 * data (view: disp, the filetype's blocks, size and extent). */
static int cut(const struct crfile *f, struct call *c, int64_t disp, const struct blocks *b, int64_t tsize,
               int64_t text, int64_t from, int64_t n)
{
    int64_t inst = from / tsize, within = from % tsize, pos = 0;
    size_t k = 0;
    while (k < b->n && within >= b->len[k])
        within -= b->len[k++];
    while (pos < n) {
        int64_t off = disp + inst * text + b->off[k] + within;
        int64_t len = b->len[k] - within < n - pos ? b->len[k] - within : n - pos;
        while (len > 0) {
            uint64_t end;
            int g = iez_cr_map_owner(&f->map, (uint64_t)off, &end);
            if (g < 0)
                return -1;
            int64_t part = (int64_t)end - off < len ? (int64_t)end - off : len;
            if (add_piece(c, off, part, pos, f->aggr[g % f->naggr]))
                return -1;
            off += part, pos += part, len -= part, within += part;
        }
        if (within == b->len[k]) {
            within = 0;
            if (++k == b->n)
                k = 0, inst++;
        }
    }
    return 0;
}

/* What this rank asks for: 0, or -1 when the call is left to MPI. */
static int prepare(const struct crfile *f, MPI_File fh, int at, MPI_Offset off, MPI_Count count, MPI_Datatype type,
                   struct call *c)
{
    MPI_Count size;
    int amode, atomic;
    if (count < 0 || iez_pmpi.PMPI_Type_size_x(type, &size) != MPI_SUCCESS || size < 0 ||
        (size && count > INT_MAX / size) || fn.get_amode(fh, &amode) != MPI_SUCCESS ||
        (amode & (MPI_MODE_WRONLY | MPI_MODE_SEQUENTIAL)) || fn.get_atomicity(fh, &atomic) != MPI_SUCCESS ||
        atomic)
        return -1;
    c->bytes = count * size;
    MPI_Offset disp, pos = off;
    MPI_Datatype etype, ftype;
    char rep[MPI_MAX_DATAREP_STRING + 1];
    if (fn.get_view(fh, &disp, &etype, &ftype, rep) != MPI_SUCCESS)
        return -1;
    MPI_Count esize = 0, tsize = 0, lb, text;
    struct blocks b = {0};
    int rc = -1;
    if (strcmp(rep, "native") || iez_pmpi.PMPI_Type_size_x(etype, &esize) != MPI_SUCCESS || esize <= 0 ||
        c->bytes % esize || iez_pmpi.PMPI_Type_size_x(ftype, &tsize) != MPI_SUCCESS || tsize <= 0 ||
        fn.extent(ftype, &lb, &text) != MPI_SUCCESS || text <= 0 || (!at && iez_pmpi.PMPI_File_get_position(fh, &pos) != MPI_SUCCESS) ||
        pos < 0 || flatten(ftype, 0, &b, 0))
        goto out;
    for (size_t i = 0; i < b.n; i++) /* a view's typemap: increasing, not overlapping (MPI 4.0 §14.3) */
        if (b.off[i] < 0 || (i && b.off[i] < b.off[i - 1] + b.len[i - 1]))
            goto out;
    if (b.n == 1 && b.off[0] == 0 && b.len[0] == text) /* a contiguous view (bytes, ints, ...): one run */
        b.len[0] = tsize = text = INT64_MAX / 4;
    c->etypes = c->bytes / esize;
    rc = c->bytes ? cut(f, c, disp, &b, tsize, text, pos * esize, c->bytes) : 0;
out:
    free(b.off);
    free(b.len);
    free_derived(&etype);
    free_derived(&ftype);
    return rc;
}

static int by_aggr(const void *a, const void *b)
{
    const struct piece *x = a, *y = b;
    return x->aggr != y->aggr ? (x->aggr > y->aggr) - (x->aggr < y->aggr) : (x->pos > y->pos) - (x->pos < y->pos);
}

/* An aggregator's piece: where it is in the file and where its bytes go: at `at` in the send
 * buffer, or to dst, the aggregator's own data, when it asked for them itself. */
struct item {
    int64_t off, len, at;
    char *dst;
};

static int by_off(const void *a, const void *b)
{
    const struct item *x = a, *y = b;
    return (x->off > y->off) - (x->off < y->off);
}

/* pread all of [off, off + len) that is below eof into buf, zeros beyond: 0 or -1. */
static int read_range(const struct crfile *f, char *buf, int64_t off, int64_t len, int64_t eof)
{
    int64_t want = off >= eof ? 0 : (eof - off < len ? eof - off : len), got = 0;
    uint64_t t0 = iez_io_t0();
    while (got < want) {
        ssize_t r = iez_sys_pread(f->fd, buf + got, (size_t)(want - got), (off_t)(off + got));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        if (r == 0)
            break; /* the file shrank since fstat: as past its end */
        got += r;
    }
    memset(buf + got, 0, (size_t)(len - got));
    if (f->iolog && got > 0)
        iez_iolog_event(0, t0, (uint64_t)off, (uint64_t)got, f->path, f->path_len);
    return 0;
}

#define MAX_RUN (16ll << 20)         /* one pread reads at most this much, unless one piece is larger */

/* The aggregator's part: read every item into its place, in runs of sorted, touching or
 * same-stripe items. 0 or -1; *eof: the file's size. */
static int serve(struct crfile *f, struct item *it, size_t n, int64_t *eof)
{
    struct stat st;
    if (f->fd < 0 && f->path) {
        int fd = iez_sys_openat(AT_FDCWD, f->path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY, 0);
        /* the very file rank 0 read the layout of */
        if (fd >= 0 && (iez_sys_fstat(fd, &st) || (int64_t)st.st_dev != f->dev || (int64_t)st.st_ino != f->ino)) {
            iez_sys_close(fd);
            fd = -1;
        }
        f->fd = fd;
    }
    if (f->fd < 0 || iez_sys_fstat(f->fd, &st))
        return -1;
    *eof = st.st_size;
    qsort(it, n, sizeof *it, by_off);
    char *run = NULL;
    int rc = 0;
    for (size_t i = 0; i < n && !rc;) {
        int64_t a = it[i].off, b = a + it[i].len;
        uint64_t stripe_end = 0;
        iez_cr_map_owner(&f->map, (uint64_t)a, &stripe_end);
        size_t j = i + 1;
        /* the next piece touches the run, or lies further in the same stripe (of this OST) */
        while (j < n && (it[j].off <= b || it[j].off < (int64_t)stripe_end) && it[j].off + it[j].len - a <= MAX_RUN) {
            if (it[j].off + it[j].len > b)
                b = it[j].off + it[j].len;
            if (b > (int64_t)stripe_end)
                iez_cr_map_owner(&f->map, (uint64_t)b - 1, &stripe_end);
            j++;
        }
        if (j == i + 1) { /* one piece: straight into its place */
            rc = read_range(f, it[i].dst, a, b - a, *eof);
        } else {
            char *r = realloc(run, (size_t)(b - a));
            if (!r) {
                rc = -1;
                break;
            }
            run = r;
            rc = read_range(f, run, a, b - a, *eof);
            for (size_t k = i; k < j && !rc; k++)
                memcpy(it[k].dst, run + (it[k].off - a), (size_t)it[k].len);
        }
        i = j;
    }
    free(run);
    return rc;
}

static int too_big(int64_t v) { return v < 0 || v > INT_MAX; }

/* The exchange and the reads; 0: served (bytes read in *got), -1: every rank goes to MPI. */
static int exchange(struct crfile *f, struct call *c, char *stream, int64_t *got)
{
    int P = f->size, rc = -1;
    int *cnt = f->cnt; /* send, recv counts and displacements, twice */
    memset(cnt, 0, 8 * sizeof *cnt * (size_t)P);
    int *sc = cnt, *sd = cnt + P, *rcn = cnt + 2 * P, *rd = cnt + 3 * P;
    int *dsc = cnt + 4 * P, *dsd = cnt + 5 * P, *drc = cnt + 6 * P, *drd = cnt + 7 * P;
    int64_t *req = NULL, *in = NULL;
    char *recv = NULL, *send = NULL;
    struct item *it = NULL;
    int ok = c->bytes >= 0; /* bytes < 0: this rank leaves the call to MPI */
    if (ok) {
        qsort(c->p, c->n, sizeof *c->p, by_aggr);
        req = malloc(2 * sizeof *req * (c->n + 1));
        recv = malloc((size_t)c->bytes + 1);
        ok = req && recv && c->n < INT_MAX / 2;
    }
    size_t self = c->n; /* the first of the pieces this rank serves itself (sorted: one run) */
    for (size_t i = 0; ok && i < c->n; i++) {
        int r = c->p[i].aggr;
        sc[r] += 2;
        if (r != f->rank) /* its own pieces it reads straight into place */
            drc[r] += (int)c->p[i].len;
        else if (self == c->n)
            self = i;
        req[2 * i] = c->p[i].off;
        req[2 * i + 1] = c->p[i].len;
    }
    for (int r = 1; ok && r < P; r++) {
        sd[r] = sd[r - 1] + sc[r - 1];
        drd[r] = drd[r - 1] + drc[r - 1];
    }
    /* agreement 1, in the counts' exchange: -1 to everyone from a rank that cannot describe its
     * request, so that every rank sees it */
    for (int r = 0; !ok && r < P; r++)
        sc[r] = -1;
    if (fn.alltoall(sc, 1, MPI_INT, rcn, 1, MPI_INT, f->comm) != MPI_SUCCESS)
        goto out;
    for (int r = 0; r < P; r++)
        if (rcn[r] < 0)
            goto out;
    int64_t total = 0;
    for (int r = 0; r < P; r++) {
        rd[r] = (int)total;
        total += rcn[r];
        ok &= !too_big(total);
    }
    in = ok ? malloc(sizeof *in * (size_t)(total + 1)) : NULL;
    ok = in != NULL;
    /* agreement 2: every aggregator can hold the requests */
    if (iez_pmpi.PMPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, f->comm) != MPI_SUCCESS || !ok)
        goto out;
    if (fn.alltoallv(req, sc, sd, MPI_LONG_LONG, in, rcn, rd, MPI_LONG_LONG, f->comm) != MPI_SUCCESS)
        goto out;
    size_t n = (size_t)total / 2;
    int64_t bytes = 0, eof = -1;
    it = malloc(sizeof *it * (n + 1));
    ok = it != NULL;
    for (int r = 0; ok && r < P; r++) {
        dsd[r] = (int)bytes;
        for (int k = rd[r] / 2; k < (rd[r] + rcn[r]) / 2; k++) {
            int64_t len = in[2 * k + 1];
            ok &= in[2 * k] >= 0 && len > 0;
            if (r == f->rank) {
                it[k] = (struct item){in[2 * k], len, 0, stream + c->p[self++].pos};
                continue;
            }
            it[k] = (struct item){in[2 * k], len, bytes, NULL};
            bytes += len;
            ok &= !too_big(bytes);
        }
        dsc[r] = (int)(bytes - dsd[r]);
    }
    send = ok ? malloc((size_t)bytes + 1) : NULL;
    for (size_t k = 0; send && k < n; k++)
        if (!it[k].dst)
            it[k].dst = send + it[k].at;
    int64_t verdict[2] = {!(ok && send && (n == 0 || serve(f, it, n, &eof) == 0)), n ? eof : -1};
    /* agreement 3: every aggregator has read its pieces; the largest size any of them saw */
    if (iez_pmpi.PMPI_Allreduce(MPI_IN_PLACE, verdict, 2, MPI_LONG_LONG, MPI_MAX, f->comm) != MPI_SUCCESS ||
        verdict[0])
        goto out;
    if (fn.alltoallv(send, dsc, dsd, MPI_BYTE, recv, drc, drd, MPI_BYTE, f->comm) != MPI_SUCCESS)
        goto out;
    /* the pieces came back aggregator by aggregator, each in the order they were asked for */
    int64_t at = 0, valid = 0;
    for (size_t i = 0; i < c->n; i++) {
        const struct piece *p = &c->p[i];
        if (p->aggr != f->rank) {
            memcpy(stream + p->pos, recv + at, (size_t)p->len);
            at += p->len;
        }
        int64_t below = verdict[1] - p->off;
        valid += below <= 0 ? 0 : below < p->len ? below : p->len;
    }
    *got = valid;
    rc = 0;
out:
    free(req);
    free(in);
    free(recv);
    free(send);
    free(it);
    return rc;
}

/* The whole call on this file: its MPI return code, or -1: left to MPI (every rank alike). */
static int collective_read(struct crfile *f, MPI_File fh, int at, MPI_Offset off, void *buf, MPI_Count count,
                           MPI_Datatype type, MPI_Status *st)
{
    if (!f->state)
        set_up(f);
    if (f->state < 0)
        return -1;
    struct call c = {0};
    int ok = prepare(f, fh, at, off, count, type, &c) == 0;
    /* where the data go: straight into buf when type is contiguous, else unpacked from a copy */
    MPI_Count tlb = 0, text = 0, lb = 0, ext = 0, size = 0;
    int contiguous = ok && fn.true_extent(type, &tlb, &text) == MPI_SUCCESS && fn.extent(type, &lb, &ext) == MPI_SUCCESS &&
                     iez_pmpi.PMPI_Type_size_x(type, &size) == MPI_SUCCESS && text == size && ext == size;
    char *copy = ok && !contiguous ? malloc((size_t)c.bytes + 1) : NULL;
    if (!ok || (!contiguous && !copy))
        c.n = 0, c.bytes = -1; /* still in the agreements, so that the others learn it */
    int64_t got = 0;
    int rc = exchange(f, &c, copy ? copy : (char *)buf + tlb, &got);
    int pos = 0;
    /* past the agreements no rank can go back to MPI alone: a failure is the call's error */
    if (!rc && copy && c.bytes > 0 && fn.unpack(copy, (int)c.bytes, &pos, buf, (int)count, type, f->comm) != MPI_SUCCESS)
        rc = MPI_ERR_TYPE;
    free(copy);
    if (!rc && !at && c.etypes) {
        MPI_Offset p;
        /* the individual pointer moves past the data asked for, as ROMIO's collective read does */
        if (iez_pmpi.PMPI_File_get_position(fh, &p) != MPI_SUCCESS || fn.seek(fh, p + c.etypes, MPI_SEEK_SET) != MPI_SUCCESS)
            rc = MPI_ERR_OTHER;
    }
    if (!rc && st != MPI_STATUS_IGNORE)
        fn.set_elements(st, MPI_BYTE, got);
    free(c.p);
    return rc;
}

int iez_collread_try(int kind, int *rc, ...)
{
    va_list ap;
    va_start(ap, rc);
    MPI_File fh = va_arg(ap, MPI_File);
    int k = kind & ~IEZ_CR_LARGE, at = k == IEZ_CR_AT_ALL || k == IEZ_CR_AT_ALL_BEGIN;
    MPI_Offset off = at ? va_arg(ap, MPI_Offset) : 0;
    void *buf = va_arg(ap, void *);
    MPI_Count count = kind & IEZ_CR_LARGE ? va_arg(ap, MPI_Count) : va_arg(ap, int);
    MPI_Datatype type = va_arg(ap, MPI_Datatype);
    MPI_Status *st = k == IEZ_CR_ALL || k == IEZ_CR_AT_ALL ? va_arg(ap, MPI_Status *) : NULL;
    va_end(ap);
    struct crfile *f = find(fh);
    if (!f)
        return 0;
    MPI_Status own;
    int begin = k == IEZ_CR_ALL_BEGIN || k == IEZ_CR_AT_ALL_BEGIN;
    int done = collective_read(f, fh, at, off, buf, count, type, begin ? &own : st);
    if (done < 0) {
        if (f->state > 0)
            iez_log_once(IEZ_LOG_COLLREAD, "Lustre-aware collective read: a view, type or file it cannot serve "
                         "(%s): MPI's own read", f->path ? f->path : "?");
        return 0;
    }
    if (begin) { /* the data are in; MPI_File_read_*_end gives the status */
        f->split_status = own;
        f->split = 1;
    }
    *rc = done;
    return 1;
}

/* The end of a split collective read: the status of a begin this file served, else MPI's. */
static int split_end(int (*real)(MPI_File, void *, MPI_Status *), MPI_File fh, void *buf, MPI_Status *st)
{
    struct crfile *f = iez_collread_on ? find(fh) : NULL;
    if (!f || !f->split)
        return real(fh, buf, st);
    f->split = 0;
    if (st != MPI_STATUS_IGNORE)
        *st = f->split_status;
    return MPI_SUCCESS;
}

IEZ_EXPORT int MPI_File_read_all_end(MPI_File fh, void *buf, MPI_Status *st)
{
    if (iez_pmpi_ready(__builtin_return_address(0)))
        return MPI_ERR_INTERN;
    pthread_once(&once, configure);
    return fn.read_all_end ? split_end(fn.read_all_end, fh, buf, st) : MPI_ERR_INTERN;
}

IEZ_EXPORT int MPI_File_read_at_all_end(MPI_File fh, void *buf, MPI_Status *st)
{
    if (iez_pmpi_ready(__builtin_return_address(0)))
        return MPI_ERR_INTERN;
    pthread_once(&once, configure);
    return fn.read_at_all_end ? split_end(fn.read_at_all_end, fh, buf, st) : MPI_ERR_INTERN;
}

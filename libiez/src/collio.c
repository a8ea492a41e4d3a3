/* libiez-mpi's own collective I/O: what the Lustre-aware collective read (references:
 * s003-figs4-5; collread.c) and split writing's aggregation (references: s001-hierarchical;
 * collwrite.c) share. A file is registered at MPI_File_open when one of them may serve it; at its
 * first collective call served, rank 0 reads its layout (one stripe map for every rank) and the
 * ranks are ordered as aggregators, one per node in turn (the first rank of every node, then the
 * second, ...) so that they spread over the nodes as the papers' clients do. Each call flattens
 * every rank's request (the file view from its position or offset, for count x type bytes) into
 * file extents, cut into pieces of one stripe (reads) or one component (writes), each for its
 * aggregator, whose (offset, length) go to that aggregator (MPI_Alltoallv). Every step that can
 * fail on one rank only ends in an agreement after which all ranks either go on or make the MPI
 * library's own call, which then does the whole call. */
#include "collio.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backend.h"
#include "dynsym.h"
#include "iolog.h"
#include "log.h"
#include "lum.h"
#include "place.h"
#include "plan.h"
#include "pmpi.h"
#include "state.h"
#include "sysio.h"

int iez_collio_on, iez_collread_on;

/* ---- the stripe map (pure) ----------------------------------------------------------------- */

int iez_cio_map_build(const struct iez_layout *lay, struct iez_cio_map *m)
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
    size_t len = IEZ_CIO_HEAD + (size_t)IEZ_CIO_COMP * lay->ncomp + slots;
    int64_t *v = malloc(len * sizeof *v);
    int *seen = calloc(IEZ_MAX_OST_INDEX + 1, sizeof *seen); /* OST -> group + 1 */
    if (!v || !seen) {
        free(v);
        free(seen);
        return -1;
    }
    int64_t groups = 0;
    size_t at = IEZ_CIO_HEAD + (size_t)IEZ_CIO_COMP * lay->ncomp, first = at;
    for (uint32_t c = 0; c < lay->ncomp; c++) {
        const struct iez_comp *k = &lay->comp[c];
        int64_t *e = v + IEZ_CIO_HEAD + (size_t)IEZ_CIO_COMP * c;
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

int iez_cio_map_owner(const struct iez_cio_map *m, uint64_t off, uint64_t *stripe_end)
{
    const int64_t *v = m->v;
    for (int64_t c = 0; c < v[0]; c++) {
        const int64_t *e = v + IEZ_CIO_HEAD + IEZ_CIO_COMP * c;
        if (off < (uint64_t)e[0] || off >= (uint64_t)e[1])
            continue;
        /* Lustre's RAID-0: stripe number from the file offset, not the component's (lov_stripe_number) */
        uint64_t size = (uint64_t)e[2], stripe = off / size, end = (stripe + 1) * size;
        *stripe_end = end < (uint64_t)e[1] ? end : (uint64_t)e[1];
        size_t first = IEZ_CIO_HEAD + (size_t)IEZ_CIO_COMP * (size_t)v[0] + (size_t)e[4];
        return (int)v[first + stripe % (uint64_t)e[3]];
    }
    return -1;
}

int iez_cio_map_component(const struct iez_cio_map *m, uint64_t off, uint64_t *comp_end)
{
    for (int64_t c = 0; c < m->v[0]; c++) {
        const int64_t *e = m->v + IEZ_CIO_HEAD + IEZ_CIO_COMP * c;
        if (off >= (uint64_t)e[0] && off < (uint64_t)e[1]) {
            *comp_end = (uint64_t)e[1];
            return (int)c;
        }
    }
    return -1;
}

void iez_cio_map_free(struct iez_cio_map *m)
{
    free(m->v);
    m->v = NULL;
    m->len = 0;
}


/* ---- the MPI functions it needs beyond pmpi.h's --------------------------------------------- */

struct iez_cio_fn iez_cio_fn;
static int fn_ok;

static void resolve(void)
{
    const void *mpi = (const void *)iez_pmpi.PMPI_File_open;
    static const char *const names[] = {
        "PMPI_Alltoall", "PMPI_Alltoallv", "PMPI_Allgather", "PMPI_Comm_split_type", "PMPI_File_get_view",
        "PMPI_File_get_amode", "PMPI_File_get_atomicity", "PMPI_File_seek", "PMPI_Type_get_envelope",
        "PMPI_Type_get_contents", "PMPI_Type_get_extent_x", "PMPI_Type_get_true_extent_x", "PMPI_Type_free",
        "PMPI_Unpack", "PMPI_Pack", "PMPI_Status_set_elements_x", "PMPI_File_read_all_end",
        "PMPI_File_read_at_all_end", "PMPI_File_write_all_end", "PMPI_File_write_at_all_end"};
    void **slot = (void **)&iez_cio_fn;
    fn_ok = 1;
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        fn_ok &= (slot[i] = iez_dynsym_beside(names[i], mpi)) != NULL;
}

/* ---- the files ----------------------------------------------------------------------------- */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct iez_cio_file *files;
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* IEZ_COLLREAD unset and a plan given to place from (as split writing takes its hints): the
 * plan's collread key decides at each open (by_plan). */
static int by_plan;

static void configure(void)
{
    /* off unless asked, by IEZ_COLLREAD or else by the plan; the variable set wins */
    const char *v = getenv("IEZ_COLLREAD");
    iez_collread_on = v && !strcmp(v, "lustre");
    by_plan = !(v && *v) && iez_cfg.place && iez_cfg.plan[0];
    if (v && *v && strcmp(v, "lustre") && strcmp(v, "off"))
        iez_log_once(IEZ_LOG_COLLREAD, "IEZ_COLLREAD=%s is neither lustre nor off: off", v);
    resolve();
    if ((iez_collread_on || by_plan) && !fn_ok) {
        if (iez_collread_on)
            iez_log_once(IEZ_LOG_COLLREAD, "IEZ_COLLREAD=lustre: MPI lacks a function it needs: off");
        iez_collread_on = by_plan = 0;
    }
    iez_collio_on = iez_collread_on;
}

struct iez_cio_file *iez_cio_find(MPI_File fh)
{
    pthread_mutex_lock(&lock);
    struct iez_cio_file *f = files;
    while (f && f->fh != fh)
        f = f->next;
    pthread_mutex_unlock(&lock);
    return f;
}

void iez_cio_configure(void) { pthread_once(&once, configure); }

/* The plan's choice of the read for a file opened on comm: rank 0's plan answers for all, as
 * it answers for the layout (wanted(), below), so every rank enters the Comm_dup or none. */
static int plan_wants(MPI_Comm comm)
{
    if (!by_plan)
        return 0;
    int rank = 0, on = 0;
    iez_pmpi.PMPI_Comm_rank(comm, &rank);
    if (rank == 0) {
        on = iez_plan_collread(iez_place_plan()) == IEZ_COLLREAD_LUSTRE;
        static int said;
        if (on && !__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
            iez_log("the plan asks for the Lustre-aware collective read (collread=lustre)");
    }
    return iez_pmpi.PMPI_Bcast(&on, 1, MPI_INT, 0, comm) == MPI_SUCCESS && on;
}

void iez_collio_opened(MPI_Comm comm, MPI_File fh, const char *abs, int len, int amode, int aggregate)
{
    iez_cio_configure();
    /* the same on every rank (the environment, the amode, rank 0's plan and aggregate): all
     * enter the Comm_dup or none */
    int read = !(amode & (MPI_MODE_WRONLY | MPI_MODE_SEQUENTIAL)) && (iez_collread_on || plan_wants(comm));
    int write = aggregate && fn_ok && !(amode & (MPI_MODE_RDONLY | MPI_MODE_SEQUENTIAL));
    if (!read && !write)
        return;
    struct iez_cio_file *f = calloc(1, sizeof *f);
    MPI_Comm dup = MPI_COMM_NULL;
    if (iez_pmpi.PMPI_Comm_dup(comm, &dup) != MPI_SUCCESS || !f) {
        free(f); /* a rank without memory leaves this file to MPI: the first read agrees on it */
        if (dup != MPI_COMM_NULL)
            iez_pmpi.PMPI_Comm_free(&dup);
        return;
    }
    f->fh = fh;
    f->comm = dup;
    f->read = read;
    f->write = write;
    f->fd = f->wfd = -1;
    iez_pmpi.PMPI_Comm_rank(dup, &f->rank);
    iez_pmpi.PMPI_Comm_size(dup, &f->size);
    if (len >= 0 && (f->path = malloc((size_t)len + 1))) {
        memcpy(f->path, abs, (size_t)len + 1);
        f->path_len = (size_t)len;
    }
    pthread_mutex_lock(&lock);
    f->next = files;
    files = f;
    __atomic_store_n(&iez_collio_on, 1, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&lock);
}

void iez_collio_closing(MPI_File fh)
{
    pthread_mutex_lock(&lock);
    struct iez_cio_file **p = &files, *f = NULL;
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
    if (f->wfd >= 0)
        iez_sys_close(f->wfd);
    iez_cio_map_free(&f->map);
    free(f->order);
    free(f->cnt);
    free(f->path);
    free(f);
}

/* Rank 0: the stripe map of the file, with its device and inode and whether it is on the
 * emulated cluster, or -1. */
static int read_map(const struct iez_cio_file *f, struct iez_cio_map *m, int64_t id[3])
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
            rc = iez_cio_map_build(&lay, m);
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

/* Whether libiez serves this file's collective calls: asked for (IEZ_COLLREAD=lustre or the
 * plan's collread at open, split writing's aggregation) and a layout iez can read, decided on
 * rank 0. */
static int wanted(struct iez_cio_file *f, struct iez_cio_map *m, int64_t id[3])
{
    return read_map(f, m, id) == 0;
}

void iez_cio_set_up(struct iez_cio_file *f, const char *what, const char *kind)
{
    int64_t head[4] = {0, 0, 0, 0}; /* map length (0: left to MPI), dev, ino, iolog */
    struct iez_cio_map m = {0};
    if (f->rank == 0 && wanted(f, &m, head + 1))
        head[0] = (int64_t)m.len;
    if (f->rank == 0 && !head[0])
        iez_log_once(IEZ_LOG_COLLREAD, "%s: %s is not on Lustre, or its layout is not one it serves: MPI's own %s",
                     what, f->path ? f->path : "a file", kind);
    if (iez_pmpi.PMPI_Bcast(head, 4, MPI_LONG_LONG, 0, f->comm) != MPI_SUCCESS || head[0] <= 0 || head[0] > INT_MAX) {
        iez_cio_map_free(&m);
        f->state = -1;
        return;
    }
    if (f->rank != 0)
        m.v = malloc((size_t)head[0] * sizeof *m.v);
    m.len = (size_t)head[0];
    int *all = malloc(2 * sizeof(int) * (size_t)f->size);
    f->order = malloc(sizeof *f->order * (size_t)f->size);
    f->cnt = malloc(8 * sizeof *f->cnt * (size_t)f->size); /* here, so that no call lacks it */
    int ok = m.v && all && f->order && f->cnt;
    if (iez_pmpi.PMPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, f->comm) != MPI_SUCCESS || !ok ||
        iez_pmpi.PMPI_Bcast(m.v, (int)head[0], MPI_LONG_LONG, 0, f->comm) != MPI_SUCCESS) {
        free(all);
        iez_cio_map_free(&m);
        f->state = -1;
        iez_log_once(IEZ_LOG_COLLREAD, "%s: no memory for %s: MPI's own %s", what, f->path ? f->path : "a file",
                     kind);
        return;
    }
    /* the nodes: each rank's (node, rank on it), node = its first rank in the communicator */
    int mine[2] = {f->rank, 0};
    MPI_Comm node;
    if (iez_cio_fn.split_type(f->comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
        iez_pmpi.PMPI_Comm_rank(node, &mine[1]);
        iez_pmpi.PMPI_Bcast(&mine[0], 1, MPI_INT, 0, node);
        iez_pmpi.PMPI_Comm_free(&node);
    }
    iez_cio_fn.allgather(mine, 2, MPI_INT, all, 2, MPI_INT, f->comm);
    /* ranks by (rank on the node, node): the first rank of every node, then the second, ... */
    int n = 0;
    for (int depth = 0; n < f->size && depth < f->size; depth++)
        for (int r = 0; r < f->size && n < f->size; r++)
            if (all[2 * r + 1] == depth)
                f->order[n++] = r;
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
    if (iez_cio_fn.envelope(*t, &a, &c, &d, &k) == MPI_SUCCESS && k != MPI_COMBINER_NAMED)
        iez_cio_fn.type_free(t);
}

static int flatten(MPI_Datatype t, int64_t base, struct blocks *b, int depth);

/* count copies of t, copy i at base + disp(i) (disp in bytes) for blocklen consecutive extents */
static int repeat(MPI_Datatype t, int64_t base, int64_t disp, int64_t blocklen, struct blocks *b, int depth)
{
    MPI_Count lb, ext;
    if (iez_cio_fn.extent(t, &lb, &ext) != MPI_SUCCESS)
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
    if (depth > MAX_DEPTH || iez_cio_fn.envelope(t, &ni, &na, &nd, &comb) != MPI_SUCCESS)
        return -1;
    if (comb == MPI_COMBINER_NAMED) {
        MPI_Count size;
        return iez_pmpi.PMPI_Type_size_x(t, &size) == MPI_SUCCESS ? add_block(b, base, size) : -1;
    }
    int *in = malloc(sizeof *in * (size_t)(ni + 1));
    MPI_Aint *ad = malloc(sizeof *ad * (size_t)(na + 1));
    MPI_Datatype *ty = malloc(sizeof *ty * (size_t)(nd + 1));
    int rc = -1;
    if (!in || !ad || !ty || iez_cio_fn.contents(t, ni, na, nd, in, ad, ty) != MPI_SUCCESS) {
        nd = 0;
        goto out;
    }
    MPI_Count lb, ext;
    if (iez_cio_fn.extent(ty[0], &lb, &ext) != MPI_SUCCESS)
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

static int add_piece(struct iez_cio_call *c, int64_t off, int64_t len, int64_t pos, int aggr)
{
    if (c->n && c->p[c->n - 1].aggr == aggr && c->p[c->n - 1].off + c->p[c->n - 1].len == off &&
        c->p[c->n - 1].pos + c->p[c->n - 1].len == pos) {
        c->p[c->n - 1].len += len;
        return 0;
    }
    if (c->n == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 64;
        struct iez_cio_piece *p = realloc(c->p, cap * sizeof *p);
        if (!p)
            return -1;
        c->p = p;
        c->cap = cap;
    }
    c->p[c->n++] = (struct iez_cio_piece){off, len, pos, aggr};
    return 0;
}

/* This rank's pieces, each inside one stripe (a read: its OST's aggregator) or one component (a
 * write: the component's), for n bytes of the view from byte `from` of its data (view: disp,
 * the filetype's blocks, size and extent). */
static int cut(const struct iez_cio_file *f, int write, struct iez_cio_call *c, int64_t disp, const struct blocks *b,
               int64_t tsize, int64_t text, int64_t from, int64_t n)
{
    /* aggregator of group g: order[g mod A], A = min(groups, ranks) */
    int64_t groups = write ? f->map.v[0] : f->map.v[1];
    int naggr = groups < f->size ? (int)groups : f->size;
    int64_t inst = from / tsize, within = from % tsize, pos = 0;
    size_t k = 0;
    while (k < b->n && within >= b->len[k])
        within -= b->len[k++];
    while (pos < n) {
        int64_t off = disp + inst * text + b->off[k] + within;
        int64_t len = b->len[k] - within < n - pos ? b->len[k] - within : n - pos;
        while (len > 0) {
            uint64_t end;
            int g = write ? iez_cio_map_component(&f->map, (uint64_t)off, &end)
                          : iez_cio_map_owner(&f->map, (uint64_t)off, &end);
            if (g < 0)
                return -1;
            int64_t part = (int64_t)end - off < len ? (int64_t)end - off : len;
            if (add_piece(c, off, part, pos, f->order[g % naggr]))
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

int iez_cio_prepare(const struct iez_cio_file *f, MPI_File fh, int write, int at, MPI_Offset off, MPI_Count count,
                    MPI_Datatype type, struct iez_cio_call *c)
{
    MPI_Count size;
    int amode, atomic;
    if (count < 0 || iez_pmpi.PMPI_Type_size_x(type, &size) != MPI_SUCCESS || size < 0 ||
        (size && count > INT_MAX / size) || iez_cio_fn.get_amode(fh, &amode) != MPI_SUCCESS ||
        (amode & ((write ? MPI_MODE_RDONLY : MPI_MODE_WRONLY) | MPI_MODE_SEQUENTIAL)) || iez_cio_fn.get_atomicity(fh, &atomic) != MPI_SUCCESS ||
        atomic)
        return -1;
    c->bytes = count * size;
    MPI_Offset disp, pos = off;
    MPI_Datatype etype, ftype;
    char rep[MPI_MAX_DATAREP_STRING + 1];
    if (iez_cio_fn.get_view(fh, &disp, &etype, &ftype, rep) != MPI_SUCCESS)
        return -1;
    MPI_Count esize = 0, tsize = 0, lb, text;
    struct blocks b = {0};
    int rc = -1;
    if (strcmp(rep, "native") || iez_pmpi.PMPI_Type_size_x(etype, &esize) != MPI_SUCCESS || esize <= 0 ||
        c->bytes % esize || iez_pmpi.PMPI_Type_size_x(ftype, &tsize) != MPI_SUCCESS || tsize <= 0 ||
        iez_cio_fn.extent(ftype, &lb, &text) != MPI_SUCCESS || text <= 0 || (!at && iez_pmpi.PMPI_File_get_position(fh, &pos) != MPI_SUCCESS) ||
        pos < 0 || flatten(ftype, 0, &b, 0))
        goto out;
    for (size_t i = 0; i < b.n; i++) /* a view's typemap: increasing, not overlapping (MPI 4.0 §14.3) */
        if (b.off[i] < 0 || (i && b.off[i] < b.off[i - 1] + b.len[i - 1]))
            goto out;
    if (b.n == 1 && b.off[0] == 0 && b.len[0] == text) /* a contiguous view (bytes, ints, ...): one run */
        b.len[0] = tsize = text = INT64_MAX / 4;
    c->etypes = c->bytes / esize;
    rc = c->bytes ? cut(f, write, c, disp, &b, tsize, text, pos * esize, c->bytes) : 0;
out:
    free(b.off);
    free(b.len);
    free_derived(&etype);
    free_derived(&ftype);
    return rc;
}

static int by_aggr(const void *a, const void *b)
{
    const struct iez_cio_piece *x = a, *y = b;
    return x->aggr != y->aggr ? (x->aggr > y->aggr) - (x->aggr < y->aggr) : (x->pos > y->pos) - (x->pos < y->pos);
}


int iez_cio_by_off(const void *a, const void *b)
{
    const struct iez_cio_item *x = a, *y = b;
    return (x->off > y->off) - (x->off < y->off);
}

int iez_cio_contiguous(const void *buf, MPI_Datatype type, const char **base)
{
    MPI_Count tlb = 0, text = 0, lb = 0, ext = 0, size = 0;
    if (iez_cio_fn.true_extent(type, &tlb, &text) != MPI_SUCCESS || iez_cio_fn.extent(type, &lb, &ext) != MPI_SUCCESS ||
        iez_pmpi.PMPI_Type_size_x(type, &size) != MPI_SUCCESS || text != size || ext != size)
        return 0;
    *base = (const char *)buf + tlb;
    return 1;
}

int iez_cio_requests(struct iez_cio_file *f, struct iez_cio_call *c, int64_t **in, size_t *self)
{
    int P = f->size, rc = -1;
    int *sc = f->cnt, *sd = f->cnt + P, *rcn = f->cnt + 2 * P, *rd = f->cnt + 3 * P;
    memset(f->cnt, 0, 4 * sizeof *f->cnt * (size_t)P);
    int64_t *req = NULL;
    *in = NULL;
    *self = c->n;
    int ok = c->bytes >= 0; /* bytes < 0: this rank leaves the call to MPI */
    if (ok) {
        qsort(c->p, c->n, sizeof *c->p, by_aggr);
        req = malloc(2 * sizeof *req * (c->n + 1));
        ok = req && c->n < INT_MAX / 2;
    }
    for (size_t i = 0; ok && i < c->n; i++) {
        sc[c->p[i].aggr] += 2;
        if (c->p[i].aggr == f->rank && *self == c->n) /* sorted: its own pieces are one run */
            *self = i;
        req[2 * i] = c->p[i].off;
        req[2 * i + 1] = c->p[i].len;
    }
    for (int r = 1; ok && r < P; r++)
        sd[r] = sd[r - 1] + sc[r - 1];
    /* agreement 1, in the counts' exchange: -1 to everyone from a rank that cannot describe its
     * request, so that every rank sees it */
    for (int r = 0; !ok && r < P; r++)
        sc[r] = -1;
    if (iez_cio_fn.alltoall(sc, 1, MPI_INT, rcn, 1, MPI_INT, f->comm) != MPI_SUCCESS)
        goto out;
    for (int r = 0; r < P; r++)
        if (rcn[r] < 0)
            goto out;
    int64_t total = 0;
    for (int r = 0; r < P; r++) {
        rd[r] = (int)total;
        total += rcn[r];
        ok &= !iez_cio_too_big(total);
    }
    *in = ok ? malloc(sizeof **in * (size_t)(total + 1)) : NULL;
    ok = *in != NULL;
    /* agreement 2: every aggregator can hold the requests */
    if (iez_pmpi.PMPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, f->comm) != MPI_SUCCESS || !ok ||
        iez_cio_fn.alltoallv(req, sc, sd, MPI_LONG_LONG, *in, rcn, rd, MPI_LONG_LONG, f->comm) != MPI_SUCCESS)
        goto out;
    for (int64_t k = 0; k < total; k += 2)
        if ((*in)[k] < 0 || (*in)[k + 1] <= 0)
            goto out;
    rc = 0;
out:
    free(req);
    if (rc) {
        free(*in);
        *in = NULL;
    }
    return rc;
}

int iez_cio_items(struct iez_cio_file *f, const struct iez_cio_call *c, const int64_t *in, size_t self, char *stream,
                  struct iez_cio_item **it, size_t *n, int64_t *mine, int64_t *theirs)
{
    int P = f->size;
    int *rcn = f->cnt + 2 * P, *rd = f->cnt + 3 * P;
    int *mc = f->cnt + 4 * P, *md = f->cnt + 5 * P, *tc = f->cnt + 6 * P, *td = f->cnt + 7 * P;
    memset(mc, 0, 4 * sizeof *mc * (size_t)P);
    *mine = *theirs = 0;
    for (size_t i = 0; i < c->n; i++)
        if (c->p[i].aggr != f->rank) { /* its own pieces it serves from (into) where they are */
            mc[c->p[i].aggr] += (int)c->p[i].len;
            *mine += c->p[i].len;
        }
    for (int r = 1; r < P; r++)
        md[r] = md[r - 1] + mc[r - 1];
    *n = (size_t)(rd[P - 1] + rcn[P - 1]) / 2;
    *it = malloc(sizeof **it * (*n + 1));
    int ok = *it && !iez_cio_too_big(*mine);
    for (int r = 0; ok && r < P; r++) {
        td[r] = (int)*theirs;
        for (int k = rd[r] / 2; k < (rd[r] + rcn[r]) / 2; k++) {
            int64_t len = in[2 * k + 1];
            if (r == f->rank) {
                (*it)[k] = (struct iez_cio_item){in[2 * k], len, 0, stream + c->p[self++].pos};
                continue;
            }
            (*it)[k] = (struct iez_cio_item){in[2 * k], len, *theirs, NULL};
            *theirs += len;
            ok &= !iez_cio_too_big(*theirs);
        }
        tc[r] = (int)(*theirs - td[r]);
    }
    return ok ? 0 : -1;
}

int iez_cio_open(const struct iez_cio_file *f, int flags)
{
    struct stat st;
    if (!f->path)
        return -1;
    /* never O_CREAT nor O_TRUNC: the file MPI opened, as it is */
    int fd = iez_sys_openat(AT_FDCWD, f->path, flags | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY, 0);
    if (fd >= 0 && (iez_sys_fstat(fd, &st) || (int64_t)st.st_dev != f->dev || (int64_t)st.st_ino != f->ino)) {
        iez_sys_close(fd);
        fd = -1;
    }
    return fd;
}

int iez_cio_advance(MPI_File fh, const struct iez_cio_call *c)
{
    MPI_Offset p;
    if (!c->etypes)
        return MPI_SUCCESS;
    if (iez_pmpi.PMPI_File_get_position(fh, &p) != MPI_SUCCESS || iez_cio_fn.seek(fh, p + c->etypes, MPI_SEEK_SET) != MPI_SUCCESS)
        return MPI_ERR_OTHER;
    return MPI_SUCCESS;
}

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
#include "collio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "iolog.h"
#include "pmpi.h"
#include "sysio.h"

/* pread all of [off, off + len) that is below eof into buf, zeros beyond: 0 or -1. */
static int read_range(const struct iez_cio_file *f, char *buf, int64_t off, int64_t len, int64_t eof)
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

/* The aggregator's part: read every item into its place, in runs of sorted, touching or
 * same-stripe items. 0 or -1; *eof: the file's size. */
static int serve(struct iez_cio_file *f, struct iez_cio_item *it, size_t n, int64_t *eof)
{
    struct stat st;
    if (f->fd < 0)
        f->fd = iez_cio_open(f, O_RDONLY);
    if (f->fd < 0 || iez_sys_fstat(f->fd, &st))
        return -1;
    *eof = st.st_size;
    qsort(it, n, sizeof *it, iez_cio_by_off);
    char *run = NULL;
    int rc = 0;
    for (size_t i = 0; i < n && !rc;) {
        int64_t a = it[i].off, b = a + it[i].len;
        uint64_t stripe_end = 0;
        iez_cio_map_owner(&f->map, (uint64_t)a, &stripe_end);
        size_t j = i + 1;
        /* the next piece touches the run, or lies further in the same stripe (of this OST) */
        while (j < n && (it[j].off <= b || it[j].off < (int64_t)stripe_end) && it[j].off + it[j].len - a <= IEZ_CIO_MAX_RUN) {
            if (it[j].off + it[j].len > b)
                b = it[j].off + it[j].len;
            if (b > (int64_t)stripe_end)
                iez_cio_map_owner(&f->map, (uint64_t)b - 1, &stripe_end);
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

/* The exchange and the reads; 0: served (bytes read in *got), -1: every rank goes to MPI. */
static int exchange(struct iez_cio_file *f, struct iez_cio_call *c, char *stream, int64_t *got)
{
    int P = f->size, rc = -1;
    int *mc = f->cnt + 4 * P, *md = f->cnt + 5 * P, *tc = f->cnt + 6 * P, *td = f->cnt + 7 * P;
    int64_t *in = NULL, mine, bytes, eof = -1;
    char *recv = NULL, *send = NULL;
    struct iez_cio_item *it = NULL;
    size_t self, n = 0;
    if (iez_cio_requests(f, c, &in, &self))
        return -1;
    /* mine: what comes back to this rank; bytes: what it sends back to the others */
    int ok = iez_cio_items(f, c, in, self, stream, &it, &n, &mine, &bytes) == 0;
    recv = ok ? malloc((size_t)mine + 1) : NULL;
    ok = ok && recv; /* agreement 3 below carries a failure here */
    send = ok ? malloc((size_t)bytes + 1) : NULL;
    for (size_t k = 0; send && k < n; k++)
        if (!it[k].dst)
            it[k].dst = send + it[k].at;
    int64_t verdict[2] = {!(ok && send && (n == 0 || serve(f, it, n, &eof) == 0)), n ? eof : -1};
    /* agreement 3: every aggregator has read its pieces; the largest size any of them saw */
    if (iez_pmpi.PMPI_Allreduce(MPI_IN_PLACE, verdict, 2, MPI_LONG_LONG, MPI_MAX, f->comm) != MPI_SUCCESS ||
        verdict[0])
        goto out;
    if (iez_cio_fn.alltoallv(send, tc, td, MPI_BYTE, recv, mc, md, MPI_BYTE, f->comm) != MPI_SUCCESS)
        goto out;
    /* the pieces came back aggregator by aggregator, each in the order they were asked for */
    int64_t at = 0, valid = 0;
    for (size_t i = 0; i < c->n; i++) {
        const struct iez_cio_piece *p = &c->p[i];
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
    free(in);
    free(recv);
    free(send);
    free(it);
    return rc;
}

int iez_collread_call(struct iez_cio_file *f, MPI_File fh, int at, MPI_Offset off, void *buf, MPI_Count count,
                      MPI_Datatype type, MPI_Status *st)
{
    struct iez_cio_call c = {0};
    int ok = iez_cio_prepare(f, fh, 0, at, off, count, type, &c) == 0;
    /* where the data go: straight into buf when type is contiguous, else unpacked from a copy */
    const char *base = NULL;
    int contiguous = ok && iez_cio_contiguous(buf, type, &base);
    char *copy = ok && !contiguous ? malloc((size_t)c.bytes + 1) : NULL;
    if (!ok || (!contiguous && !copy))
        c.n = 0, c.bytes = -1; /* still in the agreements, so that the others learn it */
    int64_t got = 0;
    int rc = exchange(f, &c, copy ? copy : (char *)base, &got);
    int pos = 0;
    /* past the agreements no rank can go back to MPI alone: a failure is the call's error */
    if (!rc && copy && c.bytes > 0 && iez_cio_fn.unpack(copy, (int)c.bytes, &pos, buf, (int)count, type, f->comm) != MPI_SUCCESS)
        rc = MPI_ERR_TYPE;
    free(copy);
    if (!rc && !at)
        rc = iez_cio_advance(fh, &c);
    if (!rc && st != MPI_STATUS_IGNORE)
        iez_cio_fn.set_elements(st, MPI_BYTE, got);
    free(c.p);
    return rc;
}

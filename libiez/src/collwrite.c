/* Split writing's own aggregation (references: s001-hierarchical). Seed 001 gave each group of
 * writers its own subfile; the plan gives it its own PFL component, and here each component
 * gets its own aggregator, which writes inside that component only, on its OSTs, where ROMIO's
 * hints cannot say so (ROMIO's Lustre driver hands stripes to its aggregators in turn,
 * references: romio-lustre-aggregators). For a collective write of a file split writing
 * qualified at its creating open (split.c, IEZ_SPLIT=aggregate):
 *
 *   1. every rank flattens its request and cuts it at component ends (collio.c); each piece's
 *      (offset, length), then its bytes, go to the aggregator of its component (MPI_Alltoallv);
 *   2. each aggregator sorts the pieces it holds, merges those that touch into runs (never
 *      across a gap: a byte no rank wrote is never written) and writes each run with one pwrite
 *      on its own write-only descriptor (O_NOFOLLOW, never O_CREAT or O_TRUNC, checked by device
 *      and inode to be the file rank 0 read the layout of).
 *
 * Component c is written by aggregator c mod A, A = min(components, ranks), the ranks taken one
 * per node in turn. Any failure before the last agreement sends every rank to the MPI library's
 * own write, which then writes all the data again: whatever some aggregators had written is
 * overwritten with the same bytes. */
#include "collio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "iolog.h"
#include "pmpi.h"
#include "sysio.h"

/* pwrite all of buf at off (a raw system call, as sysio.h's: libiez's own I/O is not traced
 * again): 0 or -1. */
static int write_range(const struct iez_cio_file *f, const char *buf, int64_t off, int64_t len)
{
    uint64_t t0 = iez_io_t0();
    for (int64_t done = 0; done < len;) {
        ssize_t r = syscall(SYS_pwrite64, f->wfd, buf + done, (size_t)(len - done), (off_t)(off + done));
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        done += r;
    }
    if (f->iolog && len > 0)
        iez_iolog_event(1, t0, (uint64_t)off, (uint64_t)len, f->path, f->path_len);
    return 0;
}

/* The aggregator's part: every item written, in runs of sorted, touching items. 0 or -1. */
static int serve(struct iez_cio_file *f, struct iez_cio_item *it, size_t n)
{
    if (f->wfd < 0)
        f->wfd = iez_cio_open(f, O_WRONLY);
    if (f->wfd < 0)
        return -1;
    qsort(it, n, sizeof *it, iez_cio_by_off);
    char *run = NULL;
    int rc = 0;
    for (size_t i = 0; i < n && !rc;) {
        int64_t a = it[i].off, b = a + it[i].len;
        size_t j = i + 1;
        while (j < n && it[j].off <= b && (it[j].off + it[j].len > b ? it[j].off + it[j].len : b) - a <= IEZ_CIO_MAX_RUN) {
            if (it[j].off + it[j].len > b)
                b = it[j].off + it[j].len;
            j++;
        }
        if (j == i + 1) { /* one piece: straight from where it is */
            rc = write_range(f, it[i].dst, a, b - a);
        } else {
            char *r = realloc(run, (size_t)(b - a));
            if (!r) {
                rc = -1;
                break;
            }
            run = r;
            for (size_t k = i; k < j; k++)
                memcpy(run + (it[k].off - a), it[k].dst, (size_t)it[k].len);
            rc = write_range(f, run, a, b - a);
        }
        i = j;
    }
    free(run);
    return rc;
}

/* The exchange and the writes; 0: written, -1: every rank goes to MPI. */
static int exchange(struct iez_cio_file *f, struct iez_cio_call *c, const char *stream)
{
    int P = f->size, rc = -1;
    int *mc = f->cnt + 4 * P, *md = f->cnt + 5 * P, *tc = f->cnt + 6 * P, *td = f->cnt + 7 * P;
    int64_t *in = NULL, out, bytes;
    char *recv = NULL, *send = NULL;
    struct iez_cio_item *it = NULL;
    size_t self, n = 0;
    if (iez_cio_requests(f, c, &in, &self))
        return -1;
    /* out: this rank's bytes for other aggregators; bytes: theirs for this one */
    int ok = iez_cio_items(f, c, in, self, (char *)stream, &it, &n, &out, &bytes) == 0;
    send = ok ? malloc((size_t)out + 1) : NULL;
    recv = ok ? malloc((size_t)bytes + 1) : NULL;
    ok = send && recv;
    for (size_t i = 0, at = 0; ok && i < c->n; i++)
        if (c->p[i].aggr != f->rank) {
            memcpy(send + at, stream + c->p[i].pos, (size_t)c->p[i].len);
            at += (size_t)c->p[i].len;
        }
    /* agreement 3: every rank can send and receive its part */
    if (iez_pmpi.PMPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, f->comm) != MPI_SUCCESS || !ok ||
        iez_cio_fn.alltoallv(send, mc, md, MPI_BYTE, recv, tc, td, MPI_BYTE, f->comm) != MPI_SUCCESS)
        goto out;
    for (size_t k = 0; k < n; k++)
        if (!it[k].dst)
            it[k].dst = recv + it[k].at;
    int failed = n && serve(f, it, n) != 0;
    /* agreement 4: every aggregator has written its pieces, else MPI writes them all again */
    if (iez_pmpi.PMPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, f->comm) != MPI_SUCCESS || failed)
        goto out;
    rc = 0;
out:
    free(in);
    free(recv);
    free(send);
    free(it);
    return rc;
}

int iez_collwrite_call(struct iez_cio_file *f, MPI_File fh, int at, MPI_Offset off, const void *buf, MPI_Count count,
                       MPI_Datatype type, MPI_Status *st)
{
    struct iez_cio_call c = {0};
    int ok = iez_cio_prepare(f, fh, 1, at, off, count, type, &c) == 0;
    /* where the data are: buf itself when type is contiguous, else packed into a copy */
    const char *base = NULL;
    int contiguous = ok && iez_cio_contiguous(buf, type, &base), pos = 0;
    char *copy = ok && !contiguous ? malloc((size_t)c.bytes + 1) : NULL;
    if (copy && c.bytes > 0 &&
        iez_cio_fn.pack(buf, (int)count, type, copy, (int)c.bytes, &pos, f->comm) != MPI_SUCCESS) {
        free(copy);
        copy = NULL;
    }
    if (!ok || (!contiguous && !copy))
        c.n = 0, c.bytes = -1; /* still in the agreements, so that the others learn it */
    int rc = exchange(f, &c, copy ? copy : base);
    free(copy);
    /* past the agreements no rank can go back to MPI alone: a failure is the call's error */
    if (!rc && !at)
        rc = iez_cio_advance(fh, &c);
    if (!rc && st != MPI_STATUS_IGNORE)
        iez_cio_fn.set_elements(st, MPI_BYTE, c.bytes);
    free(c.p);
    return rc;
}

/* iez-test-collread: a seeded fuzzer of collective reads, run under mpiexec with libiez-mpi
 * preloaded and IEZ_COLLREAD=lustre (tests/test_collread.py).
 *
 *   iez-test-collread SEED ITERATIONS FILE...
 *
 * Each FILE is created (MPI_MODE_CREATE: libiez lays it out from the plan) and rank 0 fills a
 * random size of it with byte(o) = PATTERN(o). Then, per iteration, every rank sets a random view
 * (contiguous, an IOR-like strided vector, a 2-D C-order or 3-D Fortran-order subarray of ints or
 * doubles, a random hindexed list) and reads a random amount (zero too, past EOF too) with a
 * random collective read (read_all, read_at_all, their split begin/end and large-count forms) into
 * a contiguous or strided memory type, twice: through MPI_File_* (libiez's path) and through
 * PMPI_File_* (MPICH's own). It checks, for each rank: the bytes libiez's path delivered equal the
 * file's at the offsets MPI_File_get_byte_offset gives, up to EOF; its MPI_Get_elements count is
 * what lies before EOF; and, for reads that end before EOF, MPICH's read gave the same bytes,
 * count and file pointer. Prints "collread fuzz: N reads, B bytes checked" on rank 0; exit 1 with
 * the failing case on stderr. */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <fcntl.h>

static int rank, nprocs;
static uint64_t shared_rng, own_rng;

static uint64_t next(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static long pick(uint64_t *s, long lo, long hi) { return lo + (long)(next(s) % (uint64_t)(hi - lo + 1)); }

static unsigned char pattern(uint64_t o) { return (unsigned char)((o * 131u) ^ (o >> 8) ^ ((o >> 16) * 7u)); }

static void fail(const char *what, const char *file, int iter, const char *detail)
{
    fprintf(stderr, "collread fuzz: rank %d, %s, iteration %d: %s (%s)\n", rank, file, iter, what, detail);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

enum { K_ALL, K_AT_ALL, K_ALL_SPLIT, K_AT_ALL_SPLIT, K_AT_ALL_C, NKINDS };
static const char *const kinds[] = {"read_all", "read_at_all", "read_all_begin", "read_at_all_begin", "read_at_all_c"};

/* One collective read of kind k at etype offset pos, through libiez (pmpi = 0) or MPICH. */
static int do_read(int pmpi, int k, MPI_File fh, MPI_Offset pos, void *buf, int count, MPI_Datatype t, MPI_Status *st)
{
    if (k == K_ALL || k == K_ALL_SPLIT)
        (pmpi ? PMPI_File_seek : MPI_File_seek)(fh, pos, MPI_SEEK_SET);
    switch (k) {
    case K_ALL:
        return (pmpi ? PMPI_File_read_all : MPI_File_read_all)(fh, buf, count, t, st);
    case K_AT_ALL:
        return (pmpi ? PMPI_File_read_at_all : MPI_File_read_at_all)(fh, pos, buf, count, t, st);
    case K_ALL_SPLIT: {
        int rc = (pmpi ? PMPI_File_read_all_begin : MPI_File_read_all_begin)(fh, buf, count, t);
        return rc ? rc : (pmpi ? PMPI_File_read_all_end : MPI_File_read_all_end)(fh, buf, st);
    }
    case K_AT_ALL_SPLIT: {
        int rc = (pmpi ? PMPI_File_read_at_all_begin : MPI_File_read_at_all_begin)(fh, pos, buf, count, t);
        return rc ? rc : (pmpi ? PMPI_File_read_at_all_end : MPI_File_read_at_all_end)(fh, buf, st);
    }
    default:
#if MPI_VERSION >= 4
        return (pmpi ? PMPI_File_read_at_all_c : MPI_File_read_at_all_c)(fh, pos, buf, (MPI_Count)count, t, st);
#else
        return (pmpi ? PMPI_File_read_at_all : MPI_File_read_at_all)(fh, pos, buf, count, t, st);
#endif
    }
}

struct view {
    MPI_Offset disp;
    MPI_Datatype etype, ftype;       /* ftype freed after the iteration unless named */
    int esize;
    const char *name;
};

/* A random view for this rank (the shape is the same on every rank, its numbers per rank). */
static struct view make_view(int shape, int64_t fsize)
{
    struct view v = {0, MPI_BYTE, MPI_BYTE, 1, "contiguous"};
    switch (shape) {
    case 1: { /* IOR segments: block b of every rank in turn */
        int b = (int)pick(&shared_rng, 1, 3) * (int)pick(&shared_rng, 1, 70000);
        MPI_Datatype vec;
        MPI_Type_vector(1, b, b * nprocs, MPI_BYTE, &vec);
        MPI_Type_create_resized(vec, 0, (MPI_Aint)b * nprocs, &v.ftype);
        MPI_Type_free(&vec);
        v.disp = pick(&shared_rng, 0, 3) * 4096 + (MPI_Offset)rank * b;
        v.name = "ior-strided";
        break;
    }
    case 2:
    case 3: { /* a global array in blocks per rank: 2-D C order of ints, 3-D Fortran order of doubles */
        int nd = shape == 2 ? 2 : 3, sizes[3], sub[3], start[3], grid[3] = {1, 1, 1}, left = nprocs, me = rank;
        for (int d = 0; left > 1; d = (d + 1) % nd) /* factor the ranks over the dimensions */
            for (int f = 2; f <= left; f++)
                if (left % f == 0) {
                    grid[d] *= f;
                    left /= f;
                    break;
                }
        for (int d = 0; d < nd; d++) {
            sub[d] = (int)pick(&shared_rng, 1, shape == 2 ? 90 : 20);
            sizes[d] = sub[d] * grid[d];
            start[d] = (me % grid[d]) * sub[d];
            me /= grid[d];
        }
        v.etype = shape == 2 ? MPI_INT : MPI_DOUBLE;
        v.esize = shape == 2 ? 4 : 8;
        MPI_Type_create_subarray(nd, sizes, sub, start, shape == 2 ? MPI_ORDER_C : MPI_ORDER_FORTRAN, v.etype, &v.ftype);
        v.disp = pick(&shared_rng, 0, 8) * v.esize * 1000;
        v.name = shape == 2 ? "subarray-2d-c" : "subarray-3d-fortran";
        break;
    }
    case 4: { /* random increasing blocks */
        int n = (int)pick(&own_rng, 1, 40), len[40];
        MPI_Aint at[40], o = pick(&own_rng, 0, 5000);
        for (int i = 0; i < n; i++) {
            at[i] = o;
            len[i] = (int)pick(&own_rng, 1, 30000);
            o += len[i] + pick(&own_rng, 0, 20000);
        }
        MPI_Type_create_hindexed(n, len, at, MPI_BYTE, &v.ftype);
        v.disp = pick(&own_rng, 0, fsize / 2);
        v.name = "hindexed";
        break;
    }
    default:
        break;
    }
    if (v.ftype != MPI_BYTE)
        MPI_Type_commit(&v.ftype);
    return v;
}

static void run(const char *file, int iters, int64_t *reads, int64_t *checked)
{
    MPI_File fh;
    if (MPI_File_open(MPI_COMM_WORLD, file, MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh) != MPI_SUCCESS)
        fail("MPI_File_open", file, -1, "failed");
    int64_t fsize = pick(&shared_rng, 0, 4) ? pick(&shared_rng, 1, 3 << 20) : 0;
    if (rank == 0) { /* the file's bytes, written as a plain POSIX program would */
        int fd = open(file, O_WRONLY);
        unsigned char *b = malloc((size_t)fsize + 1);
        for (int64_t o = 0; o < fsize; o++)
            b[o] = pattern((uint64_t)o);
        if (fd < 0 || pwrite(fd, b, (size_t)fsize, 0) != fsize || ftruncate(fd, fsize) || close(fd))
            fail("writing the file", file, -1, "pwrite");
        free(b);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    for (int it = 0; it < iters; it++) {
        int shape = (int)pick(&shared_rng, 0, 4), k = (int)pick(&shared_rng, 0, NKINDS - 1);
        struct view v = make_view(shape, fsize);
        MPI_File_set_view(fh, v.disp, v.etype, v.ftype, "native", MPI_INFO_NULL);
        MPI_Count tsize;
        MPI_Type_size_x(v.ftype, &tsize);
        /* how many etypes, from where: zero for some ranks, past EOF for some */
        int n = pick(&own_rng, 0, 5) ? (int)pick(&own_rng, 1, (int)(tsize / v.esize) * (int)pick(&own_rng, 1, 3)) : 0;
        MPI_Offset pos = shape == 0 ? pick(&own_rng, 0, fsize + 10000) : pick(&own_rng, 0, 2) * (tsize / v.esize);
        int strided = (int)pick(&shared_rng, 0, 1);
        MPI_Datatype mem = v.etype;
        int count = n;
        if (strided && n) { /* every other element of the buffer */
            MPI_Type_vector(n, 1, 2, v.etype, &mem);
            MPI_Type_commit(&mem);
            count = 1;
        }
        size_t bytes = (size_t)n * v.esize, room = 2 * bytes + 16;
        unsigned char *buf[2], *stream[2];
        MPI_Count got[2];
        MPI_Offset after[2] = {0, 0};
        for (int m = 0; m < 2; m++) {
            buf[m] = malloc(room);
            stream[m] = malloc(bytes + 1);
            memset(buf[m], 0xEE, room);
            MPI_Status st;
            if (do_read(m, k, fh, pos, buf[m], count, mem, &st) != MPI_SUCCESS)
                fail(m ? "MPICH's read failed" : "libiez's read failed", file, it, kinds[k]);
            MPI_Get_elements_x(&st, MPI_BYTE, &got[m]);
            MPI_File_get_position(fh, &after[m]);
            int p = 0;
            if (n)
                MPI_Pack(buf[m], count, mem, stream[m], (int)bytes, &p, MPI_COMM_SELF);
        }
        /* the oracle: each etype's byte offset in the file, through MPI's view */
        int64_t expect = 0;
        char detail[256];
        for (int e = 0; e < n; e++) {
            MPI_Offset off;
            MPI_File_get_byte_offset(fh, pos + e, &off);
            if (off + v.esize > fsize)
                break;
            for (int i = 0; i < v.esize; i++)
                if (stream[0][(size_t)e * v.esize + i] != pattern((uint64_t)off + i)) {
                    snprintf(detail, sizeof detail, "%s %s, etype %d of %d at file offset %lld", v.name, kinds[k], e, n,
                             (long long)off + i);
                    fail("libiez's read gave a wrong byte", file, it, detail);
                }
            expect += v.esize;
        }
        snprintf(detail, sizeof detail, "%s %s: %lld bytes asked from etype %lld, libiez %lld, MPICH %lld, expected %lld",
                 v.name, kinds[k], (long long)bytes, (long long)pos, (long long)got[0], (long long)got[1],
                 (long long)expect);
        if (got[0] != expect)
            fail("libiez's count is not what lies before EOF", file, it, detail);
        if (expect == (int64_t)bytes &&
            (got[1] != expect || memcmp(stream[0], stream[1], bytes) || after[0] != after[1]))
            fail("libiez's and MPICH's reads differ", file, it, detail);
        *checked += expect;
        (*reads)++;
        for (int m = 0; m < 2; m++)
            free(buf[m]), free(stream[m]);
        if (mem != v.etype)
            MPI_Type_free(&mem);
        if (v.ftype != MPI_BYTE)
            MPI_Type_free(&v.ftype);
    }
    MPI_File_close(&fh);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    if (argc < 4) {
        if (!rank)
            fprintf(stderr, "usage: %s SEED ITERATIONS FILE...\n", argv[0]);
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    uint64_t seed = strtoull(argv[1], NULL, 10);
    shared_rng = seed;
    own_rng = seed * 1000003u + (uint64_t)rank + 1;
    int64_t reads = 0, checked = 0;
    for (int i = 3; i < argc; i++)
        run(argv[i], atoi(argv[2]), &reads, &checked);
    int64_t total[2] = {reads, checked};
    MPI_Reduce(rank ? total : MPI_IN_PLACE, total, 2, MPI_INT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
    if (!rank)
        printf("collread fuzz: %lld reads, %lld bytes checked\n", (long long)total[0], (long long)total[1]);
    MPI_Finalize();
    return 0;
}

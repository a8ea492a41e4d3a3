/* iez-test-collwrite: a seeded fuzzer of collective writes, run under mpiexec with libiez-mpi
 * preloaded and IEZ_SPLIT=aggregate on files the plan lays out hierarchically
 * (tests/test_split_writing.py).
 *
 *   iez-test-collwrite [--zero-holes] [--darray] SEED ITERATIONS REFDIR FILE...
 *
 * Each FILE is created through MPI_File_open (libiez lays it out from the plan and aggregates its
 * collective writes), and beside it REFDIR/<n> through PMPI_File_open (MPICH alone). Per
 * iteration, every rank sets the same random view on both (contiguous at its own offset, IOR
 * segments, a 2-D C-order or 3-D Fortran-order subarray of ints or doubles, random blocks
 * interleaved between the ranks: no two ranks write the same byte) and writes the same random
 * data (zero bytes too) with the same random collective write (write_all, write_at_all, their
 * split begin/end and large-count forms) from a contiguous or strided memory type: through
 * MPI_File_* to FILE, through PMPI_File_* to the reference. It checks each call's count and file
 * pointer against MPICH's, and, after the files are closed, that rank 0 reads the same size and
 * the same bytes wherever some rank wrote (offsets from MPI_File_get_byte_offset), and with
 * --zero-holes (libiez aggregated every write) zeros elsewhere in FILE. With --darray, rank 0's
 * contiguous views are a darray of one process (the same bytes), a filetype libiez leaves to
 * MPI: every rank must then take MPI's write together. Prints "collwrite fuzz: N writes, B bytes" on rank 0; exit 1 with the failing case on
 * stderr. */
#include <fcntl.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int rank, nprocs, zero_holes, darray;
static uint64_t shared_rng, own_rng;

static uint64_t next(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}
static long pick(uint64_t *s, long lo, long hi) { return lo + (long)(next(s) % (uint64_t)(hi - lo + 1)); }

static void fail(const char *what, const char *file, int iter, const char *detail)
{
    fprintf(stderr, "collwrite fuzz: rank %d, %s, iteration %d: %s (%s)\n", rank, file, iter, what, detail);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

enum { K_ALL, K_AT_ALL, K_ALL_SPLIT, K_AT_ALL_SPLIT, K_AT_ALL_C, NKINDS };
static const char *const kinds[] = {"write_all", "write_at_all", "write_all_begin", "write_at_all_begin",
                                    "write_at_all_c"};

/* One collective write of kind k at etype offset pos, through libiez (pmpi = 0) or MPICH. */
static int do_write(int pmpi, int k, MPI_File fh, MPI_Offset pos, const void *buf, int count, MPI_Datatype t,
                    MPI_Status *st)
{
    if (k == K_ALL || k == K_ALL_SPLIT)
        (pmpi ? PMPI_File_seek : MPI_File_seek)(fh, pos, MPI_SEEK_SET);
    switch (k) {
    case K_ALL:
        return (pmpi ? PMPI_File_write_all : MPI_File_write_all)(fh, buf, count, t, st);
    case K_AT_ALL:
        return (pmpi ? PMPI_File_write_at_all : MPI_File_write_at_all)(fh, pos, buf, count, t, st);
    case K_ALL_SPLIT: {
        int rc = (pmpi ? PMPI_File_write_all_begin : MPI_File_write_all_begin)(fh, buf, count, t);
        return rc ? rc : (pmpi ? PMPI_File_write_all_end : MPI_File_write_all_end)(fh, buf, st);
    }
    case K_AT_ALL_SPLIT: {
        int rc = (pmpi ? PMPI_File_write_at_all_begin : MPI_File_write_at_all_begin)(fh, pos, buf, count, t);
        return rc ? rc : (pmpi ? PMPI_File_write_at_all_end : MPI_File_write_at_all_end)(fh, buf, st);
    }
    default:
#if MPI_VERSION >= 4
        return (pmpi ? PMPI_File_write_at_all_c : MPI_File_write_at_all_c)(fh, pos, buf, (MPI_Count)count, t, st);
#else
        return (pmpi ? PMPI_File_write_at_all : MPI_File_write_at_all)(fh, pos, buf, count, t, st);
#endif
    }
}

struct view {
    MPI_Offset disp;
    MPI_Datatype etype, ftype;       /* ftype freed after the iteration unless named */
    int esize;
    long most;                       /* the etypes this rank may write from pos without meeting another rank's */
    MPI_Offset pos;
    const char *name;
};

/* A random view for this rank (the shape is the same on every rank, its numbers per rank), its
 * bytes disjoint from every other rank's. */
static struct view make_view(int shape)
{
    struct view v = {0, MPI_BYTE, MPI_BYTE, 1, 0, 0, "contiguous"};
    switch (shape) {
    case 0: { /* each rank its own chunk of one byte stream */
        long chunk = pick(&shared_rng, 1, 200000);
        v.disp = pick(&shared_rng, 0, 3) * 4096;
        v.pos = (MPI_Offset)rank * chunk;
        v.most = chunk;
        if (darray && rank == 0) {
            int gsize = (int)chunk, distrib = MPI_DISTRIBUTE_BLOCK, darg = MPI_DISTRIBUTE_DFLT_DARG, psize = 1;
            MPI_Type_create_darray(1, 0, 1, &gsize, &distrib, &darg, &psize, MPI_ORDER_C, MPI_BYTE, &v.ftype);
            v.name = "darray";
        }
        break;
    }
    case 1: { /* IOR segments: block b of every rank in turn */
        int b = (int)pick(&shared_rng, 1, 70000);
        MPI_Datatype vec;
        MPI_Type_vector(1, b, b * nprocs, MPI_BYTE, &vec);
        MPI_Type_create_resized(vec, 0, (MPI_Aint)b * nprocs, &v.ftype);
        MPI_Type_free(&vec);
        v.disp = pick(&shared_rng, 0, 3) * 4096 + (MPI_Offset)rank * b;
        v.pos = pick(&shared_rng, 0, 2) * b;
        v.most = (long)b * pick(&shared_rng, 1, 4);
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
        long elems = 1;
        for (int d = 0; d < nd; d++) {
            sub[d] = (int)pick(&shared_rng, 1, shape == 2 ? 90 : 20);
            sizes[d] = sub[d] * grid[d];
            start[d] = (me % grid[d]) * sub[d];
            me /= grid[d];
            elems *= sub[d];
        }
        v.etype = shape == 2 ? MPI_INT : MPI_DOUBLE;
        v.esize = shape == 2 ? 4 : 8;
        MPI_Type_create_subarray(nd, sizes, sub, start, shape == 2 ? MPI_ORDER_C : MPI_ORDER_FORTRAN, v.etype, &v.ftype);
        v.disp = pick(&shared_rng, 0, 8) * v.esize * 1000;
        v.pos = pick(&shared_rng, 0, 1) * elems;
        v.most = elems * pick(&shared_rng, 1, 2);
        v.name = shape == 2 ? "subarray-2d-c" : "subarray-3d-fortran";
        break;
    }
    default: { /* random blocks, each inside this rank's slot of every round of the ranks */
        int n = (int)pick(&shared_rng, 1, 20), len[20]; /* the same slots on every rank */
        long unit = pick(&shared_rng, 1, 10000);
        MPI_Aint at[20];
        long total = 0;
        for (int i = 0; i < n; i++) {
            long from = pick(&own_rng, 0, unit - 1);
            at[i] = ((MPI_Aint)i * nprocs + rank) * unit + from;
            len[i] = (int)pick(&own_rng, 1, unit - from);
            total += len[i];
        }
        MPI_Datatype t;
        MPI_Type_create_hindexed(n, len, at, MPI_BYTE, &t);
        MPI_Type_create_resized(t, 0, (MPI_Aint)n * nprocs * unit, &v.ftype);
        MPI_Type_free(&t);
        v.disp = pick(&shared_rng, 0, 5000);
        v.most = total * pick(&shared_rng, 1, 2);
        v.name = "hindexed";
        break;
    }
    }
    if (v.ftype != MPI_BYTE)
        MPI_Type_commit(&v.ftype);
    return v;
}

/* The bytes some rank wrote, one bit each: MPICH's two-phase write fills a hole below its
 * aggregator's domain end with whatever its buffer held when the hole lies past EOF (it reads
 * the hole first, and the read is short), so only written bytes are compared with its file;
 * elsewhere libiez's file must hold zeros (it never writes a byte no rank wrote). */
#define MASK_BYTES (16l << 20)
static unsigned char mask[MASK_BYTES / 8];

static void mark(MPI_File ref, MPI_Offset pos, int n, int esize, const char *file, int it)
{
    for (int e = 0; e < n; e++) {
        MPI_Offset off;
        PMPI_File_get_byte_offset(ref, pos + e, &off);
        if (off < 0 || off + esize > MASK_BYTES)
            fail("a write beyond the fuzzer's mask", file, it, "fewer bytes");
        for (int i = 0; i < esize; i++)
            mask[(off + i) / 8] |= (unsigned char)(1u << ((off + i) % 8));
    }
}

static void run(const char *file, const char *ref, int iters, int64_t *writes, int64_t *bytes_out)
{
    memset(mask, 0, sizeof mask);
    MPI_File fh[2];
    int amode = MPI_MODE_CREATE | MPI_MODE_RDWR;
    if (MPI_File_open(MPI_COMM_WORLD, file, amode, MPI_INFO_NULL, &fh[0]) != MPI_SUCCESS ||
        PMPI_File_open(MPI_COMM_WORLD, ref, amode, MPI_INFO_NULL, &fh[1]) != MPI_SUCCESS)
        fail("MPI_File_open", file, -1, "failed");
    for (int it = 0; it < iters; it++) {
        int shape = (int)pick(&shared_rng, 0, 4), k = (int)pick(&shared_rng, 0, NKINDS - 1);
        struct view v = make_view(shape);
        /* how many etypes: zero for some ranks */
        int n = pick(&own_rng, 0, 5) ? (int)pick(&own_rng, 1, v.most) : 0;
        int strided = (int)pick(&shared_rng, 0, 1);
        MPI_Datatype mem = v.etype;
        int count = n;
        if (strided && n) { /* every other element of the buffer */
            MPI_Type_vector(n, 1, 2, v.etype, &mem);
            MPI_Type_commit(&mem);
            count = 1;
        }
        size_t bytes = (size_t)n * v.esize, room = 2 * bytes + 16;
        unsigned char *buf = malloc(room);
        for (size_t i = 0; i < room; i++)
            buf[i] = (unsigned char)next(&own_rng);
        MPI_Count got[2];
        MPI_Offset after[2] = {0, 0};
        char detail[256];
        snprintf(detail, sizeof detail, "%s %s, %zu bytes from etype %lld", v.name, kinds[k], bytes, (long long)v.pos);
        for (int m = 0; m < 2; m++) {
            MPI_Status st;
            (m ? PMPI_File_set_view : MPI_File_set_view)(fh[m], v.disp, v.etype, v.ftype, "native", MPI_INFO_NULL);
            if (do_write(m, k, fh[m], v.pos, buf, count, mem, &st) != MPI_SUCCESS)
                fail(m ? "MPICH's write failed" : "libiez's write failed", file, it, detail);
            MPI_Get_elements_x(&st, MPI_BYTE, &got[m]);
            (m ? PMPI_File_get_position : MPI_File_get_position)(fh[m], &after[m]);
        }
        mark(fh[1], v.pos, n, v.esize, file, it);
        if (got[0] != got[1] || got[0] != (MPI_Count)bytes || after[0] != after[1])
            fail("libiez's and MPICH's counts or file pointers differ", file, it, detail);
        *bytes_out += (int64_t)bytes;
        (*writes)++;
        free(buf);
        if (mem != v.etype)
            MPI_Type_free(&mem);
        if (v.ftype != MPI_BYTE)
            MPI_Type_free(&v.ftype);
    }
    MPI_File_close(&fh[0]);
    PMPI_File_close(&fh[1]);
    MPI_Reduce(rank ? mask : MPI_IN_PLACE, mask, (int)sizeof mask, MPI_UNSIGNED_CHAR, MPI_BOR, 0, MPI_COMM_WORLD);
    if (rank == 0) { /* the files' bytes, read back as a plain POSIX program would */
        struct stat a, b;
        int fa = open(file, O_RDONLY), fb = open(ref, O_RDONLY);
        if (fa < 0 || fb < 0 || fstat(fa, &a) || fstat(fb, &b))
            fail("reading the files back", file, iters, "open");
        if (a.st_size != b.st_size) {
            char d[128];
            snprintf(d, sizeof d, "%lld bytes, MPICH's %lld", (long long)a.st_size, (long long)b.st_size);
            fail("the file's size differs from MPICH's", file, iters, d);
        }
        unsigned char *x = malloc((size_t)a.st_size + 1), *y = malloc((size_t)a.st_size + 1);
        if (pread(fa, x, (size_t)a.st_size, 0) != a.st_size || pread(fb, y, (size_t)a.st_size, 0) != a.st_size)
            fail("reading the files back", file, iters, "pread");
        for (off_t o = 0; o < a.st_size; o++)
            if (mask[o / 8] & (1u << (o % 8)) ? x[o] != y[o] : zero_holes && x[o] != 0) {
                char d[128];
                snprintf(d, sizeof d, "first at byte %lld of %lld (%s)", (long long)o, (long long)a.st_size,
                         mask[o / 8] & (1u << (o % 8)) ? "written" : "a hole");
                fail("the file's bytes differ from MPICH's", file, iters, d);
            }
        free(x);
        free(y);
        close(fa);
        close(fb);
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nprocs);
    for (; argc > 1 && !strncmp(argv[1], "--", 2); argc--, argv++) {
        zero_holes |= !strcmp(argv[1], "--zero-holes");
        darray |= !strcmp(argv[1], "--darray");
    }
    if (argc < 5) {
        if (!rank)
            fprintf(stderr, "usage: iez-test-collwrite [--zero-holes] [--darray] SEED ITERATIONS REFDIR FILE...\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
    }
    uint64_t seed = strtoull(argv[1], NULL, 10);
    shared_rng = seed;
    own_rng = seed * 1000003u + (uint64_t)rank + 1;
    int64_t total[2] = {0, 0};
    for (int i = 4; i < argc; i++) {
        char ref[4096];
        snprintf(ref, sizeof ref, "%s/%d", argv[3], i - 4);
        run(argv[i], ref, atoi(argv[2]), &total[0], &total[1]);
    }
    MPI_Reduce(rank ? total : MPI_IN_PLACE, total, 2, MPI_INT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
    if (!rank)
        printf("collwrite fuzz: %lld writes, %lld bytes\n", (long long)total[0], (long long)total[1]);
    MPI_Finalize();
    return 0;
}

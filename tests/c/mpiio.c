/* iez-test-mpiio: an MPI-IO program the libiez-mpi tests run under mpiexec.
 *
 *   iez-test-mpiio [--thread] [--fpp] [--excl] [--read] [--calls KIND] [--bytes N] [--xfer N] PREFIX
 *
 * Every rank writes --bytes bytes in --xfer calls of the kind asked for: to PREFIX (one shared
 * file on MPI_COMM_WORLD, rank r's bytes at r * bytes) or, with --fpp, to PREFIX.%08d (its own
 * file on MPI_COMM_SELF, at 0). Byte i of rank r's part is (r * 7 + i) % 251, so --read checks
 * every byte read back. KIND: at, at_all, ind (seek + write), ind_all (seek + write_all), iat
 * (iwrite_at + wait), split (write_at_all_begin/end), shared (write_shared), ordered
 * (write_ordered), view (a view of MPI_INT at the rank's part, then write_all), large
 * (write_at_c, MPI 4). --thread starts with MPI_Init_thread(MPI_THREAD_MULTIPLE); --excl adds
 * MPI_MODE_EXCL. Prints one line per rank: "rank R of S: FILE". Exit status 0, or 1 with the
 * failing call on stderr. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int rank, size;

/* The launcher forwards our stderr; an abort tears that down at once, line or not. */
static void die(int code)
{
    fflush(stderr);
    nanosleep(&(struct timespec){0, 200000000}, NULL);
    MPI_Abort(MPI_COMM_WORLD, code);
}

static void check(int rc, const char *what)
{
    if (rc == MPI_SUCCESS)
        return;
    char msg[MPI_MAX_ERROR_STRING];
    int n;
    MPI_Error_string(rc, msg, &n);
    fprintf(stderr, "rank %d: %s: %s\n", rank, what, msg);
    die(1);
}

int main(int argc, char **argv)
{
    int thread = 0, fpp = 0, excl = 0, readback = 0;
    const char *calls = "at", *prefix = NULL;
    long bytes = 1 << 20, xfer = 1 << 18;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--thread")) thread = 1;
        else if (!strcmp(argv[i], "--fpp")) fpp = 1;
        else if (!strcmp(argv[i], "--excl")) excl = 1;
        else if (!strcmp(argv[i], "--read")) readback = 1;
        else if (!strcmp(argv[i], "--calls") && i + 1 < argc) calls = argv[++i];
        else if (!strcmp(argv[i], "--bytes") && i + 1 < argc) bytes = atol(argv[++i]);
        else if (!strcmp(argv[i], "--xfer") && i + 1 < argc) xfer = atol(argv[++i]);
        else prefix = argv[i];
    }
    if (thread) {
        int provided;
        check(MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided), "MPI_Init_thread");
    } else {
        check(MPI_Init(&argc, &argv), "MPI_Init");
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (!prefix || bytes <= 0 || xfer <= 0 || bytes % xfer || xfer % 4) {
        if (rank == 0)
            fprintf(stderr, "usage: iez-test-mpiio [--thread] [--fpp] [--excl] [--read] [--calls KIND] [--bytes N] [--xfer N] PREFIX\n");
        MPI_Finalize();
        return 2;
    }
    char file[4096];
    if (fpp)
        snprintf(file, sizeof file, "%s.%08d", prefix, rank);
    else
        snprintf(file, sizeof file, "%s", prefix);
    MPI_Comm comm = fpp ? MPI_COMM_SELF : MPI_COMM_WORLD;
    MPI_Offset base = fpp ? 0 : (MPI_Offset)rank * bytes;
    unsigned char *buf = malloc((size_t)bytes), *got = malloc((size_t)bytes);
    for (long i = 0; i < bytes; i++)
        buf[i] = (unsigned char)((rank * 7 + i) % 251);

    MPI_File fh;
    int amode = MPI_MODE_CREATE | MPI_MODE_RDWR | (excl ? MPI_MODE_EXCL : 0);
    check(MPI_File_open(comm, file, amode, MPI_INFO_NULL, &fh), "MPI_File_open");
    if (!strcmp(calls, "view"))
        check(MPI_File_set_view(fh, base, MPI_INT, MPI_INT, "native", MPI_INFO_NULL), "MPI_File_set_view");
    for (long k = 0; k < bytes / xfer; k++) {
        const unsigned char *p = buf + k * xfer;
        MPI_Offset at = base + k * xfer;
        int n = (int)xfer;
        MPI_Request rq;
        if (!strcmp(calls, "at"))
            check(MPI_File_write_at(fh, at, p, n, MPI_BYTE, MPI_STATUS_IGNORE), "write_at");
        else if (!strcmp(calls, "at_all"))
            check(MPI_File_write_at_all(fh, at, p, n, MPI_BYTE, MPI_STATUS_IGNORE), "write_at_all");
        else if (!strcmp(calls, "ind")) {
            check(MPI_File_seek(fh, at, MPI_SEEK_SET), "seek");
            check(MPI_File_write(fh, p, n, MPI_BYTE, MPI_STATUS_IGNORE), "write");
        } else if (!strcmp(calls, "ind_all")) {
            check(MPI_File_seek(fh, at, MPI_SEEK_SET), "seek");
            check(MPI_File_write_all(fh, p, n, MPI_BYTE, MPI_STATUS_IGNORE), "write_all");
        } else if (!strcmp(calls, "iat")) {
            check(MPI_File_iwrite_at(fh, at, p, n, MPI_BYTE, &rq), "iwrite_at");
            check(MPI_Wait(&rq, MPI_STATUS_IGNORE), "wait");
        } else if (!strcmp(calls, "split")) {
            check(MPI_File_write_at_all_begin(fh, at, p, n, MPI_BYTE), "write_at_all_begin");
            check(MPI_File_write_at_all_end(fh, p, MPI_STATUS_IGNORE), "write_at_all_end");
        } else if (!strcmp(calls, "shared"))
            check(MPI_File_write_shared(fh, p, n, MPI_BYTE, MPI_STATUS_IGNORE), "write_shared");
        else if (!strcmp(calls, "ordered"))
            check(MPI_File_write_ordered(fh, p, n, MPI_BYTE, MPI_STATUS_IGNORE), "write_ordered");
        else if (!strcmp(calls, "view"))
            check(MPI_File_write_all(fh, p, n / 4, MPI_INT, MPI_STATUS_IGNORE), "write_all (view)");
#if MPI_VERSION >= 4
        else if (!strcmp(calls, "large"))
            check(MPI_File_write_at_c(fh, at, p, (MPI_Count)n, MPI_BYTE, MPI_STATUS_IGNORE), "write_at_c");
#endif
        else {
            if (rank == 0)
                fprintf(stderr, "unknown --calls %s\n", calls);
            die(2);
        }
    }
    if (readback && strcmp(calls, "shared") && strcmp(calls, "ordered")) {
        if (!strcmp(calls, "view"))
            check(MPI_File_read_at_all(fh, 0, got, (int)(bytes / 4), MPI_INT, MPI_STATUS_IGNORE), "read_at_all");
        else
            check(MPI_File_read_at_all(fh, base, got, (int)bytes, MPI_BYTE, MPI_STATUS_IGNORE), "read_at_all");
        if (memcmp(buf, got, (size_t)bytes)) {
            fprintf(stderr, "rank %d: %s: what was read differs from what was written\n", rank, file);
            die(1);
        }
    }
    check(MPI_File_close(&fh), "MPI_File_close");
    printf("rank %d of %d: %s\n", rank, size, file);
    free(buf);
    free(got);
    MPI_Finalize();
    return 0;
}

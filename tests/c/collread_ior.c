/* iez-test-collread-ior: seed 003's read benchmark in small (docs/references.md#s003-figs4-5):
 * every rank reads a shared file collectively, IOR-style, one block per rank and segment, block
 * and transfer one stripe, so that rank r's block of segment s is stripe s * ranks + r.
 *
 *   iez-test-collread-ior FILE BLOCK SEGMENTS write|read|mixed
 *
 * write: rank 0 writes the file (byte o = o * 7 % 251). read: every rank reads its blocks with
 * MPI_File_read_at_all and checks them; "read N bytes" on rank 0. mixed: the same, with rank 0's
 * view in the external32 representation (the same bytes for MPI_BYTE), which libiez's read does
 * not serve: every rank must then fall back together. The file is opened read-write
 * (MPI_MODE_RDWR) only so that libiez's I/O event log, which follows the descriptors opened for
 * writing, sees MPICH's own reads too. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (argc != 5)
        MPI_Abort(MPI_COMM_WORLD, 2);
    long long block = atoll(argv[2]), segments = atoll(argv[3]);
    MPI_File fh;
    if (MPI_File_open(MPI_COMM_WORLD, argv[1], MPI_MODE_CREATE | MPI_MODE_RDWR, MPI_INFO_NULL, &fh))
        MPI_Abort(MPI_COMM_WORLD, 1);
    unsigned char *buf = malloc((size_t)block);
    int reading = argv[4][0] != 'w';
    MPI_File_set_view(fh, 0, MPI_BYTE, MPI_BYTE, argv[4][0] == 'm' && rank == 0 ? "external32" : "native",
                      MPI_INFO_NULL);
    if (rank == 0 && !reading)
        for (long long k = 0; k < segments * size; k++) {
            for (long long i = 0; i < block; i++)
                buf[i] = (unsigned char)((k * block + i) * 7 % 251);
            MPI_File_write_at(fh, k * block, buf, (int)block, MPI_BYTE, MPI_STATUS_IGNORE);
        }
    long long bad = 0;
    for (long long s = 0; reading && s < segments; s++) {
        long long off = (s * size + rank) * block;
        MPI_Status st;
        if (MPI_File_read_at_all(fh, off, buf, (int)block, MPI_BYTE, &st))
            MPI_Abort(MPI_COMM_WORLD, 1);
        for (long long i = 0; i < block; i++)
            bad += buf[i] != (unsigned char)((off + i) * 7 % 251);
    }
    MPI_Allreduce(MPI_IN_PLACE, &bad, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (bad) {
        if (!rank)
            fprintf(stderr, "%lld bytes differ from what was written\n", bad);
        MPI_Abort(MPI_COMM_WORLD, 3);
    }
    if (!rank && reading)
        printf("read %lld bytes\n", segments * size * block);
    free(buf);
    MPI_File_close(&fh);
    MPI_Finalize();
    return 0;
}

/* iez-test-split-hints: opens a shared file collectively and prints the hints MPI keeps for it.
 *
 *   iez-test-split-hints [--hint KEY=VALUE]... [--bytes N] FILE
 *
 * Every rank opens FILE on MPI_COMM_WORLD with MPI_MODE_CREATE | MPI_MODE_WRONLY and an MPI_Info
 * holding the --hint pairs (MPI_INFO_NULL without any), writes --bytes bytes at rank * N with
 * MPI_File_write_at_all (byte i of rank r's part is (r * 7 + i) % 251; none without --bytes),
 * and rank 0 prints MPI_File_get_info's hints, one "KEY=VALUE" line each. Exit status 0, or 1
 * with the failing call on stderr. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int rank;

static void check(int rc, const char *what)
{
    if (rc == MPI_SUCCESS)
        return;
    char msg[MPI_MAX_ERROR_STRING];
    int n;
    MPI_Error_string(rc, msg, &n);
    fprintf(stderr, "rank %d: %s: %s\n", rank, what, msg);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
}

int main(int argc, char **argv)
{
    check(MPI_Init(&argc, &argv), "MPI_Init");
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Info info = MPI_INFO_NULL;
    const char *file = NULL;
    long bytes = 0;
    for (int i = 1; i < argc; i++) {
        char *eq;
        if (!strcmp(argv[i], "--hint") && i + 1 < argc && (eq = strchr(argv[i + 1], '='))) {
            if (info == MPI_INFO_NULL)
                check(MPI_Info_create(&info), "MPI_Info_create");
            *eq = '\0';
            check(MPI_Info_set(info, argv[i + 1], eq + 1), "MPI_Info_set");
            i++;
        } else if (!strcmp(argv[i], "--bytes") && i + 1 < argc) {
            bytes = atol(argv[++i]);
        } else {
            file = argv[i];
        }
    }
    if (!file || bytes < 0 || bytes > (1l << 30)) {
        if (rank == 0)
            fprintf(stderr, "usage: iez-test-split-hints [--hint KEY=VALUE]... [--bytes N] FILE\n");
        MPI_Finalize();
        return 2;
    }
    MPI_File fh;
    check(MPI_File_open(MPI_COMM_WORLD, file, MPI_MODE_CREATE | MPI_MODE_WRONLY, info, &fh), "MPI_File_open");
    if (info != MPI_INFO_NULL)
        MPI_Info_free(&info);
    if (bytes) {
        unsigned char *buf = malloc((size_t)bytes);
        if (!buf)
            check(MPI_ERR_NO_MEM, "malloc");
        for (long i = 0; i < bytes; i++)
            buf[i] = (unsigned char)((rank * 7 + i) % 251);
        check(MPI_File_write_at_all(fh, (MPI_Offset)rank * bytes, buf, (int)bytes, MPI_BYTE, MPI_STATUS_IGNORE),
              "MPI_File_write_at_all");
        free(buf);
    }
    MPI_Info used;
    check(MPI_File_get_info(fh, &used), "MPI_File_get_info");
    int nkeys = 0;
    check(MPI_Info_get_nkeys(used, &nkeys), "MPI_Info_get_nkeys");
    for (int i = 0; i < nkeys && rank == 0; i++) {
        char key[MPI_MAX_INFO_KEY + 1], value[MPI_MAX_INFO_VAL + 1];
        int flag = 0;
        check(MPI_Info_get_nthkey(used, i, key), "MPI_Info_get_nthkey");
        check(MPI_Info_get(used, key, MPI_MAX_INFO_VAL, value, &flag), "MPI_Info_get");
        if (flag)
            printf("%s=%s\n", key, value);
    }
    MPI_Info_free(&used);
    check(MPI_File_close(&fh), "MPI_File_close");
    MPI_Finalize();
    return 0;
}

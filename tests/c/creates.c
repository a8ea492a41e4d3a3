/* Creates many files, for bench/bench_libiez.py's create-path figure.
 *
 *   iez-test-creates DIR N open
 *       N times: open(DIR/f<i>, O_WRONLY|O_CREAT|O_EXCL, 0644), close. Run under LD_PRELOAD,
 *       libiez places each file (plan lookup, the MDS's ALLOC, the xattr) and traces it.
 *   iez-test-creates DIR N layout RUNDIR SPEC
 *       N times, without libiez: the same layout work done by hand (exclusive create, ALLOC of
 *       SPEC from the emulated MDS at RUNDIR, the user.lustre.lov xattr, close), then the
 *       application's own open and close. The difference between the two is libiez's cost.
 *
 * DIR is absolute. A first create (libiez loads its plan then) is not timed.
 * Prints: N SECONDS CPU-SECONDS RSS-KIB: the time and CPU (CLOCK_PROCESS_CPUTIME_ID) of the timed
 * creates, and the resident memory at the end (getrusage's maximum would count the image before exec). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include "layout.h"
#include "lum.h"
#include "mds.h"

static int by_hand(const char *path, const char *rundir, const char *spec)
{
    static char reply[IEZ_MDS_REPLY_MAX], why[512];
    static unsigned char buf[65536] __attribute__((aligned(8)));
    char *got = reply;
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 || iez_mds_alloc(rundir, path, spec, strlen(spec), &got, sizeof reply, why, sizeof why))
        return -1;
    struct iez_layout lay = {0};
    char err[200];
    if (iez_layout_parse(got, strlen(got), &lay, err, sizeof err))
        return -1;
    size_t n = iez_lum_encode(&lay, buf, sizeof buf);
    iez_layout_free(&lay);
    if (!n || fsetxattr(fd, "user.lustre.lov", buf, n, 0) || close(fd))
        return -1;
    fd = open(path, O_WRONLY | O_CLOEXEC);
    return fd < 0 ? -1 : close(fd);
}

static int create(const char *dir, long i, int argc, char **argv)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/f%ld", dir, i);
    if (!strcmp(argv[3], "layout"))
        return argc == 6 ? by_hand(path, argv[4], argv[5]) : -1;
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
    return fd < 0 ? -1 : close(fd);
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: iez-test-creates DIR N open|layout [RUNDIR SPEC]\n");
        return 2;
    }
    long n = atol(argv[2]);
    if (create(argv[1], n, argc, argv)) {
        perror("warm-up create");
        return 1;
    }
    struct timespec t0, t1, c0, c1;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long i = 0; i < n; i++)
        if (create(argv[1], i, argc, argv)) {
            perror("create");
            return 1;
        }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
    long pages = 0, resident = 0;
    FILE *statm = fopen("/proc/self/statm", "r");
    if (!statm || fscanf(statm, "%ld %ld", &pages, &resident) != 2)
        resident = -1;
    if (statm)
        fclose(statm);
    printf("%ld %.9f %.9f %ld\n", n, (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9,
           (double)(c1.tv_sec - c0.tv_sec) + (double)(c1.tv_nsec - c0.tv_nsec) / 1e9, resident * (sysconf(_SC_PAGESIZE) / 1024));
    return 0;
}

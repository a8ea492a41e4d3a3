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
 *   iez-test-creates DIR N interleave RUNDIR SPEC BLOCK
 *       Both in one process run under LD_PRELOAD, in turns of BLOCK creates each (which goes first
 *       alternates): BLOCK by hand in DIR/h (raw system calls: libiez sees none of them), then
 *       BLOCK opens in DIR/f<i> that libiez places, N of each in all. Each turn sees the same
 *       load of the machine, so the pairs' differences are libiez's cost without the noise of
 *       separate runs (the emulated MDS, a Python process on the same cores, wakes at each).
 *       Prints per pair of turns: HAND-NS IEZ-NS, the CPU per create of each.
 *
 * DIR is absolute. A first create (libiez loads its plan then) is not timed.
 * Prints (open, layout): N SECONDS CPU-SECONDS RSS-KIB: the time and CPU
 * (CLOCK_PROCESS_CPUTIME_ID) of the timed creates, and the resident memory at the end
 * (getrusage's maximum would count the image before exec). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
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
    /* raw system calls: under LD_PRELOAD (interleave) libiez sees none of the work by hand */
    int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 || iez_mds_alloc(rundir, path, spec, strlen(spec), &got, sizeof reply, why, sizeof why))
        return -1;
    struct iez_layout lay = {0};
    char err[200];
    if (iez_layout_parse(got, strlen(got), &lay, err, sizeof err))
        return -1;
    size_t n = iez_lum_encode(&lay, buf, sizeof buf);
    iez_layout_free(&lay);
    if (!n || syscall(SYS_fsetxattr, fd, "user.lustre.lov", buf, n, 0) || syscall(SYS_close, fd))
        return -1;
    fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_WRONLY | O_CLOEXEC);
    return fd < 0 ? -1 : (int)syscall(SYS_close, fd);
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

static double cpu_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

/* BLOCK creates from `from`, by hand (DIR/h/f<i>) or through libiez (DIR/f<i>): their CPU ns */
static double block_cpu(const char *dir, long from, long block, int hand, char **argv)
{
    char path[4096];
    double c0 = cpu_ns();
    for (long i = from; i < from + block; i++) {
        snprintf(path, sizeof path, hand ? "%s/h/f%ld" : "%s/f%ld", dir, i);
        int fd = hand ? 0 : open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
        if (hand ? by_hand(path, argv[4], argv[5]) : fd < 0 || close(fd)) {
            perror(path);
            exit(1);
        }
    }
    return cpu_ns() - c0;
}

static int interleave(const char *dir, long n, char **argv)
{
    long block = atol(argv[6]);
    char h[4096];
    snprintf(h, sizeof h, "%s/h", dir);
    if (block < 1 || syscall(SYS_mkdirat, AT_FDCWD, h, 0755)) {
        perror("interleave");
        return 1;
    }
    block_cpu(dir, n, 1, 0, argv); /* warm-ups: libiez loads its plan at its first create */
    block_cpu(dir, n, 1, 1, argv);
    for (long i = 0, turn = 0; i + block <= n; i += block, turn++) {
        double first = block_cpu(dir, i, block, (int)(turn & 1), argv);
        double second = block_cpu(dir, i, block, !(turn & 1), argv);
        printf("%.1f %.1f\n", (turn & 1 ? first : second) / (double)block, (turn & 1 ? second : first) / (double)block);
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: iez-test-creates DIR N open|layout|interleave [RUNDIR SPEC [BLOCK]]\n");
        return 2;
    }
    long n = atol(argv[2]);
    if (!strcmp(argv[3], "interleave"))
        return argc == 7 ? interleave(argv[1], n, argv) : 2;
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

/* Command-line options, close to IOR's (-a -b -t -s -F -c -w -r -o -k -e -E -G), plus -n for
 * the number of ranks, -p for HACC-IO particles and the long options of docs/iez-bench.md.
 * Every bad option is one line on stderr (from rank 0 under MPI) and exit status 2. */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

#define MAX_RANKS 65536             /* the IOR pattern keeps the rank in 16 bits */
#define MAX_TRANSFER (1ull << 30)   /* one transfer buffer per rank */
#define MAX_OFFSET (1ull << 48)     /* the IOR pattern keeps the offset in 48 bits */

static const char usage[] =
    "usage: iez-bench [--workload ior|hacc-io] [options]\n"
    "\n"
    "Runs an IOR-like or HACC-IO-like job as -n forked ranks (PMI_RANK set in each), or as the ranks\n"
    "mpiexec starts, and reports bandwidth and open/close times as IOR does. Sizes take IOR's\n"
    "suffixes: 64k, 1m, 2g (powers of 1024).\n"
    "\n"
    "common:\n"
    "  -a, --api NAME           I/O interface: POSIX (default), MPIIO, HDF5 (these two under mpiexec)\n"
    "  -n, -N, --ranks N        number of ranks (default 1; under mpiexec: its ranks)\n"
    "  -F, --file-per-proc      one file per rank (default: one shared file)\n"
    "  -w, --write              write phase    } both when neither is given\n"
    "  -r, --read               read phase     }\n"
    "  -o, --test-file PATH     IOR: testFile (default ./testFile); HACC-IO: path prefix (required)\n"
    "  -e, --fsync              fsync before closing after writing\n"
    "  -R, --verify             check every byte read against the pattern written\n"
    "      --json               print one JSON line instead of the text report\n"
    "IOR-like (--workload ior, the default):\n"
    "  -b, --block-size SIZE    contiguous bytes per rank and segment (default 1m)\n"
    "  -t, --transfer-size SIZE bytes per call (default 256k; divides -b, multiple of 8)\n"
    "  -s, --segments N         segments (default 1)\n"
    "  -k, --keep               keep the files (IOR removes them at the end)\n"
    "  -E, --use-existing       do not remove an existing file before writing\n"
    "  -G, --signature N        mixed into the data pattern (default 0)\n"
    "  -c, --collective         collective data calls (MPIIO, HDF5)\n"
    "HACC-IO-like (--workload hacc-io):\n"
    "  -p, --particles N[,N...] particles per rank: one count for all, or one per rank\n"
    "      --header-size SIZE   header at the start of each file (default 25165824, HACC-IO's; 0 = none)\n"
    "\n"
    "exit status: 0 done, 1 I/O error, 2 bad options, 3 --verify found differing bytes\n";

enum { OPT_WORKLOAD = 256, OPT_HEADER, OPT_JSON, OPT_FORK_RANK };

static const struct option longopts[] = {
    {"api", required_argument, NULL, 'a'},
    {"ranks", required_argument, NULL, 'n'},
    {"file-per-proc", no_argument, NULL, 'F'},
    {"write", no_argument, NULL, 'w'},
    {"read", no_argument, NULL, 'r'},
    {"test-file", required_argument, NULL, 'o'},
    {"fsync", no_argument, NULL, 'e'},
    {"verify", no_argument, NULL, 'R'},
    {"json", no_argument, NULL, OPT_JSON},
    {"block-size", required_argument, NULL, 'b'},
    {"transfer-size", required_argument, NULL, 't'},
    {"segments", required_argument, NULL, 's'},
    {"keep", no_argument, NULL, 'k'},
    {"use-existing", no_argument, NULL, 'E'},
    {"signature", required_argument, NULL, 'G'},
    {"collective", no_argument, NULL, 'c'},
    {"particles", required_argument, NULL, 'p'},
    {"header-size", required_argument, NULL, OPT_HEADER},
    {"workload", required_argument, NULL, OPT_WORKLOAD},
    {"help", no_argument, NULL, 'h'},
    {"fork-rank", required_argument, NULL, OPT_FORK_RANK}, /* internal: a rank the launcher started */
    {NULL, 0, NULL, 0},
};

static int quiet;

static int bad(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int bad(const char *fmt, ...)
{
    if (quiet)
        return -1;
    va_list ap;
    va_start(ap, fmt);
    fputs("iez-bench: error: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputs(" (iez-bench --help)\n", stderr);
    va_end(ap);
    return -1;
}

static int number(const char *s, uint64_t *out)
{
    char *end;
    if (!s || *s < '0' || *s > '9')
        return -1;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno || *end)
        return -1;
    *out = v;
    return 0;
}

static int size_opt(const char *opt, const char *arg, uint64_t *out)
{
    if (bench_parse_size(arg, out))
        return bad("%s: cannot read '%s' as a size (examples: 1048576, 64k, 1m)", opt, arg);
    return 0;
}

/* "N" for every rank, or "N,N,..." with one count per rank. */
static int particles(const char *arg, struct bench_params *p)
{
    p->particles = calloc((size_t)p->ranks, sizeof *p->particles);
    if (!p->particles)
        return bad("cannot allocate %d particle counts", p->ranks);
    int n = 0;
    const char *s = arg;
    for (;;) {
        char *end;
        errno = 0;
        if (*s < '0' || *s > '9')
            return bad("-p: cannot read '%s' as particle counts (N, or N,N,... one per rank)", arg);
        unsigned long long v = strtoull(s, &end, 10);
        if (errno || (*end && *end != ','))
            return bad("-p: cannot read '%s' as particle counts (N, or N,N,... one per rank)", arg);
        if (n == p->ranks)
            return bad("-p: %d or more counts for %d ranks", n + 1, p->ranks);
        p->particles[n++] = v;
        if (!*end)
            break;
        s = end + 1;
    }
    if (n == 1)
        for (int i = 1; i < p->ranks; i++)
            p->particles[i] = p->particles[0];
    else if (n != p->ranks)
        return bad("-p: %d counts for %d ranks (give one count, or one per rank)", n, p->ranks);
    return 0;
}

int bench_files(const struct bench_params *p) { return p->fpp ? p->ranks : 1; }

static int check_ior(struct bench_params *p)
{
    if (!p->transfer || p->transfer % 8)
        return bad("-t %llu: the transfer size must be a positive multiple of 8 bytes", (unsigned long long)p->transfer);
    if (p->transfer > MAX_TRANSFER)
        return bad("-t %llu: the transfer size is at most 1 GiB", (unsigned long long)p->transfer);
    if (!p->block || p->block % p->transfer)
        return bad("-b %llu: the block size must be a positive multiple of the transfer size (%llu)",
                   (unsigned long long)p->block, (unsigned long long)p->transfer);
    if (!p->segments)
        return bad("-s 0: at least one segment");
    uint64_t blocks = p->fpp ? p->segments : p->segments * (uint64_t)p->ranks;
    if (blocks / (uint64_t)(p->fpp ? 1 : p->ranks) != p->segments || blocks > MAX_OFFSET / p->block)
        return bad("files of %llu blocks of %llu bytes are too large (at most 2^48 bytes)",
                   (unsigned long long)blocks, (unsigned long long)p->block);
    return 0;
}

static int check_hacc(struct bench_params *p, const char *counts, int header_set)
{
    if (!counts)
        return bad("--workload hacc-io needs -p PARTICLES");
    if (!p->test_file)
        return bad("--workload hacc-io needs -o PATH (files are PATH-Part%%08d-of-%%08d.data)");
    if (particles(counts, p))
        return -1;
    if (!header_set)
        p->header = HACC_HEADER_DEFAULT;
    uint64_t members = p->fpp ? 1 : (uint64_t)p->ranks;
    uint64_t least = (HACC_HEADER_META + 2 * members) * 8;
    if (p->header && (p->header % 8 || p->header < least))
        return bad("--header-size %llu: 0, or a multiple of 8 of at least %llu bytes (the counts and ranks of %llu "
                   "rank%s)", (unsigned long long)p->header, (unsigned long long)least, (unsigned long long)members,
                   members == 1 ? "" : "s");
    uint64_t limit = (UINT64_MAX >> 2) / HACC_RECORD, total = 0;
    for (int i = 0; i < p->ranks; i++) {
        total += p->particles[i];
        if (p->particles[i] > limit || total > limit)
            return bad("-p: %llu particles are too many", (unsigned long long)total);
    }
    if (p->header > (UINT64_MAX >> 2) - total * HACC_RECORD)
        return bad("--header-size %llu is too large", (unsigned long long)p->header);
    return 0;
}

static int file_names_fit(const struct bench_params *p)
{
    char name[PATH_MAX];
    int last = p->ranks - 1;
    int rc = p->workload == BENCH_IOR ? ior_file_name(p, last, name, sizeof name)
                                      : hacc_file_name(p, last, name, sizeof name);
    return rc ? bad("-o %s: the file names would be longer than PATH_MAX", p->test_file) : 0;
}

int bench_parse(int argc, char **argv, struct bench_params *p, int *child_rank, int *up_fd, int *down_fd,
                int mpi_size, int quiet_errors)
{
    memset(p, 0, sizeof *p);
    quiet = quiet_errors;
    p->api = &bench_posix_api;
    p->ranks = mpi_size ? mpi_size : 1;
    p->launcher = mpi_size ? "mpi" : "fork";
    p->block = 1 << 20;     /* IOR's defaults */
    p->transfer = 256 << 10;
    p->segments = 1;
    *child_rank = *up_fd = *down_fd = -1;
    const char *counts = NULL;
    int header_set = 0, ior_only = 0;
    uint64_t v;
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":a:n:N:Fcwro:eRb:t:s:kEG:p:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'a':
            if (!(p->api = bench_api_find(optarg))) {
                const char *names = bench_api_names();
                return strchr(names, ',') ? bad("-a %s: this iez-bench has the interfaces %s", optarg, names)
                                          : bad("-a %s: this iez-bench has the POSIX interface only (built without "
                                                "MPI)", optarg);
            }
            break;
        case 'n': case 'N':
            if (number(optarg, &v) || v < 1 || v > MAX_RANKS)
                return bad("-%c %s: the number of ranks is 1 to %d", c, optarg, MAX_RANKS);
            if (mpi_size && (int)v != mpi_size)
                return bad("-%c %s: the MPI launcher started %d rank%s", c, optarg, mpi_size, mpi_size == 1 ? "" : "s");
            p->ranks = (int)v;
            break;
        case 'c': p->collective = 1; break;
        case 'F': p->fpp = 1; break;
        case 'w': p->write = 1; break;
        case 'r': p->read = 1; break;
        case 'o':
            if (!*optarg)
                return bad("-o: an empty file name");
            p->test_file = optarg;
            break;
        case 'e': p->fsync = 1; break;
        case 'R': p->verify = 1; break;
        case OPT_JSON: p->json = 1; break;
        case 'b': ior_only = 'b'; if (size_opt("-b", optarg, &p->block)) return -1; break;
        case 't': ior_only = 't'; if (size_opt("-t", optarg, &p->transfer)) return -1; break;
        case 's':
            ior_only = 's';
            if (number(optarg, &p->segments))
                return bad("-s %s: not a number of segments", optarg);
            break;
        case 'k': p->keep = 1; break;
        case 'E': p->use_existing = 1; break;
        case 'G':
            ior_only = 'G';
            if (number(optarg, &p->signature))
                return bad("-G %s: not a number", optarg);
            break;
        case 'p': counts = optarg; break;
        case OPT_HEADER:
            header_set = 1;
            if (size_opt("--header-size", optarg, &p->header))
                return -1;
            break;
        case OPT_WORKLOAD:
            if (!strcmp(optarg, "ior"))
                p->workload = BENCH_IOR;
            else if (!strcmp(optarg, "hacc-io") || !strcmp(optarg, "hacc"))
                p->workload = BENCH_HACC;
            else
                return bad("--workload %s: ior or hacc-io", optarg);
            break;
        case OPT_FORK_RANK:
            if (sscanf(optarg, "%d:%d:%d", child_rank, up_fd, down_fd) != 3 || *child_rank < 0)
                return bad("--fork-rank %s: internal option, RANK:UPFD:DOWNFD", optarg);
            break;
        case 'h':
            fputs(usage, stdout);
            return 1;
        case ':':
            if (optopt)
                return bad("option -%c needs a value", optopt);
            return bad("option %s needs a value", argv[optind - 1]);
        default:
            if (optopt)
                return bad("unknown option -%c", optopt);
            return bad("unknown option %s", argv[optind - 1]);
        }
    }
    if (optind < argc)
        return bad("unexpected argument '%s'", argv[optind]);
    if (!p->write && !p->read)
        p->write = p->read = 1;
    if (p->verify && !p->read)
        return bad("--verify checks what is read: add -r");
    if (p->api->mpi && !mpi_size)
        return bad("-a %s: not started by an MPI launcher, this iez-bench has the POSIX interface only: run "
                   "mpiexec -n RANKS iez-bench -a %s ...", p->api->name, p->api->name);
    if (p->collective && !p->api->mpi)
        return bad("-c: collective I/O is MPI's: add -a MPIIO or -a HDF5");
    if (p->collective && p->workload == BENCH_HACC && p->api != &bench_mpiio_api)
        return bad("-c with --workload hacc-io: -a MPIIO only");
    if (p->workload == BENCH_IOR) {
        if (counts || header_set)
            return bad("%s is an option of --workload hacc-io", counts ? "-p" : "--header-size");
        if (!p->test_file)
            p->test_file = "testFile";
        if (check_ior(p))
            return -1;
    } else {
        if (ior_only)
            return bad("-%c is an option of the IOR-like workload, not of hacc-io", ior_only);
        if (check_hacc(p, counts, header_set))
            return -1;
    }
    if (*child_rank >= p->ranks)
        return bad("--fork-rank %d: only %d ranks", *child_rank, p->ranks);
    return file_names_fit(p);
}

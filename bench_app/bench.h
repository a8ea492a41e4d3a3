/* iez-bench: the workload program (docs/iez-bench.md). Shared types of the workloads (IOR-like,
 * HACC-IO-like), the I/O backends (struct bench_api, after IOR's aiori table) and the launchers
 * that run the ranks (struct bench_comm: forked processes, or MPI's ranks under mpiexec). */
#ifndef IEZ_BENCH_H
#define IEZ_BENCH_H

#include <stddef.h>
#include <stdint.h>

#define BENCH_EXIT_IO 1      /* an I/O error, or a rank that died */
#define BENCH_EXIT_USAGE 2   /* bad options */
#define BENCH_EXIT_VERIFY 3  /* --verify found data that differs from what was written */

enum bench_workload { BENCH_IOR, BENCH_HACC };
enum bench_access { BENCH_WRITE = 0, BENCH_READ = 1 };

/* HACC-IO's particle record: xx yy zz vx vy vz phi (float), pid (int64), mask (uint16). */
#define HACC_VARS 9
#define HACC_RECORD 38
#define HACC_HEADER_DEFAULT 25165824 /* FILE_HEADER_SIZE_MAX in HACC-IO's restartio_glean.h */
#define HACC_HEADER_META 16          /* int64 words before the per-rank tables (HEADER_METAINFO_SIZE) */

struct bench_params {
    enum bench_workload workload;
    const struct bench_api *api;
    int ranks;
    int fpp;                    /* file per process (-F), else one shared file */
    int write, read;            /* phases (-w, -r; both when neither is given) */
    int verify;                 /* check the data pattern on read */
    int keep;                   /* IOR: keep the files (-k); HACC-IO always keeps them */
    int fsync;                  /* fsync before close in the write phase (-e) */
    int use_existing;           /* IOR: do not remove an existing file before writing (-E) */
    int json;                   /* one JSON line instead of the text report */
    int collective;             /* IOR: collective data calls (-c; MPI-IO and HDF5) */
    const char *launcher;       /* "fork" or "mpi": who started the ranks */
    uint64_t block, transfer, segments; /* IOR */
    uint64_t signature;         /* IOR: mixed into the data pattern (-G) */
    const char *test_file;      /* IOR testFile, HACC-IO path prefix (-o) */
    uint64_t *particles;        /* HACC-IO: particles of each rank (ranks entries) */
    uint64_t header;            /* HACC-IO: header bytes at the start of each file */
};

/* The I/O interface (IOR's aiori): one table per backend (api_posix.c, api_mpiio.c, api_hdf5.c).
 * Every call returns 0, or -1 with the error set by bench_fail (op, file and errno). `shared`:
 * the file is every rank's (opened on MPI_COMM_WORLD), else this rank's alone (MPI_COMM_SELF). */
struct bench_file;
struct bench_api {
    const char *name;           /* as -a takes it: POSIX, MPIIO, HDF5 */
    int mpi;                    /* needs MPI's ranks (an MPI launcher) */
    int collective_open;        /* a shared file is created and opened by all its ranks at once */
    void (*configure)(const struct bench_params *p);  /* once, before any call (NULL: nothing) */
    /* create (or open an existing file) for writing; size: the bytes the job will put in it */
    struct bench_file *(*create)(const char *path, int shared, uint64_t size);
    struct bench_file *(*open)(const char *path, enum bench_access access, int shared);
    int (*xfer)(enum bench_access access, struct bench_file *f, void *buf, uint64_t len, uint64_t offset);
    int (*set_size)(struct bench_file *f, uint64_t size);  /* HACC-IO's preallocation */
    int (*fsync)(struct bench_file *f);
    int (*close)(struct bench_file *f);
    int (*remove)(const char *path);  /* files only; a missing file is not an error */
};

extern const struct bench_api bench_posix_api, bench_mpiio_api, bench_hdf5_api;
const struct bench_api *bench_api_find(const char *name);  /* by -a name, case-insensitive */
const char *bench_api_names(void);                          /* "POSIX, MPIIO, HDF5": this build's */
int bench_posix_remove(const char *path);                   /* a regular file or symlink, if there */

/* One phase of one rank, in IOR's terms: start and end of open, transfer and close. */
struct bench_times {
    double open_start, open_end, xfer_start, xfer_end, close_start, close_end;
    uint64_t bytes;             /* moved by this rank */
    uint64_t ops;               /* transfer calls */
};

struct bench_result {
    int32_t rank;
    int32_t ran[2];             /* BENCH_WRITE, BENCH_READ */
    struct bench_times phase[2];
    uint64_t checked, mismatched; /* bytes compared by --verify, bytes that differed */
    uint64_t bad_offset;        /* the first differing byte, when mismatched > 0 */
    int32_t bad_expected, bad_found;
    char bad_file[1024];
};

/* How ranks run and meet (launch.c: forked processes; launch_mpi.c: MPI's ranks). */
struct bench_comm {
    int rank, size;
    int (*barrier)(void);       /* 0, or -1 when the job is being torn down */
};

/* The workloads: run this rank's phases; 0, or -1 with the error set. */
int ior_run(const struct bench_params *p, const struct bench_comm *c, struct bench_result *r);
int hacc_run(const struct bench_params *p, const struct bench_comm *c, struct bench_result *r);
/* The files a workload writes, in rank order (for the report). */
int ior_file_name(const struct bench_params *p, int rank, char *out, size_t n);
int hacc_file_name(const struct bench_params *p, int rank, char *out, size_t n);
int bench_files(const struct bench_params *p);  /* how many distinct files */

/* Data patterns (pattern.c). */
void ior_fill(uint64_t *buf, uint64_t words, int rank, uint64_t offset, uint64_t signature);
void hacc_fill(int var, void *buf, uint64_t first_id, uint64_t count, int rank);
size_t hacc_var_size(int var);
const char *hacc_var_name(int var);
void bench_compare(struct bench_result *r, const char *file, uint64_t offset, const void *want, const void *got,
                   uint64_t len);

/* The report (report.c): aggregate the ranks' results and print them; 0, or BENCH_EXIT_VERIFY
 * (with one line on stderr) when --verify found differing bytes. */
int bench_report(const struct bench_params *p, const struct bench_result *results, int n);

/* Errors: the first one of a process (a rank, or the launcher), as one line naming the
 * operation, the file and errno. */
void bench_fail(const char *op, const char *path, uint64_t offset, int err);
void bench_fail_msg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
const char *bench_error(void);
int bench_failed(void);

/* Options (options.c) and small helpers (util.c). mpi_size: the ranks MPI started (0: not
 * under MPI); quiet: say nothing on errors (MPI ranks other than 0). */
int bench_parse(int argc, char **argv, struct bench_params *p, int *child_rank, int *up_fd, int *down_fd,
                int mpi_size, int quiet);
int bench_parse_size(const char *s, uint64_t *out);
double bench_now(void);
void *bench_alloc(size_t n);

/* The fork launcher (launch.c). */
int bench_launch(const struct bench_params *p, char **argv);
int bench_child(const struct bench_params *p, int rank, int up_fd, int down_fd);
/* Started by an MPI launcher (a PMI or PMIx connection, Open MPI's variables): the variable
 * that says so, or NULL. */
const char *bench_mpi_launched(void);
/* Under MPI (launch_mpi.c, built with MPI): MPI_Init, parse, run this rank, gather the results
 * to rank 0, which reports; the exit status. */
int bench_mpi_main(int argc, char **argv);

#endif

/* The trace shard: one file per process in IEZ_TRACE_DIR (format: docs/trace-format.md).
 *
 * The file is mapped MAP_SHARED in fixed-size chunks, and every counter is updated in place, so
 * what the page cache holds is the trace: nothing is lost when the process is killed, calls
 * _exit or execs. A record is published by writing its magic last; a reader skips anything
 * whose magic or CRC is not right. Chunks are allocated on disk before use (fallocate), so a
 * full disk stops tracing instead of raising SIGBUS in the application. */
#ifndef IEZ_SHARD_H
#define IEZ_SHARD_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "crc32.h"
#include "sysio.h"

#define IEZ_SHARD_MAGIC "IEZTRACE"
/* 2: the record's write facts at 18 are live, outside its CRC; 3: job context and program name
 * in the header (1024 bytes), reads, writer segments and renames in the record (96 bytes) */
#define IEZ_SHARD_VERSION 3
#define IEZ_SHARD_HEADER_SIZE 1024
#define IEZ_SHARD_CHUNK (128u << 10)
#define IEZ_REC_MAGIC 0x525A4549u /* the bytes "IEZR" */
#define IEZ_REC_FIXED 96

/* header flags */
#define IEZ_SHARD_CLEAN_EXIT 0x1u    /* the process finished normally (exit or _exit) */
#define IEZ_SHARD_PLAN_LOADED 0x2u
#define IEZ_SHARD_PLAN_REJECTED 0x4u
#define IEZ_SHARD_APP_GIVEN 0x8u     /* the app name came from IEZ_APP, not the program's name */

/* record flags */
#define IEZ_REC_CREATED 0x1u         /* this process created the file */
#define IEZ_REC_PLAN_HIT 0x2u        /* created from the plan */
#define IEZ_REC_PLAN_MISS 0x4u       /* created on Lustre / the emulated cluster, not in the plan */
#define IEZ_REC_RENAME 0x8u          /* not a file: a rename of the path to the name in the layout's place */
#define IEZ_REC_RANDOM_SHIFT 4       /* high nibble: the created name ends in this many generated characters */
#define IEZ_REC_RANDOM_MAX 15

struct iez_shard_header {            /* 512 bytes at offset 0; all fields little-endian */
    char magic[8];                   /* "IEZTRACE" */
    uint32_t version, header_size, chunk_size;
    int32_t pid, ppid, rank;
    uint64_t start_ns;               /* CLOCK_REALTIME, ns */
    char app[128], run[128], host[64];
    char job_id[64], array_task[32]; /* the batch system's job and array task ids ("": none) */
    uint32_t crc;                    /* CRC-32 (zlib) of bytes [0, 456), then of [512, 1024) */
    /* live fields, updated in place */
    uint32_t flags;
    uint64_t end_ns;                 /* 0 until the process finishes */
    uint64_t plan_hits, plan_misses, plan_entries;
    char reserved2[16];
    /* 512: static again, under the CRC */
    char program[128];               /* this process's own program name (app may be the run's) */
    char reserved3[384];
};

struct iez_rec {                     /* IEZ_REC_FIXED bytes, then path, then layout, 8-aligned */
    uint32_t magic;                  /* IEZ_REC_MAGIC, stored last */
    uint32_t size;                   /* whole record, a multiple of 8 */
    uint32_t crc;                    /* CRC-32 of bytes [12, 32) (18 and 19 taken as 0: live) and of path + layout */
    uint8_t api, flags;
    uint16_t path_len, lum_len;      /* layout = the file's lov_user_md, as the FS returned it */
    /* live write facts, each log2 + 1 (0: no write seen): the largest power of two dividing
     * every write's offset and size, and the largest write rounded up to a power of two */
    uint8_t write_align, write_max;
    uint32_t comm_size;              /* MPI communicator size (MPI-IO, parallel HDF5); 0 = 1 */
    uint64_t open_ns;
    /* live counters */
    uint64_t bytes_written, bytes_read, max_offset;
    uint64_t close_ns;               /* last close; 0 = open when the process ended */
    /* 64, live: contiguous extents written (1 + writes that did not start where the previous one
     * ended; 0: no write whose start is known), the end of the last such write + 1 (0: none),
     * and the largest read as write_max is the largest write */
    uint64_t segments, write_end;
    uint8_t read_max;
    uint8_t read_coll;               /* live: 1 once the process read it with a collective MPI-IO call */
    uint8_t reserved[14];
};

struct iez_shard {                   /* what each record reads first: its name last */
    struct iez_shard_header *hdr;
    char *chunk;                     /* the chunk records are being added to */
    size_t chunk_no, used;           /* its index, and bytes used in it */
    int broken;                      /* a chunk could not be added: no more records */
    struct iez_own file;             /* written only through descriptors checked to be it */
};

struct iez_shard_ident {
    const char *app, *run, *host, *program, *job_id, *array_task;
    int rank, app_given;
};


/* Create the shard file in dir (made 0700 if missing; refused if others could swap its files):
 * 0, or -1 with the reason in why. */
int iez_shard_create(struct iez_shard *sh, const char *dir, const struct iez_shard_ident *id, char *why, size_t cap);
/* Room for a record of size bytes (a multiple of 8, at most a chunk less the header), zeroed;
 * NULL when no more can be added. The caller serialises calls. */
struct iez_rec *iez_shard_alloc(struct iez_shard *sh, size_t size);
/* Publish a filled record: its CRC, then its magic. */
void iez_shard_commit(struct iez_rec *r);
/* At the end of the process: cut the file after the last record (if it is still ours). */
void iez_shard_seal(struct iez_shard *sh);
/* The process's rank and run became known later (MPI_Init): rewrite them and the header CRC. */
void iez_shard_set_ident(struct iez_shard *sh, int rank, const char *run);


#endif

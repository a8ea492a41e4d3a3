#include "shard.h"
#include "hot.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sysio.h"

_Static_assert(sizeof(struct iez_shard_header) == IEZ_SHARD_HEADER_SIZE, "shard header is 512 bytes");
_Static_assert(offsetof(struct iez_shard_header, crc) == 456, "header CRC at 456");
_Static_assert(offsetof(struct iez_shard_header, end_ns) == 464, "end_ns at 464");
_Static_assert(sizeof(struct iez_rec) == IEZ_REC_FIXED, "record head is 64 bytes");
_Static_assert(offsetof(struct iez_rec, bytes_written) == 32, "counters at 32");
_Static_assert(offsetof(struct iez_rec, comm_size) == 20, "communicator size at 20");
_Static_assert(offsetof(struct iez_rec, write_align) == 18, "write facts at 18");
_Static_assert(offsetof(struct iez_rec, segments) == 64, "version 3 facts at 64");
_Static_assert(offsetof(struct iez_rec, read_max) == 80, "read fact at 80");
_Static_assert(offsetof(struct iez_rec, read_coll) == 81, "collective read at 81");
_Static_assert(offsetof(struct iez_shard_header, job_id) == 360, "job context at 360");
_Static_assert(offsetof(struct iez_shard_header, program) == 512, "program at 512");
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "shards are little-endian; this host is not");

static char *map_chunk(int fd, size_t no)
{
    return iez_map_reserved(fd, (off_t)no * IEZ_SHARD_CHUNK, IEZ_SHARD_CHUNK);
}

int iez_shard_create(struct iez_shard *sh, const char *dir, const struct iez_shard_ident *id, char *why, size_t cap)
{
    memset(sh, 0, sizeof *sh);
    if (iez_trusted_dir("the trace directory", dir, why, cap))
        return -1;
    int fd = -1;
    for (int seq = 0; fd < 0 && seq < 1000; seq++) {
        snprintf(sh->file.path, sizeof sh->file.path, "%s/iez.%s.%d.%d.shard", dir, id->host, (int)getpid(), seq);
        fd = iez_own_create(&sh->file, 0600);
        if (fd < 0 && errno != EEXIST)
            break;
    }
    if (fd < 0) {
        snprintf(why, cap, "cannot create a shard in %s: %s", dir, strerror(errno));
        return -1;
    }
    sh->chunk = map_chunk(fd, 0);
    int e = errno;
    iez_sys_close(fd);
    if (!sh->chunk) {
        snprintf(why, cap, "cannot map %s: %s", sh->file.path, strerror(e));
        return -1;
    }
    struct iez_shard_header *h = (struct iez_shard_header *)sh->chunk;
    memcpy(h->magic, IEZ_SHARD_MAGIC, 8);
    h->version = IEZ_SHARD_VERSION;
    h->header_size = IEZ_SHARD_HEADER_SIZE;
    h->chunk_size = IEZ_SHARD_CHUNK;
    h->pid = (int32_t)getpid();
    h->ppid = (int32_t)getppid();
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    h->start_ns = (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
    snprintf(h->app, sizeof h->app, "%s", id->app);
    snprintf(h->host, sizeof h->host, "%s", id->host);
    snprintf(h->program, sizeof h->program, "%s", id->program);
    snprintf(h->job_id, sizeof h->job_id, "%s", id->job_id);
    snprintf(h->array_task, sizeof h->array_task, "%s", id->array_task);
    if (id->app_given)
        h->flags = IEZ_SHARD_APP_GIVEN;
    sh->hdr = h;
    iez_shard_set_ident(sh, id->rank, id->run);
    sh->used = IEZ_SHARD_HEADER_SIZE;
    return 0;
}

IEZ_HOT struct iez_rec *iez_shard_alloc(struct iez_shard *sh, size_t size)
{
    if (sh->broken || !sh->chunk || size > IEZ_SHARD_CHUNK - IEZ_SHARD_HEADER_SIZE)
        return NULL;
    if (sh->used + size > IEZ_SHARD_CHUNK) {
        /* the tail of this chunk stays zero: readers move on to the next chunk */
        int fd = iez_own_open(&sh->file);
        char *c = fd < 0 ? NULL : map_chunk(fd, sh->chunk_no + 1);
        if (fd >= 0)
            iez_sys_close(fd);
        if (!c) {
            sh->broken = 1;
            return NULL;
        }
        sh->chunk = c;
        sh->chunk_no++;
        sh->used = 0;
    }
    struct iez_rec *r = (struct iez_rec *)(sh->chunk + sh->used);
    sh->used += size;
    /* the size goes in first: a reader can step over a record that was never committed */
    __atomic_store_n(&r->size, (uint32_t)size, __ATOMIC_RELEASE);
    return r;
}

IEZ_HOT void iez_shard_commit(struct iez_rec *r)
{
    /* the write facts at 18 are still 0 here, as the reader takes them */
    uint32_t crc = iez_crc32(0, (const char *)r + 12, 20);
    r->crc = iez_crc32(crc, (const char *)r + IEZ_REC_FIXED, (size_t)r->path_len + r->lum_len);
    __atomic_store_n(&r->magic, IEZ_REC_MAGIC, __ATOMIC_RELEASE);
}

void iez_shard_seal(struct iez_shard *sh)
{
    if (!sh->chunk)
        return;
    sh->broken = 1; /* no record may be added past the new end of file */
    iez_own_truncate(&sh->file, (off_t)(sh->chunk_no * IEZ_SHARD_CHUNK + sh->used));
}

void iez_shard_set_ident(struct iez_shard *sh, int rank, const char *run)
{
    struct iez_shard_header *h = sh->hdr;
    h->rank = rank;
    memset(h->run, 0, sizeof h->run);
    snprintf(h->run, sizeof h->run, "%s", run);
    uint32_t crc = iez_crc32(0, h, offsetof(struct iez_shard_header, crc));
    h->crc = iez_crc32(crc, h->program, IEZ_SHARD_HEADER_SIZE - offsetof(struct iez_shard_header, program));
}

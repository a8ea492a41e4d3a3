#include "trace.h"
#include "hot.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hash.h"
#include "log.h"
#include "module.h"
#include "sysio.h"

struct iez_ofd **iez_fdtab[IEZ_FD_CHUNKS];
struct iez_ofd iez_fd_none[2];

/* Everything below is guarded by `lock`, except the lock-free lookups and counter updates of
 * the write path. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct iez_shard shard;
static int shard_state;              /* 0 not yet made, 1 in use, -1 failed */
static int finished;

struct ofd_block {
    struct ofd_block *next;
    struct iez_ofd ofd[64];
};
static struct ofd_block *blocks;
static struct iez_ofd *free_ofds;

/* (api, path) -> latest record, open addressing; the key lives in the record itself, the hash
 * beside its pointer: a probe reads a record (a line of the shard, cold after the process did
 * anything else) only when the hashes agree */
struct tab_slot {
    struct iez_rec *rec;
    uint64_t hash;
};
static struct tab_slot *tab;
static size_t tab_mask, tab_n;
/* Records of created files not yet in the table, oldest first. A create needs no lookup (its
 * record is new), and its insert, a random slot of a table that outgrows the caches, cost it
 * a miss of its own each time (a microsecond, after the process did other work in between):
 * in a batch, the next lookup or a full batch, the inserts run together while the table is warm. */
#define PENDING 256
static struct tab_slot pending[PENDING];
static size_t n_pending;
static size_t nrecords;

static uint64_t plan_hits, plan_misses, plan_entries;
static uint32_t plan_flags;

/* records of files opened through layers without descriptors (MPI-IO, HDF5), still open */
static struct iez_rec **open_files;
static size_t n_open_files, open_files_cap;

static void trace_fini(void);

static const char *rec_path(const struct iez_rec *r) { return (const char *)r + IEZ_REC_FIXED; }

IEZ_HOT static void publish_plan_counts(void)
{
    if (shard_state != 1)
        return;
    __atomic_store_n(&shard.hdr->plan_hits, plan_hits, __ATOMIC_RELAXED);
    __atomic_store_n(&shard.hdr->plan_misses, plan_misses, __ATOMIC_RELAXED);
    __atomic_store_n(&shard.hdr->plan_entries, plan_entries, __ATOMIC_RELAXED);
    /* a locked instruction at each create only the first time (the flags only ever gain bits) */
    if ((__atomic_load_n(&shard.hdr->flags, __ATOMIC_RELAXED) & plan_flags) != plan_flags)
        __atomic_or_fetch(&shard.hdr->flags, plan_flags, __ATOMIC_RELAXED);
}

static int ensure_shard(void)
{
    if (shard_state)
        return shard_state;
    struct iez_shard_ident id = {iez_cfg.app,     iez_cfg.run,        iez_cfg.host, iez_cfg.program,
                                 iez_cfg.job_id, iez_cfg.array_task, iez_cfg.rank, iez_cfg.app_given};
    char why[PATH_MAX + 200];
    if (iez_shard_create(&shard, iez_cfg.trace_dir, &id, why, sizeof why)) {
        shard_state = -1;
        iez_log_once(IEZ_LOG_TRACE, "not tracing: %s", why);
        return -1;
    }
    shard_state = 1;
    publish_plan_counts();
    return 1;
}

static struct tab_slot *tab_find(int api, const char *path, size_t len, uint64_t h)
{
    for (size_t i = h & tab_mask;; i = (i + 1) & tab_mask) {
        struct iez_rec *r = tab[i].rec;
        if (!r || (tab[i].hash == h && r->api == api && r->path_len == len && !memcmp(rec_path(r), path, len)))
            return &tab[i];
    }
}

static int tab_grow(void)
{
    size_t cap = tab ? 2 * (tab_mask + 1) : 256;
    struct tab_slot *old = tab;
    size_t oldcap = tab ? tab_mask + 1 : 0;
    tab = calloc(cap, sizeof *tab);
    if (!tab) {
        tab = old;
        return -1;
    }
    tab_mask = cap - 1;
    for (size_t i = 0; i < oldcap; i++)
        if (old[i].rec) /* distinct keys: the first free slot */
            for (size_t j = old[i].hash & tab_mask;; j = (j + 1) & tab_mask)
                if (!tab[j].rec) {
                    tab[j] = old[i];
                    break;
                }
    free(old);
    return 0;
}

/* Point (api, path) of r at r. */
static void tab_put(struct iez_rec *r, uint64_t h)
{
    if ((tab_n + 1) * 2 > (tab ? tab_mask + 1 : 0) && tab_grow()) {
        iez_log_once(IEZ_LOG_TRACE, "no memory for the trace's table: a file opened again gets a record of its own");
        return;
    }
    struct tab_slot *slot = tab_find(r->api, rec_path(r), r->path_len, h);
    if (!slot->rec)
        tab_n++;
    *slot = (struct tab_slot){r, h};
}

static void flush_pending(void)
{
    for (size_t i = 0; i < n_pending; i++)
        tab_put(pending[i].rec, pending[i].hash);
    n_pending = 0;
}

/* The record of (api, path): the current one, or a new one when this open created the file
 * (a new file under an old name). */
IEZ_HOT static struct iez_rec *record_for(const struct iez_file_info *fi)
{
    if (fi->path_len > UINT16_MAX || fi->lum_len > UINT16_MAX || ensure_shard() != 1)
        return NULL;
    uint64_t h = iez_hash(fi->path, fi->path_len, (uint64_t)fi->api);
    if (!fi->created) {
        flush_pending();
        if (tab) {
            struct tab_slot *slot = tab_find(fi->api, fi->path, fi->path_len, h);
            if (slot->rec)
                return slot->rec;
        }
    }
    size_t size = (IEZ_REC_FIXED + fi->path_len + fi->lum_len + 7) & ~(size_t)7;
    struct iez_rec *r = iez_shard_alloc(&shard, size);
    if (!r) {
        iez_log_once(IEZ_LOG_TRACE, "the trace shard %s cannot grow: later files are not traced", shard.file.path);
        return NULL;
    }
    r->api = (uint8_t)fi->api;
    r->flags = (uint8_t)((fi->created ? IEZ_REC_CREATED : 0) | (fi->plan == IEZ_PLAN_HIT ? IEZ_REC_PLAN_HIT : 0) |
                         (fi->plan == IEZ_PLAN_MISS ? IEZ_REC_PLAN_MISS : 0) |
                         (fi->created && fi->name_random > 0 && fi->name_random <= IEZ_REC_RANDOM_MAX
                              ? fi->name_random << IEZ_REC_RANDOM_SHIFT : 0));
    r->path_len = (uint16_t)fi->path_len;
    r->lum_len = (uint16_t)fi->lum_len;
    r->comm_size = fi->comm_size > 0 ? (uint32_t)fi->comm_size : 0;
    r->open_ns = iez_now_ns();
    memcpy((char *)r + IEZ_REC_FIXED, fi->path, fi->path_len);
    if (fi->lum_len)
        memcpy((char *)r + IEZ_REC_FIXED + fi->path_len, fi->lum, fi->lum_len);
    iez_shard_commit(r);
    if (fi->created) {
        if (n_pending == PENDING)
            flush_pending();
        pending[n_pending++] = (struct tab_slot){r, h};
    } else {
        tab_put(r, h);
    }
    nrecords++;
    return r;
}

IEZ_HOT static struct iez_ofd *ofd_new(void)
{
    if (!free_ofds) {
        struct ofd_block *b = calloc(1, sizeof *b);
        if (!b)
            return NULL;
        b->next = blocks;
        blocks = b;
        for (size_t i = 0; i < 64; i++) {
            b->ofd[i].next_free = free_ofds;
            free_ofds = &b->ofd[i];
        }
    }
    struct iez_ofd *o = free_ofds;
    free_ofds = o->next_free;
    return o;
}

IEZ_HOT static void ofd_put(struct iez_ofd *o)
{
    if (iez_fd_is_none(o))
        return;
    if (__atomic_sub_fetch(&o->refs, 1, __ATOMIC_ACQ_REL) != 0)
        return;
    if (o->gen == iez_gen && o->rec)
        __atomic_store_n(&o->rec->close_ns, iez_now_ns(), __ATOMIC_RELAXED);
    o->next_free = free_ofds;
    free_ofds = o;
}

/* Point fd at o (NULL: at nothing), letting go of the previous occupant, if any (a descriptor
 * closed behind our back, e.g. by a raw syscall, when fd is being opened). */
IEZ_HOT static void slot_set(int fd, struct iez_ofd *o)
{
    if ((unsigned)fd >= IEZ_FD_CHUNK * IEZ_FD_CHUNKS)
        return;
    struct iez_ofd ***c = &iez_fdtab[(unsigned)fd / IEZ_FD_CHUNK];
    if (!*c) {
        if (!o)
            return;
        struct iez_ofd **chunk = calloc(IEZ_FD_CHUNK, sizeof *chunk);
        if (!chunk)
            return;
        __atomic_store_n(c, chunk, __ATOMIC_RELEASE);
    }
    struct iez_ofd *prev = __atomic_exchange_n(&(*c)[(unsigned)fd % IEZ_FD_CHUNK], o, __ATOMIC_ACQ_REL);
    if (prev)
        ofd_put(prev);
}

static int fd_trackable(int fd) { return (unsigned)fd < IEZ_FD_CHUNK * IEZ_FD_CHUNKS; }

IEZ_HOT void iez_trace_opened(int fd, const struct iez_file_info *fi)
{
    if (!iez_tracing || !fd_trackable(fd))
        return;
    pthread_mutex_lock(&lock);
    struct iez_rec *r = finished ? NULL : record_for(fi);
    struct iez_ofd *o = r ? ofd_new() : NULL;
    if (!o)
        o = &iez_fd_none[0]; /* looked at: no second look at each write */
    else {
        o->rec = r;
        o->gen = iez_gen;
        o->refs = 1;
        o->ask_pos = (fi->oflags & O_APPEND) || fi->shared;
        o->iolog = iez_iolog_on && fi->iolog;
        __atomic_store_n(&o->pos, fi->pos, __ATOMIC_RELAXED);
    }
    slot_set(fd, o);
    pthread_mutex_unlock(&lock);
}

/* The descriptor calls below take the trace lock: from a signal handler that interrupted
 * libiez's own work in this thread (iez_busy) they would deadlock, so they let it be; a stale
 * entry is replaced when the number is opened again. */
IEZ_HOT void iez_trace_closed(int fd)
{
    struct iez_ofd *was = iez_tracing ? iez_fd_get(fd) : NULL;
    if (!was || iez_busy || !iez_owner())
        return;
    /* a marker goes without the lock: closing a pipe or socket stays cheap */
    if (iez_fd_is_none(was) &&
        __atomic_compare_exchange_n(&iez_fdtab[(unsigned)fd / IEZ_FD_CHUNK][(unsigned)fd % IEZ_FD_CHUNK], &was, NULL,
                                    0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
        return;
    iez_trace_mark(fd, NULL);
}

void iez_trace_dup(int oldfd, int newfd)
{
    if (!iez_tracing || iez_busy || oldfd == newfd || (!iez_fd_get(oldfd) && !iez_fd_get(newfd)) || !iez_owner())
        return;
    pthread_mutex_lock(&lock);
    struct iez_ofd *o = iez_fd_get(oldfd);
    if (o && !iez_fd_is_none(o) && fd_trackable(newfd))
        __atomic_add_fetch(&o->refs, 1, __ATOMIC_ACQ_REL);
    else if (o && !iez_fd_is_none(o))
        o = NULL;
    slot_set(newfd, o);
    pthread_mutex_unlock(&lock);
}

void iez_trace_close_range(unsigned first, unsigned last)
{
    if (!iez_tracing || iez_busy || !iez_owner())
        return;
    pthread_mutex_lock(&lock);
    for (unsigned c = first / IEZ_FD_CHUNK; c < IEZ_FD_CHUNKS && c <= last / IEZ_FD_CHUNK; c++) {
        if (!iez_fdtab[c])
            continue;
        unsigned lo = c == first / IEZ_FD_CHUNK ? first % IEZ_FD_CHUNK : 0;
        unsigned hi = c == last / IEZ_FD_CHUNK ? last % IEZ_FD_CHUNK : IEZ_FD_CHUNK - 1;
        for (unsigned i = lo; i <= hi; i++) {
            struct iez_ofd *o = __atomic_exchange_n(&iez_fdtab[c][i], NULL, __ATOMIC_ACQ_REL);
            if (o)
                ofd_put(o);
        }
    }
    pthread_mutex_unlock(&lock);
}

void iez_trace_set_append(int fd, int append)
{
    struct iez_ofd *o = iez_tracing && append ? iez_fd_get(fd) : NULL;
    if (o && !iez_fd_is_none(o))
        __atomic_store_n(&o->ask_pos, 1, __ATOMIC_RELAXED);
}

/* In a fork child, o still names the parent's record: give it one in the child's own shard. */
static struct iez_rec *rebind(struct iez_ofd *o)
{
    int saved = errno;
    pthread_mutex_lock(&lock);
    if (__atomic_load_n(&o->gen, __ATOMIC_RELAXED) != iez_gen) {
        struct iez_rec *old = o->rec;
        struct iez_file_info fi = {0};
        if (old && !finished) {
            fi.api = old->api;
            fi.path = rec_path(old);
            fi.path_len = old->path_len;
            fi.lum = rec_path(old) + old->path_len;
            fi.lum_len = old->lum_len;
        }
        o->rec = old && !finished ? record_for(&fi) : NULL;
        __atomic_store_n(&o->gen, iez_gen, __ATOMIC_RELEASE);
    }
    struct iez_rec *r = o->rec;
    pthread_mutex_unlock(&lock);
    errno = saved;
    return r;
}

static inline struct iez_rec *rec_of(struct iez_ofd *o)
{
    if (IEZ_UNLIKELY(__atomic_load_n(&o->gen, __ATOMIC_ACQUIRE) != iez_gen))
        return !iez_busy && iez_owner() ? rebind(o) : NULL;
    return o->rec;
}

/* Where a call at the file position ended, when the position is not ours alone (appending
 * writes land at the end of file, a shared position moves under us): the kernel's. */
static int kernel_pos(struct iez_ofd *o, int fd, uint64_t *end)
{
    int saved = errno;
    off_t p = iez_sys_lseek(fd, 0, SEEK_CUR);
    errno = saved;
    if (p < 0)
        return -1;
    *end = (uint64_t)p;
    __atomic_store_n(&o->pos, *end, __ATOMIC_RELAXED);
    return 0;
}

__thread uint64_t iez_write_end __attribute__((tls_model("initial-exec")));

void iez_trace_wrote(struct iez_ofd *o, int fd, uint64_t n, int64_t off, uint64_t t0)
{
    struct iez_rec *r = rec_of(o);
    if (!r)
        return;
    int mt = iez_multithreaded();
    iez_counter_add(&r->bytes_written, n, mt);
    uint64_t end;
    if (off >= 0)
        end = (uint64_t)off + n;
    else if (off == IEZ_OFF_UNKNOWN) {
        iez_note_write(r, n, 0, 0, mt);
        return;
    } else if (!__atomic_load_n(&o->ask_pos, __ATOMIC_RELAXED))
        end = iez_counter_add(&o->pos, n, mt);
    else if (kernel_pos(o, fd, &end)) {
        iez_note_write(r, n, 0, 0, mt);
        return;
    }
    iez_note_write(r, n, end, 1, mt);
    iez_write_end = end;
    iez_counter_max(&r->max_offset, end, mt);
    if (o->iolog && end >= n)
        iez_iolog_event(1, t0, end - n, n, rec_path(r), r->path_len);
}

void iez_trace_read(struct iez_ofd *o, int fd, uint64_t n, int64_t off, uint64_t t0)
{
    struct iez_rec *r = rec_of(o);
    if (!r)
        return;
    int mt = iez_multithreaded();
    iez_counter_add(&r->bytes_read, n, mt);
    iez_byte_max(&r->read_max, iez_size_fact(n), mt);
    uint64_t end = off >= 0 ? (uint64_t)off + n : iez_counter_add(&o->pos, n, mt);
    if (o->iolog && (off >= 0 || !__atomic_load_n(&o->ask_pos, __ATOMIC_RELAXED) || !kernel_pos(o, fd, &end)) &&
        end >= n)
        iez_iolog_event(0, t0, end - n, n, rec_path(r), r->path_len);
}

void iez_trace_seeked(struct iez_ofd *o, uint64_t pos) { __atomic_store_n(&o->pos, pos, __ATOMIC_RELAXED); }

struct iez_rec *iez_trace_file_opened(const struct iez_file_info *fi)
{
    if (!iez_tracing)
        return NULL;
    pthread_mutex_lock(&lock);
    struct iez_rec *r = finished ? NULL : record_for(fi);
    if (r && n_open_files == open_files_cap) {
        size_t cap = open_files_cap ? 2 * open_files_cap : 16;
        struct iez_rec **a = realloc(open_files, cap * sizeof *a);
        if (a) {
            open_files = a;
            open_files_cap = cap;
        }
    }
    if (r && n_open_files < open_files_cap)
        open_files[n_open_files++] = r;
    pthread_mutex_unlock(&lock);
    return r;
}

void iez_trace_file_closed(struct iez_rec *r)
{
    pthread_mutex_lock(&lock);
    for (size_t i = 0; i < n_open_files; i++)
        if (open_files[i] == r) {
            open_files[i] = open_files[--n_open_files];
            if (!finished)
                __atomic_store_n(&r->close_ns, iez_now_ns(), __ATOMIC_RELAXED);
            break;
        }
    pthread_mutex_unlock(&lock);
}

IEZ_HOT void iez_trace_mark(int fd, struct iez_ofd *none)
{
    if (!fd_trackable(fd))
        return;
    pthread_mutex_lock(&lock);
    slot_set(fd, none);
    pthread_mutex_unlock(&lock);
}

/* One record of its own, published as a file's is: the old name where a path goes, the new one
 * where a layout goes (the reader gives the old name's records the new one). The records of
 * the old name stay as they are: a published record's path is under its CRC. */
void iez_trace_renamed(const char *from, size_t from_len, const char *to, size_t to_len)
{
    if (from_len > UINT16_MAX || to_len > UINT16_MAX)
        return;
    pthread_mutex_lock(&lock);
    struct iez_rec *r = finished || ensure_shard() != 1
                            ? NULL
                            : iez_shard_alloc(&shard, (IEZ_REC_FIXED + from_len + to_len + 7) & ~(size_t)7);
    if (r) {
        r->flags = IEZ_REC_RENAME;
        r->path_len = (uint16_t)from_len;
        r->lum_len = (uint16_t)to_len;
        r->open_ns = r->close_ns = iez_now_ns();
        memcpy((char *)r + IEZ_REC_FIXED, from, from_len);
        memcpy((char *)r + IEZ_REC_FIXED + from_len, to, to_len);
        iez_shard_commit(r);
    }
    pthread_mutex_unlock(&lock);
}

void iez_trace_set_ident(int rank, const char *run)
{
    pthread_mutex_lock(&lock);
    iez_cfg.rank = rank;
    if (run != iez_cfg.run)
        snprintf(iez_cfg.run, sizeof iez_cfg.run, "%s", run);
    if (shard_state == 1 && !finished)
        iez_shard_set_ident(&shard, rank, iez_cfg.run);
    pthread_mutex_unlock(&lock);
    iez_iolog_ident_changed();
}

uint64_t iez_trace_finish(struct iez_own *file)
{
    trace_fini();
    pthread_mutex_lock(&lock);
    uint64_t size = shard_state == 1 ? (uint64_t)shard.chunk_no * IEZ_SHARD_CHUNK + shard.used : 0;
    *file = shard.file;
    pthread_mutex_unlock(&lock);
    return size;
}

IEZ_HOT void iez_trace_plan_count(int outcome, size_t entries, int rejected)
{
    if (!iez_cfg.trace_dir[0])
        return;
    pthread_mutex_lock(&lock);
    plan_hits += outcome == IEZ_PLAN_HIT;
    plan_misses += outcome == IEZ_PLAN_MISS;
    plan_entries = entries;
    plan_flags = rejected ? IEZ_SHARD_PLAN_REJECTED : entries ? IEZ_SHARD_PLAN_LOADED : 0;
    if (!finished && ensure_shard() == 1)
        publish_plan_counts();
    pthread_mutex_unlock(&lock);
}

/* After fork, in parent and child: every descriptor open now shares its position. */
static void trace_forked(void)
{
    for (struct ofd_block *b = blocks; b; b = b->next)
        for (size_t i = 0; i < 64; i++)
            if (__atomic_load_n(&b->ofd[i].refs, __ATOMIC_RELAXED) > 0)
                __atomic_store_n(&b->ofd[i].ask_pos, 1, __ATOMIC_RELAXED);
}

/* the forking thread holds the lock across fork: no record is half written in the child */
static void trace_fork_prepare(void) { pthread_mutex_lock(&lock); }

static void trace_fork_parent(void)
{
    trace_forked();
    pthread_mutex_unlock(&lock);
}

static void trace_fork_child(void)
{
    trace_forked();
    /* the child starts afresh with its own shard */
    pthread_mutex_init(&lock, NULL);
    memset(&shard, 0, sizeof shard);
    shard_state = 0;
    finished = 0;
    if (tab)
        memset(tab, 0, (tab_mask + 1) * sizeof *tab);
    tab_n = nrecords = n_pending = 0;
    plan_hits = plan_misses = 0;
    n_open_files = 0;
}

static void trace_fini(void)
{
    pthread_mutex_lock(&lock);
    if (finished) {
        pthread_mutex_unlock(&lock);
        return;
    }
    finished = 1;
    if (shard_state == 1) {
        uint64_t now = iez_now_ns();
        /* what is still open is closed by the exit itself */
        for (size_t i = 0; i < n_open_files; i++)
            __atomic_store_n(&open_files[i]->close_ns, now, __ATOMIC_RELAXED);
        for (struct ofd_block *b = blocks; b; b = b->next)
            for (size_t i = 0; i < 64; i++) {
                struct iez_ofd *o = &b->ofd[i];
                if (__atomic_load_n(&o->refs, __ATOMIC_ACQUIRE) > 0 && o->gen == iez_gen && o->rec)
                    __atomic_store_n(&o->rec->close_ns, now, __ATOMIC_RELAXED);
            }
        __atomic_store_n(&shard.hdr->end_ns, now, __ATOMIC_RELAXED);
        __atomic_or_fetch(&shard.hdr->flags, IEZ_SHARD_CLEAN_EXIT, __ATOMIC_RELEASE);
        iez_shard_seal(&shard);
    }
    if (plan_hits || plan_misses || nrecords)
        iez_log("%zu files traced; plan: %llu hits, %llu misses (%llu entries)", nrecords,
                (unsigned long long)plan_hits, (unsigned long long)plan_misses, (unsigned long long)plan_entries);
    pthread_mutex_unlock(&lock);
}

const struct iez_module iez_trace_module = {.name = "trace",
                                            .fork_prepare = trace_fork_prepare,
                                            .fork_parent = trace_fork_parent,
                                            .fork_child = trace_fork_child,
                                            .fini = trace_fini};

/* Tracing (miniRecorder, references: s000-minirecorder): per file of this process, whether it
 * created it, bytes written and read, the highest offset written, the layout it ended up with,
 * open and close times. Records live in the shard (shard.h); the descriptor table below finds
 * them without a lock, so the write path costs a few instructions. */
#ifndef IEZ_TRACE_H
#define IEZ_TRACE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "state.h"
#include "iolog.h"
#include "plan.h"
#include "shard.h"

/* What a file descriptor refers to, shared by its duplicates as the kernel's open file
 * description is. Never freed (recycled through a free list), so a racing lookup is safe. */
struct iez_ofd {
    struct iez_rec *rec;             /* NULL: nothing to record (no room in the shard) */
    uint64_t pos;                    /* our view of the file position (atomic) */
    int refs;                        /* descriptors (atomic) */
    unsigned gen;                    /* iez_gen when rec was bound; differs in a fork child */
    int ask_pos;                     /* the position is not ours alone (O_APPEND, shared with
                                        another process): ask the kernel after a write */
    int iolog;                       /* each read and write goes to the I/O event log */
    struct iez_ofd *next_free;
};

/* Slot markers for descriptors looked at and found not worth tracing, so that each costs one
 * look (iez_fd_adopt) and nothing after: [0] nothing to trace (a pipe, a socket, a tty, no room
 * in the shard), [1] its reads are not traced (not on the traced file system), a write decides.
 * Never handed to the counters; a close or an open of the number clears them. */
extern struct iez_ofd iez_fd_none[2];
static inline int iez_fd_is_none(const struct iez_ofd *o) { return o == &iez_fd_none[0] || o == &iez_fd_none[1]; }

#define IEZ_FD_CHUNK 1024u
#define IEZ_FD_CHUNKS 1024u          /* descriptors below 1M are traced */
extern struct iez_ofd **iez_fdtab[IEZ_FD_CHUNKS];

static inline struct iez_ofd *iez_fd_get(int fd)
{
    if ((unsigned)fd >= IEZ_FD_CHUNK * IEZ_FD_CHUNKS)
        return NULL;
    struct iez_ofd **c = __atomic_load_n(&iez_fdtab[(unsigned)fd / IEZ_FD_CHUNK], __ATOMIC_ACQUIRE);
    return c ? __atomic_load_n(&c[(unsigned)fd % IEZ_FD_CHUNK], __ATOMIC_ACQUIRE) : NULL;
}

/* A descriptor this process did not open through libiez (inherited across exec: a shell
 * redirect, a launcher's file; opened by a raw call) and now written (writing 1) or read: its
 * flags (fcntl) and name (readlink of /proc/self/fd) decide, under the rules of an open (open.c),
 * once per descriptor; its traced descriptor, or
 * NULL, the slot then holding an iez_fd_none marker. */
struct iez_ofd *iez_fd_adopt(int fd, int writing);
/* Put a marker (iez_fd_none), or NULL (forget it), in fd's slot. */
void iez_trace_mark(int fd, struct iez_ofd *none);

/* The traced descriptor fd refers to, adopting an unknown one on its first use; NULL: not traced. */
static inline struct iez_ofd *iez_fd_use(int fd, int writing)
{
    struct iez_ofd *o = iez_fd_get(fd);
    if (IEZ_LIKELY(o && !iez_fd_is_none(o)))
        return o;
    if (!o || (writing && o == &iez_fd_none[1]))
        return iez_fd_adopt(fd, writing);
    return NULL;
}

/* A single-threaded process needs no atomic read-modify-write: plain loads and stores cost a
 * few cycles where each locked instruction costs tens (it shows on small writes). */
static inline uint64_t iez_counter_add(uint64_t *at, uint64_t n, int mt)
{
    if (mt)
        return __atomic_add_fetch(at, n, __ATOMIC_RELAXED);
    uint64_t v = __atomic_load_n(at, __ATOMIC_RELAXED) + n;
    __atomic_store_n(at, v, __ATOMIC_RELAXED);
    return v;
}

static inline void iez_counter_max(uint64_t *at, uint64_t v, int mt)
{
    uint64_t cur = __atomic_load_n(at, __ATOMIC_RELAXED);
    if (!mt) {
        if (v > cur)
            __atomic_store_n(at, v, __ATOMIC_RELAXED);
        return;
    }
    while (cur < v && !__atomic_compare_exchange_n(at, &cur, v, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
}

/* The record's write facts (docs/trace-format.md), each a byte kept by a compare-and-max so the
 * write path pays a ctz, a clz and two compares: write_align = 64 - log2 of the largest power of
 * two dividing the write's start and size (so the max is the least aligned write), write_max =
 * log2 + 1 of its size rounded up to a power of two. 0 = no write seen. */
static inline void iez_byte_max(uint8_t *at, uint8_t v, int mt)
{
    uint8_t cur = __atomic_load_n(at, __ATOMIC_RELAXED);
    if (!mt) {
        if (v > cur)
            __atomic_store_n(at, v, __ATOMIC_RELAXED);
        return;
    }
    while (v > cur && !__atomic_compare_exchange_n(at, &cur, v, 1, __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
}

/* log2 + 1 of n > 0 rounded up to a power of two: the size facts' byte */
static inline uint8_t iez_size_fact(uint64_t n) { return (uint8_t)(n > 1 ? 65 - __builtin_clzll(n - 1) : 1); }

/* A write of n > 0 bytes that ended at end; start_known 0: where it started is not known (the
 * size still counts). mt: another thread may update r at the same time. A write that does not
 * start where the last one ended starts a new segment: the exchange gives each thread the end
 * of the write before its own, so concurrent writers still count their own discontinuities. */
static inline void iez_note_write(struct iez_rec *r, uint64_t n, uint64_t end, int start_known, int mt)
{
    iez_byte_max(&r->write_max, iez_size_fact(n), mt);
    if (!start_known || end < n)
        return;
    iez_byte_max(&r->write_align, (uint8_t)(64 - __builtin_ctzll((end - n) | n)), mt);
    uint64_t prev;
    if (mt) {
        prev = __atomic_exchange_n(&r->write_end, end + 1, __ATOMIC_RELAXED);
        if (prev != end - n + 1)
            __atomic_add_fetch(&r->segments, 1, __ATOMIC_RELAXED);
        return;
    }
    prev = __atomic_load_n(&r->write_end, __ATOMIC_RELAXED);
    __atomic_store_n(&r->write_end, end + 1, __ATOMIC_RELAXED);
    if (prev != end - n + 1)
        __atomic_store_n(&r->segments, __atomic_load_n(&r->segments, __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED);
}

/* Accounting for an operation on a traced descriptor. off < 0: at the file position
 * (IEZ_OFF_UNKNOWN: somewhere not worth asking the kernel for); t0: when the call started
 * (iez_io_t0), for the I/O event log. */
#define IEZ_OFF_UNKNOWN (-2)
void iez_trace_wrote(struct iez_ofd *o, int fd, uint64_t n, int64_t off, uint64_t t0);
void iez_trace_read(struct iez_ofd *o, int fd, uint64_t n, int64_t off, uint64_t t0);
void iez_trace_seeked(struct iez_ofd *o, uint64_t pos);

/* The end of the last traced write of a known place this thread made, 0 once the MPI-IO layer
 * cleared it: after an independent MPI-IO write it is where the file's individual pointer went,
 * without asking MPI (mpiio.c). */
extern __thread uint64_t iez_write_end __attribute__((tls_model("initial-exec")));

/* always inlined into each write wrapper, as it was before the write facts made it long
 * enough for the compiler to call it instead */
__attribute__((always_inline)) static inline void iez_wrote(int fd, ssize_t n, int64_t off, uint64_t t0)
{
    if (IEZ_LIKELY(!iez_tracing) || n <= 0)
        return;
    struct iez_ofd *o = iez_fd_use(fd, 1);
    if (!o)
        return;
    /* the common case inline: one thread, a position of our own, the record bound here */
    struct iez_rec *r = o->rec;
    if (IEZ_LIKELY(r && !(o->ask_pos | o->iolog) && o->gen == iez_gen && !iez_multithreaded())) {
        __atomic_store_n(&r->bytes_written, r->bytes_written + (uint64_t)n, __ATOMIC_RELAXED);
        uint64_t end = off >= 0 ? (uint64_t)off + (uint64_t)n : (o->pos += (uint64_t)n);
        iez_write_end = end;
        if (end > r->max_offset)
            __atomic_store_n(&r->max_offset, end, __ATOMIC_RELAXED);
        iez_note_write(r, (uint64_t)n, end, 1, 0);
        return;
    }
    iez_trace_wrote(o, fd, (uint64_t)n, off, t0);
}

/* off < 0: at the file position (read, readv), which moves */
static inline void iez_read(int fd, ssize_t n, int64_t off, uint64_t t0)
{
    if (IEZ_LIKELY(!iez_tracing) || n <= 0)
        return;
    struct iez_ofd *o = iez_fd_use(fd, 0);
    if (o)
        iez_trace_read(o, fd, (uint64_t)n, off, t0);
}

static inline void iez_seeked(int fd, int64_t pos)
{
    if (IEZ_LIKELY(!iez_tracing) || pos < 0)
        return;
    struct iez_ofd *o = iez_fd_get(fd);
    if (o && !iez_fd_is_none(o))
        iez_trace_seeked(o, (uint64_t)pos);
}

struct iez_file_info {
    int api;                         /* enum iez_api */
    const char *path;                /* absolute */
    size_t path_len;
    int oflags;                      /* open flags: O_APPEND matters */
    uint64_t pos;                    /* the file position now */
    int shared;                      /* inherited: another process may move the position */
    int created;                     /* this process created the file */
    int plan;                        /* IEZ_PLAN_* */
    const void *lum;                 /* its layout, lov_user_md bytes (lum_len 0: unknown) */
    size_t lum_len;
    int comm_size;                   /* MPI communicator the file was opened on (0: none) */
    int iolog;                       /* on the emulated cluster: log its reads and writes */
    int name_random;                 /* created: its name ends in this many generated characters */
};

/* A file was opened on fd: trace it from now on. */
void iez_trace_opened(int fd, const struct iez_file_info *fi);
/* A file opened through a layer without descriptors (MPI-IO, HDF5): its record, or NULL. The
 * record is closed by iez_trace_file_closed, or at the end of the trace. */
struct iez_rec *iez_trace_file_opened(const struct iez_file_info *fi);
void iez_trace_file_closed(struct iez_rec *r);
/* Accounting on such a record; end: the highest offset written + 1 (0: unknown); contiguous:
 * the write covered [end - n, end) (its start gives the write alignment); mt: another thread
 * may update it at the same time. Inline: each MPI-IO data call makes one. */
static inline void iez_trace_rec_wrote(struct iez_rec *r, uint64_t n, uint64_t end, int contiguous, int mt)
{
    iez_counter_add(&r->bytes_written, n, mt);
    iez_note_write(r, n, end, end && contiguous, mt);
    if (end)
        iez_counter_max(&r->max_offset, end, mt);
}

/* coll: a collective MPI-IO read (the control plane turns on the Lustre-aware read for such). */
static inline void iez_trace_rec_read(struct iez_rec *r, uint64_t n, int coll, int mt)
{
    iez_counter_add(&r->bytes_read, n, mt);
    iez_byte_max(&r->read_max, iez_size_fact(n), mt);
    if (coll && !__atomic_load_n(&r->read_coll, __ATOMIC_RELAXED))
        __atomic_store_n(&r->read_coll, 1, __ATOMIC_RELAXED);
}
/* A file (or directory) this process traces names for was renamed: absolute names. */
void iez_trace_renamed(const char *from, size_t from_len, const char *to, size_t to_len);
/* The rank and run id this process turned out to have (MPI_Init). */
void iez_trace_set_ident(int rank, const char *run);
/* MPI_Finalize: finish the trace as at exit; the shard's size and which file it is (*file), or
 * 0 when this process wrote none. Nothing is traced afterwards. */
uint64_t iez_trace_finish(struct iez_own *file);

/* fd is being closed, or replaced (dup2 target). */
void iez_trace_closed(int fd);
void iez_trace_dup(int oldfd, int newfd);
void iez_trace_close_range(unsigned first, unsigned last);
void iez_trace_set_append(int fd, int append);
/* A create on Lustre or the emulated cluster: found in the plan (IEZ_PLAN_HIT), missing
 * from it (IEZ_PLAN_MISS), or the plan was rejected (IEZ_PLAN_NONE). */
void iez_trace_plan_count(int outcome, size_t plan_entries, int rejected);

#endif

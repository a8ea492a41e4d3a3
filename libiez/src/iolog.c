/* The I/O event log (iolog.h). Format, as src/iez/profile/ioevents.py reads it:
 *
 *   # iez-ioev 1
 *   <time> <op> <offset> <length> <nid> <pid> <jobid> <path>
 *
 * Each thread writes IEZ_IOLOG/<host>.<pid>.<tid>.<n>.ioev, mapped MAP_SHARED in 1 MiB chunks
 * whose blocks are allocated before use, as the trace shards are: an event is a formatted line
 * and a copy, and what was logged survives a kill or an exec. A line never crosses a chunk: the
 * rest of a full chunk is filled with newlines (empty lines, which readers skip). At the end of
 * a thread or of the process its file is cut after the last line; a file of a killed process
 * ends in zeros, which the reader ignores. */
#include "iolog.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "log.h"
#include "module.h"
#include "sysio.h"

#define CHUNK (1u << 20)
#define HEADER "# iez-ioev 1\n"

int iez_iolog_on;

struct iolog {
    char *map;                       /* the chunk being written */
    size_t used, chunk_no;
    unsigned gen;                    /* iez_gen when made: a fork child makes its own */
    int broken;
    struct iez_own file;             /* written only through descriptors checked to be it */
};

static __thread struct iolog *mine __attribute__((tls_model("initial-exec")));
static pthread_key_t key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;

/* What every event of this process carries; replaced whole (never freed) when MPI_Init tells
 * the real rank, so a thread logging meanwhile reads one consistent version. */
struct ident {
    char nid[80], jobid[130];
};
static struct ident *ident;

/* After the configuration is read: turn the log on if asked. */
static void iolog_init(void)
{
    if (!iez_cfg.iolog[0])
        return;
    if (!iez_tracing) {
        iez_log_once(IEZ_LOG_TRACE, "IEZ_IOLOG needs tracing (IEZ_TRACE_DIR, IEZ_MODE with trace): no I/O event log");
        return;
    }
    iez_iolog_on = 1;
}

/* This host's first IPv4 address other than loopback, as a Lustre client's NID on tcp. */
static void host_nid(char *out, size_t cap)
{
    struct ifaddrs *ifs, *i;
    snprintf(out, cap, "0@lo");
    if (getifaddrs(&ifs))
        return;
    for (i = ifs; i; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET)
            continue;
        struct in_addr a = ((struct sockaddr_in *)i->ifa_addr)->sin_addr;
        char ip[INET_ADDRSTRLEN];
        if ((ntohl(a.s_addr) >> 24) != 127 && inet_ntop(AF_INET, &a, ip, sizeof ip)) {
            snprintf(out, cap, "%s@tcp", ip);
            break;
        }
    }
    freeifaddrs(ifs);
}

/* IEZ_NID with %r replaced by the rank (one emulated client node per rank), else the host's. */
static struct ident *make_ident(void)
{
    struct ident *id = calloc(1, sizeof *id);
    if (!id)
        return NULL;
    if (iez_cfg.nid[0]) {
        size_t n = 0;
        for (const char *p = iez_cfg.nid; *p && n + 12 < sizeof id->nid; p++) {
            if (p[0] == '%' && p[1] == 'r') {
                n += (size_t)snprintf(id->nid + n, sizeof id->nid - n, "%d", iez_cfg.rank);
                p++;
            } else {
                id->nid[n++] = *p;
            }
        }
    } else {
        host_nid(id->nid, sizeof id->nid);
    }
    /* the job id a client sends (jobid_var=SLURM_JOB_ID): the run; one word on the line */
    size_t n = 0;
    for (const char *p = iez_cfg.run; *p && n + 1 < sizeof id->jobid; p++)
        id->jobid[n++] = (*p <= ' ' || *p == 0x7f) ? '_' : *p;
    if (!n)
        id->jobid[n++] = '-';
    return id;
}

static const struct ident *get_ident(void)
{
    struct ident *id = __atomic_load_n(&ident, __ATOMIC_ACQUIRE);
    if (IEZ_UNLIKELY(!id)) {
        struct ident *made = make_ident(), *none = NULL;
        if (!made)
            return NULL;
        if (__atomic_compare_exchange_n(&ident, &none, made, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            return made;
        free(made);
        id = none;
    }
    return id;
}

void iez_iolog_ident_changed(void)
{
    struct ident *made = iez_iolog_on ? make_ident() : NULL;
    if (made)
        __atomic_store_n(&ident, made, __ATOMIC_RELEASE); /* the old one may still be read: kept */
}

static void seal(struct iolog *l)
{
    if (!l->broken && l->map)
        iez_own_truncate(&l->file, (off_t)(l->chunk_no * CHUNK + l->used));
    if (l->map)
        munmap(l->map, CHUNK);
    l->map = NULL;
    l->broken = 1;
}

static void thread_end(void *p)
{
    struct iolog *l = p;
    if (l && l->gen == iez_gen) {
        int entered = iez_enter();
        seal(l);
        if (entered)
            iez_leave();
    }
    free(l);
    mine = NULL;
}

static void make_key(void) { pthread_key_create(&key, thread_end); }

static struct iolog *open_log(void)
{
    struct iolog *l = mine;
    if (l && l->gen == iez_gen)
        return l->broken ? NULL : l;
    if (l && l->map)
        munmap(l->map, CHUNK); /* the parent's, in a fork child */
    if (!l && !(l = calloc(1, sizeof *l)))
        return NULL;
    memset(l, 0, sizeof *l);
    l->gen = iez_gen;
    l->broken = 1;
    mine = l;
    pthread_once(&key_once, make_key);
    pthread_setspecific(key, l);
    char why[PATH_MAX + 200];
    if (iez_trusted_dir("the I/O event log directory", iez_cfg.iolog, why, sizeof why)) {
        iez_log_once(IEZ_LOG_TRACE, "no I/O event log: %s", why);
        return NULL;
    }
    int fd = -1;
    long tid = syscall(SYS_gettid);
    for (int seq = 0; fd < 0 && seq < 1000; seq++) {
        snprintf(l->file.path, sizeof l->file.path, "%s/%s.%d.%ld.%d.ioev", iez_cfg.iolog, iez_cfg.host, (int)iez_pid,
                 tid, seq);
        fd = iez_own_create(&l->file, 0600);
        if (fd < 0 && errno != EEXIST)
            break;
    }
    l->map = fd < 0 ? NULL : iez_map_reserved(fd, 0, CHUNK);
    if (!l->map)
        iez_log_once(IEZ_LOG_TRACE, "cannot write the I/O event log %s: %s", l->file.path, strerror(errno));
    if (fd >= 0)
        iez_sys_close(fd);
    if (!l->map)
        return NULL;
    memcpy(l->map, HEADER, sizeof HEADER - 1);
    l->used = sizeof HEADER - 1;
    l->broken = 0;
    return l;
}

static void append(struct iolog *l, const char *line, size_t n)
{
    if (l->used + n > CHUNK) {
        memset(l->map + l->used, '\n', CHUNK - l->used);
        int fd = iez_own_open(&l->file);
        char *next = fd < 0 ? NULL : iez_map_reserved(fd, (off_t)((l->chunk_no + 1) * CHUNK), CHUNK);
        if (fd >= 0)
            iez_sys_close(fd);
        if (!next) {
            iez_log_once(IEZ_LOG_TRACE, "the I/O event log %s cannot grow: later events are not logged", l->file.path);
            l->broken = 1;
            return;
        }
        munmap(l->map, CHUNK);
        l->map = next;
        l->chunk_no++;
        l->used = 0;
    }
    memcpy(l->map + l->used, line, n);
    l->used += n;
}

void iez_iolog_event(int write, uint64_t t0, uint64_t off, uint64_t len, const char *path, size_t plen)
{
    if (!iez_iolog_on || plen >= PATH_MAX || memchr(path, '\n', plen) || !iez_enter())
        return;
    int saved = errno;
    const struct ident *id = get_ident();
    struct iolog *l = id ? open_log() : NULL;
    if (l) {
        char line[PATH_MAX + 320];
        int n = snprintf(line, sizeof line, "%llu.%09llu %c %llu %llu %s %d %s ",
                         (unsigned long long)(t0 / 1000000000u), (unsigned long long)(t0 % 1000000000u),
                         write ? 'w' : 'r', (unsigned long long)off, (unsigned long long)len, id->nid,
                         (int)iez_pid, id->jobid);
        memcpy(line + n, path, plen);
        line[(size_t)n + plen] = '\n';
        append(l, line, (size_t)n + plen + 1);
    }
    errno = saved;
    iez_leave();
}

/* End of the process: cut this thread's file after its last event. */
static void iolog_fini(void)
{
    struct iolog *l = mine;
    if (l && l->gen == iez_gen)
        seal(l);
}

const struct iez_module iez_iolog_module = {.name = "iolog", .init = iolog_init, .fini = iolog_fini};

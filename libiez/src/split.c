/* Split writing on composite layouts (references: s001-hierarchical). Seed 001 gave each group
 * of writers its own subfile; here the plan gives it its own component, and these hints give
 * each component its own collective-buffering aggregator. ROMIO's common two-phase code cuts the
 * collective access range into cb_nodes equal file domains, their ends moved to the nearest
 * multiple of striping_unit (references: romio-file-domains): with one domain per component and
 * the stripe size as the unit, an IOR-like write of the planned bytes puts each aggregator in
 * exactly one component, on that component's OSTs only. The hints are the same on every rank,
 * as ROMIO requires (references: romio-hints): rank 0, which created the file, decides them. */
#include "split.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/vfs.h>

#include "dynsym.h"
#include "hdf5_mpi.h"
#include "log.h"
#include "plan.h"
#include "state.h"
#include "sysio.h"

static const char *const keys[IEZ_SPLIT_VALUES] = {"cb_nodes", "striping_factor", "striping_unit", "cb_buffer_size"};

/* ROMIO's default collective buffer (ADIOI_CB_BUFFER_SIZE_DFLT, references: romio-hints). */
#define CB_BUFFER_DEFAULT (16ll << 20)

/* A composite of at least two components, each with an explicit OST list, one stripe count and
 * one stripe size: seed 001's subfiles on their OST subsets. */
static int hierarchical(const struct iez_layout *lay)
{
    if (!lay->composite || lay->ncomp < 2)
        return 0;
    const struct iez_stripe *first = &lay->comp[0].s;
    for (uint32_t i = 0; i < lay->ncomp; i++) {
        const struct iez_stripe *s = &lay->comp[i].s;
        if (!s->nosts || s->count <= 0 || s->count != first->count || s->size == 0 || s->size != first->size)
            return 0;
    }
    return 1;
}

int iez_split_values(const struct iez_layout *lay, int nprocs, long long v[IEZ_SPLIT_VALUES])
{
    memset(v, 0, IEZ_SPLIT_VALUES * sizeof *v);
    if (!hierarchical(lay) || nprocs < 2)
        return -1;
    const struct iez_stripe *first = &lay->comp[0].s;
    /* ROMIO allows no more aggregators than ranks: with fewer ranks than components, each
     * domain is a run of whole components (a divisor of their number), never a part of two */
    long long groups = lay->ncomp;
    while (groups > nprocs || lay->ncomp % groups)
        groups--;
    if (groups < 2 || first->size > INT_MAX)
        return -1;
    long long k = first->count, size = (long long)first->size;
    /* the buffer: whole rounds of a component's stripes (else whole stripes), about ROMIO's
     * default, so each two-phase round writes whole stripes of one component */
    long long unit = k * size <= CB_BUFFER_DEFAULT ? k * size : size;
    long long cb = CB_BUFFER_DEFAULT / unit * unit;
    v[IEZ_SPLIT_CB_NODES] = groups;
    v[IEZ_SPLIT_STRIPING_FACTOR] = k;
    v[IEZ_SPLIT_STRIPING_UNIT] = size;
    v[IEZ_SPLIT_CB_BUFFER_SIZE] = cb > unit ? cb : unit;
    return 0;
}

/* MPI_Info's functions and MPI_Comm_split_type, from the library that holds PMPI_File_open (as
 * loaded for this process). */
static struct {
    int (*split_type)(MPI_Comm, int, int, MPI_Info, MPI_Comm *);
    int (*create)(MPI_Info *);
    int (*dup)(MPI_Info, MPI_Info *);
    int (*set)(MPI_Info, const char *, const char *);
    int (*valuelen)(MPI_Info, const char *, int *, int *);
} info_fn;
static pthread_once_t info_once = PTHREAD_ONCE_INIT;

static void resolve_info(void)
{
    const void *mpi = (const void *)iez_pmpi.PMPI_File_open;
    *(void **)&info_fn.split_type = iez_dynsym_beside("PMPI_Comm_split_type", mpi);
    *(void **)&info_fn.create = iez_dynsym_beside("PMPI_Info_create", mpi);
    *(void **)&info_fn.dup = iez_dynsym_beside("PMPI_Info_dup", mpi);
    *(void **)&info_fn.set = iez_dynsym_beside("PMPI_Info_set", mpi);
    *(void **)&info_fn.valuelen = iez_dynsym_beside("PMPI_Info_get_valuelen", mpi);
}

/* The keys of the user's or site's ROMIO_HINTS file ("key value" lines), read once: ROMIO takes
 * hints added to an MPI_Info over the file's, so a key the file sets is left to the file. */
static char *file_keys;
static size_t file_keys_len;
static pthread_once_t file_once = PTHREAD_ONCE_INIT;

static void read_hints_file(void)
{
    const char *path = getenv("ROMIO_HINTS");
    if (path && *path && iez_read_file(path, 64 << 10, &file_keys, &file_keys_len) != 0)
        file_keys = NULL, file_keys_len = 0; /* unreadable: ROMIO ignores it too */
}

static int hints_file_has(const char *key)
{
    pthread_once(&file_once, read_hints_file);
    size_t n = strlen(key);
    for (size_t at = 0; at < file_keys_len;) {
        const char *line = file_keys + at, *end = memchr(line, '\n', file_keys_len - at);
        size_t len = end ? (size_t)(end - line) : file_keys_len - at;
        while (len && (*line == ' ' || *line == '\t'))
            line++, len--;
        if (len > n && !memcmp(line, key, n) && (line[n] == ' ' || line[n] == '\t'))
            return 1;
        at = end ? (size_t)(end - file_keys) + 1 : file_keys_len;
    }
    return 0;
}

/* Whether the application (or its ROMIO_HINTS file) gave key a value: those are never overridden. */
static int user_has(MPI_Info user, const char *key)
{
    int len = 0, flag = 0;
    if (hints_file_has(key))
        return 1;
    return user != MPI_INFO_NULL && info_fn.valuelen(user, key, &len, &flag) == MPI_SUCCESS && flag;
}

static int add(MPI_Info user, MPI_Info out, const char *key, const char *value)
{
    return user_has(user, key) || info_fn.set(out, key, value) == MPI_SUCCESS ? 0 : -1;
}

int iez_split_hints(const long long v[IEZ_SPLIT_VALUES], int nodes, MPI_Info user, MPI_Info *out)
{
    pthread_once(&info_once, resolve_info);
    *out = user;
    if (!info_fn.create || !info_fn.dup || !info_fn.set || !info_fn.valuelen)
        return -1;
    MPI_Info info = MPI_INFO_NULL;
    if ((user == MPI_INFO_NULL ? info_fn.create(&info) : info_fn.dup(user, &info)) != MPI_SUCCESS)
        return -1;
    int rc = 0;
    char value[24];
    for (int i = 0; i < IEZ_SPLIT_VALUES && !rc; i++) {
        snprintf(value, sizeof value, "%lld", v[i]);
        if (v[i] > 0)
            rc = add(user, info, keys[i], value);
    }
    /* ROMIO's default cb_config_list, "*:1", takes one aggregator per host (a job on fewer hosts
     * than components would get fewer aggregators): as many per host as the components need,
     * unless the application chose the aggregators' number (references: romio-hints) */
    if (!rc && v[IEZ_SPLIT_CB_NODES] > 0 && nodes > 0 && !user_has(user, keys[IEZ_SPLIT_CB_NODES])) {
        snprintf(value, sizeof value, "*:%lld", (v[IEZ_SPLIT_CB_NODES] + nodes - 1) / nodes);
        rc = add(user, info, "cb_config_list", value);
    }
    /* two-phase even where ROMIO would judge the accesses not interleaved: only it aligns the
     * domains; and, under ROMIO's Lustre driver, one aggregator per OST (its default, stated so
     * that a value an MPI implementation ships differently does not apply; a ROMIO_HINTS file
     * that sets it still wins; references: romio-lustre-aggregators) */
    if (!rc)
        rc = add(user, info, "romio_cb_write", "enable");
    if (!rc)
        rc = add(user, info, "romio_lustre_co_ratio", "1");
    if (rc) {
        iez_pmpi.PMPI_Info_free(&info);
        return -1;
    }
    *out = info;
    return 0;
}

/* IEZ_SPLIT: off, hints (ROMIO's), or aggregate (libiez's own, collwrite.c); by default the
 * hints, except on Lustre, where ROMIO's Lustre driver hands stripes to its aggregators in turn
 * (references: romio-lustre-aggregators): no hint confines one to a component there. */
enum { SPLIT_OFF, SPLIT_HINTS, SPLIT_AGGREGATE };
#define LUSTRE_SUPER_MAGIC 0x0BD00BD0 /* lustre_user.h; as ROMIO's ADIO_FileSysType_fncall tests it */

static int mode_of(const char *abs)
{
    const char *v = getenv("IEZ_SPLIT");
    if (v && !strcmp(v, "off"))
        return SPLIT_OFF;
    if (v && !strcmp(v, "hints"))
        return SPLIT_HINTS;
    if (v && !strcmp(v, "aggregate"))
        return SPLIT_AGGREGATE;
    if (v && *v)
        iez_log_once(IEZ_LOG_CONFIG, "IEZ_SPLIT=%s is none of aggregate, hints, off: the default", v);
    struct statfs fs;
    return statfs(abs, &fs) == 0 && (unsigned long)fs.f_type == LUSTRE_SUPER_MAGIC ? SPLIT_AGGREGATE : SPLIT_HINTS;
}

/* The file parallel H5Fcreate has just created from the plan on rank 0 of its communicator:
 * HDF5's own MPI_File_open of it, in the same thread and inside that H5Fcreate, finds it
 * existing but qualifies all the same. */
static __thread char *h5_created __attribute__((tls_model("initial-exec")));

void iez_split_expect(const struct iez_mpi_create *mc, const char *abs, int len)
{
    iez_h5_mpi_end();
    if (mc->rank == 0 && mc->created && mc->pl.plan == IEZ_PLAN_HIT && len >= 0 && (h5_created = malloc((size_t)len + 1)))
        memcpy(h5_created, abs, (size_t)len + 1);
}

void iez_h5_mpi_end(void)
{
    free(h5_created);
    h5_created = NULL;
}

/* Rank 0: the hints of the file it has just created from the plan (by this open, or by the
 * H5Fcreate around it), or none. */
static void planned_values(const struct iez_mpi_create *mc, const char *abs, int len, long long v[IEZ_SPLIT_VALUES + 1])
{
    memset(v, 0, (IEZ_SPLIT_VALUES + 1) * sizeof *v);
    size_t speclen = 0;
    const char *spec;
    int planned = (mc->created && mc->pl.plan == IEZ_PLAN_HIT) || (h5_created && len >= 0 && !strcmp(h5_created, abs));
    if (!planned || len < 0 || !(spec = iez_place_planned(abs, (size_t)len, &speclen)))
        return;
    struct iez_layout lay = {0};
    char err[256];
    if (iez_layout_parse(spec, speclen, &lay, err, sizeof err) == 0 && hierarchical(&lay)) {
        v[IEZ_SPLIT_VALUES] = mode_of(abs);
        /* the hints need whole components per aggregator; libiez's own aggregation does not */
        if (iez_split_values(&lay, mc->size, v) && v[IEZ_SPLIT_VALUES] == SPLIT_HINTS)
            v[IEZ_SPLIT_VALUES] = SPLIT_OFF;
    }
    iez_layout_free(&lay);
}

MPI_Info iez_split_info(MPI_Comm comm, const struct iez_mpi_create *mc, const char *abs, int len, MPI_Info user,
                        int *aggregate)
{
    *aggregate = 0;
    /* the same terms on every rank of comm (its size, the environment): all enter or none */
    if (mc->size < 2 || !iez_cfg.place || !iez_cfg.plan[0])
        return user;
    long long v[IEZ_SPLIT_VALUES + 1] = {0}; /* the hints' values, then the mode */
    if (mc->rank == 0 && iez_enter()) {
        int saved = errno;
        planned_values(mc, abs, len, v);
        errno = saved;
        iez_leave();
    }
    if (iez_pmpi.PMPI_Bcast(v, IEZ_SPLIT_VALUES + 1, MPI_LONG_LONG, 0, comm) != MPI_SUCCESS)
        return user;
    *aggregate = v[IEZ_SPLIT_VALUES] == SPLIT_AGGREGATE;
    if (v[IEZ_SPLIT_VALUES] != SPLIT_HINTS || v[0] <= 0)
        return user;
    /* the hosts: one leader each in comm */
    pthread_once(&info_once, resolve_info);
    MPI_Comm host;
    int counts[2] = {0, 1}; /* {leaders, failures} */
    if (info_fn.split_type && info_fn.split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &host) == MPI_SUCCESS) {
        int r = 1;
        counts[1] = iez_pmpi.PMPI_Comm_rank(host, &r) != MPI_SUCCESS;
        counts[0] = r == 0;
        iez_pmpi.PMPI_Comm_free(&host);
    }
    if (iez_pmpi.PMPI_Allreduce(MPI_IN_PLACE, counts, 2, MPI_INT, MPI_SUM, comm) != MPI_SUCCESS || counts[1])
        return user;
    MPI_Info info;
    int ok = iez_split_hints(v, counts[0], user, &info) == 0;
    /* hints on some ranks only would fail the open (ROMIO checks they agree): all or none */
    if (iez_pmpi.PMPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, comm) != MPI_SUCCESS || !ok) {
        iez_split_done(info, user);
        iez_log_once(IEZ_LOG_CONFIG, "split writing: cannot add ROMIO hints to an MPI_Info: the file is opened "
                     "with the application's own");
        return user;
    }
    return info;
}

void iez_split_done(MPI_Info used, MPI_Info user)
{
    if (used != user)
        iez_pmpi.PMPI_Info_free(&used);
}

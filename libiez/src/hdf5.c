/* The HDF5 layer: H5Fcreate places the file before HDF5 creates it, and traces it as an HDF5
 * record with its rank and communicator; H5Fclose ends the record. HDF5 is not linked: its
 * functions are found at run time in whichever HDF5 the caller uses (dynsym.h), the system's
 * or one a Python wheel bundles and loads privately (h5py).
 *
 * Serial HDF5 (and any driver but MPI-IO): libiez creates the file exclusively with its planned
 * layout, as open(2) does, then HDF5 truncates and writes it. Parallel HDF5 (the MPI-IO driver):
 * every rank calls H5Fcreate, so placement is collective over the file's communicator, rank 0
 * creating the file (libiez-mpi.so's MPI layer); under libiez.so it is left to the layers below,
 * where the rank that creates the file through ROMIO places it. The ABI used here is HDF5's
 * since 1.10: hid_t is 64 bits (H5Ipublic.h). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core.h"
#include "dynsym.h"
#include "hdf5_mpi.h"
#include "log.h"
#include "open.h"
#include "trace.h"

typedef int64_t hid_t;
typedef int herr_t;
#define H5F_ACC_TRUNC 0x0002u /* H5Fpublic.h */
#define H5F_ACC_EXCL 0x0004u
#define H5P_DEFAULT 0

typedef hid_t (*create_fn)(const char *, unsigned, hid_t, hid_t);
typedef herr_t (*close_fn)(hid_t);

hid_t H5Fcreate(const char *name, unsigned flags, hid_t fcpl, hid_t fapl);
herr_t H5Fclose(hid_t id);

/* The HDF5 function behind a wrapper: the one the calling object's own dependencies give (two
 * HDF5 libraries may be loaded, a wheel's privately), else the next in the global scope. */
static void *real(const char *name, const void *self, const void *caller)
{
    void *p = iez_dynsym_beside(name, caller);
    if (!p || p == self)
        p = iez_dynsym(name, self, NULL);
    if (!p)
        iez_log_once(IEZ_LOG_CONFIG, "%s was called but no HDF5 library defines it", name);
    return p;
}

/* Whether fapl selects the MPI-IO driver of the HDF5 that holds `create` (a serial HDF5 has
 * none): H5FD_MPIO is H5FD_mpio_init() up to 1.12, H5FD_MPIO_id_g after H5open() in 1.14. */
static int mpio_fapl(create_fn create, hid_t fapl)
{
    if (fapl == H5P_DEFAULT) /* the default driver: sec2 */
        return 0;
    hid_t (*get_driver)(hid_t) = (hid_t(*)(hid_t))iez_dynsym_beside("H5Pget_driver", (void *)create);
    hid_t (*mpio_init)(void) = (hid_t(*)(void))iez_dynsym_beside("H5FD_mpio_init", (void *)create);
    const hid_t *mpio_id = iez_dynsym_beside("H5FD_MPIO_id_g", (void *)create);
    herr_t (*h5open)(void) = (herr_t(*)(void))iez_dynsym_beside("H5open", (void *)create);
    if (!get_driver || (!mpio_init && !(mpio_id && h5open)))
        return 0;
    hid_t mpio = mpio_init ? mpio_init() : (h5open() < 0 ? -1 : *mpio_id);
    return mpio >= 0 && get_driver(fapl) == mpio;
}

/* The traced HDF5 files, by id (ids are reused after H5Fclose). */
static pthread_mutex_t ids_lock = PTHREAD_MUTEX_INITIALIZER;
static struct h5file {
    hid_t id;
    struct iez_rec *rec;
} *ids;
static size_t nids, ids_cap;

static void remember(hid_t id, struct iez_rec *rec)
{
    pthread_mutex_lock(&ids_lock);
    if (nids == ids_cap) {
        size_t cap = ids_cap ? 2 * ids_cap : 16;
        struct h5file *a = realloc(ids, cap * sizeof *a);
        if (a) {
            ids = a;
            ids_cap = cap;
        }
    }
    if (nids < ids_cap)
        ids[nids++] = (struct h5file){id, rec};
    pthread_mutex_unlock(&ids_lock);
}

static struct iez_rec *forget(hid_t id)
{
    struct iez_rec *rec = NULL;
    pthread_mutex_lock(&ids_lock);
    for (size_t i = 0; i < nids; i++)
        if (ids[i].id == id) {
            rec = ids[i].rec;
            ids[i] = ids[--nids];
            break;
        }
    pthread_mutex_unlock(&ids_lock);
    return rec;
}

struct h5create {
    int active, len;
    unsigned flags;                  /* for the real call */
    struct iez_h5_collective c;
    char abs[PATH_MAX];
};

/* Before the real call: where the file is, and its placement. */
static void begin(struct h5create *op, create_fn create, const char *name, unsigned flags, hid_t fapl)
{
    memset(op, 0, offsetof(struct h5create, abs));
    op->flags = flags;
    op->len = -1;
    if (!name || !iez_owner())
        return;
    iez_init();
    int placing = iez_placing();
    if (!placing && !iez_tracing)
        return;
    int parallel = mpio_fapl(create, fapl);
    if (iez_enter()) {
        op->len = iez_absolute(AT_FDCWD, name, op->abs, sizeof op->abs);
        iez_leave();
    }
    if (parallel) {
        /* collective: every rank enters, whatever its own path; the MPI layer bcasts rank 0's outcome */
        op->active = iez_h5_mpi_place &&
                     !iez_h5_mpi_place(iez_dynsym_beside("H5Pget_fapl_mpio", (void *)create), fapl, name, op->abs,
                                       op->len, &op->c);
    } else if (op->len >= 0 && iez_enter()) {
        int saved = errno;
        struct iez_placement pl = {0};
        op->c.size = 1;
        if (placing && !iez_system_path(op->abs, (size_t)op->len))
            iez_open_place(AT_FDCWD, name, op->abs, (size_t)op->len, 0666, iez_cfg.place, iez_owner(), &pl);
        op->c.created = pl.outcome == IEZ_PLACE_CREATED;
        op->c.existed = iez_place_known(&pl) ? pl.outcome == IEZ_PLACE_EXISTS : iez_tracing && syscall(SYS_faccessat, AT_FDCWD, name, F_OK) == 0;
        op->c.plan = pl.plan;
        op->c.set = pl.set;
        op->active = 1;
        errno = saved;
        iez_leave();
    }
    if (op->c.created && (flags & H5F_ACC_EXCL)) /* our create was the exclusive one */
        op->flags = (flags & ~H5F_ACC_EXCL) | H5F_ACC_TRUNC;
}

static void end(struct h5create *op, hid_t id)
{
    if (!op->active)
        return;
    if (id >= 0 && op->len >= 0 && iez_tracing && iez_enter()) {
        int saved = errno;
        int created = op->c.rank == 0 && !op->c.existed;
        struct iez_rec *rec = iez_open_record(IEZ_API_HDF5, op->abs, (size_t)op->len, created,
                                              op->c.rank == 0 ? op->c.plan : IEZ_PLAN_NONE, op->c.size,
                                              op->c.created ? &op->c.set : NULL);
        if (rec)
            remember(id, rec);
        errno = saved;
        iez_leave();
    }
    free(op->c.set.data);
}

IEZ_EXPORT hid_t H5Fcreate(const char *name, unsigned flags, hid_t fcpl, hid_t fapl)
{
    create_fn create = (create_fn)real("H5Fcreate", (void *)H5Fcreate, __builtin_return_address(0));
    if (!create)
        return -1; /* H5I_INVALID_HID */
    struct h5create op;
    begin(&op, create, name, flags, fapl);
    hid_t id = create(name, op.flags, fcpl, fapl);
    if (iez_h5_mpi_end)
        iez_h5_mpi_end();
    if (id < 0 && op.c.created && op.c.size == 1) { /* as if libiez had not been there */
        int saved = errno;
        syscall(SYS_unlinkat, AT_FDCWD, name, 0);
        iez_log_once(IEZ_LOG_CREATE, "H5Fcreate of %s failed after placing it: plain create", name);
        errno = saved;
        op.c.created = 0;
        op.c.existed = 0;
        id = create(name, flags, fcpl, fapl);
    }
    end(&op, id);
    return id;
}

IEZ_EXPORT herr_t H5Fclose(hid_t id)
{
    close_fn close_ = (close_fn)real("H5Fclose", (void *)H5Fclose, __builtin_return_address(0));
    if (!close_)
        return -1;
    struct iez_rec *rec = iez_tracing ? forget(id) : NULL;
    herr_t rc = close_(id);
    if (rec)
        iez_trace_file_closed(rec);
    return rc;
}

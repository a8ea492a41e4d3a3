/* The plan file (docs/plan-format.md): which layout each file to be created gets. Loaded once
 * into an open-addressing hash table keyed by absolute path; a lookup takes no lock.
 * Version 2 paths may carry run-time fields: those the process knows (job, array, host, fqdn,
 * rank) are filled in at load, so such an entry is a literal key; an entry left with date or
 * random fields goes to a second table keyed by its literal bytes, one probe per field shape. */
#ifndef IEZ_PLAN_H
#define IEZ_PLAN_H

#include <stddef.h>
#include <stdint.h>

struct iez_plan;

/* A create's outcome against the plan, as trace records and shards count it: found in it,
 * missing from it, or no plan to look in. */
#define IEZ_PLAN_NONE 0
#define IEZ_PLAN_HIT 1
#define IEZ_PLAN_MISS 2

/* The values of the fields the process knows ({job}, {array}, {host}, {fqdn}, {rank}); NULL:
 * not known here, and an entry that needs it can never match. */
enum { IEZ_FIELD_JOB, IEZ_FIELD_ARRAY, IEZ_FIELD_HOST, IEZ_FIELD_FQDN, IEZ_FIELD_RANK, IEZ_FIELD_KNOWN };
struct iez_plan_env {
    const char *val[IEZ_FIELD_KNOWN];
    char buf[4][256]; /* storage iez_plan_env_read fills the values from */
};
/* The MPI rank's variables, first set wins (the shard header's rank and {rank}). */
#define IEZ_RANK_VARS "PMI_RANK", "PMIX_RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "ALPS_APP_PE"
/* The batch system's job and array task ids, first set wins (the shard header's, {job}, {array}):
 * Slurm, PBS, LSF, Flux. */
#define IEZ_JOB_VARS "SLURM_JOB_ID", "PBS_JOBID", "LSB_JOBID", "FLUX_JOB_ID"
#define IEZ_ARRAY_VARS "SLURM_ARRAY_TASK_ID", "PBS_ARRAY_INDEX", "PBS_ARRAYID", "LSB_JOBINDEX"
/* IEZ_HOST: the node name libiez takes for this process instead of the system's (a test's
 * multi-node job on one machine, or a site whose host names are not its node names): its
 * value when it is 1 to 63 bytes of [A-Za-z0-9._-], else NULL. */
const char *iez_host_env(void);
/* This process's fields from its environment and gethostname, or IEZ_HOST (docs/plan-format.md). */
void iez_plan_env_read(struct iez_plan_env *env);

/* Parse a whole plan; takes ownership of buf (malloc'd, len bytes). Any error rejects the
 * whole plan: NULL, with "SOURCE:LINE: why" in err. env may be NULL (no field known). */
struct iez_plan *iez_plan_parse(char *buf, size_t len, const char *source, const struct iez_plan_env *env,
                                char *err, size_t errlen);
/* The largest plan file read (about 2.5M entries): a bigger one is rejected, not loaded into
 * every process of a job. */
#define IEZ_PLAN_MAX_BYTES ((size_t)256 << 20)
/* Read and parse a plan file: a regular file of at most IEZ_PLAN_MAX_BYTES (a FIFO, a device or
 * a directory is rejected without being read, so it cannot block the application). */
struct iez_plan *iez_plan_load(const char *file, const struct iez_plan_env *env, char *err, size_t errlen);
void iez_plan_free(struct iez_plan *plan);

size_t iez_plan_size(const struct iez_plan *plan);
int iez_plan_version(const struct iez_plan *plan);
/* The plan's collread meta key (docs/plan-format.md): the Lustre-aware collective read asked
 * for or refused, or not said (also for plan NULL). */
#define IEZ_COLLREAD_UNSET 0
#define IEZ_COLLREAD_LUSTRE 1
#define IEZ_COLLREAD_OFF 2
int iez_plan_collread(const struct iez_plan *plan);
/* Start loading the line of the table where path's lookup begins (it is cold at each create:
 * a random line of a table larger than the caches), for an iez_plan_find soon after. */
void iez_plan_prefetch(const struct iez_plan *plan, const char *path, size_t plen);
/* The layout text planned for path (not NUL-terminated), or NULL. No allocation. */
const char *iez_plan_find(const struct iez_plan *plan, const char *path, size_t plen, size_t *speclen);
/* Entries in file order, paths as written: *iter starts at 0; returns 0 when done. */
int iez_plan_next(const struct iez_plan *plan, size_t *iter, const char **path, size_t *plen,
                  const char **spec, size_t *speclen);

#endif

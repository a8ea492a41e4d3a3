#include "place.h"
#include "hot.h"

#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "log.h"
#include "plan.h"
#include "state.h"

static pthread_once_t plan_once = PTHREAD_ONCE_INIT;
static struct iez_plan *plan;
static int plan_rejected, plan_ready;

static struct iez_plan *read_plan(int *rejected)
{
    char err[600];
    struct iez_plan_env env;
    iez_plan_env_read(&env); /* the fields this process fills in: docs/plan-format.md */
    struct iez_plan *p = iez_plan_load(iez_cfg.plan, &env, err, sizeof err);
    *rejected = !p;
    if (!p)
        iez_log_once(IEZ_LOG_PLAN, "plan rejected, placing nothing from it: %s", err);
    return p;
}

/* Loaded at the first create that needs it: processes that create nothing never pay for it. */
static void load_plan(void)
{
    if (iez_cfg.plan[0])
        plan = read_plan(&plan_rejected);
    __atomic_store_n(&plan_ready, 1, __ATOMIC_RELEASE);
}

const struct iez_plan *iez_place_plan(void)
{
    if (!iez_owner() || !iez_cfg.plan[0])
        return NULL;
    pthread_once(&plan_once, load_plan);
    return plan;
}

IEZ_HOT void iez_place_prefetch(const char *abs, size_t len)
{
    if (__atomic_load_n(&plan_ready, __ATOMIC_ACQUIRE) && plan)
        iez_plan_prefetch(plan, abs, len);
}

const char *iez_place_planned(const char *abs, size_t len, size_t *speclen)
{
    const struct iez_plan *p = iez_place_plan();
    return p ? iez_plan_find(p, abs, len, speclen) : NULL;
}

IEZ_HOT void iez_place(int dirfd, const char *path, const char *abs, size_t len, mode_t mode, int use_plan, int owner,
               struct iez_placement *out)
{
    memset(out, 0, sizeof *out);
    const struct iez_backend *be = iez_backend_of_path(abs, len);
    if (!(be->caps & IEZ_BE_LUSTRE) || (!use_plan && !(be->caps & IEZ_BE_EVERY_CREATE)))
        return;
    /* A vfork child (shared memory) never waits on the plan's once: had it died inside, the
     * parent would wait forever. Before the parent has the plan, the child reads its own. */
    int rejected = 0;
    struct iez_plan *own = NULL;
    const struct iez_plan *p = NULL;
    if (use_plan && owner)
        pthread_once(&plan_once, load_plan);
    if (use_plan && __atomic_load_n(&plan_ready, __ATOMIC_ACQUIRE)) {
        p = plan;
        rejected = plan_rejected;
    } else if (use_plan && iez_cfg.plan[0]) {
        p = own = read_plan(&rejected);
    }
    size_t speclen = 0;
    const char *spec = p ? iez_plan_find(p, abs, len, &speclen) : NULL;
    int rc = be->create(dirfd, path, abs, mode, spec, speclen, &out->set);
    if (rc == -ENOTSUP) { /* Lustre places a file outside the plan itself: was it there already? */
        int saved = errno;
        rc = syscall(SYS_faccessat, dirfd, path, F_OK) == 0 ? -EEXIST : -ENOENT;
        errno = saved;
    }
    if (rc == 0) {
        out->outcome = IEZ_PLACE_CREATED;
        out->be = be;
    } else if (rc == -EEXIST || rc == -ENOENT) {
        out->outcome = rc == -EEXIST ? IEZ_PLACE_EXISTS : IEZ_PLACE_LEFT;
    } else {
        out->outcome = IEZ_PLACE_FAILED;
        out->error = -rc;
        iez_log_once(IEZ_LOG_CREATE, "cannot create %s with its layout (%s): plain create", abs, strerror(-rc));
    }
    if (use_plan && (p || rejected) && out->outcome != IEZ_PLACE_EXISTS && owner) {
        out->counted = 1;
        out->plan = !p ? IEZ_PLAN_NONE : spec ? IEZ_PLAN_HIT : IEZ_PLAN_MISS;
        out->plan_entries = p ? iez_plan_size(p) : 0;
        out->plan_rejected = rejected;
    }
    iez_plan_free(own);
}

/* libiez's lifecycle: read the configuration once, then walk the module table (module.h) at
 * init, fork and exit. The layers that intercept calls (posix.c, stdio.c, hdf5.c, MPI) sit
 * above it; the modules and the global state (state.h) below. */
#ifndef IEZ_CORE_H
#define IEZ_CORE_H

#include "state.h"

/* Idempotent; every wrapper that does work calls it before its own work (before iez_enter):
 * a thread already inside libiez's work does not wait for it. Keeps errno. */
void iez_init(void);
/* Finish this process's modules: normal exit, _exit. Idempotent. */
void iez_fini(void);

#endif

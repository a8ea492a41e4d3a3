/* The public C API of libiez (include/iez.h). */
#include "iez.h"

#include "access.h"
#include "core.h"

IEZ_EXPORT const char *iez_version(void) { return "0.1.0"; }

IEZ_EXPORT int iez_io_begin(const char *phase)
{
    iez_init();
    return iez_access_enter(IEZ_ACCESS_PHASE, phase && *phase ? phase : "io");
}

IEZ_EXPORT int iez_io_end(void)
{
    iez_init();
    return iez_access_exit(IEZ_ACCESS_PHASE);
}

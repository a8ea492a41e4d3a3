#include "dynsym.h"

#include <dlfcn.h>
#include <stddef.h>

/* `name` in the dependency tree of the loaded object that holds addr (a dlopen handle searches
 * that object and what it needs, not the global scope where libiez's wrappers are). */
void *iez_dynsym_beside(const char *name, const void *addr)
{
    Dl_info info;
    if (!addr || !dladdr(addr, &info) || !info.dli_fname || !info.dli_fname[0])
        return NULL;
    void *h = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
    if (!h)
        return NULL;
    void *p = dlsym(h, name);
    dlclose(h); /* NOLOAD only took a reference */
    return p;
}

void *iez_dynsym(const char *name, const void *self, const void *caller)
{
    void *p = dlsym(RTLD_NEXT, name);
    if (p && p != self)
        return p;
    p = iez_dynsym_beside(name, caller);
    return p != self ? p : NULL;
}

/* Functions of libraries libiez does not link (HDF5, MPI), found at run time. */
#ifndef IEZ_DYNSYM_H
#define IEZ_DYNSYM_H

/* The definition of `name` the caller of a wrapper would reach without libiez: the next one
 * after libiez in the global scope (dlsym RTLD_NEXT, as for libc), else, when its library was
 * loaded privately (RTLD_LOCAL: a Python extension's HDF5 or MPI, as h5py's wheel and mpi4py
 * load them), the one the calling object's own dependencies give. Never `self` (the wrapper);
 * NULL if there is none. `caller`: the wrapper's __builtin_return_address(0). */
void *iez_dynsym(const char *name, const void *self, const void *caller);
/* `name` in the library that holds `addr` and its dependencies (NULL: not found). */
void *iez_dynsym_beside(const char *name, const void *addr);

#endif

/* Plan keys are absolute, lexically normalised paths (docs/plan-format.md). */
#ifndef IEZ_PATH_H
#define IEZ_PATH_H

#include <stddef.h>

/* The absolute form of path: relative paths are taken from base (an absolute directory).
 * Repeated slashes collapse, "." goes, ".." drops the previous component (never above "/"),
 * no trailing slash. Nothing touches the file system. Returns the length, or -1 if it does
 * not fit in cap bytes (with its NUL). */
int iez_path_normalize(const char *base, const char *path, char *out, size_t cap);

#endif

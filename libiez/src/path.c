#include "path.h"
#include "hot.h"

#include <string.h>

IEZ_HOT static int add(const char *p, size_t *n, char *out, size_t cap)
{
    while (*p) {
        while (*p == '/')
            p++;
        const char *e = p;
        while (*e && *e != '/')
            e++;
        size_t len = (size_t)(e - p);
        if (len == 0 || (len == 1 && p[0] == '.')) {
            /* nothing */
        } else if (len == 2 && p[0] == '.' && p[1] == '.') {
            while (*n > 0 && out[*n - 1] != '/')
                (*n)--;
            if (*n > 0)
                (*n)--; /* the slash before the dropped component */
        } else {
            if (*n + 1 + len + 1 > cap)
                return -1;
            out[(*n)++] = '/';
            memcpy(out + *n, p, len);
            *n += len;
        }
        p = e;
    }
    return 0;
}

IEZ_HOT int iez_path_normalize(const char *base, const char *path, char *out, size_t cap)
{
    size_t n = 0;
    if (cap < 2)
        return -1;
    if (path[0] != '/' && add(base, &n, out, cap))
        return -1;
    if (add(path, &n, out, cap))
        return -1;
    if (n == 0)
        out[n++] = '/';
    out[n] = 0;
    return (int)n;
}

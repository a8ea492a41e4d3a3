/* libiez's own file I/O, as raw system calls: its own work can never re-enter its wrappers
 * (or another preloaded library's), and it works before the real symbols are resolved. */
#ifndef IEZ_SYSIO_H
#define IEZ_SYSIO_H

#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

int iez_sys_openat(int dirfd, const char *path, int flags, mode_t mode);
int iez_sys_close(int fd);
ssize_t iez_sys_read(int fd, void *buf, size_t n);
ssize_t iez_sys_write(int fd, const void *buf, size_t n);
ssize_t iez_sys_pread(int fd, void *buf, size_t n, off_t off);
off_t iez_sys_lseek(int fd, off_t off, int whence);
int iez_sys_fstat(int fd, struct stat *st);

/* Map [off, off + len) of fd shared and writable, its blocks allocated first (fallocate, else
 * zeros written), so that storing into the mapping can never fault for space: NULL on failure. */
char *iez_map_reserved(int fd, off_t off, size_t len);

/* Write all of buf (retrying short writes and EINTR); 0 or -1. */
int iez_write_all(int fd, const void *buf, size_t n);
/* Read a whole regular file into a malloc'd, NUL-terminated buffer; 0, or -errno. */
int iez_read_file(const char *path, char **buf, size_t *len);

#endif

/* libiez's own file I/O, as raw system calls: its own work can never re-enter its wrappers
 * (or another preloaded library's), and it works before the real symbols are resolved. */
#ifndef IEZ_SYSIO_H
#define IEZ_SYSIO_H

#include <limits.h>
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
/* n zeroed bytes for free(); from 2 MiB on, 2 MiB-aligned and asked to be huge pages: a table
 * looked up at random (the plan's) then costs a lookup one TLB miss of a short page walk, not
 * one of a 4 KiB page each line (a long walk in a virtual machine). NULL: no memory. */
void *iez_alloc_table(size_t n);
/* Read a whole regular file of at most max bytes into a NUL-terminated buffer for free()
 * (a large file in huge pages, as iez_alloc_table's): 0, or -errno (-EINVAL: not a regular file,
 * -EFBIG: larger than max). A FIFO or device never blocks the caller: it is opened
 * non-blocking and refused by fstat. */
int iez_read_file(const char *path, size_t max, char **buf, size_t *len);

/* libiez's own files (trace shards, I/O event logs, the merged job trace) live in directories
 * that only this user (or root) can change, and are written only through a descriptor that was
 * checked to be the very file libiez created: a name swapped for a symbolic or hard link to
 * someone else's file is never opened for writing. */
struct iez_own {
    char path[PATH_MAX];
    dev_t dev;
    ino_t ino;
};

/* Make dir, and its missing parents, mode 0700, and check that it may hold libiez's files: a
 * directory owned by this user or root that group and others cannot write, unless it has the
 * sticky bit (as /tmp: others cannot remove or rename what is not theirs). 0, or -1 with the
 * reason in why ("WHAT DIR is ..."). */
int iez_trusted_dir(const char *what, const char *dir, char *why, size_t cap);
/* Create f->path exclusively, never through a symbolic link, and record which file it is: an
 * O_RDWR descriptor, or -1 (errno). */
int iez_own_create(struct iez_own *f, mode_t mode);
/* Open f again (O_RDWR, not following a symbolic link): a descriptor of that same file, checked
 * by fstat, or -1 (errno ESTALE when the name now holds another file). */
int iez_own_open(const struct iez_own *f);
/* Cut f at size, through iez_own_open: 0 or -1. */
int iez_own_truncate(const struct iez_own *f, off_t size);
/* Read the first n bytes of f, through iez_own_open, into a malloc'd buffer: 0 or -1. */
int iez_own_read(const struct iez_own *f, size_t n, char **out);
/* Remove f's name if it still names f: 0 or -1. */
int iez_own_unlink(const struct iez_own *f);

#endif

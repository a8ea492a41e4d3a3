#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

#include "module.h"
#include "state.h"
#include "sysio.h"

static int said[IEZ_LOG_NKINDS];

static void vlog(const char *fmt, va_list ap)
{
    char line[1024];
    int n = snprintf(line, sizeof line, "libiez[%d]: ", (int)getpid());
    int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m >= sizeof line - (size_t)n - 1 ? sizeof line - (size_t)n - 2 : (size_t)m);
    line[len++] = '\n';
    int saved = errno;
    if (iez_cfg.log[0] == '-' && !iez_cfg.log[1]) {
        iez_write_all(2, line, len);
    } else {
        /* appended by name: never through a symbolic link, nor to a file another user could have
         * linked there; a FIFO without a reader cannot block */
        int fd = iez_sys_openat(AT_FDCWD, iez_cfg.log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY,
                                0644);
        struct stat st;
        if (fd >= 0 && iez_sys_fstat(fd, &st) == 0 &&
            (S_ISREG(st.st_mode) ? st.st_uid == geteuid() && st.st_nlink == 1 : S_ISCHR(st.st_mode) || S_ISFIFO(st.st_mode)))
            iez_write_all(fd, line, len);
        if (fd >= 0)
            iez_sys_close(fd);
    }
    errno = saved;
}

void iez_log(const char *fmt, ...)
{
    if (!iez_cfg.log[0])
        return;
    va_list ap;
    va_start(ap, fmt);
    vlog(fmt, ap);
    va_end(ap);
}

void iez_log_once(enum iez_log_kind kind, const char *fmt, ...)
{
    if (!iez_cfg.log[0] || __atomic_exchange_n(&said[kind], 1, __ATOMIC_RELAXED))
        return;
    va_list ap;
    va_start(ap, fmt);
    vlog(fmt, ap);
    va_end(ap);
}

/* A fork child is a new process: it reports its own failures once again. */
static void log_fork_child(void)
{
    for (int i = 0; i < IEZ_LOG_NKINDS; i++)
        said[i] = 0;
}

const struct iez_module iez_log_module = {.name = "log", .fork_child = log_fork_child};

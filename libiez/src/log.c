#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

#include "core.h"
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
        int fd = iez_sys_openat(AT_FDCWD, iez_cfg.log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
        if (fd >= 0) {
            iez_write_all(fd, line, len);
            iez_sys_close(fd);
        }
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

void iez_log_forget(void)
{
    for (int i = 0; i < IEZ_LOG_NKINDS; i++)
        said[i] = 0;
}

/* Diagnostics (IEZ_LOG): silent by default; each kind of failure is reported once per process. */
#ifndef IEZ_LOG_H
#define IEZ_LOG_H

enum iez_log_kind {
    IEZ_LOG_CONFIG, IEZ_LOG_PLAN, IEZ_LOG_MDS, IEZ_LOG_SETSTRIPE, IEZ_LOG_XATTR, IEZ_LOG_TRACE,
    IEZ_LOG_PATH, IEZ_LOG_CREATE, IEZ_LOG_ACCESS, IEZ_LOG_ACCESS_DOWN, IEZ_LOG_COLLREAD, IEZ_LOG_NKINDS
};

void iez_log_once(enum iez_log_kind kind, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void iez_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif

/* The I/O event log (IEZ_IOLOG): one line per read and write on the emulated cluster, the
 * input of LIOPProf's emulated RPC logs (docs/liopprof.md, "I/O event logs"; reader:
 * src/iez/profile/ioevents.py). Each thread appends to its own file, mapped as the trace
 * shards are, so logging costs a formatted line and a copy, and nothing is lost on a kill. */
#ifndef IEZ_IOLOG_H
#define IEZ_IOLOG_H

#include <stddef.h>
#include <stdint.h>

#include "state.h"

extern int iez_iolog_on;             /* IEZ_IOLOG is set and tracing is on */

/* When an I/O call starts: only read the clock if the event log is on. */
static inline uint64_t iez_io_t0(void) { return IEZ_UNLIKELY(iez_iolog_on) ? iez_now_ns() : 0; }

/* One event: a read (write = 0) or write of len bytes at off of the file path, started at t0. */
void iez_iolog_event(int write, uint64_t t0, uint64_t off, uint64_t len, const char *path, size_t plen);
/* The rank or run changed (MPI_Init): the NID and job id of later events follow. */
void iez_iolog_ident_changed(void);

#endif

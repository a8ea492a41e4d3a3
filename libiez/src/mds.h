/* The emulated MDS's line protocol on DIR/run/mds.sock (docs/emulated.md). */
#ifndef IEZ_MDS_H
#define IEZ_MDS_H

#include <stddef.h>

/* How long a create waits for the emulated MDS. A Lustre client's create waits for its MDS far
 * longer (obd_timeout, 100 s by default), and on a loaded node (dozens of ranks creating at once
 * on 2 cores) the emulated MDS can take over 0.5 s; but a hung MDS must not stall every create:
 * after one timeout the process waits only IEZ_MDS_RETRY_MS until the MDS answers again. */
#define IEZ_MDS_TIMEOUT_MS 5000
#define IEZ_MDS_RETRY_MS 500

/* The longest answer read. */
#define IEZ_MDS_REPLY_MAX 65536

/* ALLOC: the layout the MDS of the cluster whose run directory is rundir (DIR/run) gives the
 * new file abs for the request spec ("": the default). 0 with the resolved layout in *reply
 * (plan grammar); with the reason in why, -1 when the MDS refused the request, -2 when it could
 * not be asked or did not answer (no descriptor, no socket, a timeout). *reply is the caller's
 * buffer of cap bytes; an answer that does not fit is read into one from malloc, of
 * IEZ_MDS_REPLY_MAX bytes, which replaces *reply (the caller frees it once *reply is not its
 * own), so that a create's usual short answer costs no allocation. Never waits longer than
 * IEZ_MDS_TIMEOUT_MS. */
int iez_mds_alloc(const char *rundir, const char *abs, const char *spec, size_t speclen, char **reply, size_t cap,
                  char *why, size_t whylen);

#endif

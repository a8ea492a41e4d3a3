/* LIOPProf: a streaming parser of Lustre debug logs for rpctrace lines (docs/liopprof.md).
 *
 * Reads the text `lctl debug_kernel` / `lctl debug_file` write, header
 *   "%08x:%08x:%u.%u%s:%u.%06llu:%u:%u:%u:(%s:%u:%s()) %s"
 * and the server-side rpctrace messages of ptlrpc_server_handle_request()
 * (references: l-fmt-rpctrace):
 *   2.5-2.12  "Handling RPC pname:cluuid+ref:pid:xid:nid:opc %s:%s+%d:%d:x%llu:%s:%d"
 *   2.13+     "Handling RPC req@%p pname:cluuid+ref:pid:xid:nid:opc:job %s:%s+%d:%d:x%llu:%s:%d:%s"
 *   "Handled RPC ..." adds " Request processed in %ldus (%ldus total) trans %llu rc %d/%d"
 *   (2.5-2.10 spell it "procesed").
 * Strings (thread, client UUID, NID, job id) are interned: a record holds ids, and
 * lp_string() gives the text. Memory is bounded by the number of distinct strings.
 */
#ifndef LIOPPROF_RPCTRACE_H
#define LIOPPROF_RPCTRACE_H

#include <stddef.h>
#include <stdint.h>

enum { LP_HANDLING = 1, LP_HANDLED = 2 };
enum { LP_STYLE_OLD = 0, LP_STYLE_REQ = 1 }; /* <= 2.12, 2.13+ (req@ and job) */
enum { LP_LINES, LP_RPC, LP_OTHER, LP_MALFORMED, LP_NCOUNTS };
#define LP_MAX_BAD 16

typedef struct lp_rec {
    int64_t t_us;       /* time of the line, microseconds since the epoch */
    uint64_t xid;
    uint64_t transno;
    uint64_t line;      /* 1-based line number in the stream */
    int64_t proc_us;    /* Handled: time in the handler; -1 if absent */
    int64_t total_us;   /* Handled: time since arrival (with queueing); -1 if absent */
    uint32_t pname;     /* service thread name (string id) */
    uint32_t uuid;      /* client UUID */
    uint32_t nid;       /* client "lnetpid-nid" */
    uint32_t job;       /* job id, 0 = none */
    int32_t cpu;
    int32_t thread;     /* kernel pid of the service thread */
    int32_t client_pid; /* the request's pid field */
    int32_t ref;        /* export refcount */
    int32_t opc;
    int32_t rc;
    int32_t status;
    uint8_t kind;       /* LP_HANDLING or LP_HANDLED */
    uint8_t style;      /* LP_STYLE_* */
    uint8_t pad[2];
} lp_rec;

typedef struct lp_parser lp_parser;

lp_parser *lp_new(void);
void lp_free(lp_parser *p);
size_t lp_rec_size(void);

/* Parse the complete lines of buf[0, len) (and the last, unterminated one if `final`),
 * writing at most `cap` records to `out`. Returns the bytes consumed; the caller keeps the
 * rest for the next call. *nout receives the number of records written. */
size_t lp_feed(lp_parser *p, const char *buf, size_t len, int final, lp_rec *out, size_t cap, size_t *nout);

void lp_counts(const lp_parser *p, uint64_t out[LP_NCOUNTS]);
/* The i-th kept malformed line (first LP_MAX_BAD): its number and up to buflen-1 bytes. */
int lp_bad(const lp_parser *p, int i, uint64_t *line, char *buf, size_t buflen);
uint32_t lp_nstrings(const lp_parser *p); /* ids are 1 .. n-1; 0 is the empty string */
const char *lp_string(const lp_parser *p, uint32_t id, size_t *len);

#endif

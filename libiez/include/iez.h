#ifndef IEZ_H
#define IEZ_H
/* Public API of libiez. */
const char *iez_version(void);

/* IO-Cop access control (docs/iocop.md). With IEZ_ACCESS=phase, iez_io_begin waits for the
 * controller's token for this I/O phase and iez_io_end gives it back; in other modes both do
 * nothing. In an MPI job under libiez-mpi every rank of MPI_COMM_WORLD calls both (rank 0
 * talks to the controller and broadcasts the grant). iez_io_begin returns 1 when the job holds
 * a token for the phase, 0 when it runs without one (another mode, or the controller did not
 * answer within IEZ_ACCESS_WAIT: logged to IEZ_LOG); iez_io_end returns 1 when it gave a token
 * back. Neither ever fails the application. */
int iez_io_begin(const char *phase);
int iez_io_end(void);
#endif

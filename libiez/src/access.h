/* IO-Cop's client side in libiez (docs/iocop.md, "Clients"): iez_io_begin / iez_io_end and the
 * transparent modes of IEZ_ACCESS, over the iocop/1 line protocol of iocop/iocop.c. */
#ifndef IEZ_ACCESS_H
#define IEZ_ACCESS_H

/* The level of the program a mode takes tokens at (token_client.py's LEVEL_OF_MODE). */
enum iez_access_level { IEZ_ACCESS_NONE = 0, IEZ_ACCESS_JOB, IEZ_ACCESS_FILE, IEZ_ACCESS_PHASE, IEZ_ACCESS_CALL };

extern int iez_access_level;     /* IEZ_ACCESS's level; NONE: off */
extern int iez_access_files;     /* opens and closes of the job's files are counted (file, POSIX coarse) */

/* Enter / leave a level; the mode's level takes the token at depth 0 -> 1 and gives it back at
 * 1 -> 0. enter returns 1 if the job holds a token for it, 0 if it runs without one. */
int iez_access_enter(int level, const char *phase);
int iez_access_exit(int level);
/* A descriptor of one of the job's files (emulated cluster or Lustre) was opened: file mode
 * counts it, POSIX coarse mode takes the job's token at the first. */
void iez_access_opened(int fd);
void iez_access_closed(int fd);
void iez_access_dup(int from, int to);

/* The local coordinator of an MPI job (libiez-mpi, after MPI_Init): rank 0 of MPI_COMM_WORLD
 * talks to the controller; bcast gives every rank rank 0's token, barrier ends a hold. NULL:
 * the process is its own coordinator. */
struct iez_access_coord {
    int rank;
    int (*bcast)(long *token);
    int (*barrier)(void);
};
void iez_access_set_coord(const struct iez_access_coord *coord);

#endif

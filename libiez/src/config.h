#ifndef IEZ_CONFIG_H
#define IEZ_CONFIG_H

#include "state.h"

/* Read the environment into c (see config.c for the variables). */
void iez_config_load(struct iez_config *c);
/* Make the default run id (this pid) the run id of every process this one starts. Only from
 * the library constructor: setenv is not thread-safe. */
int iez_config_export_run(void);

#endif

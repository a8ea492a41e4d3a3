#ifndef IEZ_H
#define IEZ_H
/* Public API of libiez. */
const char *iez_version(void);
#endif

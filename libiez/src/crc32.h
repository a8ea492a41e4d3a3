/* zlib's CRC-32 (Python's zlib.crc32), which every CRC of the trace formats is. */
#ifndef IEZ_CRC32_H
#define IEZ_CRC32_H

#include <stddef.h>
#include <stdint.h>

/* crc of buf's n bytes continued from crc (0 to start) */
uint32_t iez_crc32(uint32_t crc, const void *buf, size_t n);
/* The same by tables, the way of CPUs without PCLMULQDQ (iez-probe holds both against zlib). */
uint32_t iez_crc32_tables(uint32_t crc, const void *buf, size_t n);

#endif

/* zlib's CRC-32 (Python's zlib.crc32), which every CRC of the trace formats is. */
#include "crc32.h"
#include "hot.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "words are read little-endian");

/* A record's CRC is taken at each traced open, of its 100-odd bytes. A table
 * of CRCs costs little warm, but an open runs cold (the process did other work in between) and
 * every other lookup of a table missed the cache: on x86-64 with PCLMULQDQ the CRC takes no
 * table, 16 bytes a step folded (`crc_fold16`), the last 4-15 bytes four at a time by two
 * carry-less multiplications each (Barrett reduction with zlib's reflected polynomial:
 * P' = 0x1DB710641, mu' = floor(x^64 / P) = 0x1F7011641, as the Linux kernel's crc32-pclmul). Elsewhere: eight bytes a step by tables ("slicing-by-8"),
 * t[k][b] the CRC of byte b followed by k zero bytes. */
static uint32_t crc_table[8][256];
static int crc_how, tables_ready; /* how: 0 not yet known, 1 tables, 2 PCLMULQDQ */

/* Decided, and the tables made (tables: whatever the CPU), at the first use (a constructor
 * could run after the library's own constructor has already written a shard); racing first
 * uses store the same values. */
static int crc_init(int tables)
{
    int how = __atomic_load_n(&crc_how, __ATOMIC_ACQUIRE);
    if (!how) {
        how = 1;
#if defined(__x86_64__)
        __builtin_cpu_init();
        if (__builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1"))
            how = 2;
#endif
        __atomic_store_n(&crc_how, how, __ATOMIC_RELEASE);
    }
    if (!tables || __atomic_load_n(&tables_ready, __ATOMIC_ACQUIRE))
        return how;
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1u)));
        __atomic_store_n(&crc_table[0][i], c, __ATOMIC_RELAXED);
    }
    for (int k = 1; k < 8; k++)
        for (uint32_t i = 0; i < 256; i++) {
            uint32_t c = __atomic_load_n(&crc_table[k - 1][i], __ATOMIC_RELAXED);
            __atomic_store_n(&crc_table[k][i], (c >> 8) ^ __atomic_load_n(&crc_table[0][c & 0xFF], __ATOMIC_RELAXED),
                             __ATOMIC_RELAXED);
        }
    __atomic_store_n(&tables_ready, 1, __ATOMIC_RELEASE);
    return how;
}

#if defined(__x86_64__)

/* The CRC register after 32 zero bits shifted through it from t: t * x^32 mod P (reflected). */
__attribute__((target("pclmul,sse4.1"))) static inline uint32_t crc_shift32(uint32_t t)
{
    const __m128i k = _mm_set_epi64x(0x1F7011641ll, 0x1DB710641ll); /* mu', P' */
    __m128i a = _mm_clmulepi64_si128(_mm_cvtsi32_si128((int)t), k, 0x10);
    a = _mm_clmulepi64_si128(_mm_and_si128(a, _mm_set_epi64x(0, 0xFFFFFFFF)), k, 0x00);
    return (uint32_t)_mm_extract_epi32(a, 1);
}

/* 16 bytes a step: the 128 bits folded so far are carried 128 bits on (two multiplications by
 * x^(128+64) and x^128 mod P, independent of each other) onto the next 16 bytes; then folded to
 * 64 bits and Barrett-reduced to the register. Intel's "Fast CRC Computation for Generic
 * Polynomials Using PCLMULQDQ" (reflected), with the constants of zlib's own SIMD code (Chromium's
 * crc32_sse42_simd_, the Linux kernel's crc32-pclmul). A record's 150 bytes take 9 steps of a
 * few cycles, where four bytes a step made a chain of 38 steps of two multiplications each. */
IEZ_HOT __attribute__((target("pclmul,sse4.1"))) static uint32_t crc_fold16(uint32_t crc, const unsigned char *p, size_t n)
{
    const __m128i k3k4 = _mm_set_epi64x(0x00ccaa009ell, 0x01751997d0ll);
    const __m128i k5 = _mm_set_epi64x(0, 0x0163cd6124ll);
    const __m128i poly = _mm_set_epi64x(0x01f7011641ll, 0x01db710641ll);
    const __m128i low32 = _mm_setr_epi32(-1, 0, -1, 0);
    __m128i x1 = _mm_xor_si128(_mm_loadu_si128((const __m128i *)p), _mm_cvtsi32_si128((int)crc));
    for (p += 16, n -= 16; n >= 16; p += 16, n -= 16) {
        __m128i lo = _mm_clmulepi64_si128(x1, k3k4, 0x00);
        x1 = _mm_clmulepi64_si128(x1, k3k4, 0x11);
        x1 = _mm_xor_si128(_mm_xor_si128(x1, _mm_loadu_si128((const __m128i *)p)), lo);
    }
    __m128i x2 = _mm_clmulepi64_si128(x1, k3k4, 0x10); /* 128 bits to 64 */
    x1 = _mm_xor_si128(_mm_srli_si128(x1, 8), x2);
    x2 = _mm_srli_si128(x1, 4);
    x1 = _mm_xor_si128(_mm_clmulepi64_si128(_mm_and_si128(x1, low32), k5, 0x00), x2);
    x2 = _mm_clmulepi64_si128(_mm_and_si128(x1, low32), poly, 0x10); /* Barrett, to 32 */
    x2 = _mm_clmulepi64_si128(_mm_and_si128(x2, low32), poly, 0x00);
    return (uint32_t)_mm_extract_epi32(_mm_xor_si128(x1, x2), 1);
}

IEZ_HOT __attribute__((target("pclmul,sse4.1"))) static uint32_t crc_clmul(uint32_t crc, const unsigned char *p, size_t n)
{
    if (n >= 16) {
        crc = crc_fold16(crc, p, n);
        p += n & ~(size_t)15;
        n &= 15;
    }
    for (; n >= 4; n -= 4, p += 4) {
        uint32_t w;
        __builtin_memcpy(&w, p, 4);
        crc = crc_shift32(crc ^ w);
    }
    if (n) { /* 1-3 bytes: the register's low n bytes go through, shifted to the top */
        uint32_t w = 0;
        for (size_t i = 0; i < n; i++)
            w |= (uint32_t)p[i] << (8 * i);
        crc = crc_shift32((crc ^ w) << (32 - 8 * n)) ^ (crc >> (8 * n));
    }
    return crc;
}
#endif

static uint32_t crc_tables(uint32_t crc, const unsigned char *p, size_t n)
{
    const uint32_t(*t)[256] = crc_table;
    for (; n >= 8; n -= 8, p += 8) {
        uint32_t a, b;
        __builtin_memcpy(&a, p, 4);
        __builtin_memcpy(&b, p + 4, 4);
        a ^= crc;
        crc = t[7][a & 0xFF] ^ t[6][(a >> 8) & 0xFF] ^ t[5][(a >> 16) & 0xFF] ^ t[4][a >> 24] ^ t[3][b & 0xFF] ^
              t[2][(b >> 8) & 0xFF] ^ t[1][(b >> 16) & 0xFF] ^ t[0][b >> 24];
    }
    while (n--)
        crc = t[0][(crc ^ *p++) & 0xFF] ^ (crc >> 8);
    return crc;
}

IEZ_HOT uint32_t iez_crc32(uint32_t crc, const void *buf, size_t n)
{
#if defined(__x86_64__)
    if (crc_init(0) == 2)
        return ~crc_clmul(~crc, buf, n);
#endif
    crc_init(1);
    return ~crc_tables(~crc, buf, n);
}

uint32_t iez_crc32_tables(uint32_t crc, const void *buf, size_t n)
{
    crc_init(1);
    return ~crc_tables(~crc, buf, n);
}


/* A fast 64-bit hash of a byte string (8 bytes per step, murmur3's finaliser). */
#ifndef IEZ_HASH_H
#define IEZ_HASH_H

#include <stddef.h>
#include <stdint.h>

static inline uint64_t iez_hash(const void *data, size_t n, uint64_t seed)
{
    const char *p = data;
    uint64_t h = seed ^ 0x9E3779B97F4A7C15ull ^ (n * 0xC2B2AE3D27D4EB4Full);
    while (n >= 8) {
        uint64_t k;
        __builtin_memcpy(&k, p, 8); /* a load, also where libiez builds with -fno-builtin */
        h = (h ^ (k * 0x87C37B91114253D5ull)) * 0x4CF5AD432745937Full;
        h ^= h >> 29;
        p += 8;
        n -= 8;
    }
    uint64_t k = 0;
    for (size_t i = 0; i < n; i++) /* the 0-7 bytes left, without a call to memcpy */
        k |= (uint64_t)(unsigned char)p[i] << (8 * i);
    h = (h ^ (k * 0x87C37B91114253D5ull)) * 0x4CF5AD432745937Full;
    h ^= h >> 33;
    h *= 0xFF51AFD7ED558CCDull;
    h ^= h >> 33;
    return h;
}

#endif

/* core/util/hash_internal.h: FNV-1a, the core's one string and byte hash (header-only): names
 * seed parameter initialisation (engine.c), checkpoints carry hashes of their contents
 * (checkpoint.c). */
#ifndef TB_CORE_HASH_INTERNAL_H
#define TB_CORE_HASH_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#define TB_FNV1A_INIT 0xcbf29ce484222325ull

/* FNV-1a, 64 bits, of n bytes, continuing from h (TB_FNV1A_INIT to start). */
static inline uint64_t tb_fnv1a(const void *data, size_t n, uint64_t h)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

#endif

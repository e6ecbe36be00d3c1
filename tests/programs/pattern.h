/* SPDX-License-Identifier: BSD-2-Clause */
/* Per-block fill patterns for the allocator tests.
 *
 * A block's content is a function of a 64-bit seed (unique per block: who
 * allocated it and its sequence number) and of the byte's offset, so a block
 * handed out twice, overwritten by a neighbour or copied to the wrong offset
 * by realloc shows up as a mismatch.  The pattern is position based: after a
 * realloc only the new tail needs filling.  Header only, shared by the
 * Check suites and tests/programs/prefork.c, with the clock and random stream their
 * stress loops use.
 */
#ifndef TESTS_PATTERN_H
#define TESTS_PATTERN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

/* splitmix64's finaliser: neighbouring seeds give unrelated words. */
static inline uint64_t pattern_mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15u;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9u;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebu;
    return x ^ (x >> 31);
}

/* The 8 bytes at offset i (a multiple of 8) of a block with hash h. */
static inline uint64_t pattern_word(uint64_t h, size_t i)
{
    uint8_t lane = (uint8_t)((i >> 3) ^ (i >> 11));
    return h ^ (0x0101010101010101u * lane);
}

static inline uint8_t pattern_byte(uint64_t h, size_t i)
{
    return (uint8_t)(pattern_word(h, i & ~(size_t)7) >> ((i & 7) * 8));
}

/* Write the pattern of `seed` into bytes [from, to) of p. */
static inline void pattern_fill(void *p, size_t from, size_t to, uint64_t seed)
{
    uint8_t *b = p;
    uint64_t h = pattern_mix(seed);
    size_t i = from;
    for (; i < to && (i & 7) != 0; i++)
        b[i] = pattern_byte(h, i);
    for (; i + 8 <= to; i += 8) {
        uint64_t w = pattern_word(h, i);
        memcpy(b + i, &w, 8);
    }
    for (; i < to; i++)
        b[i] = pattern_byte(h, i);
}

/* Offset of the first byte in [0, n) that does not match the pattern of
 * `seed`, or SIZE_MAX when all match. */
static inline size_t pattern_find_bad(const void *p, size_t n, uint64_t seed)
{
    const uint8_t *b = p;
    uint64_t h = pattern_mix(seed);
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, b + i, 8);
        if (w != pattern_word(h, i))
            break;
    }
    for (; i < n; i++)
        if (b[i] != pattern_byte(h, i))
            return i;
    return SIZE_MAX;
}

/* True when all of [0, n) of p still holds the pattern of `seed`. */
static inline bool pattern_intact(const void *p, size_t n, uint64_t seed)
{
    return pattern_find_bad(p, n, seed) == SIZE_MAX;
}

/* Monotonic clock in nanoseconds, for the time bounds of stress loops. */
static inline int64_t pattern_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* xorshift64: a cheap, reproducible stream of sizes and choices. */
static inline uint64_t pattern_rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

#endif /* TESTS_PATTERN_H */

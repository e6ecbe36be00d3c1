/* SPDX-License-Identifier: BSD-2-Clause */
/* Unit tests of the per-request region (src/region.c), a program of its
 * own: it compiles region.c without the rest of the server, and it wraps
 * malloc and free to count what the region holds from the process
 * allocator.  Counts are compared only across stretches of region calls
 * with no Check call between them, so Check's own allocations never enter
 * a comparison.  tests/poold/region-valgrind.sh runs it under valgrind, told
 * to leave this malloc in place. */
#include "config.h"

#include <errno.h>
#include <malloc.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <check.h>

#include "region.h"

/* ======================================================================== */
/* Counting malloc                                                           */
/* ======================================================================== */

extern void *__libc_malloc(size_t n);
extern void __libc_free(void *p);

static long live;           /* malloc'd and not yet freed, process-wide */
static long mallocs;        /* successful mallocs, process-wide */
static long fail_after = -1;    /* >= 0: that many more mallocs succeed */

void *malloc(size_t n)
{
    void *p;

    if (fail_after == 0) {
        errno = ENOMEM;
        return NULL;
    }
    if (fail_after > 0)
        fail_after--;
    p = __libc_malloc(n);
    if (p != NULL) {
        live++;
        mallocs++;
    }
    return p;
}

void free(void *p)
{
    if (p != NULL)
        live--;
    __libc_free(p);
}

/* ======================================================================== */
/* Helpers                                                                   */
/* ======================================================================== */

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static bool aligned(const void *p)
{
    return ((uintptr_t)p & (PD_REGION_ALIGN - 1)) == 0;
}

/* ======================================================================== */
/* Tests                                                                     */
/* ======================================================================== */

/* Every size from 0 to well past a block, in regions of three block sizes:
 * each pointer aligned, each piece writable in full and disjoint from every
 * other (each is filled with its own byte and checked after all were
 * made). */
START_TEST(test_alignment)
{
    static const size_t blocks[] = {PD_REGION_BLOCK_MIN, 0, 65536};
    enum { MAXN = 9000 };
    static unsigned char *ptrs[MAXN + 1];
    pd_region_t *r = pd_region_create(blocks[_i]);
    unsigned misaligned = 0, nulls = 0, clobbered = 0;

    ck_assert_ptr_nonnull(r);
    for (size_t n = 0; n <= MAXN; n++) {
        ptrs[n] = pd_region_alloc(r, n);
        if (ptrs[n] == NULL) {
            nulls++;
            continue;
        }
        if (!aligned(ptrs[n]))
            misaligned++;
        memset(ptrs[n], (int)(n & 0xff), n);
    }
    for (size_t n = 0; n <= MAXN; n++)
        for (size_t i = 0; ptrs[n] != NULL && i < n; i++)
            if (ptrs[n][i] != (unsigned char)(n & 0xff)) {
                clobbered++;
                break;
            }
    ck_assert_uint_eq(nulls, 0);
    ck_assert_uint_eq(misaligned, 0);
    ck_assert_uint_eq(clobbered, 0);

    /* Random sizes after a reset, as a request would ask. */
    pd_region_reset(r);
    for (int k = 0; k < 20000; k++) {
        size_t n = (size_t)(next_rand() % 700);
        void *p = pd_region_alloc(r, n);

        if (p == NULL)
            nulls++;
        else if (!aligned(p))
            misaligned++;
    }
    ck_assert_uint_eq(nulls, 0);
    ck_assert_uint_eq(misaligned, 0);
    pd_region_destroy(r);
}
END_TEST

/* n == 0 gives distinct, aligned, non-NULL pointers, also across blocks. */
START_TEST(test_zero)
{
    pd_region_t *r = pd_region_create(PD_REGION_BLOCK_MIN);
    static char *p[1000];
    unsigned bad = 0;

    ck_assert_ptr_nonnull(r);
    for (int i = 0; i < 1000; i++) {
        p[i] = pd_region_alloc(r, 0);
        if (p[i] == NULL || !aligned(p[i]) || (i > 0 && p[i] == p[i - 1]))
            bad++;
    }
    ck_assert_uint_eq(bad, 0);
    /* More than one block's worth: the region had to grow for them. */
    ck_assert_uint_gt(pd_region_held(r), PD_REGION_BLOCK_MIN);
    pd_region_destroy(r);
}
END_TEST

/* Sizes that cannot be had fail as malloc does, take nothing from malloc,
 * and leave the region usable. */
START_TEST(test_overflow)
{
    static const size_t sizes[] = {
        SIZE_MAX, SIZE_MAX - 8, SIZE_MAX - 15, SIZE_MAX - 16, SIZE_MAX - 4096,
        SIZE_MAX / 2, (size_t)1 << 50,
    };
    pd_region_t *r = pd_region_create(0);
    long before;
    size_t held;
    void *p;

    ck_assert_ptr_nonnull(r);
    held = pd_region_held(r);
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        errno = 0;
        before = live;
        p = pd_region_alloc(r, sizes[i]);
        ck_assert_msg(p == NULL, "size %zu gave %p", sizes[i], p);
        ck_assert_int_eq(errno, ENOMEM);
        ck_assert_int_eq(live, before);
        ck_assert_uint_eq(pd_region_held(r), held);
    }
    p = pd_region_alloc(r, 100);
    ck_assert_ptr_nonnull(p);
    memset(p, 1, 100);
    pd_region_destroy(r);

    errno = 0;
    ck_assert_ptr_null(pd_region_create(SIZE_MAX));
    ck_assert_int_eq(errno, ENOMEM);
    errno = 0;
    ck_assert_ptr_null(pd_region_create(SIZE_MAX / 2));
    ck_assert_int_eq(errno, ENOMEM);
}
END_TEST

/* Block sizes: 0 is the default, small ones are raised to the minimum,
 * odd ones rounded up to 16. */
START_TEST(test_block_size)
{
    static const size_t asked[] = {0, 1, PD_REGION_BLOCK_MIN - 1, 1000, 8192};
    static const size_t got[] = {PD_REGION_BLOCK_DEFAULT, PD_REGION_BLOCK_MIN,
                                 PD_REGION_BLOCK_MIN, 1008, 8192};

    for (size_t i = 0; i < sizeof(asked) / sizeof(asked[0]); i++) {
        pd_region_t *r = pd_region_create(asked[i]);

        ck_assert_ptr_nonnull(r);
        ck_assert_uint_eq(pd_region_held(r), got[i]);
        pd_region_destroy(r);
    }
    pd_region_destroy(NULL);
}
END_TEST

/* A request larger than a block's usable size gets a chunk of its own; the
 * chunks go back at reset while the blocks are kept, everything goes at
 * destroy. */
START_TEST(test_large)
{
    const long base = live;
    pd_region_t *r = pd_region_create(4096);
    long after_create, after_small, after_large, after_reset, after_destroy;
    size_t held_small, held_large, held_reset;
    char *small[3], *big[3];

    after_create = live;
    /* 4096 less the block header fits a fresh block: not a large chunk. */
    small[0] = pd_region_alloc(r, 3000);
    small[1] = pd_region_alloc(r, 4096 - 16);
    small[2] = pd_region_alloc(r, 16);
    after_small = live;
    held_small = pd_region_held(r);
    big[0] = pd_region_alloc(r, 4096 - 15);
    big[1] = pd_region_alloc(r, 100000);
    big[2] = pd_region_alloc(r, 8u << 20);
    after_large = live;
    held_large = pd_region_held(r);
    if (big[2] != NULL)
        memset(big[2], 0xaa, 8u << 20);
    pd_region_reset(r);
    after_reset = live;
    held_reset = pd_region_held(r);
    pd_region_destroy(r);
    after_destroy = live;

    ck_assert_ptr_nonnull(r);
    ck_assert_int_eq(after_create, base + 1);
    for (int i = 0; i < 3; i++) {
        ck_assert_ptr_nonnull(small[i]);
        ck_assert_ptr_nonnull(big[i]);
        ck_assert(aligned(small[i]) && aligned(big[i]));
    }
    /* 3000 goes in the first block, 4080 fills a second, and 16 takes a
     * third: the region bumps only in its newest block. */
    ck_assert_int_eq(after_small, base + 3);
    ck_assert_uint_eq(held_small, 3 * 4096);
    ck_assert_int_eq(after_large, after_small + 3);
    ck_assert_uint_ge(held_large, held_small + (4096 - 15) + 100000 + (8u << 20));
    ck_assert_int_eq(after_reset, base + 3);
    ck_assert_uint_eq(held_reset, 3 * 4096);
    ck_assert_int_eq(after_destroy, base);
}
END_TEST

static int order[16];
static int norder;
static pd_region_t *cleanup_region;

static void record(void *arg)
{
    order[norder++] = (int)(intptr_t)arg;
}

/* A cleanup that registers another: that one runs in the same reset. */
static void record_and_add(void *arg)
{
    record(arg);
    pd_region_cleanup(cleanup_region, record, (void *)(intptr_t)99);
}

/* Cleanups run newest first, once, at reset and at destroy. */
START_TEST(test_cleanup_order)
{
    pd_region_t *r = pd_region_create(PD_REGION_BLOCK_MIN);

    ck_assert_ptr_nonnull(r);
    cleanup_region = r;
    norder = 0;
    for (int i = 0; i < 5; i++) {
        ck_assert_int_eq(pd_region_cleanup(r, record, (void *)(intptr_t)i), 0);
        /* Allocations between the records: they span several blocks. */
        ck_assert_ptr_nonnull(pd_region_alloc(r, 200));
    }
    pd_region_reset(r);
    ck_assert_int_eq(norder, 5);
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(order[i], 4 - i);

    pd_region_reset(r);
    ck_assert_int_eq(norder, 5);    /* none ran twice */

    ck_assert_int_eq(pd_region_cleanup(r, record, (void *)(intptr_t)7), 0);
    ck_assert_int_eq(pd_region_cleanup(r, record_and_add, (void *)(intptr_t)8), 0);
    pd_region_destroy(r);
    ck_assert_int_eq(norder, 8);
    ck_assert_int_eq(order[5], 8);
    ck_assert_int_eq(order[6], 99);
    ck_assert_int_eq(order[7], 7);
}
END_TEST

/* Out of memory on the way: a new block, a large chunk, a cleanup record
 * or the region itself; each fails with ENOMEM and leaves what was there. */
START_TEST(test_enomem)
{
    const long base = live;
    pd_region_t *r = pd_region_create(PD_REGION_BLOCK_MIN);
    unsigned pieces = 0;
    void *block = NULL, *large, *after;
    int cleanup_rc, cleanup_errno, block_errno, large_errno, none_errno;
    pd_region_t *none;
    long at_end;

    norder = 0;
    /* With malloc failing, pieces come from the first block until it is
     * full; the one that needs a new block fails. */
    fail_after = 0;
    for (; pieces < PD_REGION_BLOCK_MIN / PD_REGION_ALIGN + 1; pieces++) {
        errno = 0;
        if ((block = pd_region_alloc(r, PD_REGION_ALIGN)) == NULL)
            break;
    }
    block_errno = errno;
    errno = 0;
    large = pd_region_alloc(r, 100000);
    large_errno = errno;
    errno = 0;
    cleanup_rc = pd_region_cleanup(r, record, (void *)(intptr_t)1);
    cleanup_errno = errno;
    errno = 0;
    none = pd_region_create(0);
    none_errno = errno;
    fail_after = -1;
    after = pd_region_alloc(r, 64);     /* malloc is back */
    pd_region_destroy(r);
    at_end = live;

    ck_assert_ptr_nonnull(r);
    ck_assert_uint_gt(pieces, 0);
    ck_assert_uint_lt(pieces, PD_REGION_BLOCK_MIN / PD_REGION_ALIGN);
    ck_assert_ptr_null(block);
    ck_assert_int_eq(block_errno, ENOMEM);
    ck_assert_ptr_null(large);
    ck_assert_int_eq(large_errno, ENOMEM);
    ck_assert_int_eq(cleanup_rc, -1);
    ck_assert_int_eq(cleanup_errno, ENOMEM);
    ck_assert_ptr_null(none);
    ck_assert_int_eq(none_errno, ENOMEM);
    ck_assert_ptr_nonnull(after);
    ck_assert_int_eq(norder, 0);    /* the failed cleanup never ran */
    ck_assert_int_eq(at_end, base);
}
END_TEST

/* A reset region starts over where a new one starts, and keeps no more
 * than PD_REGION_KEEP_BYTES of the blocks it grew to. */
START_TEST(test_reset)
{
    pd_region_t *r = pd_region_create(0);
    void *first, *again;

    ck_assert_ptr_nonnull(r);
    first = pd_region_alloc(r, 24);
    for (int i = 0; i < 100; i++)
        ck_assert_ptr_nonnull(pd_region_alloc(r, 1000));
    ck_assert_uint_gt(pd_region_held(r), 20 * 4096);
    pd_region_reset(r);
    ck_assert_uint_eq(pd_region_held(r), PD_REGION_KEEP_BYTES);
    again = pd_region_alloc(r, 24);
    ck_assert_ptr_eq(first, again);
    pd_region_destroy(r);
}
END_TEST

/* One request's shape: three allocations of 3000 bytes, each of which
 * needs a block of its own in a region of 4 KiB blocks.  The pointers are
 * written in full and returned in p. */
static bool three_blocks(pd_region_t *r, char *p[3])
{
    for (int i = 0; i < 3; i++) {
        if ((p[i] = pd_region_alloc(r, 3000)) == NULL)
            return false;
        memset(p[i], i + 1, 3000);
    }
    return true;
}

/* A request that needs three blocks, made 100,000 times: the first takes
 * its two extra blocks from malloc, every later one reuses them and
 * mallocs nothing, in the same places. */
START_TEST(test_keep_reuse)
{
    enum { REQUESTS = 100000 };
    const long base = live;
    pd_region_t *r = pd_region_create(4096);
    char *first[3], *p[3];
    long mallocs_first, mallocs_end, live_first;
    size_t held_first;
    unsigned failed = 0, moved = 0, not_flat = 0;

    if (r == NULL || !three_blocks(r, first))
        failed++;
    pd_region_reset(r);
    mallocs_first = mallocs;
    live_first = live;
    held_first = pd_region_held(r);
    for (int q = 1; q < REQUESTS; q++) {
        if (!three_blocks(r, p)) {
            failed++;
            break;
        }
        for (int i = 0; i < 3; i++)
            if (p[i] != first[i])
                moved++;
        pd_region_reset(r);
        if (pd_region_held(r) != held_first || live != live_first)
            not_flat++;
    }
    mallocs_end = mallocs;
    pd_region_destroy(r);

    ck_assert_uint_eq(failed, 0);
    ck_assert_int_eq(live_first, base + 3);
    ck_assert_uint_eq(held_first, 3 * 4096);
    ck_assert_int_eq(mallocs_end, mallocs_first);
    ck_assert_uint_eq(moved, 0);
    ck_assert_uint_eq(not_flat, 0);
    ck_assert_int_eq(live, base);
}
END_TEST

/* n pieces of 4000 bytes from a region of 4 KiB blocks: a block each. */
static unsigned fill_blocks(pd_region_t *r, unsigned n)
{
    unsigned got = 0;

    for (unsigned i = 0; i < n; i++) {
        char *p = pd_region_alloc(r, 4000);

        if (p != NULL) {
            p[0] = p[3999] = 0x3c;
            got++;
        }
    }
    return got;
}

/* A request that needs more blocks than the bound: the reset gives the
 * surplus back and keeps exactly the bound; the next such request mallocs
 * only the surplus again; a small request after it mallocs nothing and
 * leaves the bound in place.  pd_region_held() agrees with what malloc
 * handed out all along. */
START_TEST(test_keep_cap)
{
    enum { KEPT = PD_REGION_KEEP_BYTES / 4096, BIG = KEPT + 24 };
    const long base = live;
    pd_region_t *r = pd_region_create(4096);
    unsigned got1, got2, got3;
    long live_big, live_reset1, mallocs_reset1, mallocs_big2, live_reset2,
         mallocs_small, live_small;
    size_t held_big, held_reset1, held_reset2, held_small;

    got1 = r == NULL ? 0 : fill_blocks(r, BIG);
    live_big = live;
    held_big = pd_region_held(r);
    pd_region_reset(r);
    live_reset1 = live;
    held_reset1 = pd_region_held(r);
    mallocs_reset1 = mallocs;
    got2 = fill_blocks(r, BIG);
    mallocs_big2 = mallocs;
    pd_region_reset(r);
    live_reset2 = live;
    held_reset2 = pd_region_held(r);
    got3 = fill_blocks(r, 5);
    mallocs_small = mallocs;
    pd_region_reset(r);
    live_small = live;
    held_small = pd_region_held(r);
    pd_region_destroy(r);

    ck_assert_uint_eq(got1, BIG);
    ck_assert_uint_eq(got2, BIG);
    ck_assert_uint_eq(got3, 5);
    /* The first piece fits in the first block after the region's header. */
    ck_assert_int_eq(live_big, base + BIG);
    ck_assert_uint_eq(held_big, (size_t)BIG * 4096);
    ck_assert_int_eq(live_reset1, base + KEPT);
    ck_assert_uint_eq(held_reset1, PD_REGION_KEEP_BYTES);
    ck_assert_int_eq(mallocs_big2 - mallocs_reset1, BIG - KEPT);
    ck_assert_int_eq(live_reset2, base + KEPT);
    ck_assert_uint_eq(held_reset2, PD_REGION_KEEP_BYTES);
    ck_assert_int_eq(mallocs_small, mallocs_big2);
    ck_assert_int_eq(live_small, base + KEPT);
    ck_assert_uint_eq(held_small, PD_REGION_KEEP_BYTES);
    ck_assert_int_eq(live, base);
}
END_TEST

/* pd_region_set_keep(): a lower bound trims the kept blocks at the next
 * reset, not before; 0 keeps the first block only; a bound below one
 * block still keeps the first block of a region of large blocks. */
START_TEST(test_set_keep)
{
    const long base = live;
    pd_region_t *r = pd_region_create(4096);
    pd_region_t *big;
    long live_set, live_10k, live_zero, live_zero_again, mallocs_before,
         live_big;
    size_t held_10k, held_zero, held_big;
    unsigned got = 0;
    char *p, *q;

    /* The first piece goes in the first block: 8 pieces, 8 blocks. */
    got += r == NULL ? 0 : fill_blocks(r, 8);
    pd_region_reset(r);         /* keeps all 8 */
    pd_region_set_keep(r, 10000);
    live_set = live;            /* nothing freed by the setter itself */
    got += fill_blocks(r, 3);   /* in kept blocks: no malloc */
    pd_region_reset(r);
    live_10k = live;
    held_10k = pd_region_held(r);
    pd_region_set_keep(r, 0);
    got += fill_blocks(r, 4);
    pd_region_reset(r);
    live_zero = live;
    held_zero = pd_region_held(r);
    mallocs_before = mallocs;
    got += fill_blocks(r, 4);
    pd_region_reset(r);
    live_zero_again = live;
    mallocs_before = mallocs - mallocs_before;

    /* Two pieces of the bound need two blocks twice its size. */
    big = pd_region_create(2 * PD_REGION_KEEP_BYTES);
    p = big == NULL ? NULL : pd_region_alloc(big, PD_REGION_KEEP_BYTES);
    q = big == NULL ? NULL : pd_region_alloc(big, PD_REGION_KEEP_BYTES);
    if (p != NULL && q != NULL)
        p[0] = q[PD_REGION_KEEP_BYTES - 1] = 1;
    pd_region_reset(big);
    live_big = live;
    held_big = pd_region_held(big);
    pd_region_destroy(big);
    pd_region_destroy(r);

    ck_assert_uint_eq(got, 8 + 3 + 4 + 4);
    ck_assert_int_eq(live_set, base + 8);
    /* 10000 bytes hold two 4 KiB blocks, not three. */
    ck_assert_int_eq(live_10k, base + 2);
    ck_assert_uint_eq(held_10k, 2 * 4096);
    ck_assert_int_eq(live_zero, base + 1);
    ck_assert_uint_eq(held_zero, 4096);
    /* With nothing kept, each request takes its 3 extra blocks again. */
    ck_assert_int_eq(mallocs_before, 3);
    ck_assert_int_eq(live_zero_again, base + 1);
    ck_assert_ptr_nonnull(p);
    ck_assert_ptr_nonnull(q);
    /* The first block alone is over the bound: it stays, the second goes. */
    ck_assert_int_eq(live_big, base + 1 + 1);
    ck_assert_uint_eq(held_big, 2 * PD_REGION_KEEP_BYTES);
    ck_assert_int_eq(live, base);
}
END_TEST

/* A region reused for 100,000 requests of varying shape: after every reset
 * it holds blocks and nothing else, no more than the bound; once it has
 * seen its biggest request it holds the same blocks after every reset and
 * mallocs only the chunks too large for a block; and the process heap
 * stops growing after the first requests. */
START_TEST(test_flat)
{
    enum { REQUESTS = 100000, WARM = 1000 };
    const long base = live;
    pd_region_t *r = pd_region_create(0);
    unsigned not_flat = 0, nulls = 0, cleanups_run = 0;
    size_t peak_held = 0, held_at_warm = 0, arena_at_warm = 0, used_at_warm = 0;
    struct mallinfo2 mi;
    long live_at_warm = 0, mallocs_at_warm = 0, large_after_warm = 0, mallocs_end;

    ck_assert_ptr_nonnull(r);
    norder = 0;
    for (int q = 0; q < REQUESTS; q++) {
        unsigned nobj = 20 + (unsigned)(next_rand() % 100);

        for (unsigned k = 0; k < nobj; k++) {
            /* Mostly header-map sized pieces, now and then a large one. */
            size_t n = next_rand() % 64 == 0 ? 5000 + (size_t)(next_rand() % 20000)
                                             : (size_t)(next_rand() % 200);
            char *p = pd_region_alloc(r, n);

            if (q > WARM && n > 4096 - 16)
                large_after_warm++;
            if (p == NULL) {
                nulls++;
                continue;
            }
            if (n > 0)
                p[0] = p[n - 1] = 0x5a;     /* the ends are ours to write */
        }
        if (q % 16 == 0 && pd_region_cleanup(r, record, (void *)(intptr_t)q) != 0)
            nulls++;
        if (pd_region_held(r) > peak_held)
            peak_held = pd_region_held(r);
        pd_region_reset(r);
        if (norder > 0) {
            cleanups_run += (unsigned)norder;
            norder = 0;
        }
        /* Every live malloc of the region is one 4 KiB block. */
        if (pd_region_held(r) != 4096 * (size_t)(live - base) ||
            pd_region_held(r) > PD_REGION_KEEP_BYTES)
            not_flat++;
        if (q > WARM && (pd_region_held(r) != held_at_warm || live != live_at_warm))
            not_flat++;
        if (q == WARM) {
            mi = mallinfo2();
            arena_at_warm = mi.arena;
            used_at_warm = mi.uordblks;
            held_at_warm = pd_region_held(r);
            live_at_warm = live;
            mallocs_at_warm = mallocs;
        }
    }
    mallocs_end = mallocs;
    mi = mallinfo2();
    pd_region_destroy(r);

    ck_assert_uint_eq(nulls, 0);
    ck_assert_uint_eq(not_flat, 0);
    ck_assert_uint_eq(cleanups_run, REQUESTS / 16);
    /* It kept more than its first block, and took no block after. */
    ck_assert_uint_gt(held_at_warm, 4096);
    ck_assert_int_gt(large_after_warm, 0);
    ck_assert_int_eq(mallocs_end - mallocs_at_warm, large_after_warm);
    /* A request held some blocks and chunks, never runaway growth. */
    ck_assert_uint_gt(peak_held, held_at_warm);
    ck_assert_uint_lt(peak_held, 1u << 20);
    /* The same live objects as at request 1000: the same bytes in use, and
     * a heap that did not grow by more than fragmentation's noise. */
    ck_assert_uint_eq(mi.uordblks, used_at_warm);
    ck_assert_uint_le(mi.arena, arena_at_warm + (256u << 10));
    ck_assert_int_eq(live, base);
}
END_TEST

static Suite *make_region_suite(void)
{
    Suite *s = suite_create("region");
    TCase *tc = tcase_create("region");

    tcase_set_timeout(tc, 60);     /* test_flat under valgrind */
    tcase_add_loop_test(tc, test_alignment, 0, 3);
    tcase_add_test(tc, test_zero);
    tcase_add_test(tc, test_overflow);
    tcase_add_test(tc, test_block_size);
    tcase_add_test(tc, test_large);
    tcase_add_test(tc, test_cleanup_order);
    tcase_add_test(tc, test_enomem);
    tcase_add_test(tc, test_reset);
    tcase_add_test(tc, test_keep_reuse);
    tcase_add_test(tc, test_keep_cap);
    tcase_add_test(tc, test_set_keep);
    tcase_add_test(tc, test_flat);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(make_region_suite());
    int failed;

    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

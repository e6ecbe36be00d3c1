/* Unit tests of the per-request region (src/region.c), a program of its
 * own: it compiles region.c without the rest of the server, and it wraps
 * malloc and free to count what the region holds from the process
 * allocator.  Counts are compared only across stretches of region calls
 * with no Check call between them, so Check's own allocations never enter
 * a comparison.  tests/region-valgrind.sh runs it under valgrind, told
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
    if (p != NULL)
        live++;
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
 * chunks and the extra blocks go back at reset, everything at destroy. */
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
    ck_assert_int_eq(after_reset, base + 1);
    ck_assert_uint_eq(held_reset, 4096);
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

/* A reset region starts over where a new one starts. */
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
    ck_assert_uint_eq(pd_region_held(r), 4096);
    again = pd_region_alloc(r, 24);
    ck_assert_ptr_eq(first, again);
    pd_region_destroy(r);
}
END_TEST

/* A region reused for 100,000 requests of varying shape: after every reset
 * it holds its first block and nothing else, and the process heap stops
 * growing after the first requests. */
START_TEST(test_flat)
{
    enum { REQUESTS = 100000, WARM = 1000 };
    const long base = live;
    pd_region_t *r = pd_region_create(0);
    unsigned not_flat = 0, nulls = 0, cleanups_run = 0;
    size_t peak_held = 0, held_at_warm = 0, arena_at_warm = 0, used_at_warm = 0;
    struct mallinfo2 mi;
    long live_at_warm = 0;

    ck_assert_ptr_nonnull(r);
    norder = 0;
    for (int q = 0; q < REQUESTS; q++) {
        unsigned nobj = 20 + (unsigned)(next_rand() % 100);

        for (unsigned k = 0; k < nobj; k++) {
            /* Mostly header-map sized pieces, now and then a large one. */
            size_t n = next_rand() % 64 == 0 ? 5000 + (size_t)(next_rand() % 20000)
                                             : (size_t)(next_rand() % 200);
            char *p = pd_region_alloc(r, n);

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
        if (pd_region_held(r) != 4096 || live != base + 1)
            not_flat++;
        if (q == WARM) {
            mi = mallinfo2();
            arena_at_warm = mi.arena;
            used_at_warm = mi.uordblks;
            held_at_warm = pd_region_held(r);
            live_at_warm = live;
        }
    }
    mi = mallinfo2();
    pd_region_destroy(r);

    ck_assert_uint_eq(nulls, 0);
    ck_assert_uint_eq(not_flat, 0);
    ck_assert_uint_eq(cleanups_run, REQUESTS / 16);
    ck_assert_uint_eq(held_at_warm, 4096);
    ck_assert_int_eq(live_at_warm, base + 1);
    /* A request held some blocks and chunks, never runaway growth. */
    ck_assert_uint_gt(peak_held, 4096);
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

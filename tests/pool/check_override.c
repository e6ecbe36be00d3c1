/* SPDX-License-Identifier: BSD-2-Clause */
/* malloc's contract with the pool linked in as the process's malloc.
 *
 * Every contract test runs twice: in the "private" case (no arena: the pool
 * must behave as glibc and keep everything outside any arena) and in the
 * "attached" case (a checked fixture creates an arena and attaches, so every
 * pointer must land in it).  A third case moves a live process from one heap
 * to the other.  Built with -fno-builtin so that the compiler neither folds
 * impossible requests nor removes malloc/free pairs.
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shmpool.h"
#include "../programs/pattern.h"

/* glibc 2.26 dropped the declaration; the pool still exports the symbol for
 * old binaries, so it is part of the contract. */
extern void cfree(void *p);

#define ARENA_SIZE ((size_t)512 << 20)
#define KIB ((size_t)1 << 10)
#define MIB ((size_t)1 << 20)

/* Sizes that cross every kind of boundary the pool has: the 16-byte steps,
 * the class table's doublings, the largest class, and big spans. */
static const size_t boundary_sizes[] = {
    1, 8, 15, 16, 17, 31, 32, 33, 48, 96, 100, 112, 113, 127, 128, 129,
    160, 255, 256, 257, 500, 1000, 1023, 1024, 1025, 2047, 2048, 2049,
    4095, 4096, 4097, 8191, 8192, 8193, 12345, 16384, 30000, 65535, 65536,
    65537, 100000, 131072, 131073, 200000, 262143, 262144, 262145, 300000,
    524288, 1048576, 3 * 1048576 + 7,
};
#define N_BOUNDARY (sizeof boundary_sizes / sizeof boundary_sizes[0])

/* Volatile so that the compiler cannot see the value and warn or fold. */
static volatile size_t size_max_v = SIZE_MAX;

/* ------------------------------------------------------------------------ */
/* Helpers                                                                   */
/* ------------------------------------------------------------------------ */

static void setup_attached(void)
{
    int rc = pool_create(ARENA_SIZE);
    ck_assert_msg(rc == 0, "pool_create: %s", strerror(rc));
    rc = pool_attach();
    ck_assert_msg(rc == 0, "pool_attach: %s", strerror(rc));
}

/* A pointer belongs in the arena exactly when the process is attached. */
static void check_home(const void *p, size_t n)
{
    ck_assert_msg(pool_owns(p) == pool_attached(),
                  "%zu-byte block %p is %s the arena while the process is %s",
                  n, p, pool_owns(p) ? "inside" : "outside",
                  pool_attached() ? "attached" : "private");
}

/* Every block any interface returns. */
static void check_block(void *p, size_t n, size_t align)
{
    ck_assert_msg(p != NULL, "%zu bytes: NULL (%s)", n, strerror(errno));
    ck_assert_msg((uintptr_t)p % align == 0, "%zu bytes at %p: not %zu-aligned",
                  n, p, align);
    check_home(p, n);
    ck_assert_msg(malloc_usable_size(p) >= n, "%zu bytes at %p: usable size %zu",
                  n, p, malloc_usable_size(p));
}

static void check_fill(const void *p, size_t n, unsigned seed, const char *what)
{
    size_t bad = pattern_find_bad(p, n, seed);
    ck_assert_msg(bad == SIZE_MAX, "%s: byte %zu of %zu at %p was overwritten",
                  what, bad, n, p);
}

/* Fail unless bytes [0, n) of p are zero.  One assertion per block: Check
 * records every assertion it passes, which is slow per byte. */
static void check_zero(const unsigned char *z, size_t n, const char *what)
{
    size_t i = 0;
    while (i < n && z[i] == 0)
        i++;
    ck_assert_msg(i == n, "%s of %zu bytes: byte %zu is %#x", what, n, i,
                  i < n ? z[i] : 0);
}

/* Bytes the heap the process allocates from considers handed out.  The
 * private heap is glibc's, so mallinfo2 sees it; the arena counts its own. */
static size_t live_bytes(void)
{
    if (pool_attached()) {
        pool_usage_t u;
        pool_usage(&u);
        return u.in_use;
    }
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
}

/* ------------------------------------------------------------------------ */
/* The contract, run both privately and attached                             */
/* ------------------------------------------------------------------------ */

#define N_ALIGN_SIZES 6000
static void *align_blocks[N_ALIGN_SIZES];

START_TEST(test_alignment_every_size)
{
    size_t count = 0, n;
    for (n = 0; n <= 4096; n++)
        align_blocks[count++] = malloc(n);
    for (n = 4097; n <= 2 * MIB; n += n / 16 + 1)
        align_blocks[count++] = malloc(n);
    ck_assert_uint_le(count + 2 * N_BOUNDARY, N_ALIGN_SIZES);

    size_t i = 0;
    for (n = 0; n <= 4096; n++, i++) {
        check_block(align_blocks[i], n, 16);
        memset(align_blocks[i], 0x5a, n);
    }
    for (n = 4097; n <= 2 * MIB; n += n / 16 + 1, i++) {
        check_block(align_blocks[i], n, 16);
        memset(align_blocks[i], 0x5a, n);
    }
    /* calloc and realloc(NULL, n) go through their own entry points. */
    for (size_t k = 0; k < N_BOUNDARY; k++) {
        n = boundary_sizes[k];
        void *c = calloc(1, n), *r = realloc(NULL, n);
        check_block(c, n, 16);
        check_block(r, n, 16);
        align_blocks[count++] = c;
        align_blocks[count++] = r;
    }
    for (i = 0; i < count; i++)
        free(align_blocks[i]);
}
END_TEST

START_TEST(test_enomem_huge)
{
    const size_t huge[] = { size_max_v, size_max_v - 15, size_max_v / 2 + 1,
                            PTRDIFF_MAX, (size_t)1 << 62 };
    char *keep = malloc(100);
    pattern_fill(keep, 0, 100, 7);

    for (size_t k = 0; k < sizeof huge / sizeof huge[0]; k++) {
        size_t n = huge[k];
        void *p;
        errno = 0;
        ck_assert_ptr_null(malloc(n));
        ck_assert_int_eq(errno, ENOMEM);
        errno = 0;
        ck_assert_ptr_null(calloc(1, n));
        ck_assert_int_eq(errno, ENOMEM);
        errno = 0;
        ck_assert_ptr_null(realloc(NULL, n));
        ck_assert_int_eq(errno, ENOMEM);
        errno = 0;
        ck_assert_ptr_null(realloc(keep, n));
        ck_assert_int_eq(errno, ENOMEM);
        errno = 0;
        ck_assert_ptr_null(reallocarray(keep, 1, n));
        ck_assert_int_eq(errno, ENOMEM);
        errno = 0;
        ck_assert_ptr_null(aligned_alloc(64, n & ~(size_t)63));
        ck_assert_int_eq(errno, ENOMEM);
        errno = 0;
        ck_assert_ptr_null(memalign(4096, n));
        ck_assert_int_eq(errno, ENOMEM);
        errno = 0;
        ck_assert_ptr_null(valloc(n));
        ck_assert_int_eq(errno, ENOMEM);
        errno = 0;
        ck_assert_ptr_null(pvalloc(n));
        ck_assert_int_eq(errno, ENOMEM);
        errno = EDOM;
        ck_assert_int_eq(posix_memalign(&p, 64, n), ENOMEM);
        ck_assert_int_eq(errno, EDOM);
    }
    /* A failed realloc leaves the block where and as it was. */
    check_block(keep, 100, 16);
    check_fill(keep, 100, 7, "block after failed reallocs");
    free(keep);
}
END_TEST

START_TEST(test_overflow)
{
    /* Products that wrap to 0, to 16 and to a value just over SIZE_MAX. */
    const size_t pairs[][2] = {
        { (size_t)1 << 33, (size_t)1 << 33 },
        { (size_max_v >> 4) + 2, 16 },
        { 16, (size_max_v >> 4) + 2 },
        { size_max_v / 2 + 1, 2 },
        { size_max_v, size_max_v },
    };
    char *keep = malloc(64);
    pattern_fill(keep, 0, 64, 3);
    for (size_t k = 0; k < sizeof pairs / sizeof pairs[0]; k++) {
        errno = 0;
        ck_assert_msg(calloc(pairs[k][0], pairs[k][1]) == NULL,
                      "calloc(%zu, %zu) succeeded", pairs[k][0], pairs[k][1]);
        ck_assert_int_eq(errno, ENOMEM);
        errno = 0;
        ck_assert_msg(reallocarray(NULL, pairs[k][0], pairs[k][1]) == NULL,
                      "reallocarray(NULL, %zu, %zu) succeeded", pairs[k][0],
                      pairs[k][1]);
        ck_assert_int_eq(errno, ENOMEM);
        errno = 0;
        ck_assert_ptr_null(reallocarray(keep, pairs[k][0], pairs[k][1]));
        ck_assert_int_eq(errno, ENOMEM);
    }
    check_fill(keep, 64, 3, "block after overflowing reallocarray");
    free(keep);
}
END_TEST

START_TEST(test_malloc_zero_unique)
{
    enum { N = 256 };
    void *p[N];
    for (int i = 0; i < N; i++) {
        p[i] = i % 2 ? malloc(0) : realloc(NULL, 0);
        check_block(p[i], 0, 16);
        for (int j = 0; j < i; j++)
            ck_assert_msg(p[i] != p[j], "size 0: %p handed out twice", p[i]);
    }
    for (int i = 0; i < N; i++)
        free(p[i]);
}
END_TEST

/* Allocate each size and give it back with release, rounds times over:
 * the live bytes must not grow.  Round 0 fills the caches that count as
 * live in glibc's figures; a leak shows as growth over the rounds after
 * it. */
static void assert_release_leaks_nothing(const char *what, void (*release)(void *),
                                         const size_t *sizes, size_t n, int rounds)
{
    size_t before = 0;
    for (int round = 0; round <= rounds; round++) {
        if (round == 1)
            before = live_bytes();
        for (size_t k = 0; k < n; k++) {
            void *p = malloc(sizes[k]);
            check_block(p, sizes[k], 16);
            release(p);
        }
    }
    ck_assert_msg(live_bytes() == before, "%s leaked: %zu bytes live before, %zu after", what,
                  before, live_bytes());
}

static void release_by_realloc(void *p)
{
    ck_assert_ptr_null(realloc(p, 0));
}

START_TEST(test_realloc_zero_frees)
{
    const size_t sizes[] = { 1, 100, 5000, 100000, 300000 };
    assert_release_leaks_nothing("realloc(p, 0)", release_by_realloc, sizes,
                                 sizeof sizes / sizeof sizes[0], 200);
}
END_TEST

START_TEST(test_free_null_and_errno)
{
    errno = EXDEV;
    free(NULL);
    ck_assert_int_eq(errno, EXDEV);
    cfree(NULL);
    ck_assert_int_eq(errno, EXDEV);

    /* Big blocks too: giving pages back to the OS must not leak errno. */
    enum { N = 48 };
    void *big[N];
    for (int i = 0; i < N; i++) {
        big[i] = malloc(4 * MIB + (size_t)i * 4096);
        check_block(big[i], 4 * MIB, 16);
        memset(big[i], 1, 4 * MIB);
    }
    for (int i = 0; i < N; i++) {
        errno = EXDEV;
        free(big[i]);
        ck_assert_int_eq(errno, EXDEV);
    }
    for (size_t k = 0; k < N_BOUNDARY; k++) {
        void *p = malloc(boundary_sizes[k]);
        check_block(p, boundary_sizes[k], 16);
        errno = ENOTTY;
        free(p);
        ck_assert_int_eq(errno, ENOTTY);
    }
}
END_TEST

START_TEST(test_posix_memalign)
{
    enum { MAX = 256 };
    void *blocks[MAX];
    int count = 0;
    for (size_t align = 8; align <= 64 * KIB; align *= 2) {
        const size_t sizes[] = { 1, 24, align - 1, align, align + 1, 3 * align,
                                 100000, 300000 };
        for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
            void *p = NULL;
            errno = EDOM;
            int rc = posix_memalign(&p, align, sizes[k]);
            ck_assert_msg(rc == 0, "posix_memalign(%zu, %zu) = %d", align,
                          sizes[k], rc);
            ck_assert_int_eq(errno, EDOM);
            check_block(p, sizes[k], align);
            memset(p, 0x33, sizes[k]);
            ck_assert_int_lt(count, MAX);
            blocks[count++] = p;
        }
    }
    /* Freed while all are live, so free() has to find each through the
     * page map whatever alignment trick served it. */
    for (int i = 0; i < count; i++) {
        errno = EDOM;
        free(blocks[i]);
        ck_assert_int_eq(errno, EDOM);
    }

    const size_t bad[] = { 0, 1, 2, 3, 4, 12, 24, 48, 100, 4095, 65537,
                           size_max_v };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        void *p = NULL;
        errno = EDOM;
        int rc = posix_memalign(&p, bad[k], 64);
        ck_assert_msg(rc == EINVAL, "posix_memalign(%zu, 64) = %d, not EINVAL",
                      bad[k], rc);
        ck_assert_int_eq(errno, EDOM);
    }
}
END_TEST

START_TEST(test_other_aligned_interfaces)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    for (size_t align = 1; align <= 64 * KIB; align *= 2) {
        void *a = aligned_alloc(align, align * 3);
        void *m = memalign(align, 100);
        check_block(a, align * 3, align < 16 ? 16 : align);
        check_block(m, 100, align < 16 ? 16 : align);
        memset(a, 1, align * 3);
        memset(m, 2, 100);
        free(a);
        free(m);
    }
    for (size_t k = 0; k < N_BOUNDARY; k++) {
        size_t n = boundary_sizes[k];
        void *v = valloc(n), *pv = pvalloc(n);
        check_block(v, n, page);
        check_block(pv, (n + page - 1) / page * page, page);
        memset(v, 3, n);
        memset(pv, 4, (n + page - 1) / page * page);
        free(v);
        free(pv);
    }
}
END_TEST

/* realloc *p, *old bytes of seed's pattern, to n: the bytes kept must be
 * intact, and the new ones get the pattern too. */
static void realloc_keeps(char **p, size_t *old, size_t n, unsigned seed, const char *what)
{
    char *q = realloc(*p, n);
    check_block(q, n, 16);
    check_fill(q, *old < n ? *old : n, seed, what);
    if (n > *old)
        pattern_fill(q, *old, n, seed);
    *p = q;
    *old = n;
}

/* Grow a block one boundary at a time and back down, then jump straight
 * between the smallest class and a big span, checking the content at every
 * step. */
START_TEST(test_realloc_keeps_content)
{
    unsigned seed = 11;
    size_t old = boundary_sizes[0];
    char *p = malloc(old);
    pattern_fill(p, 0, old, seed);
    for (int dir = 0; dir < 2; dir++)
        for (size_t k = 1; k < N_BOUNDARY; k++)
            realloc_keeps(&p, &old, boundary_sizes[dir == 0 ? k : N_BOUNDARY - 1 - k], seed,
                          "realloc");
    const size_t jumps[] = { 3 * MIB, 1, 300000, 16, 262145, 100, 1 };
    for (size_t k = 0; k < sizeof jumps / sizeof jumps[0]; k++)
        realloc_keeps(&p, &old, jumps[k], seed, "realloc jump");
    free(p);
}
END_TEST

START_TEST(test_reallocarray)
{
    char *p = reallocarray(NULL, 10, 16);
    check_block(p, 160, 16);
    pattern_fill(p, 0, 160, 5);
    char *q = reallocarray(p, 30000, 16);
    check_block(q, 480000, 16);
    check_fill(q, 160, 5, "reallocarray growth");
    pattern_fill(q, 160, 480000, 5);
    p = reallocarray(q, 3, 16);
    check_block(p, 48, 16);
    check_fill(p, 48, 5, "reallocarray shrink");
    free(p);
}
END_TEST

START_TEST(test_calloc_zeroes_recycled)
{
    const size_t sizes[] = { 16, 96, 112, 1000, 4096, 20000, 100000, 262144,
                             300000, 2 * MIB };
    enum { BATCH = 16 };
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        size_t n = sizes[k];
        for (int round = 0; round < 3; round++) {
            void *dirty = malloc(n);
            check_block(dirty, n, 16);
            memset(dirty, 0xa5, malloc_usable_size(dirty));
            free(dirty);
            unsigned char *z = calloc(1, n);
            check_block(z, n, 16);
            check_zero(z, n, "calloc(1, n) over a dirtied block");
            free(z);
        }
        if (n > 300000)
            continue;
        void *b[BATCH];
        for (int i = 0; i < BATCH; i++) {
            b[i] = malloc(n);
            memset(b[i], 0x5a, malloc_usable_size(b[i]));
        }
        for (int i = 0; i < BATCH; i++)
            free(b[i]);
        for (int i = 0; i < BATCH; i++) {
            unsigned char *z = calloc(n / 16, 16);
            check_block(z, n / 16 * 16, 16);
            check_zero(z, n / 16 * 16, "calloc(n / 16, 16) over dirtied blocks");
            b[i] = z;
        }
        for (int i = 0; i < BATCH; i++)
            free(b[i]);
    }
}
END_TEST

START_TEST(test_usable_size)
{
    ck_assert_uint_eq(malloc_usable_size(NULL), 0);
    for (size_t n = 0; n <= 300000; n += n < 4096 ? 7 : n / 8) {
        /* Writing a block's whole usable size must not reach its neighbours. */
        char *a = malloc(n), *b = malloc(n), *c = malloc(n);
        check_block(a, n, 16);
        check_block(b, n, 16);
        check_block(c, n, 16);
        size_t ub = malloc_usable_size(b);
        pattern_fill(a, 0, n, 1);
        pattern_fill(c, 0, n, 3);
        memset(b, 0xee, ub);
        check_fill(a, n, 1, "neighbour below a fully written block");
        check_fill(c, n, 3, "neighbour above a fully written block");
        free(a);
        free(b);
        free(c);
    }
}
END_TEST

/* cfree frees and leaves errno alone. */
static void release_by_cfree(void *p)
{
    errno = EXDEV;
    cfree(p);
    ck_assert_int_eq(errno, EXDEV);
}

START_TEST(test_cfree)
{
    const size_t sizes[] = { 1000, 100000, MIB };
    assert_release_leaks_nothing("cfree", release_by_cfree, sizes, sizeof sizes / sizeof sizes[0],
                                 100);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Moving between heaps                                                      */
/* ------------------------------------------------------------------------ */

START_TEST(test_private_before_attach)
{
    ck_assert(!pool_attached());
    ck_assert_int_eq(pool_attach(), ENOENT);
    ck_assert(!pool_attached());
    void *p = malloc(100);
    check_block(p, 100, 16);
    ck_assert(!pool_owns(p));
    free(p);
}
END_TEST

START_TEST(test_attach_moves_allocations)
{
    char *small = malloc(1000), *big = malloc(400000), *gone = malloc(5000);
    pattern_fill(small, 0, 1000, 21);
    pattern_fill(big, 0, 400000, 22);
    ck_assert(!pool_owns(small) && !pool_owns(big) && !pool_owns(gone));

    setup_attached();
    size_t private_before = mallinfo2().uordblks + mallinfo2().hblkhd;
    void *fresh = malloc(100);
    check_block(fresh, 100, 16);
    ck_assert(pool_owns(fresh));

    /* The private heap still answers for its own pointers ... */
    ck_assert_uint_ge(malloc_usable_size(small), 1000);
    errno = EXDEV;
    free(gone);
    ck_assert_int_eq(errno, EXDEV);
    size_t private_mid = mallinfo2().uordblks + mallinfo2().hblkhd;
    ck_assert_uint_lt(private_mid, private_before);

    /* ... and realloc copies them into the arena. */
    char *s2 = realloc(small, 2000), *b2 = realloc(big, 500000);
    check_block(s2, 2000, 16);
    check_block(b2, 500000, 16);
    ck_assert(pool_owns(s2) && pool_owns(b2));
    check_fill(s2, 1000, 21, "private block realloc'd into the arena");
    check_fill(b2, 400000, 22, "private big block realloc'd into the arena");
    /* The copies released their private originals. */
    ck_assert_uint_le(mallinfo2().uordblks + mallinfo2().hblkhd,
                      private_mid - 400000);
    free(s2);
    free(b2);
    free(fresh);
}
END_TEST

static void add_contract(TCase *tc)
{
    tcase_add_test(tc, test_alignment_every_size);
    tcase_add_test(tc, test_enomem_huge);
    tcase_add_test(tc, test_overflow);
    tcase_add_test(tc, test_malloc_zero_unique);
    tcase_add_test(tc, test_realloc_zero_frees);
    tcase_add_test(tc, test_free_null_and_errno);
    tcase_add_test(tc, test_posix_memalign);
    tcase_add_test(tc, test_other_aligned_interfaces);
    tcase_add_test(tc, test_realloc_keeps_content);
    tcase_add_test(tc, test_reallocarray);
    tcase_add_test(tc, test_calloc_zeroes_recycled);
    tcase_add_test(tc, test_usable_size);
    tcase_add_test(tc, test_cfree);
}

static Suite *make_override_suite(void)
{
    Suite *s = suite_create("override");

    TCase *priv = tcase_create("private");
    add_contract(priv);
    tcase_add_test(priv, test_private_before_attach);
    tcase_set_timeout(priv, 30);
    suite_add_tcase(s, priv);

    /* Checked: each forked test gets an arena of its own. */
    TCase *att = tcase_create("attached");
    tcase_add_checked_fixture(att, setup_attached, NULL);
    add_contract(att);
    tcase_set_timeout(att, 30);
    suite_add_tcase(s, att);

    TCase *move = tcase_create("attach");
    tcase_add_test(move, test_attach_moves_allocations);
    tcase_set_timeout(move, 30);
    suite_add_tcase(s, move);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(make_override_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

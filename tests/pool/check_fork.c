/* SPDX-License-Identifier: BSD-2-Clause */
/* Fork of an attached process, on a shared arena and on a private one
 * (SHMPOOL_MODE=process).  The child inherits a copy of the parent's
 * thread cache, whose objects the parent will go on handing out: the child
 * must drop that copy and detach, must ignore (and count) frees of the
 * parent's blocks, must see them as a private copy that neither side's
 * writes cross, and may never allocate what somebody else holds.  Patterns
 * in every block prove it.  A private arena's fork copies nothing: the
 * child's faults and private memory say so.  Entry point: make_fork_suite().
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check_pool.h"
#include "../programs/pattern.h"
#include "pool-internal.h"
#include "shmpool.h"

#define FORK_ARENA ((size_t)256 << 20)
#define BIG_HEAP ((size_t)256 << 20) /* touched before a private arena's fork */
#define BIG_BLOCK ((size_t)1 << 20)
#define SAMPLE_STRIDE ((size_t)64 << 10) /* bytes between the bytes both sides write */
#define PARENT_LIVE 512     /* blocks the parent holds across fork */
#define PARENT_CACHED 512   /* freed before fork: they sit in its thread cache */
#define MORE 2048           /* allocated by each side after fork */
#define WAIT_NS 20000000000LL

typedef struct block_s {
    char *p;
    size_t size;
} block_t;

/* Shared between parent and child, outside the arena. */
typedef struct fork_sh_s {
    volatile int child_ready, parent_ready;
    int failed;
    char why[512];
    size_t foreign_before, foreign_after;
    bool reattached;        /* the child's pool_attach() succeeded */
    volatile int child_wrote, parent_checked;
    long child_faults;      /* minor faults of the child, fork included */
    long child_private_kb;  /* its private memory (smaps_rollup) */
    unsigned n_child;
    block_t child[MORE];    /* the child's blocks, live at child_ready */
} fork_sh_t;

static block_t parent_blocks[PARENT_LIVE + MORE];

static void setup_arena(void)
{
    int rc = pool_create(FORK_ARENA);
    ck_assert_msg(rc == 0, "pool_create: %s", strerror(rc));
    rc = pool_attach();
    ck_assert_msg(rc == 0, "pool_attach: %s", strerror(rc));
}

static void setup_private_arena(void)
{
    int rc = pool_create_private_(BIG_HEAP + FORK_ARENA);
    ck_assert_msg(rc == 0, "pool_create_private_: %s", strerror(rc));
    ck_assert(!pool_arena_.hdr->shared);
    rc = pool_attach();
    ck_assert_msg(rc == 0, "pool_attach: %s", strerror(rc));
}

static fork_sh_t *fork_map(void)
{
    fork_sh_t *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE,
                         MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert_msg(sh != MAP_FAILED, "mmap: %s", strerror(errno));
    return sh;
}

/* The child cannot use ck_assert (its failure would end in the wrong
 * process), so it records the first failure here and exits 1. */
static void child_fail(fork_sh_t *sh, const char *fmt, ...)
{
    if (!sh->failed) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(sh->why, sizeof sh->why, fmt, ap);
        va_end(ap);
    }
    sh->failed = 1;
    _exit(1);
}

/* Sizes in the classes the thread cache holds, plus a few big spans. */
static size_t fork_size(unsigned i)
{
    static const size_t sizes[] = { 16, 16, 32, 48, 96, 104, 112, 112, 256,
                                    1024, 4000, 20000 };
    if (i % 97 == 0)
        return 300000;
    return sizes[i % (sizeof sizes / sizeof sizes[0])];
}

static uint64_t seed_of(int who, unsigned i)
{
    return (uint64_t)who << 32 | i;
}

/* Allocate n blocks of the fork_size() sequence with `who`'s pattern. */
static bool alloc_blocks(block_t *b, unsigned n, int who)
{
    for (unsigned i = 0; i < n; i++) {
        b[i].size = fork_size(i);
        b[i].p = pool_malloc(b[i].size);
        if (b[i].p == NULL)
            return false;
        pattern_fill(b[i].p, 0, b[i].size, seed_of(who, i));
    }
    return true;
}

/* Index of the first block whose pattern is broken, or -1. */
static long find_broken(const block_t *b, unsigned n, int who)
{
    for (unsigned i = 0; i < n; i++)
        if (pattern_find_bad(b[i].p, b[i].size, seed_of(who, i)) != SIZE_MAX)
            return (long)i;
    return -1;
}

static void free_blocks(block_t *b, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        pool_free(b[i].p);
}

static bool wait_flag(volatile int *flag)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t end = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec + WAIT_NS;
    while (!*flag) {
        clock_gettime(CLOCK_MONOTONIC, &ts);
        if ((int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec > end)
            return false;
        usleep(200);
    }
    return true;
}

/* Fill the parent's thread cache with free objects, so a child that kept
 * the copied cache would hand out the very objects the parent hands out. */
static void prime_cache(void)
{
    static block_t cached[PARENT_CACHED];
    ck_assert(alloc_blocks(cached, PARENT_CACHED, 9));
    free_blocks(cached, PARENT_CACHED);
}

static int cmp_block(const void *a, const void *b)
{
    const block_t *x = a, *y = b;
    return x->p < y->p ? -1 : x->p > y->p;
}

/* Fail if any two blocks of the two sets overlap. */
static void check_disjoint(block_t *a, unsigned na, block_t *b, unsigned nb)
{
    static block_t all[PARENT_LIVE + 2 * MORE];
    ck_assert_uint_le(na + nb, sizeof all / sizeof all[0]);
    memcpy(all, a, na * sizeof *a);
    memcpy(all + na, b, nb * sizeof *b);
    qsort(all, na + nb, sizeof *all, cmp_block);
    for (unsigned i = 1; i < na + nb; i++)
        ck_assert_msg(all[i - 1].p + all[i - 1].size <= all[i].p,
                      "blocks %p (%zu bytes) and %p overlap: handed out twice",
                      all[i - 1].p, all[i - 1].size, all[i].p);
}

static void wait_child(pid_t pid, fork_sh_t *sh)
{
    int status;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "child status %#x: %s", status, sh->why);
}

/* ------------------------------------------------------------------------ */

/* The child: detached, it frees half the parent's blocks (ignored and
 * counted), then allocates while the parent allocates too.  With `reattach`
 * it first calls pool_attach() again: the pool may refuse (the child stays
 * private) or accept (the child's blocks are then in the arena); either way
 * nobody may get a block someone else holds. */
static void child_allocates(fork_sh_t *sh, bool reattach)
{
    if (pool_attached() || pool_slot() != -1)
        child_fail(sh, "child of an attached process is still attached");
    long bad = find_broken(parent_blocks, PARENT_LIVE, 1);
    if (bad >= 0)
        child_fail(sh, "inherited block %ld broken before anything ran", bad);

    pool_usage_t u;
    pool_usage(&u);
    sh->foreign_before = u.foreign_frees;
    for (unsigned i = 0; i < PARENT_LIVE; i += 2)
        pool_free(parent_blocks[i].p);
    pool_usage(&u);
    sh->foreign_after = u.foreign_frees;

    void *priv = pool_malloc(100);
    if (priv == NULL || pool_owns(priv))
        child_fail(sh, "detached child allocated %p in the arena", priv);
    pool_free(priv);

    if (reattach) {
        sh->reattached = pool_attach() == 0;
        if (pool_attached() != sh->reattached)
            child_fail(sh, "pool_attach's result and pool_attached() disagree");
    }
    if (!alloc_blocks(sh->child, MORE, 2))
        child_fail(sh, "child: pool_malloc failed: %s", strerror(errno));
    for (unsigned i = 0; i < MORE; i++)
        if (pool_owns(sh->child[i].p) != sh->reattached)
            child_fail(sh, "child block %p is %s the arena", sh->child[i].p,
                       sh->reattached ? "outside" : "inside");
    sh->n_child = MORE;
    sh->child_ready = 1;
    if (!wait_flag(&sh->parent_ready))
        child_fail(sh, "parent never got ready");

    bad = find_broken(sh->child, MORE, 2);
    if (bad >= 0)
        child_fail(sh, "child block %ld (%p) overwritten", bad, sh->child[bad].p);
    free_blocks(sh->child, MORE);
    pool_detach();
    _exit(0);
}

/* Fork with the parent's PARENT_LIVE blocks live and its cache primed:
 * the child's pid, 0 in the child.  *in_use_before gets the arena's use
 * before the blocks. */
static pid_t fork_with_blocks(size_t *in_use_before)
{
    pool_usage_t u;
    pool_usage(&u);
    *in_use_before = u.in_use;
    ck_assert(alloc_blocks(parent_blocks, PARENT_LIVE, 1));
    prime_cache();
    pid_t pid = fork();
    ck_assert_msg(pid >= 0, "fork: %s", strerror(errno));
    return pid;
}

/* Free the parent's blocks, with the MORE it allocated after the fork,
 * and see the arena back where fork_with_blocks found it. */
static void settle_after_fork(fork_sh_t *sh, size_t in_use_before)
{
    free_blocks(parent_blocks, PARENT_LIVE + MORE);
    pool_thread_flush();
    pool_test_assert_settled(in_use_before);
    munmap(sh, sizeof *sh);
}

/* Parent and child allocate at the same time; both keep their blocks. */
static void fork_and_allocate(bool reattach)
{
    fork_sh_t *sh = fork_map();
    size_t in_use_before;
    pid_t pid = fork_with_blocks(&in_use_before);
    if (pid == 0)
        child_allocates(sh, reattach);

    ck_assert(pool_attached());
    block_t *more = parent_blocks + PARENT_LIVE;
    ck_assert(alloc_blocks(more, MORE, 3));
    ck_assert_msg(wait_flag(&sh->child_ready), "child never got ready: %s",
                  sh->why);
    /* Both sides' blocks are live now: no byte of the arena may belong to
     * two of them.  (Private blocks of the child live in another address
     * space; they cannot collide with the arena.) */
    if (sh->reattached)
        check_disjoint(parent_blocks, PARENT_LIVE + MORE, sh->child, sh->n_child);
    sh->parent_ready = 1;

    wait_child(pid, sh);
    ck_assert_msg(sh->foreign_after - sh->foreign_before == PARENT_LIVE / 2,
                  "child freed %u inherited blocks, foreign_frees rose by %zu",
                  PARENT_LIVE / 2, sh->foreign_after - sh->foreign_before);
    long bad = find_broken(parent_blocks, PARENT_LIVE, 1);
    ck_assert_msg(bad < 0, "parent block %ld overwritten", bad);
    bad = find_broken(more, MORE, 3);
    ck_assert_msg(bad < 0, "parent block %ld allocated after fork overwritten",
                  bad);

    settle_after_fork(sh, in_use_before);
}

START_TEST(test_fork_no_double_handout)
{
    fork_and_allocate(false);
}
END_TEST

START_TEST(test_fork_child_attaches_again)
{
    fork_and_allocate(true);
}
END_TEST

/* A detached child frees and reallocs every inherited block; the parent
 * must find all of them intact and still its own: allocating as much again
 * must not hand any of them out. */
START_TEST(test_fork_child_frees_ignored)
{
    fork_sh_t *sh = fork_map();
    size_t in_use_before;
    pid_t pid = fork_with_blocks(&in_use_before);
    if (pid == 0) {
        pool_usage_t u;
        pool_usage(&u);
        sh->foreign_before = u.foreign_frees;
        unsigned freed = 0;
        for (unsigned i = 0; i < PARENT_LIVE; i++) {
            block_t *b = &parent_blocks[i];
            if (i % 4 != 0) {
                pool_free(b->p);
                freed++;
                continue;
            }
            /* Growing an inherited block copies it out; the original stays. */
            char *q = pool_realloc(b->p, b->size * 2);
            if (q == NULL || pool_owns(q) ||
                pattern_find_bad(q, b->size, seed_of(1, i)) != SIZE_MAX)
                child_fail(sh, "detached realloc of %p gave %p", b->p, q);
            pool_free(q);
        }
        pool_usage(&u);
        sh->foreign_after = u.foreign_frees;
        if (sh->foreign_after - sh->foreign_before < freed)
            child_fail(sh, "%u foreign frees, foreign_frees rose by %zu", freed,
                       sh->foreign_after - sh->foreign_before);
        _exit(0);
    }
    wait_child(pid, sh);

    long bad = find_broken(parent_blocks, PARENT_LIVE, 1);
    ck_assert_msg(bad < 0, "parent block %ld changed by the child", bad);
    block_t *more = parent_blocks + PARENT_LIVE;
    ck_assert(alloc_blocks(more, MORE, 3));
    check_disjoint(parent_blocks, PARENT_LIVE, more, MORE);
    bad = find_broken(parent_blocks, PARENT_LIVE, 1);
    ck_assert_msg(bad < 0, "parent block %ld handed out again", bad);

    settle_after_fork(sh, in_use_before);
}
END_TEST

/* The fork contract: after fork both sides write every inherited block
 * with their own pattern at the same time, and each reads back only its
 * own, as with any heap; a child's own child (forked from the private
 * copy) too. */
static bool write_then_verify(unsigned n, int who, volatile int *mine, volatile int *theirs)
{
    for (unsigned i = 0; i < n; i++)
        pattern_fill(parent_blocks[i].p, 0, parent_blocks[i].size, seed_of(who, i));
    *mine = 1;
    if (!wait_flag(theirs))
        return false;
    return find_broken(parent_blocks, n, who) < 0;
}

START_TEST(test_fork_both_write)
{
    fork_sh_t *sh = fork_map();
    ck_assert(alloc_blocks(parent_blocks, PARENT_LIVE, 1));
    pid_t pid = fork();
    ck_assert_msg(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        if (find_broken(parent_blocks, PARENT_LIVE, 1) >= 0)
            child_fail(sh, "the child's copy differs from the parent's blocks at fork");
        /* The grandchild writes too, from a copy of the copy. */
        pid_t g = fork();
        if (g == 0) {
            for (unsigned i = 0; i < PARENT_LIVE; i++)
                pattern_fill(parent_blocks[i].p, 0, parent_blocks[i].size, seed_of(5, i));
            _exit(find_broken(parent_blocks, PARENT_LIVE, 5) < 0 ? 0 : 1);
        }
        int status;
        if (g < 0 || waitpid(g, &status, 0) != g || !WIFEXITED(status) ||
            WEXITSTATUS(status) != 0)
            child_fail(sh, "the grandchild's own writes did not hold");
        if (!write_then_verify(PARENT_LIVE, 2, &sh->child_ready, &sh->parent_ready))
            child_fail(sh, "the parent's writes reached the child's copy");
        _exit(0);
    }
    ck_assert_msg(write_then_verify(PARENT_LIVE, 3, &sh->parent_ready, &sh->child_ready),
                  "the child's writes reached the parent's blocks: %s", sh->why);
    wait_child(pid, sh);
    ck_assert_int_lt(find_broken(parent_blocks, PARENT_LIVE, 3), 0);
    free_blocks(parent_blocks, PARENT_LIVE);
    pool_test_assert_consistent();
    munmap(sh, sizeof *sh);
}
END_TEST

/* Private_Clean + Private_Dirty of the calling process in KiB, or -1. */
static long private_kb(void)
{
    FILE *f = fopen("/proc/self/smaps_rollup", "r");
    if (f == NULL)
        return -1;
    char line[256];
    long total = -1, kb;
    while (fgets(line, sizeof line, f) != NULL)
        if (sscanf(line, "Private_Clean: %ld kB", &kb) == 1 ||
            sscanf(line, "Private_Dirty: %ld kB", &kb) == 1)
            total = (total < 0 ? 0 : total) + kb;
    fclose(f);
    return total;
}

/* Whether every sampled byte of the big blocks holds v. */
static bool samples_are(char *const *big, unsigned n, char v)
{
    for (unsigned i = 0; i < n; i++)
        for (size_t off = 0; off < BIG_BLOCK; off += SAMPLE_STRIDE)
            if (big[i][off] != v)
                return false;
    return true;
}

static void samples_set(char *const *big, unsigned n, char v)
{
    for (unsigned i = 0; i < n; i++)
        for (size_t off = 0; off < BIG_BLOCK; off += SAMPLE_STRIDE)
            big[i][off] = v;
}

/* A private arena with a big heap touched: the child sees a frozen copy
 * (the parent's writes after fork do not reach it, nor its writes the
 * parent), and the fork copies none of it, which counts show without a
 * clock: the child, fork handler included, faults in and holds privately
 * a small part of the heap at most (a copy would be all of it). */
START_TEST(test_fork_private_copy_on_write)
{
    enum { N = BIG_HEAP / BIG_BLOCK };
    static char *big[N];
    for (unsigned i = 0; i < N; i++) {
        big[i] = pool_malloc(BIG_BLOCK);
        ck_assert_msg(big[i] != NULL && pool_owns(big[i]), "block %u: %p", i, (void *)big[i]);
        memset(big[i], 1, BIG_BLOCK);
    }
    fork_sh_t *sh = fork_map();
    pid_t pid = fork();
    ck_assert_msg(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        sh->child_faults = pool_test_minor_faults();
        sh->child_private_kb = private_kb();
        if (!samples_are(big, N, 1))
            child_fail(sh, "the child's copy differs from the heap at fork");
        sh->child_ready = 1;
        if (!wait_flag(&sh->parent_ready))
            child_fail(sh, "parent never got ready");
        if (!samples_are(big, N, 1))
            child_fail(sh, "the parent's writes after fork reached the child");
        samples_set(big, N, 3);
        sh->child_wrote = 1;
        if (!wait_flag(&sh->parent_checked) || !samples_are(big, N, 3))
            child_fail(sh, "the child's own writes did not hold");
        _exit(0);
    }
    ck_assert_msg(wait_flag(&sh->child_ready), "child never got ready: %s", sh->why);
    samples_set(big, N, 2);
    sh->parent_ready = 1;
    ck_assert_msg(wait_flag(&sh->child_wrote), "child never wrote: %s", sh->why);
    bool held = samples_are(big, N, 2);
    sh->parent_checked = 1;
    wait_child(pid, sh);
    ck_assert_msg(held, "the child's writes reached the parent");
    long heap_pages = (long)(BIG_HEAP / (size_t)sysconf(_SC_PAGESIZE));
    ck_assert_msg(sh->child_faults < heap_pages / 64,
                  "the child faulted %ld times by its first line, the heap is %ld pages: the "
                  "fork copied it", sh->child_faults, heap_pages);
    ck_assert_msg(sh->child_private_kb >= 0, "no /proc/self/smaps_rollup");
    ck_assert_msg((size_t)sh->child_private_kb < (BIG_HEAP >> 10) / 16,
                  "the child held %ld KiB privately right after fork, the heap is %zu KiB: the "
                  "fork copied it", sh->child_private_kb, BIG_HEAP >> 10);
    for (unsigned i = 0; i < N; i++)
        pool_free(big[i]);
    pool_thread_flush();
    pool_test_assert_consistent();
    munmap(sh, sizeof *sh);
}
END_TEST

/* A fork copies the descriptors the child may read, and no more: those
 * of pages inside a span read as zeros there, and a read of the ones that
 * went back with their span's pages would allocate them in the shared
 * arena again, at every fork. */
START_TEST(test_fork_leaves_returned_descriptors)
{
    pool_arena_t *a = &pool_arena_;
    void *p = pool_malloc((size_t)4 << 20);
    ck_assert_ptr_nonnull(p);
    const pool_span_sh_t *s = pool_pagemap_span_(a, p);
    uint32_t start = s->start, end = s->start + s->npages;
    pool_free(p);
    pool_thread_flush();
    pool_pageheap_trim_(a);
    uintptr_t lo = (uintptr_t)&a->spans[start + 1], hi = (uintptr_t)&a->spans[end];
    ck_assert_msg(!pool_test_any_resident(lo, hi), "descriptors of a returned span resident");
    pid_t pid = fork();
    ck_assert_msg(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0)
        _exit(0);
    pool_test_assert_exit0(pid, "child");
    ck_assert_msg(!pool_test_any_resident(lo, hi),
                  "the fork brought a returned span's descriptors back");
    pool_test_assert_consistent();
}
END_TEST

/* The fork suite: an attached parent forks a child that allocates, frees
 * and possibly attaches again, on a shared arena and on a private one.
 * Returns a new Suite for srunner_add_suite(). */
Suite *make_fork_suite(void)
{
    Suite *s = suite_create("fork");
    TCase *tc = tcase_create("attached parent");
    tcase_add_checked_fixture(tc, setup_arena, NULL);
    tcase_set_timeout(tc, 40);
    tcase_add_test(tc, test_fork_no_double_handout);
    tcase_add_test(tc, test_fork_child_attaches_again);
    tcase_add_test(tc, test_fork_child_frees_ignored);
    tcase_add_test(tc, test_fork_both_write);
    tcase_add_test(tc, test_fork_leaves_returned_descriptors);
    suite_add_tcase(s, tc);
    tc = tcase_create("attached parent, private arena");
    tcase_add_checked_fixture(tc, setup_private_arena, NULL);
    tcase_set_timeout(tc, 40);
    tcase_add_test(tc, test_fork_no_double_handout);
    tcase_add_test(tc, test_fork_child_attaches_again);
    tcase_add_test(tc, test_fork_child_frees_ignored);
    tcase_add_test(tc, test_fork_both_write);
    tcase_add_test(tc, test_fork_private_copy_on_write);
    suite_add_tcase(s, tc);
    return s;
}

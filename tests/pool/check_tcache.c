/* SPDX-License-Identifier: BSD-2-Clause */
/* The thread cache and the allocation entry points: batch growth, the
 * watermark, threads, fork, accounting, stats output, frees of another
 * thread's or process's blocks, and the aborts on double and invalid
 * frees. */
#include "config.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check_pool.h"
#include "spawn.h"
#include "../programs/pattern.h"
#include "pool-internal.h"
#include "prim/prim.h"

/* The calling thread's bin of a size's class: its length, next batch and
 * head. */
static uint32_t len_of(size_t size)
{
    return pool_bin_len(pool_tls_tcache_, pool_sizeclass_of(size));
}

static uint32_t batch_of(size_t size)
{
    return pool_tls_tcache_->own[pool_sizeclass_of(size)].batch;
}

static void *head_of(size_t size)
{
    return pool_tls_tcache_->heads[pool_sizeclass_of(size)];
}

START_TEST(test_batch_growth)
{
    test_own_classes();
    void *p = pool_malloc(16);
    /* First miss asked for one object, got its cache line's four (a batch
     * ends on a line boundary), and grew the batch by one. */
    ck_assert_uint_eq(len_of(16), 3);
    ck_assert_uint_eq(batch_of(16), 2);
    void *q[3];
    for (int i = 0; i < 3; i++)
        q[i] = pool_malloc(16);
    ck_assert_uint_eq(len_of(16), 0);
    void *r = pool_malloc(16); /* asked for two, got a line */
    ck_assert_uint_eq(len_of(16), 3);
    ck_assert_uint_eq(batch_of(16), 3);
    /* Each miss fetches its batch, extended to the end of the line or, from
     * half a 4 KiB page of objects (16-byte objects: 128), of the page its
     * last object ends in, and grows the next batch by one, never twice. */
    const uint32_t max = pool_classes_[1].max_batch;
    uint32_t expect = 3, misses = 0;
    for (int i = 0; i < 40000 && expect < max; i++) {
        if (len_of(16) != 0) {
            pool_malloc(16);
            continue;
        }
        pool_malloc(16);
        uint32_t got = len_of(16) + 1;
        uint32_t slack = expect * 16 >= POOL_STREAM_BYTES / 2 ? POOL_STREAM_BYTES / 16 - 1 : 3;
        ck_assert_uint_ge(got, expect);
        ck_assert_uint_le(got, expect + slack);
        expect++;
        ck_assert_uint_eq(batch_of(16), expect);
        misses++;
    }
    ck_assert_uint_eq(batch_of(16), max);
    ck_assert_uint_eq(misses, max - 3);
    pool_free(p);
    for (int i = 0; i < 3; i++)
        pool_free(q[i]);
    pool_free(r);
    pool_test_assert_consistent();
}
END_TEST

/* A refill's objects may lie on pages another process used; it reads the
 * first of each fault-around window before linking them, so a child that
 * takes the 16 KiB objects its parent wrote and freed writes them with a
 * fraction of a fault a page (one a page before: a write fault maps its
 * page only). */
START_TEST(test_refill_maps_used_pages_around)
{
    enum { N = 64, SIZE = 16384 };
    static char *mine[N];
    size_t os_pages = (size_t)N * SIZE / pool_prim_os_page_size_();
    for (unsigned i = 0; i < N; i++) {
        mine[i] = pool_malloc(SIZE);
        ck_assert(mine[i] != NULL && pool_owns(mine[i]));
        memset(mine[i], 1, SIZE);
    }
    for (unsigned i = 0; i < N; i++)
        pool_free(mine[i]);
    /* Detaching flushes this thread's cache to the central lists. */
    pid_t pid = pool_test_fork_worker();
    if (pid == 0) {
        long f0 = pool_test_minor_faults();
        unsigned reused = 0;
        for (unsigned i = 0; i < N; i++) {
            char *q = pool_malloc(SIZE);
            if (q == NULL)
                _exit(3);
            for (unsigned k = 0; k < N; k++)
                reused += q == mine[k];
            memset(q, 2, SIZE);
        }
        long faults = pool_test_minor_faults() - f0;
        _exit(reused < N / 2 ? 3 : faults < (long)os_pages / 2 ? 0 : 4);
    }
    int status = pool_test_join_worker(pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "the child (2: no attach, 3: not the parent's objects, 4: a fault or more "
                  "every other page of %zu): status %#x",
                  os_pages, status);
    pool_test_assert_consistent();
}
END_TEST

/* pool_thread_scavenge gives three quarters of each bin back and keeps the
 * most recently freed quarter; enough calls empty it. */
START_TEST(test_scavenge_quarters_bins)
{
    static void *p[1000];
    for (int i = 0; i < 1000; i++)
        p[i] = pool_malloc(48);
    for (int i = 0; i < 1000; i++)
        pool_free(p[i]);
    uint32_t len = len_of(48);
    ck_assert_uint_ge(len, 1000);
    ck_assert_ptr_eq(head_of(48), p[999]);
    pool_thread_scavenge();
    ck_assert_uint_eq(len_of(48), len / 4);
    ck_assert_ptr_eq(head_of(48), p[999]);
    uint32_t n = 0;
    for (void *q = head_of(48); q != NULL; q = *(void **)q)
        n++;
    ck_assert_uint_eq(n, len / 4);
    pool_test_assert_consistent();
    for (int i = 0; i < 6; i++)
        pool_thread_scavenge();
    ck_assert_uint_eq(len_of(48), 0);
    ck_assert_ptr_null(head_of(48));
    pool_test_assert_consistent();
}
END_TEST

static uint32_t span_of(const void *p)
{
    return pool_arena_.pm_span[pool_pagemap_page_(&pool_arena_, p)];
}

/* A scavenge moves a cache whose spans of a class lie high above free
 * pages down to them, and the span it left, once empty, goes back to the
 * page heap: a burst's last spans would otherwise stay where it left
 * them.  A span a quarter of whose objects are handed out stays. */
START_TEST(test_scavenge_moves_down)
{
    enum { N = 40 };
    pool_arena_t *a = &pool_arena_;
    void *b = pool_malloc((size_t)(2 * POOL_MOVE_DOWN_PAGES) << POOL_PAGE_SHIFT);
    ck_assert_ptr_nonnull(b);
    uint32_t low = span_of(b);
    void *p[N];
    for (int i = 0; i < N; i++)
        p[i] = pool_malloc(96);
    uint32_t high = span_of(p[N - 1]);
    ck_assert_uint_ge(high, low + 2 * POOL_MOVE_DOWN_PAGES);
    ck_assert_uint_ge(a->spans[high].count, N);
    pool_free(b);
    pool_thread_scavenge();
    ck_assert_uint_eq(a->spans[high].holder, pool_tls_tcache_->slot + 1);
    for (int i = 0; i < N - 1; i++)
        pool_free(p[i]);
    pool_thread_scavenge();
    ck_assert_uint_eq(a->spans[high].holder, 0);
    ck_assert_uint_eq(a->spans[high].count - a->spans[high].nfree, 1);
    void *q = pool_malloc(96);
    ck_assert_uint_lt(span_of(q), high - POOL_MOVE_DOWN_PAGES);
    pool_test_assert_consistent();
    pool_free(p[N - 1]);
    ck_assert_uint_eq(a->spans[high].state, POOL_SPAN_SMALL);
    pool_thread_scavenge();
    ck_assert_uint_eq(a->spans[high].state, POOL_SPAN_FREE);
    pool_free(q);
    pool_test_assert_consistent();
}
END_TEST

/* A scavenge gives back the OS pages at the top of the cache's spans that
 * hold nothing handed out, once, and a fetch that takes objects there has
 * them in memory again. */
START_TEST(test_scavenge_purges_span_tops)
{
    enum { N = 400 };
    static void *p[N];
    pool_arena_t *a = &pool_arena_;
    size_t page = pool_prim_os_page_size_();
    test_own_classes();
    for (int i = 0; i < N; i++)
        p[i] = pool_malloc(16);
    uint32_t s = span_of(p[0]);
    ck_assert_uint_eq(span_of(p[N - 1]), s);
    pool_span_sh_t *sp = &a->spans[s];
    const char *top = (char *)pool_span_addr(a, sp) + ((size_t)sp->npages << POOL_PAGE_SHIFT) - page;
    ck_assert((char *)p[N - 1] >= top);
    ck_assert(pool_test_any_resident((uintptr_t)top, (uintptr_t)top + page));
    /* Top down, so that the quarter of the bin a scavenge keeps, the most
     * recently freed, lies in the span's first page. */
    for (int i = N - 1; i >= 40; i--)
        pool_free(p[i]);
    pool_thread_scavenge();
    ck_assert_uint_eq(sp->holder, pool_tls_tcache_->slot + 1);
    ck_assert_uint_eq(sp->returned, 1);
    ck_assert(!pool_test_any_resident((uintptr_t)top, (uintptr_t)top + page));
    ck_assert(pool_test_any_resident((uintptr_t)pool_span_addr(a, sp),
                                     (uintptr_t)pool_span_addr(a, sp) + page));
    pool_test_assert_consistent();
    /* Nothing more to give back: the next scavenge leaves it. */
    pool_thread_scavenge();
    ck_assert_uint_eq(sp->returned, 1);
    for (int i = 40; i < N; i++)
        p[i] = pool_malloc(16);
    ck_assert_uint_eq(sp->returned, 0);
    ck_assert(pool_test_any_resident((uintptr_t)top, (uintptr_t)top + page));
    for (int i = 0; i < N; i++)
        pool_free(p[i]);
    pool_test_assert_consistent();
}
END_TEST

/* The batch halves at each scavenge: after a burst grew it to the class's
 * largest, a light load's refills fetch a little, not a burst's batch,
 * once a few scavenges have run. */
START_TEST(test_scavenge_halves_batch)
{
    enum { N = 20000 };
    static void *p[N];
    uint32_t max = pool_classes_[pool_sizeclass_of(48)].max_batch;
    int n = 0;
    while (n < N && batch_of(48) < max)
        p[n++] = pool_malloc(48);
    ck_assert_uint_eq(batch_of(48), max);
    pool_thread_scavenge();
    ck_assert_uint_eq(batch_of(48), max / 2);
    for (uint32_t b = max / 2; b > 1; b /= 2)
        pool_thread_scavenge();
    ck_assert_uint_eq(batch_of(48), 1);
    pool_thread_scavenge();
    ck_assert_uint_eq(batch_of(48), 1);
    /* A refill after them takes one object's line, not a burst's batch. */
    while (len_of(48) > 0)
        p[n++] = pool_malloc(48);
    p[n++] = pool_malloc(48);
    ck_assert_uint_lt(len_of(48), 64 / 16);
    ck_assert_uint_eq(batch_of(48), 2);
    while (n > 0)
        pool_free(p[--n]);
    pool_test_assert_consistent();
}
END_TEST

START_TEST(test_watermark_releases_a_batch)
{
    enum { N = 3000 };
    static void *obj[N];
    const pool_class_t *c = &pool_classes_[pool_sizeclass_of(96)];
    ck_assert_uint_gt(N, c->watermark + c->max_batch);
    for (int i = 0; i < N; i++)
        obj[i] = pool_malloc(96);
    uint64_t released = 0;
    uint32_t maxlen = 0;
    for (int i = 0; i < N; i++) {
        uint32_t before = len_of(96);
        pool_free(obj[i]);
        if (len_of(96) < before) {
            /* Over the watermark: one batch went to central. */
            ck_assert_uint_eq(before, c->watermark);
            ck_assert_uint_eq(len_of(96), before + 1 - c->max_batch);
            released++;
        }
        if (len_of(96) > maxlen)
            maxlen = len_of(96);
    }
    ck_assert_uint_le(maxlen, c->watermark);
    ck_assert_uint_ge(released, 1);
    pool_test_assert_consistent();
    pool_test_assert_bytes_add_up();
    pool_thread_flush();
    ck_assert_uint_eq(len_of(96), 0);
    pool_usage_t u;
    pool_usage(&u);
    ck_assert_uint_eq(u.in_use, 0);
    pool_test_assert_consistent();
}
END_TEST

/* An object over 64 KiB is kept by no cache: its free sends its span to
 * the page heap at once, and a request of another size takes its pages. */
START_TEST(test_big_object_back_at_once)
{
    enum { BIG = 100 << 10, OTHER = 80 << 10 };
    void *keep = pool_malloc(BIG);
    void *p = pool_malloc(BIG);
    pool_usage_t before, after;
    pool_usage(&before);
    pool_free(p);
    pool_usage(&after);
    ck_assert_uint_eq(len_of(BIG), 0);
    ck_assert_uint_eq(after.cached, before.cached);
    ck_assert_uint_eq(after.free, before.free + (size_t)pool_classes_[pool_sizeclass_of(BIG)].pages *
                                                    POOL_PAGE_SIZE);
    ck_assert_uint_eq(pool_arena_.central[pool_sizeclass_of(BIG)].nempty, 0);
    void *q = pool_malloc(OTHER);
    ck_assert_ptr_eq(q, p);
    pool_free(q);
    pool_free(keep);
    pool_test_assert_consistent();
    pool_test_assert_bytes_add_up();
}
END_TEST

/* A bin that released objects and then ran dry grows its watermark by a
 * batch at the refill, up to four times the class's; a scavenge halves it
 * back, a flush resets it, and the bin holds what the watermark says. */
static uint32_t watermark_of(size_t size)
{
    return pool_tls_tcache_->own[pool_sizeclass_of(size)].watermark;
}

START_TEST(test_churn_grows_watermark)
{
    enum { N = 600, SIZE = 8192 };
    static void *obj[N];
    const pool_class_t *c = &pool_classes_[pool_sizeclass_of(SIZE)];
    uint32_t cap = c->watermark_max;
    ck_assert_uint_eq(cap, 4u * c->watermark);
    ck_assert_uint_gt(N, cap + c->max_batch);
    test_own_classes();
    /* A first round fills and releases, with no refill after a release. */
    for (int i = 0; i < N; i++)
        obj[i] = pool_malloc(SIZE);
    ck_assert_uint_eq(watermark_of(SIZE), c->watermark);
    for (int i = 0; i < N; i++)
        pool_free(obj[i]);
    ck_assert_uint_eq(watermark_of(SIZE), c->watermark);
    /* Each later round's first refill finds the bin churned. */
    uint32_t expect = c->watermark;
    for (int round = 0; round < 20; round++) {
        for (int i = 0; i < N; i++) {
            obj[i] = pool_malloc(SIZE);
            memset(obj[i], round, 64);
        }
        expect = expect + c->max_batch < cap ? expect + c->max_batch : cap;
        ck_assert_uint_eq(watermark_of(SIZE), expect);
        uint32_t maxlen = 0;
        for (int i = 0; i < N; i++) {
            pool_free(obj[i]);
            if (len_of(SIZE) > maxlen)
                maxlen = len_of(SIZE);
        }
        ck_assert_uint_eq(maxlen, expect);
        pool_test_assert_consistent();
    }
    ck_assert_uint_eq(expect, cap);
    uint32_t len = len_of(SIZE);
    ck_assert_uint_gt(len, c->watermark);
    pool_thread_scavenge();
    ck_assert_uint_eq(watermark_of(SIZE), cap / 2);
    ck_assert_uint_eq(len_of(SIZE), len / 4);
    pool_test_assert_consistent();
    for (int i = 0; i < 4; i++)
        pool_thread_scavenge();
    ck_assert_uint_eq(watermark_of(SIZE), c->watermark);
    /* Grown again, then flushed: the class's watermark and an empty bin. */
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < N; i++)
            obj[i] = pool_malloc(SIZE);
        for (int i = 0; i < N; i++)
            pool_free(obj[i]);
    }
    ck_assert_uint_gt(watermark_of(SIZE), c->watermark);
    pool_thread_flush();
    ck_assert_uint_eq(watermark_of(SIZE), c->watermark);
    ck_assert_uint_eq(len_of(SIZE), 0);
    pool_usage_t u;
    pool_usage(&u);
    ck_assert_uint_eq(u.in_use, 0);
    pool_test_assert_consistent();
}
END_TEST

START_TEST(test_random_sizes_keep_content)
{
    enum { N = 400 };
    static void *obj[N];
    static size_t len[N];
    unsigned seed = 12345;
    for (int round = 0; round < 6; round++) {
        for (int i = 0; i < N; i++) {
            seed = seed * 1103515245u + 12345u;
            size_t size = (seed >> 8) % ((seed & 1) ? 2048 : (300u << 10));
            if (obj[i] != NULL) {
                ck_assert_msg(pattern_intact(obj[i], len[i], (unsigned)i),
                              "block %d (%zu bytes) changed", i, len[i]);
                if (round % 2) {
                    obj[i] = pool_realloc(obj[i], size + 1);
                    ck_assert(pattern_intact(obj[i], len[i] < size + 1 ? len[i] : size + 1,
                                               (unsigned)i));
                } else {
                    pool_free(obj[i]);
                    obj[i] = pool_malloc(size);
                }
                len[i] = round % 2 ? size + 1 : size;
            } else {
                obj[i] = pool_malloc(size);
                len[i] = size;
            }
            ck_assert_ptr_nonnull(obj[i]);
            ck_assert(pool_owns(obj[i]));
            ck_assert_uint_eq((uintptr_t)obj[i] % 16, 0);
            ck_assert_uint_ge(pool_usable_size(obj[i]), len[i]);
            pattern_fill(obj[i], 0, len[i], (unsigned)i);
        }
        pool_test_assert_consistent();
        pool_test_assert_bytes_add_up();
    }
    for (int i = 0; i < N; i++) {
        ck_assert(pattern_intact(obj[i], len[i], (unsigned)i));
        pool_free(obj[i]);
    }
    pool_thread_flush();
    pool_usage_t u;
    pool_usage(&u);
    ck_assert_uint_eq(u.in_use, 0);
    pool_test_assert_consistent();
}
END_TEST

/* malloc's fast path takes the class from the cache's copy of the class
 * table: a thread that takes a slot gets the whole table, the empty cache
 * none (everything to the slow path), and each size up to 1 KiB gets its
 * class's block from the bin as from the slow path. */
START_TEST(test_cache_class_table)
{
    test_own_classes();
    for (size_t n = 0; n <= POOL_SMALL_LOOKUP_MAX; n++) {
        ck_assert_uint_eq(pool_empty_tcache_.class_small[n], 0);
        ck_assert_uint_eq(pool_tls_tcache_->class_small[n], pool_sizeclass_of(n));
        void *p = pool_malloc(n);
        pool_free(p);
        void *q = pool_malloc(n);
        ck_assert_ptr_eq(q, p);
        ck_assert_uint_eq(pool_usable_size(q), pool_classes_[pool_sizeclass_of(n)].size);
        pool_free(q);
    }
}
END_TEST

/* The usable size of every kind of pointer: 0 for NULL, the size of the
 * class whose span holds an object, the rest of the span from a pointer
 * into a big one, and the private heap's answer for a block of it. */
START_TEST(test_usable_size_of_every_kind)
{
    ck_assert_uint_eq(pool_usable_size(NULL), 0);
    /* A light class's first objects are its lender's (a larger class). */
    for (unsigned cls = 1; cls < POOL_NCLASSES; cls++) {
        size_t n = pool_classes_[cls].size, u;
        void *p = pool_malloc(n);
        u = pool_usable_size(p);
        ck_assert_uint_ge(u, n);
        ck_assert_uint_eq(pool_classes_[pool_sizeclass_of(u)].size, u);
        pool_free(p);
    }
    const size_t big = 2 * POOL_MAX_SMALL + 1;
    char *b = pool_malloc(big);
    size_t whole = pool_usable_size(b);
    ck_assert_uint_ge(whole, big);
    ck_assert_uint_eq(whole % POOL_PAGE_SIZE, 0);
    ck_assert_uint_eq(pool_usable_size(b + 100), whole - 100);
    pool_free(b);
    void *q = pool_prim_private_malloc_(40);
    ck_assert_ptr_nonnull(q);
    ck_assert(!pool_in_arena(q));
    ck_assert_uint_ge(pool_usable_size(q), 40);
    pool_prim_private_free_(q);
}
END_TEST

/* A thread's first objects of a class up to 1 KiB come from the 256-byte
 * class below it and the 1 KiB class above, 4 KiB of it per class: an
 * idle process's few objects of many classes share a few spans instead
 * of taking a page each.  A class used beyond that has spans of its own;
 * the lenders and classes over 1 KiB lend nothing. */
START_TEST(test_light_classes_borrow)
{
    static const size_t sizes[] = { 16, 48, 100, 128, 144, 240, 288, 480, 512, 576, 960 };
    static const size_t lender[] = { 256, 256, 256, 256, 256, 256, 1024, 1024, 1024, 1024, 1024 };
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        void *p = pool_malloc(sizes[i]);
        ck_assert_uint_eq(pool_usable_size(p), lender[i]);
    }
    /* Three classes share one span of 256-byte objects. */
    void *a = pool_malloc(16), *b = pool_malloc(64), *c = pool_malloc(200);
    uint32_t oi;
    pool_span_sh_t *s = pool_object_span_(&pool_arena_, a, &oi);
    ck_assert_ptr_nonnull(s);
    ck_assert_ptr_eq(pool_object_span_(&pool_arena_, b, &oi), s);
    ck_assert_ptr_eq(pool_object_span_(&pool_arena_, c, &oi), s);
    /* Freed, a borrowed object goes back to its own class's bin. */
    uint32_t len = len_of(256);
    pool_free(b);
    ck_assert_uint_eq(len_of(256), len + 1);
    ck_assert_uint_eq(len_of(64), 0);
    /* 16 of 16 bytes (two taken above), then the class's own. */
    for (int i = 2; i < 4096 / 256; i++)
        ck_assert_uint_eq(pool_usable_size(pool_malloc(16)), 256);
    ck_assert_uint_eq(pool_usable_size(pool_malloc(16)), 16);
    ck_assert_uint_eq(pool_usable_size(pool_malloc(16)), 16);
    ck_assert_uint_eq(pool_usable_size(pool_malloc(256)), 256);
    ck_assert_uint_eq(pool_usable_size(pool_malloc(1024)), 1024);
    ck_assert_uint_eq(pool_usable_size(pool_malloc(1152)), 1152);
    pool_test_assert_consistent();
}
END_TEST

/* A thread that spent a class's light budget and has freed every object
 * of the class by a flush gets the budget back, once; a class with an
 * object of its own still out at the flush does not. */
START_TEST(test_light_budget_given_back_once)
{
    void *p[64];
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < 64; i++)
            p[i] = pool_malloc(16);
        ck_assert_uint_eq(pool_usable_size(p[0]), 256);
        ck_assert_uint_eq(pool_usable_size(p[4096 / 256 - 1]), 256);
        ck_assert_uint_eq(pool_usable_size(p[4096 / 256]), 16);
        for (int i = 0; i < 64; i++)
            pool_free(p[i]);
        pool_thread_flush();
    }
    void *q = pool_malloc(16);
    ck_assert_uint_eq(pool_usable_size(q), 16);
    pool_free(q);
    for (int i = 0; i < 64; i++)
        p[i] = pool_malloc(48);
    ck_assert_uint_eq(pool_usable_size(p[63]), 48);
    for (int i = 0; i < 63; i++)
        pool_free(p[i]);
    pool_thread_flush();
    q = pool_malloc(48);
    ck_assert_uint_eq(pool_usable_size(q), 48);
    pool_free(q);
    pool_free(p[63]);
    pool_test_assert_consistent();
}
END_TEST

START_TEST(test_calloc_and_realloc)
{
    char *p = pool_malloc(200);
    memset(p, 0xff, 200);
    pool_free(p);
    char *z = pool_calloc(25, 8); /* likely the recycled block */
    for (int i = 0; i < 200; i++)
        ck_assert_int_eq(z[i], 0);
    errno = 0;
    ck_assert_ptr_null(pool_calloc(SIZE_MAX / 2, 3));
    ck_assert_int_eq(errno, ENOMEM);
    /* Shrinking a little keeps the block; growing past the class moves it. */
    char *r = pool_realloc(z, 150);
    ck_assert_ptr_eq(r, z);
    char *g = pool_realloc(r, 5000);
    ck_assert_ptr_ne(g, r);
    ck_assert_int_eq(g[149], 0);
    ck_assert_ptr_null(pool_realloc(g, 0));
    void *m0 = pool_malloc(0), *m1 = pool_malloc(0);
    ck_assert_ptr_nonnull(m0);
    ck_assert_ptr_ne(m0, m1);
    pool_free(m0);
    pool_free(m1);
    pool_free(NULL);
    /* A private block moves into the arena on realloc. */
    char *priv = pool_prim_private_malloc_(40);
    memset(priv, 7, 40);
    ck_assert_uint_ge(pool_usable_size(priv), 40);
    char *moved = pool_realloc(priv, 80);
    ck_assert(pool_owns(moved));
    ck_assert_int_eq(moved[39], 7);
    pool_free(moved);
    pool_test_assert_consistent();
}
END_TEST

static void *thread_body(void *arg)
{
    void **keep = arg;
    for (int i = 0; i < 1000; i++)
        pool_free(pool_malloc((size_t)(i % 700) + 1));
    *keep = pool_malloc(333);
    return (void *)(intptr_t)pool_tls_tcache_->slot;
}

START_TEST(test_thread_exit_returns_slot)
{
    pthread_t t;
    void *keep = NULL, *ret;
    ck_assert_int_eq(pthread_create(&t, NULL, thread_body, &keep), 0);
    ck_assert_int_eq(pthread_join(t, &ret), 0);
    int slot = (int)(intptr_t)ret;
    ck_assert_int_ne(slot, pool_slot());
    pool_slot_sh_t *s = &pool_arena_.slots[slot];
    ck_assert_uint_eq(s->xstate, POOL_SLOT_FREE);
    for (unsigned cls = 1; cls < POOL_NCLASSES; cls++)
        ck_assert_uint_eq(pool_bin_len(&pool_arena_.tcaches[slot], cls), 0);
    ck_assert(pool_owns(keep));
    pool_free(keep);
    pool_test_assert_consistent();
}
END_TEST

/* The child of an attached process that copies the arena at fork (as
 * SHMPOOL_MODE=process does) sees its heap as at fork, privately. */
/* A destructor that runs after the pool's (a later key) still allocates
 * and frees; the exiting thread must not take a slot again. */
static pthread_key_t late_key;
static void *late_block;

static void late_destructor(void *arg)
{
    pool_free(arg);             /* an arena block, after the cache is gone */
    late_block = pool_malloc(64); /* the private heap from here on */
}

static void *late_body(void *arg)
{
    (void)arg;
    pool_free(pool_malloc(32)); /* takes a slot and registers the pool's key */
    pthread_setspecific(late_key, pool_malloc(200));
    return NULL;
}

START_TEST(test_thread_exit_destructors_after_ours)
{
    ck_assert_int_eq(pthread_key_create(&late_key, late_destructor), 0);
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, late_body, NULL), 0);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    ck_assert_ptr_nonnull(late_block);
    ck_assert(!pool_owns(late_block));
    pool_free(late_block);
    for (unsigned i = 0; i < POOL_MAX_SLOTS; i++)
        if ((int)i != pool_slot())
            ck_assert_msg(pool_arena_.slots[i].xstate == POOL_SLOT_FREE, "slot %u taken", i);
    pool_test_assert_consistent();
}
END_TEST

START_TEST(test_fork_child_detaches)
{
    char *p = pool_malloc(500);
    pattern_fill(p, 0, 500, 1);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int bad = 0;
        bad |= pool_attached() ? 1 : 0;
        bad |= pool_slot() != -1 ? 2 : 0;
        bad |= pattern_intact(p, 500, 1) ? 0 : 4;
        pattern_fill(p, 0, 500, 2); /* must not reach the parent's block */
        pool_free(p);              /* ignored and counted */
        pool_usage_t u;
        pool_usage(&u);
        bad |= u.foreign_frees == 1 ? 0 : 8;
        void *q = pool_malloc(100);
        bad |= pool_owns(q) ? 16 : 0;
        pool_free(q);
        bad |= pool_attach() == ENOENT ? 0 : 32; /* the shared arena is gone here */
        _exit(bad);
    }
    int status;
    waitpid(pid, &status, 0);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %#x", status);
    ck_assert_msg(pattern_intact(p, 500, 1), "the child's writes reached the parent");
    /* The block is still the parent's to use and free. */
    void *again = pool_malloc(500);
    ck_assert_ptr_ne(again, p);
    pool_free(again);
    pool_free(p);
    pool_test_assert_consistent();
}
END_TEST

START_TEST(test_stats_json)
{
    test_own_classes();
    void *p = pool_malloc(64);
    char buf[16384];
    size_t n = pool_stats_json(buf, sizeof buf);
    ck_assert_uint_lt(n, sizeof buf);
    ck_assert_uint_eq(strlen(buf), n);
    ck_assert_msg(strncmp(buf, "{\"allocator\":\"shmpool\"", 22) == 0, "%s", buf);
    ck_assert_int_eq(buf[n - 1], '}');
    ck_assert_ptr_nonnull(strstr(buf, "\"arena\":{\"reserved\":"));
    ck_assert_ptr_nonnull(strstr(buf, pool_config_stats ? "\"stats\":true" : "\"stats\":false"));
    if (pool_config_stats)
        ck_assert_ptr_nonnull(strstr(buf, "{\"class\":4,\"size\":64,"));
    /* Truncated, it still says how long the whole is, as snprintf does.
     * The lock counters only grow, and each call takes locks, so the
     * length can only grow from one call to the next. */
    char small[32];
    size_t m = pool_stats_json(small, sizeof small);
    ck_assert_uint_eq(strlen(small), sizeof small - 1);
    ck_assert_int_eq(strncmp(small, buf, sizeof small - 1), 0);
    ck_assert_uint_ge(m, n);
    ck_assert_uint_le(m, pool_stats_json(buf, sizeof buf));
    pool_free(p);
}
END_TEST

/* Freed twice while still in the thread cache, with another free between:
 * every build aborts at the second free, before anything can hand the
 * object out twice. */
START_TEST(test_double_free_aborts)
{
    void *p = pool_malloc(48), *q = pool_malloc(48);
    pool_free(p);
    pool_free(q);
    pool_free(p);
    /* Not a later check (the fixture's teardown gives the bin back). */
    ck_abort_msg("the second free of %p returned", p);
}
END_TEST

/* Freed twice with the object back in its span in between. */
START_TEST(test_double_free_from_central_aborts)
{
    void *p = pool_malloc(48);
    pool_free(p);
    pool_thread_flush();
    pool_free(p);
    pool_thread_flush();
}
END_TEST

/* Freed twice with the object back in its span in between, the span
 * still the cache's own, and nothing else on the object's OS page: a
 * scavenge gives the bin back, leaves the span with its owner and gives
 * the page back, zeroing the object's mark, so that only the cache's page
 * map sends the second free to the checks. */
START_TEST(test_double_free_after_scavenge_aborts)
{
    size_t size = pool_prim_os_page_size_();
    void *keep = pool_malloc(size), *p = pool_malloc(size);
    pool_free(p);
    for (int k = 0; k < 8 && len_of(size) > 0; k++)
        pool_thread_scavenge();
    ck_assert_uint_eq(len_of(size), 0);
    pool_free(p);
    ck_abort_msg("the second free of %p returned (%p kept)", p, keep);
}
END_TEST

START_TEST(test_invalid_free_aborts)
{
    pool_malloc(48);
    /* A page the page heap never handed out. */
    pool_free((char *)pool_arena_.data + pool_arena_.data_size - POOL_PAGE_SIZE);
}
END_TEST

START_TEST(test_interior_free_aborts)
{
    char *p = pool_malloc(48);
    pool_free(p + 16);
}
END_TEST

/* A class of a power-of-two size: free's fast path itself sees that no
 * object starts there. */
START_TEST(test_interior_free_pow2_aborts)
{
    char *p = pool_malloc(64);
    pool_free(p + 16);
    ck_abort_msg("free(%p) returned", (void *)(p + 16));
}
END_TEST

/* Written after its free, a cached object's link names a live object (of
 * another process, say): the allocation that would hand it out aborts. */
START_TEST(test_forged_link_aborts)
{
    void *live = pool_malloc(64), *p = pool_malloc(64);
    pool_free(p);
    *(void **)p = live;
    ck_assert_ptr_eq(pool_malloc(64), p);
    void *q = pool_malloc(64);
    ck_abort_msg("a forged link handed out %p (the live object is %p)", q, live);
}
END_TEST

/* The same with bytes that point nowhere: an abort with a message, not a
 * fault inside malloc. */
START_TEST(test_garbage_link_aborts)
{
    void *p = pool_malloc(64);
    pool_free(p);
    memset(p, 'A', sizeof(void *));
    ck_assert_ptr_eq(pool_malloc(64), p);
    void *q = pool_malloc(64);
    ck_abort_msg("a garbage link handed out %p", q);
}
END_TEST

/* A release of the bin meets the forged link first: the walk aborts
 * rather than give the live object back to its span. */
START_TEST(test_forged_link_in_flush_aborts)
{
    void *live = pool_malloc(64), *p = pool_malloc(64);
    pool_free(p);
    *(void **)p = live;
    pool_thread_flush();
    ck_abort_msg("a flush gave back the live object %p", live);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Remote frees                                                              */
/* ------------------------------------------------------------------------ */

/* Blocks of 64 B one thread allocates and another frees: fewer than a
 * remote list holds before it goes back to the central cache. */
#define REMOTE_N 40

typedef struct remote_s {
    void *blocks[REMOTE_N];
    uint32_t pending; /* the freeing thread's remote list, after the frees */
    uint32_t cached;  /* its bin */
    volatile int freed;
} remote_t;

/* Free another thread's blocks: none may join this thread's bin. */
static void *remote_free_body(void *arg)
{
    remote_t *r = arg;
    for (int i = 0; i < REMOTE_N; i++)
        pool_free(r->blocks[i]);
    unsigned cls = pool_sizeclass_of(64);
    r->pending = pool_list_len(pool_tcache_list(pool_tls_tcache_, cls, true));
    r->cached = pool_bin_len(pool_tls_tcache_, cls);
    return NULL;
}

static bool handed_out(void *p)
{
    uint32_t oi;
    pool_span_sh_t *s = pool_object_span_(&pool_arena_, p, &oi);
    ck_assert_ptr_nonnull(s);
    return s->bitmap[oi / 64] & (UINT64_C(1) << (oi % 64));
}

/* Objects in the calling thread's inbox of a size's class. */
static uint32_t inbox_of(size_t size)
{
    return pool_inbox_count(pool_tls_tcache_->own[pool_sizeclass_of(size)].xinbox);
}

/* REMOTE_N blocks of 64 B allocated here, freed by another thread, into
 * *r; returns the span of the first. */
static pool_span_sh_t *freed_in_a_thread(remote_t *r)
{
    memset(r, 0, sizeof *r);
    test_own_classes();
    for (int i = 0; i < REMOTE_N; i++)
        r->blocks[i] = pool_malloc(64);
    uint32_t oi;
    pool_span_sh_t *s = pool_object_span_(&pool_arena_, r->blocks[0], &oi);
    pthread_t t;
    ck_assert_int_eq(pthread_create(&t, NULL, remote_free_body, r), 0);
    ck_assert_int_eq(pthread_join(t, NULL), 0);
    return s;
}

/* Thread B frees A's blocks: they go onto A's inbox, still handed out in
 * their span (no trip to it under the class lock) and on none of B's
 * lists; A's bin, once empty, takes them whole and hands them out again
 * before any other. */
START_TEST(test_remote_free_into_owners_inbox)
{
    remote_t r;
    pool_span_sh_t *s = freed_in_a_thread(&r);
    ck_assert_uint_eq(s->holder, pool_slot() + 1);
    ck_assert_uint_eq(r.pending, 0);
    ck_assert_uint_eq(r.cached, 0);
    ck_assert_uint_eq(inbox_of(64), REMOTE_N);
    for (int i = 0; i < REMOTE_N; i++)
        ck_assert_msg(handed_out(r.blocks[i]), "block %d went back to its span", i);
    pool_test_assert_consistent();
    pool_test_assert_bytes_add_up();
    /* What A's bin holds first, then the inbox's blocks, none fetched. */
    uint32_t ahead = len_of(64);
    uint64_t fetches = pool_arena_.cstats[pool_sizeclass_of(64)].fetches;
    void *again[POOL_FETCH_MAX + REMOTE_N];
    ck_assert_uint_le(ahead, POOL_FETCH_MAX);
    for (uint32_t i = 0; i < ahead + REMOTE_N; i++)
        again[i] = pool_malloc(64);
    ck_assert_uint_eq(inbox_of(64), 0);
    if (pool_config_stats)
        ck_assert_uint_eq(pool_arena_.cstats[pool_sizeclass_of(64)].fetches, fetches);
    for (int i = 0; i < REMOTE_N; i++) {
        bool found = false;
        for (uint32_t k = 0; k < ahead + REMOTE_N && !found; k++)
            found = again[k] == r.blocks[i];
        ck_assert_msg(found, "block %d (%p) not reused by its owner", i, r.blocks[i]);
    }
    for (uint32_t i = 0; i < ahead + REMOTE_N; i++)
        pool_free(again[i]);
    pool_test_assert_consistent();
}
END_TEST

/* A's inbox holds B's frees when A flushes: they go back to their span
 * with A's others, and the span is no one's. */
START_TEST(test_inbox_given_back_by_flush)
{
    remote_t r;
    pool_span_sh_t *s = freed_in_a_thread(&r);
    ck_assert_uint_eq(inbox_of(64), REMOTE_N);
    pool_thread_flush();
    ck_assert_uint_eq(inbox_of(64), 0);
    ck_assert_uint_eq(s->holder, 0);
    for (int i = 0; i < REMOTE_N; i++)
        ck_assert_msg(!handed_out(r.blocks[i]), "block %d still handed out", i);
    pool_test_assert_consistent();
    /* Open again: the next thread's frees land there. */
    freed_in_a_thread(&r);
    ck_assert_uint_eq(inbox_of(64), REMOTE_N);
    pool_test_assert_consistent();
}
END_TEST

/* A flushes, so its span is no one's, while its blocks live on; B frees
 * them onto its remote list (no owner, no inbox) and takes the span over:
 * the blocks wait on B's remote list for a span that is now B's own, which
 * the heap check takes as it is. */
typedef struct takeover_s {
    remote_t r;
    pool_span_sh_t *span;
    uint16_t holder;   /* the span's holder after B's fetch */
    char msg[200];
    int check;         /* pool_check's answer in B */
} takeover_t;

static void *takeover_body(void *arg)
{
    takeover_t *t = arg;
    remote_free_body(&t->r);
    test_own_classes();
    void *p = pool_malloc(64);
    t->holder = t->span->holder;
    t->check = pool_check(t->msg, sizeof t->msg);
    pool_free(p);
    return NULL;
}

START_TEST(test_remote_list_of_a_span_taken_over)
{
    static takeover_t t;
    memset(&t, 0, sizeof t);
    test_own_classes();
    for (int i = 0; i < REMOTE_N; i++)
        t.r.blocks[i] = pool_malloc(64);
    uint32_t oi;
    t.span = pool_object_span_(&pool_arena_, t.r.blocks[0], &oi);
    pool_thread_flush();
    ck_assert_uint_eq(t.span->holder, 0);
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, takeover_body, &t), 0);
    ck_assert_int_eq(pthread_join(th, NULL), 0);
    ck_assert_uint_eq(t.r.pending, REMOTE_N);
    ck_assert_uint_ne(t.holder, 0);
    ck_assert_uint_ne(t.holder, pool_slot() + 1);
    ck_assert_msg(t.check == 0, "pool_check in the thread that took the span over: %s", t.msg);
    pool_test_assert_consistent();
}
END_TEST

static void *remote_pending_body(void *arg)
{
    remote_t *r = arg;
    remote_free_body(r);
    r->freed = 1;
    for (;;)
        pause();
    return NULL;
}

/* A process dies while a thread's inbox holds the blocks another of its
 * threads freed: the reap gives them back as cached, and nothing leaks. */
START_TEST(test_remote_frees_pending_at_death)
{
    pool_usage_t u;
    pool_usage(&u);
    size_t in_use = u.in_use;
    /* The child's bin of 64-byte blocks at its death. */
    uint32_t *owner_bin = mmap(NULL, sizeof *owner_bin, PROT_READ | PROT_WRITE,
                               MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert_ptr_ne(owner_bin, MAP_FAILED);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        static remote_t r;
        alarm(10);
        if (pool_attach() != 0)
            _exit(1);
        test_own_classes();
        for (int i = 0; i < REMOTE_N; i++)
            r.blocks[i] = pool_malloc(64);
        pthread_t t;
        if (pthread_create(&t, NULL, remote_pending_body, &r) != 0)
            _exit(2);
        while (!r.freed)
            sched_yield();
        if (r.pending != 0 || inbox_of(64) != REMOTE_N)
            _exit(3);
        *owner_bin = len_of(64);
        raise(SIGKILL);
    }
    pool_test_assert_killed(pid, "the process with remote frees pending");
    pool_reap_report_t rep;
    ck_assert_int_eq(pool_reap(pid, &rep), 0);
    /* Its bin and its inbox, nothing else. */
    ck_assert_uint_eq(rep.cached, (uint64_t)(*owner_bin + REMOTE_N) * 64);
    ck_assert_uint_eq(rep.leaked, 0);
    munmap(owner_bin, sizeof *owner_bin);
    pool_test_assert_settled(in_use);
}
END_TEST

/* A child that attaches (0 in the child, with 10 s to live), or its pid. */
static pid_t fork_attached(void)
{
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        alarm(10);
        if (pool_attach() != 0)
            _exit(1);
        test_own_classes();
    }
    return pid;
}

/* Processes O and F, and what O left for the test to read. */
typedef struct xproc_s {
    void *blocks[REMOTE_N];
    uint32_t owner_bin;    /* O's bin of 64-byte blocks at its death */
    uint32_t owner_inbox;  /* its inbox */
    volatile int step;     /* 1: O allocated; 2: F is reaped, O reports */
} xproc_t;

/* Blocks F frees before it dies: in debug builds it dies inside the next
 * push (the crash point's fifth hit), its block linked and not yet on the
 * inbox. */
#define XPROC_PUSHED 4

/* O allocates REMOTE_N blocks and hands them to F, another process, which
 * dies while it frees them onto O's inbox.  F's reap finds nothing of its
 * own; the block of the push it died in stays handed out, O's (a leak only
 * while O lives on: its tag is O's).  Then O dies with a full inbox: its
 * reap gives the inbox back as cached and every block F did not push as
 * live, and nothing leaks. */
START_TEST(test_freer_killed_mid_push_then_owner)
{
    pool_usage_t u;
    pool_usage(&u);
    size_t in_use = u.in_use;
    xproc_t *x = mmap(NULL, sizeof *x, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert_ptr_ne(x, MAP_FAILED);
    memset(x, 0, sizeof *x);
    pid_t owner = fork_attached();
    if (owner == 0) {
        for (int i = 0; i < REMOTE_N; i++)
            x->blocks[i] = pool_malloc(64);
        x->step = 1;
        while (x->step != 2)
            sched_yield();
        x->owner_bin = len_of(64);
        x->owner_inbox = inbox_of(64);
        raise(SIGKILL);
    }
    while (x->step != 1)
        sched_yield();
    pid_t freer = fork_attached();
    if (freer == 0) {
        setenv("SHMPOOL_CRASH", "tcache.inbox_push:5", 1);
        pool_crash_config_();
        for (int i = 0; i < XPROC_PUSHED + (POOL_CONFIG_DEBUG > 0); i++)
            pool_free(x->blocks[i]);
        raise(SIGKILL);
    }
    pool_test_assert_killed(freer, "the freer");
    pool_reap_report_t rep;
    ck_assert_int_eq(pool_reap(freer, &rep), 0);
    ck_assert_uint_eq(rep.cached + rep.live + rep.leaked, 0);
    pool_test_assert_consistent();
    x->step = 2;
    pool_test_assert_killed(owner, "the owner");
    ck_assert_uint_eq(x->owner_inbox, XPROC_PUSHED);
    ck_assert_int_eq(pool_reap(owner, &rep), 0);
    ck_assert_uint_eq(rep.cached, (uint64_t)(x->owner_bin + XPROC_PUSHED) * 64);
    ck_assert_uint_eq(rep.live, (uint64_t)(REMOTE_N - XPROC_PUSHED) * 64);
    ck_assert_uint_eq(rep.leaked, 0);
    munmap(x, sizeof *x);
    pool_test_assert_settled(in_use);
}
END_TEST

Suite *make_tcache_suite(void)
{
    Suite *s = suite_create("tcache");
    TCase *tc = tcase_create("bins");
    tcase_add_checked_fixture(tc, pool_test_create_attach, pool_test_destroy);
    tcase_add_test(tc, test_batch_growth);
    tcase_add_test(tc, test_refill_maps_used_pages_around);
    tcase_add_test(tc, test_usable_size_of_every_kind);
    tcase_add_test(tc, test_scavenge_quarters_bins);
    tcase_add_test(tc, test_scavenge_halves_batch);
    tcase_add_test(tc, test_scavenge_moves_down);
    tcase_add_test(tc, test_scavenge_purges_span_tops);
    tcase_add_test(tc, test_watermark_releases_a_batch);
    tcase_add_test(tc, test_big_object_back_at_once);
    tcase_add_test(tc, test_churn_grows_watermark);
    tcase_add_test(tc, test_random_sizes_keep_content);
    tcase_add_test(tc, test_cache_class_table);
    tcase_add_test(tc, test_light_classes_borrow);
    tcase_add_test(tc, test_light_budget_given_back_once);
    tcase_add_test(tc, test_calloc_and_realloc);
    tcase_add_test(tc, test_thread_exit_returns_slot);
    tcase_add_test(tc, test_thread_exit_destructors_after_ours);
    tcase_add_test(tc, test_fork_child_detaches);
    tcase_add_test(tc, test_stats_json);
    tcase_add_test(tc, test_remote_free_into_owners_inbox);
    tcase_add_test(tc, test_inbox_given_back_by_flush);
    tcase_add_test(tc, test_remote_list_of_a_span_taken_over);
    tcase_set_timeout(tc, 30);
    suite_add_tcase(s, tc);

    tc = tcase_create("processes");
    tcase_add_checked_fixture(tc, pool_test_create, pool_test_destroy);
    tcase_add_test(tc, test_remote_frees_pending_at_death);
    tcase_add_test(tc, test_freer_killed_mid_push_then_owner);
    suite_add_tcase(s, tc);

    tc = tcase_create("misuse");
    tcase_add_checked_fixture(tc, pool_test_create_attach, pool_test_destroy);
    tcase_add_test_raise_signal(tc, test_double_free_aborts, SIGABRT);
    tcase_add_test_raise_signal(tc, test_double_free_from_central_aborts, SIGABRT);
    tcase_add_test_raise_signal(tc, test_double_free_after_scavenge_aborts, SIGABRT);
    tcase_add_test_raise_signal(tc, test_invalid_free_aborts, SIGABRT);
    tcase_add_test_raise_signal(tc, test_interior_free_pow2_aborts, SIGABRT);
    /* Release builds check a class of another size in full only on the
     * slow path (pool_free_fast). */
    if (POOL_CONFIG_DEBUG > 0)
        tcase_add_test_raise_signal(tc, test_interior_free_aborts, SIGABRT);
    tcase_add_test_raise_signal(tc, test_forged_link_aborts, SIGABRT);
    tcase_add_test_raise_signal(tc, test_garbage_link_aborts, SIGABRT);
    tcase_add_test_raise_signal(tc, test_forged_link_in_flush_aborts, SIGABRT);
    suite_add_tcase(s, tc);
    return s;
}

/* SPDX-License-Identifier: BSD-2-Clause */
/* The central cache: batches, spans in and out, repairs, recovery of a lock
 * whose owner died, and pool_check() catching injected corruption. */
#include "config.h"

#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check_pool.h"
#include "pool-internal.h"
#include "prim/prim.h"

#define CLS_96 6 /* 96-byte objects, 85 per span */

static uint32_t span_of(void *p)
{
    return pool_arena_.pm_span[pool_pagemap_page_(&pool_arena_, p)];
}

START_TEST(test_fetch_batch)
{
    pool_arena_t *a = &pool_arena_;
    ck_assert_uint_eq(pool_classes_[CLS_96].size, 96);
    void *obj[POOL_FETCH_MAX];
    uint32_t got = pool_central_fetch_(a, CLS_96, 10, NULL, obj);
    ck_assert_uint_eq(got, 10);
    for (uint32_t i = 1; i < got; i++)
        ck_assert((char *)obj[i] > (char *)obj[i - 1]); /* address order */
    pool_span_sh_t *s = &a->spans[span_of(obj[0])];
    ck_assert_uint_eq(s->nfree, s->count - 10);
    ck_assert_uint_eq(a->central[CLS_96].nspans, 1);
    pool_test_assert_consistent();
    pool_central_release_(a, CLS_96, obj, 10);
    ck_assert_uint_eq(s->nfree, s->count);
    /* The one wholly free span of the class is kept. */
    ck_assert_uint_eq(a->central[CLS_96].nspans, 1);
    ck_assert_uint_eq(a->central[CLS_96].nempty, 1);
    pool_test_assert_consistent();
}
END_TEST

START_TEST(test_fetch_across_spans_and_return)
{
    pool_arena_t *a = &pool_arena_;
    uint32_t count = pool_classes_[CLS_96].count;
    uint32_t keep = pool_classes_[CLS_96].keep_empty;
    void *o1[POOL_FETCH_MAX], *o2[POOL_FETCH_MAX];
    ck_assert_uint_ge(keep, 2);
    ck_assert_uint_eq(pool_central_fetch_(a, CLS_96, count, NULL, o1), count);
    ck_assert_uint_eq(pool_central_fetch_(a, CLS_96, 6, NULL, o2), 6);
    ck_assert_uint_eq(a->central[CLS_96].nspans, 2);
    uint32_t first = span_of(o1[0]), second = span_of(o2[0]);
    ck_assert_uint_ne(first, second);
    ck_assert_uint_eq(a->spans[first].listed, 0); /* full: off the list */
    pool_test_assert_consistent();
    uint64_t frees = a->ph->frees;
    pool_central_release_(a, CLS_96, o1, count);
    pool_central_release_(a, CLS_96, o2, 6);
    /* Both wholly free, both within the class's budget: kept. */
    ck_assert_uint_eq(a->central[CLS_96].nspans, 2);
    ck_assert_uint_eq(a->central[CLS_96].nempty, 2);
    ck_assert_uint_eq(a->ph->frees, frees);
    pool_test_assert_consistent();
}
END_TEST

/* A fetch takes the lowest span on the class's list, not the one a
 * release put at its head: a cache's objects gather at the bottom of the
 * heap. */
START_TEST(test_fetch_takes_the_lowest_span)
{
    pool_arena_t *a = &pool_arena_;
    uint32_t count = pool_classes_[CLS_96].count;
    void *lo[POOL_FETCH_MAX], *hi[POOL_FETCH_MAX], *obj[POOL_FETCH_MAX];
    ck_assert_uint_ge(pool_classes_[CLS_96].keep_empty, 2);
    ck_assert_uint_eq(pool_central_fetch_(a, CLS_96, count, NULL, lo), count);
    ck_assert_uint_eq(pool_central_fetch_(a, CLS_96, count, NULL, hi), count);
    uint32_t low = span_of(lo[0]), high = span_of(hi[0]);
    ck_assert_uint_lt(low, high);
    pool_central_release_(a, CLS_96, lo, count);
    pool_central_release_(a, CLS_96, hi, count);
    ck_assert_uint_eq(a->central[CLS_96].head, high);
    ck_assert_uint_eq(pool_central_fetch_(a, CLS_96, 4, NULL, obj), 4);
    ck_assert_uint_eq(span_of(obj[0]), low);
    pool_central_release_(a, CLS_96, obj, 4);
    pool_test_assert_consistent();
}
END_TEST

/* A class keeps keep_empty wholly free spans; the next one that empties
 * goes to the page heap. */
START_TEST(test_empty_spans_beyond_budget_go_back)
{
    pool_arena_t *a = &pool_arena_;
    uint32_t count = pool_classes_[CLS_96].count;
    uint32_t keep = pool_classes_[CLS_96].keep_empty;
    static void *obj[1024][POOL_FETCH_MAX];
    ck_assert_uint_lt(keep, 1024);
    for (uint32_t i = 0; i <= keep; i++)
        ck_assert_uint_eq(pool_central_fetch_(a, CLS_96, count, NULL, obj[i]), count);
    ck_assert_uint_eq(a->central[CLS_96].nspans, keep + 1);
    uint64_t frees = a->ph->frees;
    uint32_t last = span_of(obj[keep][0]);
    for (uint32_t i = 0; i <= keep; i++)
        pool_central_release_(a, CLS_96, obj[i], count);
    ck_assert_uint_eq(a->central[CLS_96].nspans, keep);
    ck_assert_uint_eq(a->central[CLS_96].nempty, keep);
    ck_assert_uint_eq(a->ph->frees, frees + 1);
    ck_assert_uint_eq(a->spans[last].state, POOL_SPAN_FREE);
    pool_test_assert_consistent();
}
END_TEST

/* Three spans of the 96-byte class taken whole and given back: three
 * empty spans kept by the class. */
static void three_empty_spans(pool_arena_t *a)
{
    uint32_t count = pool_classes_[CLS_96].count;
    void *obj[3][POOL_FETCH_MAX];
    for (unsigned i = 0; i < 3; i++)
        ck_assert_uint_eq(pool_central_fetch_(a, CLS_96, count, NULL, obj[i]), count);
    for (unsigned i = 0; i < 3; i++)
        pool_central_release_(a, CLS_96, obj[i], count);
}

/* Kept empty spans that stay empty through a whole decay period go to the
 * page heap at its end, but one.  Periods are ended by moving their start
 * back rather than by waiting. */
START_TEST(test_empty_spans_decay)
{
    pool_arena_t *a = &pool_arena_;
    pool_central_sh_t *c = &a->central[CLS_96];
    void *two[POOL_FETCH_MAX];
    ck_assert_uint_ge(pool_classes_[CLS_96].keep_empty, 3);
    three_empty_spans(a);
    ck_assert_uint_eq(c->nempty, 3);
    uint64_t frees = a->ph->frees;
    /* The period in which they emptied ends: they were not empty all of it. */
    c->decay_start_ns -= POOL_DECAY_NS;
    ck_assert_uint_eq(pool_central_fetch_(a, CLS_96, 2, NULL, two), 2);
    pool_central_release_(a, CLS_96, two, 2);
    ck_assert_uint_eq(c->nempty, 3);
    ck_assert_uint_eq(a->ph->frees, frees);
    /* A period in which two of them stayed empty (one lent an object). */
    c->decay_start_ns -= POOL_DECAY_NS;
    ck_assert_uint_eq(pool_central_fetch_(a, CLS_96, 2, NULL, two), 2);
    pool_central_release_(a, CLS_96, two, 2);
    ck_assert_uint_eq(c->nempty, 2);
    ck_assert_uint_eq(c->nspans, 2);
    ck_assert_uint_eq(a->ph->frees, frees + 1);
    pool_test_assert_consistent();
}
END_TEST

/* A class gone quiet: pool_central_decay_ ends its period once it has run
 * its length with no operation of the class's own.  Empty spans came to
 * the class during that period, so it is in use and keeps one of those
 * that stayed empty all of it; the next period, to which none came, ends
 * with none kept. */
START_TEST(test_quiet_class_decays)
{
    pool_arena_t *a = &pool_arena_;
    pool_central_sh_t *c = &a->central[CLS_96];
    three_empty_spans(a);
    ck_assert_uint_eq(c->nempty, 3);
    ck_assert_uint_eq(c->nempty_min, 1);
    uint64_t frees = a->ph->frees;
    pool_central_decay_(a, CLS_96, 0); /* the period has just begun */
    ck_assert_uint_eq(c->nempty_min, 1);
    /* Over: the first span released started it (its release ended the
     * one before) and stayed empty all of it, and is the one kept; the
     * other two emptied during it. */
    c->decay_start_ns -= POOL_DECAY_NS;
    pool_central_decay_(a, CLS_96, 0);
    ck_assert_uint_eq(c->nempty, 3);
    ck_assert_uint_eq(c->nempty_min, 3);
    ck_assert_uint_eq(a->ph->frees, frees);
    pool_test_assert_consistent();
    /* A quiet period through which all three stayed empty: none is kept. */
    c->decay_start_ns -= POOL_DECAY_NS;
    pool_central_decay_(a, CLS_96, 0);
    ck_assert_uint_eq(c->nempty, 0);
    ck_assert_uint_eq(c->nspans, 0);
    ck_assert_uint_eq(a->ph->frees, frees + 3);
    pool_test_assert_consistent();
}
END_TEST

/* The empty spans a class gives the page heap at the end of its period
 * were idle through all of it: they count as free since the page heap's
 * own period began, so that period's end gives them back, rather than
 * the end of the next one, a second later. */
START_TEST(test_decayed_spans_go_back_with_the_period)
{
    pool_arena_t *a = &pool_arena_;
    pool_central_sh_t *c = &a->central[CLS_96];
    three_empty_spans(a);
    pool_pageheap_trim_(a);
    ck_assert_uint_eq(pool_pageheap_cushion_(a->ph), 0);
    /* The page heap's period has just begun: the spans arrive within it. */
    a->ph->decay_start_ns = pool_prim_now_coarse_ns_();
    uint64_t returned = a->ph->returned_pages;
    /* Two quiet class periods: all three spans go to the page heap. */
    c->decay_start_ns -= 2 * POOL_DECAY_NS;
    pool_central_decay_(a, CLS_96, 0);
    c->decay_start_ns -= 2 * POOL_DECAY_NS;
    pool_central_decay_(a, CLS_96, 0);
    ck_assert_uint_eq(c->nspans, 0);
    a->ph->decay_start_ns -= 2 * POOL_DECAY_NS;
    pool_decay();
    ck_assert_uint_ge(a->ph->returned_pages - returned, 3u * pool_classes_[CLS_96].pages);
    pool_test_assert_consistent();
}
END_TEST

/* A batch ends on a cache-line boundary when the objects after it are
 * free, so two thread caches never share a line of a fresh span: one
 * object asked of the 16-byte class brings its line's four, of the
 * 96-byte class two (three lines), of the 64-byte class one.  An object
 * whose next neighbour is held ends the batch where it is. */
START_TEST(test_fetch_completes_cache_lines)
{
    pool_arena_t *a = &pool_arena_;
    static const struct {
        size_t size;
        uint32_t got;
    } want[] = {{16, 4}, {32, 2}, {48, 4}, {64, 1}, {80, 4}, {96, 2}, {128, 1}};
    for (unsigned i = 0; i < sizeof want / sizeof want[0]; i++) {
        unsigned cls = pool_sizeclass_of(want[i].size);
        ck_assert_uint_eq(pool_classes_[cls].size, want[i].size);
        void *obj[2][POOL_FETCH_MAX];
        uint32_t got = want[i].got;
        for (unsigned k = 0; k < 2; k++) {
            ck_assert_uint_eq(pool_central_fetch_(a, cls, 1, NULL, obj[k]), got);
            ck_assert_uint_eq((uintptr_t)obj[k][0] % 64, 0);
            ck_assert_uint_eq(((uintptr_t)obj[k][got - 1] + want[i].size) % 64, 0);
        }
        ck_assert_ptr_eq((char *)obj[0][got - 1] + want[i].size, obj[1][0]);
        pool_central_release_(a, cls, obj[0], got);
        pool_central_release_(a, cls, obj[1], got);
    }
    pool_test_assert_consistent();

    unsigned cls16 = pool_sizeclass_of(16);
    void *four[POOL_FETCH_MAX], *one[POOL_FETCH_MAX];
    ck_assert_uint_eq(pool_central_fetch_(a, cls16, 4, NULL, four), 4);
    /* Keep objects 0, 2 and 3; give back 1. */
    pool_central_release_(a, cls16, &four[1], 1);
    ck_assert_uint_eq(pool_central_fetch_(a, cls16, 1, NULL, one), 1);
    ck_assert_ptr_eq(one[0], four[1]);
    four[1] = one[0];
    pool_central_release_(a, cls16, four, 4);
    pool_test_assert_consistent();
}
END_TEST

/* A batch of half a 4 KiB page or more ends with that page, so that two thread
 * caches warming up together take whole pages in turn: 128 objects of 16
 * bytes after four already taken bring the rest of the page (252), and the
 * next 128 a whole page (256).  The 96-byte class's batch of 30 (2,880
 * bytes) goes on to the object that crosses into the next page, 43 in
 * all; a held object ends it where it is. */
START_TEST(test_fetch_completes_pages)
{
    pool_arena_t *a = &pool_arena_;
    unsigned cls16 = pool_sizeclass_of(16);
    static void *four[POOL_FETCH_MAX], *rest[POOL_FETCH_MAX], *page[POOL_FETCH_MAX];
    ck_assert_uint_eq(pool_central_fetch_(a, cls16, 1, NULL, four), 4);
    ck_assert_uint_eq((uintptr_t)four[0] % POOL_STREAM_BYTES, 0);
    ck_assert_uint_eq(pool_central_fetch_(a, cls16, 128, NULL, rest), 252);
    ck_assert_ptr_eq(rest[0], (char *)four[0] + 64);
    ck_assert_uint_eq(((uintptr_t)rest[251] + 16) % POOL_STREAM_BYTES, 0);
    ck_assert_uint_eq(pool_central_fetch_(a, cls16, 128, NULL, page), 256);
    ck_assert_ptr_eq(page[0], (char *)four[0] + POOL_STREAM_BYTES);
    pool_central_release_(a, cls16, four, 4);
    pool_central_release_(a, cls16, rest, 252);
    pool_central_release_(a, cls16, page, 256);
    pool_test_assert_consistent();

    void *obj[POOL_FETCH_MAX], *again[POOL_FETCH_MAX];
    ck_assert_uint_eq(pool_central_fetch_(a, CLS_96, 30, NULL, obj), 43);
    ck_assert_uint_eq((uintptr_t)obj[0] % POOL_STREAM_BYTES, 0);
    ck_assert_uint_eq((uintptr_t)obj[42] / POOL_STREAM_BYTES, (uintptr_t)obj[0] / POOL_STREAM_BYTES);
    ck_assert_uint_gt(((uintptr_t)obj[42] + 95) / POOL_STREAM_BYTES, (uintptr_t)obj[0] / POOL_STREAM_BYTES);
    pool_central_release_(a, CLS_96, obj, 35); /* objects 35..42 stay held */
    ck_assert_uint_eq(pool_central_fetch_(a, CLS_96, 30, NULL, again), 35);
    ck_assert_ptr_eq(again[34], obj[34]);
    pool_central_release_(a, CLS_96, again, 35);
    pool_central_release_(a, CLS_96, obj + 35, 8);
    pool_test_assert_consistent();
}
END_TEST

/* One release of objects from several spans, interleaved (more spans than
 * a release gathers at once), leaves every span's bitmap and count right. */
START_TEST(test_release_interleaved_spans)
{
    pool_arena_t *a = &pool_arena_;
    enum { SPANS = 5 }; /* more than RELEASE_GROUPS, and 43 of each fit a release */
    uint32_t count = pool_classes_[CLS_96].count;
    static void *obj[SPANS][POOL_FETCH_MAX], *mixed[POOL_RELEASE_MAX];
    for (unsigned k = 0; k < SPANS; k++)
        ck_assert_uint_eq(pool_central_fetch_(a, CLS_96, count, NULL, obj[k]), count);
    /* Every other object, round robin over the spans. */
    uint32_t n = 0;
    for (uint32_t i = 0; i < count; i += 2)
        for (unsigned k = 0; k < SPANS; k++)
            mixed[n++] = obj[k][i];
    pool_central_release_(a, CLS_96, mixed, n);
    for (unsigned k = 0; k < SPANS; k++) {
        pool_span_sh_t *s = &a->spans[span_of(obj[k][0])];
        ck_assert_uint_eq(s->nfree, (count + 1) / 2);
        for (uint32_t i = 0; i < count; i++)
            ck_assert_uint_eq((s->bitmap[i / 64] >> (i % 64)) & 1, i % 2);
    }
    pool_test_assert_consistent();
    n = 0;
    for (uint32_t i = 1; i < count; i += 2)
        for (unsigned k = 0; k < SPANS; k++)
            mixed[n++] = obj[k][i];
    pool_central_release_(a, CLS_96, mixed, n);
    pool_test_assert_consistent();
}
END_TEST

/* The same object twice in one release (a double free into a thread
 * cache) aborts, naming it. */
START_TEST(test_release_twice_in_one_list_aborts)
{
    pool_arena_t *a = &pool_arena_;
    void *obj[POOL_FETCH_MAX];
    ck_assert_uint_eq(pool_central_fetch_(a, CLS_96, 2, NULL, obj), 2);
    obj[2] = obj[0];
    pool_central_release_(a, CLS_96, obj, 3);
}
END_TEST

START_TEST(test_repair_is_idempotent)
{
    pool_arena_t *a = &pool_arena_;
    void *obj[POOL_FETCH_MAX];
    ck_assert_uint_eq(pool_central_fetch_(a, CLS_96, 20, NULL, obj), 20);
    void *h = obj[0];
    pool_central_sh_t *c = &a->central[CLS_96];
    /* Lose the list and counts, as a dead owner might. */
    c->head = POOL_NIL;
    c->nspans = 7;
    a->spans[span_of(h)].nfree = 3;
    char msg[256];
    ck_assert_int_eq(pool_check(msg, sizeof msg), -1);
    pool_central_rebuild_(a, CLS_96);
    pool_test_assert_consistent();
    pool_central_rebuild_(a, CLS_96);
    pool_test_assert_consistent();
    ck_assert_uint_eq(a->spans[span_of(h)].nfree, pool_classes_[CLS_96].count - 20);
    pool_central_release_(a, CLS_96, obj, 20);
    pool_test_assert_consistent();
    /* The page heap rebuilds its lists from the descriptors the same way. */
    a->ph->heads[0] = POOL_NIL;
    a->ph->free_pages = 12345;
    pool_pageheap_rebuild_(a, 0);
    pool_pageheap_rebuild_(a, 0);
    pool_test_assert_consistent();
}
END_TEST

/* A child dies holding a lock; the next locker repairs and goes on.  The
 * test process stays private so that its children fork without taking a
 * private copy of the arena (which an attached parent's children do). */
static void die_holding(pool_lock_sh_t *l, pool_lock_kind_t kind, unsigned arg)
{
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        pool_lock_(&pool_arena_, l, kind, arg);
        raise(SIGKILL);
    }
    int status;
    waitpid(pid, &status, 0);
    ck_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
}

START_TEST(test_dead_owner_recovered)
{
    pool_arena_t *a = &pool_arena_;
    die_holding(&a->ph->lock, POOL_LOCK_PAGEHEAP, 0);
    uint32_t s = pool_pageheap_alloc_(a, 3, 1, 0, POOL_NO_SLOT);
    ck_assert_uint_ne(s, POOL_NIL);
    ck_assert_uint_eq(a->lockstats[0].recoveries, 1);
    pool_pageheap_free_(a, s);
    void *obj[POOL_FETCH_MAX];
    ck_assert_uint_eq(pool_central_fetch_(a, CLS_96, 4, NULL, obj), 4);
    if (!pool_config_spin) {
        die_holding(&a->central[CLS_96].lock, POOL_LOCK_CENTRAL, CLS_96);
        pool_central_release_(a, CLS_96, obj, 4);
        ck_assert_uint_eq(a->lockstats[1 + CLS_96].recoveries, 1);
    } else {
        pool_central_release_(a, CLS_96, obj, 4);
    }
    pool_test_assert_consistent();
}
END_TEST

/* Each corruption must make pool_check() fail with a message. */
START_TEST(test_check_finds_corruption)
{
    pool_arena_t *a = &pool_arena_;
    void *p = pool_malloc(96);
    void *q = pool_malloc(5000);
    pool_test_assert_consistent();
    uint32_t s = span_of(p);
    char msg[256];

    a->spans[s].bitmap[1] ^= 1; /* an object freed behind the counts' back */
    ck_assert_int_eq(pool_check(msg, sizeof msg), -1);
    ck_assert_msg(strstr(msg, "span") != NULL, "message: %s", msg);
    a->spans[s].bitmap[1] ^= 1;
    pool_test_assert_consistent();

    uint32_t page = pool_pagemap_page_(a, q);
    a->pm_class[page] = 3; /* wrong class byte */
    ck_assert_int_eq(pool_check(msg, sizeof msg), -1);
    ck_assert_msg(strstr(msg, "page map") != NULL, "message: %s", msg);
    a->pm_class[page] = (uint8_t)pool_sizeclass_of(5000);
    pool_test_assert_consistent();

    pool_tcache_sh_t *tc = pool_tls_tcache_;
    tc->bins[CLS_96].room--; /* a bin length that lies */
    ck_assert_int_eq(pool_check(msg, sizeof msg), -1);
    ck_assert_msg(strstr(msg, "slot") != NULL, "message: %s", msg);
    tc->bins[CLS_96].room++;
    pool_test_assert_consistent();

    /* The message is truncated to the caller's buffer. */
    a->central[CLS_96].nspans += 2;
    char tiny[8];
    ck_assert_int_eq(pool_check(tiny, sizeof tiny), -1);
    ck_assert_uint_eq(strlen(tiny), sizeof tiny - 1);
    a->central[CLS_96].nspans -= 2;
    pool_free(p);
    pool_free(q);
    pool_test_assert_consistent();
}
END_TEST

Suite *make_central_suite(void)
{
    Suite *s = suite_create("central");
    TCase *tc = tcase_create("batches");
    tcase_add_checked_fixture(tc, pool_test_create_attach, pool_test_destroy);
    tcase_add_test(tc, test_fetch_batch);
    tcase_add_test(tc, test_fetch_across_spans_and_return);
    tcase_add_test(tc, test_fetch_takes_the_lowest_span);
    tcase_add_test(tc, test_fetch_completes_cache_lines);
    tcase_add_test(tc, test_fetch_completes_pages);
    tcase_add_test(tc, test_empty_spans_beyond_budget_go_back);
    tcase_add_test(tc, test_empty_spans_decay);
    tcase_add_test(tc, test_quiet_class_decays);
    tcase_add_test(tc, test_decayed_spans_go_back_with_the_period);
    tcase_add_test(tc, test_release_interleaved_spans);
    tcase_add_test_raise_signal(tc, test_release_twice_in_one_list_aborts, SIGABRT);
    tcase_add_test(tc, test_repair_is_idempotent);
    tcase_add_test(tc, test_check_finds_corruption);
    suite_add_tcase(s, tc);

    tc = tcase_create("recovery");
    tcase_add_checked_fixture(tc, pool_test_create, pool_test_destroy);
    tcase_add_test(tc, test_dead_owner_recovered);
    tcase_set_timeout(tc, 20);
    suite_add_tcase(s, tc);
    return s;
}

/* SPDX-License-Identifier: BSD-2-Clause */
/* Recovery at the sizes real heaps reach: a process dies holding a pool
 * lock while the structure behind it holds thousands of spans, and the
 * next locker -- another process or a supervisor that only repairs and
 * reaps -- must put it right without running out of room, and leave a
 * heap that passes its own check.  The first wave's tests built a handful
 * of spans; a page heap with 33 free spans of one length already made its
 * recovery abort.  Entry points: make_recovery_suite(), and
 * make_recovery_points_suite() for deaths inside an operation (debug
 * builds: crash points).
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check_pool.h"
#include "pool-internal.h"
#include "spawn.h"
#include "prim/prim.h"

/* Big enough for 1,000 spans of the largest class (32 pages each). */
#define RECOVERY_HEAP ((size_t)1 << 30)
#define NSPANS 1000u

static void create_big(void)
{
    int rc = pool_create(RECOVERY_HEAP);
    ck_assert_msg(rc == 0, "pool_create: %d", rc);
}

/* Fork; the child attaches (and dies rather than hang the suite), with no
 * crash point armed.  Returns the pid in the parent, 0 in the child. */
static pid_t fork_attached(void)
{
    pid_t pid = test_spawn(20, true, NULL);
    ck_assert_int_ge(pid, 0);
    return pid;
}

/* A child that takes lock (kind, arg) and dies holding it, between two
 * operations (any build), or at crash point `crash` inside one (debug
 * builds; `work` then runs until it gets there). */
static pid_t die_holding(pool_lock_kind_t kind, unsigned arg, const char *crash,
                         void (*work)(unsigned), unsigned warg)
{
    pid_t pid = fork_attached();
    if (pid != 0)
        return pid;
    if (crash != NULL) {
        setenv("SHMPOOL_CRASH", crash, 1);
        pool_crash_config_();
        work(warg);
        _exit(2); /* the crash point was never reached */
    }
    pool_arena_t *a = &pool_arena_;
    pool_lock_sh_t *l = kind == POOL_LOCK_PAGEHEAP ? &a->ph->lock : &a->central[arg].lock;
    pool_lock_(a, l, kind, arg);
    raise(SIGKILL);
    _exit(2);
}

/* Repair as a supervisor does (no attach), then reap the dead process: a
 * recovery that aborts takes this test process with it. */
static void supervise(pid_t dead)
{
    unsigned recovered = 0;
    ck_assert_int_eq(pool_repair(&recovered), 0);
    ck_assert_uint_eq(recovered, 1);
    pool_reap_report_t r;
    int rc = pool_reap(dead, &r);
    ck_assert_msg(rc == 0, "pool_reap: %s", strerror(rc));
    ck_assert_uint_eq(r.leaked, 0);
}

/* A holder killed in a step longer than a journal's head: the undo reads
 * the rest of the step from the journal's blocks, newest first.  w[1] is
 * first saved past the head, so it is restored only from a block. */
START_TEST(test_death_past_the_journals_head)
{
    pool_arena_t *a = &pool_arena_;
    const unsigned cls = 5, first_b = POOL_JOURNAL_HEAD + 8;
    uint64_t *w = (uint64_t *)(void *)&a->spans[a->npages - 1];
    w[0] = 0x5eed;
    w[1] = 0xb0b;
    pid_t pid = fork_attached();
    if (pid == 0) {
        pool_lock_(a, &a->central[cls].lock, POOL_LOCK_CENTRAL, cls);
        pool_journal_sh_t *j = pool_lock_journal_(a, POOL_LOCK_CENTRAL, cls);
        pool_journal_begin_(j, POOL_OP_FETCH);
        for (uint64_t i = 0; i < POOL_JOURNAL_MAX; i++)
            POOL_JSET(j, w[i < first_b ? 0 : 1], i);
        raise(SIGKILL);
        _exit(2);
    }
    pool_test_assert_killed(pid, "the dying holder");
    ck_assert_uint_eq(w[1], POOL_JOURNAL_MAX - 1);
    supervise(pid);
    ck_assert_uint_eq(w[0], 0x5eed);
    ck_assert_uint_eq(w[1], 0xb0b);
    pool_test_assert_consistent();
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Page heap                                                                 */
/* ------------------------------------------------------------------------ */

/* NSPANS free one-page spans, kept apart by one-page spans in use: the
 * free lists' shape that made the rebuild overflow its journal.  Returns
 * the number of pages the live separators hold. */
static uint32_t free_one_page_spans(void)
{
    pool_arena_t *a = &pool_arena_;
    static uint32_t span[2 * NSPANS];
    for (unsigned i = 0; i < 2 * NSPANS; i++) {
        span[i] = pool_pageheap_alloc_(a, 1, 1, 0, POOL_NO_TAG);
        ck_assert_uint_ne(span[i], POOL_NIL);
    }
    for (unsigned i = 0; i < 2 * NSPANS; i += 2)
        pool_pageheap_free_(a, span[i]);
    ck_assert_uint_ge(a->ph->free_pages, NSPANS);
    return NSPANS;
}

/* A page-heap operation that reaches every page-heap crash point. */
static void pageheap_work(unsigned unused)
{
    pool_arena_t *a = &pool_arena_;
    for (unsigned r = 0; r < 100; r++) {
        uint32_t s = pool_pageheap_alloc_(a, 1 + r % 3, 1, 0, pool_thread_tag());
        if (s != POOL_NIL)
            pool_pageheap_free_(a, s);
    }
}

static void assert_pageheap_recovered(uint32_t live_pages)
{
    pool_test_assert_consistent();
    pool_usage_t u = pool_test_assert_bytes_add_up();
    ck_assert_uint_eq(u.in_use, (size_t)live_pages << POOL_PAGE_SHIFT);
    ck_assert_uint_ge(pool_arena_.ph->free_pages, NSPANS);
}

START_TEST(test_pageheap_death_between_operations)
{
    uint32_t live = free_one_page_spans();
    pid_t dead = die_holding(POOL_LOCK_PAGEHEAP, 0, NULL, NULL, 0);
    pool_test_assert_killed(dead, "the dying holder");
    supervise(dead);
    assert_pageheap_recovered(live);
    /* A second death in a row finds the same room as the first. */
    dead = die_holding(POOL_LOCK_PAGEHEAP, 0, NULL, NULL, 0);
    pool_test_assert_killed(dead, "the dying holder");
    supervise(dead);
    assert_pageheap_recovered(live);
}
END_TEST

START_TEST(test_pageheap_death_inside_operation)
{
    uint32_t live = free_one_page_spans();
    pid_t dead = die_holding(POOL_LOCK_PAGEHEAP, 0, "pageheap.take:1", pageheap_work, 0);
    pool_test_assert_killed(dead, "the dying holder");
    supervise(dead);
    assert_pageheap_recovered(live);
}
END_TEST

/* A child allocates npages for class cls (0: a big span) from the page
 * heap and dies at the step-th journaled write of the allocation.  True
 * when it died there, and its lock has been recovered; false when the
 * allocation had fewer steps and completed. */
static bool page_alloc_killed(unsigned step, uint32_t npages, unsigned cls)
{
    pid_t pid = fork_attached();
    if (pid == 0) {
        char spec[40];
        snprintf(spec, sizeof spec, "journal.page-alloc:%u", step);
        setenv("SHMPOOL_CRASH", spec, 1);
        pool_crash_config_();
        pool_pageheap_alloc_(&pool_arena_, npages, 1, cls, pool_thread_tag());
        _exit(2);
    }
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 2)
        return false;
    ck_assert_msg(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "step %u: status %#x", step,
                  (unsigned)st);
    supervise(pid);
    return true;
}

/* A carve of a small-object span undone at each of its steps in turn:
 * the class bytes it wrote past the pages it gave back must go too, or
 * the big span carved there next is freed as a small object. */
START_TEST(test_pageheap_undone_carve)
{
    pool_arena_t *a = &pool_arena_;
    /* Above the largest class, so that malloc carves a big span. */
    const size_t bytes = 2 * POOL_MAX_SMALL;
    unsigned killed = 0;
    for (unsigned step = 1; step < 64; step++) {
        uint32_t carved = a->ph->carved;
        if (!page_alloc_killed(step, (uint32_t)(bytes >> POOL_PAGE_SHIFT), 1))
            break;
        killed++;
        ck_assert_uint_eq(a->ph->carved, carved);
        pool_test_assert_consistent();
        /* The big span carved over the undone pages is freed, then kept
         * (owned by nobody) so that the next step carves fresh pages. */
        pid_t pid = fork_attached();
        if (pid == 0) {
            for (int keep = 0; keep < 2; keep++) {
                void *big = pool_malloc(bytes);
                if (pool_pagemap_page_(a, big) != carved)
                    _exit(3);
                if (keep)
                    break;
                pool_free(big);
            }
            pool_detach();
            _exit(0);
        }
        pool_test_assert_exit0(pid, "the process that frees the big span");
        pool_test_assert_consistent();
    }
    ck_assert_uint_ge(killed, 2);
}
END_TEST

/* A free span of top_pages pages that ends where the carved pages do; with
 * a page in use below it when `below`, so that it does not start the heap. */
static uint32_t free_top_span(uint32_t top_pages, bool below)
{
    pool_arena_t *a = &pool_arena_;
    if (below)
        ck_assert_uint_ne(pool_pageheap_alloc_(a, 1, 1, 0, POOL_NO_SLOT), POOL_NIL);
    uint32_t top = pool_pageheap_alloc_(a, top_pages, 1, 0, POOL_NO_SLOT);
    ck_assert_uint_ne(top, POOL_NIL);
    pool_pageheap_free_(a, top);
    ck_assert_uint_eq(top + top_pages, a->ph->carved);
    return top;
}

/* The long request of want pages that meets the top span, killed at each
 * of its journaled steps in turn (at least two) until one completes: after
 * each death the span must be free and listed again whole, and the carved
 * pages end where they did. */
static void top_span_undone_at_each_step(uint32_t top, uint32_t top_pages, uint32_t want)
{
    pool_arena_t *a = &pool_arena_;
    uint32_t carved = a->ph->carved;
    unsigned killed = 0;
    for (unsigned step = 1; step < 64; step++) {
        if (!page_alloc_killed(step, want, 0))
            break;
        killed++;
        ck_assert_uint_eq(a->ph->carved, carved);
        ck_assert_uint_eq(a->spans[top].state, POOL_SPAN_FREE);
        ck_assert_uint_eq(a->spans[top].npages, top_pages);
        ck_assert_uint_eq(a->ph->heads[0], top);
        pool_test_assert_consistent();
    }
    ck_assert_uint_ge(killed, 2);
}

/* A long request that extends the free span on top of the carved pages,
 * undone at each of its steps in turn. */
START_TEST(test_pageheap_undone_extension)
{
    pool_arena_t *a = &pool_arena_;
    const uint32_t top_pages = 2 * POOL_FREE_LISTS, want = 3 * POOL_FREE_LISTS;
    uint32_t top = free_top_span(top_pages, false);
    top_span_undone_at_each_step(top, top_pages, want);
    /* The allocation that completed extended the top span. */
    ck_assert_uint_eq(a->ph->carved, top + want);
    ck_assert_uint_eq(a->spans[top].state, POOL_SPAN_BIG);
    ck_assert_uint_eq(a->spans[top].npages, want);
}
END_TEST

/* A long request that takes the top end of the free span on top of the
 * carved pages, undone at each of its steps in turn; the allocation that
 * completes leaves the span's bottom part free and listed. */
START_TEST(test_pageheap_undone_top_end)
{
    pool_arena_t *a = &pool_arena_;
    const uint32_t top_pages = 3 * POOL_FREE_LISTS, want = POOL_FREE_LISTS;
    uint32_t top = free_top_span(top_pages, true);
    uint32_t carved = a->ph->carved;
    top_span_undone_at_each_step(top, top_pages, want);
    ck_assert_uint_eq(a->ph->carved, carved);
    ck_assert_uint_eq(a->spans[carved - want].state, POOL_SPAN_BIG);
    ck_assert_uint_eq(a->spans[carved - want].npages, want);
    ck_assert_uint_eq(a->spans[top].state, POOL_SPAN_FREE);
    ck_assert_uint_eq(a->spans[top].npages, top_pages - want);
    ck_assert_uint_eq(a->ph->heads[0], top);
    pool_test_assert_consistent();
}
END_TEST

/* The next locker is an attached process doing its own work; the check
 * after it has nothing left open. */
START_TEST(test_pageheap_recovered_by_next_locker)
{
    uint32_t live = free_one_page_spans();
    pid_t dead = die_holding(POOL_LOCK_PAGEHEAP, 0, NULL, NULL, 0);
    pool_test_assert_killed(dead, "the dying holder");
    pid_t next = fork_attached();
    if (next == 0) {
        pageheap_work(0);
        _exit(pool_arena_.crash->xrecoveries == 1 ? 0 : 3);
    }
    pool_test_assert_exit0(next, "the next locker");
    ck_assert_int_eq(pool_reap(dead, NULL), 0);
    ck_assert_int_eq(pool_reap(next, NULL), 0);
    assert_pageheap_recovered(live);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Central classes                                                           */
/* ------------------------------------------------------------------------ */

/* NSPANS spans of class cls, each with one object free (all full where a
 * span holds one object), built by a process that then detaches: its
 * objects stay in use, owned by nobody.  Returns the bytes in use. */
static size_t class_spans(unsigned cls)
{
    const pool_class_t *k = &pool_classes_[cls];
    size_t n = (size_t)k->count * NSPANS;
    pid_t pid = fork_attached();
    if (pid == 0) {
        test_own_classes();
        void **obj = pool_prim_private_malloc_(n * sizeof *obj);
        for (size_t i = 0; i < n; i++)
            if ((obj[i] = pool_malloc(k->size)) == NULL)
                _exit(4);
        if (k->count > 1)
            for (size_t i = 0; i < n; i += k->count)
                pool_free(obj[i]);
        pool_detach();
        _exit(0);
    }
    pool_test_assert_exit0(pid, "the class's builder");
    ck_assert_uint_ge(pool_arena_.central[cls].nspans, NSPANS);
    return (k->count > 1 ? n - NSPANS : n) * k->size;
}

/* Work in class cls that reaches its crash points. */
static void class_work(unsigned cls)
{
    size_t size = pool_classes_[cls].size;
    for (unsigned r = 0; r < 50; r++) {
        void *p[8];
        for (unsigned i = 0; i < 8; i++)
            p[i] = pool_malloc(size);
        for (unsigned i = 0; i < 8; i++)
            pool_free(p[i]);
        pool_thread_flush();
    }
}

static void assert_class_recovered(unsigned cls, size_t in_use)
{
    pool_test_assert_settled(in_use);
    ck_assert_uint_ge(pool_arena_.central[cls].nspans, NSPANS);
}

START_TEST(test_class_death_between_operations)
{
    unsigned cls = (unsigned)_i;
    size_t in_use = class_spans(cls);
    pid_t dead = die_holding(POOL_LOCK_CENTRAL, cls, NULL, NULL, 0);
    pool_test_assert_killed(dead, "the dying holder");
    supervise(dead);
    assert_class_recovered(cls, in_use);
}
END_TEST

START_TEST(test_class_death_inside_operation)
{
    unsigned cls = (unsigned)_i;
    size_t in_use = class_spans(cls);
    pid_t dead = die_holding(POOL_LOCK_CENTRAL, cls, "central.release:1", class_work, cls);
    pool_test_assert_killed(dead, "the dying holder");
    supervise(dead);
    assert_class_recovered(cls, in_use);
}
END_TEST

Suite *make_recovery_suite(void)
{
    Suite *s = suite_create("recovery");
    TCase *tc = tcase_create("pageheap");
    tcase_add_checked_fixture(tc, create_big, pool_test_destroy);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_pageheap_death_between_operations);
    tcase_add_test(tc, test_pageheap_recovered_by_next_locker);
    tcase_add_test(tc, test_death_past_the_journals_head);
    suite_add_tcase(s, tc);

    tc = tcase_create("central");
    tcase_add_checked_fixture(tc, create_big, pool_test_destroy);
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_class_death_between_operations, 1, POOL_NCLASSES);
    suite_add_tcase(s, tc);
    return s;
}

Suite *make_recovery_points_suite(void)
{
    Suite *s = suite_create("recovery_points");
    TCase *tc = tcase_create("inside");
    tcase_add_checked_fixture(tc, create_big, pool_test_destroy);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_pageheap_death_inside_operation);
    tcase_add_test(tc, test_pageheap_undone_carve);
    tcase_add_test(tc, test_pageheap_undone_extension);
    tcase_add_test(tc, test_pageheap_undone_top_end);
    tcase_add_loop_test(tc, test_class_death_inside_operation, 1, POOL_NCLASSES);
    suite_add_tcase(s, tc);
    return s;
}

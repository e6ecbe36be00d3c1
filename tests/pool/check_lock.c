/* SPDX-License-Identifier: BSD-2-Clause */
/* The lock wrapper's repair (shm/lock.c), with a repair of the test's own
 * registered for the page heap's lock: a child takes the lock, writes
 * under the lock's journal and dies holding it; the next locker must find
 * EOWNERDEAD, undo the write, verify (and rebuild when verification
 * fails), and leave the mutex consistent.  A recoverer that dies during
 * its repair is recovered in turn, to the same state.  The test process
 * stays private and its children never attach, so the registration stays
 * the test's.  A class lock takes its journal at its first operation, the
 * lowest one free, and a holder that died after taking one and before
 * recording it leaves it to the next holder.  Entry point:
 * make_lock_suite().
 */
#include "config.h"

#include <check.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "check_pool.h"
#include "pool-internal.h"

#define OLD 0x0123u  /* the word before the dead holder's operation */
#define NEW 0xdeadu  /* what the dead holder wrote */

/* What the repair saw, in memory the children share. */
typedef struct seen_s {
    unsigned verified;
    unsigned rebuilt;
    unsigned arg;            /* the lock's argument, as the repair got it */
    uint64_t word_at_verify; /* the journaled word when verify ran */
    bool verdict;            /* what verify answers */
    pid_t die_unless;        /* a verify in another process dies there */
} seen_t;

static seen_t *seen;

/* The journaled word: metadata no allocation of these tests reaches. */
static uint64_t *word(void)
{
    return (uint64_t *)(void *)&pool_arena_.spans[pool_arena_.npages - 1];
}

static pool_lock_sh_t *ph_lock(void)
{
    return &pool_arena_.ph->lock;
}

static pool_journal_sh_t *ph_journal(void)
{
    return pool_lock_journal_(&pool_arena_, POOL_LOCK_PAGEHEAP, 0);
}

static bool test_verify(pool_arena_t *a, unsigned arg)
{
    (void)a;
    seen->verified++;
    seen->arg = arg;
    seen->word_at_verify = *word();
    if (seen->die_unless != 0 && getpid() != seen->die_unless)
        _exit(0); /* holding the lock, in the middle of its repair */
    return seen->verdict;
}

static void test_rebuild(pool_arena_t *a, unsigned arg)
{
    (void)a;
    seen->rebuilt++;
    seen->arg = arg;
}

static const pool_lock_ops_t test_ops = { "test lock", "the test", test_verify, test_rebuild };

static void setup(void)
{
    pool_test_create();
    seen = mmap(NULL, sizeof *seen, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert(seen != MAP_FAILED);
    seen->verdict = true;
    pool_lock_register_(POOL_LOCK_PAGEHEAP, &test_ops);
}

static void teardown(void)
{
    munmap(seen, sizeof *seen);
    pool_test_destroy();
}

/* A child takes the lock, writes NEW over OLD inside an operation and
 * dies holding the lock. */
static void die_holding(void)
{
    *word() = OLD;
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        pool_lock_(&pool_arena_, ph_lock(), POOL_LOCK_PAGEHEAP, 0);
        pool_journal_begin_(ph_journal(), POOL_OP_PH_ALLOC);
        POOL_JSET(ph_journal(), *word(), NEW);
        _exit(0);
    }
    pool_test_assert_exit0(pid, "the holder");
    ck_assert_uint_eq(*word(), NEW);
}

/* Take the lock and give it back; the repair counts must not move, or
 * the mutex was left inconsistent (a lock taken after that fails). */
static void assert_lock_healthy(void)
{
    unsigned verified = seen->verified, rebuilt = seen->rebuilt;
    uint64_t recoveries = pool_arena_.crash->xrecoveries;
    pool_lock_(&pool_arena_, ph_lock(), POOL_LOCK_PAGEHEAP, 0);
    pool_unlock_(&pool_arena_, ph_lock(), POOL_LOCK_PAGEHEAP, 0);
    ck_assert_uint_eq(seen->verified, verified);
    ck_assert_uint_eq(seen->rebuilt, rebuilt);
    ck_assert_uint_eq(pool_arena_.crash->xrecoveries, recoveries);
}

START_TEST(test_repair_undoes_then_verifies)
{
    die_holding();
    uint64_t recoveries = pool_arena_.crash->xrecoveries;
    uint64_t rebuilds = pool_arena_.crash->xrebuilds;

    pool_lock_(&pool_arena_, ph_lock(), POOL_LOCK_PAGEHEAP, 0);
    ck_assert_uint_eq(*word(), OLD);
    ck_assert_uint_eq(seen->verified, 1);
    ck_assert_uint_eq(seen->word_at_verify, OLD);
    ck_assert_uint_eq(seen->arg, 0);
    ck_assert_uint_eq(seen->rebuilt, 0);
    ck_assert_uint_eq(ph_journal()->op, POOL_OP_NONE);
    ck_assert_int_eq(pool_lock_watch_(&pool_arena_, POOL_LOCK_PAGEHEAP, 0)->xholder, getpid());
    ck_assert_uint_eq(pool_arena_.crash->xrecoveries, recoveries + 1);
    ck_assert_uint_eq(pool_arena_.crash->xrebuilds, rebuilds);
    ck_assert_uint_eq(pool_arena_.lockstats[0].recoveries, 1);
    pool_unlock_(&pool_arena_, ph_lock(), POOL_LOCK_PAGEHEAP, 0);
    assert_lock_healthy();
}
END_TEST

START_TEST(test_repair_rebuilds_what_fails_verification)
{
    die_holding();
    uint64_t rebuilds = pool_arena_.crash->xrebuilds;
    seen->verdict = false;

    pool_lock_(&pool_arena_, ph_lock(), POOL_LOCK_PAGEHEAP, 0);
    ck_assert_uint_eq(*word(), OLD);
    ck_assert_uint_eq(seen->verified, 1);
    ck_assert_uint_eq(seen->rebuilt, 1);
    ck_assert_uint_eq(pool_arena_.crash->xrebuilds, rebuilds + 1);
    pool_unlock_(&pool_arena_, ph_lock(), POOL_LOCK_PAGEHEAP, 0);
    assert_lock_healthy();
}
END_TEST

/* The first recoverer undoes, then dies in its verification, holding the
 * lock: the second finds the lock owner-dead again, has nothing left to
 * undo, verifies, and ends where one whole repair would have. */
START_TEST(test_repair_twice)
{
    die_holding();
    uint64_t recoveries = pool_arena_.crash->xrecoveries;
    seen->die_unless = getpid();
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        pool_lock_(&pool_arena_, ph_lock(), POOL_LOCK_PAGEHEAP, 0);
        _exit(3); /* the repair did not die */
    }
    pool_test_assert_exit0(pid, "the first recoverer");
    ck_assert_uint_eq(seen->verified, 1);
    ck_assert_uint_eq(*word(), OLD);

    pool_lock_(&pool_arena_, ph_lock(), POOL_LOCK_PAGEHEAP, 0);
    ck_assert_uint_eq(seen->verified, 2);
    ck_assert_uint_eq(seen->word_at_verify, OLD);
    ck_assert_uint_eq(seen->rebuilt, 0);
    ck_assert_uint_eq(*word(), OLD);
    ck_assert_uint_eq(ph_journal()->op, POOL_OP_NONE);
    ck_assert_uint_eq(pool_arena_.crash->xrecoveries, recoveries + 1);
    pool_unlock_(&pool_arena_, ph_lock(), POOL_LOCK_PAGEHEAP, 0);
    assert_lock_healthy();
}
END_TEST

/* Class locks: the test's repair stands for the central caches' too. */
static void setup_classes(void)
{
    setup();
    pool_lock_register_(POOL_LOCK_CENTRAL, &test_ops);
}

static pool_lock_sh_t *class_lock(unsigned cls)
{
    return &pool_arena_.central[cls].lock;
}

/* The lowest journal no class lock has claimed. */
static unsigned lowest_free_journal(void)
{
    for (unsigned i = 1; i <= POOL_NCLASSES; i++)
        if (pool_arena_.journals[i].xowner == 0)
            return i;
    return 0;
}

static unsigned journals_of(unsigned cls)
{
    unsigned n = 0;
    for (unsigned i = 0; i <= POOL_NCLASSES; i++)
        n += pool_arena_.journals[i].xowner == 1 + cls;
    return n;
}

/* No page of the journals past the one of the first free journal was
 * ever brought in: a claim reads none of them. */
static void assert_later_journal_pages_untouched(void)
{
    ck_assert_msg(!pool_test_any_resident(
                      (uintptr_t)&pool_arena_.journals[lowest_free_journal()] + 1,
                      (uintptr_t)&pool_arena_.journals[1 + POOL_NCLASSES]),
                  "a page of the journals past the first free one is resident");
}

/* Classes far apart in the array take neighbouring journals, in the
 * order of their first operation, and keep them. */
START_TEST(test_journals_taken_in_order_of_use)
{
    static const unsigned order[] = { 90, 3, 47 };
    pool_journal_sh_t *got[3];
    for (unsigned i = 0; i < 3; i++) {
        unsigned cls = order[i], want = lowest_free_journal();
        ck_assert_uint_ne(want, 0);
        ck_assert_uint_eq(pool_arena_.hdr->xjournal_at[1 + cls], 0);
        pool_lock_(&pool_arena_, class_lock(cls), POOL_LOCK_CENTRAL, cls);
        got[i] = pool_lock_journal_(&pool_arena_, POOL_LOCK_CENTRAL, cls);
        pool_unlock_(&pool_arena_, class_lock(cls), POOL_LOCK_CENTRAL, cls);
        ck_assert_ptr_eq(got[i], &pool_arena_.journals[want]);
        ck_assert_uint_eq(got[i]->xowner, 1 + cls);
        ck_assert_uint_eq(pool_arena_.hdr->xjournal_at[1 + cls], want);
        if (i > 0)
            ck_assert_ptr_eq(got[i], got[i - 1] + 1);
    }
    assert_later_journal_pages_untouched();
    for (unsigned i = 0; i < 3; i++) {
        pool_lock_(&pool_arena_, class_lock(order[i]), POOL_LOCK_CENTRAL, order[i]);
        ck_assert_ptr_eq(pool_lock_journal_(&pool_arena_, POOL_LOCK_CENTRAL, order[i]), got[i]);
        pool_unlock_(&pool_arena_, class_lock(order[i]), POOL_LOCK_CENTRAL, order[i]);
        ck_assert_uint_eq(journals_of(order[i]), 1);
    }
}
END_TEST

/* A holder that died between taking a journal and recording it: the next
 * holder finds the lock owner-dead with nothing to undo, and the class
 * goes on with that journal, not a second one. */
START_TEST(test_journal_claimed_by_the_dead_is_found)
{
    const unsigned cls = 61;
    unsigned k = lowest_free_journal();
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        pool_lock_(&pool_arena_, class_lock(cls), POOL_LOCK_CENTRAL, cls);
        uint32_t none = 0;
        if (!pool_atomic_cas(&pool_arena_.journals[k].xowner, &none, 1 + cls))
            _exit(3);
        _exit(0);
    }
    pool_test_assert_exit0(pid, "the holder");
    ck_assert_uint_eq(pool_arena_.hdr->xjournal_at[1 + cls], 0);
    uint64_t recoveries = pool_arena_.crash->xrecoveries;
    uint64_t rolled = pool_arena_.crash->xrolled_back;
    pool_lock_(&pool_arena_, class_lock(cls), POOL_LOCK_CENTRAL, cls);
    ck_assert_uint_eq(pool_arena_.crash->xrecoveries, recoveries + 1);
    ck_assert_uint_eq(pool_arena_.crash->xrolled_back, rolled);
    ck_assert_uint_eq(seen->arg, cls);
    ck_assert_ptr_eq(pool_lock_journal_(&pool_arena_, POOL_LOCK_CENTRAL, cls),
                     &pool_arena_.journals[k]);
    pool_unlock_(&pool_arena_, class_lock(cls), POOL_LOCK_CENTRAL, cls);
    ck_assert_uint_eq(pool_arena_.hdr->xjournal_at[1 + cls], k);
    ck_assert_uint_eq(journals_of(cls), 1);
}
END_TEST

/* A class lock whose holder died inside an operation is repaired from the
 * journal it took, wherever that lies. */
START_TEST(test_class_repair_undoes_from_its_journal)
{
    const unsigned cls = 33;
    pool_lock_(&pool_arena_, class_lock(90), POOL_LOCK_CENTRAL, 90);
    (void)pool_lock_journal_(&pool_arena_, POOL_LOCK_CENTRAL, 90);
    pool_unlock_(&pool_arena_, class_lock(90), POOL_LOCK_CENTRAL, 90);
    *word() = OLD;
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        pool_lock_(&pool_arena_, class_lock(cls), POOL_LOCK_CENTRAL, cls);
        pool_journal_sh_t *j = pool_lock_journal_(&pool_arena_, POOL_LOCK_CENTRAL, cls);
        pool_journal_begin_(j, POOL_OP_RELEASE);
        POOL_JSET(j, *word(), NEW);
        _exit(0);
    }
    pool_test_assert_exit0(pid, "the holder");
    ck_assert_uint_eq(*word(), NEW);
    pool_lock_(&pool_arena_, class_lock(cls), POOL_LOCK_CENTRAL, cls);
    ck_assert_uint_eq(*word(), OLD);
    ck_assert_uint_eq(seen->verified, 1);
    ck_assert_uint_eq(seen->word_at_verify, OLD);
    ck_assert_uint_eq(pool_lock_journal_(&pool_arena_, POOL_LOCK_CENTRAL, cls)->op, POOL_OP_NONE);
    pool_unlock_(&pool_arena_, class_lock(cls), POOL_LOCK_CENTRAL, cls);
    ck_assert_uint_eq(journals_of(cls), 1);
}
END_TEST

Suite *make_lock_suite(void)
{
    Suite *s = suite_create("lock");
    TCase *tc = tcase_create("repair");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_repair_undoes_then_verifies);
    tcase_add_test(tc, test_repair_rebuilds_what_fails_verification);
    tcase_add_test(tc, test_repair_twice);
    suite_add_tcase(s, tc);
    tc = tcase_create("journals");
    tcase_add_checked_fixture(tc, setup_classes, teardown);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_journals_taken_in_order_of_use);
    tcase_add_test(tc, test_journal_claimed_by_the_dead_is_found);
    tcase_add_test(tc, test_class_repair_undoes_from_its_journal);
    suite_add_tcase(s, tc);
    return s;
}

/* SPDX-License-Identifier: BSD-2-Clause */
/* The operation journal alone (shm/journal.c): what pool_journal_undo_
 * restores, in which order, what it refuses to write, and that running it
 * again -- as the recoverer of a recoverer does -- ends in the same state.
 * The words journaled are those of a span descriptor no test allocation
 * reaches (the arena's last page), so they are metadata the undo may
 * write, and no tier reads them.  Entry point: make_journal_suite().
 */
#include "config.h"

#include <check.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>

#include "check_pool.h"
#include "pool-internal.h"

/* Metadata words of four sizes, in the last page's span descriptor. */
typedef struct words_s {
    uint64_t *w8;
    uint32_t *w4;
    uint16_t *w2;
    uint8_t *w1;
} words_t;

/* What every test journals, and into which journal (journal_setup). */
static words_t w;
static pool_journal_sh_t *j;

/* A fresh arena; w and j point into it. */
static void journal_setup(void)
{
    pool_test_create();
    uint64_t *last = (uint64_t *)(void *)&pool_arena_.spans[pool_arena_.npages - 1];
    w = (words_t){ &last[0], (uint32_t *)(void *)&last[1], (uint16_t *)(void *)&last[2],
                   (uint8_t *)(void *)&last[3] };
    j = pool_lock_journal_(&pool_arena_, POOL_LOCK_CENTRAL, 5);
}

static void set_words(uint64_t v8, uint32_t v4, uint16_t v2, uint8_t v1)
{
    *w.w8 = v8;
    *w.w4 = v4;
    *w.w2 = v2;
    *w.w1 = v1;
}

static void assert_words(uint64_t v8, uint32_t v4, uint16_t v2, uint8_t v1)
{
    ck_assert_uint_eq(*w.w8, v8);
    ck_assert_uint_eq(*w.w4, v4);
    ck_assert_uint_eq(*w.w2, v2);
    ck_assert_uint_eq(*w.w1, v1);
}

/* Words of every size come back; a word saved twice comes back as it was
 * before the first save, so the undo runs newest first. */
START_TEST(test_undo_restores_newest_first)
{
    set_words(0x1111222233334444u, 0x55556666u, 0x7777, 0x88);
    uint64_t undone = j->rolled_back, total = pool_arena_.crash->xrolled_back;

    pool_journal_begin_(j, POOL_OP_FETCH);
    POOL_JSET(j, *w.w8, 0xaaaau);
    POOL_JSET(j, *w.w4, 0xbbbbu);
    POOL_JSET(j, *w.w8, 0xccccu);
    POOL_JSET(j, *w.w2, 0xdddd);
    POOL_JSET(j, *w.w1, 0xee);
    ck_assert_uint_eq(j->n, 5);
    ck_assert(pool_journal_undo_(&pool_arena_, j));

    assert_words(0x1111222233334444u, 0x55556666u, 0x7777, 0x88);
    ck_assert_uint_eq(j->op, POOL_OP_NONE);
    ck_assert_uint_eq(j->n, 0);
    ck_assert_uint_eq(j->rolled_back, undone + 1);
    ck_assert_uint_eq(pool_arena_.crash->xrolled_back, total + 1);
}
END_TEST

/* Past the commit point nothing is undone, and entries a holder saved
 * after its last commit are dropped, not written. */
START_TEST(test_committed_is_kept)
{
    set_words(1, 2, 3, 4);

    pool_journal_begin_(j, POOL_OP_RELEASE);
    POOL_JSET(j, *w.w8, 10u);
    POOL_JSET(j, *w.w4, 20u);
    pool_journal_commit_(j);
    assert_words(10, 20, 3, 4);
    /* Saved outside any operation (as a dead holder may leave them). */
    pool_journal_save_(j, w.w2, sizeof *w.w2);
    *w.w2 = 30;
    uint64_t undone = j->rolled_back;
    ck_assert(pool_journal_undo_(&pool_arena_, j));
    assert_words(10, 20, 30, 4);
    ck_assert_uint_eq(j->n, 0);
    ck_assert_uint_eq(j->rolled_back, undone);
}
END_TEST

/* A long operation commits each finished step: an undo then takes back
 * only the step in progress, and a step may fill the whole room. */
START_TEST(test_undo_stops_at_the_last_step)
{
    set_words(0, 0, 0, 0);

    pool_journal_begin_(j, POOL_OP_PH_RETURN);
    uint64_t gen = j->gen;
    pool_journal_step_(j);
    ck_assert_uint_eq(j->gen, gen); /* nothing logged: nothing to commit */
    uint64_t v = 0;
    for (unsigned i = 0; i < POOL_JOURNAL_MAX; i++)
        POOL_JSET(j, *w.w8, ++v);
    ck_assert_uint_eq(j->n, POOL_JOURNAL_MAX);
    pool_journal_step_(j);
    ck_assert_uint_eq(j->gen, gen + 1);
    ck_assert_uint_eq(j->op, POOL_OP_PH_RETURN);
    ck_assert_uint_eq(j->n, 0);
    POOL_JSET(j, *w.w4, 7u);
    POOL_JSET(j, *w.w8, v + 1);
    ck_assert(pool_journal_undo_(&pool_arena_, j));
    assert_words(v, 0, 0, 0);
}
END_TEST

/* A step longer than a journal's head goes on in its blocks, and an undo
 * reads both, newest first: the word ends as it was before the step. */
START_TEST(test_undo_reads_the_blocks)
{
    set_words(0x5a5a, 0, 0, 0);
    pool_journal_begin_(j, POOL_OP_RELEASE);
    for (unsigned i = 1; i <= POOL_JOURNAL_MAX; i++)
        POOL_JSET(j, *w.w8, i);
    ck_assert_uint_eq(*w.w8, POOL_JOURNAL_MAX);
    /* The first and last entries past the head, in the first and last
     * of this journal's blocks: block b lies (1 + b) times the journals'
     * count of journal lengths on. */
    const pool_journal_more_sh_t *more = (const pool_journal_more_sh_t *)(const void *)j;
    const size_t stride = 1 + POOL_NCLASSES, last = POOL_JOURNAL_MAX - 1 - POOL_JOURNAL_HEAD;
    ck_assert_uint_eq(more[stride].undo[0].old, POOL_JOURNAL_HEAD);
    ck_assert_uint_eq(more[stride * (1 + last / POOL_JOURNAL_MORE)].undo[last % POOL_JOURNAL_MORE].old,
                      POOL_JOURNAL_MAX - 1);
    ck_assert(pool_journal_undo_(&pool_arena_, j));
    assert_words(0x5a5a, 0, 0, 0);
}
END_TEST

/* An entry that names no metadata word of the arena -- a data block, a
 * misaligned word, a size no store has -- is skipped and reported; the
 * others are still restored. */
START_TEST(test_undo_refuses_foreign_entries)
{
    set_words(1, 2, 3, 4);
    uint64_t *block = pool_malloc(64);
    ck_assert_ptr_nonnull(block);
    block[0] = 0x5eed;

    pool_journal_begin_(j, POOL_OP_FETCH);
    POOL_JSET(j, *w.w8, 9u);
    pool_undo_sh_t forged[] = {
        { (uint64_t)(uintptr_t)block << 4 | 8, 0xbad },
        { (uint64_t)((uintptr_t)w.w8 + 1) << 4 | 8, 0xbad },
        { (uint64_t)(uintptr_t)w.w8 << 4 | 3, 0xbad },
        { (uint64_t)(uintptr_t)w.w8 << 4 | 0, 0xbad },
    };
    for (size_t i = 0; i < sizeof forged / sizeof forged[0]; i++)
        j->undo[j->n++] = forged[i];
    POOL_JSET(j, *w.w2, 9);

    ck_assert(!pool_journal_undo_(&pool_arena_, j));
    ck_assert_uint_eq(block[0], 0x5eed);
    assert_words(1, 2, 3, 4);
    ck_assert_uint_eq(j->op, POOL_OP_NONE);
    pool_free(block);
}
END_TEST

/* A recoverer that dies during its undo leaves the journal open and some
 * words restored (the newest ones): the next recoverer's undo ends in the
 * same state as one undo that ran to its end. */
START_TEST(test_undo_twice_same_state)
{
    set_words(100, 200, 300, 40);

    pool_journal_begin_(j, POOL_OP_PH_ALLOC);
    POOL_JSET(j, *w.w8, 101u);
    POOL_JSET(j, *w.w4, 201u);
    POOL_JSET(j, *w.w8, 102u);
    POOL_JSET(j, *w.w2, 301);
    POOL_JSET(j, *w.w1, 41);
    static pool_journal_sh_t image;
    memcpy(&image, j, sizeof image);
    ck_assert(pool_journal_undo_(&pool_arena_, j));
    assert_words(100, 200, 300, 40);

    /* The first undo died after restoring the two newest entries. */
    memcpy(j, &image, sizeof image);
    *w.w8 = 102;
    *w.w4 = 201;
    ck_assert(pool_journal_undo_(&pool_arena_, j));
    assert_words(100, 200, 300, 40);

    /* ... or after its last write, before it closed the journal. */
    memcpy(j, &image, sizeof image);
    ck_assert(pool_journal_undo_(&pool_arena_, j));
    assert_words(100, 200, 300, 40);
}
END_TEST

/* A step that logs past the room aborts, in every build: its next save
 * would write past the journal. */
START_TEST(test_step_past_the_room_aborts)
{
    pool_journal_begin_(j, POOL_OP_RELEASE);
    for (unsigned i = 0; i <= POOL_JOURNAL_MAX; i++)
        POOL_JSET(j, *w.w8, i);
}
END_TEST

Suite *make_journal_suite(void)
{
    Suite *s = suite_create("journal");
    TCase *tc = tcase_create("undo");
    tcase_add_checked_fixture(tc, journal_setup, pool_test_destroy);
    tcase_add_test(tc, test_undo_restores_newest_first);
    tcase_add_test(tc, test_committed_is_kept);
    tcase_add_test(tc, test_undo_stops_at_the_last_step);
    tcase_add_test(tc, test_undo_reads_the_blocks);
    tcase_add_test(tc, test_undo_refuses_foreign_entries);
    tcase_add_test(tc, test_undo_twice_same_state);
    tcase_add_test_raise_signal(tc, test_step_past_the_room_aborts, SIGABRT);
    suite_add_tcase(s, tc);
    return s;
}

/* SPDX-License-Identifier: BSD-2-Clause */
/* The lifecycle without a master: processes that end in every way --
 * exit, _exit, SIGKILL, exec, their attaching thread gone first -- are
 * found dead by the processes that go on using the arena, never by pid,
 * and reaped by whichever notices first: at attach, when slots run short,
 * on the periodic due time.  Many more processes than slots come and go,
 * each leaving objects behind, and the arena stays flat.  The test process
 * stays private and never calls pool_reap(): nobody here knows the pool
 * the way poold's master does.  Entry point: make_lifecycle_suite().
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check_pool.h"
#include "../programs/pattern.h"
#include "pool-internal.h"
#include "spawn.h"

#define LEFT_BEHIND 300 /* objects a short-lived process never frees */

/* Slots held, by anyone (none above the top ever is; reading them would
 * make their pages resident). */
static unsigned slots_taken(void)
{
    unsigned n = 0;
    for (unsigned i = 0, top = pool_slots_top(&pool_arena_); i < top; i++)
        n += pool_atomic_load_acquire(&pool_arena_.slots[i].xstate) != POOL_SLOT_FREE;
    return n;
}

static size_t in_use(void)
{
    pool_usage_t u;
    pool_usage(&u);
    return u.in_use;
}

/* Allocate objects of several classes and a big span, and keep them. */
static void leave_objects(void)
{
    for (unsigned i = 0; i < LEFT_BEHIND; i++)
        if (pool_malloc(16 + (i % 40) * 24) == NULL)
            _exit(4);
    if (pool_malloc((size_t)400 << 10) == NULL)
        _exit(4);
}

typedef enum ending_e { END_EXIT, END_UNDERSCORE_EXIT, END_KILL, END_EXEC } ending_t;

/* A child that attaches, leaves objects and ends the given way. */
static pid_t short_lived(ending_t how)
{
    pid_t pid = test_spawn(20, true, NULL);
    ck_assert_int_ge(pid, 0);
    if (pid != 0)
        return pid;
    leave_objects();
    switch (how) {
    case END_EXIT:
        exit(0);
    case END_UNDERSCORE_EXIT:
        _exit(0);
    case END_KILL:
        raise(SIGKILL);
        break;
    case END_EXEC:
        execl("/bin/true", "true", (char *)NULL);
        break;
    }
    _exit(3);
}

/* An attached child that only attaches and exits: the one that notices.
 * It is dead in turn when this returns, and nobody has noticed yet. */
static void attach_and_go(void)
{
    pid_t pid = test_spawn(20, true, NULL);
    ck_assert_int_ge(pid, 0);
    if (pid == 0)
        _exit(0);
    int status = pool_test_wait(pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "a process could not attach (status %#x)", status);
}

/* However a process ends, the next one to attach reaps it: its slot is
 * free again and its objects are back. */
START_TEST(test_every_ending_reaped_at_attach)
{
    size_t base = in_use();
    pid_t pid = short_lived((ending_t)_i);
    int status = pool_test_wait(pid);
    ck_assert_msg((WIFEXITED(status) && WEXITSTATUS(status) == 0) ||
                      (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL),
                  "the short-lived process ended with status %#x", status);
    ck_assert_uint_eq(slots_taken(), 1);
    ck_assert_uint_gt(in_use(), base);
    uint64_t reaps = pool_arena_.crash->reaps;
    attach_and_go();
    ck_assert_uint_eq(pool_arena_.crash->reaps, reaps + 1);
    ck_assert_int_eq(pool_arena_.crash->last[reaps % POOL_REAP_HISTORY].pid, pid);
    ck_assert_uint_eq(slots_taken(), 1);
    /* Anyone who maps the arena may notice: this private process too. */
    ck_assert_uint_eq(pool_reap_dead_(&pool_arena_), 1);
    ck_assert_uint_eq(slots_taken(), 0);
    pool_test_assert_settled(base);
}
END_TEST

/* Many more processes than slots, one after another, each leaving objects
 * behind: none fails to attach, and the arena does not grow. */
START_TEST(test_more_processes_than_slots)
{
    size_t base = in_use();
    for (unsigned k = 0; k < 3 * POOL_MAX_SLOTS; k++) {
        int status = pool_test_wait(short_lived((ending_t)(k % 4)));
        ck_assert_msg(!WIFEXITED(status) || WEXITSTATUS(status) == 0,
                      "process %u could not attach or allocate (status %#x)", k, status);
    }
    ck_assert_uint_eq(pool_reap_dead_(&pool_arena_), 1);
    pool_usage_t u;
    pool_usage(&u);
    ck_assert_uint_eq(u.attach_failures, 0);
    ck_assert_uint_eq(u.fallbacks, 0);
    ck_assert_uint_eq(pool_arena_.crash->reaps, 3 * POOL_MAX_SLOTS);
    ck_assert_uint_eq(slots_taken(), 0);
    /* Never more than three held at once (this process's and one child's,
     * or a dead child's until the next one reaps it): the slot table is
     * made takeable that far, 32 slots at a time (proc.c's slots_grow),
     * and no page of it past the top is resident. */
    unsigned top = pool_slots_top(&pool_arena_);
    ck_assert_uint_le(top, 32);
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t lo = ((uintptr_t)&pool_arena_.slots[top] + page - 1) & ~(page - 1);
    uintptr_t hi = (uintptr_t)&pool_arena_.slots[POOL_MAX_SLOTS] & ~(page - 1);
    ck_assert_uint_gt(hi, lo);
    unsigned char v[64];
    ck_assert_uint_le((hi - lo) / page, sizeof v);
    ck_assert_int_eq(mincore((void *)lo, hi - lo, v), 0);
    for (uintptr_t k = 0; k < (hi - lo) / page; k++)
        ck_assert_msg(!(v[k] & 1), "page %lu of the slot table past the top (%u) is resident",
                      (unsigned long)k, top);
    pool_test_assert_settled(base);
}
END_TEST

/* Slots held by the dead are taken back when slots run short: every slot
 * held by a dead process, then one more attaches. */
START_TEST(test_dead_slots_reused_when_short)
{
    pool_arena_t *a = &pool_arena_;
    /* Dead holders that nobody has noticed: each dies right after it
     * attached, before the next one (whose attach would reap it) runs, so
     * they are made to hold slots by hand, every slot made takeable first
     * as attaches would have made it. */
    for (unsigned i = pool_slots_top(a); i < POOL_MAX_SLOTS; i++)
        ck_assert_int_eq(pool_life_init_(&a->slots[i].life), 0);
    pool_atomic_store_release(&a->hdr->xslots_top, POOL_MAX_SLOTS);
    for (unsigned i = 0; i < POOL_MAX_SLOTS; i++) {
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
            if (pool_life_try_(&a->slots[i].life, &a->slots[i].xflags, NULL) != POOL_LIFE_TAKEN)
                _exit(1);
            pool_atomic_store_release(&a->slots[i].xstate, (uint32_t)getpid());
            raise(SIGKILL);
        }
        pool_test_assert_killed(pid, "a slot holder");
    }
    ck_assert_uint_eq(slots_taken(), POOL_MAX_SLOTS);
    attach_and_go();
    ck_assert_uint_eq(a->crash->reaps, POOL_MAX_SLOTS);
    ck_assert_uint_eq(slots_taken(), 1);
    ck_assert_uint_eq(pool_reap_dead_(a), 1);
    pool_test_assert_settled(0);
}
END_TEST

/* A live process (attached, as a child of test_spawn) looks for the dead
 * on its own, once the period is due: no attach, no shortage. */
static int live_main(int fd)
{
    char c;
    if (read(fd, &c, 1) != 1)
        return 5;
    uint64_t reaps = pool_arena_.crash->reaps;
    for (int64_t end = pattern_now_ns() + 5000000000; pool_arena_.crash->reaps == reaps;) {
        if (pattern_now_ns() > end)
            return 6;
        /* Slow paths: a fresh class each time empties the bin. */
        void *p[64];
        for (unsigned i = 0; i < 64; i++)
            p[i] = pool_malloc(16 + i * 16);
        for (unsigned i = 0; i < 64; i++)
            pool_free(p[i]);
        pool_thread_flush();
        struct timespec ts = { 0, 20000000 };
        nanosleep(&ts, NULL);
    }
    return 0;
}

START_TEST(test_periodic_reap_by_a_live_process)
{
    int go[2];
    ck_assert_int_eq(pipe(go), 0);
    pid_t live = test_spawn(20, true, NULL);
    ck_assert_int_ge(live, 0);
    if (live == 0)
        _exit(live_main(go[0]));
    /* The live process attaches before the other dies: attaching after the
     * death, it would reap the dead there, not in its periodic reap. */
    for (int64_t end = pattern_now_ns() + 5000000000; slots_taken() < 1;) {
        ck_assert_msg(pattern_now_ns() < end, "the live process did not attach");
        struct timespec ts = { 0, 1000000 };
        nanosleep(&ts, NULL);
    }
    pid_t dead = short_lived(END_KILL);
    pool_test_assert_killed(dead, "the short-lived process");
    ck_assert_uint_eq(slots_taken(), 2);
    char c = 'g';
    ck_assert_int_eq(write(go[1], &c, 1), 1);
    pool_test_assert_exit0(live, "the live process (it never reaped the dead one)");
    ck_assert_uint_eq(slots_taken(), 1);
    ck_assert_uint_eq(pool_reap_dead_(&pool_arena_), 1);
    pool_test_assert_settled(0);
}
END_TEST

/* The attaching thread exits while another thread of its process goes on:
 * the process is alive, and its objects must not be reaped; once it exits
 * for good, it is. */
static void *keep_using(void *arg)
{
    int *fds = arg;
    char c;
    if (read(fds[0], &c, 1) != 1)
        return NULL;
    /* Still its process's objects, still intact. */
    void **kept = *(void ***)(void *)&fds[2];
    bool ok = true;
    for (unsigned i = 0; i < 64; i++)
        ok &= pattern_intact(kept[i], 96, 1000 + i);
    _exit(ok ? 0 : 3);
}

START_TEST(test_attaching_thread_exits_first)
{
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    pid_t pid = test_spawn(20, true, NULL);
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        static void *kept[64];
        for (unsigned i = 0; i < 64; i++) {
            kept[i] = pool_malloc(96);
            pattern_fill(kept[i], 0, 96, 1000 + i);
        }
        static int arg[4];
        arg[0] = fds[0];
        void **k = kept;
        memcpy(&arg[2], &k, sizeof k);
        pthread_t t;
        if (pthread_create(&t, NULL, keep_using, arg) != 0)
            _exit(4);
        pthread_exit(NULL);
    }
    /* The process lives on: another attach must leave it alone. */
    for (int64_t end = pattern_now_ns() + 5000000000;
         !(pool_atomic_load_acquire(&pool_arena_.slots[0].xflags) & POOL_SLOT_BYPID);) {
        ck_assert_msg(pattern_now_ns() < end, "the attaching thread never exited");
        struct timespec ts = { 0, 1000000 };
        nanosleep(&ts, NULL);
    }
    attach_and_go();
    ck_assert_uint_eq(pool_arena_.crash->reaps, 0);
    ck_assert_uint_eq(pool_reap_dead_(&pool_arena_), 1); /* only the one that attached */
    ck_assert_uint_ge(slots_taken(), 1);
    char c = 'g';
    ck_assert_int_eq(write(fds[1], &c, 1), 1);
    pool_test_assert_exit0(pid, "the process whose attaching thread exited");
    ck_assert_uint_eq(pool_reap_dead_(&pool_arena_), 1);
    ck_assert_uint_eq(slots_taken(), 0);
    pool_test_assert_settled(0);
}
END_TEST

Suite *make_lifecycle_suite(void)
{
    Suite *s = suite_create("lifecycle");
    TCase *tc = tcase_create("no master");
    tcase_add_checked_fixture(tc, pool_test_create, pool_test_destroy);
    tcase_set_timeout(tc, 60);
    tcase_add_loop_test(tc, test_every_ending_reaped_at_attach, END_EXIT, END_EXEC + 1);
    tcase_add_test(tc, test_more_processes_than_slots);
    tcase_add_test(tc, test_dead_slots_reused_when_short);
    tcase_add_test(tc, test_periodic_reap_by_a_live_process);
    tcase_add_test(tc, test_attaching_thread_exits_first);
    suite_add_tcase(s, tc);
    return s;
}

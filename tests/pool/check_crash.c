/* SPDX-License-Identifier: BSD-2-Clause */
/* Crash safety of the pool: processes really die (SIGKILL, at the named
 * crash points of debug builds or anywhere), other processes go on in the
 * same classes and the page heap, and pool_reap() gives back what the dead
 * held.  Every block carries its own pattern (pattern.h), so an object
 * handed out twice -- to a live holder and to a later allocator -- shows up
 * as a mismatch; pool_check() must pass; and the bytes still in use after
 * every process is reaped must be exactly what the reaps reported as
 * leaked.  The test process stays private so that its children share its
 * arena.  Entry points: make_crash_suite(), make_crash_points_suite() (debug
 * builds: deaths at named crash points).
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <signal.h>
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
#include "spawn.h"

#define SMALL_A 96
#define SMALL_B 8192
#define BIG_BYTES ((size_t)600 << 10)
#define HOLD 120 /* blocks a holder or a crasher keeps live */

typedef struct held_s {
    void *p;
    size_t size;
    uint64_t seed;
} held_t;

static size_t size_of(unsigned i)
{
    return i % 11 == 10 ? BIG_BYTES : (i % 2 ? SMALL_A : SMALL_B);
}

/* Allocate n patterned blocks of the mix above. */
static void hold_blocks(held_t *h, unsigned n, uint64_t salt)
{
    for (unsigned i = 0; i < n; i++) {
        h[i].size = size_of(i);
        h[i].seed = salt << 32 | i;
        h[i].p = pool_malloc(h[i].size);
        if (h[i].p == NULL || !pool_owns(h[i].p))
            _exit(4);
        pattern_fill(h[i].p, 0, h[i].size, h[i].seed);
    }
}

/* Number of blocks whose pattern is broken. */
static unsigned broken_blocks(const held_t *h, unsigned n)
{
    unsigned bad = 0;
    for (unsigned i = 0; i < n; i++)
        bad += pattern_find_bad(h[i].p, h[i].size, h[i].seed) != SIZE_MAX;
    return bad;
}

/* Allocate and free in both classes and big spans, in rounds, so that every
 * crash point is reached; each block is checked before it is freed. */
static unsigned churn(uint64_t salt, unsigned rounds)
{
    static held_t small[300], big[6];
    unsigned bad = 0;
    for (unsigned r = 0; r < rounds; r++) {
        for (unsigned i = 0; i < 300; i++) {
            small[i].size = i % 2 ? SMALL_A : SMALL_B;
            small[i].seed = salt << 40 | (uint64_t)r << 20 | i;
            small[i].p = pool_malloc(small[i].size);
            if (small[i].p == NULL)
                _exit(4);
            pattern_fill(small[i].p, 0, small[i].size, small[i].seed);
        }
        for (unsigned i = 0; i < 6; i++) {
            big[i].size = (size_t)(i + 1) << 19;
            big[i].seed = salt << 40 | (uint64_t)r << 20 | 1000 | i;
            big[i].p = pool_malloc(big[i].size);
            if (big[i].p == NULL)
                _exit(4);
            pattern_fill(big[i].p, 0, big[i].size, big[i].seed);
        }
        bad += broken_blocks(small, 300) + broken_blocks(big, 6);
        for (unsigned i = 0; i < 6; i += 2)
            pool_free(big[i].p);
        for (unsigned i = 1; i < 6; i += 2)
            pool_free(big[i].p);
        /* Decay would give the pages back a second later: now, so that
         * the release is reached. */
        pool_pageheap_trim_(&pool_arena_);
        for (unsigned i = 0; i < 300; i++)
            pool_free(small[i].p);
        pool_thread_flush();
    }
    return bad;
}

/* ------------------------------------------------------------------------ */
/* Processes                                                                 */
/* ------------------------------------------------------------------------ */

/* Fork a child that attaches (dying at `crash` when not NULL) and runs fn,
 * whose return value is its exit status. */
static pid_t spawn(int (*fn)(void *), void *arg, const char *crash)
{
    pid_t pid = test_spawn(20, true, crash);
    ck_assert_int_ge(pid, 0);
    if (pid == 0)
        _exit(fn(arg));
    return pid;
}

/* A holder keeps HOLD patterned blocks across the crash and everything
 * after it; it checks them when told to through the pipe. */
typedef struct holder_s {
    int ready[2]; /* holder -> test: blocks allocated */
    int go[2];    /* test -> holder: check now */
} holder_t;

static int holder_main(void *arg)
{
    holder_t *h = arg;
    static held_t blocks[HOLD];
    hold_blocks(blocks, HOLD, (uint64_t)getpid());
    char c = 'r';
    if (write(h->ready[1], &c, 1) != 1 || read(h->go[0], &c, 1) != 1)
        return 5;
    unsigned bad = broken_blocks(blocks, HOLD);
    for (unsigned i = 0; i < HOLD; i++)
        pool_free(blocks[i].p);
    return bad == 0 ? 0 : 3;
}

static pid_t holder_start(holder_t *h)
{
    ck_assert_int_eq(pipe(h->ready), 0);
    ck_assert_int_eq(pipe(h->go), 0);
    pid_t pid = spawn(holder_main, h, NULL);
    char c;
    ck_assert_int_eq(read(h->ready[0], &c, 1), 1);
    return pid;
}

static void holder_finish(holder_t *h, pid_t pid)
{
    char c = 'g';
    ck_assert_int_eq(write(h->go[1], &c, 1), 1);
    pool_test_assert_exit0(pid, "the holder (a live process's blocks were overwritten?)");
    close(h->ready[0]);
    close(h->ready[1]);
    close(h->go[0]);
    close(h->go[1]);
}

/* Keeps HOLD live blocks, then arms the crash point `arg` and churns until
 * it kills the process. */
static int crasher_main(void *arg)
{
    static held_t blocks[HOLD];
    hold_blocks(blocks, HOLD, (uint64_t)getpid());
    setenv("SHMPOOL_CRASH", arg, 1);
    pool_crash_config_();
    churn((uint64_t)getpid(), 3);
    return 2; /* the crash point was never reached */
}

/* Works in the same classes and the page heap; checks the arena. */
static int worker_main(void *arg)
{
    unsigned bad = churn((uint64_t)getpid(), 2);
    char msg[256];
    if (pool_check(msg, sizeof msg) != 0)
        return 6;
    return bad == 0 ? 0 : 3;
}

/* Reap pid; returns the bytes it reported as leaked. */
static size_t reap(pid_t pid, pool_reap_report_t *r)
{
    pool_reap_report_t local;
    if (r == NULL)
        r = &local;
    int rc = pool_reap(pid, r);
    ck_assert_msg(rc == 0, "pool_reap(%d): %s", (int)pid, strerror(rc));
    ck_assert_int_eq(r->pid, pid);
    return r->leaked;
}

/* ------------------------------------------------------------------------ */
/* Tests                                                                     */
/* ------------------------------------------------------------------------ */

static const char *const crash_points[] = {
    "central.fetch", "central.add_span", "central.release", "pageheap.take",
    "pageheap.carve", "pageheap.free", "pageheap.merge_left", "pageheap.merge_right",
    "pageheap.release",
};

/* Debug builds: for every crash point, a process dies there holding the
 * lock while another holds live blocks; a third works in the same classes
 * and the page heap (recovering the lock); then all are reaped. */
START_TEST(test_every_crash_point)
{
    char spec[64];
    snprintf(spec, sizeof spec, "%s:2", crash_points[_i]);
    holder_t h;
    pid_t holder = holder_start(&h);
    pid_t crasher = spawn(crasher_main, spec, NULL);
    pool_test_assert_killed(crasher, spec);
    pid_t worker = spawn(worker_main, NULL, NULL);
    pool_test_assert_exit0(worker, "the worker after the crash");
    pool_reap_report_t r;
    size_t leaked = reap(crasher, &r);
    ck_assert_msg(r.live >= HOLD / 2 * SMALL_A, "%s: reap found only %zu live bytes", spec,
                  r.live);
    /* The worker churns again on what the reap gave back. */
    pid_t again = spawn(worker_main, NULL, NULL);
    pool_test_assert_exit0(again, "the worker after the reap");
    holder_finish(&h, holder);
    leaked += reap(worker, NULL) + reap(again, NULL) + reap(holder, NULL);
    ck_assert_uint_ge(pool_arena_.crash->xrecoveries, 1);
    pool_test_assert_settled(leaked);
}
END_TEST

/* Debug builds: a process killed while its thread cache gives a bin back
 * (no lock held yet, some objects already cut off the bin) loses nothing,
 * and its reap counts no leak: the objects cut are found by their owner. */
static const char *const cut_kills[] = { "tcache.cut:2", "tcache.cut:40" };

START_TEST(test_kill_in_cut_then_reap)
{
    holder_t h;
    pid_t holder = holder_start(&h);
    pid_t crasher = spawn(crasher_main, (void *)cut_kills[_i], NULL);
    pool_test_assert_killed(crasher, cut_kills[_i]);
    pool_reap_report_t r;
    size_t leaked = reap(crasher, &r);
    ck_assert_msg(leaked == 0, "%s: the reap counted %zu bytes as leaked", cut_kills[_i], leaked);
    ck_assert_uint_ge(r.live, HOLD / 2 * SMALL_A);
    pid_t worker = spawn(worker_main, NULL, NULL);
    pool_test_assert_exit0(worker, "the worker after the kill");
    holder_finish(&h, holder);
    leaked = reap(worker, NULL) + reap(holder, NULL);
    pool_test_assert_settled(leaked);
}
END_TEST

/* Debug builds: a recovery interrupted by a second kill (inside the
 * roll-back), completed by a third process. */
static const char *const interrupted[][2] = {
    { "journal.release:5", "recover.undo:3" },
    { "pageheap.free:1", "recover.undo:1" },
    { "central.fetch:3", "recover.undo:2" },
};

START_TEST(test_interrupted_recovery)
{
    holder_t h;
    pid_t holder = holder_start(&h);
    pid_t first = spawn(crasher_main, (void *)interrupted[_i][0], NULL);
    pool_test_assert_killed(first, interrupted[_i][0]);
    pid_t second = spawn(worker_main, NULL, interrupted[_i][1]);
    pool_test_assert_killed(second, "the recoverer");
    uint64_t rolled = pool_arena_.crash->xrolled_back;
    pid_t third = spawn(worker_main, NULL, NULL);
    pool_test_assert_exit0(third, "the third process");
    ck_assert_uint_eq(pool_arena_.crash->xrolled_back, rolled + 1);
    holder_finish(&h, holder);
    /* The second died in the recovery its attach ran (a process that
     * attaches first reaps the dead), before it took a slot: there is
     * nothing of its own to reap. */
    pool_reap_report_t r;
    ck_assert_int_eq(pool_reap(second, &r), ESRCH);
    size_t leaked = reap(first, NULL) + reap(third, NULL) +
                    reap(holder, NULL);
    pool_test_assert_settled(leaked);
}
END_TEST

/* Any build: a process killed at an arbitrary point of its work (no crash
 * point) loses nothing once reaped: caches, live objects, big spans. */
static int busy_main(void *arg)
{
    int *fd = arg;
    static held_t blocks[HOLD];
    hold_blocks(blocks, HOLD, (uint64_t)getpid());
    char c = 'r';
    if (write(fd[1], &c, 1) != 1)
        return 5;
    for (uint64_t r = 0; r < 1000000; r++)
        churn((uint64_t)getpid() << 8 | (r & 0xff), 1);
    return 2;
}

START_TEST(test_kill_anywhere_then_reap)
{
    holder_t h;
    pid_t holder = holder_start(&h);
    size_t leaked = 0;
    for (unsigned k = 0; k < 6; k++) {
        int fd[2];
        ck_assert_int_eq(pipe(fd), 0);
        pid_t victim = spawn(busy_main, fd, NULL);
        char c;
        ck_assert_int_eq(read(fd[0], &c, 1), 1);
        struct timespec ts = { 0, (long)(1 + k * 7) * 1000000L };
        nanosleep(&ts, NULL);
        kill(victim, SIGKILL);
        pool_test_assert_killed(victim, "the victim");
        pool_reap_report_t r;
        leaked += reap(victim, &r);
        ck_assert_uint_ge(r.live, HOLD / 2 * SMALL_A);
        ck_assert_uint_eq(r.slots, 1);
        close(fd[0]);
        close(fd[1]);
    }
    pid_t worker = spawn(worker_main, NULL, NULL);
    pool_test_assert_exit0(worker, "the worker after the kills");
    holder_finish(&h, holder);
    leaked += reap(worker, NULL) + reap(holder, NULL);
    pool_test_assert_settled(leaked);
    ck_assert_uint_eq(leaked, 0);
}
END_TEST

/* Two processes take 16-byte objects in turns, so their objects sit side
 * by side in the same spans; when one dies, every object it took is
 * reclaimed and none of the survivor's is touched. */
#define TURNS 200

typedef struct taker_s {
    int go[2];     /* test -> taker: take one more, or (after TURNS) check */
    int ready[2];  /* taker -> test: done */
    void **mine;   /* TURNS pointers, in memory the test shares */
    uint64_t salt;
} taker_t;

static int taker_main(void *arg)
{
    taker_t *t = arg;
    char c;
    test_own_classes();
    for (unsigned i = 0; i < TURNS; i++) {
        if (read(t->go[0], &c, 1) != 1)
            return 5;
        t->mine[i] = pool_malloc(16);
        if (t->mine[i] == NULL)
            return 4;
        pattern_fill(t->mine[i], 0, 16, t->salt << 32 | i);
        /* Back to the central cache at once: the other taker's next
         * object comes from the same span. */
        pool_thread_flush();
        if (write(t->ready[1], &c, 1) != 1)
            return 5;
    }
    if (read(t->go[0], &c, 1) != 1)
        return 5;
    unsigned bad = 0;
    for (unsigned i = 0; i < TURNS; i++) {
        bad += pattern_find_bad(t->mine[i], 16, t->salt << 32 | i) != SIZE_MAX;
        pool_free(t->mine[i]);
    }
    return bad == 0 ? 0 : 3;
}

/* Pairs of 16-byte neighbours (p, p + 16, p 32-aligned) split between a and b. */
static unsigned split_pairs(void *const *a, void *const *b)
{
    unsigned n = 0;
    for (unsigned i = 0; i < TURNS; i++)
        for (unsigned j = 0; j < TURNS; j++)
            n += ((uintptr_t)a[i] ^ (uintptr_t)b[j]) == 16;
    return n;
}

START_TEST(test_neighbours_reclaimed)
{
    void **shared = mmap(NULL, 2 * TURNS * sizeof(void *), PROT_READ | PROT_WRITE,
                         MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert_ptr_ne(shared, MAP_FAILED);
    taker_t t[2];
    pid_t pid[2];
    for (unsigned k = 0; k < 2; k++) {
        ck_assert_int_eq(pipe(t[k].go), 0);
        ck_assert_int_eq(pipe(t[k].ready), 0);
        t[k].mine = shared + k * TURNS;
        t[k].salt = 100 + k;
        pid[k] = spawn(taker_main, &t[k], NULL);
    }
    char c = 't';
    for (unsigned i = 0; i < TURNS; i++)
        for (unsigned k = 0; k < 2; k++) {
            ck_assert_int_eq(write(t[k].go[1], &c, 1), 1);
            ck_assert_int_eq(read(t[k].ready[0], &c, 1), 1);
        }
    /* The case this test is about must have happened. */
    ck_assert_uint_ge(split_pairs(t[0].mine, t[1].mine), TURNS / 4);

    kill(pid[0], SIGKILL);
    pool_test_assert_killed(pid[0], "the first taker");
    pool_reap_report_t r;
    size_t leaked = reap(pid[0], &r);
    ck_assert_uint_eq(leaked, 0);
    ck_assert_uint_eq(r.live, TURNS * 16);
    ck_assert_int_eq(write(t[1].go[1], &c, 1), 1);
    pool_test_assert_exit0(pid[1], "the second taker (its objects were reclaimed?)");
    leaked += reap(pid[1], NULL);
    pool_test_assert_settled(leaked);
    for (unsigned k = 0; k < 2; k++) {
        close(t[k].go[0]);
        close(t[k].go[1]);
        close(t[k].ready[0]);
        close(t[k].ready[1]);
    }
    munmap(shared, 2 * TURNS * sizeof(void *));
}
END_TEST

/* What a process that dies holding blocks leaves: its blocks' addresses
 * and sizes, written before it says it is ready to be killed. */
typedef struct left_s {
    int ready[2];
    held_t blocks[HOLD];
} left_t;

static int leaver_main(void *arg)
{
    left_t *l = arg;
    hold_blocks(l->blocks, HOLD, (uint64_t)getpid());
    char c = 'r';
    if (write(l->ready[1], &c, 1) != 1)
        return 5;
    pause();
    return 6;
}

/* Resident pages of [p, p + len) in the arena's shared object. */
static size_t resident_pages(void *p, size_t len)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE), n = len / page, in = 0;
    unsigned char *v = malloc(n);
    ck_assert_ptr_nonnull(v);
    ck_assert_int_eq(mincore(p, len, v), 0);
    for (size_t i = 0; i < n; i++)
        in += v[i] & 1;
    free(v);
    return in;
}

/* The reap of a process killed with big blocks live gives their pages to
 * the OS at once, as a private heap's go with its process, without
 * waiting for the decay: the shared object holds none of them after it. */
START_TEST(test_reap_returns_the_dead_pages)
{
    left_t *l = mmap(NULL, sizeof *l, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert_ptr_ne(l, MAP_FAILED);
    ck_assert_int_eq(pipe(l->ready), 0);
    pid_t pid = spawn(leaver_main, l, NULL);
    char c;
    ck_assert_int_eq(read(l->ready[0], &c, 1), 1);
    size_t big = 0, in = 0;
    for (unsigned i = 0; i < HOLD; i++)
        if (l->blocks[i].size == BIG_BYTES) {
            big += BIG_BYTES / (size_t)sysconf(_SC_PAGESIZE);
            in += resident_pages(l->blocks[i].p, BIG_BYTES);
        }
    ck_assert_uint_gt(big, 0);
    ck_assert_uint_eq(in, big); /* written whole by the pattern */
    uint64_t returned = pool_arena_.ph->returned_pages;
    kill(pid, SIGKILL);
    pool_test_assert_killed(pid, "the process that left its blocks");
    pool_reap_report_t r;
    ck_assert_uint_eq(reap(pid, &r), 0);
    ck_assert_uint_ge(r.live, HOLD / 11 * BIG_BYTES);
    in = 0;
    for (unsigned i = 0; i < HOLD; i++)
        if (l->blocks[i].size == BIG_BYTES)
            in += resident_pages(l->blocks[i].p, BIG_BYTES);
    ck_assert_msg(in == 0, "%zu of the dead's %zu big-block pages still resident", in, big);
    ck_assert_uint_ge(pool_arena_.ph->returned_pages - returned,
                      HOLD / 11 * (BIG_BYTES >> POOL_PAGE_SHIFT));
    pool_test_assert_settled(0);
    close(l->ready[0]);
    close(l->ready[1]);
    munmap(l, sizeof *l);
}
END_TEST

/* A process killed with an object between its bin and the caller: a pop
 * that moved the bin's head but not yet its length (index 0), or free's
 * fast path that counted its object in the bin but had not linked it yet
 * (index 1); the window is a few instructions of every malloc and free,
 * where a SIGKILL under load lands now and then.  The object is one of
 * the dead process's live ones: the reap counts no leak and gives it
 * back, and nothing stays in use.  Before, the reap counted its bytes as
 * leaked. */
typedef struct between_s {
    int ready[2]; /* child -> test: in the window */
    bool pop;     /* the pop's window, else free's */
} between_t;

static int between_main(void *arg)
{
    between_t *b = arg;
    unsigned cls = pool_sizeclass_of(SMALL_A);
    /* More than a light class lends (sizeclass.c), so that the class's
     * own bin holds some. */
    void *p[100];
    for (unsigned i = 0; i < 100; i++)
        if ((p[i] = pool_malloc(SMALL_A)) == NULL)
            return 4;
    for (unsigned i = 0; i < 100; i++)
        pool_free(p[i]);
    pool_tcache_sh_t *tc = pool_tls_tcache_;
    if (pool_bin_len(tc, cls) < 2)
        return 5;
    if (b->pop) {
        void **head = tc->heads[cls];
        tc->heads[cls] = head[0];
    } else {
        if (pool_malloc(SMALL_A) == NULL)
            return 4;
        tc->bins[cls].room--;
    }
    char c = 'r';
    if (write(b->ready[1], &c, 1) != 1)
        return 5;
    pause();
    return 6;
}

START_TEST(test_kill_between_bin_and_caller)
{
    between_t b = { .pop = _i == 0 };
    ck_assert_int_eq(pipe(b.ready), 0);
    pid_t pid = spawn(between_main, &b, NULL);
    /* A child that fails before it is ready ends the read. */
    close(b.ready[1]);
    char c;
    ck_assert_msg(read(b.ready[0], &c, 1) == 1, "the child did not get between its bin and "
                  "the caller (exit status %#x)", pool_test_wait(pid));
    kill(pid, SIGKILL);
    pool_test_assert_killed(pid, "the process between its bin and the caller");
    pool_reap_report_t r;
    size_t leaked = reap(pid, &r);
    ck_assert_msg(leaked == 0, "%s: the reap counted %zu bytes as leaked",
                  b.pop ? "a pop" : "a free", leaked);
    ck_assert_uint_ge(r.live, SMALL_A);
    pool_test_assert_settled(0);
    close(b.ready[0]);
}
END_TEST

/* pool_reap refuses a live process and a pid that never attached; a pid
 * already reaped gets the report of that reap, whoever made it. */
START_TEST(test_reap_refuses)
{
    holder_t h;
    pid_t holder = holder_start(&h);
    pool_reap_report_t r;
    ck_assert_int_eq(pool_reap(holder, &r), EBUSY);
    holder_finish(&h, holder);
    ck_assert_int_eq(pool_reap(holder, &r), 0);
    ck_assert_int_eq(r.reaper, getpid());
    ck_assert_uint_eq(r.slots, 1);
    ck_assert_int_eq(pool_reap(holder, &r), 0);
    ck_assert_int_eq(r.reaper, getpid());
    ck_assert_int_eq(pool_reap(-1, &r), ESRCH);
    pid_t never = fork();
    if (never == 0)
        _exit(0);
    pool_test_assert_exit0(never, "a child that never attached");
    ck_assert_int_eq(pool_reap(never, &r), ESRCH);
    pool_test_assert_settled(0);
}
END_TEST

/* The invariant's other half: a block handed to another process survives
 * its allocator's death once the receiver adopted it. */
typedef struct adopt_s {
    int to_receiver[2];
    int done[2];
    held_t block;
} adopt_t;

static int giver_main(void *arg)
{
    adopt_t *ad = arg;
    held_t b = { pool_malloc(SMALL_A), SMALL_A, 77 };
    pattern_fill(b.p, 0, b.size, b.seed);
    if (write(ad->to_receiver[1], &b, sizeof b) != (ssize_t)sizeof b)
        return 5;
    pause();
    return 2;
}

static int receiver_main(void *arg)
{
    adopt_t *ad = arg;
    held_t b;
    if (read(ad->to_receiver[0], &b, sizeof b) != (ssize_t)sizeof b)
        return 5;
    pool_adopt(b.p);
    char c = 'a';
    if (write(ad->done[1], &c, 1) != 1 || read(ad->to_receiver[0], &c, 1) != 1)
        return 5;
    unsigned bad = broken_blocks(&b, 1);
    pool_free(b.p);
    return bad == 0 ? 0 : 3;
}

START_TEST(test_adopted_block_survives)
{
    adopt_t ad;
    ck_assert_int_eq(pipe(ad.to_receiver), 0);
    ck_assert_int_eq(pipe(ad.done), 0);
    pid_t receiver = spawn(receiver_main, &ad, NULL);
    pid_t giver = spawn(giver_main, &ad, NULL);
    char c;
    ck_assert_int_eq(read(ad.done[0], &c, 1), 1);
    kill(giver, SIGKILL);
    pool_test_assert_killed(giver, "the giver");
    pool_reap_report_t r;
    reap(giver, &r);
    pid_t worker = spawn(worker_main, NULL, NULL);
    pool_test_assert_exit0(worker, "the worker");
    ck_assert_int_eq(write(ad.to_receiver[1], &c, 1), 1);
    pool_test_assert_exit0(receiver, "the receiver (its adopted block was reclaimed?)");
    size_t leaked = reap(worker, NULL) + reap(receiver, NULL);
    pool_test_assert_settled(leaked);
}
END_TEST

/* The watchdog's view: a lock held by a stopped process is reported with
 * its pid, and pool_repair() gives up on it rather than hang; once that
 * process is killed, one pool_repair() recovers it. */
static int stuck_main(void *arg)
{
    pool_arena_t *a = &pool_arena_;
    pool_lock_(a, &a->central[6].lock, POOL_LOCK_CENTRAL, 6);
    raise(SIGSTOP);
    return 2;
}

START_TEST(test_stalled_lock_reported)
{
    ck_assert_int_eq(pool_lock_stalled(0), 0);
    pid_t stuck = spawn(stuck_main, NULL, NULL);
    pid_t seen = 0;
    for (int i = 0; i < 300 && seen == 0; i++) {
        struct timespec ts = { 0, 10000000L };
        nanosleep(&ts, NULL);
        seen = pool_lock_stalled(100);
    }
    ck_assert_int_eq(seen, stuck);
    unsigned recovered = 99;
    ck_assert_int_eq(pool_repair(&recovered), EAGAIN);
    ck_assert_uint_eq(recovered, 0);
    kill(stuck, SIGKILL);
    pool_test_assert_killed(stuck, "the stuck holder");
    ck_assert_int_eq(pool_repair(&recovered), 0);
    ck_assert_uint_eq(recovered, 1);
    ck_assert_int_eq(pool_lock_stalled(0), 0);
    reap(stuck, NULL);
    pool_test_assert_settled(0);
}
END_TEST

/* A holder stopped inside the page-heap lock stalls nothing a supervisor
 * or a waiting parent calls: pool_decay(), pool_usage(), pool_reap() (of a
 * pid that never attached: the reap history is the page heap's),
 * pool_repair() and pool_stats_json() give up on the lock and say so,
 * the watchdog's view names the holder; once it is killed, all of them
 * work again and the lock is recovered. */
static int stuck_heap_main(void *arg)
{
    pool_arena_t *a = &pool_arena_;
    (void)arg;
    pool_lock_(a, &a->ph->lock, POOL_LOCK_PAGEHEAP, 0);
    raise(SIGSTOP);
    return 2;
}

START_TEST(test_stopped_pageheap_holder)
{
    /* The arena's creation made the first slots: a process that attaches
     * after the holder stopped finds its slot below the top even when the
     * holder is the first to attach. */
    ck_assert_uint_ge(pool_slots_top(&pool_arena_), 2);
    pid_t stuck = spawn(stuck_heap_main, NULL, NULL);
    int status;
    ck_assert_int_eq(waitpid(stuck, &status, WUNTRACED), stuck);
    ck_assert(WIFSTOPPED(status));
    /* A heap gone quiet for two decay periods: pool_decay() must take the
     * lock (the field is read without it, and the holder is stopped). */
    pool_arena_.ph->decay_start_ns = 0;
    ck_assert_int_eq(pool_decay(), EAGAIN);
    pool_usage_t u;
    ck_assert_int_eq(pool_usage(&u), EAGAIN);
    ck_assert_uint_eq(u.reserved, POOL_TEST_HEAP);
    pid_t never = fork();
    if (never == 0)
        _exit(0);
    pool_test_assert_exit0(never, "a child that never attached");
    pool_reap_report_t r;
    ck_assert_int_eq(pool_reap(never, &r), EAGAIN);
    ck_assert_int_eq(pool_repair(NULL), EAGAIN);
    ck_assert_int_eq(pool_lock_stalled(POOL_WAIT_MS), stuck);
    /* A process that attaches below the top takes a slot without the
     * page-heap lock. */
    pid_t early = fork();
    ck_assert_int_ge(early, 0);
    if (early == 0) {
        alarm(10);
        _exit(pool_attach() == 0 ? 0 : 1);
    }
    pool_test_assert_exit0(early, "a process attaching below the top while the page-heap holder "
                                  "is stopped");
    /* A process that attaches finds every slot below the top held (the
     * top is lowered to the one slot in use, as if the others the first
     * growth made were held) and would raise the top under the page-heap
     * lock: it gives up after the wait, as a reaper does, and does not
     * hang. */
    ck_assert_uint_eq(pool_arena_.slots[0].xstate, (uint32_t)stuck);
    unsigned top = pool_slots_top(&pool_arena_);
    pool_atomic_store_release(&pool_arena_.hdr->xslots_top, 1);
    pid_t late = fork();
    ck_assert_int_ge(late, 0);
    if (late == 0) {
        alarm(10);
        _exit(pool_attach() == EAGAIN ? 0 : 1);
    }
    pool_test_assert_exit0(late, "a process attaching while the page-heap holder is stopped");
    pool_atomic_store_release(&pool_arena_.hdr->xslots_top, top);
    static char json[1 << 16];
    ck_assert_uint_lt(pool_stats_json(json, sizeof json), sizeof json);
    ck_assert_msg(strstr(json, "\"exact\":false}") != NULL, "%s", json);
    char want[80];
    snprintf(want, sizeof want, "\"check\":\"not run: pid %d held a pool lock", (int)stuck);
    if (POOL_CONFIG_DEBUG > 0)
        ck_assert_msg(strstr(json, want) != NULL, "no %s in %s", want, json);

    kill(stuck, SIGKILL);
    pool_test_assert_killed(stuck, "the stuck holder");
    unsigned recovered = 0;
    ck_assert_int_eq(pool_repair(&recovered), 0);
    ck_assert_uint_eq(recovered, 1);
    ck_assert_int_eq(pool_decay(), 0);
    ck_assert_int_eq(pool_usage(&u), 0);
    ck_assert_int_eq(pool_reap(never, &r), ESRCH);
    reap(stuck, NULL);
    reap(early, NULL);
    ck_assert_uint_lt(pool_stats_json(json, sizeof json), sizeof json);
    ck_assert_msg(strstr(json, "\"exact\":true}") != NULL, "%s", json);
    if (POOL_CONFIG_DEBUG > 0)
        ck_assert_msg(strstr(json, "\"check\":\"ok\",\"check_caches_left_out\":0") != NULL,
                      "%s", json);
    pool_test_assert_settled(0);
}
END_TEST

/* /stats shows the reaps, one by one, and the crash counters. */
START_TEST(test_stats_show_reaps)
{
    int fd[2];
    ck_assert_int_eq(pipe(fd), 0);
    pid_t victim = spawn(busy_main, fd, NULL);
    char c;
    ck_assert_int_eq(read(fd[0], &c, 1), 1);
    kill(victim, SIGKILL);
    pool_test_assert_killed(victim, "the victim");
    reap(victim, NULL);
    static char json[1 << 16];
    size_t n = pool_stats_json(json, sizeof json);
    ck_assert_uint_lt(n, sizeof json);
    char want[64];
    snprintf(want, sizeof want, "\"last_reaps\":[{\"pid\":%d,", (int)victim);
    ck_assert_msg(strstr(json, want) != NULL, "no %s in %s", want, json);
    ck_assert_msg(strstr(json, "\"reaps\":1,") != NULL, "%s", json);
    ck_assert_msg(strstr(json, "\"leaked_bytes\":0,") != NULL, "%s", json);
    if (POOL_CONFIG_DEBUG > 0)
        ck_assert_msg(strstr(json, "\"check\":\"ok\"") != NULL, "%s", json);
    close(fd[0]);
    close(fd[1]);
}
END_TEST

/* SHMPOOL_CRASH: a malformed value arms nothing and says so in one line
 * of stderr; "@SLOT" arms the point only in the process attached there. */
typedef enum spec_slot_e { SPEC_ANY, SPEC_OWN, SPEC_OTHER } spec_slot_t;

static const struct {
    const char *spec;
    spec_slot_t slot;   /* "@" and the child's own slot or another appended */
    bool refused;       /* else it fires exactly when armed in the child's slot */
} crash_specs[] = {
    { "central.fetch", SPEC_ANY, true },
    { "random:0.001,central.fetch", SPEC_ANY, true },
    { "central.fetch:1,", SPEC_ANY, true },
    { ",central.fetch:1", SPEC_ANY, true },
    { "central.fetch:0", SPEC_ANY, true },
    { "central.fetch:", SPEC_ANY, true },
    { "central.fetch:1:stop:", SPEC_ANY, true },
    { "central.fetch:1:kill", SPEC_ANY, true },
    { "central.fetch:1@", SPEC_ANY, true },
    { "central.fetch:1@256", SPEC_ANY, true },
    { "central.fetch:1@1x", SPEC_ANY, true },
    { "central.fetch:1", SPEC_OWN, false },
    { "central.fetch:1", SPEC_OTHER, false },
    { "central.fetch:1", SPEC_ANY, false },
};

typedef struct spec_run_s {
    unsigned i;   /* into crash_specs */
    int err[2];   /* the child's stderr */
} spec_run_t;

static int spec_main(void *arg)
{
    spec_run_t *r = arg;
    char spec[96];
    int slot = crash_specs[r->i].slot == SPEC_OWN ? pool_slot() : pool_slot() + 1;
    if (crash_specs[r->i].slot == SPEC_ANY)
        snprintf(spec, sizeof spec, "%s", crash_specs[r->i].spec);
    else
        snprintf(spec, sizeof spec, "%s@%d", crash_specs[r->i].spec, slot);
    if (dup2(r->err[1], STDERR_FILENO) < 0)
        return 5;
    setenv("SHMPOOL_CRASH", spec, 1);
    pool_crash_config_();
    /* Fresh classes: every one fetches from its central cache. */
    for (size_t size = 16; size <= 4096; size *= 2)
        pool_free(pool_malloc(size));
    return 0;
}

START_TEST(test_crash_spec)
{
    spec_run_t r = { (unsigned)_i, { -1, -1 } };
    ck_assert_int_eq(pipe(r.err), 0);
    pid_t pid = spawn(spec_main, &r, NULL);
    int status = pool_test_wait(pid);
    close(r.err[1]);
    char said[512];
    ssize_t n = read(r.err[0], said, sizeof said - 1);
    said[n > 0 ? n : 0] = '\0';
    close(r.err[0]);
    bool fired = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
    const char *spec = crash_specs[_i].spec;
    spec_slot_t slot = crash_specs[_i].slot;
    if (crash_specs[_i].refused) {
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                      "SHMPOOL_CRASH=%s: status %#x (armed?)", spec, status);
        ck_assert_msg(strstr(said, "SHMPOOL_CRASH='") != NULL && strchr(said, '\n') ==
                      said + strlen(said) - 1, "SHMPOOL_CRASH=%s refused without one line: "
                      "'%s'", spec, said);
    } else {
        ck_assert_msg(fired == (slot != SPEC_OTHER), "SHMPOOL_CRASH=%s (slot %d): status %#x",
                      spec, (int)slot, status);
        ck_assert_msg(strstr(said, "SHMPOOL_CRASH='") == NULL, "SHMPOOL_CRASH=%s: %s", spec,
                      said);
    }
}
END_TEST

Suite *make_crash_suite(void)
{
    Suite *s = suite_create("crash");
    TCase *tc = tcase_create("reap");
    tcase_add_checked_fixture(tc, pool_test_create, pool_test_destroy);
    tcase_add_test(tc, test_kill_anywhere_then_reap);
    tcase_add_test(tc, test_reap_refuses);
    tcase_add_test(tc, test_neighbours_reclaimed);
    tcase_add_test(tc, test_reap_returns_the_dead_pages);
    tcase_add_loop_test(tc, test_kill_between_bin_and_caller, 0, 2);
    tcase_add_test(tc, test_adopted_block_survives);
    tcase_add_test(tc, test_stalled_lock_reported);
    tcase_add_test(tc, test_stopped_pageheap_holder);
    tcase_add_test(tc, test_stats_show_reaps);
    tcase_set_timeout(tc, 30);
    suite_add_tcase(s, tc);
    return s;
}

Suite *make_crash_points_suite(void)
{
    Suite *s = suite_create("crash_points");
    TCase *tc = tcase_create("points");
    tcase_add_checked_fixture(tc, pool_test_create, pool_test_destroy);
    tcase_add_loop_test(tc, test_every_crash_point, 0,
                        (int)(sizeof crash_points / sizeof crash_points[0]));
    tcase_add_loop_test(tc, test_interrupted_recovery, 0,
                        (int)(sizeof interrupted / sizeof interrupted[0]));
    tcase_add_loop_test(tc, test_kill_in_cut_then_reap, 0,
                        (int)(sizeof cut_kills / sizeof cut_kills[0]));
    tcase_add_loop_test(tc, test_crash_spec, 0,
                        (int)(sizeof crash_specs / sizeof crash_specs[0]));
    tcase_set_timeout(tc, 30);
    suite_add_tcase(s, tc);
    return s;
}

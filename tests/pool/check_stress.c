/* SPDX-License-Identifier: BSD-2-Clause */
/* Stress: four workers share one arena and hammer it with pool_malloc,
 * pool_free and pool_realloc of random sizes 1 B..300 KiB, every block
 * carrying its own pattern, and hand blocks to each other through a queue so
 * that a block is freed (or grown) by another worker than the one that
 * allocated it.  Run once with four forked processes and once with four
 * threads of one attached process; afterwards pool_check() must pass and the
 * arena's bytes must add up.  Entry point: make_stress_suite().
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check_pool.h"
#include "../programs/pattern.h"
#include "shmpool.h"

#define STRESS_ARENA ((size_t)256 << 20)
#define STRESS_WORKERS 4
#define STRESS_RUN_NS 2000000000LL  /* per worker; the op count bounds it too */
#define STRESS_MAX_OPS 400000
#define STRESS_LOCAL 128            /* blocks a worker holds at most */
#define QUEUE_CAP 64

typedef struct block_s {
    void *p;
    size_t size;
    uint64_t seed;      /* worker << 40 | sequence: unique per block */
} block_t;

/* Lives in its own MAP_SHARED mapping, outside the arena under test, so the
 * hand-over itself cannot be corrupted by the allocator. */
typedef struct stress_sh_s {
    pthread_mutex_t lock;           /* process-shared; guards all below */
    unsigned head, count;
    int producing;                  /* workers still in their main loop */
    int failed;
    char why[512];                  /* the first failure */
    unsigned long handed, taken;    /* blocks through the queue */
    block_t ring[QUEUE_CAP];
} stress_sh_t;

typedef struct worker_arg_s {
    stress_sh_t *sh;
    int id;
} worker_arg_t;

/* ------------------------------------------------------------------------ */
/* Shared queue                                                              */
/* ------------------------------------------------------------------------ */

static stress_sh_t *stress_map(void)
{
    stress_sh_t *sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE,
                           MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert_msg(sh != MAP_FAILED, "mmap: %s", strerror(errno));
    pthread_mutexattr_t ma;
    pthread_mutexattr_init(&ma);
    pthread_mutexattr_setpshared(&ma, PTHREAD_PROCESS_SHARED);
    pthread_mutex_init(&sh->lock, &ma);
    pthread_mutexattr_destroy(&ma);
    sh->producing = STRESS_WORKERS;
    return sh;
}

static void stress_fail(stress_sh_t *sh, const char *fmt, ...)
{
    pthread_mutex_lock(&sh->lock);
    if (!sh->failed) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(sh->why, sizeof sh->why, fmt, ap);
        va_end(ap);
    }
    sh->failed++;
    pthread_mutex_unlock(&sh->lock);
}

static bool queue_push(stress_sh_t *sh, const block_t *b)
{
    bool ok = false;
    pthread_mutex_lock(&sh->lock);
    if (sh->count < QUEUE_CAP) {
        sh->ring[(sh->head + sh->count) % QUEUE_CAP] = *b;
        sh->count++;
        sh->handed++;
        ok = true;
    }
    pthread_mutex_unlock(&sh->lock);
    return ok;
}

/* Pop one block.  *done is set when the queue is empty and nobody will
 * push again. */
static bool queue_pop(stress_sh_t *sh, block_t *b, bool *done)
{
    bool ok = false;
    pthread_mutex_lock(&sh->lock);
    if (sh->count > 0) {
        *b = sh->ring[sh->head];
        sh->head = (sh->head + 1) % QUEUE_CAP;
        sh->count--;
        sh->taken++;
        ok = true;
    }
    *done = sh->count == 0 && sh->producing == 0;
    pthread_mutex_unlock(&sh->lock);
    return ok;
}

/* ------------------------------------------------------------------------ */
/* One worker (a process or a thread)                                        */
/* ------------------------------------------------------------------------ */

/* Mostly small objects, as a server allocates, with a tail of medium blocks
 * and big spans past the largest class. */
static size_t pick_size(uint64_t *rng)
{
    uint64_t r = pattern_rng_next(rng);
    unsigned bucket = (unsigned)(r % 100);
    r >>= 8;
    if (bucket < 60)
        return 1 + r % 256;
    if (bucket < 85)
        return 257 + r % (4096 - 256);
    if (bucket < 95)
        return 4097 + r % (65536 - 4096);
    if (bucket < 98)
        return 65537 + r % (POOL_MAX_SMALL - 65536);
    return POOL_MAX_SMALL + 1 + r % (300 * 1024 - POOL_MAX_SMALL);
}

static bool block_ok(stress_sh_t *sh, int id, const block_t *b, const char *when)
{
    size_t bad = pattern_find_bad(b->p, b->size, b->seed);
    if (bad != SIZE_MAX) {
        stress_fail(sh, "worker %d, %s: block %p (%zu bytes, seed %#llx) "
                    "overwritten at byte %zu", id, when, b->p, b->size,
                    (unsigned long long)b->seed, bad);
        return false;
    }
    return true;
}

static bool block_new(stress_sh_t *sh, int id, block_t *b, size_t size,
                      uint64_t seed)
{
    void *p = pool_malloc(size);
    if (p == NULL || (uintptr_t)p % 16 != 0 || !pool_owns(p)) {
        stress_fail(sh, "worker %d: pool_malloc(%zu) = %p (%s)", id, size, p,
                    p == NULL ? strerror(errno) : "misaligned or not in arena");
        return false;
    }
    pattern_fill(p, 0, size, seed);
    *b = (block_t){ p, size, seed };
    return true;
}

/* Grow or shrink b, checking what survived and patterning the new tail. */
static bool block_resize(stress_sh_t *sh, int id, block_t *b, size_t size)
{
    void *p = pool_realloc(b->p, size);
    if (p == NULL || (uintptr_t)p % 16 != 0 || !pool_owns(p)) {
        stress_fail(sh, "worker %d: pool_realloc(%p, %zu -> %zu) = %p", id,
                    b->p, b->size, size, p);
        return false;
    }
    size_t kept = b->size < size ? b->size : size;
    size_t bad = pattern_find_bad(p, kept, b->seed);
    if (bad != SIZE_MAX) {
        stress_fail(sh, "worker %d: pool_realloc(%zu -> %zu) lost byte %zu",
                    id, b->size, size, bad);
        return false;
    }
    pattern_fill(p, kept, size, b->seed);
    b->p = p;
    b->size = size;
    return true;
}

static bool block_release(stress_sh_t *sh, int id, block_t *b, const char *when)
{
    if (!block_ok(sh, id, b, when))
        return false;
    if (pool_usable_size(b->p) < b->size) {
        stress_fail(sh, "worker %d: usable size %zu < %zu", id,
                    pool_usable_size(b->p), b->size);
        return false;
    }
    pool_free(b->p);
    b->p = NULL;
    return true;
}

/* A block from the queue: another worker allocated it; sometimes grow or
 * shrink it here first, then free it here. */
static bool take_foreign(stress_sh_t *sh, int id, block_t *b, uint64_t *rng)
{
    if (!block_ok(sh, id, b, "taken from the queue"))
        return false;
    if (pattern_rng_next(rng) % 2 == 0 && !block_resize(sh, id, b, pick_size(rng)))
        return false;
    return block_release(sh, id, b, "freeing a foreign block");
}

/* The main loop, then a drain until every worker is done.  Returns true when
 * nothing went wrong; failures are recorded in sh. */
static bool stress_worker(stress_sh_t *sh, int id)
{
    block_t local[STRESS_LOCAL] = { { 0 } };
    uint64_t rng = pattern_mix((uint64_t)id + 1) | 1;
    uint64_t seq = 0;
    int64_t deadline = pattern_now_ns() + STRESS_RUN_NS;
    bool ok = true, done;
    block_t b;

    for (long op = 0; ok && op < STRESS_MAX_OPS; op++) {
        if ((op & 255) == 0 &&
            (pattern_now_ns() > deadline || __atomic_load_n(&sh->failed, __ATOMIC_RELAXED)))
            break;
        uint64_t r = pattern_rng_next(&rng);
        block_t *slot = &local[r % STRESS_LOCAL];
        if (slot->p == NULL) {
            ok = block_new(sh, id, slot, pick_size(&rng),
                           (uint64_t)id << 40 | seq++);
            continue;
        }
        switch ((r >> 16) % 8) {
        case 0: case 1: case 2:
            ok = block_release(sh, id, slot, "before free");
            break;
        case 3: case 4:
            ok = block_ok(sh, id, slot, "before realloc") &&
                 block_resize(sh, id, slot, pick_size(&rng));
            break;
        case 5: case 6:
            if (!block_ok(sh, id, slot, "before hand-over"))
                ok = false;
            else if (queue_push(sh, slot))
                slot->p = NULL;
            else
                ok = block_release(sh, id, slot, "queue full, freeing");
            break;
        default:
            if (queue_pop(sh, &b, &done))
                ok = take_foreign(sh, id, &b, &rng);
            break;
        }
    }
    for (int i = 0; i < STRESS_LOCAL; i++)
        if (local[i].p != NULL && !block_release(sh, id, &local[i], "at the end"))
            ok = false;

    pthread_mutex_lock(&sh->lock);
    sh->producing--;
    pthread_mutex_unlock(&sh->lock);
    /* Bounded: once every worker stops producing, the queue only shrinks. */
    for (;;) {
        if (queue_pop(sh, &b, &done)) {
            if (!take_foreign(sh, id, &b, &rng))
                ok = false;
        } else if (done) {
            break;
        } else {
            usleep(100);
        }
    }
    return ok;
}

/* ------------------------------------------------------------------------ */
/* Checks after the run                                                      */
/* ------------------------------------------------------------------------ */

static void check_arena_settled(stress_sh_t *sh, size_t in_use_before)
{
    ck_assert_msg(sh->failed == 0, "%d failures, first: %s", sh->failed,
                  sh->why);
    ck_assert_msg(sh->handed == sh->taken && sh->handed > 0,
                  "queue: %lu blocks handed over, %lu taken", sh->handed,
                  sh->taken);
    pool_test_assert_settled(in_use_before);

    pool_usage_t u;
    pool_usage(&u);
    ck_assert_uint_eq(u.fallbacks, 0);
    ck_assert_uint_le(u.used, u.reserved);
}

static void setup_arena(void)
{
    int rc = pool_create(STRESS_ARENA);
    ck_assert_msg(rc == 0, "pool_create: %s", strerror(rc));
}

/* ------------------------------------------------------------------------ */
/* Processes                                                                 */
/* ------------------------------------------------------------------------ */

START_TEST(test_stress_processes)
{
    stress_sh_t *sh = stress_map();
    pool_usage_t u;
    pool_usage(&u);
    size_t in_use_before = u.in_use;
    pid_t pid[STRESS_WORKERS];

    for (int i = 0; i < STRESS_WORKERS; i++) {
        pid[i] = fork();
        ck_assert_msg(pid[i] >= 0, "fork: %s", strerror(errno));
        if (pid[i] == 0) {
            int rc = pool_attach();
            if (rc != 0) {
                stress_fail(sh, "worker %d: pool_attach: %s", i, strerror(rc));
                pthread_mutex_lock(&sh->lock);
                sh->producing--;
                pthread_mutex_unlock(&sh->lock);
                _exit(1);
            }
            bool ok = stress_worker(sh, i);
            /* Leave the arena each way a worker can: detach, flush, or
             * just exit with a full thread cache. */
            if (i == 0 || i == 1)
                pool_detach();
            else if (i == 2)
                pool_thread_flush();
            _exit(ok ? 0 : 1);
        }
    }
    for (int i = 0; i < STRESS_WORKERS; i++) {
        int status;
        ck_assert_int_eq(waitpid(pid[i], &status, 0), pid[i]);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                      "worker %d: status %#x; first failure: %s", i, status,
                      sh->why);
    }
    check_arena_settled(sh, in_use_before);
    munmap(sh, sizeof *sh);
}
END_TEST

/* ------------------------------------------------------------------------ */
/* Threads                                                                   */
/* ------------------------------------------------------------------------ */

static void *stress_thread(void *arg)
{
    worker_arg_t *w = arg;
    return stress_worker(w->sh, w->id) ? NULL : (void *)1;
}

START_TEST(test_stress_threads)
{
    stress_sh_t *sh = stress_map();
    int rc = pool_attach();
    ck_assert_msg(rc == 0, "pool_attach: %s", strerror(rc));
    pool_usage_t u;
    pool_usage(&u);
    size_t in_use_before = u.in_use;

    pthread_t th[STRESS_WORKERS];
    worker_arg_t arg[STRESS_WORKERS];
    for (int i = 0; i < STRESS_WORKERS; i++) {
        arg[i] = (worker_arg_t){ sh, i };
        rc = pthread_create(&th[i], NULL, stress_thread, &arg[i]);
        ck_assert_msg(rc == 0, "pthread_create: %s", strerror(rc));
    }
    /* Joined threads have exited, so their caches went back on thread exit. */
    for (int i = 0; i < STRESS_WORKERS; i++) {
        void *res;
        pthread_join(th[i], &res);
        ck_assert_msg(res == NULL, "thread %d failed: %s", i, sh->why);
    }
    check_arena_settled(sh, in_use_before);
    pool_detach();
    munmap(sh, sizeof *sh);
}
END_TEST

/* The stress suite: processes and threads on one arena each, ~2 s apiece.
 * Returns a new Suite for srunner_add_suite(). */
Suite *make_stress_suite(void)
{
    Suite *s = suite_create("stress");
    TCase *tc = tcase_create("shared arena");
    /* Checked: an unchecked fixture would run once in the runner, and every
     * forked test would inherit the same arena. */
    tcase_add_checked_fixture(tc, setup_arena, NULL);
    tcase_set_timeout(tc, 40);
    tcase_add_test(tc, test_stress_processes);
    tcase_add_test(tc, test_stress_threads);
    suite_add_tcase(s, tc);
    return s;
}

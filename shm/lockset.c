/* SPDX-License-Identifier: BSD-2-Clause */
/* libshmpool — the arena's locks as one set: taking every lock (reaps and
 * the heap checker), repairing every lock (pool_repair), and the watchdog's
 * view of who holds one too long (pool_lock_stalled).
 *
 * lock.c knows one lock and no tier; this file knows which locks the
 * arena has (the page heap's, then one per class) and the one order in
 * which a path may hold them all.
 */
#include "pool-internal.h"

#include <errno.h>
#include <time.h>

#include "prim/prim.h"

void pool_lock_all_(pool_arena_t *a)
{
    pool_lock_(a, &a->ph->lock, POOL_LOCK_PAGEHEAP, 0);
    for (unsigned cls = 1; cls < POOL_NCLASSES; cls++)
        pool_lock_(a, &a->central[cls].lock, POOL_LOCK_CENTRAL, cls);
}

bool pool_lock_all_timed_(pool_arena_t *a, unsigned ms)
{
    struct timespec deadline = pool_deadline_in_(ms);
    if (!pool_lock_timed_(a, &a->ph->lock, POOL_LOCK_PAGEHEAP, 0, &deadline))
        return false;
    for (unsigned cls = 1; cls < POOL_NCLASSES; cls++) {
        if (!pool_lock_timed_(a, &a->central[cls].lock, POOL_LOCK_CENTRAL, cls, &deadline)) {
            while (--cls > 0)
                pool_unlock_(a, &a->central[cls].lock, POOL_LOCK_CENTRAL, cls);
            pool_unlock_(a, &a->ph->lock, POOL_LOCK_PAGEHEAP, 0);
            return false;
        }
    }
    return true;
}

void pool_unlock_all_(pool_arena_t *a)
{
    for (unsigned cls = 1; cls < POOL_NCLASSES; cls++)
        pool_unlock_(a, &a->central[cls].lock, POOL_LOCK_CENTRAL, cls);
    pool_unlock_(a, &a->ph->lock, POOL_LOCK_PAGEHEAP, 0);
}

/* Take and release one lock by the deadline; false if a live holder kept it. */
static bool repair_one(pool_arena_t *a, pool_lock_sh_t *l, pool_lock_kind_t kind, unsigned arg,
                       const struct timespec *deadline)
{
    if (!pool_lock_timed_(a, l, kind, arg, deadline))
        return false;
    POOL_CRASH_POINT("repair.lock");
    pool_unlock_(a, l, kind, arg);
    return true;
}

int pool_repair(unsigned *recovered)
{
    pool_arena_t *a = &pool_arena_;
    if (recovered != NULL)
        *recovered = 0;
    if (a->hdr == NULL || pool_arena_copied_())
        return ENOENT;
    uint64_t before = pool_atomic_load_relaxed(&a->crash->xrecoveries);
    /* One deadline for all: past it, a free lock is still taken at once,
     * and a held one is given up without waiting again. */
    struct timespec deadline = pool_deadline_in_(POOL_WAIT_MS);
    bool stuck = !repair_one(a, &a->ph->lock, POOL_LOCK_PAGEHEAP, 0, &deadline);
    for (unsigned cls = 1; cls < POOL_NCLASSES; cls++)
        stuck |= !repair_one(a, &a->central[cls].lock, POOL_LOCK_CENTRAL, cls, &deadline);
    if (recovered != NULL)
        *recovered = (unsigned)(pool_atomic_load_relaxed(&a->crash->xrecoveries) - before);
    return stuck ? EAGAIN : 0;
}

pid_t pool_lock_stalled(unsigned min_ms)
{
    pool_arena_t *a = &pool_arena_;
    if (a->hdr == NULL || pool_arena_copied_())
        return 0;
    uint64_t now = pool_prim_now_coarse_ns_(), bound = (uint64_t)min_ms * 1000000u;
    for (unsigned i = 0; i < 1 + POOL_NCLASSES; i++) {
        pool_lockwatch_sh_t *w = &a->watch[i];
        /* holder before since: a newer holder only makes since newer. */
        int holder = pool_atomic_load_acquire(&w->xholder);
        uint64_t since = pool_atomic_load_acquire(&w->xsince_ns);
        if (holder != 0 && now > since && now - since >= bound)
            return holder;
    }
    return 0;
}

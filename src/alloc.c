/* SPDX-License-Identifier: BSD-2-Clause */
/* poold — the server's only door to the pool.
 *
 * The same objects link with or without libshmpool: the pool's entry points
 * are weak references, null unless --enable-pool linked the pool in, and
 * each wrapper falls back to what glibc malloc needs (nothing).
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "shmpool.h"
#include "poold.h"

#pragma weak pool_create
#pragma weak pool_attach
#pragma weak pool_name
#pragma weak pool_stats_json
#pragma weak pool_reap
#pragma weak pool_lock_stalled
#pragma weak pool_decay
#pragma weak pool_thread_scavenge

bool pd_alloc_is_pool(void)
{
    return pool_create != NULL && pool_attach != NULL && pool_name != NULL &&
           pool_stats_json != NULL;
}

const char *pd_alloc_name(void)
{
    return pd_alloc_is_pool() ? pool_name() : "glibc";
}

int pd_alloc_create(size_t heap)
{
    int err;

    if (!pd_alloc_is_pool())
        return PD_OK;
    err = pool_create(heap);
    if (err != 0) {
        pd_log(PD_LOG_ERROR, err, "pool_create(%zu) failed", heap);
        return PD_ERROR;
    }
    return PD_OK;
}

int pd_alloc_attach(void)
{
    int err;

    if (!pd_alloc_is_pool())
        return PD_OK;
    err = pool_attach();
    if (err != 0) {
        pd_log(PD_LOG_ERROR, err, "pool_attach() failed");
        return PD_ERROR;
    }
    return PD_OK;
}

size_t pd_alloc_stats_json(char *buf, size_t cap)
{
    int n;

    if (pd_alloc_is_pool())
        return pool_stats_json(buf, cap);
    n = snprintf(buf, cap, "{\"allocator\":\"glibc\"}");
    return n < 0 ? 0 : (size_t)n;
}

int pd_alloc_reap(pid_t pid, pd_log_level_t level)
{
    pool_reap_report_t r;
    struct timespec t0, t1;
    int err;

    if (!pd_alloc_is_pool() || pool_reap == NULL)
        return PD_OK;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    err = pool_reap(pid, &r);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (err == ESRCH)
        return PD_OK;   /* died before it attached: nothing to give back */
    if (err == EAGAIN) {
        pd_log(PD_LOG_WARN, 0, "pool: a live process holds a pool lock; reap of pid %d deferred",
               (int)pid);
        return PD_ERROR;
    }
    if (err != 0) {
        pd_log(PD_LOG_ERROR, err, "pool: reaping pid %d failed", (int)pid);
        return PD_OK;
    }
    pd_log(r.leaked > 0 ? PD_LOG_WARN : level, 0,
           "pool: reaped pid %d (%u slots): %zu cached and %zu live bytes given back, "
           "%zu bytes in transit finished, %zu leaked; %u locks repaired; took %ld us; "
           "reaped by pid %d%s",
           (int)pid, r.slots, r.cached, r.live, r.transit, r.leaked, r.recoveries,
           (long)((t1.tv_sec - t0.tv_sec) * 1000000 + (t1.tv_nsec - t0.tv_nsec) / 1000),
           (int)r.reaper, r.reaper == getpid() ? " (the master)" : "");
    return PD_OK;
}

int pd_alloc_decay(void)
{
    if (!pd_alloc_is_pool() || pool_decay == NULL)
        return PD_OK;
    return pool_decay() == EAGAIN ? PD_AGAIN : PD_OK;
}

void pd_alloc_scavenge(void)
{
    if (pd_alloc_is_pool() && pool_thread_scavenge != NULL)
        pool_thread_scavenge();
}

pid_t pd_alloc_stalled(unsigned ms)
{
    if (!pd_alloc_is_pool() || pool_lock_stalled == NULL)
        return 0;
    return pool_lock_stalled(ms);
}

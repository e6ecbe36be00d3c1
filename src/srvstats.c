/* SPDX-License-Identifier: BSD-2-Clause */
/* poold — per-worker counters shared by every process.
 *
 * The master maps one MAP_SHARED region before it forks, one cache line per
 * worker slot: a worker process's with -w, a worker thread's with
 * --threads.  Each worker writes only its own slot; /stats, served by any
 * worker, reads all of them, so the counters survive in the master's view
 * of the region whichever worker answers.  A worker's pid appears in its
 * slot only once the worker is ready to serve: at the worker's death the
 * master reads it there to tell a failed start from a killed server.
 * Each worker index has two slots, i and i + n: across a graceful restart
 * (SIGHUP) the new worker counts in one while the old one, still
 * finishing its requests, counts in the other, so that each slot keeps
 * one writer.
 */
#include "config.h"

#include <errno.h>
#include <sys/mman.h>

#include "poold.h"

static pd_wstats_sh_t *pd_stats_base;
static int pd_stats_n;

int pd_stats_create(int n)
{
    size_t size = 2 * (size_t)n * sizeof(pd_wstats_sh_t);
    void *p;

    p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
        pd_log(PD_LOG_ERROR, errno, "mmap(%zu) for the worker counters failed", size);
        return PD_ERROR;
    }
    if (pd_stats_base != NULL)
        munmap(pd_stats_base, 2 * (size_t)pd_stats_n * sizeof(pd_wstats_sh_t));
    pd_stats_base = p;
    pd_stats_n = n;
    for (int i = 0; i < 2 * n; i++)
        pd_stats_base[i].index = i % n;
    return PD_OK;
}

int pd_stats_count(void)
{
    return pd_stats_n;
}

pd_wstats_sh_t *pd_stats_slot(int i)
{
    return &pd_stats_base[i];
}

void pd_stats_begin(int i, pid_t pid, pid_t tid)
{
    pd_wstats_sh_t *s = &pd_stats_base[i];

    __atomic_store_n(&s->xrequests, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&s->xconnections, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&s->xbytes_in, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&s->xbytes_out, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&s->xtid, (int32_t)tid, __ATOMIC_RELAXED);
    __atomic_store_n(&s->xpid, (int32_t)pid, __ATOMIC_RELEASE);
}

void pd_stats_end(int i)
{
    pd_wstats_sh_t *s = &pd_stats_base[i];

    __atomic_store_n(&s->xpid, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&s->xtid, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&s->xconnections, 0, __ATOMIC_RELAXED);
}

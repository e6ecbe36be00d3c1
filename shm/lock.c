/* libshmpool — the one lock wrapper, and crash points.
 *
 * Every shared lock is a process-shared robust mutex taken through
 * pool_lock_(): a trylock first, so contended acquisitions can be counted,
 * then a blocking lock.  When the previous owner died holding it
 * (EOWNERDEAD) the wrapper runs the repair for what the lock protects -- a
 * rebuild of the central class from its span bitmaps, or of the page heap's
 * lists from the span descriptors -- and only then marks it consistent.
 * Both repairs are rebuilds from the truth, so running one twice (a repairer
 * that dies and is repaired in turn) is harmless.
 *
 * With --enable-pool-lock=spin the central locks are plain spin words: an
 * experiment to measure the mutex's cost, with no crash recovery at all.
 */
#include "pool-internal.h"

#include <errno.h>
#include <string.h>

#include "prim/prim.h"

int pool_lock_init_(pool_lock_sh_t *l, pool_lock_kind_t kind)
{
    memset(l, 0, sizeof *l);
    if (pool_config_spin && kind == POOL_LOCK_CENTRAL)
        return 0;
    pthread_mutexattr_t at;
    int rc = pthread_mutexattr_init(&at);
    if (rc != 0)
        return rc;
    if ((rc = pthread_mutexattr_setpshared(&at, PTHREAD_PROCESS_SHARED)) == 0 &&
        (rc = pthread_mutexattr_setrobust(&at, PTHREAD_MUTEX_ROBUST)) == 0 &&
        (rc = pthread_mutexattr_setprotocol(&at, PTHREAD_PRIO_NONE)) == 0)
        rc = pthread_mutex_init(&l->mutex, &at);
    pthread_mutexattr_destroy(&at);
    return rc;
}

static pool_lockstats_sh_t *lock_stats(pool_arena_t *a, pool_lock_kind_t kind, unsigned arg)
{
    return &a->lockstats[kind == POOL_LOCK_PAGEHEAP ? 0 : 1 + arg];
}

static void spin_lock(pool_arena_t *a, pool_lock_sh_t *l, unsigned arg)
{
    bool contended = false;
    uint64_t t0 = 0;
    for (unsigned spins = 0;; spins++) {
        if (pool_atomic_load_relaxed(&l->xspin) == 0 && pool_atomic_xchg_acquire(&l->xspin, 1) == 0)
            break;
        if (!contended) {
            contended = true;
            if (pool_config_stats)
                t0 = pool_now_ns_();
        }
        if (spins >= 64)
            pool_prim_yield_();
        else
            __builtin_ia32_pause();
    }
    if (pool_config_stats) {
        pool_lockstats_sh_t *st = lock_stats(a, POOL_LOCK_CENTRAL, arg);
        st->acquired++;
        if (contended) {
            st->contended++;
            st->wait_ns += pool_now_ns_() - t0;
        }
    }
}

static void repair(pool_arena_t *a, pool_lock_kind_t kind, unsigned arg)
{
    if (kind == POOL_LOCK_PAGEHEAP)
        pool_pageheap_repair_(a);
    else
        pool_central_repair_(a, arg);
}

void pool_lock_(pool_arena_t *a, pool_lock_sh_t *l, pool_lock_kind_t kind, unsigned arg)
{
    if (pool_config_spin && kind == POOL_LOCK_CENTRAL) {
        spin_lock(a, l, arg);
        return;
    }
    uint64_t t0 = 0;
    bool contended = false;
    int rc = pthread_mutex_trylock(&l->mutex);
    if (rc == EBUSY) {
        contended = true;
        if (pool_config_stats)
            t0 = pool_now_ns_();
        rc = pthread_mutex_lock(&l->mutex);
    }
    pool_lockstats_sh_t *st = lock_stats(a, kind, arg);
    if (pool_unlikely(rc == EOWNERDEAD)) {
        repair(a, kind, arg);
        st->recoveries++;
        pthread_mutex_consistent(&l->mutex);
        if (kind == POOL_LOCK_PAGEHEAP)
            pool_error_(0, "page heap lock owner died; page heap repaired");
        else
            pool_error_(0, "class %u lock owner died; class repaired", arg);
    } else if (pool_unlikely(rc != 0)) {
        pool_fatal_("pthread_mutex_lock on a pool lock failed: error %d", rc);
    }
    if (pool_config_stats) {
        st->acquired++;
        if (contended) {
            st->contended++;
            st->wait_ns += pool_now_ns_() - t0;
        }
    }
}

void pool_unlock_(pool_lock_sh_t *l, pool_lock_kind_t kind)
{
    if (pool_config_spin && kind == POOL_LOCK_CENTRAL)
        pool_atomic_store_release(&l->xspin, 0);
    else
        pthread_mutex_unlock(&l->mutex);
}

/* ------------------------------------------------------------------------ */
/* Crash points                                                              */
/* ------------------------------------------------------------------------ */

static char crash_name[64];   /* empty: no crash point armed */
static unsigned long crash_at; /* die at this hit */
static unsigned long crash_hits;

void pool_crash_config_(void)
{
    crash_name[0] = '\0';
    crash_hits = 0;
    if (pool_config_debug == 0)
        return;
    const char *v = pool_prim_getenv_("SHMPOOL_CRASH");
    if (v == NULL || *v == '\0')
        return;
    const char *colon = strchr(v, ':');
    size_t n = colon ? (size_t)(colon - v) : strlen(v);
    unsigned long at = 1;
    if (colon != NULL) {
        at = 0;
        for (const char *d = colon + 1; *d; d++) {
            if (*d < '0' || *d > '9' || at > 100000000ul) {
                pool_error_(0, "SHMPOOL_CRASH: bad hit count in '%s' (want name:N)", v);
                return;
            }
            at = at * 10 + (unsigned long)(*d - '0');
        }
    }
    if (n == 0 || n >= sizeof crash_name || at == 0) {
        pool_error_(0, "SHMPOOL_CRASH: bad value '%s' (want name:N, N >= 1)", v);
        return;
    }
    memcpy(crash_name, v, n);
    crash_name[n] = '\0';
    crash_at = at;
}

void pool_crash_point_(const char *name)
{
    if (crash_name[0] == '\0' || strcmp(name, crash_name) != 0)
        return;
    if (++crash_hits == crash_at)
        pool_prim_kill_self_();
}

/* libshmpool — the one lock wrapper, operation journals, and crash points.
 *
 * Every shared lock is a process-shared robust mutex taken through
 * pool_lock_(): a trylock first, so contended acquisitions can be counted,
 * then a blocking lock.  Each lock has a journal (pool_journal_sh_t): the
 * holder begins an operation, logs each metadata word before it writes it,
 * and commits.  When the previous owner died holding the lock (EOWNERDEAD)
 * the wrapper rolls its unfinished operation back from the journal, then
 * verifies what the lock protects -- and rebuilds it from the truth if the
 * verification fails (a class from its span bitmaps, the page heap from
 * its span descriptors) -- and only then marks the mutex consistent.  Both
 * steps can run any number of times, so a recoverer that dies mid-way is
 * recovered in turn.
 *
 * With --enable-pool-lock=spin the central locks are plain spin words: an
 * experiment to measure the mutex's cost, with no crash recovery at all.
 */
#include "pool-internal.h"

#include <errno.h>
#include <string.h>

#include "prim/prim.h"

int pool_self_pid_;

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

static unsigned lock_index(pool_lock_kind_t kind, unsigned arg)
{
    return kind == POOL_LOCK_PAGEHEAP ? 0 : 1 + arg;
}

pool_journal_sh_t *pool_journal_(pool_arena_t *a, pool_lock_kind_t kind, unsigned arg)
{
    return &a->journals[lock_index(kind, arg)];
}

static int self_pid(void)
{
    int pid = pool_self_pid_;
    if (pool_unlikely(pid == 0))
        pool_self_pid_ = pid = pool_prim_getpid_();
    return pid;
}

/* The watchdog's view: who holds the lock, since when. */
static void mark_held(pool_journal_sh_t *j)
{
    pool_atomic_store_release(&j->xsince_ns, pool_prim_now_coarse_ns_());
    pool_atomic_store_release(&j->xholder, self_pid());
}

/* Stats builds: an acquisition, the wait when the first try failed (since
 * t0), and the start of the hold that pool_unlock_ closes.  REQUIRES: the
 * lock. */
static void count_acquired(pool_lockstats_sh_t *st, bool contended, uint64_t t0)
{
    uint64_t now = pool_now_ns_();
    st->acquired++;
    if (contended) {
        st->contended++;
        st->wait_ns += now - t0;
    }
    st->since_ns = now;
}

/* Stats builds: close the hold that count_acquired opened.  A lock recovered
 * from a dead holder opened its own hold when it was taken again. */
static void count_released(pool_lockstats_sh_t *st)
{
    st->held_ns += pool_now_ns_() - st->since_ns;
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
    if (pool_config_stats)
        count_acquired(&a->lockstats[lock_index(POOL_LOCK_CENTRAL, arg)], contended, t0);
}

/* ------------------------------------------------------------------------ */
/* Journal                                                                   */
/* ------------------------------------------------------------------------ */

void pool_op_begin_(pool_journal_sh_t *j, pool_op_t op, uint32_t a0, uint32_t a1, uint32_t a2)
{
    j->n = 0;
    j->gen++;
    j->arg[0] = a0;
    j->arg[1] = a1;
    j->arg[2] = a2;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    j->op = op;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
}

void pool_op_end_(pool_journal_sh_t *j)
{
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    /* The commit point: from here a recoverer undoes nothing. */
    j->op = POOL_OP_NONE;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    j->n = 0;
}

void pool_op_overflow_(pool_journal_sh_t *j)
{
    pool_fatal_("operation %u (generation %lu) overflowed its journal of %u entries", j->op,
                (unsigned long)j->gen, (unsigned)POOL_JOURNAL_MAX);
}

/* True when an undo entry names a metadata word of this arena: a journal
 * is never trusted to write anywhere else. */
static bool entry_valid(const pool_arena_t *a, uintptr_t addr, unsigned size)
{
    uintptr_t lo = (uintptr_t)a->hdr, hi = a->data;
    if (size != 1 && size != 2 && size != 4 && size != 8)
        return false;
    return addr >= lo && addr + size <= hi && addr % size == 0;
}

/* Restore every logged word, newest first.  Writes only old values, so a
 * second run after a partial first one ends in the same state.  Returns
 * false when an entry was unusable (the caller then rebuilds). */
static bool rollback(pool_arena_t *a, pool_journal_sh_t *j)
{
    bool ok = true;
    uint32_t n = j->n < POOL_JOURNAL_MAX ? j->n : POOL_JOURNAL_MAX;
    for (uint32_t i = n; i-- > 0;) {
        const pool_undo_sh_t *u = &j->undo[i];
        uintptr_t addr = (uintptr_t)(u->where >> 4);
        unsigned size = (unsigned)(u->where & 15);
        if (!entry_valid(a, addr, size)) {
            ok = false;
            continue;
        }
        switch (size) {
        case 1:
            *(uint8_t *)addr = (uint8_t)u->old;
            break;
        case 2:
            *(uint16_t *)addr = (uint16_t)u->old;
            break;
        case 4:
            *(uint32_t *)addr = (uint32_t)u->old;
            break;
        default:
            *(uint64_t *)addr = u->old;
            break;
        }
        POOL_CRASH_POINT("recover.undo");
    }
    return ok;
}

static const char *op_name(uint32_t op)
{
    static const char *const names[] = { "none", "fetch", "add-span", "release",
                                         "page-alloc", "page-free", "reap", "page-return" };
    return op < sizeof names / sizeof names[0] ? names[op] : "unknown";
}

/* The previous holder died.  REQUIRES: the lock, taken with EOWNERDEAD. */
static void recover(pool_arena_t *a, pool_lock_kind_t kind, unsigned arg)
{
    pool_journal_sh_t *j = pool_journal_(a, kind, arg);
    uint32_t op = j->op;
    uint64_t gen = j->gen;
    int dead = pool_atomic_load_relaxed(&j->xholder);
    bool clean = true;
    if (op != POOL_OP_NONE) {
        clean = rollback(a, j);
        /* Rolled back: a recoverer that dies from here on verifies again. */
        j->n = 0;
        j->rolled_back++;
        pool_atomic_inc(&a->crash->xrolled_back);
    }
    bool rebuilt;
    if (kind == POOL_LOCK_PAGEHEAP) {
        /* The page map is never journaled: it is derived again here. */
        pool_pageheap_repair_(a);
        rebuilt = false;
    } else {
        rebuilt = !clean || !pool_central_verify_(a, arg);
        if (rebuilt) {
            pool_central_repair_(a, arg);
            pool_atomic_inc(&a->crash->xrebuilds);
        }
    }
    j->op = POOL_OP_NONE;
    pool_atomic_inc(&a->crash->xrecoveries);
    a->lockstats[lock_index(kind, arg)].recoveries++;
    char what[32];
    if (kind == POOL_LOCK_PAGEHEAP)
        pool_snprintf_(what, sizeof what, "page heap");
    else
        pool_snprintf_(what, sizeof what, "class %u", arg);
    pool_error_(0, "%s: lock holder %d died during %s (operation %lu); %s%s", what, dead,
                op_name(op), (unsigned long)gen,
                op != POOL_OP_NONE ? "undone and verified" : "nothing to undo, verified",
                rebuilt ? "; rebuilt from the span bitmaps" : "");
}

/* Acquire, blocking or (deadline not NULL, CLOCK_REALTIME as the mutex
 * wants it) until the deadline.  Returns false on timeout. */
static bool acquire(pool_arena_t *a, pool_lock_sh_t *l, pool_lock_kind_t kind, unsigned arg,
                    const struct timespec *deadline)
{
    if (pool_config_spin && kind == POOL_LOCK_CENTRAL) {
        spin_lock(a, l, arg);
        return true;
    }
    uint64_t t0 = 0;
    bool contended = false;
    int rc = pthread_mutex_trylock(&l->mutex);
    if (rc == EBUSY) {
        contended = true;
        if (pool_config_stats)
            t0 = pool_now_ns_();
        rc = deadline != NULL ? pthread_mutex_timedlock(&l->mutex, deadline)
                              : pthread_mutex_lock(&l->mutex);
        if (rc == ETIMEDOUT)
            return false;
    }
    if (pool_unlikely(rc == EOWNERDEAD)) {
        recover(a, kind, arg);
        pthread_mutex_consistent(&l->mutex);
    } else if (pool_unlikely(rc != 0)) {
        pool_fatal_("pthread_mutex_lock on a pool lock failed: error %d", rc);
    }
    mark_held(pool_journal_(a, kind, arg));
    if (pool_config_stats)
        count_acquired(&a->lockstats[lock_index(kind, arg)], contended, t0);
    return true;
}

void pool_lock_(pool_arena_t *a, pool_lock_sh_t *l, pool_lock_kind_t kind, unsigned arg)
{
    acquire(a, l, kind, arg, NULL);
}

bool pool_lock_timed_(pool_arena_t *a, pool_lock_sh_t *l, pool_lock_kind_t kind, unsigned arg,
                      const struct timespec *deadline)
{
    return acquire(a, l, kind, arg, deadline);
}

void pool_unlock_(pool_arena_t *a, pool_lock_sh_t *l, pool_lock_kind_t kind, unsigned arg)
{
    if (pool_config_stats)
        count_released(&a->lockstats[lock_index(kind, arg)]);
    if (pool_config_spin && kind == POOL_LOCK_CENTRAL) {
        pool_atomic_store_release(&l->xspin, 0);
        return;
    }
    pool_atomic_store_release(&pool_journal_(a, kind, arg)->xholder, 0);
    pthread_mutex_unlock(&l->mutex);
}

/* ------------------------------------------------------------------------ */
/* Crash points                                                              */
/* ------------------------------------------------------------------------ */

static char crash_name[64];   /* empty: no crash point armed */
static unsigned long crash_at; /* die at this hit */
static unsigned long crash_hits;
static bool crash_stop;        /* ":stop": stop (SIGSTOP) there instead, lock held */

void pool_crash_config_(void)
{
    crash_name[0] = '\0';
    crash_hits = 0;
    crash_stop = false;
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
        const char *mode = strchr(colon + 1, ':');
        if (mode != NULL && strcmp(mode, ":stop") != 0) {
            pool_error_(0, "SHMPOOL_CRASH: bad mode in '%s' (want name:N or name:N:stop)", v);
            return;
        }
        crash_stop = mode != NULL;
        for (const char *d = colon + 1; *d && d != mode; d++) {
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
    if (++crash_hits != crash_at)
        return;
    if (crash_stop)
        pool_prim_stop_self_();
    else
        pool_prim_kill_self_();
}

/* SPDX-License-Identifier: BSD-2-Clause */
/* libshmpool — the one lock wrapper.
 *
 * Every shared lock is a process-shared robust mutex taken through
 * pool_lock_(): a trylock first, so contended acquisitions can be counted,
 * then a blocking lock.  When the previous owner died holding the lock
 * (EOWNERDEAD) the wrapper undoes its unfinished operation from the lock's
 * journal (journal.c), then verifies what the lock protects -- and rebuilds
 * it from the truth if the verification fails -- and only then marks the
 * mutex consistent.  What "verify" and "rebuild" mean is the business of
 * the tier behind the lock, which registers them (pool_lock_register_):
 * this file knows no tier.  Both steps can run any number of times, so a
 * recoverer that dies mid-way is recovered in turn.
 *
 * With --enable-pool-lock=spin the central locks are plain spin words: an
 * experiment to measure the mutex's cost, with no crash recovery at all.
 */
#include "pool-internal.h"

#include <errno.h>
#include <string.h>
#include <time.h>

#include "prim/prim.h"

int pool_self_pid_;

/* A process-shared robust mutex in the arena. */
static int robust_init(pool_lock_sh_t *l)
{
    memset(l, 0, sizeof *l);
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

int pool_lock_init_(pool_lock_sh_t *l, pool_lock_kind_t kind)
{
    if (pool_config_spin && kind == POOL_LOCK_CENTRAL) {
        memset(l, 0, sizeof *l);
        return 0;
    }
    return robust_init(l);
}

static unsigned lock_index(pool_lock_kind_t kind, unsigned arg)
{
    return kind == POOL_LOCK_PAGEHEAP ? 0 : 1 + arg;
}

/* Class locks take their journals in the order of their first operation,
 * so that the few classes a process uses write journals on one or two
 * pages of the arena, not on every page of the array.  Each claim takes
 * the lowest journal free, so the claimed ones are 1 to n: a search reads
 * none past the first free one, whose page may never have been written
 * (a read would bring it in).  The journal a lock holder claimed and died
 * before recording is found by its owner field, never a second one taken.
 * Returns 0 when the lock has none. */
static unsigned journal_found(pool_arena_t *a, unsigned li)
{
    unsigned at = pool_atomic_load_relaxed(&a->hdr->xjournal_at[li]);
    for (unsigned i = 1; at == 0 && i <= POOL_NCLASSES; i++) {
        uint32_t owner = pool_atomic_load_relaxed(&a->journals[i].xowner);
        if (owner == 0)
            break;
        if (owner == li)
            at = i;
    }
    return at;
}

static POOL_COLD unsigned journal_claim(pool_arena_t *a, unsigned li)
{
    unsigned at = journal_found(a, li);
    /* The claimed ones fail their exchange on pages already written. */
    for (unsigned i = 1; at == 0 && i <= POOL_NCLASSES; i++) {
        uint32_t none = 0;
        if (pool_atomic_cas(&a->journals[i].xowner, &none, li))
            at = i;
    }
    /* One journal a class lock, as many as there are: never none left. */
    pool_assert(at != 0);
    POOL_CRASH_POINT("lock.journal");
    pool_atomic_store_release(&a->hdr->xjournal_at[li], (uint8_t)at);
    return at;
}

pool_journal_sh_t *pool_lock_journal_(pool_arena_t *a, pool_lock_kind_t kind, unsigned arg)
{
    unsigned li = lock_index(kind, arg);
    if (li == 0)
        return &a->journals[0];
    unsigned at = pool_atomic_load_relaxed(&a->hdr->xjournal_at[li]);
    if (pool_unlikely(at == 0))
        at = journal_claim(a, li);
    return &a->journals[at];
}

pool_lockwatch_sh_t *pool_lock_watch_(pool_arena_t *a, pool_lock_kind_t kind, unsigned arg)
{
    return &a->watch[lock_index(kind, arg)];
}

static int self_pid(void)
{
    int pid = pool_self_pid_;
    if (pool_unlikely(pid == 0))
        pool_self_pid_ = pid = pool_prim_getpid_();
    return pid;
}

/* The watchdog's view: who holds the lock, since when. */
static void mark_held(pool_lockwatch_sh_t *w)
{
    pool_atomic_store_release(&w->xsince_ns, pool_prim_now_coarse_ns_());
    pool_atomic_store_release(&w->xholder, self_pid());
    pool_atomic_store_release(&w->xcpu, pool_prim_cpu_());
}

/* Stats builds: an acquisition, the wait when the first try failed (since
 * t0), and the start of the hold that pool_unlock_ closes.  REQUIRES: the
 * lock. */
static void count_acquired(pool_lockstats_sh_t *st, bool contended, uint64_t t0)
{
    uint64_t now = pool_prim_now_ns_();
    st->acquired++;
    if (contended) {
        st->contended++;
        st->wait_ns += now - t0;
    }
    st->since_ns = now;
}

/* What the two clock reads add to a hold they time: the shortest gap
 * between two back-to-back reads, found once per process.  A read costs
 * 20 to 30 ns in a virtual machine, about half of a class lock's hold,
 * so the hold left uncorrected mostly measures the clock.  0 until found. */
static uint64_t clock_pair_ns;

static uint64_t clock_pair(void)
{
    uint64_t c = pool_atomic_load_relaxed(&clock_pair_ns);
    if (pool_likely(c != 0))
        return c;
    c = UINT64_MAX;
    for (unsigned i = 0; i < 16; i++) {
        uint64_t t0 = pool_prim_now_ns_();
        uint64_t d = pool_prim_now_ns_() - t0;
        if (d < c)
            c = d;
    }
    /* Never 0 again: a clock that ticks coarser than a read is found once. */
    c = c > 0 ? c : 1;
    pool_atomic_store_release(&clock_pair_ns, c);
    return c;
}

/* Stats builds: close the hold that count_acquired opened, less what its
 * clock reads took.  A lock recovered from a dead holder opened its own
 * hold when it was taken again. */
static void count_released(pool_lockstats_sh_t *st)
{
    uint64_t d = pool_prim_now_ns_() - st->since_ns;
    uint64_t c = clock_pair();
    st->held_ns += d > c ? d - c : 0;
}

/* A moment's pause in a busy-wait, so that the other hardware thread of
 * the core (often the holder) runs meanwhile. */
static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
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
                t0 = pool_prim_now_ns_();
        }
        if (spins >= 64)
            pool_prim_yield_();
        else
            cpu_relax();
    }
    if (pool_config_stats)
        count_acquired(&a->lockstats[lock_index(POOL_LOCK_CENTRAL, arg)], contended, t0);
}

/* ------------------------------------------------------------------------ */
/* Recovery                                                                  */
/* ------------------------------------------------------------------------ */

static const pool_lock_ops_t *lock_ops[2]; /* by pool_lock_kind_t */

void pool_lock_register_(pool_lock_kind_t kind, const pool_lock_ops_t *ops)
{
    lock_ops[kind] = ops;
}

/* The previous holder died.  REQUIRES: the lock, taken with EOWNERDEAD. */
static void recover(pool_arena_t *a, pool_lock_kind_t kind, unsigned arg)
{
    const pool_lock_ops_t *ops = lock_ops[kind];
    if (ops == NULL)
        pool_fatal_("a lock of kind %u lost its holder and no repair is registered", kind);
    /* A class lock that never began an operation has no journal yet, and
     * nothing to undo. */
    unsigned li = lock_index(kind, arg);
    unsigned at = li == 0 ? 0 : journal_found(a, li);
    pool_journal_sh_t *j = li == 0 || at != 0 ? &a->journals[at] : NULL;
    uint32_t op = j != NULL ? j->op : POOL_OP_NONE;
    uint64_t gen = j != NULL ? j->gen : 0;
    int dead = pool_atomic_load_relaxed(&pool_lock_watch_(a, kind, arg)->xholder);
    bool clean = j == NULL || pool_journal_undo_(a, j);
    bool failed = ops->verify != NULL && (!clean || !ops->verify(a, arg));
    if (ops->verify == NULL || failed)
        ops->rebuild(a, arg);
    if (failed)
        pool_atomic_inc(&a->crash->xrebuilds);
    pool_atomic_inc(&a->crash->xrecoveries);
    a->lockstats[lock_index(kind, arg)].recoveries++;
    char what[32];
    if (kind == POOL_LOCK_PAGEHEAP)
        pool_snprintf_(what, sizeof what, "%s", ops->what);
    else
        pool_snprintf_(what, sizeof what, "%s %u", ops->what, arg);
    pool_error_(0, "%s: lock holder %d died during %s (operation %lu); %s%s%s", what, dead,
                pool_op_name_(op), (unsigned long)gen,
                op != POOL_OP_NONE ? "undone" : "nothing to undo",
                ops->verify == NULL || failed ? ", rebuilt from " : ", verified",
                ops->verify == NULL || failed ? ops->truth : "");
}

/* A busy mutex is tried again for a while before the thread sleeps on it.
 * A hold lasts about a microsecond, but a thread that sleeps is woken onto
 * a core that may be running another worker, and can wait out that
 * worker's time slice (milliseconds) for a lock that was free a
 * microsecond later.  About 2 µs of tries, and none while the holder took
 * the lock on this thread's own CPU: then it is not running (this thread
 * is), and every try would keep it off the CPU a little longer. */
#define POOL_LOCK_SPINS 16

struct timespec pool_deadline_in_(unsigned ms)
{
    struct timespec d;
    clock_gettime(CLOCK_REALTIME, &d);
    d.tv_sec += ms / 1000;
    d.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (d.tv_nsec >= 1000000000L) {
        d.tv_sec++;
        d.tv_nsec -= 1000000000L;
    }
    return d;
}

/* Whether the lock's holder has kept it for POOL_WAIT_MS already: stuck
 * (stopped, or looping), as far as a caller with a deadline is concerned.
 * holder before since: a newer holder only makes since newer. */
static bool held_too_long(const pool_lockwatch_sh_t *w)
{
    int holder = pool_atomic_load_acquire(&w->xholder);
    uint64_t since = pool_atomic_load_acquire(&w->xsince_ns);
    uint64_t now = pool_prim_now_coarse_ns_();
    return holder != 0 && now > since && now - since >= (uint64_t)POOL_WAIT_MS * 1000000u;
}

/* Acquire, blocking or (deadline not NULL, CLOCK_REALTIME as the mutex
 * wants it) until the deadline.  Returns false on timeout, and at once
 * when a holder has kept the lock POOL_WAIT_MS already: a supervisor that
 * meets a stuck holder at every call (a master's wait, its one-second
 * rounds) then pays the wait once, not at every call. */
static bool acquire(pool_arena_t *a, pool_lock_sh_t *l, pool_lock_kind_t kind, unsigned arg,
                    const struct timespec *deadline)
{
    if (pool_config_spin && kind == POOL_LOCK_CENTRAL) {
        spin_lock(a, l, arg);
        if (pool_config_debug > 0)
            pool_crash_note_lock_(kind, arg, true);
        return true;
    }
    uint64_t t0 = 0;
    bool contended = false;
    int rc = pthread_mutex_trylock(&l->mutex);
    if (rc == EBUSY) {
        contended = true;
        if (pool_config_stats)
            t0 = pool_prim_now_ns_();
        const pool_lockwatch_sh_t *w = pool_lock_watch_(a, kind, arg);
        int cpu = pool_prim_cpu_();
        for (unsigned i = 0; i < POOL_LOCK_SPINS && rc == EBUSY; i++) {
            if (cpu >= 0 && pool_atomic_load_relaxed(&w->xcpu) == cpu)
                break;
            for (unsigned k = 0; k < 4; k++)
                cpu_relax();
            rc = pthread_mutex_trylock(&l->mutex);
        }
    }
    if (rc == EBUSY && deadline != NULL && held_too_long(pool_lock_watch_(a, kind, arg)))
        return false;
    if (rc == EBUSY) {
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
    mark_held(pool_lock_watch_(a, kind, arg));
    if (pool_config_stats)
        count_acquired(&a->lockstats[lock_index(kind, arg)], contended, t0);
    if (pool_config_debug > 0) {
        pool_crash_note_lock_(kind, arg, true);
        /* Killed holding the lock between two operations. */
        POOL_CRASH_POINT("lock.acquired");
    }
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

bool pool_lock_try_(pool_arena_t *a, pool_lock_sh_t *l, pool_lock_kind_t kind, unsigned arg)
{
    /* A deadline long past: the mutex is tried, never slept on. */
    static const struct timespec past = { 0, 0 };
    return acquire(a, l, kind, arg, &past);
}

void pool_unlock_(pool_arena_t *a, pool_lock_sh_t *l, pool_lock_kind_t kind, unsigned arg)
{
    if (pool_config_debug > 0)
        pool_crash_note_lock_(kind, arg, false);
    if (pool_config_stats)
        count_released(&a->lockstats[lock_index(kind, arg)]);
    if (pool_config_spin && kind == POOL_LOCK_CENTRAL) {
        pool_atomic_store_release(&l->xspin, 0);
        return;
    }
    pool_atomic_store_release(&pool_lock_watch_(a, kind, arg)->xholder, 0);
    pthread_mutex_unlock(&l->mutex);
}

/* ------------------------------------------------------------------------ */
/* Life locks                                                                */
/* ------------------------------------------------------------------------ */

int pool_life_init_(pool_lock_sh_t *l)
{
    return robust_init(l);
}

pool_life_t pool_life_try_(pool_lock_sh_t *l, uint32_t *xflags, const struct timespec *deadline)
{
    int rc = deadline != NULL ? pthread_mutex_timedlock(&l->mutex, deadline)
                              : pthread_mutex_trylock(&l->mutex);
    if (rc == EOWNERDEAD) {
        /* The mark first: if the caller dies before it has reaped, the
         * slot still says so (and its lock is owner-dead again). */
        pool_atomic_or(xflags, POOL_SLOT_DEAD);
        POOL_CRASH_POINT("reap.found");
        pthread_mutex_consistent(&l->mutex);
        return POOL_LIFE_DEAD;
    }
    /* EBUSY, ETIMEDOUT, or a lock that cannot be judged: never dead. */
    return rc == 0 ? POOL_LIFE_TAKEN : POOL_LIFE_HELD;
}

void pool_life_release_(pool_lock_sh_t *l)
{
    pthread_mutex_unlock(&l->mutex);
}

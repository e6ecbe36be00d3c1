/* SPDX-License-Identifier: BSD-2-Clause */
/* libshmpool — the dead: finding them and reaping them.
 *
 * A process is dead when the life locks of its slots are owner-dead
 * (pool_slot_sh_t): it exited, was killed, crashed or called exec.  No pid
 * is trusted.  Whoever notices first reaps it -- a process that attaches,
 * one that finds the slots or the arena exhausted, one whose allocation
 * slow path is past the periodic due time, or a master that waited for
 * it (pool_reap) -- with the page-heap lock and every class lock held
 * (taking them also repairs any lock the dead process held).  The reap
 * gives the dead slots' thread caches back object by object, validating
 * each, then walks every span: objects and big spans tagged with the dead
 * process are freed, spans it left in transit between the tiers are moved
 * on; only then are its slots freed.  A reaper may die at any point: the
 * slots stay marked dead and their life locks owner-dead, every step it
 * took is committed or undone, and the next reaper goes on from there.
 * Nothing a reap finds makes it abort.
 *
 * Entry points: pool_reap(), pool_reap_dead_(), pool_reap_maybe_(),
 * pool_decay().
 */
#include "pool-internal.h"

#include <errno.h>
#include <string.h>
#include <time.h>

#include "prim/prim.h"

/* How often the processes using the arena look for the dead on their own:
 * the first allocation slow path past the due time does it. */
#define POOL_REAP_PERIOD_NS UINT64_C(1000000000)

/* Clear the debug builds' "held by a caller" bit of object oi. */
static void drop_held(pool_span_sh_t *s, uint32_t oi)
{
#if POOL_CONFIG_DEBUG > 0
    pool_atomic_and(&s->xheld[oi / 64], ~(UINT64_C(1) << (oi % 64)));
#else
    (void)s;
    (void)oi;
#endif
}

/* ------------------------------------------------------------------------ */
/* Reap                                                                      */
/* ------------------------------------------------------------------------ */

/* Free spans a reap gives to the OS in one pass, after its frees. */
#define REAP_FREED_MAX 64

typedef struct reap_s {
    pool_arena_t *a;
    bool dead[POOL_MAX_TAG + 1]; /* tags of the dead process */
    uint16_t mover;              /* tag the spans this reap moves carry */
    uint32_t leaving;            /* spans for the page heap, linked by next */
    uint32_t big;                /* dead big spans, linked by next */
    uint32_t empties[POOL_NCLASSES]; /* each class's empty spans before the reap */
    uint32_t freed[REAP_FREED_MAX];  /* free spans its frees ended in, to go to the OS */
    unsigned nfreed;
    pool_reaprec_sh_t rec;       /* what it found, as the history keeps it */
} reap_t;

/* Give the pages of the free spans the reap's frees ended in to the OS,
 * each once: merged neighbours freed later absorbed the earlier spans, so
 * a span that is no longer a free one's start, or went back already, is
 * passed over.  REQUIRES: page-heap lock. */
static void give_freed(reap_t *rp)
{
    for (unsigned k = 0; k < rp->nfreed; k++)
        pool_pageheap_return_locked_(rp->a, rp->freed[k]);
    rp->nfreed = 0;
}

/* Note the free span a reap's page-heap free ended in; a full list goes
 * back at once, the reap's locks held. */
static void note_freed(reap_t *rp, uint32_t span)
{
    if (rp->nfreed == REAP_FREED_MAX)
        give_freed(rp);
    rp->freed[rp->nfreed++] = span;
}

/* Release p into class cls within the step the caller began.  Spans that
 * leave their class are moved under the dead process's own tag: if this
 * reaper dies, the next reap of the same process (its slot is freed only
 * at the end) finishes the move.  REQUIRES: every lock. */
static bool reap_release(reap_t *rp, unsigned cls, void *p)
{
    POOL_CRASH_POINT("reap.object");
    return pool_central_release_one_(rp->a, cls, p, rp->mover, &rp->leaving);
}

/* Close a dead cache's inbox of class cls and give its objects back, as
 * its bins' are given back (reap_cache): the closed word, which no free
 * writes, follows the released objects under the journal.  A thread killed
 * while its empty bin took the inbox left the chain in both (tcache.c's
 * inbox_take): the walk stops at the bin's head, whose walk takes the
 * rest. */
static void reap_inbox(reap_t *rp, pool_tcache_sh_t *tc, unsigned cls)
{
    pool_arena_t *a = rp->a;
    uint64_t *box = &tc->own[cls].xinbox;
    uint64_t w = pool_atomic_or_acquire(box, POOL_INBOX_CLOSED) | POOL_INBOX_CLOSED;
    if (pool_inbox_count(w) == 0)
        return;
    pool_journal_sh_t *j = pool_lock_journal_(a, POOL_LOCK_CENTRAL, cls);
    size_t size = pool_classes_[cls].size;
    bool bin = false;
    pool_journal_begin_(j, POOL_OP_REAP);
    for (void *p; (p = pool_inbox_first(a->data, *box)) != NULL;) {
        uint32_t oi;
        pool_span_sh_t *s = pool_object_span_(a, p, &oi);
        bin = p == tc->heads[cls];
        if (bin || s == NULL || !pool_bin_holds(tc, p))
            break;
        void *next = *(void **)p;
        pool_journal_step_(j);
        if (!reap_release(rp, cls, p))
            break;
        POOL_JSET(j, *box, pool_inbox_word(a->data, *box, next, pool_inbox_count(*box) - 1));
        drop_held(s, oi);
        rp->rec.cached += size;
    }
    if (pool_inbox_count(*box) > 0) {
        if (!bin)
            rp->rec.leaked += (size_t)pool_inbox_count(*box) * size;
        pool_journal_step_(j);
        POOL_JSET(j, *box, pool_inbox_word(a->data, *box, NULL, 0));
    }
    pool_journal_commit_(j);
}

/* Give one dead thread cache back, object by object: its inboxes, bins and
 * remote lists, then the spans it owned are given up.  Each object's
 * release and the bin's advance past it are one step of one journaled
 * operation, so a reaper that dies leaves the bin exactly at the first
 * object not yet given back, never a dangling head another process may
 * since have reused.  A chain is followed only while each object is a
 * handed-out object of the class that carries this cache's mark (a link
 * written over after its object's free names none): a process killed in the middle of a
 * push, a pop or a cut leaves at most the length wrong (by one, or, in
 * the middle of a refill or a scavenge, short of a chain that goes on:
 * what is past the walk is the dead process's own, found by the owner
 * scan, or a live owner's), which is why the walk is
 * bounded by it plus one, not ended by it; what is behind a broken link is
 * counted as leaked.  A chain that ends one object short of its length is
 * no leak: a pop moves the head before the length, and free's fast path
 * counts its object before it links it, so a death between the two leaves
 * that object between the bin and its caller, handed out and tagged, and
 * the owner scan frees it with the dead process's live objects. */
static void reap_cache(reap_t *rp, pool_tcache_sh_t *tc)
{
    pool_arena_t *a = rp->a;
    for (unsigned cls = 1; cls < POOL_NCLASSES; cls++)
        reap_inbox(rp, tc, cls);
    for (unsigned k = 2; k < 2 * POOL_NCLASSES; k++) {
        unsigned cls = k / 2;
        pool_list_t l = pool_tcache_list(tc, cls, k % 2 == 1);
        if (*l.head == NULL && pool_list_len(l) == 0)
            continue;
        pool_journal_sh_t *j = pool_lock_journal_(a, POOL_LOCK_CENTRAL, cls);
        size_t size = pool_classes_[cls].size;
        uint32_t found = 0, bound = pool_list_len(l) + 1;
        pool_journal_begin_(j, POOL_OP_REAP);
        for (void *p; (p = *l.head) != NULL && found < bound;) {
            uint32_t oi;
            pool_span_sh_t *s = pool_object_span_(a, p, &oi);
            if (s == NULL || !pool_bin_holds(tc, p))
                break;
            void *next = *(void **)p;
            pool_journal_step_(j);
            if (!reap_release(rp, cls, p))
                break;
            POOL_JSET(j, *l.head, next);
            POOL_JSET(j, *l.room, pool_list_len(l) > 0 ? *l.room + 1 : *l.room);
            drop_held(s, oi);
            found++;
            rp->rec.cached += size;
        }
        bool broken = *l.head != NULL;
        uint32_t left = pool_list_len(l);
        if (broken || left > 1)
            rp->rec.leaked += (size_t)left * size;
        if (broken || left > 0) {
            pool_journal_step_(j);
            POOL_JSET(j, *l.head, NULL);
            POOL_JSET(j, *l.room, (int32_t)l.empty);
        }
        pool_journal_commit_(j);
    }
    /* A thread killed before its slot's first use was marked owned no
     * span, and its cache has no lists of them to read. */
    if (!pool_atomic_load_acquire(&a->slots[tc - a->tcaches].used))
        return;
    for (unsigned cls = 1; cls < POOL_NCLASSES; cls++)
        pool_central_disown_dead_(a, cls, tc, rp->mover, &rp->leaving);
}

/* The dead process's objects in small span s: one step an object, so a
 * retry after the reaper's death finds the ones given back free and skips
 * them. */
static void reap_objects(reap_t *rp, pool_span_sh_t *s)
{
    pool_arena_t *a = rp->a;
    unsigned cls = s->cls;
    pool_journal_sh_t *j = pool_lock_journal_(a, POOL_LOCK_CENTRAL, cls);
    bool begun = false;
    char *base = pool_span_addr(a, s);
    uint32_t count = s->count, objsize = s->objsize;
    for (uint32_t oi = 0; oi < count; oi++) {
        if (!(s->bitmap[oi / 64] & (UINT64_C(1) << (oi % 64))) ||
            !rp->dead[*pool_owner_of(a, s, oi)])
            continue;
        if (!begun) {
            pool_journal_begin_(j, POOL_OP_REAP);
            begun = true;
        }
        /* The span may leave its class on the last object: s stays valid
         * (the page heap gets it only after the walk). */
        pool_journal_step_(j);
        if (reap_release(rp, cls, base + (size_t)oi * objsize)) {
            drop_held(s, oi);
            rp->rec.live += objsize;
        }
    }
    if (begun)
        pool_journal_commit_(j);
}

/* A span the dead process left between the tiers: one arriving at its
 * class is put on it, one leaving it goes on to the page heap.  They keep
 * their mover's tag until then, so that a reaper's death leaves them for
 * the next reap.  Visited before any object is given back: a span those
 * releases empty leaves its class under the same tag, and must not be
 * counted twice. */
static void reap_transit(reap_t *rp, pool_span_sh_t *s)
{
    bool moving = s->listed == POOL_LISTED_ARRIVING || s->listed == POOL_LISTED_LEAVING;
    if (s->state != POOL_SPAN_SMALL || !moving || s->owner > POOL_MAX_TAG || !rp->dead[s->owner])
        return;
    POOL_CRASH_POINT("reap.transit");
    if (s->listed == POOL_LISTED_ARRIVING) {
        pool_journal_sh_t *j = pool_lock_journal_(rp->a, POOL_LOCK_CENTRAL, s->cls);
        pool_journal_begin_(j, POOL_OP_ADD_SPAN);
        pool_central_add_span_locked_(rp->a, s->cls, s->start);
        pool_journal_commit_(j);
    } else {
        s->next = rp->leaving;
        rp->leaving = s->start;
    }
    rp->rec.transit += (size_t)s->npages << POOL_PAGE_SHIFT;
}

/* A big span of the dead process, or a span with its objects. */
static void reap_owned(reap_t *rp, pool_span_sh_t *s)
{
    if (s->state == POOL_SPAN_BIG && rp->dead[s->owner <= POOL_MAX_TAG ? s->owner : 0]) {
        s->next = rp->big;
        rp->big = s->start;
        rp->rec.live += (size_t)s->npages << POOL_PAGE_SHIFT;
    } else if (s->state == POOL_SPAN_SMALL &&
               (s->listed == POOL_LISTED_YES || s->listed == POOL_LISTED_NO)) {
        reap_objects(rp, s);
    }
}

/* Remember the reap for /stats.  REQUIRES: every lock. */
static void reap_record(pool_arena_t *a, const pool_reaprec_sh_t *rec)
{
    pool_crash_sh_t *c = a->crash;
    c->last[c->reaps % POOL_REAP_HISTORY] = *rec;
    c->reaps++;
    c->cached += rec->cached;
    c->live += rec->live;
    c->transit += rec->transit;
    c->leaked += rec->leaked;
}

/* A reap as pool_reap() reports it; recoveries are the caller's to add
 * (the history does not keep them). */
static void reap_report(const pool_reaprec_sh_t *rec, pool_reap_report_t *r)
{
    *r = (pool_reap_report_t){
        .pid = rec->pid,
        .reaper = rec->reaper,
        .slots = rec->slots,
        .cached = rec->cached,
        .live = rec->live,
        .transit = rec->transit,
        .leaked = rec->leaked,
    };
}

/* Slots of one dead process, their life locks held by the caller. */
typedef struct dead_s {
    unsigned n;
    uint16_t idx[POOL_MAX_SLOTS];
} dead_t;

/* Whether the holder of a taken slot is dead.  When it is (or an earlier
 * reap of it did not finish), the caller now holds the slot's life lock
 * and must finish the reap or give the lock back; a live holder's slot is
 * left as it was.  deadline (CLOCK_REALTIME) bounds a wait for a life lock
 * another reaper holds; NULL does not wait. */
static bool slot_dead(pool_slot_sh_t *slot, const struct timespec *deadline)
{
    if (pool_atomic_load_acquire(&slot->xstate) == POOL_SLOT_FREE)
        return false;
    pool_life_t life = pool_life_try_(&slot->life, &slot->xflags, deadline);
    if (life == POOL_LIFE_DEAD)
        return true;
    if (life == POOL_LIFE_HELD)
        return false;
    /* Not held: a reap left unfinished, a holder judged by its pid, or a
     * slot released while we looked. */
    uint32_t flags = pool_atomic_load_acquire(&slot->xflags);
    bool dead = false;
    if (pool_atomic_load_acquire(&slot->xstate) != POOL_SLOT_FREE) {
        uint64_t start;
        dead = (flags & POOL_SLOT_DEAD) ||
               ((flags & POOL_SLOT_BYPID) &&
                (pool_prim_start_time_(slot->pid, &start) != 0 || start != slot->start));
    }
    if (dead)
        pool_atomic_or(&slot->xflags, POOL_SLOT_DEAD);
    else
        pool_life_release_(&slot->life);
    return dead;
}

/* Give the life locks of d back, the slots still marked dead: the reap
 * is left for later. */
static void defer(pool_arena_t *a, const dead_t *d)
{
    for (unsigned k = 0; k < d->n; k++)
        pool_life_release_(&a->slots[d->idx[k]].life);
}

/* Reap the dead slots d of process pid and free them.  Returns 0, or
 * EAGAIN (the slots stay marked dead) when a live holder kept a pool lock
 * too long.  REQUIRES: d's life locks, no pool lock. */
static int reap_slots(pool_arena_t *a, const dead_t *d, pid_t pid, pool_reap_report_t *r)
{
    reap_t rp;
    memset(&rp, 0, sizeof rp);
    rp.a = a;
    rp.leaving = rp.big = POOL_NIL;
    rp.rec.pid = pid;
    rp.rec.reaper = pool_prim_getpid_();
    rp.rec.slots = d->n;
    for (unsigned k = 0; k < d->n; k++) {
        /* A process's objects carry the tag of its first slot: only that
         * slot's death makes them garbage (a thread's alone frees only the
         * thread's cache). */
        pool_slot_sh_t *slot = &a->slots[d->idx[k]];
        if (slot->tag != POOL_NO_TAG && slot->tag <= POOL_MAX_TAG) {
            rp.mover = (uint16_t)slot->tag;
            if (slot->tag == (uint32_t)d->idx[k] + 1)
                rp.dead[slot->tag] = true;
        }
    }
    uint64_t before = pool_atomic_load_relaxed(&a->crash->xrecoveries);
    if (!pool_lock_all_timed_(a, POOL_WAIT_MS)) {
        defer(a, d);
        reap_report(&rp.rec, r);
        return EAGAIN;
    }
    unsigned recoveries = (unsigned)(pool_atomic_load_relaxed(&a->crash->xrecoveries) - before);
    for (unsigned cls = 1; cls < POOL_NCLASSES; cls++)
        rp.empties[cls] = a->central[cls].nempty;
    bool process = false;
    pool_span_sh_t *s;
    for (unsigned t = 1; t <= POOL_MAX_TAG; t++)
        process |= rp.dead[t];
    /* The spans are walked whole: the page heap's repair, when taking its
     * lock, verified the tiling. */
    if (process)
        for (pool_span_walk_t w = pool_span_walk(a); (s = pool_span_next(a, &w)) != NULL;)
            reap_transit(&rp, s);
    for (unsigned k = 0; k < d->n; k++)
        reap_cache(&rp, &a->tcaches[d->idx[k]]);
    if (process)
        for (pool_span_walk_t w = pool_span_walk(a); (s = pool_span_next(a, &w)) != NULL;)
            reap_owned(&rp, s);
    /* The spans the dead left wholly free are no live process's working
     * set: the classes keep no more empty spans than before, and the rest
     * goes back to the OS (give_freed), as a private heap goes with its
     * process, not after the decay's cushion, which holds what live
     * processes take again. */
    for (unsigned cls = 1; cls < POOL_NCLASSES; cls++)
        pool_central_trim_(a, cls, rp.empties[cls], rp.mover, &rp.leaving);
    while (rp.leaving != POOL_NIL) {
        uint32_t idx = rp.leaving;
        rp.leaving = a->spans[idx].next;
        if (pool_config_stats)
            pool_atomic_inc(&a->cstats[a->spans[idx].cls].spans_out);
        note_freed(&rp, pool_pageheap_free_locked_(a, idx));
    }
    while (rp.big != POOL_NIL) {
        uint32_t idx = rp.big;
        rp.big = a->spans[idx].next;
        note_freed(&rp, pool_pageheap_free_locked_(a, idx));
    }
    reap_record(a, &rp.rec);
    reap_report(&rp.rec, r);
    r->recoveries = recoveries;
    POOL_CRASH_POINT("reap.slot");
    for (unsigned k = 0; k < d->n; k++)
        pool_slot_release_(&a->slots[d->idx[k]]);
    pool_unlock_all_(a);
    /* The rest with the page heap's lock alone, taken again: the classes
     * go on meanwhile, where returning inside the reap held every lock
     * three times as long.  A live holder that keeps it past a reaper's
     * wait leaves the pages to the decay. */
    struct timespec deadline = pool_deadline_in_(POOL_WAIT_MS);
    if (rp.nfreed > 0 && pool_lock_timed_(a, &a->ph->lock, POOL_LOCK_PAGEHEAP, 0, &deadline)) {
        give_freed(&rp);
        pool_unlock_(a, &a->ph->lock, POOL_LOCK_PAGEHEAP, 0);
    }
    return 0;
}

/* True when slot i is one of the calling thread's own. */
static bool own_slot(pool_arena_t *a, unsigned i)
{
    return pool_tls_tcache_ == &a->tcaches[i] || (int)i == pool_slot();
}

/* The slots after `from` held by pid that are dead, added to d. */
static void more_dead(pool_arena_t *a, unsigned from, uint32_t pid, dead_t *d)
{
    for (unsigned i = from, top = pool_slots_top(a); i < top; i++)
        if (pool_atomic_load_acquire(&a->slots[i].xstate) == pid && !own_slot(a, i) &&
            slot_dead(&a->slots[i], NULL))
            d->idx[d->n++] = (uint16_t)i;
}

unsigned pool_reap_dead_(pool_arena_t *a)
{
    unsigned reaped = 0;
    if (a->hdr == NULL || pool_arena_copied_())
        return 0;
    for (unsigned i = 0, top = pool_slots_top(a); i < top; i++) {
        uint32_t pid = pool_atomic_load_acquire(&a->slots[i].xstate);
        if (pid == POOL_SLOT_FREE || own_slot(a, i) || !slot_dead(&a->slots[i], NULL))
            continue;
        dead_t d = { 1, { (uint16_t)i } };
        more_dead(a, i + 1, pid, &d);
        pool_reap_report_t r;
        if (reap_slots(a, &d, (pid_t)pid, &r) == 0)
            reaped++;
    }
    return reaped;
}

bool pool_reap_left_(pool_arena_t *a)
{
    if (a->hdr == NULL || pool_arena_copied_())
        return false;
    for (unsigned i = 0, top = pool_slots_top(a); i < top; i++)
        if (pool_atomic_load_acquire(&a->slots[i].xstate) != POOL_SLOT_FREE &&
            (pool_atomic_load_acquire(&a->slots[i].xflags) & POOL_SLOT_DEAD))
            return true;
    return false;
}

void pool_reap_maybe_(pool_arena_t *a)
{
    uint64_t now = pool_prim_now_coarse_ns_();
    uint64_t due = pool_atomic_load_relaxed(&a->hdr->xreap_due_ns);
    if (now < due || !pool_atomic_cas(&a->hdr->xreap_due_ns, &due, now + POOL_REAP_PERIOD_NS))
        return;
    pool_reap_dead_(a);
}

/* The last reap of pid that another process did, into *r: 0, ESRCH if the
 * history has none, EAGAIN if a live holder kept the page-heap lock (the
 * history's) past the deadline. */
static int reaped_elsewhere(pool_arena_t *a, pid_t pid, pool_reap_report_t *r,
                            const struct timespec *deadline)
{
    if (!pool_lock_timed_(a, &a->ph->lock, POOL_LOCK_PAGEHEAP, 0, deadline))
        return EAGAIN;
    const pool_crash_sh_t *c = a->crash;
    uint64_t n = c->reaps < POOL_REAP_HISTORY ? c->reaps : POOL_REAP_HISTORY;
    bool found = false;
    for (uint64_t i = 0; i < n && !found; i++) {
        const pool_reaprec_sh_t *rec = &c->last[(c->reaps - 1 - i) % POOL_REAP_HISTORY];
        if (rec->pid != pid)
            continue;
        reap_report(rec, r);
        found = true;
    }
    pool_unlock_(a, &a->ph->lock, POOL_LOCK_PAGEHEAP, 0);
    return found ? 0 : ESRCH;
}

int pool_reap(pid_t pid, pool_reap_report_t *out)
{
    pool_reap_report_t local;
    pool_reap_report_t *r = out != NULL ? out : &local;
    memset(r, 0, sizeof *r);
    r->pid = pid;
    pool_arena_t *a = &pool_arena_;
    if (a->hdr == NULL || pool_arena_copied_())
        return ENOENT;
    if (pid <= 0)
        return ESRCH;
    if (pid == pool_prim_getpid_())
        return EBUSY;
    /* The caller knows pid is dead (it waited for it): wait a moment for a
     * life lock another reaper holds rather than call it alive. */
    struct timespec deadline = pool_deadline_in_(POOL_WAIT_MS);
    dead_t d = { 0, { 0 } };
    bool alive = false;
    for (unsigned i = 0, top = pool_slots_top(a); i < top; i++) {
        pool_slot_sh_t *slot = &a->slots[i];
        if (pool_atomic_load_acquire(&slot->xstate) != (uint32_t)pid)
            continue;
        if (slot_dead(slot, &deadline))
            d.idx[d.n++] = (uint16_t)i;
        else
            alive |= pool_atomic_load_acquire(&slot->xstate) == (uint32_t)pid;
    }
    if (alive) {
        defer(a, &d);
        return EBUSY;
    }
    if (d.n == 0) {
        /* Reaped by whoever noticed first, or never attached. */
        return reaped_elsewhere(a, pid, r, &deadline);
    }
    int rc = reap_slots(a, &d, pid, r);
    if (rc == 0 && out != NULL)
        out->pid = pid;
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Housekeeping                                                              */
/* ------------------------------------------------------------------------ */

int pool_decay(void)
{
    return pool_decay_(true);
}

int pool_decay_(bool wait)
{
    pool_arena_t *a = &pool_arena_;
    if (a->hdr == NULL || pool_arena_copied_())
        return 0;
    /* Read without the lock: a period not yet over costs nothing.  A
     * period is the attached processes' to end, by the page heap's
     * operations and their threads' housekeeping (!wait), as soon as it
     * has run its length; a supervisor's call ends one they have left
     * running twice its length, a heap gone quiet, so that the returns
     * (and a crash soak's deaths in them) stay the workers'.  A heap
     * whose only operations after a burst are its workers' scavenges
     * otherwise ran periods of two to three seconds, and gave the burst
     * back three of them after it. */
    uint64_t start = pool_atomic_load_relaxed(&a->ph->decay_start_ns);
    if (pool_prim_now_coarse_ns_() - start < (wait ? 2 : 1) * POOL_DECAY_NS)
        return 0;
    struct timespec deadline = pool_deadline_in_(POOL_WAIT_MS);
    return pool_pageheap_decay_(a, wait ? &deadline : NULL) ? 0 : EAGAIN;
}

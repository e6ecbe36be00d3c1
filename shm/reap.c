/* libshmpool — after a crash: reaping a dead process, taking every lock,
 * the watchdog's view of the locks, and ownership tags.
 *
 * pool_reap() runs in the process that waited for the dead one, with the
 * page-heap lock and every class lock held (taking them also repairs any
 * lock the dead process held).  It gives the dead slots' thread caches back
 * object by object, validating each, then walks every span: objects and big
 * spans tagged with the dead process are freed, spans it left in transit
 * between the tiers are moved on.  Nothing it finds makes it abort.
 *
 * Entry points: pool_reap(), pool_repair(), pool_lock_stalled(),
 * pool_adopt(), pool_disown_().
 */
#include "pool-internal.h"

#include <errno.h>
#include <string.h>
#include <time.h>

#include "prim/prim.h"

/* How long a reap waits for all the locks together: a live holder that
 * keeps one longer is stuck, and the caller must not hang with it. */
#define POOL_REAP_WAIT_MS 200

void pool_lock_all_(pool_arena_t *a)
{
    pool_lock_(a, &a->ph->lock, POOL_LOCK_PAGEHEAP, 0);
    for (unsigned cls = 1; cls < POOL_NCLASSES; cls++)
        pool_lock_(a, &a->central[cls].lock, POOL_LOCK_CENTRAL, cls);
}

/* The CLOCK_REALTIME instant ms milliseconds from now, as the mutexes want it. */
static struct timespec deadline_in(unsigned ms)
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

bool pool_lock_all_timed_(pool_arena_t *a, unsigned ms)
{
    struct timespec deadline = deadline_in(ms);
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
    struct timespec deadline = deadline_in(POOL_REAP_WAIT_MS);
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
        pool_journal_sh_t *j = &a->journals[i];
        /* holder before since: a newer holder only makes since newer. */
        int holder = pool_atomic_load_acquire(&j->xholder);
        uint64_t since = pool_atomic_load_acquire(&j->xsince_ns);
        if (holder != 0 && now > since && now - since >= bound)
            return holder;
    }
    return 0;
}

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

typedef struct reap_s {
    pool_arena_t *a;
    bool dead[POOL_MAX_TAG + 1]; /* tags of the dead process */
    uint32_t leaving;            /* spans for the page heap, linked by next */
    uint32_t big;                /* dead big spans, linked by next */
    pool_reap_report_t *r;
} reap_t;

/* Release p into class cls, one step of the reap operation begun on the
 * class journal.  REQUIRES: every lock. */
static bool reap_release(reap_t *rp, unsigned cls, void *p)
{
    pool_journal_step_(pool_journal_(rp->a, POOL_LOCK_CENTRAL, cls));
    POOL_CRASH_POINT("reap.object");
    return pool_central_release_one_(rp->a, cls, p, POOL_NO_TAG, &rp->leaving);
}

/* Give one dead thread cache back, object by object.  A chain is followed
 * only while each object is a handed-out object of the class: a process
 * killed in the middle of a push or pop leaves at most the length wrong,
 * which is why the walk is bounded by it plus one, not ended by it. */
static void reap_cache(reap_t *rp, pool_tcache_sh_t *tc)
{
    pool_arena_t *a = rp->a;
    for (unsigned cls = 1; cls < POOL_NCLASSES; cls++) {
        pool_bin_t *bin = &tc->bins[cls];
        if (bin->head == NULL && bin->len == 0)
            continue;
        pool_journal_sh_t *j = pool_journal_(a, POOL_LOCK_CENTRAL, cls);
        pool_journal_begin_(j, POOL_OP_REAP);
        uint32_t found = 0;
        void *p = bin->head;
        while (p != NULL && found <= bin->len) {
            uint32_t oi;
            pool_span_sh_t *s = pool_object_span_(a, p, &oi);
            if (s == NULL || !reap_release(rp, cls, p))
                break;
            drop_held(s, oi);
            found++;
            p = *(void **)p;
        }
        pool_journal_commit_(j);
        size_t size = pool_classes_[cls].size;
        rp->r->cached += (size_t)found * size;
        if (p != NULL && found < bin->len)
            rp->r->leaked += (size_t)(bin->len - found) * size;
        bin->head = NULL;
        bin->len = 0;
    }
}

/* The dead process's objects in small span s (at page idx). */
static void reap_objects(reap_t *rp, pool_span_sh_t *s, uint32_t idx)
{
    pool_arena_t *a = rp->a;
    unsigned cls = s->cls;
    pool_journal_sh_t *j = pool_journal_(a, POOL_LOCK_CENTRAL, cls);
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
        if (reap_release(rp, cls, base + (size_t)oi * objsize)) {
            drop_held(s, oi);
            rp->r->live += objsize;
        }
    }
    if (begun)
        pool_journal_commit_(j);
}

/* Walk every span of the arena.  REQUIRES: every lock. */
static void reap_spans(reap_t *rp)
{
    pool_arena_t *a = rp->a;
    uint32_t carved = a->ph->carved;
    for (uint32_t p = 0; p < carved;) {
        pool_span_sh_t *s = &a->spans[p];
        if (s->npages == 0 || s->start != p)
            break; /* the page heap's repair just verified the tiling */
        size_t bytes = (size_t)s->npages << POOL_PAGE_SHIFT;
        if (s->state == POOL_SPAN_BIG && rp->dead[s->owner <= POOL_MAX_TAG ? s->owner : 0]) {
            s->next = rp->big;
            rp->big = p;
            rp->r->live += bytes;
        } else if (s->state == POOL_SPAN_SMALL) {
            bool mover_dead = s->owner <= POOL_MAX_TAG && rp->dead[s->owner];
            if ((s->listed == POOL_LISTED_ARRIVING || s->listed == POOL_LISTED_LEAVING) &&
                mover_dead)
                POOL_CRASH_POINT("reap.transit");
            if (s->listed == POOL_LISTED_ARRIVING && mover_dead) {
                pool_journal_sh_t *j = pool_journal_(a, POOL_LOCK_CENTRAL, s->cls);
                pool_journal_begin_(j, POOL_OP_ADD_SPAN);
                pool_central_add_span_locked_(a, s->cls, p);
                pool_journal_commit_(j);
                rp->r->transit += bytes;
            } else if (s->listed == POOL_LISTED_LEAVING && mover_dead) {
                s->owner = POOL_NO_TAG;
                s->next = rp->leaving;
                rp->leaving = p;
                rp->r->transit += bytes;
            }
            if (s->listed == POOL_LISTED_YES || s->listed == POOL_LISTED_NO)
                reap_objects(rp, s, p);
        }
        p += s->npages;
    }
}

/* Remember the reap for /stats.  REQUIRES: every lock. */
static void reap_record(pool_arena_t *a, const pool_reap_report_t *r)
{
    pool_crash_sh_t *c = a->crash;
    pool_reaprec_sh_t *rec = &c->last[c->reaps % POOL_REAP_HISTORY];
    rec->pid = r->pid;
    rec->slots = r->slots;
    rec->cached = r->cached;
    rec->live = r->live;
    rec->transit = r->transit;
    rec->leaked = r->leaked;
    c->reaps++;
    c->cached += r->cached;
    c->live += r->live;
    c->transit += r->transit;
    c->leaked += r->leaked;
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
    if (pool_prim_alive_(pid))
        return EBUSY;
    reap_t rp;
    memset(&rp, 0, sizeof rp);
    rp.a = a;
    rp.r = r;
    rp.leaving = rp.big = POOL_NIL;
    for (unsigned i = 0; i < POOL_MAX_SLOTS; i++) {
        pool_slot_sh_t *slot = &a->slots[i];
        if (pool_atomic_load_acquire(&slot->xstate) != (uint32_t)pid)
            continue;
        r->slots++;
        if (slot->tag != POOL_NO_TAG && slot->tag <= POOL_MAX_TAG)
            rp.dead[slot->tag] = true;
    }
    if (r->slots == 0)
        return ESRCH;
    uint64_t before = pool_atomic_load_relaxed(&a->crash->xrecoveries);
    if (!pool_lock_all_timed_(a, POOL_REAP_WAIT_MS))
        return EAGAIN;
    r->recoveries = (unsigned)(pool_atomic_load_relaxed(&a->crash->xrecoveries) - before);
    for (unsigned i = 0; i < POOL_MAX_SLOTS; i++) {
        pool_slot_sh_t *slot = &a->slots[i];
        if (pool_atomic_load_acquire(&slot->xstate) == (uint32_t)pid)
            reap_cache(&rp, &slot->tcache);
    }
    reap_spans(&rp);
    while (rp.leaving != POOL_NIL) {
        uint32_t idx = rp.leaving;
        rp.leaving = a->spans[idx].next;
        if (pool_config_stats)
            pool_atomic_inc(&a->cstats[a->spans[idx].cls].spans_out);
        pool_pageheap_free_locked_(a, idx);
    }
    while (rp.big != POOL_NIL) {
        uint32_t idx = rp.big;
        rp.big = a->spans[idx].next;
        pool_pageheap_free_locked_(a, idx);
    }
    reap_record(a, r);
    POOL_CRASH_POINT("reap.slot");
    for (unsigned i = 0; i < POOL_MAX_SLOTS; i++) {
        pool_slot_sh_t *slot = &a->slots[i];
        if (pool_atomic_load_acquire(&slot->xstate) == (uint32_t)pid) {
            slot->tag = POOL_NO_TAG;
            pool_atomic_store_release(&slot->xstate, POOL_SLOT_FREE);
        }
    }
    pool_unlock_all_(a);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Ownership                                                                 */
/* ------------------------------------------------------------------------ */

void pool_disown_(pool_arena_t *a, uint16_t tag)
{
    if (a->hdr == NULL || tag == POOL_NO_TAG || tag > POOL_MAX_TAG)
        return;
    pool_lock_all_(a);
    uint32_t carved = a->ph->carved;
    for (uint32_t p = 0; p < carved;) {
        pool_span_sh_t *s = &a->spans[p];
        if (s->npages == 0 || s->start != p)
            break;
        if (s->state == POOL_SPAN_BIG && s->owner == tag)
            s->owner = POOL_NO_TAG;
        if (s->state == POOL_SPAN_SMALL)
            for (uint32_t oi = 0; oi < s->count; oi++)
                if (*pool_owner_of(a, s, oi) == tag)
                    *pool_owner_of(a, s, oi) = POOL_NO_TAG;
        p += s->npages;
    }
    pool_unlock_all_(a);
}

void pool_adopt(void *p)
{
    pool_arena_t *a = &pool_arena_;
    if (p == NULL || !pool_in_arena(p) || pool_proc_state_ != POOL_PROC_ATTACHED)
        return;
    uint16_t tag = a->slots[pool_slot()].tag;
    unsigned cls = pool_atomic_load_acquire(&a->pm_class[pool_pagemap_page_(a, p)]);
    if (cls == 0) {
        pool_lock_(a, &a->ph->lock, POOL_LOCK_PAGEHEAP, 0);
        pool_span_sh_t *s = pool_pagemap_span_(a, p);
        if (s != NULL && s->state == POOL_SPAN_BIG && pool_span_addr(a, s) == p)
            s->owner = tag;
        pool_unlock_(a, &a->ph->lock, POOL_LOCK_PAGEHEAP, 0);
        return;
    }
    pool_lock_(a, &a->central[cls].lock, POOL_LOCK_CENTRAL, cls);
    uint32_t oi;
    pool_span_sh_t *s = pool_object_span_(a, p, &oi);
    if (s != NULL && s->cls == cls && (s->bitmap[oi / 64] & (UINT64_C(1) << (oi % 64))))
        pool_owner_set(a, s, oi, (uint8_t)tag);
    pool_unlock_(a, &a->central[cls].lock, POOL_LOCK_CENTRAL, cls);
}

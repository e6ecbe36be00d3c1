/* SPDX-License-Identifier: BSD-2-Clause */
/* libshmpool — accounting: pool_usage() and pool_stats_json().
 *
 * Byte figures are recomputed from the structures (page-heap counters,
 * central lists, every slot's bins) rather than kept as running totals, so
 * the Release fast path counts nothing.  The per-slot and per-class counters
 * exist only with --enable-pool-stats.  Output is bounded: classes with no
 * activity and slots never used are left out.
 */
#include "pool-internal.h"

#include <errno.h>
#include <string.h>

/* Objects cached in the thread caches, per class, summed over the slots
 * that are taken.  Other processes' lengths are read without a lock. */
static void tcache_objects(pool_arena_t *a, uint64_t *per_class)
{
    memset(per_class, 0, sizeof(uint64_t) * POOL_NCLASSES);
    for (unsigned i = 0, top = pool_slots_top(a); i < top; i++) {
        pool_slot_sh_t *slot = &a->slots[i];
        if (pool_atomic_load_acquire(&slot->xstate) == POOL_SLOT_FREE)
            continue;
        for (unsigned cls = 1; cls < POOL_NCLASSES; cls++)
            per_class[cls] += pool_tcache_held(&a->tcaches[i], cls);
    }
}

/* Free objects of the spans on one list of a class (the class's or an
 * owner's).  Bounded: a list read while it changes may loop. */
static uint64_t list_free(const pool_arena_t *a, uint32_t head)
{
    uint64_t free_objs = 0;
    uint32_t seen = 0;
    for (uint32_t i = head; i < a->npages && seen++ < a->npages; i = a->spans[i].next)
        free_objs += a->spans[i].nfree;
    return free_objs;
}

/* pool_usage of arena a, taking each lock briefly when `lock` (another
 * process's arena read from outside is read as it is), all of them by one
 * deadline.  What a lock a live holder kept past it guards is read as it
 * is too: a supervisor's /stats must not hang with a stuck holder.
 * Returns false when that happened. */
static bool usage_of(pool_arena_t *a, pool_usage_t *u, bool lock)
{
    memset(u, 0, sizeof *u);
    if (a->hdr == NULL)
        return true;
    struct timespec deadline;
    if (lock)
        deadline = pool_deadline_in_(POOL_WAIT_MS);
    bool exact = true;
    u->reserved = a->hdr->size;
    u->fallbacks = pool_atomic_load_relaxed(&a->hdr->xfallbacks);
    u->foreign_frees = pool_atomic_load_relaxed(&a->hdr->xforeign_frees);
    u->attach_failures = pool_atomic_load_relaxed(&a->hdr->xattach_failures);

    uint64_t cached_objs[POOL_NCLASSES];
    tcache_objects(a, cached_objs);
    size_t in_use = 0, cached = 0;
    for (unsigned cls = 1; cls < POOL_NCLASSES; cls++) {
        pool_central_sh_t *c = &a->central[cls];
        const pool_class_t *k = &pool_classes_[cls];
        bool locked = lock && pool_lock_timed_(a, &c->lock, POOL_LOCK_CENTRAL, cls, &deadline);
        exact &= locked || !lock;
        uint64_t spans = c->nspans, free_objs = list_free(a, c->head);
        for (unsigned i = 0, top = pool_slots_top(a); i < top; i++)
            if (pool_atomic_load_acquire(&a->slots[i].used))
                free_objs += list_free(a, a->tcaches[i].own[cls].spans);
        if (locked)
            pool_unlock_(a, &c->lock, POOL_LOCK_CENTRAL, cls);
        /* Read unlocked, the free count may pass what the spans hold. */
        if (free_objs > spans * k->count)
            free_objs = spans * k->count;
        uint64_t handed = spans * k->count - free_objs;
        uint64_t tc = cached_objs[cls] < handed ? cached_objs[cls] : handed;
        uint64_t span_bytes = (uint64_t)k->pages * POOL_PAGE_SIZE;
        uint64_t tail = spans * (span_bytes - (uint64_t)k->count * k->size);
        in_use += (handed - tc) * k->size;
        /* A span's tail past its last object is counted as cached: it is
         * held by the class, not by any caller. */
        cached += (free_objs + tc) * k->size + tail;
    }
    pool_pageheap_sh_t *ph = a->ph;
    bool locked = lock && pool_lock_timed_(a, &ph->lock, POOL_LOCK_PAGEHEAP, 0, &deadline);
    exact &= locked || !lock;
    u->used = (size_t)ph->carved << POOL_PAGE_SHIFT;
    u->free = (size_t)ph->free_pages << POOL_PAGE_SHIFT;
    u->returned = (size_t)ph->returned_pages << POOL_PAGE_SHIFT;
    in_use += (size_t)ph->big_pages << POOL_PAGE_SHIFT;
    if (locked)
        pool_unlock_(a, &ph->lock, POOL_LOCK_PAGEHEAP, 0);
    u->in_use = in_use;
    u->cached = cached;
    return exact;
}

int pool_usage(pool_usage_t *u)
{
    return usage_of(&pool_arena_, u, true) ? 0 : EAGAIN;
}

void pool_usage_view_(pool_arena_t *a, pool_usage_t *u)
{
    usage_of(a, u, false);
}

/* ------------------------------------------------------------------------ */
/* JSON                                                                      */
/* ------------------------------------------------------------------------ */

typedef struct json_s {
    char *buf;
    size_t cap;
    size_t len; /* what the whole output needs */
} json_t;

static void jp(json_t *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void jp(json_t *j, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t room = j->len < j->cap ? j->cap - j->len : 0;
    j->len += pool_vsnprintf_(room ? j->buf + j->len : NULL, room, fmt, ap);
    va_end(ap);
}

static void jp_lock(json_t *j, const pool_lockstats_sh_t *l)
{
    jp(j, "{\"acquired\":%lu,\"contended\":%lu,\"wait_ns\":%lu,\"held_ns\":%lu,"
          "\"recoveries\":%lu}",
       (unsigned long)l->acquired, (unsigned long)l->contended, (unsigned long)l->wait_ns,
       (unsigned long)l->held_ns, (unsigned long)l->recoveries);
}

static void jp_classes(json_t *j, pool_arena_t *a)
{
    jp(j, ",\"classes\":[");
    bool first = true;
    for (unsigned cls = 1; cls < POOL_NCLASSES; cls++) {
        pool_binstats_t sum;
        memset(&sum, 0, sizeof sum);
        for (unsigned i = 0, top = pool_slots_top(a); i < top; i++) {
            if (!a->slots[i].used)
                continue;
            const pool_binstats_t *b = &pool_slot_binstats(a, i)[cls];
            sum.allocs += b->allocs;
            sum.frees += b->frees;
            sum.misses += b->misses;
            sum.overflows += b->overflows;
        }
        const pool_centralstats_sh_t *c = &a->cstats[cls];
        const pool_lockstats_sh_t *l = &a->lockstats[1 + cls];
        if (sum.allocs == 0 && sum.frees == 0 && c->fetches == 0 && c->releases == 0 &&
            l->recoveries == 0)
            continue;
        jp(j, "%s{\"class\":%u,\"size\":%u,\"spans\":%u,\"allocs\":%lu,\"frees\":%lu,"
              "\"tcache_hits\":%lu,\"tcache_misses\":%lu,\"tcache_overflows\":%lu,"
              "\"central_fetches\":%lu,\"central_fetched\":%lu,\"central_releases\":%lu,"
              "\"central_released\":%lu,\"spans_in\":%lu,\"spans_out\":%lu,\"lock\":",
           first ? "" : ",", cls, pool_classes_[cls].size, a->central[cls].nspans,
           (unsigned long)sum.allocs, (unsigned long)sum.frees,
           (unsigned long)(sum.allocs > sum.misses ? sum.allocs - sum.misses : 0),
           (unsigned long)sum.misses, (unsigned long)sum.overflows,
           (unsigned long)c->fetches, (unsigned long)c->fetched, (unsigned long)c->releases,
           (unsigned long)c->released, (unsigned long)c->spans_in, (unsigned long)c->spans_out);
        jp_lock(j, l);
        jp(j, "}");
        first = false;
    }
    jp(j, "]");
}

static void jp_slots(json_t *j, pool_arena_t *a)
{
    jp(j, ",\"slots\":[");
    bool first = true;
    for (unsigned i = 0, top = pool_slots_top(a); i < top; i++) {
        const pool_slot_sh_t *s = &a->slots[i];
        if (!s->used)
            continue;
        pool_binstats_t sum;
        memset(&sum, 0, sizeof sum);
        uint64_t cached = 0;
        for (unsigned cls = 1; cls < POOL_NCLASSES; cls++) {
            const pool_binstats_t *b = &pool_slot_binstats(a, i)[cls];
            sum.allocs += b->allocs;
            sum.frees += b->frees;
            sum.misses += b->misses;
            sum.fetches += b->fetches;
            sum.fetched += b->fetched;
            sum.releases += b->releases;
            sum.released += b->released;
            cached += (uint64_t)pool_tcache_held(&a->tcaches[i], cls) * pool_classes_[cls].size;
        }
        jp(j, "%s{\"slot\":%u,\"pid\":%d,\"tid\":%d,\"taken\":%s,\"cached_bytes\":%lu,"
              "\"allocs\":%lu,\"frees\":%lu,\"tcache_hits\":%lu,\"tcache_misses\":%lu,"
              "\"fetches\":%lu,\"fetched\":%lu,\"releases\":%lu,\"released\":%lu,"
              "\"big_allocs\":%lu,\"big_frees\":%lu,\"fallbacks\":%lu}",
           first ? "" : ",", i, s->pid, s->tid,
           pool_atomic_load_relaxed(&s->xstate) != POOL_SLOT_FREE ? "true" : "false",
           (unsigned long)cached, (unsigned long)sum.allocs, (unsigned long)sum.frees,
           (unsigned long)(sum.allocs > sum.misses ? sum.allocs - sum.misses : 0),
           (unsigned long)sum.misses, (unsigned long)sum.fetches, (unsigned long)sum.fetched,
           (unsigned long)sum.releases, (unsigned long)sum.released,
           (unsigned long)s->stats.big_allocs, (unsigned long)s->stats.big_frees,
           (unsigned long)s->stats.fallbacks);
        first = false;
    }
    jp(j, "]");
}

/* Recoveries, quarantines and reaps, with the last reaps one by one. */
static void jp_crash(json_t *j, pool_arena_t *a)
{
    const pool_crash_sh_t *c = a->crash;
    jp(j, ",\"crash\":{\"recoveries\":%lu,\"rolled_back\":%lu,\"rebuilds\":%lu,"
          "\"quarantined_bytes\":%lu,\"reaps\":%lu,\"reaped_cached_bytes\":%lu,"
          "\"reaped_live_bytes\":%lu,\"reaped_transit_bytes\":%lu,\"leaked_bytes\":%lu,"
          "\"last_reaps\":[",
       (unsigned long)pool_atomic_load_relaxed(&c->xrecoveries),
       (unsigned long)pool_atomic_load_relaxed(&c->xrolled_back),
       (unsigned long)pool_atomic_load_relaxed(&c->xrebuilds),
       (unsigned long)pool_atomic_load_relaxed(&c->xquarantined), (unsigned long)c->reaps,
       (unsigned long)c->cached, (unsigned long)c->live, (unsigned long)c->transit,
       (unsigned long)c->leaked);
    uint64_t n = c->reaps < POOL_REAP_HISTORY ? c->reaps : POOL_REAP_HISTORY;
    for (uint64_t i = 0; i < n; i++) {
        const pool_reaprec_sh_t *r = &c->last[(c->reaps - 1 - i) % POOL_REAP_HISTORY];
        jp(j, "%s{\"pid\":%d,\"reaper\":%d,\"slots\":%u,\"cached_bytes\":%lu,"
              "\"live_bytes\":%lu,\"transit_bytes\":%lu,\"leaked_bytes\":%lu}",
           i == 0 ? "" : ",", r->pid, r->reaper, r->slots, (unsigned long)r->cached,
           (unsigned long)r->live, (unsigned long)r->transit, (unsigned long)r->leaked);
    }
    jp(j, "]}");
}

/* Debug builds: the live check's verdict, quotes and backslashes of its
 * message replaced so that the JSON stays valid, and how many thread
 * caches it left out. */
static void jp_check(json_t *j)
{
    char msg[200];
    unsigned left_out;
    if (pool_check_live_(msg, sizeof msg, &left_out) == 0)
        pool_snprintf_(msg, sizeof msg, "ok");
    for (char *m = msg; *m; m++)
        if (*m == '"' || *m == '\\' || (unsigned char)*m < 0x20)
            *m = '\'';
    jp(j, ",\"check\":\"%s\",\"check_caches_left_out\":%u", msg, left_out);
}

size_t pool_stats_json(char *buf, size_t cap)
{
    json_t j = { buf, cap, 0 };
    pool_arena_t *a = &pool_arena_;
    if (cap > 0)
        buf[0] = '\0';
    jp(&j, "{\"allocator\":\"%s\",\"attached\":%s,\"slot\":%d,\"stats\":%s", pool_name(),
       pool_attached() ? "true" : "false", pool_slot(), pool_config_stats ? "true" : "false");
    if (a->hdr != NULL) {
        pool_usage_t u;
        bool exact = pool_usage(&u) == 0;
        static const char *const backing[] = { "pages", "thp", "hugetlb" };
        jp(&j, ",\"arena\":{\"reserved\":%zu,\"used\":%zu,\"in_use\":%zu,\"cached\":%zu,"
               "\"free\":%zu,\"returned\":%zu,\"fallbacks\":%zu,\"foreign_frees\":%zu,"
               "\"attach_failures\":%zu,\"page_size\":%zu,\"backing\":\"%s\",\"exact\":%s}",
           u.reserved, u.used, u.in_use, u.cached, u.free, u.returned, u.fallbacks,
           u.foreign_frees, u.attach_failures, POOL_PAGE_SIZE,
           backing[a->hdr->backing < 3 ? a->hdr->backing : 0], exact ? "true" : "false");
        const pool_pageheap_sh_t *ph = a->ph;
        jp(&j, ",\"pageheap\":{\"pages\":%u,\"carved\":%u,\"allocs\":%lu,\"frees\":%lu,"
               "\"madvise_remove\":%lu,\"decayed_pages\":%lu,\"reused_returned_pages\":%lu,"
               "\"lock\":",
           ph->npages, ph->carved, (unsigned long)ph->allocs, (unsigned long)ph->frees,
           (unsigned long)ph->madvises, (unsigned long)ph->decayed_pages,
           (unsigned long)ph->reused_returned);
        jp_lock(&j, &a->lockstats[0]);
        jp(&j, ",\"quarantined_pages\":%lu}", (unsigned long)ph->quarantined_pages);
        jp_crash(&j, a);
        if (pool_config_debug > 0)
            jp_check(&j);
        if (pool_config_stats) {
            jp_classes(&j, a);
            jp_slots(&j, a);
        }
    }
    jp(&j, "}");
    return j.len;
}

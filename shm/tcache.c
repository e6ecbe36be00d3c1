/* SPDX-License-Identifier: BSD-2-Clause */
/* libshmpool — the thread cache.
 *
 * A thread's cache lives in its slot in the arena: a bin per size class,
 * which the fast paths (alloc.h) only pop and push.  Here is what fills
 * and empties the bins: a refill from the central cache, a full bin's
 * release, flush and scavenge, and the debug-build checks.  Batches from
 * the central cache grow by one object a refill (1, 2, 3 ... up to the
 * class maximum); a bin that reaches its watermark (256 KiB of objects, at least
 * two batches) releases one batch.  A bin that runs dry after releasing
 * has its watermark grow by a batch, up to four times the class's, and a
 * scavenge halves it back towards the class's (sizeclass.c,
 * POOL_BIN_GROWTH).
 *
 * The cache owns the spans it takes objects from (central.c), and its page
 * map, private to the thread, holds the class of their pages only: free's
 * fast path pushes only objects of its own spans, and every other object
 * takes the slow path, which pushes it onto its owner's inbox (one
 * compare-and-swap, no lock), whence the owner takes it whole when its bin
 * runs dry, or, when the inbox is closed or full or the object changed
 * hands, sends it back towards its span.
 */
#include "alloc.h"

#include <errno.h>
#include <string.h>

#include "prim/prim.h"

/* Every thread that takes a slot writes its cache from end to end, so each
 * byte in it costs arena memory: the counters, which only stats builds
 * write, stay out (a cache of 5.7 KiB touches 2.4 pages on average, one of
 * 11.7 KiB with them inside 3.4). */
_Static_assert(sizeof(pool_tcache_sh_t) <= 6 * 1024, "a thread cache over 6 KiB");
_Static_assert(POOL_BATCH_MAX <= UINT8_MAX, "a batch size fits its byte (pool_own_t)");

/* This process's page map for the thread in each slot it holds, mapped on
 * the slot's first use and zeroed when a thread takes the slot again (a
 * forked child's copies too: it is another holder). */
static uint8_t *private_maps[POOL_MAX_SLOTS];

/* Open tc's inbox of class cls, empty, in a generation of its own: a free
 * that read the word before cannot push.  Its holder's tag is set before,
 * for a free that reads the new word reads the tag after it. */
static void inbox_reopen(pool_tcache_sh_t *tc, unsigned cls)
{
    uint64_t *box = &tc->own[cls].xinbox;
    uint64_t gen = (pool_atomic_load_relaxed(box) >> POOL_INBOX_GEN_SHIFT) + 1;
    pool_atomic_store_release(box, (gen & 0x7f) << POOL_INBOX_GEN_SHIFT);
}

bool pool_tcache_init_(pool_arena_t *a, pool_tcache_sh_t *tc, uint16_t slot)
{
    size_t len = (a->npages * POOL_PM_PER_PAGE + pool_prim_os_page_size_() - 1) &
                 ~(pool_prim_os_page_size_() - 1);
    if (private_maps[slot] == NULL) {
        void *m;
        if (pool_prim_map_private_(len, &m) != 0)
            return false;
        private_maps[slot] = m;
    } else if (pool_prim_zero_(private_maps[slot], len) != 0) {
        return false;
    }
    tc->base = a->data;
    tc->size = a->data_size;
    tc->pm_class = private_maps[slot];
    tc->slot = slot;
    tc->stats = pool_slot_binstats(a, slot);
    memcpy(tc->class_small, pool_class_small_, sizeof tc->class_small);
    memset(tc->light, 0, sizeof tc->light);
    tc->heads[0] = NULL;
    memset(&tc->bins[0], 0, sizeof tc->bins[0]);
    tc->own[0].watermark = 0;
    tc->own[0].batch = 0;
    for (unsigned cls = 1; cls < POOL_NCLASSES; cls++) {
        tc->heads[cls] = NULL;
        tc->own[cls].watermark = pool_classes_[cls].watermark;
        tc->bins[cls].room = (int32_t)tc->own[cls].watermark;
        tc->own[cls].batch = 1;
        tc->own[cls].churned = 0;
        uint32_t size = pool_classes_[cls].size;
        uint32_t align = size & -size;
        tc->bins[cls].misalign = (align < POOL_PAGE_SIZE ? align : POOL_PAGE_SIZE) - 1;
        tc->own[cls].remote = NULL;
        tc->own[cls].remote_room = 0;
        inbox_reopen(tc, cls);
    }
    return true;
}

void pool_bin_corrupt_(const void *p)
{
    pool_fatal_("malloc(): corrupted thread cache: %p is listed but is no object freed into "
                "this cache (written after its free?)", p);
}

/* p, read from a bin of tc (its head or a link), checked before anything
 * is read through it: a freed object of this cache, or abort. */
static void *held(pool_tcache_sh_t *tc, void *p)
{
    if (pool_unlikely(!pool_bin_holds(tc, p)))
        pool_bin_corrupt_(p);
    return p;
}

/* Take up to n objects off a list of tc's objects into out[]: the cut
 * needs a walk of n links either way, and the objects left stay warm for
 * reuse.  The room follows the head object by object, so that a reaper of a process killed in the
 * middle finds the length off by one at most, as after a push or a pop;
 * the objects already cut are the dead process's own to the reaper, or
 * its owner's, not a leak behind a length that counts them.  Returns how
 * many. */
static uint32_t bin_cut(pool_tcache_sh_t *tc, pool_list_t l, void **out, uint32_t n)
{
    uint32_t k = 0;
    for (void *p = *l.head; p != NULL && k < n; p = *l.head) {
        POOL_CRASH_POINT("tcache.cut");
        out[k++] = held(tc, p);
        *l.head = *(void **)p;
        ++*l.room;
        /* Keeps the compiler from gathering the decrements into one. */
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
    }
    return k;
}

/* Give objs[0..n) back to the central cache, counted as one release. */
static void release(pool_arena_t *a, pool_tcache_sh_t *tc, unsigned cls, void *const *objs,
                    uint32_t n)
{
    if (pool_config_stats) {
        tc->stats[cls].releases++;
        tc->stats[cls].released += n;
    }
    pool_central_release_(a, cls, objs, n);
}

/* Give every object of a list of class cls back, a release at a time. */
static void release_chain(pool_arena_t *a, pool_tcache_sh_t *tc, unsigned cls, pool_list_t l)
{
    void *objs[POOL_RELEASE_MAX];
    for (uint32_t n; (n = bin_cut(tc, l, objs, POOL_RELEASE_MAX)) > 0;)
        release(a, tc, cls, objs, n);
}

/* Set bin cls's watermark to w and move its room with it, so that the
 * length a reader takes from the two (pool_list_len) stays the bin's.  The
 * store that shortens that length goes first: a reaper of a death between
 * the two reads a length shorter than the chain, which it walks to that
 * length and one more (what stays on the chain is still handed out and
 * tagged, and its owner scan frees it), never one past the chain's end. */
static void set_watermark(pool_tcache_sh_t *tc, unsigned cls, uint32_t w)
{
    int32_t by = (int32_t)w - (int32_t)tc->own[cls].watermark;
    if (by > 0) {
        tc->bins[cls].room += by;
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        tc->own[cls].watermark = (uint16_t)w;
    } else {
        tc->own[cls].watermark = (uint16_t)w;
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        tc->bins[cls].room += by;
    }
}

/* Close tc's inbox of class cls, before the cache gives its spans up, and
 * give what it holds back, a release at a time: a free that finds it
 * closed sends its object towards the span instead, and a free that read
 * it open fails its compare-and-swap.  The word follows the cut object by
 * object, as a bin's head does, so that a reaper finds the rest. */
static void inbox_close(pool_arena_t *a, pool_tcache_sh_t *tc, unsigned cls)
{
    uint64_t *box = &tc->own[cls].xinbox;
    uint64_t w = pool_atomic_or_acquire(box, POOL_INBOX_CLOSED) | POOL_INBOX_CLOSED;
    void *objs[POOL_RELEASE_MAX];
    while (pool_inbox_count(w) > 0) {
        uint32_t k = 0;
        for (; k < POOL_RELEASE_MAX && pool_inbox_count(w) > 0; k++) {
            POOL_CRASH_POINT("tcache.cut");
            void *p = held(tc, pool_inbox_first(tc->base, w));
            objs[k] = p;
            w = pool_inbox_word(tc->base, w, *(void **)p, pool_inbox_count(w) - 1);
            pool_atomic_store_release(box, w);
        }
        release(a, tc, cls, objs, k);
    }
}

/* An empty bin of class cls takes tc's inbox whole: the objects are still
 * handed out in their spans' bitmaps, so neither lock nor bitmap is
 * touched.  The bin is written before the inbox is emptied, so that a
 * reaper of a thread killed in between finds the chain in both and takes
 * it once (reap.c).  False when the inbox is empty. */
static bool inbox_take(pool_tcache_sh_t *tc, unsigned cls)
{
    uint64_t *box = &tc->own[cls].xinbox;
    uint64_t w = pool_atomic_load_acquire(box);
    do {
        uint32_t n = pool_inbox_count(w);
        if (n == 0)
            return false;
        tc->heads[cls] = pool_inbox_first(tc->base, w);
        tc->bins[cls].room = (int32_t)(tc->own[cls].watermark - n);
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        POOL_CRASH_POINT("tcache.inbox_take");
    } while (!pool_atomic_cas(box, &w, pool_inbox_word(tc->base, w, NULL, 0)));
    if (pool_config_stats)
        tc->stats[cls].misses++;
    return true;
}

/* Free p, object oi of span s, which another cache owns, onto that
 * cache's inbox: false, nothing done, when s has no owner, the inbox is
 * closed or holds as many objects as its bin may, or p carries another
 * tag than the owner's process's (it changed hands: pool_adopt).  The
 * object keeps its tag, so a reap of the owner's process takes it wherever
 * it is, and a reap of ours never does.  The owner and the inbox word are
 * read in that order, the owner again after the word: an owner that gives
 * its spans up closes its inbox first, and a new generation opens it, so
 * a push that succeeds went to the cache that owned s when the word was
 * read, and the inbox holds only objects of spans its cache owns. */
static bool inbox_push(pool_arena_t *a, pool_tcache_sh_t *tc, unsigned cls,
                       const pool_span_sh_t *s, uint32_t oi, void *p)
{
    uint16_t h = pool_atomic_load_relaxed(&s->holder);
    if (h == 0 || h > POOL_MAX_SLOTS)
        return false;
    pool_tcache_sh_t *o = &a->tcaches[h - 1];
    uint64_t *box = &o->own[cls].xinbox;
    uint64_t w = pool_atomic_load_acquire(box);
    if (pool_atomic_load_acquire(&s->holder) != h ||
        pool_atomic_load_relaxed(pool_owner_of(a, s, oi)) != pool_tag_byte(o->tag))
        return false;
    /* Marked as in the owner's cache: a second free of it. */
    if (*pool_obj_mark(p) == o)
        pool_fatal_("free(): double free of %p (class %u, in another thread's cache)", p, cls);
    void **link = p;
    uint32_t n;
    do {
        n = pool_inbox_count(w);
        if ((w & POOL_INBOX_CLOSED) || n >= o->own[cls].watermark)
            return false;
        link[1] = o;
        link[0] = pool_inbox_first(tc->base, w);
        POOL_CRASH_POINT("tcache.inbox_push");
    } while (!pool_atomic_cas(box, &w, pool_inbox_word(tc->base, w, p, n + 1)));
    return true;
}

/* After a flush gave up class cls's spans (held: one of them still had an
 * object handed out): a thread that has spent its light budget, and whose
 * spans of the class hold nothing handed out when a flush gives them up,
 * gets the budget back, once.  A prefork child spends it at its start (an
 * Apache child's start takes 78 blocks of 16 bytes and frees them), and
 * the few blocks its first requests keep for good (glibc's timezone state)
 * would otherwise take a page in each of their classes; these go to the
 * light class's pages, which the thread uses anyway.  Once only, so that a
 * thread that keeps what it takes in each quiet spell cannot pile up
 * light objects, each up to sixteen times its size: the budget bounds them
 * at twice the first. */
static void relight(pool_tcache_sh_t *tc, unsigned cls, bool held)
{
    uint8_t max = pool_classes_[cls].light_max;
    if (!held && max != 0 && tc->light[cls] == max)
        tc->light[cls] = POOL_LIGHT_AGAIN;
}

/* Give back tc's objects of class cls and its spans of the class. */
static void flush_class(pool_arena_t *a, pool_tcache_sh_t *tc, unsigned cls)
{
    release_chain(a, tc, cls, pool_tcache_list(tc, cls, false));
    set_watermark(tc, cls, pool_classes_[cls].watermark);
    tc->own[cls].batch = 1;
    tc->own[cls].churned = 0;
    release_chain(a, tc, cls, pool_tcache_list(tc, cls, true));
    inbox_close(a, tc, cls);
    relight(tc, cls, pool_central_disown_(a, cls, tc));
    inbox_reopen(tc, cls);
}

void pool_tcache_flush_(pool_arena_t *a, pool_tcache_sh_t *tc)
{
    for (unsigned cls = 1; cls < POOL_NCLASSES; cls++)
        flush_class(a, tc, cls);
}

void pool_thread_flush(void)
{
    pool_tcache_sh_t *tc = pool_tls_tcache_;
    if (tc == &pool_empty_tcache_)
        return;
    pool_guard_enter();
    pool_tcache_flush_(&pool_arena_, tc);
    pool_guard_leave();
}

void pool_thread_scavenge(void)
{
    pool_tcache_sh_t *tc = pool_tls_tcache_;
    if (tc == &pool_empty_tcache_)
        return;
    pool_guard_enter();
    for (unsigned cls = 1; cls < POOL_NCLASSES; cls++) {
        /* The batch halves at each scavenge, so that a light load after a
         * burst refills by small batches: at the burst's largest, every
         * refill fetches a burst's batch again and the bins keep that
         * much more than the load needs (32 workers under 10 requests a
         * second, 30 s after a burst each: 4.5 MiB in the bins against
         * 1.7).  Refills grow it back by one object each. */
        tc->own[cls].batch = tc->own[cls].batch > 1 ? tc->own[cls].batch / 2 : 1;
        /* Likewise the watermark a churn grew, and the churn is
         * forgotten: a refill after a quiet second grows nothing until
         * the bin releases again. */
        uint32_t base = pool_classes_[cls].watermark, half = tc->own[cls].watermark / 2;
        set_watermark(tc, cls, half > base ? half : base);
        tc->own[cls].churned = 0;
        if (tc->heads[cls] == NULL)
            inbox_take(tc, cls);
        uint32_t len = pool_bin_len(tc, cls);
        if (len == 0)
            continue;
        /* The first quarter stays: the most recently freed, warmest.
         * A burst's bins are then empty within three scavenges, so that
         * a server called every second is back to its settled size 5 s
         * after the burst; a load that needs more than a quarter refills
         * once a second. */
        uint32_t keep = len / 4;
        void **link = &tc->heads[cls];
        for (uint32_t i = 0; i < keep; i++)
            link = held(tc, *link);
        void *rest = *link;
        int32_t rest_room = 0;
        /* The length first: a death between the two leaves the bin's chain
         * longer than its length, which the reaper walks to the length
         * and one more, rather than a length past the chain's end. */
        tc->bins[cls].room = (int32_t)(tc->own[cls].watermark - keep);
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        *link = NULL;
        release_chain(&pool_arena_, tc, cls, (pool_list_t){ &rest, &rest_room, 0 });
    }
    for (unsigned cls = 1; cls < POOL_NCLASSES; cls++) {
        release_chain(&pool_arena_, tc, cls, pool_tcache_list(tc, cls, true));
        /* A burst left the cache's spans of the class where it found
         * room, high in the heap; the load after it would keep them, and
         * their pages of descriptors and tags, for good. */
        if (pool_central_move_down_(&pool_arena_, cls, tc))
            flush_class(&pool_arena_, tc, cls);
        pool_central_shed_high_(&pool_arena_, cls, tc->tag);
        pool_central_purge_(&pool_arena_, cls, tc);
    }
    /* An attached thread moves the quiet classes' empty spans: if it dies
     * on the way, its tag on them has the reaper finish the move. */
    for (unsigned cls = 1; cls < POOL_NCLASSES; cls++)
        pool_central_decay_(&pool_arena_, cls, tc->tag);
    pool_decay_(false);
    pool_guard_leave();
}

/* ------------------------------------------------------------------------ */
/* Debug checks                                                              */
/* ------------------------------------------------------------------------ */

#if POOL_CONFIG_DEBUG > 0
/* The object p points at, with its span, or abort naming p. */
static pool_span_sh_t *debug_object(void *p, uint32_t *oi, const char *what)
{
    pool_arena_t *a = &pool_arena_;
    pool_span_sh_t *s = pool_pagemap_span_(a, p);
    if (s == NULL || s->state != POOL_SPAN_SMALL)
        pool_fatal_("%s: %p is not an allocated object", what, p);
    uintptr_t off = (uintptr_t)p - (uintptr_t)pool_span_addr(a, s);
    if (off % s->objsize != 0 || off / s->objsize >= s->count)
        pool_fatal_("%s: %p is not the start of an object (class %u)", what, p, s->cls);
    *oi = (uint32_t)(off / s->objsize);
    return s;
}
#endif

void pool_debug_on_alloc_(void *p)
{
#if POOL_CONFIG_DEBUG > 0
    uint32_t oi;
    pool_span_sh_t *s = debug_object(p, &oi, "malloc");
    uint64_t bit = UINT64_C(1) << (oi % 64);
    if (pool_atomic_or(&s->xheld[oi / 64], bit) & bit)
        pool_fatal_("malloc: %p handed out while a caller still holds it", p);
#else
    (void)p;
#endif
}

void pool_debug_on_free_(void *p)
{
#if POOL_CONFIG_DEBUG > 0
    uint32_t oi;
    pool_span_sh_t *s = debug_object(p, &oi, "free");
    uint64_t bit = UINT64_C(1) << (oi % 64);
    if (!(pool_atomic_and(&s->xheld[oi / 64], ~bit) & bit))
        pool_fatal_("free: double free of %p (class %u)", p, s->cls);
#else
    (void)p;
#endif
}

/* ------------------------------------------------------------------------ */
/* Taking and giving back                                                    */
/* ------------------------------------------------------------------------ */

/* Before a refill links its objects, the first of them in each
 * fault-around window is read: their spans may have served another
 * process, whose pages this one has not mapped. */
static void map_objects(void *const *objs, uint32_t n)
{
    uintptr_t window = UINTPTR_MAX;
    for (uint32_t i = 0; i < n; i++)
        if ((uintptr_t)objs[i] / POOL_FAULT_AROUND != window) {
            window = (uintptr_t)objs[i] / POOL_FAULT_AROUND;
            pool_map_around(objs[i]);
        }
}

/* Refill an empty bin from the central cache.  Returns false when the arena
 * is exhausted. */
static bool refill(pool_arena_t *a, pool_tcache_sh_t *tc, unsigned cls)
{
    void *objs[POOL_FETCH_MAX];
    uint32_t got = pool_central_fetch_(a, cls, tc->own[cls].batch, tc, objs);
    if (pool_config_stats) {
        tc->stats[cls].misses++;
        tc->stats[cls].fetches++;
        tc->stats[cls].fetched += got;
    }
    if (got == 0)
        return false;
    /* The class lock is dropped: linking the objects touches their memory
     * (and faults in pages this process has not mapped) in no critical
     * section.  In address order, so the first handed out is the first
     * in memory.  The spans are this cache's own: its page map sends their
     * objects' frees to its bins (the page an object starts in is the one
     * a free looks up). */
    if (a->hdr->shared)
        map_objects(objs, got);
    uint8_t *pm = (uint8_t *)tc->pm_class;
    for (uint32_t i = got; i-- > 0;) {
        pm[((uintptr_t)objs[i] - tc->base) >> POOL_PM_SHIFT] = (uint8_t)cls;
        pool_bin_push(tc, cls, objs[i]);
    }
    /* By one, not twice: a bin that doubled its batch fetched up to twice
     * what a light load needs, and a fetch touches every object it links,
     * so the overshoot's pages stayed resident in each worker's spans
     * (8 poold workers under a trickle of /heavy: 12 KiB a worker more,
     * idle and settled).  A burst's refills still reach the class's
     * largest batch, 128 objects of the smallest classes, after 8,128. */
    uint32_t max = pool_classes_[cls].max_batch;
    tc->own[cls].batch = (uint8_t)(tc->own[cls].batch + 1u < max ? tc->own[cls].batch + 1u : max);
    /* The bin released objects and has run dry since: what it gave the
     * central cache came back, two trips under the class lock that a
     * longer bin saves, so it grows by a batch up to the class's most
     * (POOL_BIN_GROWTH). */
    if (tc->own[cls].churned) {
        const pool_class_t *c = &pool_classes_[cls];
        uint32_t grown = tc->own[cls].watermark + c->max_batch;
        set_watermark(tc, cls, grown < c->watermark_max ? grown : c->watermark_max);
        tc->own[cls].churned = 0;
    }
    return true;
}

void *pool_tcache_alloc_(pool_arena_t *a, pool_tcache_sh_t *tc, unsigned cls)
{
    if (tc->heads[cls] == NULL && !inbox_take(tc, cls)) {
        /* A class this thread has used little borrows from its light class
         * rather than take a span (a page) of its own; its lender lends
         * nothing, so this recurses once at most. */
        const pool_class_t *k = &pool_classes_[cls];
        if ((tc->light[cls] & ~POOL_LIGHT_AGAIN) < k->light_max) {
            tc->light[cls]++;
            return pool_tcache_alloc_(a, tc, k->light_class);
        }
        if (!refill(a, tc, cls))
            return NULL;
    }
    return pool_bin_pop(tc, cls);
}

/* Abort when p is on the chain of tc's objects from first, len long. */
static void not_listed(pool_tcache_sh_t *tc, void *first, uint32_t len, unsigned cls,
                       const void *p)
{
    uint32_t n = 0;
    for (void *q = first; q != NULL && n <= len; q = *(void **)q, n++)
        if (held(tc, q) == p)
            pool_fatal_("free(): double free of %p (class %u, in the thread cache)", p, cls);
}

/* Release builds: what free's fast path left unchecked or found suspect
 * (pool_free_fast), checked in full before p, object oi of span s, joins
 * bin (of tc): p is an object of class cls, handed out (its span's bit
 * says so; no lock is needed to see that a caller's own object is), and
 * not already in the bin or the inbox (a walk only when p carries this
 * cache's mark).
 * Aborts naming p.  Debug builds check the same in pool_debug_on_free_. */
static void check_free(pool_tcache_sh_t *tc, pool_list_t l, unsigned cls,
                       const pool_span_sh_t *s, uint32_t oi, void *p)
{
    if (s == NULL || s->cls != cls)
        pool_fatal_("free(): invalid pointer %p (not the start of a block)", p);
    if (!(s->bitmap[oi / 64] & (UINT64_C(1) << (oi % 64))))
        pool_fatal_("free(): double free of %p (class %u)", p, cls);
    if (*pool_obj_mark(p) != tc)
        return;
    uint64_t w = pool_atomic_load_acquire(&tc->own[cls].xinbox);
    not_listed(tc, *l.head, pool_list_len(l), cls, p);
    not_listed(tc, pool_inbox_first(tc->base, w), pool_inbox_count(w), cls, p);
}

/* The rest of pool_tcache_free_, for p checked, object oi of span s (one
 * tc owns when mine): out of line, so that the way to an inbox needs
 * neither its frame (a batch of pointers) nor its registers. */
static POOL_NOINLINE void keep_free(pool_arena_t *a, pool_tcache_sh_t *tc, unsigned cls,
                                    const pool_span_sh_t *s, uint32_t oi, bool mine, void *p)
{
    /* The class lock may set errno, which free must keep. */
    int saved = errno;
    pool_list_t l = pool_tcache_list(tc, cls, !mine);
    if (!mine && !pool_owner_take(a, s, oi, tc->tag)) {
        /* Its tag changed under us (a pool_adopt, a detach): straight
         * back under the class lock. */
        pool_central_release_(a, cls, &p, 1);
    } else if (!mine) {
        /* Another thread's span: its owner alone takes from it, so p waits
         * here to go back in a batch, this process's now. */
        pool_list_push(tc, l, p);
        if (pool_list_len(l) >= pool_classes_[cls].max_batch)
            release_chain(a, tc, cls, l);
    } else if (pool_classes_[cls].watermark == 0) {
        /* A class no cache keeps (POOL_CACHE_MAX_SIZE): back at once. */
        release(a, tc, cls, &p, 1);
    } else {
        /* A span this cache owns whose page its map did not show yet: one
         * it took over with objects of an owner that left. */
        ((uint8_t *)tc->pm_class)[((uintptr_t)p - tc->base) >> POOL_PM_SHIFT] = (uint8_t)cls;
        if (*l.room <= 0) {
            tc->own[cls].churned = 1;
            void *objs[POOL_BATCH_MAX];
            /* The n most recently freed go back; the rest stay warm. */
            uint32_t n = bin_cut(tc, l, objs, pool_classes_[cls].max_batch);
            if (n > 0) {
                if (pool_config_stats)
                    tc->stats[cls].overflows++;
                release(a, tc, cls, objs, n);
            }
        }
        pool_list_push(tc, l, p);
    }
    errno = saved;
}

bool pool_tcache_free_(pool_arena_t *a, pool_tcache_sh_t *tc, unsigned cls, void *p)
{
    uint32_t oi = 0;
    pool_span_sh_t *s = pool_object_span_(a, p, &oi);
    bool mine = s != NULL && s->holder == tc->slot + 1;
    pool_list_t l = pool_tcache_list(tc, cls, !mine);
    if (pool_config_debug > 0)
        pool_debug_on_free_(p);
    else
        check_free(tc, l, cls, s, oi, p);
    if (pool_config_stats)
        tc->stats[cls].frees++;
    if (!mine && s != NULL && inbox_push(a, tc, cls, s, oi, p))
        return true;
    keep_free(a, tc, cls, s, oi, mine, p);
    return false;
}

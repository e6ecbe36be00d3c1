/* SPDX-License-Identifier: BSD-2-Clause */
/* libshmpool — the central cache: one per size class, shared.
 *
 * A span of a class is owned by at most one thread cache (its slot, in
 * span->holder), and only that cache's fetches take objects from it, so no
 * two threads' or processes' live objects share a span.  A fetch takes from
 * the spans its cache owns, else takes over one of the class's list of
 * spans no one owns that have free objects (or a fresh span), the lowest
 * in the arena either way; the owner
 * gives a span up when its own release brings every object back, or when
 * it leaves (pool_central_disown_, or its reap).  The lists (the class's,
 * and each owner's of spans with and without free objects, pool_own_t)
 * are index-linked, behind the class lock.  The span bitmaps and free
 * counts are the truth: a fetch sets bits and threads the objects into a
 * list for the thread cache, a release clears them, whoever frees.  A span
 * whose objects are all free and that no one owns goes back to the page
 * heap after the class lock is dropped (the page-heap lock is never taken
 * under a class lock), except a few per class, kept to damp the thrash of
 * a class that hovers around a span boundary.
 *
 * Every metadata write under the class lock is journaled (POOL_JSET) so a
 * dead holder's operation can be undone; the rebuild after a failed
 * verification writes plainly (a NULL journal).  Between the two locks a span is
 * ARRIVING (from the page heap) or LEAVING (to it), owned by the tag of the
 * process moving it, so that a reap can finish the move if it dies there.
 * A fetched object's tag byte records the process it went to.
 *
 * Entry points: pool_central_fetch_(), pool_central_release_(),
 * pool_central_disown_().
 */
#include "pool-internal.h"

#include <string.h>

#include "prim/prim.h"

/* The lists a span of a class is on: the class's own (head) or one of an
 * owner's (pool_own_t), all linked through the spans' prev and next.  j is
 * the class's journal inside an operation, NULL in the rebuild.
 * REQUIRES: class lock (the static functions below). */
static void list_push(pool_arena_t *a, uint32_t *head, pool_journal_sh_t *j, uint32_t idx)
{
    pool_span_sh_t *s = &a->spans[idx];
    POOL_JSET(j, s->prev, POOL_NIL);
    POOL_JSET(j, s->next, *head);
    if (*head != POOL_NIL)
        POOL_JSET(j, a->spans[*head].prev, idx);
    POOL_JSET(j, *head, idx);
    POOL_JSET(j, s->listed, POOL_LISTED_YES);
}

static void list_remove(pool_arena_t *a, uint32_t *head, pool_journal_sh_t *j, uint32_t idx)
{
    pool_span_sh_t *s = &a->spans[idx];
    if (s->prev != POOL_NIL)
        POOL_JSET(j, a->spans[s->prev].next, s->next);
    else
        POOL_JSET(j, *head, s->next);
    if (s->next != POOL_NIL)
        POOL_JSET(j, a->spans[s->next].prev, s->prev);
    POOL_JSET(j, s->prev, POOL_NIL);
    POOL_JSET(j, s->next, POOL_NIL);
    POOL_JSET(j, s->listed, POOL_LISTED_NO);
}

void pool_central_init_(pool_arena_t *a)
{
    for (unsigned cls = 0; cls < POOL_NCLASSES; cls++) {
        pool_central_sh_t *c = &a->central[cls];
        c->head = POOL_NIL;
        c->nspans = c->nempty = c->nempty_min = 0;
        c->decay_start_ns = 0;
    }
}

void pool_central_own_init_(pool_tcache_sh_t *tc)
{
    for (unsigned cls = 0; cls < POOL_NCLASSES; cls++)
        tc->own[cls].spans = tc->own[cls].full = POOL_NIL;
}

/* The list span s belongs on: its owner's, for spans with free objects or
 * for full ones, when it has one; else the class's while it has free
 * objects, and none (NULL) when it is full.  REQUIRES: class lock. */
static uint32_t *home(pool_arena_t *a, unsigned cls, const pool_span_sh_t *s)
{
    if (s->holder == 0)
        return s->nfree > 0 ? &a->central[cls].head : NULL;
    pool_own_t *o = &a->tcaches[s->holder - 1].own[cls];
    return s->nfree > 0 ? &o->spans : &o->full;
}

/* Move span idx from list `from` (NULL: none) to its home.  REQUIRES:
 * class lock and an operation begun on j. */
static void relist(pool_arena_t *a, unsigned cls, pool_journal_sh_t *j, uint32_t idx,
                   uint32_t *from)
{
    uint32_t *to = home(a, cls, &a->spans[idx]);
    if (from == to)
        return;
    if (from != NULL)
        list_remove(a, from, j, idx);
    if (to != NULL)
        list_push(a, to, j, idx);
}

/* tc's own page map stops sending frees of objects in [addr, addr + len)
 * to its bins.  The map is the thread's, never the arena's: nothing to
 * journal, as it dies with the thread. */
static void pm_clear(pool_tcache_sh_t *tc, uintptr_t addr, size_t len)
{
    memset((uint8_t *)tc->pm_class + ((addr - tc->base) >> POOL_PM_SHIFT), 0,
           len >> POOL_PM_SHIFT);
}

/* The thread cache tc gives span s up. */
static void forget(const pool_arena_t *a, pool_tcache_sh_t *tc, const pool_span_sh_t *s)
{
    pm_clear(tc, (uintptr_t)pool_span_addr(a, s), (size_t)s->npages << POOL_PAGE_SHIFT);
}

/* Take n free objects from span idx into out[], tagging them, or fewer if
 * the span runs out, or a few more: the batch goes on while the next object
 * is free and starts in the cache line the last one taken ends in or, for a
 * batch of half a 4 KiB page or more, in the 4 KiB page the nth object ends
 * in, so that two thread caches share no line and at most a page's edge.
 * Lines first: the first small batches of two workers' bins
 * interleaved their objects in the same lines, and every later write to one
 * invalidated the other's line: /heavy under -P 2 ran at 4.6 or 10 ns a
 * pair depending on how the first fetches raced.  Then pages: two workers
 * warming up together took turns at the head span, 2 KiB of 16-byte objects
 * each, and each one's walks over its half page drew the other half, which
 * the other core was writing, in through the prefetcher (it streams within
 * a page): batch frees ran at 3.7 ns a pair under -P 2 against 1.9 with the
 * workers' pages apart.  The extension is at most a page's objects, 2n.
 * Each bitmap word is logged once, before the first of its objects is
 * taken, and the free count once per word.  At most POOL_BITMAP_WORDS + 8
 * journal entries.
 * REQUIRES: class lock and an operation begun on j. */
static uint32_t take_objects(pool_arena_t *a, pool_journal_sh_t *j, uint32_t idx, uint32_t n,
                             bool pages, uint8_t tag, void **out)
{
    pool_span_sh_t *s = &a->spans[idx];
    char *base = pool_span_addr(a, s);
    size_t size = s->objsize;
    uint32_t got = 0;
    uint32_t next = POOL_NIL; /* the object after the last one taken */
    size_t end_page = 0;      /* with pages: the page the nth object ends in */
    pool_journal_save_(j, &s->nfree, sizeof s->nfree);
    for (unsigned w = 0; w < POOL_BITMAP_WORDS && (got < n || next == w * 64); w++) {
        uint64_t avail = ~s->bitmap[w], taken = 0;
        uint32_t took = 0;
        uint8_t *tags = pool_owner_of(a, s, w * 64); /* object oi's at tags[oi % 64]: one row */
        while (avail != 0) {
            uint32_t oi = w * 64 + (unsigned)__builtin_ctzll(avail);
            size_t off = (size_t)oi * size;
            if (got + took >= n &&
                (oi != next || (pages ? off / POOL_STREAM_BYTES != end_page : off % 64 == 0)))
                break;
            if (took == 0)
                pool_journal_save_(j, &s->bitmap[w], sizeof s->bitmap[w]);
            taken |= avail & -avail;
            avail &= avail - 1;
            s->bitmap[w] |= taken;
            /* Once a bitmap word: a bit set, its tag and count not yet
             * (one a word, so that a random soak's deaths do not all land
             * in fetches, which take objects by the hundred). */
            if (took == 0)
                POOL_CRASH_POINT("central.fetch");
            tags[oi % 64] = tag;
            out[got + took] = base + off;
            took++;
            next = oi + 1;
            if (got + took == n)
                end_page = (off + size - 1) / POOL_STREAM_BYTES;
        }
        got += took;
        s->nfree = (uint16_t)(s->nfree - took);
    }
    /* The cache will write what it took: pages its scavenge gave back
     * that hold any of it are in memory again (lowest first, so the
     * objects past `next` are untouched). */
    if (s->returned != 0 && got > 0) {
        uint32_t top = pool_span_top_pages(s, next, pool_prim_os_page_size_());
        if (top < s->returned)
            POOL_JSET(j, s->returned, (uint8_t)top);
    }
    return got;
}

/* Span idx, on the class's list, is about to be taken from (and, for a
 * thread cache's fetch, taken over): one of the class's empty spans no
 * more if it was one.  REQUIRES: class lock and an operation begun on j. */
static void uncount(pool_arena_t *a, unsigned cls, pool_journal_sh_t *j, uint32_t idx)
{
    pool_central_sh_t *c = &a->central[cls];
    pool_span_sh_t *s = &a->spans[idx];
    if (s->nfree == s->count) {
        POOL_JSET(j, c->nempty, c->nempty - 1);
        if (c->nempty < c->nempty_min)
            POOL_JSET(j, c->nempty_min, c->nempty);
    }
}

/* The span of the list at head that a fetch takes from: the lowest in the
 * arena of its first POOL_LOW_SCAN, so that a cache's objects gather at
 * the bottom of the heap, where the page heap puts small spans, and the
 * spans a burst added above drain and go back.  The head alone is the
 * span a release relisted last: a worker that took spans in a burst kept
 * one of them per class for good, scattered over the pages the burst
 * used, each holding a page of descriptors and one of owner tags besides
 * its own.  POOL_NIL for an empty list.  REQUIRES: class lock. */
static uint32_t lowest(const pool_arena_t *a, uint32_t head)
{
    unsigned budget = POOL_LOW_SCAN;
    return pool_span_list_lowest(a, head, POOL_NIL, &budget);
}

void pool_central_add_span_locked_(pool_arena_t *a, unsigned cls, uint32_t idx)
{
    pool_central_sh_t *c = &a->central[cls];
    pool_journal_sh_t *j = pool_lock_journal_(a, POOL_LOCK_CENTRAL, cls);
    POOL_JSET(j, c->nspans, c->nspans + 1);
    POOL_CRASH_POINT("central.add_span");
    POOL_JSET(j, c->nempty, c->nempty + 1);
    POOL_JSET(j, a->spans[idx].holder, 0);
    list_push(a, &c->head, j, idx);
}

/* Span `fresh`, just taken from the page heap, onto the class's list as
 * an operation of its own.  REQUIRES: class lock. */
static void add_fresh(pool_arena_t *a, unsigned cls, pool_journal_sh_t *j, uint32_t fresh)
{
    pool_journal_begin_(j, POOL_OP_ADD_SPAN);
    pool_central_add_span_locked_(a, cls, fresh);
    pool_journal_commit_(j);
    if (pool_config_stats)
        a->cstats[cls].spans_in++;
}

uint32_t pool_central_fetch_(pool_arena_t *a, unsigned cls, uint32_t n, pool_tcache_sh_t *tc,
                             void **out)
{
    pool_central_sh_t *c = &a->central[cls];
    uint32_t none = POOL_NIL;
    uint32_t *own = tc != NULL ? &tc->own[cls].spans : &none;
    uint8_t tag = tc != NULL ? pool_tag_byte(tc->tag) : POOL_NO_TAG;
    bool pages = n * pool_classes_[cls].size >= POOL_STREAM_BYTES / 2;
    uint32_t got = 0;
    pool_assert(cls > 0 && cls < POOL_NCLASSES && n > 0 && n <= POOL_BATCH_MAX);
    pool_lock_(a, &c->lock, POOL_LOCK_CENTRAL, cls);
    pool_journal_sh_t *j = pool_lock_journal_(a, POOL_LOCK_CENTRAL, cls);
    pool_journal_begin_(j, POOL_OP_FETCH);
    while (got < n) {
        /* What was taken so far is tagged: if we die after a commit, a
         * reap gives it back. */
        pool_journal_step_(j);
        uint32_t idx = lowest(a, *own);
        if (idx == POOL_NIL)
            idx = lowest(a, c->head);
        if (idx == POOL_NIL) {
            /* Never hold a class lock while taking the page-heap lock. */
            pool_journal_commit_(j);
            pool_unlock_(a, &c->lock, POOL_LOCK_CENTRAL, cls);
            uint32_t fresh = pool_pageheap_alloc_(a, pool_classes_[cls].pages, 1, cls, tag);
            pool_lock_(a, &c->lock, POOL_LOCK_CENTRAL, cls);
            if (fresh != POOL_NIL)
                add_fresh(a, cls, j, fresh);
            pool_journal_begin_(j, POOL_OP_FETCH);
            if (fresh == POOL_NIL)
                break;
            continue;
        }
        if (a->spans[idx].holder == 0)
            uncount(a, cls, j, idx);
        if (tc != NULL && a->spans[idx].holder == 0) {
            POOL_JSET(j, a->spans[idx].holder, (uint16_t)(tc->slot + 1));
            POOL_CRASH_POINT("central.claim");
            relist(a, cls, j, idx, &c->head);
        }
        uint32_t *from = home(a, cls, &a->spans[idx]);
        got += take_objects(a, j, idx, n - got, pages, tag, out + got);
        relist(a, cls, j, idx, from);
    }
    if (pool_config_stats) {
        a->cstats[cls].fetches++;
        a->cstats[cls].fetched += got;
    }
    pool_journal_commit_(j);
    pool_unlock_(a, &c->lock, POOL_LOCK_CENTRAL, cls);
    return got;
}

pool_span_sh_t *pool_object_span_(pool_arena_t *a, const void *p, uint32_t *oi)
{
    uint32_t page = pool_pagemap_page_(a, p);
    if (page == POOL_NIL || page >= pool_atomic_load_acquire(&a->ph->carved))
        return NULL;
    uint32_t idx = a->pm_span[page];
    if (idx >= a->npages || idx > page)
        return NULL;
    pool_span_sh_t *s = &a->spans[idx];
    if (s->state != POOL_SPAN_SMALL || s->start != idx || page - idx >= s->npages ||
        s->objsize == 0)
        return NULL;
    uintptr_t off = (uintptr_t)p - (uintptr_t)pool_span_addr(a, s);
    if (off % s->objsize != 0 || off / s->objsize >= s->count)
        return NULL;
    *oi = (uint32_t)(off / s->objsize);
    return s;
}

/* Take span idx off list `from` (NULL: none) and the class, bound for the
 * page heap: LEAVING, moved by `tag`, pushed on *leaving (linked by next).
 * REQUIRES: class lock and an operation begun on j. */
static void leave(pool_arena_t *a, pool_central_sh_t *c, pool_journal_sh_t *j, uint32_t *from,
                  uint32_t idx, uint16_t tag, uint32_t *leaving)
{
    pool_span_sh_t *s = &a->spans[idx];
    if (from != NULL)
        list_remove(a, from, j, idx);
    POOL_JSET(j, c->nspans, c->nspans - 1);
    POOL_JSET(j, s->listed, POOL_LISTED_LEAVING);
    POOL_JSET(j, s->owner, tag);
    POOL_JSET(j, s->next, *leaving);
    *leaving = idx;
}

/* Span idx, taken off list `from` (NULL: none), where it belongs now: a
 * span no one owns that is wholly free stays with the class while it
 * keeps fewer empty spans than its budget; beyond that it is unlinked,
 * marked LEAVING for `tag` and pushed on *leaving.  The span must not have
 * counted as one of the class's empty spans before.  REQUIRES: class lock
 * and an operation begun on j. */
static void settle(pool_arena_t *a, unsigned cls, pool_journal_sh_t *j, uint32_t idx,
                   uint32_t *from, uint16_t tag, uint32_t *leaving)
{
    pool_central_sh_t *c = &a->central[cls];
    pool_span_sh_t *s = &a->spans[idx];
    if (s->holder == 0 && s->nfree == s->count) {
        if (c->nempty >= pool_classes_[cls].keep_empty) {
            leave(a, c, j, from, idx, tag, leaving);
            return;
        }
        POOL_JSET(j, c->nempty, c->nempty + 1);
    }
    relist(a, cls, j, idx, from);
}

/* Give back the objects of span s whose bits are set in bits[] (n of
 * them): one journal entry per bitmap word touched and one for the count,
 * however many objects.  A span whose objects all come back through its
 * owner's own release (tc) is given up; one owned by another cache stays
 * its owner's, wholly free or not.  Then it settles.  False (nothing
 * changed) when one of the objects is not handed out.  One step.
 * REQUIRES: class lock and an operation begun on j. */
static bool give_back(pool_arena_t *a, unsigned cls, pool_span_sh_t *s, const uint64_t *bits,
                      uint32_t n, pool_tcache_sh_t *tc, uint16_t tag, uint32_t *leaving)
{
    pool_journal_sh_t *j = pool_lock_journal_(a, POOL_LOCK_CENTRAL, cls);
    if (s->listed == POOL_LISTED_QUARANTINED)
        return true; /* its objects stay out of circulation */
    if (s->listed != POOL_LISTED_YES && s->listed != POOL_LISTED_NO)
        return false;
    for (unsigned w = 0; w < POOL_BITMAP_WORDS; w++)
        if (bits[w] & ~s->bitmap[w])
            return false;
    uint32_t idx = s->start;
    uint32_t *from = home(a, cls, s);
    for (unsigned w = 0; w < POOL_BITMAP_WORDS; w++)
        if (bits[w] != 0)
            POOL_JSET(j, s->bitmap[w], s->bitmap[w] & ~bits[w]);
    POOL_CRASH_POINT("central.release");
    POOL_JSET(j, s->nfree, s->nfree + n);
    if (s->nfree == s->count && tc != NULL && s->holder == tc->slot + 1) {
        POOL_JSET(j, s->holder, 0);
        forget(a, tc, s);
    }
    settle(a, cls, j, idx, from, tag, leaving);
    return true;
}

/* Up to `due` of the class's empty spans from page `from` up unlinked
 * for the page heap, a step each.  REQUIRES: class lock and an operation
 * begun on its journal. */
static void shed_empties(pool_arena_t *a, unsigned cls, uint32_t due, uint32_t from,
                         uint16_t tag, uint32_t *leaving)
{
    pool_central_sh_t *c = &a->central[cls];
    pool_journal_sh_t *j = pool_lock_journal_(a, POOL_LOCK_CENTRAL, cls);
    for (uint32_t i = c->head; i != POOL_NIL && due > 0;) {
        pool_span_sh_t *s = &a->spans[i];
        uint32_t next = s->next;
        if (s->nfree == s->count && i >= from) {
            pool_journal_step_(j);
            POOL_JSET(j, c->nempty, c->nempty - 1);
            leave(a, c, j, &c->head, i, tag, leaving);
            due--;
        }
        i = next;
    }
}

/* End the class's decay period once it has run its course: the empty
 * spans it kept through all of it, but one, go to the page heap (whose
 * own decay gives their pages to the OS), so a class that shrank does not
 * keep its budget forever.  The one is kept for a class in use, which
 * would otherwise take a span from the page heap at its next fetch; a
 * period no release ended for two has seen none for a second at least
 * (a release ends one over a second old), and the last one goes too.
 * `quiet`: no operation of the class's own ends the period
 * (pool_central_decay_), and the class counts as in use only if one of
 * its spans emptied during the period (its empty count rose above the
 * period's low), so that a class gone quiet sheds all of them at the end
 * of the first period they spent empty.
 * REQUIRES: class lock and an operation begun on its journal. */
static void decay_empties(pool_arena_t *a, unsigned cls, uint16_t tag, bool quiet,
                          uint32_t *leaving)
{
    pool_central_sh_t *c = &a->central[cls];
    pool_journal_sh_t *j = pool_lock_journal_(a, POOL_LOCK_CENTRAL, cls);
    /* The lock wrapper noted the time it took the mutex; a spin lock
     * does not. */
    uint64_t now = pool_config_spin ? pool_prim_now_coarse_ns_()
                                    : pool_atomic_load_relaxed(
                                          &pool_lock_watch_(a, POOL_LOCK_CENTRAL, cls)->xsince_ns);
    if (now - c->decay_start_ns < POOL_DECAY_NS)
        return;
    bool in_use = !quiet || c->nempty > c->nempty_min;
    uint32_t keep = in_use && now - c->decay_start_ns < 2 * POOL_DECAY_NS ? 1 : 0;
    shed_empties(a, cls, c->nempty_min > keep ? c->nempty_min - keep : 0, 0, tag, leaving);
    pool_journal_step_(j);
    POOL_JSET(j, c->decay_start_ns, now);
    POOL_JSET(j, c->nempty_min, c->nempty);
}

/* shed_empties as an operation `op` of its own, the period's low mark
 * kept at most the count.  REQUIRES: class lock. */
static void shed_op(pool_arena_t *a, unsigned cls, pool_op_t op, uint32_t due, uint32_t from,
                    uint16_t tag, uint32_t *leaving)
{
    pool_central_sh_t *c = &a->central[cls];
    pool_journal_sh_t *j = pool_lock_journal_(a, POOL_LOCK_CENTRAL, cls);
    pool_journal_begin_(j, op);
    shed_empties(a, cls, due, from, tag, leaving);
    pool_journal_step_(j);
    if (c->nempty_min > c->nempty)
        POOL_JSET(j, c->nempty_min, c->nempty);
    pool_journal_commit_(j);
}

void pool_central_trim_(pool_arena_t *a, unsigned cls, uint32_t keep, uint16_t tag,
                        uint32_t *leaving)
{
    pool_central_sh_t *c = &a->central[cls];
    if (c->nempty > keep)
        shed_op(a, cls, POOL_OP_REAP, c->nempty - keep, 0, tag, leaving);
}

/* Give the spans decay_empties or a release unlinked (linked by next) to
 * the page heap, the class lock dropped; `idle`: decay_empties', empty
 * through a whole period. */
static void send_leaving(pool_arena_t *a, unsigned cls, uint32_t leaving, bool idle)
{
    while (leaving != POOL_NIL) {
        uint32_t idx = leaving;
        leaving = a->spans[idx].next;
        if (pool_config_stats)
            pool_atomic_inc(&a->cstats[cls].spans_out);
        if (idle)
            pool_pageheap_free_idle_(a, idx);
        else
            pool_pageheap_free_(a, idx);
    }
}

bool pool_central_release_one_(pool_arena_t *a, unsigned cls, void *p, uint16_t tag,
                               uint32_t *leaving)
{
    uint32_t oi;
    pool_span_sh_t *s = pool_object_span_(a, p, &oi);
    if (s == NULL || s->cls != cls)
        return false;
    uint64_t bits[POOL_BITMAP_WORDS] = { 0 };
    bits[oi / 64] = UINT64_C(1) << (oi % 64);
    return give_back(a, cls, s, bits, 1, NULL, tag, leaving);
}

/* A release found p unacceptable: name the fault and abort. */
static void POOL_COLD bad_release(pool_arena_t *a, unsigned cls, void *p)
{
    uint32_t oi;
    pool_span_sh_t *s = pool_object_span_(a, p, &oi);
    if (s == NULL || s->cls != cls)
        pool_fatal_("free(): pointer %p is not an object of class %u", p, cls);
    pool_fatal_("free(): double free of %p (class %u)", p, cls);
}

/* The objects of one span gathered from a released list. */
typedef struct group_s {
    pool_span_sh_t *span;
    uint32_t n;
    uint64_t bits[POOL_BITMAP_WORDS];
} group_t;

/* Spans a release gathers at once.  A thread cache's list comes mostly in
 * runs of one span (objects leave and return in address order), so a few
 * open groups catch nearly all of them; when a list interleaves more spans
 * the groups are applied early, which costs journal entries, never
 * correctness. */
#define RELEASE_GROUPS 4

/* Apply groups g[0..ng) to their spans.  A group refused by give_back
 * names its first object that is not handed out.  REQUIRES: class lock
 * and an operation begun on its journal. */
static void flush_groups(pool_arena_t *a, unsigned cls, group_t *g, unsigned ng,
                         pool_tcache_sh_t *tc, uint16_t tag, uint32_t *leaving)
{
    pool_journal_sh_t *j = pool_lock_journal_(a, POOL_LOCK_CENTRAL, cls);
    for (unsigned k = 0; k < ng; k++) {
        /* Objects of the groups not yet applied are still handed out, and
         * tagged: a reap gives them back if we die after a commit. */
        pool_journal_step_(j);
        pool_span_sh_t *s = g[k].span;
        if (pool_unlikely(!give_back(a, cls, s, g[k].bits, g[k].n, tc, tag, leaving))) {
            for (unsigned w = 0; w < POOL_BITMAP_WORDS; w++) {
                uint64_t bad = g[k].bits[w] & ~s->bitmap[w];
                if (bad != 0) {
                    uint32_t oi = w * 64 + (unsigned)__builtin_ctzll(bad);
                    bad_release(a, cls, (char *)pool_span_addr(a, s) + (size_t)oi * s->objsize);
                }
            }
            pool_fatal_("free(): span at page %u of class %u is in transit", s->start, cls);
        }
    }
}

/* Open a group for span s in g[] (applying every open group first when
 * all are taken); returns its index. */
static unsigned open_group(pool_arena_t *a, unsigned cls, group_t *g, unsigned *ng,
                           pool_span_sh_t *s, pool_tcache_sh_t *tc, uint16_t tag,
                           uint32_t *leaving)
{
    for (unsigned k = 0; k < *ng; k++)
        if (g[k].span == s)
            return k;
    if (*ng == RELEASE_GROUPS) {
        flush_groups(a, cls, g, *ng, tc, tag, leaving);
        *ng = 0;
    }
    unsigned k = (*ng)++;
    g[k].span = s;
    g[k].n = 0;
    memset(g[k].bits, 0, sizeof g[k].bits);
    return k;
}

void pool_central_release_(pool_arena_t *a, unsigned cls, void *const *objs, uint32_t n)
{
    pool_central_sh_t *c = &a->central[cls];
    pool_tcache_sh_t *tc = pool_tls_tcache_ != &pool_empty_tcache_ ? pool_tls_tcache_ : NULL;
    uint16_t tag = pool_thread_tag();
    uint32_t leaving = POOL_NIL; /* spans for the page heap, linked by next */
    uint32_t idle = POOL_NIL;    /* those the decay sheds, empty a period */
    group_t g[RELEASE_GROUPS], *gp = g;
    unsigned ng = 0;
    pool_assert(n <= POOL_RELEASE_MAX);
    /* Before the lock: each object's span and index.  A handed-out
     * object's span cannot change under it, and a pointer that is not one
     * stops here (or, freed twice, at its bit under the lock).  Object
     * index by a multiply instead of a division: exact for offsets below
     * 2^21 (a span is at most 32 pages) as the error of the rounded
     * reciprocal, under size, times the offset stays below 2^40. */
    uint32_t span[POOL_RELEASE_MAX];
    uint16_t index[POOL_RELEASE_MAX];
    const uintptr_t size = pool_classes_[cls].size;
    const uint64_t magic = ((UINT64_C(1) << 40) + size - 1) / size;
    uintptr_t lo = 0, span_bytes = 0; /* the last span found: its objects' bytes */
    uint32_t at = POOL_NIL;
    for (uint32_t i = 0; i < n; i++) {
        void *p = objs[i];
        uintptr_t off = (uintptr_t)p - lo;
        uint32_t oi;
        if (pool_likely(off < span_bytes)) {
            /* Below count * size, so an exact multiple is an object. */
            oi = (uint32_t)((off * magic) >> 40);
            if (pool_unlikely(oi * size != off))
                bad_release(a, cls, p);
        } else {
            pool_span_sh_t *s = pool_object_span_(a, p, &oi);
            if (pool_unlikely(s == NULL || s->cls != cls || s->objsize != size))
                bad_release(a, cls, p);
            at = s->start;
            lo = (uintptr_t)pool_span_addr(a, s);
            span_bytes = (uintptr_t)s->count * size;
        }
        span[i] = at;
        index[i] = (uint16_t)oi;
    }
    pool_lock_(a, &c->lock, POOL_LOCK_CENTRAL, cls);
    pool_journal_sh_t *j = pool_lock_journal_(a, POOL_LOCK_CENTRAL, cls);
    pool_journal_begin_(j, POOL_OP_RELEASE);
    for (uint32_t i = 0; i < n; i++) {
        if (i == 0 || span[i] != span[i - 1])
            gp = &g[open_group(a, cls, g, &ng, &a->spans[span[i]], tc, tag, &leaving)];
        uint32_t oi = index[i];
        uint64_t bit = UINT64_C(1) << (oi % 64);
        if (pool_unlikely(gp->bits[oi / 64] & bit))
            bad_release(a, cls, objs[i]); /* twice in one release */
        gp->bits[oi / 64] |= bit;
        gp->n++;
    }
    flush_groups(a, cls, g, ng, tc, tag, &leaving);
    pool_journal_step_(j);
    decay_empties(a, cls, tag, false, &idle);
    if (pool_config_stats) {
        a->cstats[cls].releases++;
        a->cstats[cls].released += n;
    }
    pool_journal_commit_(j);
    pool_unlock_(a, &c->lock, POOL_LOCK_CENTRAL, cls);
    send_leaving(a, cls, leaving, false);
    send_leaving(a, cls, idle, true);
}

void pool_central_decay_(pool_arena_t *a, unsigned cls, uint16_t tag)
{
    pool_central_sh_t *c = &a->central[cls];
    /* Read without the lock: a class with no empty span, or whose
     * period has not run its length, costs nothing. */
    if (pool_atomic_load_relaxed(&c->nempty) == 0 ||
        pool_prim_now_coarse_ns_() - pool_atomic_load_relaxed(&c->decay_start_ns) <
            POOL_DECAY_NS)
        return;
    uint32_t leaving = POOL_NIL;
    if (!pool_lock_try_(a, &c->lock, POOL_LOCK_CENTRAL, cls))
        return;
    pool_journal_sh_t *j = pool_lock_journal_(a, POOL_LOCK_CENTRAL, cls);
    pool_journal_begin_(j, POOL_OP_RELEASE);
    decay_empties(a, cls, tag, true, &leaving);
    pool_journal_commit_(j);
    pool_unlock_(a, &c->lock, POOL_LOCK_CENTRAL, cls);
    send_leaving(a, cls, leaving, true);
}

/* Every span tc owns of class cls given up, its own objects in it left
 * live: each settles as one step.  A live owner (pool_central_disown_)
 * forgets them in its page map; a dead one's went with it.  Returns
 * whether one of them had an object handed out.  REQUIRES: class lock and
 * an operation begun on j. */
static bool disown_all(pool_arena_t *a, unsigned cls, pool_journal_sh_t *j, pool_tcache_sh_t *tc,
                       bool live, uint16_t tag, uint32_t *leaving)
{
    pool_own_t *own = &tc->own[cls];
    uint32_t *lists[2] = { &own->spans, &own->full };
    bool held = false;
    for (unsigned l = 0; l < 2; l++) {
        while (*lists[l] != POOL_NIL) {
            uint32_t idx = *lists[l];
            held |= a->spans[idx].nfree < a->spans[idx].count;
            pool_journal_step_(j);
            POOL_JSET(j, a->spans[idx].holder, 0);
            POOL_CRASH_POINT("central.disown");
            if (live)
                forget(a, tc, &a->spans[idx]);
            settle(a, cls, j, idx, lists[l], tag, leaving);
        }
    }
    return held;
}

bool pool_central_disown_(pool_arena_t *a, unsigned cls, pool_tcache_sh_t *tc)
{
    pool_central_sh_t *c = &a->central[cls];
    pool_own_t *own = &tc->own[cls];
    /* Read without the lock: only this thread adds to its lists. */
    if (pool_atomic_load_relaxed(&own->spans) == POOL_NIL &&
        pool_atomic_load_relaxed(&own->full) == POOL_NIL)
        return false;
    uint32_t leaving = POOL_NIL;
    pool_lock_(a, &c->lock, POOL_LOCK_CENTRAL, cls);
    pool_journal_sh_t *j = pool_lock_journal_(a, POOL_LOCK_CENTRAL, cls);
    pool_journal_begin_(j, POOL_OP_RELEASE);
    bool held = disown_all(a, cls, j, tc, true, tc->tag, &leaving);
    pool_journal_commit_(j);
    pool_unlock_(a, &c->lock, POOL_LOCK_CENTRAL, cls);
    send_leaving(a, cls, leaving, false);
    return held;
}

/* Whether a cache holds spans of the class with free objects, at most
 * POOL_LOW_SCAN, each with at most a quarter of its objects handed out
 * (or one), and no full one: *low gets the lowest.  REQUIRES: class
 * lock. */
static bool owns_light(const pool_arena_t *a, const pool_own_t *own, uint32_t *low)
{
    if (own->full != POOL_NIL || own->spans == POOL_NIL)
        return false;
    *low = POOL_NIL;
    unsigned budget = POOL_LOW_SCAN;
    for (uint32_t i = own->spans; i != POOL_NIL; i = a->spans[i].next) {
        const pool_span_sh_t *s = &a->spans[i];
        if (budget-- == 0)
            return false;
        if ((uint32_t)(s->count - s->nfree) > (s->count + 3u) / 4u)
            return false;
        if (i < *low)
            *low = i;
    }
    return true;
}

bool pool_central_move_down_(pool_arena_t *a, unsigned cls, pool_tcache_sh_t *tc)
{
    pool_central_sh_t *c = &a->central[cls];
    pool_own_t *own = &tc->own[cls];
    /* Read without the lock: only this thread adds to its lists. */
    if (pool_atomic_load_relaxed(&own->spans) == POOL_NIL)
        return false;
    if (!pool_lock_try_(a, &c->lock, POOL_LOCK_CENTRAL, cls))
        return false;
    uint32_t low, listed = lowest(a, c->head);
    bool light = owns_light(a, own, &low);
    pool_unlock_(a, &c->lock, POOL_LOCK_CENTRAL, cls);
    if (!light || low < POOL_MOVE_DOWN_PAGES)
        return false;
    uint32_t end = low - POOL_MOVE_DOWN_PAGES;
    if (listed != POOL_NIL && listed < end)
        return true;
    uint32_t fresh = pool_pageheap_alloc_below_(a, pool_classes_[cls].pages, cls,
                                                pool_tag_byte(tc->tag), end);
    if (fresh == POOL_NIL)
        return false;
    pool_lock_(a, &c->lock, POOL_LOCK_CENTRAL, cls);
    add_fresh(a, cls, pool_lock_journal_(a, POOL_LOCK_CENTRAL, cls), fresh);
    pool_unlock_(a, &c->lock, POOL_LOCK_CENTRAL, cls);
    return true;
}

void pool_central_shed_high_(pool_arena_t *a, unsigned cls, uint16_t tag)
{
    pool_central_sh_t *c = &a->central[cls];
    /* Read without the lock: a class with no empty span costs nothing. */
    if (pool_atomic_load_relaxed(&c->nempty) == 0)
        return;
    uint32_t empty = POOL_NIL, budget = POOL_LOW_SCAN;
    if (!pool_lock_try_(a, &c->lock, POOL_LOCK_CENTRAL, cls))
        return;
    for (uint32_t i = c->head; i != POOL_NIL && budget > 0; i = a->spans[i].next, budget--)
        if (a->spans[i].nfree == a->spans[i].count && i < empty)
            empty = i;
    pool_unlock_(a, &c->lock, POOL_LOCK_CENTRAL, cls);
    if (empty == POOL_NIL || empty < POOL_MOVE_DOWN_PAGES)
        return;
    uint32_t fit = pool_pageheap_lowest_fit_(a, pool_classes_[cls].pages);
    if (fit == POOL_NIL || (uint64_t)fit + POOL_MOVE_DOWN_PAGES > empty)
        return;
    uint32_t leaving = POOL_NIL;
    if (!pool_lock_try_(a, &c->lock, POOL_LOCK_CENTRAL, cls))
        return;
    shed_op(a, cls, POOL_OP_RELEASE, c->nempty, fit + POOL_MOVE_DOWN_PAGES, tag, &leaving);
    pool_unlock_(a, &c->lock, POOL_LOCK_CENTRAL, cls);
    send_leaving(a, cls, leaving, false);
}

/* A burst's fetches wrote objects up to the top of the spans its cache
 * owned, and the light load after it takes the lowest free objects of the
 * same spans, so the top OS pages stayed resident with nothing in them:
 * after a burst each of 8 poold workers held both OS pages of its 16 to
 * 112-byte and 2 and 4 KiB classes' spans where the trickle after it needs
 * one.  Under the class lock throughout: a fetch takes from these spans. */
void pool_central_purge_(pool_arena_t *a, unsigned cls, pool_tcache_sh_t *tc)
{
    pool_central_sh_t *c = &a->central[cls];
    pool_own_t *own = &tc->own[cls];
    /* Read without the lock: only this thread adds to its lists. */
    if (pool_atomic_load_relaxed(&own->spans) == POOL_NIL)
        return;
    if (!pool_lock_try_(a, &c->lock, POOL_LOCK_CENTRAL, cls))
        return;
    size_t page = pool_prim_os_page_size_();
    pool_journal_sh_t *j = NULL;
    unsigned budget = POOL_LOW_SCAN;
    for (uint32_t i = own->spans; i != POOL_NIL && budget-- > 0; i = a->spans[i].next) {
        pool_span_sh_t *s = &a->spans[i];
        uint32_t top = pool_span_top_pages(s, pool_span_handed_end(s), page);
        if (top <= s->returned)
            continue;
        if (j == NULL) {
            j = pool_lock_journal_(a, POOL_LOCK_CENTRAL, cls);
            pool_journal_begin_(j, POOL_OP_RELEASE);
        }
        size_t len = (size_t)(top - s->returned) * page;
        uintptr_t from = (uintptr_t)pool_span_addr(a, s) +
                         ((size_t)s->npages << POOL_PAGE_SHIFT) - (size_t)top * page;
        /* Frees into these pages take the slow path from now on: the
         * zeroed objects carry no mark to send a double free there. */
        pm_clear(tc, from, len);
        pool_prim_remove_((void *)from, len, a->hdr->shared);
        POOL_CRASH_POINT("central.purge");
        POOL_JSET(j, s->returned, (uint8_t)top);
    }
    if (j != NULL)
        pool_journal_commit_(j);
    pool_unlock_(a, &c->lock, POOL_LOCK_CENTRAL, cls);
}

void pool_central_disown_dead_(pool_arena_t *a, unsigned cls, pool_tcache_sh_t *tc,
                               uint16_t tag, uint32_t *leaving)
{
    /* A class the dead cache owned nothing of leaves its journal alone: a
     * reap that began every class's operation kept every journal's page
     * resident in an arena that only ever used a few classes. */
    if (tc->own[cls].spans == POOL_NIL && tc->own[cls].full == POOL_NIL)
        return;
    pool_journal_sh_t *j = pool_lock_journal_(a, POOL_LOCK_CENTRAL, cls);
    pool_journal_begin_(j, POOL_OP_REAP);
    disown_all(a, cls, j, tc, false, tag, leaving);
    pool_journal_commit_(j);
}

/* ------------------------------------------------------------------------ */
/* Verification and rebuild                                                  */
/* ------------------------------------------------------------------------ */

/* Span p if it starts a small span of class cls that the class owns (on
 * its list or full), else NULL.  The page heap may be changing other
 * descriptors meanwhile: `listed` is read before and after the rest, and
 * the page heap writes it first when a span becomes small and last when one
 * stops being small, so a span caught mid-change is skipped.  REQUIRES:
 * class lock. */
static pool_span_sh_t *class_span(pool_arena_t *a, uint32_t p, unsigned cls)
{
    pool_span_sh_t *s = &a->spans[p];
    uint8_t l = pool_atomic_load_acquire(&s->listed);
    if (l != POOL_LISTED_YES && l != POOL_LISTED_NO)
        return NULL;
    bool mine = pool_atomic_load_acquire(&s->state) == POOL_SPAN_SMALL &&
                pool_atomic_load_acquire(&s->cls) == cls && s->start == p;
    return mine && pool_atomic_load_acquire(&s->listed) == l ? s : NULL;
}

static uint32_t free_in_bitmap(const pool_span_sh_t *s)
{
    uint32_t held = 0;
    for (unsigned w = 0; w < POOL_BITMAP_WORDS; w++)
        held += (uint32_t)__builtin_popcountll(s->bitmap[w]);
    return POOL_MAX_OBJECTS - held;
}

/* The spans on list head, each of the class and at home there (holder
 * and free count as the list says), linked both ways; adds their number to
 * *listed and the wholly free ones to *empty.  False on a bad list.
 * REQUIRES: class lock. */
static bool verify_list(pool_arena_t *a, unsigned cls, uint32_t head, uint32_t *listed,
                        uint32_t *empty)
{
    uint32_t carved = pool_atomic_load_acquire(&a->ph->carved);
    uint32_t prev = POOL_NIL;
    for (uint32_t i = head; i != POOL_NIL; i = a->spans[i].next) {
        if (i >= carved || ++*listed > carved)
            return false;
        const pool_span_sh_t *s = &a->spans[i];
        if (s->state != POOL_SPAN_SMALL || s->cls != cls || s->listed != POOL_LISTED_YES ||
            s->prev != prev || s->nfree > s->count || s->holder > POOL_MAX_SLOTS ||
            home(a, cls, s) == NULL || *home(a, cls, s) != head)
            return false;
        if (s->nfree == s->count)
            ++*empty;
        prev = i;
    }
    return true;
}

bool pool_central_verify_(pool_arena_t *a, unsigned cls)
{
    pool_central_sh_t *c = &a->central[cls];
    uint32_t carved = pool_atomic_load_acquire(&a->ph->carved);
    uint32_t listed = 0, empty = 0, owned_empty = 0;
    if (!verify_list(a, cls, c->head, &listed, &empty) || empty != c->nempty)
        return false;
    for (unsigned i = 0, top = pool_slots_top(a); i < top; i++) {
        if (!pool_atomic_load_acquire(&a->slots[i].used))
            continue;
        const pool_own_t *o = &a->tcaches[i].own[cls];
        if (!verify_list(a, cls, o->spans, &listed, &owned_empty) ||
            !verify_list(a, cls, o->full, &listed, &owned_empty))
            return false;
    }
    uint32_t spans = 0, on_lists = 0;
    for (uint32_t p = 0; p < carved; p++) {
        const pool_span_sh_t *s = class_span(a, p, cls);
        if (s == NULL)
            continue;
        if (s->nfree != free_in_bitmap(s) ||
            (s->listed == POOL_LISTED_YES) != (s->nfree > 0 || s->holder != 0))
            return false;
        spans++;
        on_lists += s->listed == POOL_LISTED_YES;
    }
    return spans == c->nspans && on_lists == listed;
}

/* The span's geometry is the class's, and bits past its objects are set. */
static bool geometry_ok(const pool_span_sh_t *s, unsigned cls)
{
    const pool_class_t *k = &pool_classes_[cls];
    if (s->objsize != k->size || s->count != k->count || s->npages != k->pages)
        return false;
    for (uint32_t b = k->count; b < POOL_MAX_OBJECTS; b++)
        if (!(s->bitmap[b / 64] & (UINT64_C(1) << (b % 64))))
            return false;
    return true;
}

void pool_central_rebuild_(pool_arena_t *a, unsigned cls)
{
    pool_central_sh_t *c = &a->central[cls];
    c->head = POOL_NIL;
    c->nspans = c->nempty = 0;
    for (unsigned i = 0, top = pool_slots_top(a); i < top; i++)
        if (pool_atomic_load_acquire(&a->slots[i].used))
            a->tcaches[i].own[cls].spans = a->tcaches[i].own[cls].full = POOL_NIL;
    uint32_t carved = pool_atomic_load_acquire(&a->ph->carved);
    for (uint32_t p = 0; p < carved; p++) {
        pool_span_sh_t *s = class_span(a, p, cls);
        if (s == NULL)
            continue;
        POOL_CRASH_POINT("recover.rebuild");
        s->prev = s->next = POOL_NIL;
        if (!geometry_ok(s, cls)) {
            /* Its objects can no longer be told apart: never hand them
             * out again. */
            s->listed = POOL_LISTED_QUARANTINED;
            pool_atomic_add(&a->crash->xquarantined, (uint64_t)s->npages << POOL_PAGE_SHIFT);
            pool_error_(0, "class %u: span at page %u has a broken geometry; quarantined", cls, p);
            continue;
        }
        s->nfree = (uint16_t)free_in_bitmap(s);
        /* Pages given back at the top are a hint the bitmap cannot
         * vouch for now: say none, and the next scavenge gives them back
         * again (once more, harmlessly). */
        s->returned = 0;
        s->listed = POOL_LISTED_NO;
        /* Owners keep their spans: a live owner's page map sends their
         * objects to its bins. */
        if (s->holder > POOL_MAX_SLOTS)
            s->holder = 0;
        c->nspans++;
        uint32_t *to = home(a, cls, s);
        if (to != NULL)
            list_push(a, to, NULL, p);
        if (s->holder == 0 && s->nfree == s->count)
            c->nempty++;
    }
    c->nempty_min = c->nempty;
}

static const pool_lock_ops_t central_ops = {
    .what = "class",
    .truth = "the span bitmaps",
    .verify = pool_central_verify_,
    .rebuild = pool_central_rebuild_,
};

void pool_central_register_(void)
{
    pool_lock_register_(POOL_LOCK_CENTRAL, &central_ops);
}

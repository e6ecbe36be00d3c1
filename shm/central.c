/* libshmpool — the central cache: one per size class, shared.
 *
 * Each class keeps the spans that have free objects on an index-linked list
 * behind its own lock.  The span bitmaps and free counts are the truth: a
 * fetch sets bits and threads the objects into a list for the thread cache,
 * a release clears them.  A span whose objects are all free goes back to the
 * page heap after the class lock is dropped (the page-heap lock is never
 * taken under a class lock), except one per class, kept to damp the thrash
 * of a class that hovers around a span boundary.
 *
 * Entry points: pool_central_fetch_(), pool_central_release_().
 */
#include "pool-internal.h"

#include <string.h>

/* span->listed values used here. */
#define LISTED_NO 0
#define LISTED_YES 1
#define LISTED_LEAVING 2 /* off the list, on its way to the page heap */

/* REQUIRES: class lock (the static functions below). */
static void list_push(pool_arena_t *a, pool_central_sh_t *c, uint32_t idx)
{
    pool_span_sh_t *s = &a->spans[idx];
    s->prev = POOL_NIL;
    s->next = c->head;
    if (c->head != POOL_NIL)
        a->spans[c->head].prev = idx;
    c->head = idx;
    s->listed = LISTED_YES;
}

static void list_remove(pool_arena_t *a, pool_central_sh_t *c, uint32_t idx)
{
    pool_span_sh_t *s = &a->spans[idx];
    if (s->prev != POOL_NIL)
        a->spans[s->prev].next = s->next;
    else
        c->head = s->next;
    if (s->next != POOL_NIL)
        a->spans[s->next].prev = s->prev;
    s->prev = s->next = POOL_NIL;
    s->listed = LISTED_NO;
}

void pool_central_init_(pool_arena_t *a)
{
    for (unsigned cls = 0; cls < POOL_NCLASSES; cls++) {
        pool_central_sh_t *c = &a->central[cls];
        c->head = POOL_NIL;
        c->nspans = c->nempty = 0;
    }
}

/* Take up to n free objects from span idx onto the list (*h, *t).
 * REQUIRES: class lock. */
static uint32_t take_objects(pool_arena_t *a, pool_central_sh_t *c, uint32_t idx, uint32_t n,
                             void **h, void **t)
{
    pool_span_sh_t *s = &a->spans[idx];
    char *base = pool_span_addr(a, s);
    uint32_t got = 0;
    if (s->nfree == s->count)
        c->nempty--;
    for (unsigned w = 0; w < POOL_BITMAP_WORDS && got < n; w++) {
        uint64_t avail = ~s->bitmap[w];
        while (avail != 0 && got < n) {
            unsigned b = (unsigned)__builtin_ctzll(avail);
            avail &= avail - 1;
            POOL_CRASH_POINT("central.fetch");
            s->bitmap[w] |= UINT64_C(1) << b;
            s->nfree--;
            void *obj = base + (size_t)(w * 64 + b) * s->objsize;
            if (*h == NULL)
                *h = obj;
            else
                *(void **)*t = obj;
            *t = obj;
            got++;
        }
    }
    if (s->nfree == 0)
        list_remove(a, c, idx);
    return got;
}

uint32_t pool_central_fetch_(pool_arena_t *a, unsigned cls, uint32_t n, uint16_t owner,
                             void **head, void **tail)
{
    pool_central_sh_t *c = &a->central[cls];
    void *h = NULL, *t = NULL;
    uint32_t got = 0;
    pool_assert(cls > 0 && cls < POOL_NCLASSES && n > 0);
    pool_lock_(a, &c->lock, POOL_LOCK_CENTRAL, cls);
    while (got < n) {
        uint32_t idx = c->head;
        if (idx == POOL_NIL) {
            /* Never hold a class lock while taking the page-heap lock. */
            pool_unlock_(&c->lock, POOL_LOCK_CENTRAL);
            uint32_t fresh = pool_pageheap_alloc_(a, pool_classes_[cls].pages, 1, cls, owner);
            pool_lock_(a, &c->lock, POOL_LOCK_CENTRAL, cls);
            if (fresh == POOL_NIL)
                break;
            POOL_CRASH_POINT("central.add_span");
            c->nspans++;
            c->nempty++;
            list_push(a, c, fresh);
            if (pool_config_stats)
                a->cstats[cls].spans_in++;
            continue;
        }
        got += take_objects(a, c, idx, n - got, &h, &t);
    }
    if (t != NULL)
        *(void **)t = NULL;
    if (pool_config_stats) {
        a->cstats[cls].fetches++;
        a->cstats[cls].fetched += got;
    }
    pool_unlock_(&c->lock, POOL_LOCK_CENTRAL);
    *head = h;
    *tail = t;
    return got;
}

void pool_central_release_(pool_arena_t *a, unsigned cls, void *head, uint32_t n)
{
    pool_central_sh_t *c = &a->central[cls];
    uint32_t leaving = POOL_NIL; /* spans for the page heap, linked by next */
    pool_lock_(a, &c->lock, POOL_LOCK_CENTRAL, cls);
    for (void *p = head, *next; p != NULL; p = next) {
        next = *(void **)p;
        uint32_t idx = a->pm_span[((uintptr_t)p - a->data) >> POOL_PAGE_SHIFT];
        pool_span_sh_t *s = &a->spans[idx];
        if (pool_unlikely(s->state != POOL_SPAN_SMALL || s->cls != cls))
            pool_fatal_("free(): pointer %p is not an object of class %u", p, cls);
        uint32_t oi = pool_span_object_index(a, s, p);
        uint64_t bit = UINT64_C(1) << (oi % 64);
        if (pool_unlikely(!(s->bitmap[oi / 64] & bit)))
            pool_fatal_("free(): double free of %p (class %u)", p, cls);
        POOL_CRASH_POINT("central.release");
        s->bitmap[oi / 64] &= ~bit;
        if (s->nfree++ == 0)
            list_push(a, c, idx);
        if (s->nfree == s->count) {
            if (c->nempty == 0) {
                c->nempty = 1;
            } else {
                list_remove(a, c, idx);
                c->nspans--;
                s->listed = LISTED_LEAVING;
                s->next = leaving;
                leaving = idx;
            }
        }
    }
    if (pool_config_stats) {
        a->cstats[cls].releases++;
        a->cstats[cls].released += n;
    }
    pool_unlock_(&c->lock, POOL_LOCK_CENTRAL);
    while (leaving != POOL_NIL) {
        uint32_t idx = leaving;
        leaving = a->spans[idx].next;
        a->spans[idx].next = POOL_NIL;
        if (pool_config_stats)
            pool_atomic_inc(&a->cstats[cls].spans_out);
        pool_pageheap_free_(a, idx);
    }
}

void pool_central_repair_(pool_arena_t *a, unsigned cls)
{
    pool_central_sh_t *c = &a->central[cls];
    c->head = POOL_NIL;
    c->nspans = c->nempty = 0;
    uint32_t carved = pool_atomic_load_acquire(&a->ph->carved);
    for (uint32_t p = 0; p < carved;) {
        pool_span_sh_t *s = &a->spans[p];
        if (s->npages == 0 || s->start != p)
            break;
        if (s->state == POOL_SPAN_SMALL && s->cls == cls && s->listed != LISTED_LEAVING) {
            uint32_t held = 0;
            for (unsigned w = 0; w < POOL_BITMAP_WORDS; w++)
                held += (uint32_t)__builtin_popcountll(s->bitmap[w]);
            s->nfree = (uint16_t)(POOL_MAX_OBJECTS - held);
            c->nspans++;
            s->listed = LISTED_NO;
            s->prev = s->next = POOL_NIL;
            if (s->nfree > 0) {
                list_push(a, c, p);
                if (s->nfree == s->count)
                    c->nempty++;
            }
        }
        p += s->npages;
    }
}

/* SPDX-License-Identifier: BSD-2-Clause */
/* libshmpool — pool_check(): the heap checker.
 *
 * Walks every structure and stops at the first inconsistency: the header,
 * the spans tiling the carved pages and the page map behind them, the page
 * heap's free lists and counters, each class's span bitmaps, free counts
 * and list, and the bins of every taken slot.  It holds the page-heap lock
 * and then every class lock (pool_lock_all_, as reaps do; no other path
 * holds two pool locks, so it cannot deadlock).  A thread cache changes
 * under no lock: pool_check() walks every one, for a quiescent arena;
 * pool_check_live_(), for one in use, walks only the calling thread's and
 * counts the others it left out, and gives up rather than wait for a
 * stuck lock holder.  Always compiled: the tests call it in Release
 * builds too.
 *
 * A page of a shared arena that was never written reads as zeros, but a
 * read of it through the mapping makes the system allocate it: a check
 * (shmpool-stat's, poold's /stats) would grow the arena it looks at.  The
 * walks that read what may never have been written (the page map past
 * the carved pages and inside spans, the descriptors inside spans, the
 * journals of locks never taken), and want zeros there, ask mincore first
 * and pass over the pages with no memory behind them: those read as zeros
 * (or are swapped out, and go unchecked).
 */
#include "pool-internal.h"

#include <errno.h>
#include <string.h>

#include "prim/prim.h"

typedef enum chk_mode_e {
    CHK_QUIET,   /* every lock, every thread cache */
    CHK_LIVE,    /* the locks by a deadline, the caller's thread cache only */
    CHK_VIEW,    /* another process's arena read from outside: no lock, no link */
} chk_mode_t;

typedef struct chk_s {
    pool_arena_t *a;
    char *msg;
    size_t cap;
    bool failed;
    chk_mode_t mode;
    unsigned left_out;  /* CHK_LIVE: taken slots whose caches were not walked */
    /* Which OS pages of [res_lo, res_hi) have memory behind them. */
    uintptr_t res_lo, res_hi;
    unsigned char res[64];
} chk_t;

/* Whether any of [p, p+len), in the arena's metadata, may hold anything
 * but zeros without a read allocating it: whether an OS page of it has
 * memory behind it (or the system cannot say). */
static bool written(chk_t *c, const void *p, size_t len)
{
    uintptr_t ps = pool_prim_os_page_size_();
    uintptr_t end = (uintptr_t)p + len;
    for (uintptr_t pg = (uintptr_t)p & ~(ps - 1); pg < end; pg += ps) {
        if (pg < c->res_lo || pg >= c->res_hi) {
            uintptr_t hi = pg + sizeof c->res * ps;
            c->res_lo = pg;
            c->res_hi = hi < c->a->data ? hi : c->a->data;
            if (pool_prim_resident_((void *)pg, c->res_hi - pg, c->res) != 0)
                memset(c->res, 1, sizeof c->res);
        }
        if (c->res[(pg - c->res_lo) / ps] & 1)
            return true;
    }
    return false;
}

static bool fail(chk_t *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool fail(chk_t *c, const char *fmt, ...)
{
    if (c->failed)
        return false;
    c->failed = true;
    char line[256];
    va_list ap;
    va_start(ap, fmt);
    pool_vsnprintf_(line, sizeof line, fmt, ap);
    va_end(ap);
    if (c->cap > 0)
        pool_snprintf_(c->msg, c->cap, "%s", line);
    /* From outside, a failure may be a change caught half made: the
     * caller decides what to say. */
    if (c->mode != CHK_VIEW)
        pool_error_(0, "pool_check: %s", line);
    return false;
}

/* Per class totals gathered by the span walk. */
typedef struct class_tot_s {
    uint32_t spans;  /* small spans of the class, not on their way out */
    uint32_t listed; /* of those no thread cache owns, with free objects */
    uint32_t empty;  /* of the listed, wholly free */
    uint32_t owned;  /* spans a thread cache owns */
} class_tot_t;

static bool check_small(chk_t *c, const pool_span_sh_t *s, class_tot_t *tot)
{
    if (s->listed == POOL_LISTED_QUARANTINED)
        return true; /* a repair gave up on it: its memory is leaked on purpose */
    const pool_class_t *k = &pool_classes_[s->cls];
    if (s->cls == 0 || s->cls >= POOL_NCLASSES || s->objsize != k->size || s->count != k->count ||
        s->npages != k->pages)
        return fail(c, "span %u: class %u geometry (size %u, count %u, pages %u) is wrong",
                    s->start, s->cls, s->objsize, s->count, s->npages);
    uint32_t held = 0;
    for (unsigned w = 0; w < POOL_BITMAP_WORDS; w++) {
        held += (uint32_t)__builtin_popcountll(s->bitmap[w]);
        for (unsigned b = 0; b < 64; b++)
            if (w * 64 + b >= s->count && !(s->bitmap[w] & (UINT64_C(1) << b)))
                return fail(c, "span %u: bitmap bit %u past the last object is clear", s->start,
                            w * 64 + b);
#if POOL_CONFIG_DEBUG > 0
        if (s->xheld[w] & ~s->bitmap[w])
            return fail(c, "span %u: an object held by a caller is free in the bitmap", s->start);
#endif
    }
    if (s->nfree != POOL_MAX_OBJECTS - held)
        return fail(c, "span %u: free count %u but the bitmap has %u free objects", s->start,
                    s->nfree, POOL_MAX_OBJECTS - held);
    if (s->returned > pool_span_top_pages(s, pool_span_handed_end(s), pool_prim_os_page_size_()))
        return fail(c, "span %u: %u OS pages at its top given back, but objects there are handed out",
                    s->start, s->returned);
    if (s->listed == POOL_LISTED_LEAVING || s->listed == POOL_LISTED_ARRIVING) {
        /* Between the tiers, held by the process that moves it. */
        if (s->nfree != s->count)
            return fail(c, "span %u: in transit (listed=%u) with objects in use", s->start,
                        s->listed);
        return true;
    }
    if (s->listed != POOL_LISTED_YES && s->listed != POOL_LISTED_NO)
        return fail(c, "span %u: bad listed value %u", s->start, s->listed);
    tot[s->cls].spans++;
    if (s->holder > POOL_MAX_SLOTS)
        return fail(c, "span %u: owner slot %u out of range", s->start, s->holder - 1u);
    if (s->holder != 0) {
        if (s->listed != POOL_LISTED_YES)
            return fail(c, "span %u: owned by slot %u but not on its lists", s->start,
                        s->holder - 1u);
        tot[s->cls].owned++;
        return true;
    }
    if ((s->listed == 1) != (s->nfree > 0))
        return fail(c, "span %u: listed=%u with %u free objects", s->start, s->listed, s->nfree);
    if (s->nfree > 0)
        tot[s->cls].listed++;
    if (s->nfree == s->count)
        tot[s->cls].empty++;
    return true;
}

/* Spans tile [0, carved); the page map agrees with them. */
static bool check_spans(chk_t *c, class_tot_t *tot, uint64_t *free_spans)
{
    pool_arena_t *a = c->a;
    pool_pageheap_sh_t *ph = a->ph;
    uint64_t free_pages = 0, returned = 0, small = 0, big = 0;
    const pool_span_sh_t *prev_free = NULL;
    if (ph->carved > a->npages)
        return fail(c, "page heap: carved %u beyond %u pages", ph->carved, a->npages);
    pool_span_walk_t w = pool_span_walk(a);
    for (const pool_span_sh_t *s; (s = pool_span_next(a, &w)) != NULL;) {
        uint32_t p = s->start, last = p + s->npages - 1;
        for (uint32_t q = p + 1; q <= last; q++)
            if (written(c, &a->spans[q].state, sizeof a->spans[q].state) &&
                a->spans[q].state != POOL_SPAN_NONE)
                return fail(c, "page %u: inside span %u but has a live descriptor", q, p);
        switch (s->state) {
        case POOL_SPAN_FREE:
            if (prev_free != NULL && pool_span_mergeable(prev_free, s))
                return fail(c, "span %u: free next to a free span (not coalesced)", p);
            if (a->pm_span[p] != p || a->pm_span[last] != p)
                return fail(c, "span %u: page map ends of a free span do not point at it", p);
            for (uint32_t q = p; q <= last; q++)
                if (written(c, &a->pm_class[q], 1) && a->pm_class[q] != 0)
                    return fail(c, "page %u: free but page map class is %u", q, a->pm_class[q]);
            if (s->listed != 1)
                return fail(c, "span %u: free but not on a free list", p);
            free_pages += s->npages;
            if (s->returned)
                returned += s->npages;
            (*free_spans)++;
            break;
        case POOL_SPAN_SMALL:
        case POOL_SPAN_BIG:
            /* A big span's interior pages are looked up by nothing. */
            for (uint32_t q = p; q <= last; q++) {
                bool looked_up = s->state == POOL_SPAN_SMALL || q == p || q == last;
                if (looked_up && a->pm_span[q] != p)
                    return fail(c, "page %u: page map span %u, expected %u", q, a->pm_span[q], p);
                if ((s->cls != 0 || written(c, &a->pm_class[q], 1)) && a->pm_class[q] != s->cls)
                    return fail(c, "page %u: page map class %u, span class %u", q,
                                a->pm_class[q], s->cls);
            }
            if (s->state == POOL_SPAN_BIG) {
                big += s->npages;
                if (s->cls != 0)
                    return fail(c, "span %u: big span with class %u", p, s->cls);
            } else {
                small += s->npages;
                if (!check_small(c, s, tot))
                    return false;
            }
            break;
        default:
            return fail(c, "span %u: bad state %u", p, s->state);
        }
        prev_free = s->state == POOL_SPAN_FREE ? s : NULL;
    }
    if (w.next < w.carved)
        return fail(c, "page %u: descriptor (start %u, %u pages) does not start a span", w.next,
                    a->spans[w.next].start, a->spans[w.next].npages);
    /* The next carve takes these pages as they are, and a big span does
     * not write its class bytes. */
    for (uint32_t p = ph->carved; p < a->npages; p++)
        if (written(c, &a->pm_class[p], 1) && a->pm_class[p] != 0)
            return fail(c, "page %u: not carved yet but page map class is %u", p, a->pm_class[p]);
    if (free_pages != ph->free_pages || returned != ph->returned_pages ||
        small != ph->small_pages || big != ph->big_pages)
        return fail(c, "page heap counters (free %lu, returned %lu, small %lu, big %lu) differ "
                    "from the spans (%lu, %lu, %lu, %lu)",
                    (unsigned long)ph->free_pages, (unsigned long)ph->returned_pages,
                    (unsigned long)ph->small_pages, (unsigned long)ph->big_pages,
                    (unsigned long)free_pages, (unsigned long)returned, (unsigned long)small,
                    (unsigned long)big);
    return true;
}

static bool check_free_lists(chk_t *c, uint64_t free_spans)
{
    pool_arena_t *a = c->a;
    pool_pageheap_sh_t *ph = a->ph;
    uint64_t seen = 0;
    for (unsigned l = 0; l < POOL_FREE_LISTS; l++) {
        bool bit = (ph->nonempty[l / 64] >> (l % 64)) & 1;
        if (bit != (ph->heads[l] != POOL_NIL))
            return fail(c, "free list %u: non-empty bit %d disagrees with its head", l, bit);
        uint32_t prev = POOL_NIL;
        for (uint32_t i = ph->heads[l]; i != POOL_NIL; i = a->spans[i].next) {
            if (i >= ph->carved || ++seen > free_spans)
                return fail(c, "free list %u: bad link or cycle at %u", l, i);
            const pool_span_sh_t *s = &a->spans[i];
            unsigned want = s->npages < POOL_FREE_LISTS ? s->npages : 0;
            if (s->state != POOL_SPAN_FREE || want != l || s->prev != prev)
                return fail(c, "free list %u: span %u (state %u, %u pages, prev %u) misplaced", l,
                            i, s->state, s->npages, s->prev);
            prev = i;
        }
    }
    if (seen != free_spans)
        return fail(c, "free lists hold %lu spans, the walk found %lu free spans",
                    (unsigned long)seen, (unsigned long)free_spans);
    return true;
}

static bool check_central(chk_t *c, const class_tot_t *tot)
{
    pool_arena_t *a = c->a;
    for (unsigned cls = 1; cls < POOL_NCLASSES; cls++) {
        const pool_central_sh_t *ce = &a->central[cls];
        uint32_t n = 0, empty = 0, prev = POOL_NIL;
        for (uint32_t i = ce->head; i != POOL_NIL; i = a->spans[i].next) {
            if (i >= a->ph->carved || ++n > tot[cls].listed)
                return fail(c, "class %u: bad link or cycle at span %u", cls, i);
            const pool_span_sh_t *s = &a->spans[i];
            if (s->state != POOL_SPAN_SMALL || s->cls != cls || s->nfree == 0 || s->prev != prev)
                return fail(c, "class %u: span %u on the list is not a span of it with free "
                            "objects", cls, i);
            if (s->nfree == s->count)
                empty++;
            prev = i;
        }
        if (n != tot[cls].listed || ce->nspans != tot[cls].spans || ce->nempty != empty)
            return fail(c, "class %u: list has %u spans (%u empty), counts say %u spans, %u "
                        "empty; the walk found %u spans, %u with free objects", cls, n, empty,
                        ce->nspans, ce->nempty, tot[cls].spans, tot[cls].listed);
        uint32_t owned = 0;
        for (unsigned i = 0, top = pool_slots_top(a); i < top; i++) {
            if (!pool_atomic_load_acquire(&a->slots[i].used))
                continue;
            const pool_own_t *o = &a->tcaches[i].own[cls];
            for (unsigned full = 0; full < 2; full++) {
                prev = POOL_NIL;
                for (uint32_t k = full ? o->full : o->spans; k != POOL_NIL;
                     k = a->spans[k].next) {
                    if (k >= a->ph->carved || ++owned > tot[cls].owned)
                        return fail(c, "slot %u class %u: bad link or cycle at span %u", i, cls,
                                    k);
                    const pool_span_sh_t *s = &a->spans[k];
                    if (s->state != POOL_SPAN_SMALL || s->cls != cls || s->holder != i + 1 ||
                        (s->nfree == 0) != (full == 1) || s->prev != prev)
                        return fail(c, "slot %u class %u: span %u on its %s list is not one "
                                    "it owns with%s free objects", i, cls, k,
                                    full ? "full" : "", full ? "out" : "");
                    prev = k;
                }
            }
        }
        if (owned != tot[cls].owned)
            return fail(c, "class %u: owners' lists hold %u spans, the walk found %u owned", cls,
                        owned, tot[cls].owned);
    }
    return true;
}

static bool check_slots(chk_t *c)
{
    pool_arena_t *a = c->a;
    for (unsigned i = 0, top = pool_slots_top(a); i < top; i++) {
        const pool_slot_sh_t *slot = &a->slots[i];
        if (pool_atomic_load_acquire(&slot->xstate) == POOL_SLOT_FREE)
            continue;
        const pool_tcache_sh_t *tc = &a->tcaches[i];
        if (tc->heads[0] != NULL || tc->bins[0].room != 0)
            return fail(c, "slot %u: bin 0 is not empty", i);
        /* From outside, the bins' links are addresses in the other
         * process: not to be followed here.  In a live arena another
         * thread's bins change as they are read (an object popped and
         * written to by its caller, a length counted before its push). */
        bool walk = c->mode == CHK_QUIET || (c->mode == CHK_LIVE && tc == pool_tls_tcache_);
        if (!walk && c->mode == CHK_LIVE)
            c->left_out++;
        for (unsigned k = 3; walk && k < 3 * POOL_NCLASSES; k++) {
            /* The bin holds objects of spans the slot owns, the remote
             * list of spans it does not, and the inbox, while open, of
             * spans it owns: the frees of other threads push there, and
             * the objects below the word read stay as they are. */
            unsigned cls = k / 3;
            bool remote = k % 3 == 1;
            void *first;
            uint32_t n = 0, len;
            bool owned = k % 3 == 0;
            if (k % 3 == 2) {
                uint64_t w = pool_atomic_load_acquire(&tc->own[cls].xinbox);
                first = pool_inbox_first(a->data, w);
                len = pool_inbox_count(w);
                owned = !(w & POOL_INBOX_CLOSED);
            } else {
                pool_list_t l = pool_tcache_list(tc, cls, remote);
                first = *l.head;
                len = pool_list_len(l);
            }
            for (void *p = first; p != NULL; p = *(void **)p) {
                if (++n > len)
                    return fail(c, "slot %u class %u: list longer than its length %u", i, cls,
                                len);
                pool_span_sh_t *s = pool_pagemap_span_(a, p);
                if (s == NULL || s->state != POOL_SPAN_SMALL || s->cls != cls)
                    return fail(c, "slot %u class %u: cached %p is not an object of the class",
                                i, cls, p);
                uintptr_t off = (uintptr_t)p - (uintptr_t)pool_span_addr(a, s);
                uint32_t oi = (uint32_t)(off / s->objsize);
                if (off % s->objsize != 0 || oi >= s->count)
                    return fail(c, "slot %u class %u: cached %p is not an object boundary", i,
                                cls, p);
                /* A remote list may hold a block of a span the slot has
                 * taken over since it freed the block there: it goes back
                 * to its span all the same. */
                if (owned && s->holder != i + 1)
                    return fail(c, "slot %u class %u: %p is in its cache, its span is not the "
                                "slot's", i, cls, p);
                if (!(s->bitmap[oi / 64] & (UINT64_C(1) << (oi % 64))))
                    return fail(c, "slot %u class %u: cached %p is free in its span", i, cls, p);
#if POOL_CONFIG_DEBUG > 0
                if (s->xheld[oi / 64] & (UINT64_C(1) << (oi % 64)))
                    return fail(c, "slot %u class %u: cached %p is also held by a caller", i,
                                cls, p);
#endif
            }
            if (n != len)
                return fail(c, "slot %u class %u: %u objects listed, length says %u", i, cls, n,
                            len);
        }
    }
    return true;
}

/* Every journal is committed: the locks are all ours, so an operation left
 * open would be a recovery that did not happen. */
static bool check_journals(chk_t *c)
{
    for (unsigned i = 0; i < 1 + POOL_NCLASSES; i++) {
        const pool_journal_sh_t *j = &c->a->journals[i];
        if ((written(c, &j->op, sizeof j->op) && j->op != POOL_OP_NONE) ||
            (written(c, &j->n, sizeof j->n) && j->n != 0))
            return fail(c, "lock %u: operation %u left open with %u undo entries", i, j->op,
                        j->n);
    }
    /* A class lock's recorded journal says it is that lock's. */
    for (unsigned li = 1; li < 1 + POOL_NCLASSES; li++) {
        unsigned at = c->a->hdr->xjournal_at[li];
        if (at != 0 && (at > POOL_NCLASSES || c->a->journals[at].xowner != li))
            return fail(c, "class %u: its journal %u is not its own", li - 1, at);
    }
    return true;
}

/* The walk, under every lock unless CHK_VIEW.  Returns 0, -1, or EAGAIN
 * (CHK_LIVE: a live holder kept a lock past the deadline; nothing was
 * checked). */
static int check_of(chk_t *c)
{
    pool_arena_t *a = c->a;
    if (c->cap > 0)
        c->msg[0] = '\0';
    if (a->hdr->magic != POOL_MAGIC || a->hdr->version != pool_layout_version_()) {
        fail(c, "arena header: bad magic or layout version");
        return -1;
    }
    class_tot_t tot[POOL_NCLASSES];
    memset(tot, 0, sizeof tot);
    if (c->mode == CHK_QUIET) {
        pool_lock_all_(a);
    } else if (c->mode == CHK_LIVE && !pool_lock_all_timed_(a, POOL_WAIT_MS)) {
        pid_t holder = pool_lock_stalled(POOL_WAIT_MS);
        if (c->cap > 0 && holder != 0)
            pool_snprintf_(c->msg, c->cap, "not run: pid %d held a pool lock for over %u ms",
                           (int)holder, POOL_WAIT_MS);
        else if (c->cap > 0)
            pool_snprintf_(c->msg, c->cap, "not run: a pool lock was held for over %u ms",
                           POOL_WAIT_MS);
        return EAGAIN;
    }
    uint64_t free_spans = 0;
    bool ok = check_spans(c, tot, &free_spans) && check_free_lists(c, free_spans) &&
              check_central(c, tot) && check_slots(c) && check_journals(c);
    if (c->mode != CHK_VIEW)
        pool_unlock_all_(a);
    return ok ? 0 : -1;
}

/* An arena to check in this process: a forked child's copy was taken
 * while other processes went on: it is the child's private heap of
 * inherited objects, not an arena. */
static bool checkable(void)
{
    return pool_arena_.hdr != NULL && !pool_arena_copied_();
}

int pool_check(char *msg, size_t cap)
{
    chk_t c = { .a = &pool_arena_, .msg = msg, .cap = cap, .mode = CHK_QUIET };
    if (cap > 0)
        msg[0] = '\0';
    return checkable() ? check_of(&c) : 0;
}

int pool_check_live_(char *msg, size_t cap, unsigned *left_out)
{
    chk_t c = { .a = &pool_arena_, .msg = msg, .cap = cap, .mode = CHK_LIVE };
    if (cap > 0)
        msg[0] = '\0';
    int rc = checkable() ? check_of(&c) : 0;
    *left_out = c.left_out;
    return rc;
}

int pool_check_view_(pool_arena_t *a, char *msg, size_t cap)
{
    chk_t c = { .a = a, .msg = msg, .cap = cap, .mode = CHK_VIEW };
    return check_of(&c);
}

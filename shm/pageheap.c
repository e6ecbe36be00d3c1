/* SPDX-License-Identifier: BSD-2-Clause */
/* libshmpool — the page heap: spans of whole pages.
 *
 * Free spans sit on lists by exact length (1..127 pages; list 0 holds the
 * longer ones) and are taken best fit: the first non-empty list at or above
 * the request, or the shortest long span that fits.  When no free span fits,
 * pages are carved from the untouched top of the arena.  A long request of
 * a process ranks what it could take by the pages it would fault in
 * (plan()): a free span that process's page tables map beats fresh pages,
 * and fresh pages beat a span another process maps; from the top free
 * span it takes the top end.  A freed span coalesces with free neighbours
 * found through the page map.
 *
 * Release rule (MADV_REMOVE on a shared arena, MADV_DONTNEED on a private
 * one): by decay.  Each period of POOL_DECAY_NS the page heap notes the
 * fewest free pages that had not been given back; at the end of the period
 * that much, less a cushion, stayed free the whole time and goes back to the
 * OS, longest spans first.  The cushion is the most mapped free pages taken
 * again within the period or one of the POOL_DECAY_WINDOW before it: what a
 * workload took back within a second or two stays mapped, and a heap gone
 * quiet keeps nothing once that many periods have ended.  Memory that a
 * churn frees and takes again within a period stays mapped, so it is not
 * faulted straight back in: a freed span is never given back at once,
 * however large (large blocks freed and allocated in turn were given back at
 * every free over a bound and faulted back in 4 KiB at a time, and frag's
 * end of run under four processes went over it).  The decay is ended by the
 * page heap's own operations, and by pool_decay() for a heap gone quiet.  A
 * class's empty span that stayed empty through a period of its class counts
 * as free since the page heap's period began (pool_pageheap_free_idle_).  A
 * returned span that is reused is simply touched again (it reads as zeros).
 * Its metadata goes with it: the descriptors of its pages but the first and
 * the owner tags of all of them (return_metadata()).  Merging returned with
 * unreturned pages counts the result as unreturned unless it is returned
 * again, so the "returned" figure never overstates.
 *
 * Page-map invariant: every page of a small or big span maps to its span;
 * a free span guarantees it only for its first and last page, which is all
 * that coalescing reads.  Every write under the lock but the page map's is
 * journaled (a descriptor is saved whole before it changes); a recovery
 * undoes the dead holder's operation and rebuilds the free lists, the
 * counters and the page map from the descriptors, without journaling.
 * Entry points: pool_pageheap_alloc_/free_.
 */
#include "pool-internal.h"

#include <string.h>

#include "prim/prim.h"

static unsigned list_of(uint32_t npages)
{
    return npages < POOL_FREE_LISTS ? npages : 0;
}

static pool_journal_sh_t *ph_journal(pool_arena_t *a)
{
    return pool_lock_journal_(a, POOL_LOCK_PAGEHEAP, 0);
}

/* Free-list links.  j is the page heap's journal inside an operation, or
 * NULL in the rebuild, which writes plainly.  REQUIRES: page-heap lock. */
static void list_push(pool_arena_t *a, pool_journal_sh_t *j, uint32_t idx)
{
    pool_pageheap_sh_t *ph = a->ph;
    pool_span_sh_t *s = &a->spans[idx];
    unsigned l = list_of(s->npages);
    POOL_JSET(j, s->prev, POOL_NIL);
    POOL_JSET(j, s->next, ph->heads[l]);
    if (s->next != POOL_NIL)
        POOL_JSET(j, a->spans[s->next].prev, idx);
    POOL_JSET(j, ph->heads[l], idx);
    POOL_JSET(j, ph->nonempty[l / 64], ph->nonempty[l / 64] | UINT64_C(1) << (l % 64));
    POOL_JSET(j, s->listed, POOL_LISTED_YES);
}

static void list_remove(pool_arena_t *a, pool_journal_sh_t *j, uint32_t idx)
{
    pool_pageheap_sh_t *ph = a->ph;
    pool_span_sh_t *s = &a->spans[idx];
    unsigned l = list_of(s->npages);
    if (s->prev != POOL_NIL)
        POOL_JSET(j, a->spans[s->prev].next, s->next);
    else
        POOL_JSET(j, ph->heads[l], s->next);
    if (s->next != POOL_NIL)
        POOL_JSET(j, a->spans[s->next].prev, s->prev);
    if (ph->heads[l] == POOL_NIL)
        POOL_JSET(j, ph->nonempty[l / 64], ph->nonempty[l / 64] & ~(UINT64_C(1) << (l % 64)));
    POOL_JSET(j, s->prev, POOL_NIL);
    POOL_JSET(j, s->next, POOL_NIL);
    POOL_JSET(j, s->listed, POOL_LISTED_NO);
}

/* Make [start, start+n) a free, unlisted span descriptor.  The state turns
 * FREE before `listed` changes, so a class scanning without this lock
 * never takes a span caught here for one of its own.  A free span's owner
 * is the tag of the process whose page tables map its pages (a long span's
 * taker), or none: its next long taker is best that process, which faults
 * none of them in again.  REQUIRES: page-heap lock and an operation begun
 * (the static functions below, but for the rebuild). */
static void span_set_free(pool_arena_t *a, uint32_t start, uint32_t n, uint8_t returned,
                          uint16_t mapped_by)
{
    pool_span_sh_t *s = &a->spans[start];
    pool_journal_save_span_(ph_journal(a), s);
    s->state = POOL_SPAN_FREE;
    s->start = start;
    s->npages = n;
    s->prev = s->next = POOL_NIL;
    s->cls = 0;
    s->returned = returned;
    s->owner = mapped_by;
    s->count = s->nfree = 0;
    s->objsize = 0;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    s->listed = POOL_LISTED_NO;
    a->pm_span[start] = start;
    a->pm_span[start + n - 1] = start;
}

/* Pages from page start to the first page whose address is a multiple of
 * align pages (the data area itself is only page-aligned). */
static uint32_t lead_pages(const pool_arena_t *a, uint32_t start, uint32_t align)
{
    uintptr_t abs = (a->data >> POOL_PAGE_SHIFT) + start;
    return (uint32_t)((align - (abs & (align - 1))) & (align - 1));
}

static bool span_fits(const pool_arena_t *a, const pool_span_sh_t *s, uint32_t npages,
                      uint32_t align)
{
    uint32_t lead = lead_pages(a, s->start, align);
    return s->npages >= npages && s->npages - npages >= lead;
}

/* Whose page tables map a free span's pages, as seen by process `tag`:
 * its own (taking it faults nothing in), nobody's that is known (given
 * back, or pages of small spans: taking it faults what it touches, as
 * fresh pages would), or another process's, which it is still mapped in.
 * Only long spans (big spans of POOL_FREE_LISTS pages or more) record
 * their taker, and only long requests rank.  Free neighbours of two tags
 * stay apart (pool_span_mergeable), so a tag on a shorter big span, which
 * no request ranks, would only split free space: with such tags, frag's
 * arena at 4 processes grew run after run (222 MiB in ten runs where
 * glibc's heaps held 131). */
enum { MAPPED_OWN, MAPPED_NONE, MAPPED_OTHER, MAPPED_RANKS };

static unsigned mapped_rank(const pool_span_sh_t *s, uint16_t tag)
{
    if (s->returned || s->owner == POOL_NO_TAG)
        return MAPPED_NONE;
    return s->owner == tag ? MAPPED_OWN : MAPPED_OTHER;
}

/* A short request's free span: the lowest in the arena of the first
 * POOL_LOW_SCAN that hold npages, from the list of that length up and the
 * long spans' list last, split from its low end; POOL_NIL when none does.
 * Small spans so gather at the bottom of the heap, and the pages a burst
 * took above them come free in runs that coalesce and go back whole with
 * their descriptors and tags.  The shortest list's head instead (best
 * fit, the span freed last) put a burst's spans wherever its big blocks
 * had been, and those a worker kept after it held a page of descriptors
 * and one of tags each, between free spans whose first descriptors stayed
 * resident too. */
static uint32_t lowest_fit(const pool_arena_t *a, uint32_t npages)
{
    const pool_pageheap_sh_t *ph = a->ph;
    uint32_t best = POOL_NIL;
    unsigned budget = POOL_LOW_SCAN;
    for (unsigned l = npages; l <= POOL_FREE_LISTS && budget > 0; l++) {
        unsigned k = l % POOL_FREE_LISTS;
        if (k != 0 && (ph->nonempty[k / 64] >> (k % 64)) == 0) {
            l |= 63; /* the rest of the word is empty */
            continue;
        }
        best = pool_span_list_lowest(a, ph->heads[k], best, &budget);
    }
    return best;
}

/* The free span for the request, or POOL_NIL: a short one's lowest_fit,
 * else the best fit; *rank says whose pages it holds (MAPPED_OWN for a
 * request that does not rank).  Among
 * the long spans (list 0: big blocks of a megabyte and more) the best fit
 * of each rank is kept and the best rank wins: two processes taking and
 * freeing large blocks in turn would otherwise fault each other's pages
 * in, 4 KiB at a time, at every block. */
static uint32_t find_free(pool_arena_t *a, uint32_t npages, uint32_t align, uint16_t owner,
                          unsigned *rank)
{
    pool_pageheap_sh_t *ph = a->ph;
    *rank = MAPPED_OWN;
    if (npages < POOL_FREE_LISTS && align == 1)
        return lowest_fit(a, npages);
    unsigned first = npages < POOL_FREE_LISTS ? npages : POOL_FREE_LISTS;
    for (unsigned l = first; l < POOL_FREE_LISTS; l++) {
        if (!(ph->nonempty[l / 64] & (UINT64_C(1) << (l % 64)))) {
            /* Skip the rest of an empty word at once. */
            if ((ph->nonempty[l / 64] >> (l % 64)) == 0)
                l |= 63;
            continue;
        }
        for (uint32_t i = ph->heads[l]; i != POOL_NIL; i = a->spans[i].next)
            if (span_fits(a, &a->spans[i], npages, align))
                return i;
    }
    uint32_t best[MAPPED_RANKS] = { POOL_NIL, POOL_NIL, POOL_NIL };
    for (uint32_t i = ph->heads[0]; i != POOL_NIL; i = a->spans[i].next) {
        const pool_span_sh_t *s = &a->spans[i];
        if (!span_fits(a, s, npages, align))
            continue;
        unsigned r = owner == POOL_NO_TAG ? MAPPED_OWN : mapped_rank(s, owner);
        if (best[r] == POOL_NIL || s->npages < a->spans[best[r]].npages)
            best[r] = i;
    }
    for (unsigned r = 0; r < MAPPED_RANKS; r++)
        if (best[r] != POOL_NIL) {
            *rank = r;
            return best[r];
        }
    return POOL_NIL;
}

/* The free span that ends where the carved pages do, if one does and
 * starts on a multiple of align pages: a long request that fits nowhere
 * can take it and carve only what it lacks. */
static uint32_t top_free(const pool_arena_t *a, uint32_t align)
{
    uint32_t carved = a->ph->carved;
    if (carved == 0)
        return POOL_NIL;
    uint32_t i = a->pm_span[carved - 1];
    const pool_span_sh_t *s = &a->spans[i];
    if (i >= carved || s->state != POOL_SPAN_FREE || s->start != i ||
        s->start + s->npages != carved || lead_pages(a, i, align) != 0)
        return POOL_NIL;
    return i;
}

/* Free pages not given back to the OS. */
static uint64_t unreturned(const pool_pageheap_sh_t *ph)
{
    return ph->free_pages - ph->returned_pages;
}

/* The decay period's low mark of unreturned free pages, its high mark so
 * far, and its reuse: the most of them taken again since a high, pages
 * that a workload freed and took back while they were still mapped.
 * REQUIRES: lock and an operation begun. */
static void note_unreturned(pool_arena_t *a)
{
    pool_pageheap_sh_t *ph = a->ph;
    pool_journal_sh_t *j = ph_journal(a);
    uint64_t now = unreturned(ph);
    if (now < ph->decay_min_pages)
        POOL_JSET(j, ph->decay_min_pages, now);
    if (now > ph->decay_high_pages)
        POOL_JSET(j, ph->decay_high_pages, now);
    else if (ph->decay_high_pages - now > ph->decay_reuse_pages)
        POOL_JSET(j, ph->decay_reuse_pages, ph->decay_high_pages - now);
}

/* Start a decay period at now with what is free and unreturned.
 * REQUIRES: lock and an operation begun. */
static void period_start(pool_arena_t *a, uint64_t now)
{
    pool_pageheap_sh_t *ph = a->ph;
    pool_journal_sh_t *j = ph_journal(a);
    POOL_JSET(j, ph->decay_start_ns, now);
    POOL_JSET(j, ph->decay_min_pages, unreturned(ph));
    POOL_JSET(j, ph->decay_high_pages, unreturned(ph));
    POOL_JSET(j, ph->decay_reuse_pages, 0);
}

uint64_t pool_pageheap_cushion_(const pool_pageheap_sh_t *ph)
{
    uint64_t keep = ph->decay_reuse_pages;
    for (unsigned age = 0; age < POOL_DECAY_WINDOW; age++) {
        /* Whole, not halved with age: a burst that comes back within the
         * window finds all of its pages mapped, and one that does not goes
         * back at once when it leaves the window, not half at a time over
         * as many periods again, which every worker would pay for at rest. */
        uint64_t reuse = ph->decay_reuse[(ph->decay_periods - 1 - age) % POOL_DECAY_WINDOW];
        if (reuse > keep)
            keep = reuse;
    }
    return keep;
}

/* Metadata of a returned span: what goes back with its pages.
 *
 * A free span whose pages went back is read through its first descriptor
 * alone: the walks, the free lists, coalescing (the page map of its first
 * and last page, then the neighbour's first descriptor), a class's scans
 * (pool_object_span_, class_span: the state of any descriptor), the
 * repair's tiling, pool_check (inside spans, only descriptors that have
 * memory behind them) and a fork's copy all read a descriptor of a page
 * inside a span as state POOL_SPAN_NONE and nothing more, and none of
 * them reads the owner tags of a page that is not in a small span.  A
 * fresh arena's descriptor reads as zeros, whose state is POOL_SPAN_NONE
 * (and whose start, 0, is no page inside a span), and its tags as
 * POOL_NO_TAG: so the descriptors of a returned span's pages but its
 * first, and the tags of all its pages, can go back with it, and read as
 * a fresh arena's do when a later span takes the pages again (which
 * writes both as it starts there or hands objects out).  Nothing writes
 * them meanwhile but the page heap, under its lock: a small span's
 * descriptor and tags change under its class's lock, and no free page is
 * in a small span.  Pages past the carved ones have never been written
 * (an undone carve left zeros) and are read by no one.
 *
 * Giving them back is idempotent, and happens before the span is marked
 * returned: a holder that dies in between leaves a free span, unreturned,
 * whose metadata reads as zeros, which it may (above); one that dies after
 * leaves the mark to be undone, the same.  Only whole OS pages go back, so
 * an OS page shared with a neighbour goes only when what the neighbour
 * keeps there is dead too.  Of the tags, every span but a small one keeps
 * none, and a small one only its own tier's row (pool_owner_tier): the
 * rows it has in other tiers' regions are never read or written.  An OS
 * page of tier 0's rows covers 64 data pages, so a few small spans that
 * outlive a burst would otherwise keep the tags of every tier that the
 * burst's spans wrote around them. */

/* Whether span s keeps nothing alive in the rows being given back: in
 * tier `tier`'s region of tags, only a small span of that tier keeps
 * any; in the descriptors' rows (`tier` < 0) every span keeps its first,
 * read while it is free too.  A span's state and count change only under
 * the page-heap lock, which the caller holds. */
static bool keeps_none(const pool_span_sh_t *s, int tier)
{
    return tier >= 0 && (s->state != POOL_SPAN_SMALL || pool_owner_tier(s->count) != (unsigned)tier);
}

/* Whether pages [from, to) all lie in spans that keep nothing alive in the
 * rows, walked down from `to` a span at a time through the page map (the
 * last page of every span maps to it). */
static bool dead_below(const pool_arena_t *a, uint32_t from, uint32_t to, int tier)
{
    while (to > from) {
        uint32_t i = a->pm_span[to - 1];
        if (i >= to)
            return false;
        const pool_span_sh_t *l = &a->spans[i];
        if (l->start != i || i + l->npages != to || !keeps_none(l, tier))
            return false;
        to = i;
    }
    return true;
}

/* Whether pages [from, to) all lie past the carved pages or in spans that
 * keep nothing alive in the rows. */
static bool dead_above(const pool_arena_t *a, uint32_t from, uint32_t to, int tier)
{
    uint32_t carved = a->ph->carved;
    while (from < to && from < carved) {
        const pool_span_sh_t *r = &a->spans[from];
        if (r->start != from || r->npages == 0 || r->npages > carved - from ||
            !keeps_none(r, tier))
            return false;
        from += r->npages;
    }
    return true;
}

/* Give back the OS pages of a per-page metadata array (`each` bytes per
 * data page, at `base`) that hold only the entries of pages [first, end),
 * which the span being returned has made dead, or entries of neighbouring
 * pages that are as dead: `tier` < 0 for the descriptors, whose first
 * entry of a span stays read; else the tags of that tier, of which a
 * returned span keeps none.  The OS page at each end also holds the
 * entries of pages [below, first) and [end, above), a few: the walks take
 * a step per span there at most. */
static void return_rows(pool_arena_t *a, uintptr_t base, size_t each, uint32_t first, uint32_t end,
                        int tier)
{
    uintptr_t page = pool_prim_os_page_size_();
    uintptr_t lo = base + (uintptr_t)first * each, hi = base + (uintptr_t)end * each;
    uintptr_t lo_pg = lo & ~(page - 1), hi_pg = (hi + page - 1) & ~(page - 1);
    uint32_t below = lo_pg < base ? 0 : (uint32_t)((lo_pg - base) / each);
    uint64_t above = (hi_pg - base + each - 1) / each;
    if (lo_pg < lo && (lo_pg < base || !dead_below(a, below, first, tier)))
        lo_pg += page;
    if (hi_pg > hi && (above > a->npages || !dead_above(a, end, (uint32_t)above, tier)))
        hi_pg -= page;
    if (lo_pg < hi_pg)
        pool_prim_remove_((void *)lo_pg, hi_pg - lo_pg, a->hdr->shared);
}

/* The descriptors of free span s's pages from `first` on but its first,
 * and the owner tags of all of them (see above). */
static void return_metadata(pool_arena_t *a, const pool_span_sh_t *s, uint32_t first)
{
    uint32_t end = s->start + s->npages;
    return_rows(a, (uintptr_t)a->spans, sizeof *a->spans, first > s->start ? first : first + 1,
                end, -1);
    for (unsigned t = 0; t < POOL_OWNER_TIERS; t++)
        return_rows(a, (uintptr_t)pool_owner_rows(a, t), pool_owner_row_size(t), first, end,
                    (int)t);
}

/* Give a free span's pages back to the OS.  Returning pages twice (after
 * an undo) is harmless: they are free. */
static void return_span(pool_arena_t *a, pool_span_sh_t *s)
{
    pool_pageheap_sh_t *ph = a->ph;
    pool_journal_sh_t *j = ph_journal(a);
    pool_prim_remove_(pool_span_addr(a, s), (size_t)s->npages << POOL_PAGE_SHIFT,
                      a->hdr->shared);
    return_metadata(a, s, s->start);
    POOL_CRASH_POINT("pageheap.release");
    POOL_JSET(j, s->returned, 1);
    POOL_JSET(j, ph->returned_pages, ph->returned_pages + s->npages);
    ph->madvises++;
}

/* Absorb free span `right`, which follows free span `left`, into it;
 * both are off their lists. */
static void merge(pool_arena_t *a, pool_span_sh_t *left, pool_span_sh_t *right)
{
    pool_pageheap_sh_t *ph = a->ph;
    pool_journal_sh_t *j = ph_journal(a);
    uint64_t returned = (left->returned ? left->npages : 0) + (right->returned ? right->npages : 0);
    if (returned > 0)
        POOL_JSET(j, ph->returned_pages, ph->returned_pages - returned);
    pool_journal_save_span_(j, left);
    pool_journal_save_span_(j, right);
    if (left->owner == POOL_NO_TAG)
        left->owner = right->owner;
    left->npages += right->npages;
    left->returned = 0;
    right->state = POOL_SPAN_NONE;
    right->npages = 0;
    a->pm_span[left->start + left->npages - 1] = left->start;
}

/* Coalesce free span idx with its free neighbours and list it; the span
 * it ends in. */
static uint32_t free_locked(pool_arena_t *a, uint32_t idx)
{
    pool_pageheap_sh_t *ph = a->ph;
    pool_journal_sh_t *j = ph_journal(a);
    pool_span_sh_t *s = &a->spans[idx];
    if (s->start > 0) {
        uint32_t li = a->pm_span[s->start - 1];
        pool_span_sh_t *l = &a->spans[li];
        if (li < s->start && l->state == POOL_SPAN_FREE && l->start + l->npages == s->start &&
            pool_span_mergeable(l, s)) {
            list_remove(a, j, li);
            POOL_CRASH_POINT("pageheap.merge_left");
            merge(a, l, s);
            idx = li;
            s = l;
        }
    }
    uint32_t ri = s->start + s->npages;
    if (ri < ph->carved && a->spans[ri].state == POOL_SPAN_FREE &&
        pool_span_mergeable(s, &a->spans[ri])) {
        list_remove(a, j, ri);
        POOL_CRASH_POINT("pageheap.merge_right");
        merge(a, s, &a->spans[ri]);
    }
    list_push(a, j, idx);
    note_unreturned(a);
    return idx;
}

/* Give back the top `pages` pages of free span s, and their metadata, with
 * s left unreturned: it counts as free in memory until a later period
 * gives it back whole (again, harmlessly, for these pages), and a take of
 * it writes them again as it would returned ones.  The top, because a
 * short request takes a free span from its low end. */
static void return_top(pool_arena_t *a, const pool_span_sh_t *s, uint32_t pages)
{
    uint32_t first = s->start + s->npages - pages;
    pool_prim_remove_((void *)(a->data + ((uintptr_t)first << POOL_PAGE_SHIFT)),
                      (size_t)pages << POOL_PAGE_SHIFT, a->hdr->shared);
    return_metadata(a, s, first);
    a->ph->madvises++;
}

/* Give back up to `pages` pages of free spans not yet returned, longest
 * first: list 0 (the longest), then 127 down to 1.  A span may pass the
 * amount by up to `slack` pages, so that one long span is not kept
 * forever for being a little longer than what is due.  One step a span.
 * What is still due when only longer spans are left comes off the top of
 * the first of them (return_top): after a burst, the pages its last frees
 * join to those free through the whole period make one span longer than
 * the period's due, which would stay in memory another period or two.
 * REQUIRES: page-heap lock and an operation begun on its journal. */
static void return_longest(pool_arena_t *a, uint64_t pages, uint64_t slack)
{
    pool_pageheap_sh_t *ph = a->ph;
    pool_journal_sh_t *j = ph_journal(a);
    /* Reserved huge pages are the arena's for its life: they cannot be
     * given back 8 KiB at a time, and nothing else could use them. */
    if (a->hdr->backing == POOL_BACKING_HUGETLB)
        return;
    const pool_span_sh_t *longer = NULL;
    for (unsigned k = 0; k < POOL_FREE_LISTS && pages > 0; k++) {
        unsigned l = k == 0 ? 0 : POOL_FREE_LISTS - k;
        if (!(ph->nonempty[l / 64] & (UINT64_C(1) << (l % 64))))
            continue;
        for (uint32_t i = ph->heads[l]; i != POOL_NIL && pages > 0; i = a->spans[i].next) {
            pool_span_sh_t *s = &a->spans[i];
            if (!s->returned && s->npages > pages + slack && longer == NULL)
                longer = s;
            if (s->returned || s->npages > pages + slack)
                continue;
            pool_journal_step_(j);
            return_span(a, s);
            ph->decayed_pages += s->npages;
            pages = s->npages < pages ? pages - s->npages : 0;
        }
    }
    if (pages > 0 && longer != NULL)
        return_top(a, longer, (uint32_t)pages);
}

/* End the decay period once it has run its course: give back what stayed
 * free through all of it, less the cushion, and start the next.  The time
 * is the one the lock wrapper took when the lock was acquired.  REQUIRES:
 * page-heap lock, no operation in progress. */
static void decay(pool_arena_t *a)
{
    pool_pageheap_sh_t *ph = a->ph;
    pool_journal_sh_t *j = ph_journal(a);
    uint64_t now = pool_atomic_load_relaxed(&pool_lock_watch_(a, POOL_LOCK_PAGEHEAP, 0)->xsince_ns);
    if (now - ph->decay_start_ns < POOL_DECAY_NS)
        return;
    pool_journal_begin_(j, POOL_OP_PH_RETURN);
    uint64_t keep = pool_pageheap_cushion_(ph);
    uint64_t due = ph->decay_min_pages > keep ? ph->decay_min_pages - keep : 0;
    if (due > 0)
        return_longest(a, due, keep);
    pool_journal_step_(j);
    POOL_JSET(j, ph->decay_reuse[ph->decay_periods % POOL_DECAY_WINDOW], ph->decay_reuse_pages);
    POOL_JSET(j, ph->decay_periods, ph->decay_periods + 1);
    period_start(a, now);
    pool_journal_commit_(j);
}

bool pool_pageheap_decay_(pool_arena_t *a, const struct timespec *deadline)
{
    pool_pageheap_sh_t *ph = a->ph;
    if (!(deadline != NULL ? pool_lock_timed_(a, &ph->lock, POOL_LOCK_PAGEHEAP, 0, deadline)
                           : pool_lock_try_(a, &ph->lock, POOL_LOCK_PAGEHEAP, 0)))
        return false;
    decay(a);
    pool_unlock_(a, &ph->lock, POOL_LOCK_PAGEHEAP, 0);
    return true;
}

void pool_pageheap_trim_(pool_arena_t *a)
{
    pool_pageheap_sh_t *ph = a->ph;
    pool_journal_sh_t *j = ph_journal(a);
    pool_lock_(a, &ph->lock, POOL_LOCK_PAGEHEAP, 0);
    pool_journal_begin_(j, POOL_OP_PH_RETURN);
    return_longest(a, ph->free_pages, 0);
    pool_journal_step_(j);
    period_start(a, ph->decay_start_ns);
    pool_journal_commit_(j);
    pool_unlock_(a, &ph->lock, POOL_LOCK_PAGEHEAP, 0);
}

void pool_pageheap_init_(pool_arena_t *a)
{
    pool_pageheap_sh_t *ph = a->ph;
    ph->npages = a->npages;
    ph->carved = 0;
    for (unsigned l = 0; l < POOL_FREE_LISTS; l++)
        ph->heads[l] = POOL_NIL;
}

/* Fill in a span being handed out.  A small span is ARRIVING, held by
 * `owner` until its class lists it; `listed` is written before the state
 * turns SMALL (see span_set_free).  The bitmap is not journaled: a span
 * that goes back to free never has it read.  REQUIRES: page-heap lock and
 * an operation begun. */
static void span_set_used(pool_arena_t *a, uint32_t idx, uint32_t npages, unsigned cls,
                          uint16_t owner)
{
    pool_journal_sh_t *j = ph_journal(a);
    pool_span_sh_t *s = &a->spans[idx];
    pool_journal_save_span_(j, s);
    s->listed = cls != 0 ? POOL_LISTED_ARRIVING : POOL_LISTED_NO;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    s->start = idx;
    s->npages = npages;
    s->prev = s->next = POOL_NIL;
    s->returned = 0;
    s->owner = owner <= POOL_MAX_TAG ? owner : POOL_NO_TAG;
    s->cls = (uint8_t)cls;
    if (cls != 0) {
        const pool_class_t *c = &pool_classes_[cls];
        s->objsize = c->size;
        s->count = s->nfree = c->count;
        memset(s->bitmap, 0, sizeof s->bitmap);
        /* Bits past the last object read as "handed out" so a full word
         * means nothing is free in it. */
        for (uint32_t b = c->count; b < POOL_MAX_OBJECTS; b++)
            s->bitmap[b / 64] |= UINT64_C(1) << (b % 64);
#if POOL_CONFIG_DEBUG > 0
        memset(s->xheld, 0, sizeof s->xheld);
#endif
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        s->state = POOL_SPAN_SMALL;
        POOL_JSET(j, a->ph->small_pages, a->ph->small_pages + npages);
        pool_pagemap_set_span_(a, idx, npages, idx);
        /* Last: from here a free() of these pages may find the class. */
        pool_pagemap_set_class_(a, idx, npages, (uint8_t)cls);
    } else {
        s->objsize = 0;
        s->count = s->nfree = 0;
        s->state = POOL_SPAN_BIG;
        POOL_JSET(j, a->ph->big_pages, a->ph->big_pages + npages);
        /* A big span is found by its first page (free, realloc) and its
         * last (the neighbour's coalescing); its class bytes are already
         * 0, as every free page's are.  A 120 MiB block wrote 30,000 page
         * map entries on each allocation and each free. */
        pool_pagemap_set_ends_(a, idx, npages, idx);
    }
}

/* How a request is met: a free span taken, the top free span taken and
 * the pages it lacks carved after it, or fresh pages carved. */
enum { PLAN_TAKE, PLAN_EXTEND, PLAN_CARVE };

/* A long request of process `tag` takes what faults the fewest pages into
 * its page tables, and of those what carves the fewest: its own span; the
 * top span, if its own, extended; a span nobody maps; the same top span;
 * fresh pages, while the arena has them; another process's span (which
 * that process would otherwise take again without a fault); the top span,
 * whoever's.  Others (tag POOL_NO_TAG: short requests, and processes
 * without a tag) take what find_free finds, else carve.  *idx: the span
 * taken or extended. */
static int plan(pool_arena_t *a, uint32_t npages, uint32_t align, uint16_t tag, uint32_t *idx)
{
    static const unsigned take_cost[MAPPED_RANKS] = { 0, 2, 5 };
    static const unsigned extend_cost[MAPPED_RANKS] = { 1, 3, 6 };
    const unsigned carve_cost = 4, none = 7;
    unsigned rank;
    uint32_t fit = find_free(a, npages, align, tag, &rank);
    *idx = fit;
    if (tag == POOL_NO_TAG || (fit != POOL_NIL && rank == MAPPED_OWN))
        return fit != POOL_NIL ? PLAN_TAKE : PLAN_CARVE;
    uint32_t carved = a->ph->carved;
    uint32_t top = top_free(a, align);
    unsigned take = fit != POOL_NIL ? take_cost[rank] : none;
    unsigned extend = top != POOL_NIL && (uint64_t)top + npages <= a->npages
                          ? extend_cost[mapped_rank(&a->spans[top], tag)]
                          : none;
    uint64_t start = (uint64_t)carved + lead_pages(a, carved, align);
    unsigned carve = start + npages <= a->npages ? carve_cost : none;
    if (extend < take && extend < carve) {
        *idx = top;
        return PLAN_EXTEND;
    }
    return take < carve ? PLAN_TAKE : PLAN_CARVE;
}

/* Pages in memory that another process may have used and this one is about
 * to write, read a fault-around window at a time (pool_map_around),
 * outside the lock: one read fault maps what a window holds in memory.  A
 * long span this process freed is not read again: those reads, cache and
 * TLB misses over pages it maps, cost large's blocks of 5-120 MiB 12-20 %
 * of their time.  (A tag passes to the next process to attach, and a free
 * span keeps its taker's: such a newcomer writes a span its tag once took
 * with a fault a page.)  Pages a merge joined to given-back ones count as
 * kept, so a window may read one of those, which a block's writer would
 * most often touch anyway. */
static void map_kept(const pool_arena_t *a, uint32_t idx, uint32_t npages)
{
    uintptr_t p = a->data + ((uintptr_t)idx << POOL_PAGE_SHIFT);
    uintptr_t end = p + ((uintptr_t)npages << POOL_PAGE_SHIFT);
    pool_map_around((const void *)p);
    for (p = (p | (POOL_FAULT_AROUND - 1)) + 1; p < end; p += POOL_FAULT_AROUND)
        pool_map_around((const void *)p);
}

/* pool_pageheap_alloc_, and pool_pageheap_alloc_below_ when `end` is not
 * POOL_NIL: then only a free span's pages that end by page `end` will do. */
static uint32_t alloc_span(pool_arena_t *a, uint32_t npages, uint32_t align_pages, unsigned cls,
                           uint16_t owner, uint32_t end)
{
    pool_pageheap_sh_t *ph = a->ph;
    pool_journal_sh_t *j = ph_journal(a);
    if (npages == 0 || npages > a->npages)
        return POOL_NIL;
    if (align_pages == 0)
        align_pages = 1;
    pool_lock_(a, &ph->lock, POOL_LOCK_PAGEHEAP, 0);
    pool_journal_begin_(j, POOL_OP_PH_ALLOC);
    uint16_t tag = owner <= POOL_MAX_TAG ? owner : POOL_NO_TAG;
    bool long_request = cls == 0 && npages >= POOL_FREE_LISTS;
    uint32_t idx, kept = 0; /* pages taken in memory, not known to be this process's */
    int how = plan(a, npages, align_pages, long_request ? tag : POOL_NO_TAG, &idx);
    if (end != POOL_NIL && (how != PLAN_TAKE || (uint64_t)idx + npages > end)) {
        pool_journal_commit_(j);
        pool_unlock_(a, &ph->lock, POOL_LOCK_PAGEHEAP, 0);
        return POOL_NIL;
    }
    ph->allocs++;
    if (how == PLAN_TAKE) {
        pool_span_sh_t *s = &a->spans[idx];
        uint32_t len = s->npages, lead = lead_pages(a, s->start, align_pages);
        /* A long block taken from the top free span goes at its top end,
         * so that the pages left free stay next to what lies below and
         * join it when that is freed (a span that starts the heap has
         * nothing below it).  At the bottom of the span, the block parted
         * them: under -T 2, large's two threads left a free run on each
         * side of one block, and the heap grew inside timed runs until
         * every order of their requests had met (bench/REPORT.md). */
        if (long_request && align_pages == 1 && s->start > 0 && idx == top_free(a, 1))
            lead = len - npages;
        uint8_t returned = s->returned;
        uint16_t mapped_by = s->owner;
        bool own = mapped_rank(s, tag) == MAPPED_OWN;
        list_remove(a, j, idx);
        POOL_CRASH_POINT("pageheap.take");
        POOL_JSET(j, ph->free_pages, ph->free_pages - len);
        if (returned)
            POOL_JSET(j, ph->returned_pages, ph->returned_pages - len);
        if (lead > 0) {
            span_set_free(a, idx, lead, returned, mapped_by);
            POOL_JSET(j, ph->free_pages, ph->free_pages + lead);
            if (returned)
                POOL_JSET(j, ph->returned_pages, ph->returned_pages + lead);
            list_push(a, j, idx);
            idx += lead;
            len -= lead;
        }
        if (len > npages) {
            uint32_t rest = idx + npages;
            span_set_free(a, rest, len - npages, returned, mapped_by);
            POOL_JSET(j, ph->free_pages, ph->free_pages + (len - npages));
            if (returned)
                POOL_JSET(j, ph->returned_pages, ph->returned_pages + (len - npages));
            list_push(a, j, rest);
        }
        if (returned)
            ph->reused_returned += npages;
        else if (!own)
            kept = npages;
    } else if (how == PLAN_EXTEND) {
        pool_span_sh_t *s = &a->spans[idx];
        if (!s->returned && mapped_rank(s, tag) != MAPPED_OWN)
            kept = s->npages;
        list_remove(a, j, idx);
        POOL_JSET(j, ph->free_pages, ph->free_pages - s->npages);
        if (s->returned) {
            POOL_JSET(j, ph->returned_pages, ph->returned_pages - s->npages);
            ph->reused_returned += s->npages;
        }
        POOL_JSET(j, ph->carved, idx + npages);
        POOL_CRASH_POINT("pageheap.carve");
    } else {
        uint32_t start = ph->carved + lead_pages(a, ph->carved, align_pages);
        if (start < ph->carved || (uint64_t)start + npages > a->npages) {
            pool_journal_commit_(j);
            pool_unlock_(a, &ph->lock, POOL_LOCK_PAGEHEAP, 0);
            return POOL_NIL;
        }
        if (start > ph->carved) {
            uint32_t gap = ph->carved;
            span_set_free(a, gap, start - gap, 0, POOL_NO_TAG);
            POOL_JSET(j, ph->free_pages, ph->free_pages + (start - gap));
            POOL_JSET(j, ph->carved, start + npages);
            free_locked(a, gap);
        }
        POOL_JSET(j, ph->carved, start + npages);
        POOL_CRASH_POINT("pageheap.carve");
        idx = start;
    }
    span_set_used(a, idx, npages, cls, owner);
    note_unreturned(a);
    pool_journal_commit_(j);
    decay(a);
    pool_unlock_(a, &ph->lock, POOL_LOCK_PAGEHEAP, 0);
    if (kept > 0 && a->hdr->shared)
        map_kept(a, idx, kept);
    return idx;
}

uint32_t pool_pageheap_lowest_fit_(pool_arena_t *a, uint32_t npages)
{
    pool_pageheap_sh_t *ph = a->ph;
    if (!pool_lock_try_(a, &ph->lock, POOL_LOCK_PAGEHEAP, 0))
        return POOL_NIL;
    uint32_t fit = lowest_fit(a, npages);
    pool_unlock_(a, &ph->lock, POOL_LOCK_PAGEHEAP, 0);
    return fit;
}

uint32_t pool_pageheap_alloc_(pool_arena_t *a, uint32_t npages, uint32_t align_pages,
                              unsigned cls, uint16_t owner)
{
    return alloc_span(a, npages, align_pages, cls, owner, POOL_NIL);
}

uint32_t pool_pageheap_alloc_below_(pool_arena_t *a, uint32_t npages, unsigned cls,
                                    uint16_t owner, uint32_t end)
{
    return alloc_span(a, npages, 1, cls, owner, end);
}

uint32_t pool_pageheap_free_locked_(pool_arena_t *a, uint32_t idx)
{
    pool_pageheap_sh_t *ph = a->ph;
    pool_journal_sh_t *j = ph_journal(a);
    pool_span_sh_t *s = &a->spans[idx];
    pool_assert(s->state == POOL_SPAN_SMALL || s->state == POOL_SPAN_BIG);
    pool_journal_begin_(j, POOL_OP_PH_FREE);
    ph->frees++;
    /* First: a lock-free reader must stop seeing a class here (a big
     * span's pages have none). */
    if (s->state == POOL_SPAN_SMALL) {
        pool_pagemap_set_class_(a, s->start, s->npages, 0);
        POOL_JSET(j, ph->small_pages, ph->small_pages - s->npages);
    } else {
        POOL_JSET(j, ph->big_pages, ph->big_pages - s->npages);
    }
    POOL_CRASH_POINT("pageheap.free");
    bool long_span = s->state == POOL_SPAN_BIG && s->npages >= POOL_FREE_LISTS;
    span_set_free(a, idx, s->npages, 0, long_span ? s->owner : POOL_NO_TAG);
    POOL_JSET(j, ph->free_pages, ph->free_pages + s->npages);
    idx = free_locked(a, idx);
    pool_journal_commit_(j);
    return idx;
}

void pool_pageheap_return_locked_(pool_arena_t *a, uint32_t idx)
{
    pool_pageheap_sh_t *ph = a->ph;
    pool_journal_sh_t *j = ph_journal(a);
    pool_span_sh_t *s = &a->spans[idx];
    if (s->state != POOL_SPAN_FREE || s->returned || a->hdr->backing == POOL_BACKING_HUGETLB)
        return;
    pool_journal_begin_(j, POOL_OP_PH_RETURN);
    return_span(a, s);
    /* The period's marks follow, as if the pages had never been free and
     * mapped: the fall would otherwise read as pages taken again (the
     * cushion), and the low mark would have the period's end give back
     * that many more of the pages still mapped. */
    uint64_t now = unreturned(ph);
    pool_journal_step_(j);
    if (ph->decay_min_pages > now)
        POOL_JSET(j, ph->decay_min_pages, now);
    POOL_JSET(j, ph->decay_high_pages,
              ph->decay_high_pages > now + s->npages ? ph->decay_high_pages - s->npages : now);
    pool_journal_commit_(j);
}

void pool_pageheap_free_(pool_arena_t *a, uint32_t idx)
{
    pool_pageheap_sh_t *ph = a->ph;
    pool_lock_(a, &ph->lock, POOL_LOCK_PAGEHEAP, 0);
    pool_pageheap_free_locked_(a, idx);
    decay(a);
    pool_unlock_(a, &ph->lock, POOL_LOCK_PAGEHEAP, 0);
}

void pool_pageheap_free_idle_(pool_arena_t *a, uint32_t idx)
{
    pool_pageheap_sh_t *ph = a->ph;
    pool_journal_sh_t *j = ph_journal(a);
    pool_lock_(a, &ph->lock, POOL_LOCK_PAGEHEAP, 0);
    uint64_t was = unreturned(ph);
    pool_pageheap_free_locked_(a, idx);
    /* Its pages were idle through a period of the tier that held them, and
     * returned neighbours it merged with, counted unreturned from now on,
     * were free all along: waiting out a whole period of ours as well kept
     * them mapped a second more, paid for by every worker at rest.  An
     * operation of its own, off the path of every other free: a holder
     * that dies before it leaves the span freed and the low mark as it
     * was, which costs a period, never a page. */
    pool_journal_begin_(j, POOL_OP_PH_FREE);
    POOL_JSET(j, ph->decay_min_pages, ph->decay_min_pages + (unreturned(ph) - was));
    pool_journal_commit_(j);
    decay(a);
    pool_unlock_(a, &ph->lock, POOL_LOCK_PAGEHEAP, 0);
}

/* Repair, pass 1: make the descriptors tile [0, carved) again.  A dead
 * owner may have left two free neighbours unmerged, a merged span whose
 * absorbed descriptor is still live, or a span whose class bytes were
 * already cleared.  Returns the first page it could not make sense of
 * (carved when all is well). */
static uint32_t repair_tiling(pool_arena_t *a)
{
    pool_pageheap_sh_t *ph = a->ph;
    uint32_t prev_free = POOL_NIL;
    uint32_t p = 0;
    while (p < ph->carved) {
        pool_span_sh_t *s = &a->spans[p];
        POOL_CRASH_POINT("recover.rebuild");
        if (s->state == POOL_SPAN_NONE || s->npages == 0 || s->start != p ||
            (uint64_t)p + s->npages > ph->carved)
            return p;
        uint32_t last = p + s->npages - 1;
        for (uint32_t q = p + 1; q <= last; q++)
            if (a->spans[q].state != POOL_SPAN_NONE)
                a->spans[q].state = POOL_SPAN_NONE;
        if (s->state == POOL_SPAN_FREE && prev_free != POOL_NIL &&
            pool_span_mergeable(&a->spans[prev_free], s)) {
            pool_span_sh_t *l = &a->spans[prev_free];
            if (l->owner == POOL_NO_TAG)
                l->owner = s->owner;
            l->npages += s->npages;
            l->returned = l->returned && s->returned;
            s->state = POOL_SPAN_NONE;
            s->npages = 0;
            a->pm_span[last] = prev_free;
            p = last + 1;
            continue;
        }
        if (s->state == POOL_SPAN_FREE) {
            a->pm_span[p] = p;
            a->pm_span[last] = p;
            pool_pagemap_set_class_(a, p, s->npages, 0);
            prev_free = p;
        } else {
            /* Used spans keep their class; one in transit (LEAVING) is
             * finished by the reap of the process that moved it. */
            if (s->state == POOL_SPAN_SMALL)
                pool_pagemap_set_span_(a, p, s->npages, p);
            else
                pool_pagemap_set_ends_(a, p, s->npages, p);
            pool_pagemap_set_class_(a, p, s->npages, s->cls);
            prev_free = POOL_NIL;
        }
        p = last + 1;
    }
    return ph->carved;
}

/* A rebuild touches every span and would fit in no journal: it writes
 * plainly, and is safe to run again after a death inside it. */
void pool_pageheap_rebuild_(pool_arena_t *a, unsigned unused)
{
    pool_pageheap_sh_t *ph = a->ph;
    /* Pages past the carved ones read as class 0 to whoever carves them
     * next (a big span does not write its class bytes): a dead holder
     * whose carve was undone may have left a new span's there. */
    for (uint32_t p = ph->carved; p < a->npages; p++)
        if (a->pm_class[p] != 0)
            pool_atomic_store_release(&a->pm_class[p], 0);
    uint32_t good = repair_tiling(a);
    if (good < ph->carved) {
        /* Pages past a broken descriptor are quarantined: never handed out
         * again rather than risk handing them out twice. */
        pool_error_(0, "page heap repair: bad span at page %u; pages %u..%u quarantined", good,
                    good, ph->carved - 1);
        ph->quarantined_pages += ph->carved - good;
        pool_atomic_add(&a->crash->xquarantined, (uint64_t)(ph->carved - good) << POOL_PAGE_SHIFT);
        pool_span_sh_t *q = &a->spans[good];
        q->start = good;
        q->npages = ph->carved - good;
        q->state = POOL_SPAN_BIG;
        q->cls = 0;
        q->listed = POOL_LISTED_NO;
        q->owner = POOL_NO_TAG;
        for (uint32_t p = good + 1; p < ph->carved; p++)
            a->spans[p].state = POOL_SPAN_NONE;
        pool_pagemap_set_span_(a, good, q->npages, good);
        pool_pagemap_set_class_(a, good, q->npages, 0);
    }
    for (unsigned l = 0; l < POOL_FREE_LISTS; l++)
        ph->heads[l] = POOL_NIL;
    memset(ph->nonempty, 0, sizeof ph->nonempty);
    ph->free_pages = ph->returned_pages = ph->small_pages = ph->big_pages = 0;
    pool_span_sh_t *s;
    for (pool_span_walk_t w = pool_span_walk(a); (s = pool_span_next(a, &w)) != NULL;) {
        POOL_CRASH_POINT("recover.rebuild");
        switch (s->state) {
        case POOL_SPAN_FREE:
            ph->free_pages += s->npages;
            if (s->returned)
                ph->returned_pages += s->npages;
            list_push(a, NULL, s->start);
            break;
        case POOL_SPAN_SMALL:
            ph->small_pages += s->npages;
            break;
        default:
            ph->big_pages += s->npages;
            break;
        }
    }
    if (ph->decay_min_pages > unreturned(ph))
        ph->decay_min_pages = unreturned(ph);
}

static const pool_lock_ops_t pageheap_ops = {
    .what = "page heap",
    /* The page map is never journaled: every recovery derives it again. */
    .truth = "the span descriptors",
    .verify = NULL,
    .rebuild = pool_pageheap_rebuild_,
};

void pool_pageheap_register_(void)
{
    pool_lock_register_(POOL_LOCK_PAGEHEAP, &pageheap_ops);
}

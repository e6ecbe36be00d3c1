/* SPDX-License-Identifier: BSD-2-Clause */
/* libshmpool — the arena: its layout, its mapping and views into it.
 *
 * pool_arena_map_() maps one MAP_NORESERVE region, shared for processes
 * forked to attach or private to its creator, and lays out, at fixed
 * offsets: the header, the central caches, counters, the page heap, the
 * slots, the span descriptors, the page map, then the data pages.  Nothing
 * here calls malloc.  pool_arena_view_() points a view into another
 * process's arena (shmpool-stat), and pool_arena_fork_child_() makes a
 * forked child's arena its own.  Who creates, attaches and forks is
 * proc.c.
 */
#include "pool-internal.h"

#include <errno.h>
#include <string.h>

#include "prim/prim.h"

pool_arena_t pool_arena_;

/* Arena alignment: a 2 MiB boundary lets the kernel use huge pages where it
 * can and keeps every page-aligned offset page-aligned in memory.  A
 * hugetlb arena starts on a 1 GiB boundary: there the kernel shares the
 * page-table pages of a shared mapping between the processes that map it,
 * so a page one process faulted in is mapped in all. */
#define POOL_ARENA_ALIGN ((size_t)2 << 20)
#define POOL_HUGETLB_ALIGN ((size_t)1 << 30)
#define POOL_MIN_DATA_PAGES 64

/* ------------------------------------------------------------------------ */
/* Layout                                                                    */
/* ------------------------------------------------------------------------ */

static uint64_t align_up(uint64_t v, uint64_t a)
{
    return (v + a - 1) & ~(a - 1);
}

/* Room for size bytes at the next multiple of align from *off: where it
 * starts; *off moves past it. */
static uint64_t carve(uint64_t *off, uint64_t size, uint64_t align)
{
    uint64_t at = align_up(*off, align);
    *off = at + size;
    return at;
}

/* The layout of an arena of npages data pages, into *l; returns its size. */
static uint64_t layout_for(uint32_t npages, pool_layout_sh_t *l)
{
    uint64_t off = sizeof(pool_header_sh_t);
    /* What every process writes or reads lies together from the header
     * on: the counters of recoveries and reaps (read by every look at the
     * arena), the class locks, their watch, the page heap and the slots'
     * states (read by whoever looks for a free or a dead one, up to the
     * header's top).  The counters only statistics builds write come
     * after them, so that a release build's untouched pages lie apart. */
    l->off_crash = carve(&off, sizeof(pool_crash_sh_t), 64);
    l->off_central = carve(&off, sizeof(pool_central_sh_t) * POOL_NCLASSES, 64);
    l->off_watch = carve(&off, sizeof(pool_lockwatch_sh_t) * (1 + POOL_NCLASSES), 64);
    l->off_pageheap = carve(&off, sizeof(pool_pageheap_sh_t), 64);
    l->off_slots = carve(&off, sizeof(pool_slot_sh_t) * POOL_MAX_SLOTS, 64);
    l->off_centralstats = carve(&off, sizeof(pool_centralstats_sh_t) * POOL_NCLASSES, 64);
    l->off_lockstats = carve(&off, sizeof(pool_lockstats_sh_t) * (1 + POOL_NCLASSES), 64);
    /* On a page boundary, so that n caches touch as few pages as their
     * bytes fill: each is written only by the thread that takes its slot. */
    l->off_tcaches = carve(&off, sizeof(pool_tcache_sh_t) * POOL_MAX_SLOTS, POOL_PAGE_SIZE);
    l->off_binstats = carve(&off, sizeof(pool_binstats_t) * POOL_NCLASSES * POOL_MAX_SLOTS, 64);
    /* On a page boundary, so that the journals in use, which the class
     * locks take in the order of their first operation, fill the fewest. */
    l->off_journals = carve(&off,
                            sizeof(pool_journal_sh_t) * (1 + POOL_NCLASSES) * (1 + POOL_JOURNAL_BLOCKS),
                            POOL_PAGE_SIZE);
    /* The descriptors of the first pages, which the page heap hands out
     * first, on a page of their own rather than the journals' last. */
    l->off_spans = carve(&off, sizeof(pool_span_sh_t) * (uint64_t)npages, POOL_PAGE_SIZE);
    l->off_pm_class = carve(&off, npages, 64);
    l->off_pm_span = carve(&off, sizeof(uint32_t) * (uint64_t)npages, 64);
    l->off_owners = carve(&off, (uint64_t)POOL_OWNER_ROW * pool_owner_region_rows(npages),
                          POOL_PAGE_SIZE);
    l->off_data = carve(&off, (uint64_t)npages << POOL_PAGE_SHIFT, POOL_PAGE_SIZE);
    return off;
}

/* Most data pages that fit in size bytes together with their metadata. */
static uint32_t pages_for(size_t size)
{
    pool_layout_sh_t l;
    uint64_t fixed = layout_for(0, &l);
    uint64_t per_page =
        POOL_PAGE_SIZE + sizeof(pool_span_sh_t) + 1 + sizeof(uint32_t) + POOL_OWNER_ROW;
    if (size <= fixed)
        return 0;
    uint64_t n = (size - fixed) / per_page;
    for (;;) {
        if (layout_for((uint32_t)n, &l) <= size || n == 0)
            return (uint32_t)n;
        n--;
    }
}

uint32_t pool_layout_version_(void)
{
    return POOL_LAYOUT_VERSION | (uint32_t)POOL_CONFIG_DEBUG << 8 |
           (uint32_t)POOL_CONFIG_SPINLOCK << 12 | (uint32_t)POOL_PAGE_SHIFT << 16;
}

size_t pool_min_heap_size(void)
{
    pool_layout_sh_t l;
    return align_up(layout_for(POOL_MIN_DATA_PAGES, &l), (uint64_t)1 << 20);
}

/* Point a's fields into the arena whose header is at h. */
static void arena_view(pool_arena_t *a, pool_header_sh_t *h)
{
    char *b = (char *)h;
    a->slots = (pool_slot_sh_t *)(b + h->layout.off_slots);
    a->tcaches = (pool_tcache_sh_t *)(b + h->layout.off_tcaches);
    a->binstats = (pool_binstats_t *)(b + h->layout.off_binstats);
    a->central = (pool_central_sh_t *)(b + h->layout.off_central);
    a->cstats = (pool_centralstats_sh_t *)(b + h->layout.off_centralstats);
    a->lockstats = (pool_lockstats_sh_t *)(b + h->layout.off_lockstats);
    a->watch = (pool_lockwatch_sh_t *)(b + h->layout.off_watch);
    a->ph = (pool_pageheap_sh_t *)(b + h->layout.off_pageheap);
    a->spans = (pool_span_sh_t *)(b + h->layout.off_spans);
    a->pm_class = (uint8_t *)(b + h->layout.off_pm_class);
    a->pm_span = (uint32_t *)(b + h->layout.off_pm_span);
    a->journals = (pool_journal_sh_t *)(b + h->layout.off_journals);
    a->owners = (uint8_t *)(b + h->layout.off_owners);
    a->crash = (pool_crash_sh_t *)(b + h->layout.off_crash);
    a->data = (uintptr_t)(b + h->layout.off_data);
    a->npages = h->npages;
    a->data_size = (uintptr_t)h->npages << POOL_PAGE_SHIFT;
    a->hdr = h;
}

int pool_arena_view_(pool_arena_t *a, void *map, size_t len)
{
    pool_header_sh_t *h = map;
    memset(a, 0, sizeof *a);
    if (len < sizeof *h || h->magic != POOL_MAGIC)
        return EINVAL;
    if (h->version != pool_layout_version_() || h->page_shift != POOL_PAGE_SHIFT)
        return EPROTO;
    pool_layout_sh_t l;
    layout_for(h->npages, &l);
    if (h->layout.off_data != l.off_data || h->layout.off_owners != l.off_owners ||
        l.off_data > len)
        return EINVAL;
    pool_sizeclass_init_();
    arena_view(a, h);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Mapping                                                                   */
/* ------------------------------------------------------------------------ */

/* SHMPOOL_HUGEPAGES: what the arena is made of.  Unset or "off": base
 * pages.  "thp": transparent huge pages where the system gives them to
 * memory of the arena's kind (shared or private) that asks.  "hugetlb":
 * reserved huge pages, all of the arena, on a 1 GiB boundary so that
 * processes share the page-table pages that map it.  What cannot be had is
 * said on one line and the arena falls back to base pages. */
static pool_backing_t backing_wanted(bool shared)
{
    const char *v = pool_prim_getenv_("SHMPOOL_HUGEPAGES");
    if (v == NULL || *v == '\0' || strcmp(v, "off") == 0)
        return POOL_BACKING_PAGES;
    if (strcmp(v, "thp") == 0) {
        if (pool_prim_thp_(shared))
            return POOL_BACKING_THP;
        pool_error_(0, "SHMPOOL_HUGEPAGES=thp: the system gives %s memory no transparent "
                       "huge pages (/sys/kernel/mm/transparent_hugepage/%s); using base pages",
                    shared ? "shared" : "private", shared ? "shmem_enabled" : "enabled");
        return POOL_BACKING_PAGES;
    }
    if (strcmp(v, "hugetlb") == 0)
        return POOL_BACKING_HUGETLB;
    pool_error_(0, "SHMPOOL_HUGEPAGES='%s' is not off, thp or hugetlb; using base pages", v);
    return POOL_BACKING_PAGES;
}

uint64_t pool_arena_huge_from_(const pool_layout_sh_t *l, uint64_t size)
{
    uint64_t from = align_up(l->off_data + POOL_THP_FROM, POOL_HUGE_PAGE);
    return from < size ? from : size;
}

/* Map the arena as backing asks, or with base pages when it cannot be had;
 * *backing gets what it is made of.  Reserved huge pages are always
 * shared: a private mapping would have a fork's copy-on-write find none
 * left for the child; so *shared turns true with them. */
static int map_arena(size_t *size, pool_backing_t *backing, bool *shared, void **m)
{
    if (*backing == POOL_BACKING_HUGETLB) {
        size_t huge = (size_t)align_up(*size, POOL_HUGE_PAGE);
        int rc = pool_prim_map_arena_(huge, POOL_HUGETLB_ALIGN, POOL_BACKING_HUGETLB, true, m);
        if (rc == 0) {
            *size = huge;
            *shared = true;
            return 0;
        }
        pool_error_(rc, "SHMPOOL_HUGEPAGES=hugetlb: cannot reserve %lu huge pages of 2 MiB "
                        "(reserve them in /proc/sys/vm/nr_hugepages); using base pages",
                    (unsigned long)(huge / POOL_HUGE_PAGE));
        *backing = POOL_BACKING_PAGES;
    }
    return pool_prim_map_arena_(*size, POOL_ARENA_ALIGN, *backing, *shared, m);
}

int pool_arena_map_(size_t size, bool shared)
{
    size = (size_t)align_up(size, POOL_PAGE_SIZE);
    void *m;
    pool_backing_t backing = backing_wanted(shared);
    int rc = map_arena(&size, &backing, &shared, &m);
    if (rc != 0)
        return rc;
    uint32_t npages = pages_for(size);
    pool_header_sh_t *h = m;
    layout_for(npages, &h->layout);
    h->version = pool_layout_version_();
    h->page_shift = POOL_PAGE_SHIFT;
    h->base = (uintptr_t)m;
    h->size = size;
    h->npages = npages;
    h->backing = backing;
    h->shared = shared;
    if (backing == POOL_BACKING_THP) {
        uint64_t from = pool_arena_huge_from_(&h->layout, size);
        if (from < size)
            pool_prim_advise_huge_((char *)m + from, size - from);
    }
    arena_view(&pool_arena_, h);
    return 0;
}

/* The shared arena replaced by a private copy of what the child may read. */
static int copy_shared(pool_arena_t *a)
{
    pool_header_sh_t *h = a->hdr;
    void *m;
    int rc = pool_prim_map_private_(h->size, &m);
    if (rc != 0)
        return rc;
    char *dst = m;
    const char *src = (const char *)h;
    uint32_t carved = pool_atomic_load_acquire(&a->ph->carved);
    if (carved > a->npages)
        carved = a->npages;
    memcpy(dst, src, h->layout.off_slots);
    memcpy(dst + h->layout.off_pm_class, src + h->layout.off_pm_class, carved);
    memcpy(dst + h->layout.off_pm_span, src + h->layout.off_pm_span, sizeof(uint32_t) * carved);
    /* Runs of pages in use are copied whole: [run, p) so far.  Of the
     * descriptors, those the walk lands on: the one of a page inside a
     * span reads as POOL_SPAN_NONE to every reader, as the zeros of the
     * copy do, and a read of one whose OS page went back with its span's
     * pages would allocate that page in the shared arena again. */
    pool_span_sh_t *spans = (pool_span_sh_t *)(void *)(dst + h->layout.off_spans);
    uint32_t run = 0;
    for (uint32_t p = 0; p <= carved;) {
        uint32_t n = 1;
        bool is_free = p == carved;
        if (p < carved) {
            const pool_span_sh_t *s = &a->spans[p];
            memcpy(&spans[p], s, sizeof *s);
            n = pool_atomic_load_relaxed(&s->npages);
            is_free = pool_atomic_load_relaxed(&s->state) == POOL_SPAN_FREE;
            if (pool_atomic_load_relaxed(&s->start) != p || n == 0 || n > carved - p) {
                n = 1;
                is_free = false;
            }
        }
        if (is_free) {
            if (p > run) {
                size_t off = h->layout.off_data + ((size_t)run << POOL_PAGE_SHIFT);
                pool_prim_copy_(dst + off, src + off, (size_t)(p - run) << POOL_PAGE_SHIFT);
            }
            run = p + n;
        }
        p += n;
    }
    rc = pool_prim_move_(m, h, h->size);
    if (rc != 0)
        pool_prim_unmap_(m, h->size);
    return rc;
}

int pool_arena_fork_child_(void)
{
    pool_arena_t *a = &pool_arena_;
    if (a->hdr->shared) {
        int rc = copy_shared(a);
        if (rc != 0)
            return rc;
        a->hdr->shared = 0;
    }
    /* The arena is this process's alone now: its locks may be made afresh
     * (one held at fork, by another process or by the parent, would never
     * be given back). */
    pool_lock_init_(&a->ph->lock, POOL_LOCK_PAGEHEAP);
    for (unsigned cls = 0; cls < POOL_NCLASSES; cls++)
        pool_lock_init_(&a->central[cls].lock, POOL_LOCK_CENTRAL);
    return 0;
}

const char *pool_name(void)
{
    return "shmpool";
}

bool pool_owns(const void *p)
{
    return pool_in_arena(p);
}


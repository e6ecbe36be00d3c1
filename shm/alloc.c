/* SPDX-License-Identifier: BSD-2-Clause */
/* libshmpool — the pool_* allocation entry points and their slow paths.
 *
 * The fast paths are inline in alloc.h: a malloc pops its class's bin in
 * the thread cache, a free pushes onto it.  What they cannot do falls into
 * the slow paths here: the first allocation of a thread (which takes its
 * slot), an empty or full bin (tcache.c), big spans from the page heap,
 * private pointers, forked processes and the private heap when the arena
 * is full.  Then the entry points: malloc and free, calloc, memalign,
 * usable size and realloc.
 */
#include "alloc.h"

#include <errno.h>
#include <string.h>

#include "prim/prim.h"

__thread int pool_tls_depth_ POOL_TLS;
static bool fallback_logged; /* one exhaustion message per process */

/* ------------------------------------------------------------------------ */
/* Slow paths                                                                */
/* ------------------------------------------------------------------------ */

/* The arena could not serve a request: serve it privately, count it and say
 * so once per process. */
static void *fallback(size_t size, size_t align)
{
    pool_arena_t *a = &pool_arena_;
    pool_atomic_inc(&a->hdr->xfallbacks);
    pool_tcache_sh_t *tc = pool_tls_tcache_;
    if (pool_config_stats && tc != &pool_empty_tcache_)
        a->slots[tc->slot].stats.fallbacks++;
    if (!pool_atomic_xchg_acquire(&fallback_logged, true))
        pool_error_(0, "arena of %lu bytes is full; process %d serves from its private heap "
                    "(logged once)", (unsigned long)a->hdr->size, pool_prim_getpid_());
    return align <= 16 ? pool_prim_private_malloc_(size) : pool_prim_private_memalign_(align, size);
}

/* A whole span of at least size bytes starting on a multiple of align. */
static void *alloc_big(pool_arena_t *a, pool_tcache_sh_t *tc, size_t size, size_t align)
{
    if (size > a->data_size)
        return NULL;
    uint32_t npages = (uint32_t)((size + POOL_PAGE_SIZE - 1) >> POOL_PAGE_SHIFT);
    if (npages == 0)
        npages = 1;
    uint32_t align_pages = align > POOL_PAGE_SIZE ? (uint32_t)(align >> POOL_PAGE_SHIFT) : 1;
    uint32_t idx = pool_pageheap_alloc_(a, npages, align_pages, 0, tc->tag);
    if (idx == POOL_NIL)
        return NULL;
    if (pool_config_stats)
        a->slots[tc->slot].stats.big_allocs++;
    return pool_span_addr(a, &a->spans[idx]);
}

/* The calling thread's cache, set up on first use; NULL when the process is
 * not attached, the thread is exiting, or no slot is free (only that last
 * one counts as a fallback). */
static pool_tcache_sh_t *thread_cache(bool *fell_back)
{
    pool_tcache_sh_t *tc = pool_tls_tcache_;
    *fell_back = false;
    if (pool_likely(tc != &pool_empty_tcache_))
        return tc;
    if (pool_proc_state_ != POOL_PROC_ATTACHED || pool_tls_exited_)
        return NULL;
    tc = pool_thread_setup_();
    if (tc == NULL)
        *fell_back = true;
    return tc;
}

/* The allocation itself: a class's object or a big span. */
static void *alloc_in(pool_arena_t *a, pool_tcache_sh_t *tc, size_t size, size_t align)
{
    if (align <= 16 && size <= POOL_MAX_SMALL)
        return pool_tcache_alloc_(a, tc, pool_sizeclass_of(size));
    if (align <= POOL_PAGE_SIZE && size <= POOL_MAX_SMALL &&
        pool_sizeclass_aligned_(size, align) != 0)
        return pool_tcache_alloc_(a, tc, pool_sizeclass_aligned_(size, align));
    return alloc_big(a, tc, size, align);
}

/* Allocation in the arena, or NULL when the arena cannot serve it (the
 * caller then uses the private heap).  Slow paths are where the processes
 * look for the dead on their own (now and then, and when the arena is
 * exhausted, which may only be the dead's memory). */
static void *alloc_slow(size_t size, size_t align, bool *fell_back)
{
    pool_arena_t *a = &pool_arena_;
    pool_tcache_sh_t *tc = thread_cache(fell_back);
    if (tc == NULL)
        return NULL;
    pool_reap_maybe_(a);
    void *p = alloc_in(a, tc, size, align);
    if (p == NULL && pool_reap_dead_(a) > 0)
        p = alloc_in(a, tc, size, align);
    if (p == NULL)
        *fell_back = true;
    return p;
}

/* The housekeeping a thread of an attached process does on the clock, in
 * its own slow paths (a refill, a full bin, a block over 256 KiB), with
 * no thread and no timer of ours in the program: once a second or more
 * after its last, it gives three quarters of its cache back and ends the
 * decay periods of the quiet classes and of the page heap
 * (pool_thread_scavenge, which poold's workers call every second).  A thread whose last
 * slow path is more than two periods old has been quiet or kept to its
 * fast paths: it gives its whole cache back.  None of it waits for a lock
 * another process holds. */
static __thread uint64_t housekept_ns POOL_TLS;

static void give_back(bool whole)
{
    if (whole)
        pool_thread_flush();
    pool_thread_scavenge();
}

static void housekeep(void)
{
    if (pool_tls_tcache_ == &pool_empty_tcache_)
        return;
    uint64_t now = pool_prim_now_coarse_ns_();
    uint64_t since = now - housekept_ns;
    /* A thread's first slow path starts its clock: its cache is new. */
    if (housekept_ns == 0 || since < POOL_DECAY_NS) {
        if (housekept_ns == 0)
            housekept_ns = now;
        return;
    }
    housekept_ns = now;
    /* Its locks may set errno, which free must keep. */
    int saved = errno;
    give_back(since >= 2 * POOL_DECAY_NS);
    errno = saved;
}

/* What a sleep's slices look for (sleephook.c): any object or span the
 * thread's cache holds, any class keeping an empty span, any
 * free page the page heap has not given back.  Read without locks: a
 * stale answer costs one slice, or one sleep without them. */
bool pool_sleep_due_(void)
{
    pool_tcache_sh_t *tc = pool_tls_tcache_;
    if (tc == &pool_empty_tcache_ || pool_proc_state_ != POOL_PROC_ATTACHED)
        return false;
    pool_arena_t *a = &pool_arena_;
    for (unsigned cls = 1; cls < POOL_NCLASSES; cls++)
        if (pool_tcache_held(tc, cls) > 0 ||
            pool_atomic_load_relaxed(&tc->own[cls].spans) != POOL_NIL ||
            pool_atomic_load_relaxed(&tc->own[cls].full) != POOL_NIL ||
            pool_atomic_load_relaxed(&a->central[cls].nempty) > 0)
            return true;
    return pool_atomic_load_relaxed(&a->ph->free_pages) >
           pool_atomic_load_relaxed(&a->ph->returned_pages);
}

bool pool_sleep_drain_(void)
{
    if (pool_tls_tcache_ == &pool_empty_tcache_)
        return false;
    int saved = errno;
    housekept_ns = pool_prim_now_coarse_ns_();
    /* The cache's releases wait for the class locks: with a holder stuck
     * in one (stopped, say), only the decays, which only try theirs, and
     * the cache waits for a later slice instead of the sleep for the
     * holder. */
    if (pool_lock_stalled(POOL_WAIT_MS) == 0)
        give_back(true);
    else
        pool_decay_(false);
    errno = saved;
    return pool_sleep_due_();
}

void *pool_malloc_slow_(size_t size)
{
    housekeep();
    pool_guard_enter();
    bool fell_back;
    void *p = alloc_slow(size, 16, &fell_back);
    pool_guard_leave();
    if (p != NULL)
        return p;
    return fell_back ? fallback(size, 16) : pool_prim_private_malloc_(size);
}

/* Free p, inside the arena, of no class this thread has a cache for: a
 * big span, or an object freed by a thread without a cache. */
static POOL_NOINLINE void free_uncached(pool_arena_t *a, unsigned cls, void *p)
{
    int saved = errno;
    pool_tcache_sh_t *tc = pool_tls_tcache_;
    pool_guard_enter();
    if (cls == 0) {
        pool_span_sh_t *s = pool_pagemap_span_(a, p);
        if (s == NULL || s->state != POOL_SPAN_BIG || pool_span_addr(a, s) != p)
            pool_fatal_("free: invalid pointer %p (not an allocated object or span)", p);
        if (pool_config_stats && tc != &pool_empty_tcache_)
            a->slots[tc->slot].stats.big_frees++;
        pool_pageheap_free_(a, s->start);
    } else {
        /* A thread that only frees (a consumer fed by a producer thread)
         * gets its cache here, or every free would take the class lock. */
        bool fell_back;
        tc = thread_cache(&fell_back);
        if (tc != NULL) {
            pool_tcache_free_(a, tc, cls, p);
        } else {
            /* Unattached or exiting, or no slot: straight to central. */
            if (pool_config_debug > 0)
                pool_debug_on_free_(p);
            pool_central_release_(a, cls, &p, 1);
        }
    }
    pool_guard_leave();
    housekeep();
    errno = saved;
}

/* Free p, inside the arena, in a process that is no forked copy.  An
 * object of a span another cache owns, the common case here, goes onto
 * that cache's inbox and keeps no house: it leaves nothing in this cache
 * to give back, and a clock read would add a sixth to its cost. */
static void free_shared(void *p)
{
    pool_arena_t *a = &pool_arena_;
    unsigned cls = pool_arena_class_(p);
    pool_tcache_sh_t *tc = pool_tls_tcache_;
    if (cls == 0 || tc == &pool_empty_tcache_) {
        free_uncached(a, cls, p);
        return;
    }
    pool_guard_enter();
    bool handed_on = pool_tcache_free_(a, tc, cls, p);
    pool_guard_leave();
    if (!handed_on)
        housekeep();
}

/* free's fast path took a place in p's bin, then found it full or p
 * suspect: the place goes back, in a function of its own so that the fast
 * path decrements the room in memory and tests the result in one step.
 * The fast path found p in the arena and the thread's cache set up, which
 * a forked copy never has. */
void pool_free_slow_unroom_(void *p)
{
    pool_tcache_sh_t *tc = pool_tls_tcache_;
    tc->bins[tc->pm_class[((uintptr_t)p - tc->base) >> POOL_PM_SHIFT]].room++;
    free_shared(p);
}

void pool_free_slow_(void *p)
{
    if (p == NULL)
        return;
    if (!pool_in_arena(p)) {
        int saved = errno;
        pool_prim_private_free_(p);
        errno = saved;
    } else if (pool_proc_state_ == POOL_PROC_FORKED) {
        /* The parent may still use this object: leave it alone. */
        pool_atomic_inc(&pool_arena_.hdr->xforeign_frees);
    } else {
        free_shared(p);
    }
}

/* ------------------------------------------------------------------------ */
/* Entry points                                                              */
/* ------------------------------------------------------------------------ */

void *pool_malloc(size_t size)
{
    return pool_malloc_fast(size);
}

void pool_free(void *p)
{
    pool_free_fast(p);
}

void *pool_calloc(size_t n, size_t size)
{
    size_t total;
    if (__builtin_mul_overflow(n, size, &total)) {
        errno = ENOMEM;
        return NULL;
    }
    if (pool_tls_tcache_ == &pool_empty_tcache_ && pool_proc_state_ != POOL_PROC_ATTACHED)
        return pool_prim_private_calloc_(n, size);
    void *p = pool_malloc_fast(total);
    if (p != NULL)
        memset(p, 0, total);
    return p;
}

/* Aligned allocation for memalign and posix_memalign; align is a power of
 * two.  NULL with errno ENOMEM on failure. */
static void *alloc_aligned(size_t align, size_t size)
{
    if (align <= 16)
        return pool_malloc_fast(size);
    if (size > SIZE_MAX - align) {
        errno = ENOMEM;
        return NULL;
    }
    housekeep();
    pool_guard_enter();
    bool fell_back;
    void *p = alloc_slow(size, align, &fell_back);
    pool_guard_leave();
    if (p != NULL)
        return p;
    return fell_back ? fallback(size, align) : pool_prim_private_memalign_(align, size);
}

static bool valid_align(size_t align)
{
    return align != 0 && (align & (align - 1)) == 0;
}

void *pool_memalign(size_t align, size_t size)
{
    if (!valid_align(align)) {
        errno = EINVAL;
        return NULL;
    }
    return alloc_aligned(align, size);
}

int pool_posix_memalign(void **out, size_t align, size_t size)
{
    if (!valid_align(align) || align % sizeof(void *) != 0)
        return EINVAL;
    int saved = errno;
    void *p = alloc_aligned(align, size);
    errno = saved;
    if (p == NULL)
        return ENOMEM;
    *out = p;
    return 0;
}

size_t pool_usable_size_slow_(const void *p)
{
    if (p == NULL)
        return 0;
    if (!pool_in_arena(p))
        return pool_prim_private_usable_((void *)p);
    pool_arena_t *a = &pool_arena_;
    pool_span_sh_t *s = pool_pagemap_span_(a, p);
    if (s == NULL || s->state != POOL_SPAN_BIG)
        return 0;
    uintptr_t into = (uintptr_t)p - (uintptr_t)pool_span_addr(a, s);
    return ((size_t)s->npages << POOL_PAGE_SHIFT) - into;
}

size_t pool_usable_size(const void *p)
{
    return pool_usable_size_fast(p);
}

void *pool_realloc(void *p, size_t size)
{
    if (p == NULL)
        return pool_malloc_fast(size);
    if (size == 0) {
        pool_free_fast(p);
        return NULL;
    }
    bool in_arena = pool_in_arena(p);
    if (!in_arena && pool_proc_state_ != POOL_PROC_ATTACHED)
        return pool_prim_private_realloc_(p, size);
    size_t old = pool_usable_size_fast(p);
    /* Keep the block when it still fits without wasting more than half. */
    if (in_arena && pool_proc_state_ != POOL_PROC_FORKED && size <= old && size > old / 2)
        return p;
    void *q = pool_malloc_fast(size);
    if (q == NULL)
        return NULL;
    memcpy(q, p, size < old ? size : old);
    pool_free_fast(p);
    return q;
}

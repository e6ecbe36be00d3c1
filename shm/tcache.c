/* libshmpool — the thread cache and the pool_* allocation entry points.
 *
 * A thread's cache lives in its slot in the arena; the fast paths
 * (pool-internal.h) only pop and push its bins.  Everything else is here:
 * the slow paths (first allocation of a thread, empty bin, full bin, big
 * spans, private pointers, forked processes), over-aligned requests,
 * realloc, and the debug-build checks.  Batches from the central cache grow
 * by slow start (1, 2, 4 ... up to the class maximum); a bin that reaches
 * its watermark (256 KiB of objects, at least two batches) releases one
 * batch.
 */
#include "pool-internal.h"

#include <errno.h>
#include <string.h>

#include "prim/prim.h"

static __thread int tls_depth __attribute__((tls_model("initial-exec")));
static bool fallback_logged; /* one exhaustion message per process */

/* Debug builds: entering the pool from inside it is a bug (a hook that
 * allocates, a signal handler that mallocs) that would corrupt a bin. */
static void guard_enter(void)
{
    if (pool_config_debug > 0 && tls_depth++ > 0) {
        tls_depth = 0;
        pool_fatal_("the pool was entered from inside the pool (malloc from a signal handler?)");
    }
}

static void guard_leave(void)
{
    if (pool_config_debug > 0)
        tls_depth--;
}

void pool_tcache_init_(pool_arena_t *a, pool_tcache_sh_t *tc, uint16_t slot)
{
    tc->base = a->data;
    tc->size = a->data_size;
    tc->pm_class = a->pm_class;
    tc->slot = slot;
    memset(&tc->bins[0], 0, sizeof tc->bins[0]);
    for (unsigned cls = 1; cls < POOL_NCLASSES; cls++) {
        pool_bin_t *bin = &tc->bins[cls];
        bin->head = NULL;
        bin->len = 0;
        bin->watermark = pool_classes_[cls].watermark;
        bin->batch = 1;
        uint32_t size = pool_classes_[cls].size;
        uint32_t align = size & -size;
        bin->misalign = (align < POOL_PAGE_SIZE ? align : POOL_PAGE_SIZE) - 1;
    }
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

/* Take up to n objects off the head of a bin into out[]: the cut needs a
 * walk of n links either way, and the objects left stay warm for reuse.
 * The length follows the head object by object, so that a reaper of a
 * process killed in the middle finds them off by one at most, as after a
 * push or a pop; the objects already cut are the dead process's own to
 * the reaper, or its owner's, not a leak behind a length that counts
 * them.  Returns how many. */
static uint32_t bin_cut(pool_tcache_sh_t *tc, pool_bin_t *bin, void **out, uint32_t n)
{
    uint32_t k = 0;
    for (void *p = bin->head; p != NULL && k < n; p = bin->head) {
        POOL_CRASH_POINT("tcache.cut");
        out[k++] = held(tc, p);
        bin->head = *(void **)p;
        bin->len--;
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

/* Give every object in bin (of class cls) back, a release at a time. */
static void release_bin(pool_arena_t *a, pool_tcache_sh_t *tc, unsigned cls, pool_bin_t *bin)
{
    void *objs[POOL_RELEASE_MAX];
    for (uint32_t n; (n = bin_cut(tc, bin, objs, POOL_RELEASE_MAX)) > 0;)
        release(a, tc, cls, objs, n);
}

void pool_tcache_flush_(pool_arena_t *a, pool_tcache_sh_t *tc)
{
    for (unsigned cls = 1; cls < POOL_NCLASSES; cls++) {
        pool_bin_t *bin = &tc->bins[cls];
        release_bin(a, tc, cls, bin);
        bin->len = 0;
        bin->batch = 1;
    }
}

void pool_thread_flush(void)
{
    pool_tcache_sh_t *tc = pool_tls_tcache_;
    if (tc == &pool_empty_tcache_)
        return;
    guard_enter();
    pool_tcache_flush_(&pool_arena_, tc);
    guard_leave();
}

void pool_thread_scavenge(void)
{
    pool_tcache_sh_t *tc = pool_tls_tcache_;
    if (tc == &pool_empty_tcache_)
        return;
    guard_enter();
    for (unsigned cls = 1; cls < POOL_NCLASSES; cls++) {
        pool_bin_t *bin = &tc->bins[cls];
        if (bin->len == 0)
            continue;
        /* The first half stays: the most recently freed, warmest. */
        uint32_t keep = bin->len / 2;
        void **link = &bin->head;
        for (uint32_t i = 0; i < keep; i++)
            link = held(tc, *link);
        pool_bin_t rest = { .head = *link, .len = bin->len - keep };
        /* The length first: a death between the two leaves the bin's chain
         * longer than its length, which the reaper walks to the length
         * and one more, rather than a length past the chain's end. */
        bin->len = keep;
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        *link = NULL;
        release_bin(&pool_arena_, tc, cls, &rest);
    }
    /* An attached thread moves the quiet classes' empty spans: if it dies
     * on the way, its tag on them has the reaper finish the move. */
    for (unsigned cls = 1; cls < POOL_NCLASSES; cls++)
        pool_central_decay_(&pool_arena_, cls, tc->tag);
    guard_leave();
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

/* Refill an empty bin from the central cache.  Returns false when the arena
 * is exhausted. */
static bool refill(pool_arena_t *a, pool_tcache_sh_t *tc, unsigned cls)
{
    pool_bin_t *bin = &tc->bins[cls];
    void *objs[POOL_FETCH_MAX];
    uint32_t got = pool_central_fetch_(a, cls, bin->batch, tc->tag, objs);
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
     * in memory. */
    for (uint32_t i = got; i-- > 0;)
        pool_bin_push(tc, bin, objs[i]);
    uint32_t max = pool_classes_[cls].max_batch;
    bin->batch = bin->batch * 2 < max ? bin->batch * 2 : max;
    return true;
}

/* Pop an object of class cls, refilling the bin if needed; NULL when the
 * arena is exhausted. */
static void *alloc_class(pool_arena_t *a, pool_tcache_sh_t *tc, unsigned cls)
{
    if (tc->bins[cls].head == NULL && !refill(a, tc, cls))
        return NULL;
    return pool_bin_pop(tc, cls);
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
        return alloc_class(a, tc, pool_sizeclass_of(size));
    if (align <= POOL_PAGE_SIZE && size <= POOL_MAX_SMALL &&
        pool_sizeclass_aligned_(size, align) != 0)
        return alloc_class(a, tc, pool_sizeclass_aligned_(size, align));
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

void *pool_malloc_slow_(size_t size)
{
    guard_enter();
    bool fell_back;
    void *p = alloc_slow(size, 16, &fell_back);
    guard_leave();
    if (p != NULL)
        return p;
    return fell_back ? fallback(size, 16) : pool_prim_private_malloc_(size);
}

void *pool_malloc_class_(unsigned cls)
{
    bool fell_back;
    guard_enter();
    pool_tcache_sh_t *tc = thread_cache(&fell_back);
    void *p = tc != NULL ? alloc_class(&pool_arena_, tc, cls) : NULL;
    guard_leave();
    return p;
}

/* Release builds: what free's fast path left unchecked or found suspect
 * (pool_free_fast), checked in full before p joins a bin of tc: p is an
 * object of class cls, handed out (its span's bit says so; no lock is
 * needed to see that a caller's own object is), and not already in the
 * bin (a walk only when p carries this cache's mark).  Aborts naming p.
 * Debug builds check the same in pool_debug_on_free_. */
static void check_free(pool_arena_t *a, pool_tcache_sh_t *tc, unsigned cls, void *p)
{
    uint32_t oi;
    pool_span_sh_t *s = pool_object_span_(a, p, &oi);
    if (s == NULL || s->cls != cls)
        pool_fatal_("free(): invalid pointer %p (not the start of a block)", p);
    if (!(s->bitmap[oi / 64] & (UINT64_C(1) << (oi % 64))))
        pool_fatal_("free(): double free of %p (class %u)", p, cls);
    if (*pool_obj_mark(p) != tc)
        return;
    pool_bin_t *bin = &tc->bins[cls];
    uint32_t n = 0;
    for (void *q = bin->head; q != NULL && n <= bin->len; q = *(void **)q, n++)
        if (held(tc, q) == p)
            pool_fatal_("free(): double free of %p (class %u, in the thread cache)", p, cls);
}

/* Free an object or span of the arena from the slow path. */
static void free_arena(pool_arena_t *a, void *p)
{
    uint32_t page = (uint32_t)(((uintptr_t)p - a->data) >> POOL_PAGE_SHIFT);
    unsigned cls = a->pm_class[page];
    pool_tcache_sh_t *tc = pool_tls_tcache_;
    if (cls == 0) {
        pool_span_sh_t *s = pool_pagemap_span_(a, p);
        if (s == NULL || s->state != POOL_SPAN_BIG || pool_span_addr(a, s) != p)
            pool_fatal_("free: invalid pointer %p (not an allocated object or span)", p);
        if (pool_config_stats && tc != &pool_empty_tcache_)
            a->slots[tc->slot].stats.big_frees++;
        pool_pageheap_free_(a, s->start);
        return;
    }
    if (tc == &pool_empty_tcache_) {
        /* A thread that only frees (a consumer fed by a producer thread)
         * gets its cache here, or every free would take the class lock. */
        bool fell_back;
        tc = thread_cache(&fell_back);
        if (tc == NULL) {
            /* Unattached or exiting, or no slot: straight to central. */
            if (pool_config_debug > 0)
                pool_debug_on_free_(p);
            pool_central_release_(a, cls, &p, 1);
            return;
        }
    }
    pool_bin_t *bin = &tc->bins[cls];
    if (pool_config_debug > 0)
        pool_debug_on_free_(p);
    else
        check_free(a, tc, cls, p);
    void *objs[POOL_BATCH_MAX];
    /* The n most recently freed go back; the rest stay warm for reuse. */
    uint32_t n = bin_cut(tc, bin, objs, pool_classes_[cls].max_batch);
    if (n > 0) {
        if (pool_config_stats)
            tc->stats[cls].overflows++;
        release(a, tc, cls, objs, n);
    }
    pool_bin_push(tc, bin, p);
    if (pool_config_stats)
        tc->stats[cls].frees++;
}

void pool_free_slow_(void *p)
{
    if (p == NULL)
        return;
    int saved = errno;
    pool_arena_t *a = &pool_arena_;
    if (!pool_in_arena(p)) {
        pool_prim_private_free_(p);
    } else if (pool_proc_state_ == POOL_PROC_FORKED) {
        /* The parent may still use this object: leave it alone. */
        pool_atomic_inc(&a->hdr->xforeign_frees);
    } else {
        guard_enter();
        free_arena(a, p);
        guard_leave();
    }
    errno = saved;
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
    guard_enter();
    bool fell_back;
    void *p = alloc_slow(size, align, &fell_back);
    guard_leave();
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

size_t pool_usable_size(const void *p)
{
    if (p == NULL)
        return 0;
    if (!pool_in_arena(p))
        return pool_prim_private_usable_((void *)p);
    pool_arena_t *a = &pool_arena_;
    unsigned cls = a->pm_class[((uintptr_t)p - a->data) >> POOL_PAGE_SHIFT];
    if (cls != 0)
        return pool_classes_[cls].size;
    pool_span_sh_t *s = pool_pagemap_span_(a, p);
    if (s == NULL || s->state != POOL_SPAN_BIG)
        return 0;
    uintptr_t into = (uintptr_t)p - (uintptr_t)pool_span_addr(a, s);
    return ((size_t)s->npages << POOL_PAGE_SHIFT) - into;
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
    size_t old = pool_usable_size(p);
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

/* SPDX-License-Identifier: BSD-2-Clause */
/* libshmpool — the malloc and free fast paths, inline.
 *
 * override.c and alloc.c's pool_* entry points inline them; a miss falls
 * into alloc.c's slow paths, declared here with them, so that fast path,
 * slow path and entry points read as one unit (alloc.c).
 */
#ifndef POOL_ALLOC_H
#define POOL_ALLOC_H

#include "pool-internal.h"

POOL_NOINLINE void *pool_malloc_slow_(size_t size);
POOL_NOINLINE void pool_free_slow_(void *p);
POOL_NOINLINE void pool_free_slow_unroom_(void *p);
POOL_NOINLINE size_t pool_usable_size_slow_(const void *p);

/* Debug builds: entering the pool from inside it is a bug (a hook that
 * allocates, a signal handler that mallocs) that would corrupt a bin.
 * Every way into the pool but the fast paths is guarded. */
extern __thread int pool_tls_depth_ POOL_TLS;

static inline void pool_guard_enter(void)
{
    if (pool_config_debug > 0 && pool_tls_depth_++ > 0) {
        pool_tls_depth_ = 0;
        pool_fatal_("the pool was entered from inside the pool (malloc from a signal handler?)");
    }
}

static inline void pool_guard_leave(void)
{
    if (pool_config_debug > 0)
        pool_tls_depth_--;
}

/* malloc fast path, 18 instructions on x86-64 in libshmpool.so with the
 * TLS load and the return, 17 linked into a program (POOL_TLS); the range
 * test costs 2 over a NULL test, the mark 2 and its clearing 1, the next
 * object's prefetch 1; heads and
 * bins in arrays of eight-byte elements spare the multiply by a bin's
 * size, and the cache's own copy of the class table (class_small) the
 * instruction that takes the table's address.  A request over 1 KiB takes
 * 6 more to find its class in the global table; one over POOL_MAX_SMALL
 * goes to the slow path at once.  Class from the table, check and pop the
 * bin's head.  One range test sends NULL (an empty bin, every bin of the
 * empty cache, whose size is 0 and whose table holds class 0 only) and a
 * head outside the arena (a bad link, which the slow path names) to the
 * slow path; then the mark. */
static inline void *pool_malloc_fast(size_t size)
{
    pool_tcache_sh_t *tc = pool_tls_tcache_;
    uintptr_t cls;
    if (pool_likely(size <= POOL_SMALL_LOOKUP_MAX))
        cls = tc->class_small[size];
    else if (size <= POOL_MAX_SMALL)
        cls = pool_sizeclass_large(size);
    else
        return pool_malloc_slow_(size);
    void *p = tc->heads[cls];
    /* cls hidden: see POOL_OPAQUE.  p with it: GCC 12 then gives p the
     * return register from its load on, where it otherwise adds a move. */
    POOL_OPAQUE(cls);
    POOL_OPAQUE(p);
    if (pool_unlikely((uintptr_t)p - tc->base >= tc->size))
        return pool_malloc_slow_(size);
    return pool_bin_take(tc, cls, p);
}

/* free fast path, 21 instructions on x86-64 in libshmpool.so with the TLS
 * load and the return, 20 linked into a program (the alignment test costs
 * 2, the mark's test 2 and its store 1;
 * the room is decremented and tested in one step): the class byte from the
 * page map, push on the bin.  Pointers outside the arena (NULL, private
 * ones, every pointer in an unattached thread whose cache has size 0),
 * full bins (class 0 has no room), pointers no object of the class starts at (as
 * far as the class's alignment tells) and objects marked as in this cache
 * take the slow path, which checks them in full. */
static inline void pool_free_fast(void *p)
{
    pool_tcache_sh_t *tc = pool_tls_tcache_;
    uintptr_t off = (uintptr_t)p - tc->base;
    if (pool_unlikely(off >= tc->size)) {
        pool_free_slow_(p);
        return;
    }
    unsigned cls = tc->pm_class[off >> POOL_PM_SHIFT];
    pool_bin_t *bin = &tc->bins[cls];
    if (pool_unlikely(--bin->room < 0 || ((uintptr_t)p & bin->misalign) != 0 ||
                      *pool_obj_mark(p) == tc)) {
        pool_free_slow_unroom_(p);
        return;
    }
    if (pool_config_debug > 0)
        pool_debug_on_free_(p);
    pool_list_link(tc, &tc->heads[cls], p);
    if (pool_config_stats)
        tc->stats[cls].frees++;
}

/* malloc_usable_size's fast path: the size of the class of p's page, from
 * the arena's page map.  NULL and private pointers fail the range test,
 * and a page of a big span has class 0: both take the slow path, so that
 * a small object's answer takes no frame (Redis asks at every allocation
 * and free to count its memory). */
static inline size_t pool_usable_size_fast(const void *p)
{
    if (pool_likely(pool_in_arena(p))) {
        unsigned cls = pool_arena_class_(p);
        if (pool_likely(cls != 0))
            return pool_classes_[cls].size;
    }
    return pool_usable_size_slow_(p);
}

#endif /* POOL_ALLOC_H */

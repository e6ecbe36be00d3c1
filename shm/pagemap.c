/* SPDX-License-Identifier: BSD-2-Clause */
/* libshmpool — the page map.
 *
 * Two flat arrays indexed by (p - data) >> POOL_PAGE_SHIFT: a class byte per
 * page, read by free's fast path without a lock, and the index of the span
 * that covers the page, for the slow paths and the page heap's coalescing
 * (every page of a small span; the first and last page of a big or free
 * span, which is all anything looks up).
 * Only the page heap writes them, under its lock: the class byte last when a
 * span is carved and first when it is released, so a lock-free reader never
 * sees a class for pages that are not yet (or no longer) a small span.
 */
#include "pool-internal.h"

void pool_pagemap_set_span_(pool_arena_t *a, uint32_t start, uint32_t n, uint32_t span)
{
    pool_assert_internal((uint64_t)start + n <= a->npages);
    for (uint32_t i = 0; i < n; i++)
        a->pm_span[start + i] = span;
}

void pool_pagemap_set_ends_(pool_arena_t *a, uint32_t start, uint32_t n, uint32_t span)
{
    pool_assert_internal(n > 0 && (uint64_t)start + n <= a->npages);
    a->pm_span[start] = span;
    a->pm_span[start + n - 1] = span;
}

void pool_pagemap_set_class_(pool_arena_t *a, uint32_t start, uint32_t n, uint8_t cls)
{
    pool_assert_internal((uint64_t)start + n <= a->npages);
    for (uint32_t i = 0; i < n; i++)
        pool_atomic_store_release(&a->pm_class[start + i], cls);
}

pool_span_sh_t *pool_pagemap_span_(const pool_arena_t *a, const void *p)
{
    uint32_t page = pool_pagemap_page_(a, p);
    if (page == POOL_NIL || page >= a->ph->carved)
        return NULL;
    uint32_t s = a->pm_span[page];
    if (s >= a->npages)
        return NULL;
    return &a->spans[s];
}

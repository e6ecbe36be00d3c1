/* SPDX-License-Identifier: BSD-2-Clause */
/* libshmpool — ownership tags: which process holds each object and big
 * span.
 *
 * Every handed-out object carries the tag of the process that took it (a
 * byte per object, pool_owner_of) and every big span its taker's, so that
 * a reap frees exactly what a dead process held (reap.c).  A process that
 * detaches clears its tags (pool_disown_): what it leaves is nobody's to
 * reap.  A process that takes over a block another one allocated says so
 * (pool_adopt), so that the first one's reap leaves it alone.
 */
#include "pool-internal.h"

void pool_disown_(pool_arena_t *a, uint16_t tag)
{
    if (a->hdr == NULL || tag == POOL_NO_TAG || tag > POOL_MAX_TAG)
        return;
    pool_lock_all_(a);
    pool_span_sh_t *s;
    for (pool_span_walk_t w = pool_span_walk(a); (s = pool_span_next(a, &w)) != NULL;) {
        if (s->state == POOL_SPAN_BIG && s->owner == tag)
            s->owner = POOL_NO_TAG;
        if (s->state == POOL_SPAN_SMALL)
            for (uint32_t oi = 0; oi < s->count; oi++)
                if (*pool_owner_of(a, s, oi) == tag)
                    *pool_owner_of(a, s, oi) = POOL_NO_TAG;
    }
    pool_unlock_all_(a);
}

void pool_adopt(void *p)
{
    pool_arena_t *a = &pool_arena_;
    if (p == NULL || !pool_in_arena(p) || pool_proc_state_ != POOL_PROC_ATTACHED)
        return;
    uint16_t tag = a->slots[pool_slot()].tag;
    unsigned cls = pool_atomic_load_acquire(&a->pm_class[pool_pagemap_page_(a, p)]);
    if (cls == 0) {
        pool_lock_(a, &a->ph->lock, POOL_LOCK_PAGEHEAP, 0);
        pool_span_sh_t *s = pool_pagemap_span_(a, p);
        if (s != NULL && s->state == POOL_SPAN_BIG && pool_span_addr(a, s) == p)
            s->owner = tag;
        pool_unlock_(a, &a->ph->lock, POOL_LOCK_PAGEHEAP, 0);
        return;
    }
    pool_lock_(a, &a->central[cls].lock, POOL_LOCK_CENTRAL, cls);
    uint32_t oi;
    pool_span_sh_t *s = pool_object_span_(a, p, &oi);
    if (s != NULL && s->cls == cls && (s->bitmap[oi / 64] & (UINT64_C(1) << (oi % 64))))
        pool_owner_set(a, s, oi, (uint8_t)tag);
    pool_unlock_(a, &a->central[cls].lock, POOL_LOCK_CENTRAL, cls);
}

/* SPDX-License-Identifier: BSD-2-Clause */
/* poold — per-request regions: the slow path, cleanups, reset, destroy.
 *
 * Memory of a region:
 *   first block   [pd_region_t | space ...................]
 *   more blocks   [next | space ..........................]  r->blocks
 *   kept blocks   [next | unused .........................]  r->spare
 *   large chunks  [next, size | the caller's bytes]          r->large
 * A reset moves blocks from r->blocks to r->spare while the region holds
 * no more than r->keep, and the slow path takes a block from r->spare
 * before it asks malloc.  Large chunks are never kept: their sizes vary,
 * and one of them could hold far more than a typical request needs.
 * Every header is padded to 16 bytes so that the space after it starts
 * aligned (malloc returns 16-byte aligned blocks on every target we build
 * for).  The fast path is pd_region_alloc() in region.h.
 */
#include <errno.h>
#include <stdalign.h>
#include <stdint.h>
#include <stdlib.h>

#include "region.h"

/* Larger requests fail at once, as malloc fails anything over PTRDIFF_MAX;
 * below it, rounding and headers cannot overflow. */
#define PD_REGION_MAX ((size_t)PTRDIFF_MAX - 64)

#define PD_REGION_ROUND(n) (((n) + (PD_REGION_ALIGN - 1)) & ~(size_t)(PD_REGION_ALIGN - 1))

_Static_assert(alignof(max_align_t) >= PD_REGION_ALIGN,
               "malloc must return 16-byte aligned blocks");

typedef struct pd_region_block_s {
    struct pd_region_block_s *next;
} pd_region_block_t;

typedef struct pd_region_large_s {
    struct pd_region_large_s *next;
    size_t size;                /* as given to malloc, for r->held */
} pd_region_large_t;

typedef struct pd_region_cleanup_s {
    struct pd_region_cleanup_s *next;
    void (*fn)(void *);
    void *arg;
} pd_region_cleanup_t;

#define PD_REGION_HEAD PD_REGION_ROUND(sizeof(pd_region_t))
#define PD_REGION_BLOCK_HEAD PD_REGION_ROUND(sizeof(pd_region_block_t))
#define PD_REGION_LARGE_HEAD PD_REGION_ROUND(sizeof(pd_region_large_t))

_Static_assert(PD_REGION_HEAD + 2 * PD_REGION_ALIGN <= PD_REGION_BLOCK_MIN,
               "the smallest first block must leave room to allocate");

pd_region_t *pd_region_create(size_t block_size)
{
    pd_region_t *r;

    if (block_size == 0)
        block_size = PD_REGION_BLOCK_DEFAULT;
    else if (block_size < PD_REGION_BLOCK_MIN)
        block_size = PD_REGION_BLOCK_MIN;
    if (block_size > PD_REGION_MAX) {
        errno = ENOMEM;
        return NULL;
    }
    block_size = PD_REGION_ROUND(block_size);
    r = malloc(block_size);
    if (r == NULL) {
        errno = ENOMEM;
        return NULL;
    }
    r->first_data = (char *)r + PD_REGION_HEAD;
    r->ptr = r->first_data;
    r->end = (char *)r + block_size;
    r->blocks = NULL;
    r->spare = NULL;
    r->large = NULL;
    r->cleanups = NULL;
    r->block_size = block_size;
    r->held = block_size;
    r->keep = PD_REGION_KEEP_BYTES;
    return r;
}

void pd_region_set_keep(pd_region_t *r, size_t bytes)
{
    r->keep = bytes;
}

/* A chunk of its own for need bytes (rounded, at most PD_REGION_MAX). */
static void *pd_region_alloc_large(pd_region_t *r, size_t need)
{
    pd_region_large_t *l = malloc(PD_REGION_LARGE_HEAD + need);
    if (l == NULL) {
        errno = ENOMEM;
        return NULL;
    }
    l->size = PD_REGION_LARGE_HEAD + need;
    l->next = r->large;
    r->large = l;
    r->held += l->size;
    return (char *)l + PD_REGION_LARGE_HEAD;
}

__attribute__((noinline))
void *pd_region_alloc_slow(pd_region_t *r, size_t n)
{
    pd_region_block_t *b;
    size_t need;
    char *p;

    if (n > PD_REGION_MAX) {
        errno = ENOMEM;
        return NULL;
    }
    /* malloc(0) may return a unique pointer: the smallest piece is one. */
    need = n == 0 ? PD_REGION_ALIGN : PD_REGION_ROUND(n);
    if (need <= (size_t)(r->end - r->ptr)) {
        p = r->ptr;
        r->ptr = p + need;
        return p;
    }
    if (need > r->block_size - PD_REGION_BLOCK_HEAD)
        return pd_region_alloc_large(r, need);

    /* What is left of the current block is abandoned: a request that did
     * not fit would rarely be followed by one small enough to use it. */
    if (r->spare != NULL) {
        b = r->spare;
        r->spare = b->next;
    } else {
        b = malloc(r->block_size);
        if (b == NULL) {
            errno = ENOMEM;
            return NULL;
        }
        r->held += r->block_size;
    }
    b->next = r->blocks;
    r->blocks = b;
    p = (char *)b + PD_REGION_BLOCK_HEAD;
    r->ptr = p + need;
    r->end = (char *)b + r->block_size;
    return p;
}

int pd_region_cleanup(pd_region_t *r, void (*fn)(void *), void *arg)
{
    pd_region_cleanup_t *c = pd_region_alloc(r, sizeof(*c));

    if (c == NULL)
        return -1;
    c->fn = fn;
    c->arg = arg;
    c->next = r->cleanups;
    r->cleanups = c;
    return 0;
}

/* Run the cleanups, free the large chunks, and keep blocks while the
 * region holds at most keep bytes; the first block always stays.  A
 * cleanup may itself register another (it then runs too) or allocate; the
 * records stay valid because nothing is freed or reused before the last
 * cleanup returned.
 *
 * The blocks in use are the kept ones first (the slow path takes those
 * before it mallocs), then the malloc'd ones, and r->blocks lists them
 * newest first: freeing from its head gives back the blocks malloc'd for
 * this request and keeps those the region had already.  The spare list is
 * trimmed too, for a bound lowered since the last reset. */
static void pd_region_release(pd_region_t *r, size_t keep)
{
    pd_region_cleanup_t *c;

    while ((c = r->cleanups) != NULL) {
        r->cleanups = c->next;
        c->fn(c->arg);
    }
    while (r->large != NULL) {
        pd_region_large_t *l = r->large;

        r->large = l->next;
        r->held -= l->size;
        free(l);
    }
    while (r->blocks != NULL) {
        pd_region_block_t *b = r->blocks;

        r->blocks = b->next;
        if (r->held > keep) {
            r->held -= r->block_size;
            free(b);
        } else {
            b->next = r->spare;
            r->spare = b;
        }
    }
    while (r->held > keep && r->spare != NULL) {
        pd_region_block_t *b = r->spare;

        r->spare = b->next;
        r->held -= r->block_size;
        free(b);
    }
}

void pd_region_reset(pd_region_t *r)
{
    pd_region_release(r, r->keep);
    r->ptr = r->first_data;
    r->end = (char *)r + r->block_size;
}

void pd_region_destroy(pd_region_t *r)
{
    if (r == NULL)
        return;
    pd_region_release(r, 0);
    free(r);
}

size_t pd_region_held(const pd_region_t *r)
{
    return r->held;
}

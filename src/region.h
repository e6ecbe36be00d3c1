/* SPDX-License-Identifier: BSD-2-Clause */
/* poold — per-request regions: bump allocation, everything freed at once.
 *
 * A region takes blocks from the process allocator (the pool or glibc,
 * whichever malloc is) and hands out 16-byte aligned pieces of them by
 * moving a pointer; nothing is freed one by one.  pd_region_reset() makes
 * everything available again for the next request, pd_region_destroy()
 * ends the region.  The region's own header sits at the start of its first
 * block, so a region costs one malloc until it outgrows that block.
 *
 * A reset keeps the blocks a request took, up to a bound, and the next
 * request uses them before it asks malloc for more: a region reused for
 * many requests holds the blocks of its biggest request (capped) and stops
 * asking malloc for blocks, instead of handing them back to malloc, which
 * may return them to the kernel, only to fault them in again a request
 * later.
 *
 * This header and region.c need nothing but the C library, so that the
 * micro-benchmarks can compile them in as well as the server.
 */
#ifndef PD_REGION_H
#define PD_REGION_H

#include <stddef.h>

/* Every pointer a region hands out is aligned to this. */
#define PD_REGION_ALIGN 16
/* Bytes per block when pd_region_create() is given 0. */
#define PD_REGION_BLOCK_DEFAULT 4096
/* Smaller block sizes are raised to this: the first block must hold the
 * region's header and still leave room to allocate. */
#define PD_REGION_BLOCK_MIN 256
/* Bytes of blocks, the first included, that a region keeps across a reset
 * unless pd_region_set_keep() says otherwise; the first block is kept
 * whatever the bound.  64 KiB holds the largest request the server's
 * /heavy makes under its default limits (128 header fields in 8 KiB of
 * head: about 40 KiB in 4 KiB blocks) with room to spare, so a keep-alive
 * connection stops calling malloc after its first requests, while an idle
 * connection costs at most a quarter of the 256 KiB output backlog the
 * server already allows it. */
#define PD_REGION_KEEP_BYTES 65536

typedef struct pd_region_s pd_region_t;

/* The fields are here only so that the bump below can be inlined; nothing
 * outside region.c reads or writes them. */
struct pd_region_s {
    char *ptr;                          /* next free byte of the current block */
    char *end;                          /* end of the current block */
    struct pd_region_block_s *blocks;   /* blocks after the first, newest first */
    struct pd_region_block_s *spare;    /* kept by a reset, not in use yet */
    struct pd_region_large_s *large;    /* chunks over a block's usable size */
    struct pd_region_cleanup_s *cleanups;   /* newest first: run in that order */
    char *first_data;                   /* where the first block's space starts */
    size_t block_size;                  /* bytes per block, a multiple of 16 */
    size_t held;                        /* bytes now taken from malloc */
    size_t keep;                        /* bytes of blocks a reset may keep */
};

/* Create a region whose blocks are block_size bytes (0 = the default of
 * PD_REGION_BLOCK_DEFAULT; less than PD_REGION_BLOCK_MIN is raised to it,
 * and the size is rounded up to a multiple of 16), which keeps up to
 * PD_REGION_KEEP_BYTES of blocks across a reset.  Returns NULL with
 * errno = ENOMEM when the first block cannot be had. */
pd_region_t *pd_region_create(size_t block_size);

/* From the next reset on, keep at most bytes of blocks, the first one
 * included, for the requests after it; the first block is kept even when
 * it alone is larger, so 0 makes every reset free the blocks a request
 * added.  Blocks beyond the bound are freed at that reset, not now:
 * pointers r gave out stay valid until then. */
void pd_region_set_keep(pd_region_t *r, size_t bytes);

/* The slow path of pd_region_alloc(): n == 0, overflow, a new block (a
 * kept one if there is one) or a chunk of its own.  Call pd_region_alloc()
 * instead. */
void *pd_region_alloc_slow(pd_region_t *r, size_t n);

/* n bytes from r, 16-byte aligned, valid until the next reset or destroy.
 * n == 0 gives a unique non-NULL pointer, as malloc(0) may.  Overflow or no
 * memory: NULL with errno = ENOMEM.  A request larger than a block's usable
 * size gets a malloc'd chunk of its own, freed with the region.
 *
 * Budget: one add and mask, one compare, one store on the fast path.  A
 * rounded size of 0 (n == 0, or n so large that the rounding wrapped)
 * becomes SIZE_MAX after the subtraction and so falls to the slow path
 * with the same single test. */
static inline void *pd_region_alloc(pd_region_t *r, size_t n)
{
    size_t need = (n + (PD_REGION_ALIGN - 1)) & ~(size_t)(PD_REGION_ALIGN - 1);
    char *p = r->ptr;

    if (__builtin_expect(need - 1 < (size_t)(r->end - p), 1)) {
        r->ptr = p + need;
        return p;
    }
    return pd_region_alloc_slow(r, n);
}

/* Run fn(arg) when r is next reset or destroyed; cleanups run most
 * recently added first.  The record is allocated from r itself.  Returns 0,
 * or -1 with errno = ENOMEM (fn is then not registered). */
int pd_region_cleanup(pd_region_t *r, void (*fn)(void *), void *arg);

/* Run the cleanups, free the large chunks, keep blocks up to the bound
 * (PD_REGION_KEEP_BYTES or pd_region_set_keep()) for the next requests and
 * free the rest, and rewind to the start of the first block.  A region
 * reused for many requests thus holds, between them, the blocks of its
 * biggest request, at most the bound (at least its first block), and
 * allocates nothing from malloc for a request that fits in them.  Every
 * pointer r gave out is invalid afterwards. */
void pd_region_reset(pd_region_t *r);

/* Run the cleanups and free everything r holds, r included.  NULL is a
 * no-op. */
void pd_region_destroy(pd_region_t *r);

/* Bytes r holds from malloc now: its blocks, in use or kept, and its large
 * chunks (headers included).  Tests and statistics use it to see a region
 * stay flat. */
size_t pd_region_held(const pd_region_t *r);

#endif /* PD_REGION_H */

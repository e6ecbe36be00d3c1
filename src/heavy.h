/* SPDX-License-Identifier: BSD-2-Clause */
/* poold — /heavy's workload: the hash map one /heavy request builds, the
 * allocations it makes and the order it frees them in.  pd_heavy_build and
 * pd_heavy_release are the entry points; routes.c renders the map into the
 * response, and bench/poolbench replays the allocations of the same code
 * (pb-workloads.c), so the benchmark and the server cannot drift apart.
 */
#ifndef PD_HEAVY_H
#define PD_HEAVY_H

#include <stddef.h>
#include <stdint.h>

#include "poold.h"

#define PD_HEAVY_BUCKETS 64     /* per unit of scale */
#define PD_HEAVY_BUF 1024       /* the render buffer */

/* Where the map's blocks come from.  release may be NULL: then nothing is
 * freed one by one (a region, which its owner resets). */
typedef struct pd_heavy_alloc_s {
    void *(*alloc)(void *arg, size_t n);
    void (*release)(void *arg, void *p);
    void *arg;
} pd_heavy_alloc_t;

typedef struct pd_hnode_s {
    struct pd_hnode_s *next;    /* bucket chain */
    struct pd_hnode_s *order;   /* insertion order: rendering is deterministic */
    char *key;                  /* separate allocations, as a real map keeps them */
    char *value;
    size_t klen;
    size_t vlen;
    uint64_t hash;
    char prefix[48];            /* lower-cased key start: cheap compares, and
                                   it puts the node in the 96..112-byte class */
} pd_hnode_t;

typedef struct pd_hmap_s {
    pd_hnode_t **buckets;
    size_t nbuckets;            /* PD_HEAVY_BUCKETS times the scale */
    pd_hnode_t *first;          /* the request's fields, then the generated lines */
    pd_hnode_t **tail;
    char *buf;                  /* PD_HEAVY_BUF bytes to render through, so the
                                   count of allocations does not depend on the
                                   size of what is written */
    unsigned allocs;            /* allocations made so far */
    pd_heavy_alloc_t alloc;
} pd_hmap_t;

/* Build m for a request: the bucket array, a copy of each of its nfields
 * header fields (node, key, value), PD_HEAVY_LINES * scale generated lines
 * (node, key, value; values of 64..111 characters that name worker_index
 * and nfields), then the render buffer: PD_HEAVY_ALLOCS_SCALED(nfields,
 * scale) allocations from *a, in that order.  Returns PD_OK, or PD_ERROR
 * when an allocation failed; either way m is ready for pd_heavy_release. */
int pd_heavy_build(pd_hmap_t *m, const pd_heavy_alloc_t *a, const pd_header_t *fields,
                   unsigned nfields, int worker_index, unsigned scale);

/* The first node of m with n's key (compared without case): n itself
 * unless an earlier field had the same name. */
pd_hnode_t *pd_heavy_find(const pd_hmap_t *m, const pd_hnode_t *n);

/* Free everything pd_heavy_build allocated, as a handler frees it: the
 * render buffer, then per node in insertion order its key, its value and
 * the node, then the bucket array. */
void pd_heavy_release(pd_hmap_t *m);

#endif /* PD_HEAVY_H */

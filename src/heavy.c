/* SPDX-License-Identifier: BSD-2-Clause */
/* poold — /heavy's workload: the hash map a request builds and frees.
 *
 * Allocations per request, the contract documented in poold(8):
 *     3 per request header field   (node, key, value)
 *   + 1                             (bucket array, 512 bytes)
 *   + 3 * PD_HEAVY_LINES = 90       (node, key, value per response line)
 *   + 1                             (the 1 KiB render buffer)
 * = 3 * headers + 92.  Nodes are 104 bytes and response values 65..112, so
 * most allocations land between 64 and 128 bytes, where web servers'
 * header maps put them.
 *
 * /heavy?n=K scales the map: K times the generated lines and K times the
 * buckets, so the count is 3 * headers + 2 + 90 * K.  It is there for
 * bursts that make one worker's heap grow and shrink again (bench/ab's
 * footprint pass); plain /heavy stays the fixed workload.
 *
 * Every block comes from the caller's pd_heavy_alloc_t: malloc and free,
 * the worker's request region (routes.c), or poolbench's recorder.  Only
 * pd_heavy_malloc and pd_heavy_free call it, so the arms of a comparison
 * differ in nothing else.  Entry points: pd_heavy_build, pd_heavy_release.
 */
#include "config.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "heavy.h"

_Static_assert(sizeof(pd_hnode_t) >= 96 && sizeof(pd_hnode_t) <= 112,
               "/heavy nodes must stay in the 96..112-byte range");

static void *pd_heavy_malloc(pd_hmap_t *m, size_t n)
{
    void *p = m->alloc.alloc(m->alloc.arg, n);

    if (p != NULL)
        m->allocs++;
    return p;
}

static void pd_heavy_free(pd_hmap_t *m, void *p)
{
    if (m->alloc.release != NULL)
        m->alloc.release(m->alloc.arg, p);
}

static uint64_t pd_heavy_hash(const char *s, size_t n)
{
    uint64_t h = 14695981039346656037ull;   /* FNV-1a over the lower-cased key */

    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];

        h = (h ^ (c >= 'A' && c <= 'Z' ? c + 32 : c)) * 1099511628211ull;
    }
    return h;
}

static char *pd_heavy_strdup(pd_hmap_t *m, const char *s, size_t n)
{
    char *p = pd_heavy_malloc(m, n + 1);

    if (p != NULL) {
        memcpy(p, s, n);
        p[n] = '\0';
    }
    return p;
}

/* Insert a copy of key and value (a multimap: repeated fields stay
 * separate, so the allocation count does not depend on their names). */
static int pd_hmap_add(pd_hmap_t *m, const char *k, size_t kn, const char *v, size_t vn)
{
    pd_hnode_t *node = pd_heavy_malloc(m, sizeof(*node));
    size_t b;

    if (node == NULL)
        return PD_ERROR;
    memset(node, 0, sizeof(*node));
    node->key = pd_heavy_strdup(m, k, kn);
    node->value = pd_heavy_strdup(m, v, vn);
    if (node->key == NULL || node->value == NULL) {
        pd_heavy_free(m, node->key);
        pd_heavy_free(m, node->value);
        pd_heavy_free(m, node);
        return PD_ERROR;
    }
    node->klen = kn;
    node->vlen = vn;
    node->hash = pd_heavy_hash(k, kn);
    for (size_t i = 0; i < kn && i < sizeof(node->prefix) - 1; i++) {
        unsigned char c = (unsigned char)k[i];

        node->prefix[i] = (char)(c >= 'A' && c <= 'Z' ? c + 32 : c);
    }
    b = node->hash % m->nbuckets;
    node->next = m->buckets[b];
    m->buckets[b] = node;
    *m->tail = node;
    m->tail = &node->order;
    return PD_OK;
}

/* The i-th generated response value: 64 to 111 characters, deterministic. */
static size_t pd_heavy_value(char *buf, int i, int worker_index, unsigned nh)
{
    static const char fill[] = "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                               "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ";
    size_t want = 64 + (size_t)(i * 7) % 48;
    int n = snprintf(buf, 128, "line=%d;worker=%d;headers=%u;", i, worker_index, nh);

    memcpy(buf + n, fill, want - (size_t)n);
    buf[want] = '\0';
    return want;
}

int pd_heavy_build(pd_hmap_t *m, const pd_heavy_alloc_t *a, const pd_header_t *fields,
                   unsigned nfields, int worker_index, unsigned scale)
{
    const int lines = PD_HEAVY_LINES * (int)scale;

    memset(m, 0, sizeof(*m));
    m->nbuckets = PD_HEAVY_BUCKETS * (size_t)scale;
    m->tail = &m->first;
    m->alloc = *a;
    m->buckets = pd_heavy_malloc(m, m->nbuckets * sizeof(*m->buckets));
    if (m->buckets == NULL)
        return PD_ERROR;
    memset(m->buckets, 0, m->nbuckets * sizeof(*m->buckets));

    for (unsigned i = 0; i < nfields; i++) {
        const pd_header_t *h = &fields[i];

        if (pd_hmap_add(m, h->name, h->nlen, h->value, h->vlen) != PD_OK)
            return PD_ERROR;
    }
    for (int i = 0; i < lines; i++) {
        char key[16], value[128];
        int kn = snprintf(key, sizeof(key), "X-Heavy-%02d", i);
        size_t vn = pd_heavy_value(value, i, worker_index, nfields);

        if (pd_hmap_add(m, key, (size_t)kn, value, vn) != PD_OK)
            return PD_ERROR;
    }
    m->buf = pd_heavy_malloc(m, PD_HEAVY_BUF);
    return m->buf != NULL ? PD_OK : PD_ERROR;
}

pd_hnode_t *pd_heavy_find(const pd_hmap_t *m, const pd_hnode_t *n)
{
    pd_hnode_t *found = m->buckets[n->hash % m->nbuckets];

    while (found != NULL && found != n &&
           !(found->hash == n->hash && strcmp(found->prefix, n->prefix) == 0 &&
             found->klen == n->klen && strcasecmp(found->key, n->key) == 0))
        found = found->next;
    return found;
}

void pd_heavy_release(pd_hmap_t *m)
{
    pd_hnode_t *n = m->first;

    pd_heavy_free(m, m->buf);
    while (n != NULL) {
        pd_hnode_t *next = n->order;

        pd_heavy_free(m, n->key);
        pd_heavy_free(m, n->value);
        pd_heavy_free(m, n);
        n = next;
    }
    pd_heavy_free(m, m->buckets);
}

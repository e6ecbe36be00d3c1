/* SPDX-License-Identifier: BSD-2-Clause */
/* poolbench — the workloads.
 *
 * Every workload is written once as an always-inline body over a pair of
 * allocator functions and instantiated per allocator, so that each variant
 * calls its allocator directly (no pointer call the others do not pay):
 * `pool` calls pool_malloc/pool_free, `malloc` calls malloc/free (glibc or
 * whatever LD_PRELOAD put there), `region` bumps a pointer in this worker's
 * region (pd_region_alloc, inlined as the server inlines it), frees
 * nothing and resets the region at the end of every request, `none` calls
 * a do-nothing allocator whose cost callgrind.sh subtracts.  Random sizes
 * come from a fixed-seed generator, one stream per worker, the same for
 * every allocator.
 */
#include "config.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "heavy.h"
#include "poolbench.h"
#include "shmpool.h"

int64_t pb_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void pb_relax(unsigned *spins)
{
    if (++*spins < 64)
        __builtin_ia32_pause();
    else
        sched_yield();
}

typedef struct pb_ops_s {
    void *(*alloc)(size_t n);
    void (*release)(void *p);
    void (*end_request)(void);  /* NULL: a request's end is its frees */
} pb_ops_t;

#define PB_INLINE static inline __attribute__((always_inline))

/* xorshift64*: cheap, and the same sequence on every run and allocator. */
PB_INLINE uint64_t rng_next(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * UINT64_C(2685821657736338717);
}

static uint64_t rng_seed(unsigned worker)
{
    return UINT64_C(0x9e3779b97f4a7c15) * (worker + 1) ^ UINT64_C(0x5eed);
}

/* A mix of sizes: bands of lo..hi bytes, each drawn with its share of
 * 1,000 (the shares add up to 1,000), uniform within the band. */
typedef struct pb_band_s {
    unsigned share;
    size_t lo, hi;
} pb_band_t;

static size_t band_size(const pb_band_t *b, uint64_t r)
{
    unsigned pick = (unsigned)(r % 1000);
    uint64_t v = r >> 16;
    for (; pick >= b->share; b++)
        pick -= b->share;
    return b->lo + v % (b->hi - b->lo + 1);
}

/* Write every 4 KiB page of a block and its last byte, as a user of the
 * whole block would: the pages an allocator hands out fresh (or got back
 * from the OS) fault in here. */
static void touch_pages(char *p, size_t n)
{
    for (size_t off = 0; off < n; off += 4096)
        p[off] = 1;
    p[n - 1] = 1;
}

/* ------------------------------------------------------------------------ */
/* Requests                                                                  */
/* ------------------------------------------------------------------------ */

/* A region frees nothing before the end of a request, so where it runs a
 * workload, every arm runs it as requests: c->request blocks allocated
 * (of `size` bytes, or 1..size at random), then all of them freed in
 * allocation order, as a handler frees its objects — or, for the region,
 * nothing freed and the region reset.  A count that is not a multiple of
 * the request ends with a shorter one. */
PB_INLINE void request_body(const pb_ops_t *ops, pb_ctx_t *c, size_t size, bool random)
{
    void **v = c->scratch;
    uint64_t rng = rng_seed(c->worker);
    c->t_begin = pb_now_ns();
    for (uint64_t left = c->pairs; left > 0;) {
        unsigned n = left < c->request ? (unsigned)left : c->request;
        for (unsigned i = 0; i < n; i++) {
            v[i] = ops->alloc(random ? 1 + rng_next(&rng) % size : size);
            PB_ESCAPE(v[i]);
        }
        for (unsigned i = 0; i < n; i++)
            ops->release(v[i]);
        if (ops->end_request != NULL)
            ops->end_request();
        left -= n;
    }
    c->t_end = pb_now_ns();
}

/* ------------------------------------------------------------------------ */
/* fixed16, fixed64                                                          */
/* ------------------------------------------------------------------------ */

PB_INLINE void fixed_body(const pb_ops_t *ops, pb_ctx_t *c, size_t size)
{
    if (c->request > 0) {
        request_body(ops, c, size, false);
        return;
    }
    c->t_begin = pb_now_ns();
    for (uint64_t i = 0; i < c->pairs; i++) {
        void *p = ops->alloc(size);
        PB_ESCAPE(p);
        ops->release(p);
    }
    c->t_end = pb_now_ns();
}

/* ------------------------------------------------------------------------ */
/* batch                                                                     */
/* ------------------------------------------------------------------------ */

/* 10,000 blocks of 16 B allocated, then all freed: the central cache and
 * page heap see whole batches, which a malloc/free loop never shows. */
#define BATCH_BLOCKS 10000

PB_INLINE void batch_body(const pb_ops_t *ops, pb_ctx_t *c)
{
    void **v = c->scratch;
    c->phase_ns[0] = c->phase_ns[1] = 0;
    c->t_begin = pb_now_ns();
    for (uint64_t left = c->pairs; left > 0;) {
        unsigned n = left < BATCH_BLOCKS ? (unsigned)left : BATCH_BLOCKS;
        int64_t t0 = pb_now_ns();
        for (unsigned i = 0; i < n; i++) {
            v[i] = ops->alloc(16);
            PB_ESCAPE(v[i]);
        }
        int64_t t1 = pb_now_ns();
        for (unsigned i = 0; i < n; i++)
            ops->release(v[i]);
        int64_t t2 = pb_now_ns();
        c->phase_ns[0] += t1 - t0;
        c->phase_ns[1] += t2 - t1;
        left -= n;
    }
    c->t_end = pb_now_ns();
}

/* ------------------------------------------------------------------------ */
/* random256, random8k                                                       */
/* ------------------------------------------------------------------------ */

/* A working set of 1,000 live blocks; each pair frees a random one and
 * puts a block of a random size in its place.  The set is filled before
 * and emptied after the timed part. */
#define RANDOM_SLOTS 1000

PB_INLINE void random_body(const pb_ops_t *ops, pb_ctx_t *c, size_t max)
{
    void **v = c->scratch;
    uint64_t rng = rng_seed(c->worker);
    if (c->request > 0) {
        request_body(ops, c, max, true);
        return;
    }
    for (unsigned i = 0; i < RANDOM_SLOTS; i++) {
        v[i] = ops->alloc(1 + rng_next(&rng) % max);
        PB_ESCAPE(v[i]);
    }
    c->t_begin = pb_now_ns();
    for (uint64_t i = 0; i < c->pairs; i++) {
        uint64_t r = rng_next(&rng);
        unsigned k = (unsigned)(r % RANDOM_SLOTS);
        ops->release(v[k]);
        v[k] = ops->alloc(1 + (r >> 32) % max);
        PB_ESCAPE(v[k]);
    }
    c->t_end = pb_now_ns();
    for (unsigned i = 0; i < RANDOM_SLOTS; i++)
        ops->release(v[i]);
}

/* ------------------------------------------------------------------------ */
/* heavy                                                                     */
/* ------------------------------------------------------------------------ */

/* The allocations of one /heavy request, for the request wrk sends: one
 * header field, "Host: 127.0.0.1:8080".  pb_workloads_init runs the
 * server's own map (src/heavy.c, pd_heavy_build then pd_heavy_release) once
 * with an allocator that records each block's size and the order of the
 * frees; the timed loop replays that record.  So the sizes are the real
 * ones (a node is sizeof(pd_hnode_t)), and poold(8)'s 3 h + 92 = 95 blocks
 * are checked at start-up.  The handler's copying, hashing and rendering
 * are not repeated: only the allocator is measured.  A region frees
 * nothing and is reset at the end of each request. */
#define HEAVY_OBJECTS PD_HEAVY_ALLOCS(1)

static size_t heavy_size[HEAVY_OBJECTS];
static unsigned heavy_free_order[HEAVY_OBJECTS];    /* allocation indices */

typedef struct heavy_record_s {
    void *block[HEAVY_OBJECTS];
    unsigned allocs, frees;
} heavy_record_t;

static void *heavy_record_alloc(void *arg, size_t n)
{
    heavy_record_t *rec = arg;
    void *p;

    if (rec->allocs == HEAVY_OBJECTS || (p = malloc(n)) == NULL)
        return NULL;
    heavy_size[rec->allocs] = n;
    rec->block[rec->allocs++] = p;
    return p;
}

static void heavy_record_free(void *arg, void *p)
{
    heavy_record_t *rec = arg;

    for (unsigned i = 0; i < rec->allocs && p != NULL; i++)
        if (rec->block[i] == p) {
            heavy_free_order[rec->frees++] = i;
            free(p);
            return;
        }
}

void pb_workloads_init(void)
{
    static const char name[] = "Host", value[] = "127.0.0.1:8080";
    const pd_header_t host = { name, value, sizeof name - 1, sizeof value - 1 };
    heavy_record_t rec = { .allocs = 0 };
    const pd_heavy_alloc_t record = { heavy_record_alloc, heavy_record_free, &rec };
    pd_hmap_t m;
    int rc = pd_heavy_build(&m, &record, &host, 1, 0, 1);

    pd_heavy_release(&m);
    if (rc != PD_OK || rec.allocs != HEAVY_OBJECTS || rec.frees != HEAVY_OBJECTS) {
        fprintf(stderr, "poolbench: /heavy's map made %u allocations and %u frees, "
                "not %u\n", rec.allocs, rec.frees, (unsigned)HEAVY_OBJECTS);
        exit(1);
    }
}

/* A count that is not a multiple of HEAVY_OBJECTS ends with a partial
 * round: the first n blocks, freed in the handler's order. */
PB_INLINE void heavy_body(const pb_ops_t *ops, pb_ctx_t *c)
{
    void *obj[HEAVY_OBJECTS];
    c->t_begin = pb_now_ns();
    for (uint64_t left = c->pairs; left > 0;) {
        unsigned n = left < HEAVY_OBJECTS ? (unsigned)left : HEAVY_OBJECTS;
        for (unsigned i = 0; i < n; i++) {
            obj[i] = ops->alloc(heavy_size[i]);
            PB_ESCAPE(obj[i]);
        }
        for (unsigned i = 0; i < HEAVY_OBJECTS; i++)
            if (heavy_free_order[i] < n)
                ops->release(obj[heavy_free_order[i]]);
        if (ops->end_request != NULL)
            ops->end_request();
        left -= n;
    }
    c->t_end = pb_now_ns();
}

/* ------------------------------------------------------------------------ */
/* pingpong                                                                  */
/* ------------------------------------------------------------------------ */

static bool ring_push(pb_ring_t *r, void *p)
{
    uint64_t t = atomic_load_explicit(&r->tail, memory_order_relaxed);
    if (t - atomic_load_explicit(&r->head, memory_order_acquire) == PB_RING_SLOTS)
        return false;
    r->slot[t % PB_RING_SLOTS] = p;
    atomic_store_explicit(&r->tail, t + 1, memory_order_release);
    return true;
}

/* Free the blocks waiting in r, at most max of them; returns how many.
 * head moves only after the frees, so a producer that sees r empty knows
 * its blocks are freed. */
PB_INLINE unsigned ring_drain(const pb_ops_t *ops, pb_ring_t *r, uint64_t max)
{
    uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
    uint64_t t = atomic_load_explicit(&r->tail, memory_order_acquire);
    if (t - h > max)
        t = h + max;
    for (uint64_t i = h; i < t; i++)
        ops->release(r->slot[i % PB_RING_SLOTS]);
    atomic_store_explicit(&r->head, t, memory_order_release);
    return (unsigned)(t - h);
}

/* The consumer's end of a run: free what r brings until its producer has
 * finished run seq and r is empty. */
PB_INLINE void ring_drain_to_end(const pb_ops_t *ops, pb_ring_t *r, uint64_t seq)
{
    unsigned spins = 0;
    for (;;) {
        bool done = atomic_load_explicit(&r->done, memory_order_acquire) == seq;
        if (ring_drain(ops, r, PB_RING_SLOTS) > 0)
            spins = 0;
        else if (done)
            break;
        else
            pb_relax(&spins);
    }
}

/* Worker i allocates, hands every block to worker i+1 (mod N) and frees
 * what worker i-1 handed it, so every free is of another worker's block.
 * A worker whose outgoing ring is full drains its incoming one while it
 * waits, so a cycle of full rings always moves.  Otherwise it frees, every
 * PINGPONG_EVERY blocks, no more than that many: a worker that fell behind
 * and emptied its whole incoming ring each time freed up to a ring's worth
 * per PINGPONG_EVERY it allocated, fell further behind, and ended a
 * consumer of the other's blocks, its cache filling while the other's
 * emptied.  The cell then measured a producer and a consumer (prodcons)
 * in some runs and an exchange in others, for every allocator. */
#define PINGPONG_EVERY 16

PB_INLINE void pingpong_body(const pb_ops_t *ops, pb_ctx_t *c)
{
    pb_ring_t *in = &c->rings[(c->worker + c->workers - 1) % c->workers];
    pb_ring_t *out = &c->rings[c->worker];
    uint64_t rng = rng_seed(c->worker);
    unsigned spins = 0;
    c->t_begin = pb_now_ns();
    for (uint64_t i = 0; i < c->pairs; i++) {
        void *p = ops->alloc(1 + rng_next(&rng) % 256);
        PB_ESCAPE(p);
        while (!ring_push(out, p))
            if (ring_drain(ops, in, PB_RING_SLOTS) == 0)
                pb_relax(&spins);
        if (i % PINGPONG_EVERY == PINGPONG_EVERY - 1)
            ring_drain(ops, in, PINGPONG_EVERY);
        spins = 0;
    }
    atomic_store_explicit(&out->done, c->seq, memory_order_release);
    ring_drain_to_end(ops, in, c->seq);
    c->t_end = pb_now_ns();
}

/* ------------------------------------------------------------------------ */
/* prodcons                                                                  */
/* ------------------------------------------------------------------------ */

/* The blocks of a request handed from an accept loop to a worker: 60 %
 * 16-128 B, 30 % 129-512 B, 10 % 513 B-1 KiB (216 B on average). */
static const pb_band_t prodcons_bands[] = { { 600, 16, 128 }, { 300, 129, 512 },
                                            { 100, 513, 1024 } };

/* Worker 0 allocates every block, writes its first and last byte, and
 * hands block i to worker 1 + i mod (N-1) through ring 1 + i mod (N-1),
 * waiting while that ring is full; workers 1..N-1 free what they are
 * handed.  So every allocation is in one worker and every free in
 * another, and no worker's frees ever refill its own allocations.  The
 * producer's run ends only when the consumers have freed its last block:
 * every worker's time spans the whole pipeline, and a pair is what the
 * pipeline takes per block.  That also keeps shmpool.h's ownership invariant
 * under -P without pool_adopt (which takes the class lock, on every
 * handover): no block is live in another process once its owner is past
 * the run. */
PB_INLINE void prodcons_body(const pb_ops_t *ops, pb_ctx_t *c)
{
    unsigned spins = 0;
    c->t_begin = pb_now_ns();
    if (c->worker > 0) {
        ring_drain_to_end(ops, &c->rings[c->worker], c->seq);
        c->t_end = pb_now_ns();
        return;
    }
    uint64_t rng = rng_seed(0);
    unsigned to = 1;
    for (uint64_t i = 0; i < c->pairs; i++) {
        size_t n = band_size(prodcons_bands, rng_next(&rng));
        char *p = ops->alloc(n);
        p[0] = p[n - 1] = 1;
        while (!ring_push(&c->rings[to], p))
            pb_relax(&spins);
        spins = 0;
        if (++to == c->workers)
            to = 1;
    }
    for (unsigned k = 1; k < c->workers; k++)
        atomic_store_explicit(&c->rings[k].done, c->seq, memory_order_release);
    /* A ring's head passes a block only once it is freed. */
    for (unsigned k = 1; k < c->workers; k++)
        while (atomic_load_explicit(&c->rings[k].head, memory_order_acquire) !=
               atomic_load_explicit(&c->rings[k].tail, memory_order_relaxed))
            pb_relax(&spins);
    c->t_end = pb_now_ns();
}

/* ------------------------------------------------------------------------ */
/* frag                                                                      */
/* ------------------------------------------------------------------------ */

/* A long-running server's heap in a bounded run: 4,000 live blocks of
 * mixed sizes (70% 16-256 B, 25% up to 4 KiB, 4.5% up to 64 KiB, 0.5% up
 * to 512 KiB, so some take whole spans or mmap), replaced at random, every
 * page of a block touched as a user would; then seven of every eight blocks
 * freed, leaving survivors scattered over the heap, and the memory the
 * process holds is read, and a 10 MiB block is asked for. */
#define FRAG_SLOTS 4000
#define FRAG_BIG ((size_t)10 << 20)

static const pb_band_t frag_bands[] = { { 700, 16, 256 }, { 250, 257, 4096 },
                                        { 45, 4097, 65536 }, { 5, 65537, 524288 } };

/* The value of a "Name:   N kB" line of a /proc file, or -1. */
static long proc_kb(const char *path, const char *name)
{
    FILE *f = fopen(path, "re");
    char line[256];
    size_t n = strlen(name);
    long v = -1;
    if (f == NULL)
        return -1;
    while (fgets(line, sizeof line, f) != NULL)
        if (strncmp(line, name, n) == 0 && line[n] == ':') {
            v = strtol(line + n + 1, NULL, 10);
            break;
        }
    fclose(f);
    return v;
}

static void frag_measure(pb_mem_t *m)
{
    m->rss_kb = proc_kb("/proc/self/smaps_rollup", "Rss");
    m->pss_kb = proc_kb("/proc/self/smaps_rollup", "Pss");
    m->pss_shmem_kb = proc_kb("/proc/self/smaps_rollup", "Pss_Shmem");
    m->rss_shmem_kb = proc_kb("/proc/self/status", "RssShmem");
    m->valid = true;
}

PB_INLINE void frag_body(const pb_ops_t *ops, pb_ctx_t *c)
{
    void **v = c->scratch;
    uint64_t rng = rng_seed(c->worker);
    memset(v, 0, FRAG_SLOTS * sizeof *v);
    c->t_begin = pb_now_ns();
    for (uint64_t i = 0; i < c->pairs; i++) {
        uint64_t r = rng_next(&rng);
        unsigned k = (unsigned)(r % FRAG_SLOTS);
        size_t n = band_size(frag_bands, rng_next(&rng));
        ops->release(v[k]);
        v[k] = ops->alloc(n);
        if (v[k] != NULL)
            touch_pages(v[k], n);
    }
    for (unsigned k = 0; k < FRAG_SLOTS; k++)
        if (k % 8 != 0) {
            ops->release(v[k]);
            v[k] = NULL;
        }
    c->t_end = pb_now_ns();
    /* Counted mode (--pairs) runs one thread without a barrier. */
    if (c->barrier != NULL)
        pthread_barrier_wait(c->barrier);
    if (c->measure) {
        frag_measure(&c->mem);
        char *big = ops->alloc(FRAG_BIG);
        c->mem.big_ok = big != NULL;
        if (big != NULL) {
            touch_pages(big, FRAG_BIG);
            ops->release(big);
        }
    }
    if (c->barrier != NULL)
        pthread_barrier_wait(c->barrier);
    for (unsigned k = 0; k < FRAG_SLOTS; k += 8)
        ops->release(v[k]);
}

/* ------------------------------------------------------------------------ */
/* large                                                                     */
/* ------------------------------------------------------------------------ */

/* One block at a time of 5-120 MiB (uniform, from the worker's stream),
 * every page written, then freed: whether the next block is faulted in
 * again page by page depends on what the allocator did with the last one
 * (kept it, or gave it back to the kernel). */
#define LARGE_MIN ((size_t)5 << 20)
#define LARGE_MAX ((size_t)120 << 20)

static __attribute__((noinline, noreturn)) void large_failed(size_t n)
{
    fprintf(stderr, "poolbench: large: an allocation of %zu bytes failed\n", n);
    abort();
}

PB_INLINE void large_body(const pb_ops_t *ops, pb_ctx_t *c)
{
    uint64_t rng = rng_seed(c->worker);
    c->t_begin = pb_now_ns();
    for (uint64_t i = 0; i < c->pairs; i++) {
        size_t n = LARGE_MIN + rng_next(&rng) % (LARGE_MAX - LARGE_MIN + 1);
        char *p = ops->alloc(n);
        if (p == NULL)
            large_failed(n);
        touch_pages(p, n);
        ops->release(p);
    }
    c->t_end = pb_now_ns();
}

/* ------------------------------------------------------------------------ */
/* thrash                                                                    */
/* ------------------------------------------------------------------------ */

/* Each worker keeps PB_THRASH_OBJECTS blocks of 8-64 B of its own and
 * writes them over and over: a pair reads and writes every byte of one
 * block THRASH_WRITES times, then frees it and puts a block of the same
 * size in its place.  No block is shared, yet where an allocator puts two
 * workers' blocks on one cache line, or on the two lines the prefetcher
 * pulls in together, their writes fight over it: the time shows that, and
 * callgrind, which counts instructions and not lines, shows nothing (so
 * this is timed only).  The blocks are first allocated in turn, one per
 * worker at a time with a barrier between, so where they land does not
 * depend on timing; worker 0 then counts how many of its blocks start
 * within 64 and within 128 B of another worker's block.  Under -P the
 * count means something for the pool only: a private heap's addresses are
 * its process's own. */
#define THRASH_WRITES 100

/* A worker's blocks are read from rings[].slot, where each published them. */
static void thrash_count(pb_ctx_t *c)
{
    c->near[0] = c->near[1] = 0;
    for (unsigned j = 0; j < PB_THRASH_OBJECTS; j++) {
        uintptr_t a = (uintptr_t)c->rings[0].slot[j], d = UINTPTR_MAX;
        for (unsigned i = 1; i < c->workers; i++)
            for (unsigned k = 0; k < PB_THRASH_OBJECTS; k++) {
                uintptr_t b = (uintptr_t)c->rings[i].slot[k];
                uintptr_t x = a > b ? a - b : b - a;
                if (x < d)
                    d = x;
            }
        c->near[0] += d <= 64;
        c->near[1] += d <= 128;
    }
}

/* volatile: every pass is a load and a store the compiler cannot merge. */
static void thrash_write(volatile char *p, size_t n)
{
    for (unsigned w = 0; w < THRASH_WRITES; w++)
        for (size_t k = 0; k < n; k++)
            p[k] = (char)(p[k] + 1);
}

PB_INLINE void thrash_body(const pb_ops_t *ops, pb_ctx_t *c)
{
    void **v = c->scratch;
    size_t size[PB_THRASH_OBJECTS];
    uint64_t rng = rng_seed(c->worker);
    for (unsigned j = 0; j < PB_THRASH_OBJECTS; j++)
        for (unsigned i = 0; i < c->workers; i++) {
            if (i == c->worker) {
                size[j] = 8 * (1 + rng_next(&rng) % 8);
                v[j] = ops->alloc(size[j]);
                c->rings[i].slot[j] = v[j];
            }
            pthread_barrier_wait(c->barrier);
        }
    if (c->worker == 0)
        thrash_count(c);
    c->t_begin = pb_now_ns();
    for (uint64_t i = 0; i < c->pairs; i++) {
        unsigned j = (unsigned)(i % PB_THRASH_OBJECTS);
        thrash_write(v[j], size[j]);
        ops->release(v[j]);
        v[j] = ops->alloc(size[j]);
        PB_ESCAPE(v[j]);
    }
    c->t_end = pb_now_ns();
    for (unsigned j = 0; j < PB_THRASH_OBJECTS; j++)
        ops->release(v[j]);
}

/* ------------------------------------------------------------------------ */
/* leak                                                                      */
/* ------------------------------------------------------------------------ */

/* Rounds of LEAK_ROUND blocks of 16 B-1 KiB allocated, then freed in
 * allocation order but for every LEAK_EVERY-th, which is kept: the heap
 * grows slowly while it churns, as a program's does that leaks.  The kept
 * blocks are freed after the timed part; once LEAK_KEPT are live (more
 * pairs than a default run has) each new one takes the place of the
 * oldest, which is freed then, so the bookkeeping stays in scratch. */
#define LEAK_ROUND 1000
#define LEAK_EVERY 100
#define LEAK_KEPT (PB_SCRATCH_SLOTS - LEAK_ROUND)

static const pb_band_t leak_bands[] = { { 800, 16, 128 }, { 200, 129, 1024 } };

PB_INLINE void leak_body(const pb_ops_t *ops, pb_ctx_t *c)
{
    void **v = c->scratch, **kept = c->scratch + LEAK_ROUND;
    uint64_t rng = rng_seed(c->worker), nkept = 0;
    c->t_begin = pb_now_ns();
    for (uint64_t left = c->pairs; left > 0;) {
        unsigned n = left < LEAK_ROUND ? (unsigned)left : LEAK_ROUND;
        for (unsigned i = 0; i < n; i++) {
            v[i] = ops->alloc(band_size(leak_bands, rng_next(&rng)));
            PB_ESCAPE(v[i]);
        }
        for (unsigned i = 0; i < n; i++) {
            if (i % LEAK_EVERY != LEAK_EVERY - 1) {
                ops->release(v[i]);
                continue;
            }
            void **slot = &kept[nkept % LEAK_KEPT];
            if (nkept++ >= LEAK_KEPT)
                ops->release(*slot);
            *slot = v[i];
        }
        left -= n;
    }
    c->t_end = pb_now_ns();
    for (uint64_t i = 0; i < nkept && i < LEAK_KEPT; i++)
        ops->release(kept[i]);
}

/* ------------------------------------------------------------------------ */
/* largemix                                                                  */
/* ------------------------------------------------------------------------ */

/* A working set of LARGEMIX_SLOTS live blocks, one in 100 of them large:
 * each pair frees a random block, so large and small ones leave in mixed
 * order, and puts a new one in its place, every page of it written.  The
 * set is filled before and emptied after the timed part. */
#define LARGEMIX_SLOTS 1000

static const pb_band_t largemix_bands[] = { { 990, 16, 256 },
                                            { 10, 65536, (size_t)4 << 20 } };

PB_INLINE void largemix_body(const pb_ops_t *ops, pb_ctx_t *c)
{
    void **v = c->scratch;
    uint64_t rng = rng_seed(c->worker);
    for (unsigned i = 0; i < LARGEMIX_SLOTS; i++) {
        size_t n = band_size(largemix_bands, rng_next(&rng));
        v[i] = ops->alloc(n);
        touch_pages(v[i], n);
    }
    c->t_begin = pb_now_ns();
    for (uint64_t i = 0; i < c->pairs; i++) {
        unsigned k = (unsigned)(rng_next(&rng) % LARGEMIX_SLOTS);
        size_t n = band_size(largemix_bands, rng_next(&rng));
        ops->release(v[k]);
        v[k] = ops->alloc(n);
        touch_pages(v[k], n);
    }
    c->t_end = pb_now_ns();
    for (unsigned i = 0; i < LARGEMIX_SLOTS; i++)
        ops->release(v[i]);
}

/* ------------------------------------------------------------------------ */
/* Allocators and the table                                                  */
/* ------------------------------------------------------------------------ */

/* The do-nothing allocator: noinline, so the loop around it keeps its calls
 * and costs what it costs around a real allocator.  Its one block is as big
 * as large's largest (and so frag's), so their page touches cost the same
 * in every arm; pages no arm touches cost no memory. */
static char none_area[LARGE_MAX] __attribute__((aligned(64)));

static __attribute__((noinline)) void *none_malloc(size_t n)
{
    PB_ESCAPE(n);
    return none_area;
}

static __attribute__((noinline)) void none_free(void *p)
{
    PB_ESCAPE(p);
}

/* The region arm's region: the worker's, set by the arm's entry (a
 * thread-local, so that the allocator keeps malloc's signature and the
 * body stays the same for every arm). */
static __thread pd_region_t *pb_region;

PB_INLINE void *region_malloc(size_t n)
{
    return pd_region_alloc(pb_region, n);
}

PB_INLINE void region_free(void *p)
{
    (void)p;
}

static void region_end_request(void)
{
    pd_region_reset(pb_region);
}

static const pb_ops_t ops_pool = { pool_malloc, pool_free, NULL };
static const pb_ops_t ops_malloc = { malloc, free, NULL };
static const pb_ops_t ops_region = { region_malloc, region_free, region_end_request };
static const pb_ops_t ops_none = { none_malloc, none_free, NULL };

#define PB_INSTANCE(name, call)                                              \
    static void name##_pool(pb_ctx_t *c) { call(&ops_pool, c); }             \
    static void name##_malloc(pb_ctx_t *c) { call(&ops_malloc, c); }         \
    static void name##_none(pb_ctx_t *c) { call(&ops_none, c); }

/* Only the workloads that end in requests get a region arm. */
#define PB_REGION_INSTANCE(name, call)                                       \
    static void name##_region(pb_ctx_t *c)                                   \
    {                                                                        \
        pb_region = c->region;                                               \
        call(&ops_region, c);                                                \
    }

#define fixed16_body(ops, c) fixed_body(ops, c, 16)
#define fixed64_body(ops, c) fixed_body(ops, c, 64)
#define random256_body(ops, c) random_body(ops, c, 256)
#define random8k_body(ops, c) random_body(ops, c, 8192)

PB_INSTANCE(fixed16, fixed16_body)
PB_INSTANCE(fixed64, fixed64_body)
PB_INSTANCE(batch, batch_body)
PB_INSTANCE(random256, random256_body)
PB_INSTANCE(random8k, random8k_body)
PB_INSTANCE(heavy, heavy_body)
PB_INSTANCE(pingpong, pingpong_body)
PB_INSTANCE(prodcons, prodcons_body)
PB_INSTANCE(frag, frag_body)
PB_INSTANCE(large, large_body)
PB_INSTANCE(thrash, thrash_body)
PB_INSTANCE(leak, leak_body)
PB_INSTANCE(largemix, largemix_body)

PB_REGION_INSTANCE(fixed16, fixed16_body)
PB_REGION_INSTANCE(fixed64, fixed64_body)
PB_REGION_INSTANCE(random256, random256_body)
PB_REGION_INSTANCE(random8k, random8k_body)
PB_REGION_INSTANCE(heavy, heavy_body)

#define PB_ARMS(name) { name##_pool, name##_malloc, NULL, name##_none }
#define PB_ARMS_REGION(name) { name##_pool, name##_malloc, name##_region, name##_none }

const pb_workload_t pb_workloads[] = {
    { "fixed16", "malloc(16) and free it, again and again",
      PB_ARMS_REGION(fixed16), 5000000, 1, 1, false, false, true, true },
    { "fixed64", "malloc(64) and free it, again and again",
      PB_ARMS_REGION(fixed64), 5000000, 1, 1, false, false, true, true },
    { "batch", "10,000 x 16 B allocated, then all freed (phases timed apart)",
      PB_ARMS(batch), 10 * BATCH_BLOCKS, BATCH_BLOCKS, 1, true, false, true, false },
    { "random256", "1,000 live blocks of 1-256 B, a random one replaced",
      PB_ARMS_REGION(random256), 2000000, 1, 1, false, false, true, true },
    { "random8k", "1,000 live blocks of 1 B-8 KiB, a random one replaced",
      PB_ARMS_REGION(random8k), 1000000, 1, 1, false, false, true, true },
    { "heavy", "one /heavy request's 95 blocks (5 B-1 KiB), then all freed",
      PB_ARMS_REGION(heavy), HEAVY_OBJECTS * 20000, HEAVY_OBJECTS, 1, false, false, true, false },
    { "pingpong", "blocks of 1-256 B allocated here, freed by the next worker",
      PB_ARMS(pingpong), 1000000, 1, 2, false, false, false, false },
    { "prodcons", "blocks of 16 B-1 KiB allocated by worker 0, freed by the others",
      PB_ARMS(prodcons), 1000000, 1, 2, false, false, false, false },
    { "frag", "a churn of 16 B-512 KiB blocks, then memory held and a 10 MiB try",
      PB_ARMS(frag), 200000, 1, 1, false, true, true, false },
    { "large", "one block of 5-120 MiB at a time, every page written, then freed",
      PB_ARMS(large), 10, 1, 1, false, false, true, false },
    { "thrash", "each worker writes its own 8-64 B blocks over and over (timed only)",
      PB_ARMS(thrash), 20000, 1, 1, false, false, false, false },
    { "leak", "rounds of 1,000 blocks of 16 B-1 KiB, all freed but 1 in 100 (kept)",
      PB_ARMS(leak), 1000 * LEAK_ROUND, LEAK_ROUND, 1, false, false, true, false },
    { "largemix", "1,000 live blocks, 1 in 100 of 64 KiB-4 MiB, a random one replaced",
      PB_ARMS(largemix), 50000, 1, 1, false, false, true, false },
};
const size_t pb_n_workloads = sizeof pb_workloads / sizeof pb_workloads[0];

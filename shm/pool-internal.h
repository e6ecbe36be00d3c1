/* SPDX-License-Identifier: BSD-2-Clause */
/* libshmpool — cross-file internals and the inline fast paths.
 *
 * Prototypes are grouped by the file that defines them; names shared across
 * files end in '_'.  The malloc and free fast paths are in alloc.h.
 */
#ifndef POOL_INTERNAL_H
#define POOL_INTERNAL_H

#include "config.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pool-types.h"

#define pool_likely(x) __builtin_expect(!!(x), 1)
#define pool_unlikely(x) __builtin_expect(!!(x), 0)
#define POOL_NOINLINE __attribute__((noinline))
/* x, an lvalue, keeps its value, but the compiler no longer knows it.  A
 * bin's fields read or written on each side of it are then addressed
 * each in its own instruction (tc + cls * 8 + the field's offset), where
 * GCC otherwise computes tc + cls * 8 into a register first, one
 * instruction more on malloc's fast path. */
#define POOL_OPAQUE(x) __asm__("" : "+r"(x))
#define POOL_COLD __attribute__((cold, noinline))
/* A table a process writes once, before it forks, and only reads after:
 * in a section of its own, so that what a forked child does write in the
 * library's data (its slot, its page map's address, its pid) copies only
 * those variables' page into every child, not the tables beside them
 * (about 12 KiB a child, which a prefork server pays per worker).
 * shm/libshmpool.ld starts the section on a page and ends it on a page's
 * end, so that .bss starts a page of its own, and every variable a child
 * writes starts at zero, so that it is in .bss and not in .data: a child
 * copies one page of the library's data (tests/pool/libdata.c).  Inside
 * the section the tables lie side by side: every process maps each page
 * of it. */
#define POOL_READ_MOSTLY __attribute__((section("pool_read_mostly"), aligned(64)))
/* Linked into a program (poold, poolbench) the pool's thread-locals are
 * one %fs-relative access; in libshmpool.so each access first loads its
 * offset from the GOT, one more instruction on both fast paths. */
#ifdef POOL_TLS_EXEC
#define POOL_TLS __attribute__((tls_model("local-exec")))
#else
#define POOL_TLS __attribute__((tls_model("initial-exec")))
#endif

static const bool pool_config_stats = POOL_CONFIG_STATS;
static const int pool_config_debug = POOL_CONFIG_DEBUG;
static const bool pool_config_spin = POOL_CONFIG_SPINLOCK;

/* Assertion levels: 1 cheap, 2 internal, 3 expensive walks. */
#define pool_assert_level_(lvl, cond)                                         \
    do {                                                                      \
        if (POOL_CONFIG_DEBUG >= (lvl) && pool_unlikely(!(cond)))             \
            pool_assert_fail_(#cond, __FILE__, __LINE__);                     \
    } while (0)
#define pool_assert(cond) pool_assert_level_(1, cond)
#define pool_assert_internal(cond) pool_assert_level_(2, cond)
#define pool_assert_expensive(cond) pool_assert_level_(3, cond)

/* A named point where a test can make the process die (SHMPOOL_CRASH,
 * debug builds only; see crashpoint.c), and the same at every journaled step
 * of an operation. */
#if POOL_CONFIG_DEBUG > 0
#define POOL_CRASH_POINT(name) pool_crash_point_(name)
#define POOL_CRASH_STEP(op) pool_crash_step_(op)
#else
#define POOL_CRASH_POINT(name) ((void)0)
#define POOL_CRASH_STEP(op) ((void)0)
#endif

/* The only way to touch the x-named fields (and the few other words read or
 * written without their lock).  Counters are relaxed; state words publish
 * with release and are read with acquire. */
#define pool_atomic_inc(p) __atomic_add_fetch((p), 1, __ATOMIC_RELAXED)
#define pool_atomic_load_relaxed(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define pool_atomic_load_acquire(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define pool_atomic_store_release(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define pool_atomic_xchg_acquire(p, v) __atomic_exchange_n((p), (v), __ATOMIC_ACQUIRE)
#define pool_atomic_cas(p, expect, v)                                         \
    __atomic_compare_exchange_n((p), (expect), (v), false, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)
#define pool_atomic_add(p, v) __atomic_add_fetch((p), (v), __ATOMIC_RELAXED)
#define pool_atomic_or(p, v) __atomic_fetch_or((p), (v), __ATOMIC_RELAXED)
#define pool_atomic_or_acquire(p, v) __atomic_fetch_or((p), (v), __ATOMIC_ACQUIRE)
#define pool_atomic_and(p, v) __atomic_fetch_and((p), (v), __ATOMIC_RELAXED)

/* ------------------------------------------------------------------------ */
/* libc.c                                                                    */
/* ------------------------------------------------------------------------ */

/* vsnprintf subset (%s %c %d %i %u %x %p %%, with l, ll and z) that never
 * allocates.  Returns the length the full output needs; out is
 * NUL-terminated when cap > 0. */
size_t pool_vsnprintf_(char *out, size_t cap, const char *fmt, va_list ap);
size_t pool_snprintf_(char *out, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* "shmpool: <message>[: <errno name>]\n" on stderr through write(2); err 0
 * leaves out the errno part. */
void pool_error_(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* pool_error_ then abort(). */
void pool_fatal_(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn, cold));
void pool_assert_fail_(const char *cond, const char *file, int line)
    __attribute__((noreturn, cold));
/* Parse a size, "N", "NK", "NM" or "NG", into *out.  With end NULL the
 * size must be all of v; otherwise *end gets where it stopped.  False on
 * anything else, or on overflow. */
bool pool_parse_size_(const char *v, size_t *out, const char **end);

/* ------------------------------------------------------------------------ */
/* sizeclass.c                                                               */
/* ------------------------------------------------------------------------ */

extern uint8_t pool_class_small_[POOL_SMALL_LOOKUP_MAX + 1];
extern uint8_t pool_class_large_[(POOL_MAX_SMALL >> 7) + 1];
extern pool_class_t pool_classes_[POOL_NCLASSES];

/* Fill the tables above; idempotent, called before an arena is used. */
void pool_sizeclass_init_(void);
/* Smallest class whose objects hold size bytes and sit at multiples of
 * align (a power of two <= POOL_PAGE_SIZE); 0 when none does. */
unsigned pool_sizeclass_aligned_(size_t size, size_t align);

/* Class for a request of size bytes, over POOL_SMALL_LOOKUP_MAX and at
 * most POOL_MAX_SMALL. */
static inline unsigned pool_sizeclass_large(size_t size)
{
    return pool_class_large_[(size + 127) >> 7];
}

/* Class for a request of size bytes, 0 above POOL_MAX_SMALL.  A table load
 * and a compare; the tables are zero before init, which sends everything to
 * the slow path. */
static inline unsigned pool_sizeclass_of(size_t size)
{
    if (pool_likely(size <= POOL_SMALL_LOOKUP_MAX))
        return pool_class_small_[size];
    if (size <= POOL_MAX_SMALL)
        return pool_sizeclass_large(size);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* pagemap.c                                                                 */
/* ------------------------------------------------------------------------ */

/* Point pages [start, start+n) at span `span`.  REQUIRES: page-heap lock. */
void pool_pagemap_set_span_(pool_arena_t *a, uint32_t start, uint32_t n, uint32_t span);
/* Point the first and last page of [start, start+n) at span `span` (a big
 * or free span).  REQUIRES: page-heap lock. */
void pool_pagemap_set_ends_(pool_arena_t *a, uint32_t start, uint32_t n, uint32_t span);
/* Set the class byte of pages [start, start+n).  REQUIRES: page-heap lock. */
void pool_pagemap_set_class_(pool_arena_t *a, uint32_t start, uint32_t n, uint8_t cls);
/* Page index of an arena address, or POOL_NIL outside the data pages.
 * Inline: every slow free asks it. */
static inline uint32_t pool_pagemap_page_(const pool_arena_t *a, const void *p)
{
    uintptr_t off = (uintptr_t)p - a->data;
    if (a->hdr == NULL || off >= a->data_size)
        return POOL_NIL;
    return (uint32_t)(off >> POOL_PAGE_SHIFT);
}
/* Span descriptor that covers p, or NULL outside the carved data pages. */
pool_span_sh_t *pool_pagemap_span_(const pool_arena_t *a, const void *p);

/* ------------------------------------------------------------------------ */
/* pageheap.c                                                                */
/* ------------------------------------------------------------------------ */

void pool_pageheap_init_(pool_arena_t *a);
/* Take a span of npages whose address is a multiple of align_pages pages (a
 * power of two) and mark it SMALL of class cls (cls > 0) or BIG (cls 0).
 * Takes the page-heap lock.  Returns the span index or POOL_NIL when the
 * arena cannot hold it. */
uint32_t pool_pageheap_alloc_(pool_arena_t *a, uint32_t npages, uint32_t align_pages,
                              unsigned cls, uint16_t owner);
/* The same for a small span (cls > 0) that a free span's pages end by page
 * `end` hold, or POOL_NIL: never carved from the top, so the span lies
 * below `end` or is not taken. */
uint32_t pool_pageheap_alloc_below_(pool_arena_t *a, uint32_t npages, unsigned cls,
                                    uint16_t owner, uint32_t end);
/* The first page of the lowest free span that holds npages (npages <
 * POOL_FREE_LISTS) as a short request finds it, or POOL_NIL, also when
 * another holds the page-heap lock (pool_lock_try_). */
uint32_t pool_pageheap_lowest_fit_(pool_arena_t *a, uint32_t npages);
/* Give a span back: coalesce with free neighbours, maybe return its pages to
 * the OS.  Takes the page-heap lock.  REQUIRES: no central lock held. */
void pool_pageheap_free_(pool_arena_t *a, uint32_t span);
/* pool_pageheap_free_ for a span whose pages were idle through a whole
 * decay period where they were (a class's empty span): they, and the
 * returned neighbours it merges with, count as free since the page heap's
 * period began, so its end gives them back (less the cushion). */
void pool_pageheap_free_idle_(pool_arena_t *a, uint32_t span);
/* Rebuild the tiling, free lists and page counters from the span
 * descriptors, and the page map from the spans; quarantine pages past a
 * broken descriptor.  Never journals; safe to run twice.  REQUIRES:
 * page-heap lock (the lock's repair after a dead holder). */
void pool_pageheap_rebuild_(pool_arena_t *a, unsigned unused);
/* Register the page heap's repair with the lock wrapper. */
void pool_pageheap_register_(void);
/* Give every free page not yet returned back to the OS now, rather than
 * when decay would (tests that must reach the release).  Takes the
 * page-heap lock. */
void pool_pageheap_trim_(pool_arena_t *a);
/* End the decay period if it has run its course (pool_decay).  Takes the
 * page-heap lock by deadline (CLOCK_REALTIME), or with deadline NULL only
 * if no live holder keeps it; false, nothing done, when one kept it. */
bool pool_pageheap_decay_(pool_arena_t *a, const struct timespec *deadline);
/* The decay's cushion, in pages: the most free pages that were taken again
 * while still mapped within the current period or one of the
 * POOL_DECAY_WINDOW before; none after that many quiet periods.
 * REQUIRES: page-heap lock. */
uint64_t pool_pageheap_cushion_(const pool_pageheap_sh_t *ph);
/* pool_pageheap_free_ for a caller that holds the page-heap lock, without
 * the decay; the free span it ends in, merged with its neighbours. */
uint32_t pool_pageheap_free_locked_(pool_arena_t *a, uint32_t span);
/* Give free span `span`'s pages back to the OS now, not when the decay
 * would (a dead process's: no one's working set), unless they went back
 * already.  REQUIRES: page-heap lock. */
void pool_pageheap_return_locked_(pool_arena_t *a, uint32_t span);
/* Whether free spans l and r, r right after l, are one span: unless their
 * pages are mapped by two different processes (see span_set_free in
 * pageheap.c), whose next big takers would fault each other's in.  Free
 * neighbours that are not one stay apart for good, in the checks and the
 * rebuild too. */
static inline bool pool_span_mergeable(const pool_span_sh_t *l, const pool_span_sh_t *r)
{
    return l->owner == POOL_NO_TAG || r->owner == POOL_NO_TAG || l->owner == r->owner;
}
/* The spans in address order: they tile pages [0, carved).  Walk with
 *     for (pool_span_walk_t w = pool_span_walk(a); (s = pool_span_next(a, &w)) != NULL;)
 * under the page-heap lock, or on an arena read from outside. */
typedef struct pool_span_walk_s {
    uint32_t next;   /* the first page not walked yet */
    uint32_t carved; /* the end of the walk: carved, at most the arena's pages */
} pool_span_walk_t;
static inline pool_span_walk_t pool_span_walk(const pool_arena_t *a)
{
    uint32_t carved = a->ph->carved;
    return (pool_span_walk_t){ 0, carved < a->npages ? carved : a->npages };
}
/* The span that starts at w->next, w then past it.  NULL at the end, and
 * at a descriptor that starts no span there ending within the carved
 * pages (a tiling a dead holder broke, or one read from outside while it
 * changed): w->next < w->carved tells that from the end. */
static inline pool_span_sh_t *pool_span_next(const pool_arena_t *a, pool_span_walk_t *w)
{
    uint32_t p = w->next;
    if (p >= w->carved)
        return NULL;
    pool_span_sh_t *s = &a->spans[p];
    if (s->start != p || s->npages == 0 || s->npages > w->carved - p)
        return NULL;
    w->next = p + s->npages;
    return s;
}
/* The lowest in the arena of best and of the spans of the index-linked
 * list at head, as far as *budget reaches, which it counts down (the
 * fetch's and the page heap's scans for the lowest span, POOL_LOW_SCAN). */
static inline uint32_t pool_span_list_lowest(const pool_arena_t *a, uint32_t head, uint32_t best,
                                             unsigned *budget)
{
    for (uint32_t i = head; i != POOL_NIL && *budget > 0; i = a->spans[i].next, --*budget)
        if (i < best)
            best = i;
    return best;
}
/* The thread cache of slot s of arena a. */
static inline pool_tcache_sh_t *pool_slot_tcache(const pool_arena_t *a, const pool_slot_sh_t *s)
{
    return &a->tcaches[s - a->slots];
}

static inline void *pool_span_addr(const pool_arena_t *a, const pool_span_sh_t *s)
{
    return (void *)(a->data + ((uintptr_t)s->start << POOL_PAGE_SHIFT));
}

/* One past the last object of small span s that is handed out (its bit
 * set), 0 when none is. */
static inline uint32_t pool_span_handed_end(const pool_span_sh_t *s)
{
    for (unsigned w = (s->count + 63u) / 64u; w-- > 0;) {
        uint64_t bits = s->bitmap[w];
        if (w == s->count / 64u) /* the bits past the last object are set */
            bits &= (UINT64_C(1) << (s->count % 64u)) - 1;
        if (bits != 0)
            return w * 64u + 64u - (unsigned)__builtin_clzll(bits);
    }
    return 0;
}

/* The OS pages at the top of small span s that no byte of its first n
 * objects lies in. */
static inline uint32_t pool_span_top_pages(const pool_span_sh_t *s, uint32_t n, size_t os_page)
{
    size_t end = (size_t)s->npages << POOL_PAGE_SHIFT;
    size_t from = ((size_t)n * s->objsize + os_page - 1) / os_page * os_page;
    return from < end ? (uint32_t)((end - from) / os_page) : 0;
}

/* A process maps each page of the shared arena on its own first touch of
 * it, even a page another process has in memory already, and a write fault
 * maps its one page.  A read fault maps the pages of the aligned window
 * around it that are in memory (the kernel's fault-around, 64 KiB unless
 * tuned): so a process about to write pages that others may have used
 * reads one byte a window first, one fault for up to 16 pages where a
 * private heap would have faulted none.  The caller reads only pages it is
 * about to write anyway: a read of a page not in memory allocates it. */
#define POOL_FAULT_AROUND ((uintptr_t)65536)

static inline void pool_map_around(const void *p)
{
    (void)*(const volatile char *)p;
}

/* ------------------------------------------------------------------------ */
/* central.c                                                                 */
/* ------------------------------------------------------------------------ */

void pool_central_init_(pool_arena_t *a);
/* Empty lists of owned spans for a cache whose slot is taken for the first
 * time, before its `used` is set. */
void pool_central_own_init_(pool_tcache_sh_t *tc);
/* Hand out n (1..POOL_BATCH_MAX) objects of class cls into out[] for the
 * thread cache tc, from the spans it owns, else from one it takes (the
 * class's, or a fresh one from the page heap); with tc NULL (tests), from
 * the class's spans, untagged and taking none.  In
 * address order within each span: fewer when the arena runs out, and more
 * when that ends the batch on a cache-line boundary (up to three more) or,
 * for a batch of half a 4 KiB page or more, on such a page (out has room
 * for POOL_FETCH_MAX).  Their memory is not touched.  Takes the class
 * lock, and the page-heap lock (after dropping the class lock) when no
 * span has free objects.  Returns how many; 0 means the arena is
 * exhausted. */
uint32_t pool_central_fetch_(pool_arena_t *a, unsigned cls, uint32_t n, pool_tcache_sh_t *tc,
                             void **out);
/* Give back objs[0..n) (n <= POOL_RELEASE_MAX) of class cls; their memory
 * is not touched.  Spans that become wholly free go to the page heap after
 * the class lock is dropped (a few are kept per class).  Aborts naming the
 * object on a pointer that is not a handed-out object of the class. */
void pool_central_release_(pool_arena_t *a, unsigned cls, void *const *objs, uint32_t n);
/* End the class's decay period once it has run its length and no
 * operation of its own has ended it (a class gone quiet would keep its
 * empty spans): the empty spans it kept throughout go to the page heap,
 * marked LEAVING for `tag` on their way; one stays if one of the class's
 * spans emptied during the period and it is less than twice its length
 * old.  Cheap when there is nothing to do.
 * Tries the class lock, and does nothing when another holds it (the
 * class is busy, and its own operations end its periods); then takes the
 * page-heap lock with it dropped. */
void pool_central_decay_(pool_arena_t *a, unsigned cls, uint16_t tag);
/* Give up every span of class cls that tc, the calling thread's cache,
 * owns: its objects in them stay live, and its page map forgets them.
 * Returns whether one of them still had an object handed out.  Takes the
 * class lock, then the page-heap lock with it dropped. */
bool pool_central_disown_(pool_arena_t *a, unsigned cls, pool_tcache_sh_t *tc);
/* Whether tc, the calling thread's cache, should give up its spans of
 * class cls (pool_central_disown_) for lower ones, so that what a burst
 * left a cache holding high in the heap drains and goes back with the
 * descriptors and owner tags around it: its spans of the class each have
 * at most a quarter of their objects handed out (or one), and the class
 * lists a span, or the page heap has a free one, POOL_MOVE_DOWN_PAGES
 * below the lowest of them.  A free one is taken onto the class's list
 * first, for the cache's next fetch to take over.  Tries the class lock
 * (false when another holds it), then takes the page-heap lock with it
 * dropped, and the class lock again, as a fetch of a fresh span does. */
bool pool_central_move_down_(pool_arena_t *a, unsigned cls, pool_tcache_sh_t *tc);
/* The class's empty spans that lie POOL_MOVE_DOWN_PAGES or more above
 * the lowest free span of the page heap that holds one go to the page
 * heap, marked LEAVING for `tag` on their way: the span a class keeps
 * against thrash is otherwise the last one a burst's pages left empty,
 * wherever they lay, and a fetch that needs it takes a low one instead.
 * Tries the class lock, the page-heap lock and the class lock again,
 * with nothing done when another holds one; then takes the page-heap
 * lock with the class lock dropped. */
void pool_central_shed_high_(pool_arena_t *a, unsigned cls, uint16_t tag);
/* The OS pages at the top of tc's own spans of class cls that hold no
 * object handed out, and have not already, go back to the OS (MADV_REMOVE
 * on a shared arena, MADV_DONTNEED on a private one); span->returned
 * counts them until a fetch takes objects there.  Tries the class lock,
 * and does nothing when another holds it. */
void pool_central_purge_(pool_arena_t *a, unsigned cls, pool_tcache_sh_t *tc);
/* The same for the cache of a dead thread, within a reap: spans that
 * leave the class go on *leaving (linked by next), marked LEAVING for
 * `tag`.  REQUIRES: every lock. */
void pool_central_disown_dead_(pool_arena_t *a, unsigned cls, pool_tcache_sh_t *tc,
                               uint16_t tag, uint32_t *leaving);
/* At a reap's end: the class's empty spans past `keep` (those it had
 * before the reap) leave for the page heap, on *leaving, marked LEAVING
 * for `tag`.  REQUIRES: every lock. */
void pool_central_trim_(pool_arena_t *a, unsigned cls, uint32_t keep, uint16_t tag,
                        uint32_t *leaving);
/* Rebuild the class's list and counts from its spans' bitmaps; a span
 * whose geometry is wrong is quarantined.  Never journals; safe to run
 * twice.  REQUIRES: class lock (the lock's repair when verification
 * fails). */
void pool_central_rebuild_(pool_arena_t *a, unsigned cls);
/* Register the classes' verification and repair with the lock wrapper. */
void pool_central_register_(void);
/* True when the class's list, counts and spans agree.  REQUIRES: class
 * lock. */
bool pool_central_verify_(pool_arena_t *a, unsigned cls);
/* Put a span the page heap handed out for class cls (ARRIVING) on the
 * class.  REQUIRES: class lock. */
void pool_central_add_span_locked_(pool_arena_t *a, unsigned cls, uint32_t idx);
/* Give back one object p of class cls, validated: false (nothing changed)
 * when p is not a handed-out object of the class.  A span that becomes
 * wholly free beyond the one kept is unlinked, marked LEAVING for `tag`
 * and pushed on *leaving (linked by next).  REQUIRES: class lock and an
 * operation begun on its journal, at the start of a step. */
bool pool_central_release_one_(pool_arena_t *a, unsigned cls, void *p, uint16_t tag,
                               uint32_t *leaving);
/* The small span holding p when p is an object boundary in it (its index
 * in *oi), else NULL.  Safe on any pointer; stable only under the class
 * lock of the span's class. */
pool_span_sh_t *pool_object_span_(pool_arena_t *a, const void *p, uint32_t *oi);
/* The byte an object's owner tag is kept in: slot 255's has none. */
static inline uint8_t pool_tag_byte(uint16_t tag)
{
    return tag <= POOL_MAX_TAG ? (uint8_t)tag : POOL_NO_TAG;
}
/* Slots that may have been taken: every walk of the slots stops here, so
 * that the slot table's pages are touched as the slots are used (a slot
 * is 128 bytes; a walk of all 256 would keep 32 KiB resident). */
static inline unsigned pool_slots_top(const pool_arena_t *a)
{
    uint32_t top = pool_atomic_load_acquire(&a->hdr->xslots_top);
    return top < POOL_MAX_SLOTS ? top : POOL_MAX_SLOTS;
}
/* Slot `slot`'s row of per-class counters ([POOL_NCLASSES]). */
static inline pool_binstats_t *pool_slot_binstats(const pool_arena_t *a, unsigned slot)
{
    return &a->binstats[(size_t)slot * POOL_NCLASSES];
}
/* The tier of a small span of `count` objects (POOL_OWNER_TIERS). */
static inline unsigned pool_owner_tier(uint32_t count)
{
    /* The bits of count - 1 past those of a minimum row's last index. */
    return count <= POOL_OWNER_MIN_ROW
               ? 0
               : 32 - (unsigned)__builtin_clz(count - 1) - (unsigned)__builtin_ctz(POOL_OWNER_MIN_ROW);
}
/* Bytes of a row of tier t. */
static inline size_t pool_owner_row_size(unsigned t)
{
    return (size_t)POOL_OWNER_MIN_ROW << t;
}
/* Rows in each tier's region: a row per page, rounded up to a multiple
 * of 64 so that every region starts an OS page, and an OS page of tags
 * never holds two tiers' rows. */
static inline size_t pool_owner_region_rows(uint32_t npages)
{
    return ((size_t)npages + 63) & ~(size_t)63;
}
/* Tier t's region of the tags, after the smaller tiers' regions. */
static inline uint8_t *pool_owner_rows(const pool_arena_t *a, unsigned t)
{
    return &a->owners[pool_owner_region_rows(a->npages) * POOL_OWNER_MIN_ROW * ((1u << t) - 1)];
}
/* Tag byte of object oi of small span s, in the row of its first page. */
static inline uint8_t *pool_owner_of(const pool_arena_t *a, const pool_span_sh_t *s, uint32_t oi)
{
    unsigned t = pool_owner_tier(s->count);
    return pool_owner_rows(a, t) + (size_t)s->start * pool_owner_row_size(t) + oi;
}
/* Record that object oi of s (handed out) now belongs to tag.
 * REQUIRES: class lock. */
static inline void pool_owner_set(const pool_arena_t *a, const pool_span_sh_t *s, uint32_t oi,
                                  uint8_t tag)
{
    *pool_owner_of(a, s, oi) = tag;
}
/* Make handed-out object oi of s, which the caller is freeing, tag's (as
 * pool_adopt would) without a lock, so that a reap of the process that
 * took it, which frees what still carries that process's tag, leaves it to
 * the caller's list, bound for its span.  One compare-and-swap against
 * what the caller read: false when the tag changed meanwhile. */
static inline bool pool_owner_take(const pool_arena_t *a, const pool_span_sh_t *s, uint32_t oi,
                                   uint16_t tag)
{
    uint8_t *t = pool_owner_of(a, s, oi);
    uint8_t was = pool_atomic_load_relaxed(t), want = pool_tag_byte(tag);
    return was == want || pool_atomic_cas(t, &was, want);
}
/* Index of object p in small span s. */
static inline uint32_t pool_span_object_index(const pool_arena_t *a, const pool_span_sh_t *s,
                                              const void *p)
{
    uintptr_t off = (uintptr_t)p - (uintptr_t)pool_span_addr(a, s);
    return (uint32_t)(off / s->objsize);
}

/* ------------------------------------------------------------------------ */
/* crashpoint.c                                                              */
/* ------------------------------------------------------------------------ */

/* Read SHMPOOL_CRASH (debug builds; attach calls it):
 *   name:N        die by SIGKILL at the Nth hit of crash point `name`
 *   name:N:stop   stop by SIGSTOP there instead, the lock still held
 *   random:P[:S]  die at any crash point with probability P (0 < P <= 1),
 *                 drawing from seed S (default: the pid and the clock)
 *   random:P,name:N  both
 * Journaled steps are the points journal.<op> (journal.fetch, ...). */
void pool_crash_config_(void);
/* The named crash points, NULL-terminated (journal.<op> are not listed:
 * one per pool_op_name_). */
extern const char *const pool_crash_points_[];
/* Count a hit of crash point `name` and die there if it is armed. */
void pool_crash_point_(const char *name);
/* The same for a journaled step of operation op. */
void pool_crash_step_(uint32_t op);
/* Note that the calling thread took (held = true) or gave back lock (kind,
 * arg), so that a death can say what it held.  Debug builds. */
void pool_crash_note_lock_(pool_lock_kind_t kind, unsigned arg, bool held);
/* ------------------------------------------------------------------------ */
/* lock.c                                                                    */
/* ------------------------------------------------------------------------ */

/* How a kind of lock is repaired after its holder died: lock.c knows no
 * tier, each tier registers its own (dependencies run one way: the tiers
 * call down into the lock, never the reverse). */
typedef struct pool_lock_ops_s {
    const char *what;  /* "page heap", "class": for the recovery message */
    const char *truth; /* what a rebuild derives the state from */
    /* True when what the lock protects is consistent; NULL: rebuild after
     * every recovery.  REQUIRES: the lock. */
    bool (*verify)(pool_arena_t *a, unsigned arg);
    /* Rewrite the state from the truth, without journaling; safe to run
     * twice or to resume after a death.  REQUIRES: the lock. */
    void (*rebuild)(pool_arena_t *a, unsigned arg);
} pool_lock_ops_t;

/* Register the repair of a lock kind (create and attach call it, through
 * pool_pageheap_register_ and pool_central_register_). */
void pool_lock_register_(pool_lock_kind_t kind, const pool_lock_ops_t *ops);
/* Initialise a lock in the arena.  Returns 0 or the pthread error. */
int pool_lock_init_(pool_lock_sh_t *l, pool_lock_kind_t kind);
/* Acquire: trylock first (to count contention), then block; on EOWNERDEAD
 * roll the dead owner's operation back from the journal, verify (rebuild
 * if need be) what the lock protects, and mark it consistent.  Never
 * fails: an unrecoverable lock aborts. */
void pool_lock_(pool_arena_t *a, pool_lock_sh_t *l, pool_lock_kind_t kind, unsigned arg);
void pool_unlock_(pool_arena_t *a, pool_lock_sh_t *l, pool_lock_kind_t kind, unsigned arg);
/* How long a call that must not hang with a stuck lock holder waits for
 * pool locks, in all: pool_reap, pool_repair, pool_decay, pool_usage and
 * the debug builds' /stats check, the calls of a supervisor or a waiting
 * parent.  A live holder that keeps a lock longer is stuck. */
#define POOL_WAIT_MS 200
/* pool_lock_ that gives up at deadline (CLOCK_REALTIME): false, lock not
 * taken, when a live holder keeps it that long; false at once when the
 * holder has kept it POOL_WAIT_MS already. */
struct timespec;
bool pool_lock_timed_(pool_arena_t *a, pool_lock_sh_t *l, pool_lock_kind_t kind, unsigned arg,
                      const struct timespec *deadline);
/* pool_lock_ that never sleeps: false, lock not taken, when a live holder
 * keeps it past a few tries (housekeeping, which waits on nobody). */
bool pool_lock_try_(pool_arena_t *a, pool_lock_sh_t *l, pool_lock_kind_t kind, unsigned arg);
/* The CLOCK_REALTIME instant ms milliseconds from now, as pool_lock_timed_
 * wants it. */
struct timespec pool_deadline_in_(unsigned ms);
/* The journal of the lock (kind, arg).  A class lock takes one at its
 * first operation.  REQUIRES: the lock. */
pool_journal_sh_t *pool_lock_journal_(pool_arena_t *a, pool_lock_kind_t kind, unsigned arg);
/* The watchdog's view of a lock: who holds it, since when, on which CPU. */
pool_lockwatch_sh_t *pool_lock_watch_(pool_arena_t *a, pool_lock_kind_t kind, unsigned arg);

/* Life locks: the robust mutex each slot's holder keeps locked for life
 * (pool_slot_sh_t).  Never taken through pool_lock_, never blocked on but
 * by pool_reap's bounded wait. */
typedef enum pool_life_e {
    POOL_LIFE_HELD = 0,  /* a live thread holds it (or it cannot be judged) */
    POOL_LIFE_TAKEN = 1, /* it was free: the caller holds it now */
    POOL_LIFE_DEAD = 2,  /* its holder died: *xflags got POOL_SLOT_DEAD, and the
                          * caller holds it now */
} pool_life_t;
int pool_life_init_(pool_lock_sh_t *l);
/* Try to take a life lock, at once (deadline NULL) or by deadline
 * (CLOCK_REALTIME). */
pool_life_t pool_life_try_(pool_lock_sh_t *l, uint32_t *xflags, const struct timespec *deadline);
void pool_life_release_(pool_lock_sh_t *l);
/* This process's pid, cached (0 until first needed; reset in a forked
 * child). */
extern int pool_self_pid_;

/* ------------------------------------------------------------------------ */
/* journal.c                                                                 */
/* ------------------------------------------------------------------------ */

/* Begin an operation / commit it.  REQUIRES: the journal's lock. */
void pool_journal_begin_(pool_journal_sh_t *j, pool_op_t op);
void pool_journal_commit_(pool_journal_sh_t *j);
/* Between two steps of a long operation: commit what is done and begin
 * the same operation again.  Call it only where the state is consistent
 * on its own (what was done so far needs no undo).  REQUIRES: the
 * journal's lock. */
void pool_journal_step_(pool_journal_sh_t *j);
/* Recovery of a dead holder's journal: roll its open operation back, then
 * leave the journal empty and committed, so that what the recoverer does
 * next starts with all the room.  Returns false when an entry was unusable
 * (the caller must rebuild).  Safe to run again after a death inside it.
 * REQUIRES: the lock, taken with EOWNERDEAD. */
bool pool_journal_undo_(pool_arena_t *a, pool_journal_sh_t *j);
/* Name of operation op ("fetch", "page-alloc", ...). */
const char *pool_op_name_(uint32_t op);
/* Abort: a step logged more entries than its bound. */
void pool_journal_overflow_(const pool_journal_sh_t *j) __attribute__((noreturn, cold));
/* Entry i of journal j: in the journal, or from POOL_JOURNAL_HEAD on in
 * its blocks, found from the journal's own address (pool_journal_more_sh_t),
 * so that a save loads nothing more and keeps its caller's registers as
 * when the whole room was in the journal.  Aborts past the room. */
static inline pool_undo_sh_t *pool_journal_entry_(const pool_journal_sh_t *j, uint32_t i)
{
    if (pool_likely(i < POOL_JOURNAL_HEAD))
        return (pool_undo_sh_t *)&j->undo[i];
    if (pool_unlikely(i >= POOL_JOURNAL_MAX))
        pool_journal_overflow_(j);
    i -= POOL_JOURNAL_HEAD;
    uintptr_t block = (uintptr_t)j + (1 + i / POOL_JOURNAL_MORE) * (uintptr_t)(1 + POOL_NCLASSES) *
                                         sizeof(pool_journal_sh_t);
    return &((pool_journal_more_sh_t *)block)->undo[i % POOL_JOURNAL_MORE];
}

/* Save the size bytes at addr before they are written.  The entry is
 * complete before the count covers it, and the count before the caller's
 * write: a process killed between any two stores leaves a journal that
 * undoes exactly what it wrote.  A NULL journal (a rebuild) saves nothing.
 * Every save is a crash point of its operation (journal.<op>).
 * REQUIRES: the journal's lock. */
static inline void pool_journal_save_(pool_journal_sh_t *j, void *addr, uint32_t size)
{
    if (j == NULL)
        return;
    uint32_t n = j->n;
    pool_undo_sh_t *u = pool_journal_entry_(j, n);
    POOL_CRASH_STEP(j->op);
    u->where = (uint64_t)(uintptr_t)addr << 4 | size;
    switch (size) {
    case 1:
        u->old = *(const uint8_t *)addr;
        break;
    case 2:
        u->old = *(const uint16_t *)addr;
        break;
    case 4:
        u->old = *(const uint32_t *)addr;
        break;
    default:
        u->old = *(const uint64_t *)addr;
        break;
    }
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    j->n = n + 1;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
}

/* Save a span descriptor's fields (not its bitmap) at once, so that the
 * caller may then write any of them with plain stores: four entries
 * instead of one per field. */
void pool_journal_save_span_(pool_journal_sh_t *j, pool_span_sh_t *s);

/* Save, then write: lv = v, undoable (plain with a NULL journal). */
#define POOL_JSET(j, lv, v)                                                   \
    do {                                                                      \
        __typeof__(lv) *jset_p_ = &(lv);                                      \
        __typeof__(lv) jset_v_ = (v);                                         \
        pool_journal_save_((j), jset_p_, sizeof *jset_p_);                    \
        *jset_p_ = jset_v_;                                                   \
    } while (0)

/* ------------------------------------------------------------------------ */
/* arena.c                                                                   */
/* ------------------------------------------------------------------------ */

extern pool_arena_t pool_arena_;

/* Above this the 32-bit page indices of the page map would overflow. */
#define POOL_MAX_HEAP_SIZE ((size_t)1 << 44)

/* Layout version written into and expected from the header. */
uint32_t pool_layout_version_(void);
/* Map a new arena of size bytes (pool_min_heap_size() to
 * POOL_MAX_HEAP_SIZE; rounded up to whole pages, or to huge pages for
 * SHMPOOL_HUGEPAGES=hugetlb), write its header but the magic, and point
 * pool_arena_ into it.  Shared: for processes forked from this one to
 * attach to.  Not shared: the calling process's alone, copied on write by
 * a fork like any heap (a hugetlb arena is shared all the same; the
 * header's `shared` says which it is).  Its locks and tiers are not
 * initialised.  Returns 0 or the mapping's error (nothing mapped). */
int pool_arena_map_(size_t size, bool shared);
/* SHMPOOL_HUGEPAGES=thp asks for huge pages only past this many bytes of
 * data: the metadata and a heap that stays small keep base pages, where a
 * huge page would hold 2 MiB for a few pages used (asked for the whole
 * arena, an idle poold of two workers held four huge pages: 10.1 MiB of
 * PSS against 1.6 with base pages). */
#define POOL_THP_FROM ((uint64_t)8 << 20)
/* Where an arena of size bytes laid out as *l asks for them: an offset
 * from its start on a huge page's boundary, POOL_THP_FROM bytes of data
 * or a little more in, up to its end; size when the arena ends before. */
uint64_t pool_arena_huge_from_(const pool_layout_sh_t *l, uint64_t size);
/* Make a forked child's arena its own, in its fork handler.  A private
 * arena already is, by copy-on-write.  A shared one is replaced by a
 * private copy of everything the child may read of what it inherited: the
 * header and tier state, the span descriptors and page map of the carved
 * pages, and the pages of every span in use (free spans' bytes mean
 * nothing), mapped over the whole arena in one step, so nothing of the
 * shared one stays mapped.  Other processes go on changing the shared
 * arena while the child copies; none of them can change a span the parent
 * holds while it waits, so the parent's objects are copied whole.  A
 * descriptor caught mid-change makes the walk copy page by page until the
 * next one that starts a span.  That copy costs a copy of the bytes in use
 * (see libshmpool(7)); the pages left out read as zero.  Either way the
 * locks are made afresh.  Returns 0 or the mapping's error (the shared
 * arena still mapped). */
int pool_arena_fork_child_(void);
/* Read another process's arena: point *a into a copy or a mapping of its
 * first len bytes at map (at least the header and metadata; the data pages
 * are never read through a).  Nothing is locked or written: shmpool-stat.
 * Returns 0; EINVAL when map holds no arena (or too little of one); EPROTO
 * when its layout is another build's. */
int pool_arena_view_(pool_arena_t *a, void *map, size_t len);
/* True when p is inside this process's arena mapping (data pages). */
static inline bool pool_in_arena(const void *p)
{
    return (uintptr_t)p - pool_arena_.data < pool_arena_.data_size;
}

/* The class byte of the page p lies in: 0 for a page of a big span or a
 * free one.  REQUIRES: pool_in_arena(p). */
static inline unsigned pool_arena_class_(const void *p)
{
    return pool_arena_.pm_class[((uintptr_t)p - pool_arena_.data) >> POOL_PAGE_SHIFT];
}

/* ------------------------------------------------------------------------ */
/* proc.c                                                                    */
/* ------------------------------------------------------------------------ */

extern pool_proc_state_t pool_proc_state_;
extern __thread pool_tcache_sh_t *pool_tls_tcache_ POOL_TLS;
extern pool_tcache_sh_t pool_empty_tcache_;
/* The calling thread's exit destructor ran: it takes no slot again (other
 * destructors that allocate after ours get the private heap). */
extern __thread bool pool_tls_exited_ POOL_TLS;

/* pool_create() for SHMPOOL_MODE=process: an arena for the calling process
 * alone, to attach to itself.  Nobody else can: its forked children get it
 * copy-on-write, like any heap, and stay private.  Returns what
 * pool_create() returns. */
int pool_create_private_(size_t size);
/* Unmap the arena and forget it (tests; the calling process only).  Other
 * threads must not be using the pool. */
void pool_destroy_(void);
/* The owner tag of the calling thread's objects (POOL_NO_TAG without a
 * cache). */
static inline uint16_t pool_thread_tag(void)
{
    return pool_tls_tcache_->tag;
}
/* Give the calling thread a cache in a free slot (reaping the dead when
 * none is free).  Returns it, or NULL when every slot is held by a live
 * thread or the thread is exiting. */
pool_tcache_sh_t *pool_thread_setup_(void);
/* Free a slot whose life lock the caller holds: its holder is gone (a
 * release or a finished reap).  Gives the life lock back. */
void pool_slot_release_(pool_slot_sh_t *slot);
/* Make every child forked from now on attach in the atfork child handler
 * (SHMPOOL_MODE=children). */
void pool_attach_children_(void);
/* True in a forked child of an attached process, whose arena is a private
 * copy: nothing in it is shared, so reaps and repairs have nothing to do
 * and checks nothing to check. */
bool pool_arena_copied_(void);

/* ------------------------------------------------------------------------ */
/* tcache.c                                                                  */
/* ------------------------------------------------------------------------ */

/* Pop an object of class cls off the bin, refilling it from the central
 * cache when empty; NULL when the arena is exhausted. */
void *pool_tcache_alloc_(pool_arena_t *a, pool_tcache_sh_t *tc, unsigned cls);
/* Free p, an object of class cls (alloc.c's slow path: the fast path left
 * it unchecked or found it suspect), checked in full: into tc's bin when
 * tc owns its span, the bin's most recently freed batch going back to the
 * central cache first when it is full; else towards its span, through
 * tc's remote list for the class, or at once when another process took
 * it; onto the inbox of the cache that owns its span when another does,
 * and then true: that way takes no lock and makes no system call, and
 * leaves nothing in tc.  Keeps errno.  Aborts naming p on a bad or double
 * free. */
bool pool_tcache_free_(pool_arena_t *a, pool_tcache_sh_t *tc, unsigned cls, void *p);
/* Give every object of the cache back to the central caches. */
void pool_tcache_flush_(pool_arena_t *a, pool_tcache_sh_t *tc);
/* Initialise the bins of a slot's cache and give it an empty page map of
 * its own.  False when the map cannot be had. */
bool pool_tcache_init_(pool_arena_t *a, pool_tcache_sh_t *tc, uint16_t slot);
/* Debug builds: mark object p held by a caller, or check and clear it;
 * abort naming p on a double or foreign free. */
void pool_debug_on_alloc_(void *p);
void pool_debug_on_free_(void *p);

/* Abort: p, read from a bin (its head or a link), is no object that
 * bin's cache holds (a link overwritten after a free, or a forged one).
 * Names p. */
void pool_bin_corrupt_(const void *p) __attribute__((noreturn, cold));

/* A cached object is marked in its second word with the address of the
 * cache that holds it (every class has room: the smallest is 16 bytes).
 * The mark is what glibc's tcache key is: a free that finds it checks the
 * bin (pool_free_slow_) and aborts on a double free, and what comes off a
 * bin must carry it, so a link that a write into a freed object bent
 * towards memory this cache does not hold (another process's live block)
 * is caught before it is handed out.  The cache's address is in a register
 * on both paths, needs no secret shared between processes, and is no
 * likely user datum: it points into the arena's header. */
static inline void *const *pool_obj_mark(const void *p)
{
    return (void *const *)p + 1;
}

/* True when p, read from a bin of tc (its head or a link), is an object
 * freed into tc: inside the arena and marked.  Every reader of a bin's
 * links asks before it reads through one. */
static inline bool pool_bin_holds(const pool_tcache_sh_t *tc, const void *p)
{
    return (uintptr_t)p - tc->base < tc->size && *pool_obj_mark(p) == tc;
}

/* A list of a thread cache's objects, its bin of a class or its remote
 * list, seen alike: the head, the room a push takes one of, and the room
 * the list has when empty (a bin's watermark, a remote list's 0). */
typedef struct pool_list_s {
    void **head;
    int32_t *room;
    uint32_t empty;
} pool_list_t;

static inline pool_list_t pool_tcache_list(const pool_tcache_sh_t *tc, unsigned cls, bool remote)
{
    pool_tcache_sh_t *t = (pool_tcache_sh_t *)tc;
    if (remote)
        return (pool_list_t){ &t->own[cls].remote, &t->own[cls].remote_room, 0 };
    return (pool_list_t){ &t->heads[cls], &t->bins[cls].room, t->own[cls].watermark };
}

/* Objects on list l.  A reader in another process (a reaper, the
 * statistics) takes the watermark the cache's own process set, which its
 * SHMPOOL_TCACHE may have made other than the reader's. */
static inline uint32_t pool_list_len(pool_list_t l)
{
    int64_t len = (int64_t)l.empty - pool_atomic_load_relaxed(l.room);
    return len > 0 ? (uint32_t)len : 0;
}

/* Objects in bin cls of tc. */
static inline uint32_t pool_bin_len(const pool_tcache_sh_t *tc, unsigned cls)
{
    return pool_list_len(pool_tcache_list(tc, cls, false));
}

/* Objects chained in inbox word w. */
static inline uint32_t pool_inbox_count(uint64_t w)
{
    return (uint32_t)(w >> POOL_INBOX_COUNT_SHIFT) & 0xffffu;
}

/* The first object of inbox word w, NULL when it is empty; base is the
 * arena's first data page. */
static inline void *pool_inbox_first(uintptr_t base, uint64_t w)
{
    if (pool_inbox_count(w) == 0)
        return NULL;
    return (void *)(base + ((w & ((UINT64_C(1) << POOL_INBOX_COUNT_SHIFT) - 1)) << 4));
}

/* Inbox word w (its generation and CLOSED) with n objects from first. */
static inline uint64_t pool_inbox_word(uintptr_t base, uint64_t w, const void *first, uint32_t n)
{
    uint64_t keep = w & ~((UINT64_C(1) << POOL_INBOX_GEN_SHIFT) - 1);
    if (n == 0)
        return keep;
    return keep | (uint64_t)n << POOL_INBOX_COUNT_SHIFT | ((uintptr_t)first - base) >> 4;
}

/* Objects tc holds of class cls: its bin's, its remote list's and its
 * inbox's. */
static inline uint32_t pool_tcache_held(const pool_tcache_sh_t *tc, unsigned cls)
{
    return pool_bin_len(tc, cls) + pool_list_len(pool_tcache_list(tc, cls, true)) +
           pool_inbox_count(pool_atomic_load_relaxed(&tc->own[cls].xinbox));
}

/* Link p (an object of the list's class) at the head of list l of tc,
 * leaving the room to the caller (pool_list_push, or free's fast path,
 * which has taken it already). */
static inline void pool_list_link(pool_tcache_sh_t *tc, void **head, void *p)
{
    void **w = p;
    /* The mark first: a reaper stops at a listed object without it.  The
     * fence also keeps the two stores apart, which GCC made three vector
     * instructions. */
    w[1] = tc;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    w[0] = *head;
    *head = p;
}

static inline void pool_list_push(pool_tcache_sh_t *tc, pool_list_t l, void *p)
{
    pool_list_link(tc, l.head, p);
    --*l.room;
}

/* Push p (an object of class cls) on its bin of tc. */
static inline void pool_bin_push(pool_tcache_sh_t *tc, unsigned cls, void *p)
{
    pool_list_push(tc, pool_tcache_list(tc, cls, false), p);
}

/* Take p, the head of bin cls, found inside the arena: the one place an
 * object leaves a thread cache for a caller, so the mark is checked (and
 * cleared, or its next free would look like a double one) and the stats
 * and debug hooks sit here. */
static inline void *pool_bin_take(pool_tcache_sh_t *tc, uintptr_t cls, void *p)
{
    void **w = p;
    if (pool_unlikely(w[1] != tc))
        pool_bin_corrupt_(p);
    tc->heads[cls] = w[0];
    /* The next object's line, fetched while the caller works: an object
     * another process freed back here through the inbox was last written
     * by that process, and the load of its mark would otherwise wait for
     * the line to cross (pingpong: 158 ns a pair without, 120 with, for
     * 0.07 ns on a loop whose lines are all local). */
    __builtin_prefetch(w[0]);
    POOL_OPAQUE(cls);
    /* p off the list before its mark goes: a reaper stops at a listed
     * object without one. */
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    w[1] = NULL;
    tc->bins[cls].room++;
    if (pool_config_stats)
        tc->stats[cls].allocs++;
    if (pool_config_debug > 0)
        pool_debug_on_alloc_(p);
    return p;
}

/* Pop the head of a non-empty bin (slow paths). */
static inline void *pool_bin_pop(pool_tcache_sh_t *tc, unsigned cls)
{
    void *p = tc->heads[cls];
    if (pool_unlikely((uintptr_t)p - tc->base >= tc->size))
        pool_bin_corrupt_(p);
    return pool_bin_take(tc, cls, p);
}


/* ------------------------------------------------------------------------ */
/* stats.c                                                                   */
/* ------------------------------------------------------------------------ */

/* pool_usage of an arena read from outside (pool_arena_view_), without
 * locks: a snapshot of an arena that may be changing. */
void pool_usage_view_(pool_arena_t *a, pool_usage_t *u);

/* ------------------------------------------------------------------------ */
/* heapcheck.c                                                               */
/* ------------------------------------------------------------------------ */

/* pool_check of the arena while other threads use it: the locks are
 * waited for POOL_WAIT_MS at most in all, and the thread caches of other
 * threads, which change under no lock, are not walked (*left_out: how
 * many taken slots were left out).  Returns 0, -1 (msg says what is
 * wrong), or EAGAIN: a live holder kept a lock, nothing was checked (msg
 * says who). */
int pool_check_live_(char *msg, size_t cap, unsigned *left_out);
/* pool_check of an arena read from outside, without locks and without
 * following the thread caches' links; says nothing on stderr.  A busy
 * arena may show a change caught half made: read it again. */
int pool_check_view_(pool_arena_t *a, char *msg, size_t cap);

/* ------------------------------------------------------------------------ */
/* lockset.c                                                                 */
/* ------------------------------------------------------------------------ */

/* Take the page-heap lock and then every class lock (the order pool_check
 * and reaps use; no other path holds two pool locks). */
void pool_lock_all_(pool_arena_t *a);
/* The same, giving up after ms milliseconds on one lock (a live holder
 * that is stuck): then nothing is held and it returns false. */
bool pool_lock_all_timed_(pool_arena_t *a, unsigned ms);
void pool_unlock_all_(pool_arena_t *a);

/* ------------------------------------------------------------------------ */
/* owner.c                                                                   */
/* ------------------------------------------------------------------------ */

/* Clear the tag of every live object and big span carrying `tag`: a
 * process that detaches keeps its objects, and no reap of a later holder
 * of the slot may take them.  Takes every lock. */
void pool_disown_(pool_arena_t *a, uint16_t tag);

/* ------------------------------------------------------------------------ */
/* reap.c                                                                    */
/* ------------------------------------------------------------------------ */

/* Reap every process found dead among the slots' holders (their life
 * locks owner-dead, or a reap left unfinished): what whoever notices does,
 * at attach, when slots or the arena run short, and periodically.  Skips a
 * process whose reap cannot take the locks in time (a live holder is
 * stuck); it is reaped later.  Returns the number reaped.  REQUIRES: no
 * pool lock held. */
unsigned pool_reap_dead_(pool_arena_t *a);
/* True while a slot is marked dead and not yet reaped: a reap that could
 * not take the locks in time left it.  Reads only. */
bool pool_reap_left_(pool_arena_t *a);
/* pool_decay, waiting POOL_WAIT_MS at most for the page-heap lock (wait)
 * or not at all.  0, or EAGAIN when a live holder kept the lock. */
int pool_decay_(bool wait);
/* For a thread about to sleep (sleephook.c): whether it has something to
 * give back, in its cache or, for a decay to end, in the arena.  Reads
 * only, without locks. */
bool pool_sleep_due_(void);
/* The calling thread has been quiet through a slice of its sleep: its
 * whole cache goes back and the quiet classes' and the page heap's decay
 * periods end (try-locks for the decays); only the page heap's decay when
 * a live holder has kept a pool lock for POOL_WAIT_MS.  errno kept.
 * Returns pool_sleep_due_(). */
bool pool_sleep_drain_(void);
/* pool_reap_dead_ once a period (POOL_REAP_PERIOD_NS) across the arena:
 * the first slow path past the due time does it.  REQUIRES: no pool lock
 * held. */
void pool_reap_maybe_(pool_arena_t *a);

#endif /* POOL_INTERNAL_H */

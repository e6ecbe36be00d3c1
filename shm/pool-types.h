/* SPDX-License-Identifier: BSD-2-Clause */
/* libshmpool — every structure of the pool.
 *
 * Main types, from the arena down:
 *   pool_header_sh_t    start of the arena: magic, layout version, base,
 *                       size and the offsets of everything below
 *   pool_slot_sh_t      one per attached thread: its thread cache and counters
 *   pool_central_sh_t   one per size class, each on its own cache line
 *   pool_pageheap_sh_t  the page heap: its lock, free lists, page counters
 *   pool_span_sh_t      one descriptor per span, indexed by its first page
 *   pool_journal_sh_t   one per lock: the operation in progress and its undo
 *                       entries, so a dead owner's half-done update is undone
 *   pool_crash_sh_t     what recoveries and reaps found, for pool_stats_json
 *   pool_arena_t        process-private view of a mapped arena (pointers)
 * Types ending in _sh_t live in the shared arena: they hold no process-local
 * pointers except ones into the arena itself, which is mapped at the same
 * address in every process.
 */
#ifndef POOL_TYPES_H
#define POOL_TYPES_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "shmpool.h"

/* ------------------------------------------------------------------------ */
/* Geometry                                                                  */
/* ------------------------------------------------------------------------ */

/* 8 KiB pages: one page holds 512 objects of the smallest class, which is the
 * most an inline span bitmap tracks, and the page map for a 1 GiB arena is
 * 128 Ki entries (640 KiB for both arrays). */
#define POOL_PAGE_SHIFT 13
#define POOL_PAGE_SIZE ((size_t)1 << POOL_PAGE_SHIFT)

/* A thread's own page map has a byte for every 4 KiB of the arena, the
 * size of the OS pages a scavenge gives back from the top of a span
 * (pool_central_purge_): a free of an object that starts in one of them
 * must take the slow path, whose checks the object's mark no longer
 * triggers, the page having been zeroed. */
#define POOL_PM_SHIFT 12
#define POOL_PM_PER_PAGE ((size_t)1 << (POOL_PAGE_SHIFT - POOL_PM_SHIFT))

/* Owner tags: an object or big span records the attach slot of the process
 * that took it (slot + 1); 0 means untracked, never reclaimed by a reap.
 * Slot 255 has no tag of its own. */
#define POOL_NO_TAG 0
#define POOL_MAX_TAG 255
/* A tag byte per object even in the 16-byte class (512 to a page), so
 * every object a process took can be given back when it dies; a shared
 * byte would have to say "nobody" whenever neighbours belong to different
 * processes, and those objects would leak unseen.  A span's tags are one
 * run, in a row of its tier: 64 bytes for a span of 64 objects or fewer
 * (every class from 128 bytes up), else its count rounded up to a power of
 * two (tier t, 64 << t bytes).  Each tier has a region with a row for
 * every page (pool_owner_of): a span writes one OS page of tags however
 * many objects it holds, and the spans of 64 >> t neighbouring pages of a
 * tier share one.  The rounding costs only the class of 170 objects a
 * third of its row. */
#define POOL_OWNER_MIN_ROW 64
#define POOL_OWNER_TIERS 4
/* Tag bytes per page, over every tier's region. */
#define POOL_OWNER_ROW (POOL_OWNER_MIN_ROW * ((1u << POOL_OWNER_TIERS) - 1))

/* Class 0 means "not a small object"; classes 1..96 are the size classes. */
#define POOL_NCLASSES 97
#define POOL_SMALL_LOOKUP_MAX 1024 /* first lookup table: by the byte */

#define POOL_MAX_OBJECTS 512 /* objects per span, so the bitmap fits inline */
_Static_assert(POOL_OWNER_MIN_ROW << (POOL_OWNER_TIERS - 1) == POOL_MAX_OBJECTS,
               "the last tier's row holds a span of the most objects");
/* The unit a hardware prefetcher streams within (a 4 KiB page, whatever
 * the pool's page): a batch of at least half of it ends on its boundary. */
#define POOL_STREAM_BYTES 4096u
/* Objects a batch between a thread cache and its central cache carries at
 * most; a fetch may add up to 2n more to end on a stream unit (a batch
 * smaller than half a unit adds at most three, to end on a cache line). */
#define POOL_BATCH_MAX 128u
#define POOL_FETCH_MAX (3 * POOL_BATCH_MAX)
/* Objects one release gives back at most (a flush gives a bin back in
 * releases of this many). */
#define POOL_RELEASE_MAX 256u
/* Spans a fetch (central.c: lowest) or a short request of the page heap
 * (pageheap.c: lowest_fit) looks at for the lowest in the arena: the
 * whole of a class's list while its empty spans fit its 512 KiB budget
 * in one-page spans. */
#define POOL_LOW_SCAN 64u
/* Pages below its spans of a class that a thread cache moves down to
 * (pool_central_move_down_): a row of tier-0 owner tags' OS page, so that
 * a move leaves that page as well as the span's own. */
#define POOL_MOVE_DOWN_PAGES 64u
#define POOL_BITMAP_WORDS (POOL_MAX_OBJECTS / 64)

#define POOL_NIL UINT32_MAX       /* "no span" in index-linked lists */
#define POOL_NO_SLOT UINT16_MAX   /* span carved by a process without a slot */

/* Free lists by exact length 1..127 pages; list 0 holds every longer span. */
#define POOL_FREE_LISTS 128
/* Free pages go back to the OS by decay: at the end of each period, the
 * part of the free pages that stayed free (not returned) through all of it,
 * beyond a cushion, is given back, longest spans first.  Pages freed and
 * reused within a period are never returned, so a churn does not fault
 * its own memory back in. */
#define POOL_DECAY_NS UINT64_C(1000000000)
/* Decay periods whose reuse the page heap's cushion follows: a burst that
 * comes back within two seconds finds its pages mapped, and one that does
 * not is given back after the second quiet period. */
#define POOL_DECAY_WINDOW 2u

#define POOL_MAGIC UINT64_C(0x6c6f6f706d687373) /* "sshmpool" little-endian */
/* Bumped whenever a shared structure changes shape.  Debug and spin builds
 * change the span and lock layouts, so they are folded into the version. */
#define POOL_LAYOUT_VERSION 24u

/* ------------------------------------------------------------------------ */
/* Locks                                                                     */
/* ------------------------------------------------------------------------ */

/* A robust, process-shared mutex, or (central caches with
 * --enable-pool-lock=spin) a plain spin word in the same storage. */
typedef union pool_lock_sh_u {
    pthread_mutex_t mutex;
    uint32_t xspin; /* 0 free, 1 held; only through __atomic builtins */
} pool_lock_sh_t;

/* What a lock protects, so that the wrapper knows which repair to run. */
typedef enum pool_lock_kind_e {
    POOL_LOCK_PAGEHEAP = 0,
    POOL_LOCK_CENTRAL = 1,
} pool_lock_kind_t;

/* The operation a lock holder is performing, recorded in its journal. */
typedef enum pool_op_e {
    POOL_OP_NONE = 0,       /* nothing in progress (committed) */
    POOL_OP_FETCH = 1,      /* central: objects to a thread cache */
    POOL_OP_ADD_SPAN = 2,   /* central: a fresh span onto the class list */
    POOL_OP_RELEASE = 3,    /* central: objects back from a thread cache */
    POOL_OP_PH_ALLOC = 4,   /* page heap: a span handed out */
    POOL_OP_PH_FREE = 5,    /* page heap: a span given back */
    POOL_OP_REAP = 6,       /* central: a dead process's objects reclaimed */
    POOL_OP_PH_RETURN = 7,  /* page heap: free spans' pages given back (decay) */
} pool_op_t;

/* One undo entry: a metadata word and the value it held before the
 * mutation.  The arena is mapped at the same address in every process, so
 * the address is valid for whoever rolls the entry back. */
typedef struct pool_undo_sh_s {
    uint64_t where; /* address << 4 | size in bytes (1, 2, 4 or 8) */
    uint64_t old;   /* the previous value */
} pool_undo_sh_t;

/* Undo entries in a journal.  An operation is a sequence of steps (a span
 * taken or given back, a batch of objects of one span); no step logs more
 * than POOL_JOURNAL_MAX entries, and a loop that takes many steps commits
 * and begins again between two of them, so an operation of any length
 * fits: each step is consistent on its own.  Every build checks the bound
 * on every save.  The room is one step's and no more: a journal's pages
 * stay resident once written, and room for a few steps each would take
 * 394 KiB where 97 journals of one step's room take 152.  Rebuilds never
 * journal: they rewrite a whole tier from the truth. */
#define POOL_JOURNAL_MAX 96
/* Entries a journal keeps in its own six lines; the rest of its room is
 * in blocks of six lines (pool_journal_more_sh_t) of POOL_JOURNAL_MORE
 * entries, block b of every journal in an array of their own, the b-th
 * after the journals: (1 + b) * (1 + POOL_NCLASSES) journals' lengths on
 * from the journal.  A step of a fetch or a release of one-page spans
 * logs 12 or 13 entries, of the page heap 6, of a class of multi-page
 * spans up to about 21, so the journals of a server's busy classes share
 * a few pages: when each journal held its whole room, each busy class's
 * took a page of its own (56 KiB of journals in a poold of 4 workers
 * under light load, and after its bursts; 24 and 32 with the rest of the
 * room apart). */
#define POOL_JOURNAL_HEAD 22
#define POOL_JOURNAL_MORE 24
#define POOL_JOURNAL_BLOCKS \
    ((POOL_JOURNAL_MAX - POOL_JOURNAL_HEAD + POOL_JOURNAL_MORE - 1) / POOL_JOURNAL_MORE)

/* The journal of one lock.  The holder begins an operation, saves every
 * metadata word before it writes it, and commits by setting op back to
 * NONE.  A process that gets EOWNERDEAD rolls the entries back in reverse
 * order: exactly the dead owner's unfinished operation is undone.  Rolling
 * back twice restores the same values, so a recoverer that dies is simply
 * recovered again.  Entry i is undo[i] below POOL_JOURNAL_HEAD, then in
 * the blocks (pool_journal_entry_). */
typedef struct pool_journal_sh_s {
    uint64_t gen;       /* operations begun under this lock */
    uint32_t op;        /* pool_op_t in progress, POOL_OP_NONE when committed */
    uint32_t n;         /* undo entries in use */
    uint64_t rolled_back; /* operations undone after a dead owner */
    uint32_t xowner;    /* a class journal: the lock index (1 + class) it serves, 0 while
                         * no lock has claimed it (atomic) */
    pool_undo_sh_t undo[POOL_JOURNAL_HEAD];
} __attribute__((aligned(64))) pool_journal_sh_t;

/* A further block of a journal's room, the size of a journal. */
typedef struct pool_journal_more_sh_s {
    pool_undo_sh_t undo[POOL_JOURNAL_MORE];
} __attribute__((aligned(64))) pool_journal_more_sh_t;

/* Who holds one lock and since when, for a watchdog to find a lock held too
 * long: written after the lock is taken and cleared before it is given
 * back.  Apart from the journals, which a lock's holder alone writes:
 * whoever watches reads every lock's, and a read puts the page it is on in
 * memory for good, so the watch of every lock fits in two pages where
 * the journals' heads take ten.  A line each, as every acquisition writes
 * it. */
typedef struct pool_lockwatch_sh_s {
    int32_t xholder;    /* pid holding the lock, 0 when free (atomic) */
    int32_t xcpu;       /* CPU the holder (when free: the last) took it on (atomic) */
    uint64_t xsince_ns; /* monotonic time it was taken (atomic) */
} __attribute__((aligned(64))) pool_lockwatch_sh_t;

/* Counters of one lock, updated while it is held (no atomics needed). */
typedef struct pool_lockstats_sh_s {
    uint64_t acquired;   /* every acquisition */
    uint64_t contended;  /* the first trylock failed */
    uint64_t wait_ns;    /* time spent blocked after a failed trylock */
    uint64_t held_ns;    /* time from acquisition to release */
    uint64_t since_ns;   /* when the current holder acquired it */
    uint64_t recoveries; /* EOWNERDEAD repairs */
} pool_lockstats_sh_t;

/* ------------------------------------------------------------------------ */
/* Size classes                                                              */
/* ------------------------------------------------------------------------ */

/* One row of the class table (process-private, computed once). */
typedef struct pool_class_s {
    uint32_t size;      /* object size, a multiple of 16 */
    uint16_t pages;     /* pages per span */
    uint16_t count;     /* objects per span (<= POOL_MAX_OBJECTS) */
    uint16_t max_batch; /* largest batch between thread cache and central */
    uint16_t watermark; /* thread-cache length beyond which frees release */
    uint16_t watermark_max; /* how far a churning bin's may grow (tcache.c) */
    uint16_t keep_empty; /* wholly free spans the central cache keeps */
    uint8_t light_class; /* the class a thread's first objects of this one come from
                          * (sizeclass.c, POOL_LIGHT_BYTES); the class itself when none */
    uint8_t light_max;   /* how many of them: 0 when light_class is the class */
} pool_class_t;

/* ------------------------------------------------------------------------ */
/* Spans                                                                     */
/* ------------------------------------------------------------------------ */

typedef enum pool_span_state_e {
    POOL_SPAN_NONE = 0,  /* not the first page of a span */
    POOL_SPAN_FREE = 1,  /* in the page heap */
    POOL_SPAN_SMALL = 2, /* carved into objects of one class */
    POOL_SPAN_BIG = 3,   /* handed whole to one caller */
} pool_span_state_t;

/* span->listed: where a span stands between the tiers.  A span in transit
 * (ARRIVING, LEAVING) is held by the process named in span->owner, between
 * two locks; a reap finishes the move if that process died. */
typedef enum pool_listed_e {
    POOL_LISTED_NO = 0,       /* small: full, off the class list; free: unlisted */
    POOL_LISTED_YES = 1,      /* on the class list, or on a page-heap free list */
    POOL_LISTED_LEAVING = 2,  /* wholly free, off its class, on its way to the page heap */
    POOL_LISTED_ARRIVING = 3, /* fresh from the page heap, not yet on its class */
    POOL_LISTED_QUARANTINED = 4, /* failed a repair: its objects are never handed out */
} pool_listed_t;

/* A run of pages.  The descriptor sits at the index of its first page, so
 * the page map's span index is also the first page; list links are indices
 * so that a repair can validate them against the array bounds. */
typedef struct pool_span_sh_s {
    uint32_t start;   /* first page (== own index) */
    uint32_t npages;  /* length in pages */
    uint32_t prev;    /* list neighbours, POOL_NIL at the ends */
    uint32_t next;
    uint8_t state;    /* pool_span_state_t */
    uint8_t cls;      /* size class for POOL_SPAN_SMALL, else 0 */
    uint8_t returned; /* free span: its pages went back to the OS; small span:
                       * OS pages at its top that went back and that no fetch
                       * has taken objects from since (pool_central_purge_) */
    uint8_t listed;   /* pool_listed_t */
    uint16_t owner;   /* tag: big span, its taker; small span in transit, its mover */
    uint16_t count;   /* objects in the span */
    uint16_t nfree;   /* objects whose bit is clear (owned by the central cache) */
    uint16_t holder;  /* small span: the slot (+ 1) whose thread cache alone takes its
                       * objects, 0 none (pool_own_t) */
    uint32_t objsize; /* object size, 0 for other states */
    /* 1 = handed out (to a thread cache or a caller).  Bits at and beyond
     * count are set so that a full word means "nothing free here". */
    uint64_t bitmap[POOL_BITMAP_WORDS];
#if POOL_CONFIG_DEBUG > 0
    /* Debug builds: 1 = held by a caller (between malloc and free), updated
     * with atomics on the fast paths to catch double and foreign frees. */
    uint64_t xheld[POOL_BITMAP_WORDS];
#endif
} pool_span_sh_t;

/* ------------------------------------------------------------------------ */
/* Central cache                                                             */
/* ------------------------------------------------------------------------ */

/* One per class; lock and list head share one 64-byte line and nothing else
 * does, so two classes never contend on a line. */
typedef struct pool_central_sh_s {
    pool_lock_sh_t lock;
    uint32_t head;   /* spans of the class with free objects */
    uint32_t nspans; /* spans of the class, listed or full */
    uint32_t nempty; /* listed spans with every object free (at most keep_empty) */
    uint32_t nempty_min;     /* fewest empty spans in the decay period */
    uint64_t decay_start_ns; /* monotonic start of the decay period */
} __attribute__((aligned(64))) pool_central_sh_t;

/* Central counters per class, on their own lines, written under the lock. */
typedef struct pool_centralstats_sh_s {
    uint64_t fetches;    /* fetch calls */
    uint64_t fetched;    /* objects handed out by fetches */
    uint64_t releases;   /* release calls */
    uint64_t released;   /* objects given back */
    uint64_t spans_in;   /* spans taken from the page heap */
    uint64_t spans_out;  /* wholly free spans given back */
    uint64_t pad_[2];
} pool_centralstats_sh_t;

/* ------------------------------------------------------------------------ */
/* Page heap                                                                 */
/* ------------------------------------------------------------------------ */

typedef struct pool_pageheap_sh_s {
    pool_lock_sh_t lock;
    uint32_t npages;   /* data pages in the arena */
    uint32_t carved;   /* pages [0, carved) have been handed out at least once */
    uint64_t free_pages;     /* pages in free spans */
    uint64_t returned_pages; /* of those, pages given back with MADV_REMOVE */
    uint64_t small_pages;    /* pages in small spans */
    uint64_t big_pages;      /* pages in big spans */
    uint64_t nonempty[POOL_FREE_LISTS / 64]; /* bit i: list i not empty */
    uint32_t heads[POOL_FREE_LISTS];
    /* counters, written under the lock */
    uint64_t allocs;     /* span requests */
    uint64_t frees;      /* spans given back */
    uint64_t madvises;   /* MADV_REMOVE calls */
    uint64_t reused_returned; /* returned pages handed out again */
    uint64_t quarantined_pages; /* pages a repair could not make sense of */
    /* decay (POOL_DECAY_NS), written under the lock */
    uint64_t decay_start_ns;  /* monotonic start of the current period */
    uint64_t decay_min_pages; /* fewest free, unreturned pages seen in it */
    uint64_t decay_high_pages;  /* most free, unreturned pages seen in it so far */
    uint64_t decay_reuse_pages; /* most of them taken again since that high */
    /* decay_reuse_pages of the periods ended, that of period p at
     * [p % POOL_DECAY_WINDOW] */
    uint64_t decay_reuse[POOL_DECAY_WINDOW];
    uint64_t decay_periods;   /* periods ended (counter) */
    uint64_t decayed_pages;   /* pages returned by decay (counter) */
} pool_pageheap_sh_t;

/* ------------------------------------------------------------------------ */
/* Crash accounting                                                          */
/* ------------------------------------------------------------------------ */

/* What one pool_reap() found, kept for /stats. */
typedef struct pool_reaprec_sh_s {
    int32_t pid;
    int32_t reaper;     /* the process that reaped it */
    uint32_t slots;
    uint32_t pad_;
    uint64_t cached;    /* bytes of thread caches given back */
    uint64_t live;      /* bytes of live objects and big spans reclaimed */
    uint64_t transit;   /* bytes of spans it was moving between tiers */
    uint64_t leaked;    /* bytes that could not be given back */
} pool_reaprec_sh_t;

#define POOL_REAP_HISTORY 16

/* Written under the page-heap lock (reaps hold every lock), or with
 * atomics (recoveries, which hold only their own lock). */
typedef struct pool_crash_sh_s {
    uint64_t xrecoveries;   /* locks recovered from a dead owner */
    uint64_t xrolled_back;  /* of those, with an operation to undo */
    uint64_t xrebuilds;     /* classes rebuilt because verification failed */
    uint64_t xquarantined;  /* bytes quarantined by repairs */
    uint64_t reaps;         /* pool_reap() calls that found a dead process */
    uint64_t cached;        /* totals over all reaps, as in pool_reaprec_sh_t */
    uint64_t live;
    uint64_t transit;
    uint64_t leaked;
    pool_reaprec_sh_t last[POOL_REAP_HISTORY]; /* ring, reaps % 16 */
} pool_crash_sh_t;

/* ------------------------------------------------------------------------ */
/* Thread cache and slots                                                    */
/* ------------------------------------------------------------------------ */

/* What free's fast path tests of one size class of a thread cache.  Eight
 * bytes, as a bin's head is, so that both fast paths index the two arrays
 * by the class times eight, which an x86-64 address does for free (a
 * struct of both would need the multiply). */
typedef struct pool_bin_s {
    int32_t room;       /* frees the bin takes before free takes the slow path:
                         * its watermark less its length, counted down so that
                         * free's fast path decrements and tests it in one
                         * step (and gives the one back on its way to the
                         * slow path) */
    uint32_t misalign;  /* bits no object start of the class has set: its size's
                         * power-of-two part (at most a page) less one, as
                         * spans start on pages; free's fast path sends a
                         * pointer with one set to the slow path's full check */
} pool_bin_t;

/* Per-class counters of one slot (stats builds only write them). */
typedef struct pool_binstats_s {
    uint64_t allocs;   /* objects allocated */
    uint64_t frees;    /* objects freed */
    uint64_t misses;   /* allocations that found the bin empty */
    uint64_t overflows;/* frees that found the bin at its watermark */
    uint64_t fetches;  /* batches fetched from central */
    uint64_t fetched;  /* objects in those batches */
    uint64_t releases; /* batches released to central */
    uint64_t released; /* objects in those batches */
} pool_binstats_t;

/* The spans of one class a thread cache owns, what it freed of spans it
 * does not, and its bin's watermark and batch size.  A span is owned from
 * the fetch that finds it unowned until the owner gives it up (its objects
 * all back through the owner's own release, a flush, or the owner's reap),
 * so that no two threads' live objects share a span.  The lists are linked
 * through the spans' prev and next and change only under the class lock. */
/* An inbox word (pool_own_t.xinbox): its first object, as its offset from
 * the arena's first data page in 16-byte units (bits 0-39), the objects
 * chained from it through their first words (bits 40-55; 0: empty), the
 * generation of the slot's inbox (bits 56-62), which every reopening
 * bumps, so that a free that read the word of an earlier holder of the
 * slot, or of an owner since gone through a flush, cannot push, and
 * CLOSED (bit 63): the cache is giving its spans up, or is dead, and no
 * free pushes. */
#define POOL_INBOX_COUNT_SHIFT 40
#define POOL_INBOX_GEN_SHIFT 56
#define POOL_INBOX_CLOSED (UINT64_C(1) << 63)

typedef struct pool_own_s {
    uint32_t spans;    /* owned spans with free objects */
    uint32_t full;     /* owned spans with none */
    void *remote;        /* objects of the process's other threads' spans freed here,
                          * bound for the central cache in one release (linked
                          * and marked as a bin's) */
    int32_t remote_room; /* the remote list's length, negated: a room counted down
                          * from 0 as a bin's is from its watermark */
    uint16_t watermark;  /* the bin's length at which free takes the slow path:
                          * its room when empty (16 bits as pool_class_t's;
                          * with batch and churned it fills what would be
                          * padding here); grows from the class's by churn,
                          * back at each scavenge */
    uint8_t batch;       /* the bin's next fetch size; grows by one up to the
                          * class maximum (POOL_BATCH_MAX) */
    uint8_t churned;     /* the bin released objects since its last refill */
    uint64_t xinbox;     /* objects of this cache's spans that other caches freed,
                          * pushed here without a lock and taken whole by the
                          * cache (atomic; see POOL_INBOX_COUNT_SHIFT) */
} pool_own_t;

/* The thread cache.  The fast paths read base/size/pm_class from here so a
 * thread needs one TLS load; the static empty cache has size 0, so every
 * free misses, and NULL heads, so every malloc misses. */
typedef struct pool_tcache_sh_s {
    uintptr_t base;          /* first data page of the arena */
    uintptr_t size;          /* data bytes; 0 in the empty cache */
    const uint8_t *pm_class; /* the thread's own page map (process-private), a byte
                              * per 4 KiB (POOL_PM_SHIFT): the class of those its
                              * objects start in, 0 elsewhere and in those a
                              * scavenge gave back */
    pool_binstats_t *stats;  /* [POOL_NCLASSES]: the slot's row of the arena's
                              * counters (stats builds only write them), kept
                              * out of the cache, whose pages every thread
                              * touches: 6 KiB a slot, a page of it on average */
    uint16_t slot;           /* own slot index */
    uint16_t tag;            /* owner tag of the process (its attach slot + 1) */
    /* heads start a line: the line above, which every free of an object
     * of this cache's spans in another thread reads (the tag), is then
     * never written while the slot is held, where the heads of classes 0
     * to 2 beside it moved it to this thread at every malloc of them and
     * back at every such free (pingpong: 158 ns a pair with them there,
     * 134 without). */
    void *heads[POOL_NCLASSES] __attribute__((aligned(64))); /* per class, free
                                 * objects threaded through their first word,
                                 * each marked in its second (pool_bin_push) */
    pool_bin_t bins[POOL_NCLASSES];
    pool_own_t own[POOL_NCLASSES];
    uint8_t class_small[POOL_SMALL_LOOKUP_MAX + 1]; /* pool_class_small_, copied when a
                                                     * thread takes the slot: malloc's fast
                                                     * path indexes it off the cache's
                                                     * address, already in a register, and
                                                     * loads no table address.  All zero in
                                                     * the empty cache: class 0, whose
                                                     * head is NULL.  Last, so that heads
                                                     * keeps a one-byte displacement */
    uint8_t light[POOL_NCLASSES]; /* per class, the objects its malloc took from its
                                   * light_class (pool_class_t) since the thread took
                                   * the slot, or since the flush that gave the budget
                                   * back (POOL_LIGHT_AGAIN set) */
} pool_tcache_sh_t;

/* In a light[] count: a flush has given the class its budget back, which
 * it does once (tcache.c, relight()). */
#define POOL_LIGHT_AGAIN 0x80u

/* A slot's xstate is POOL_SLOT_FREE or the pid of the process holding it.
 * Whether that process still lives is not read from the pid (pids are
 * reused): the thread holding a slot keeps the slot's `life` mutex, a
 * robust one, locked for as long as it lives, so the kernel marks the
 * mutex owner-dead when the thread dies, when its process exits, is killed
 * or crashes, and when it calls exec.  A trylock by anyone else then
 * answers: EBUSY, alive; EOWNERDEAD, dead.  Claiming a slot takes its life
 * lock first, so a process killed right after the claim is found dead. */
typedef enum pool_slot_state_e {
    POOL_SLOT_FREE = 0,
} pool_slot_state_t;

/* slot->xflags */
#define POOL_SLOT_DEAD 1u  /* found dead, reap not finished: a reaper died or
                            * could not take the locks in time */
#define POOL_SLOT_BYPID 2u /* the thread that attached exited and its process
                            * lives on: life is not held; judge by the pid and
                            * the process's start time */

/* Slot-wide counters (stats builds). */
typedef struct pool_slotstats_s {
    uint64_t big_allocs;  /* spans over 256 KiB or over-aligned */
    uint64_t big_frees;
    uint64_t direct_frees; /* arena frees by a thread without a cache */
    uint64_t fallbacks;   /* allocations served privately: arena full */
} pool_slotstats_t;

/* One attached thread.  Lives in the arena so that, after a crash, another
 * process finds what the dead thread had cached; its cache is the arena's
 * tcaches[] of the same index. */
typedef struct pool_slot_sh_s {
    pool_lock_sh_t life; /* robust mutex the holding thread keeps locked */
    uint32_t xstate;   /* POOL_SLOT_FREE or the holder's pid (atomic) */
    uint32_t xflags;   /* POOL_SLOT_DEAD, POOL_SLOT_BYPID (atomic) */
    uint32_t used;     /* ever taken: stats print only these, and only these have
                        * their cache's lists of owned spans set (atomic: set
                        * after them) */
    int32_t pid;       /* process that holds (or last held) the slot */
    int32_t tid;
    uint32_t tag;      /* owner tag the thread's objects carry */
    uint64_t start;    /* the process's start time, for POOL_SLOT_BYPID */
    pool_slotstats_t stats;
} pool_slot_sh_t;

/* ------------------------------------------------------------------------ */
/* Arena header                                                              */
/* ------------------------------------------------------------------------ */

/* Where each region of the arena starts: byte offsets from base, as
 * arena.c lays them out for a number of data pages. */
typedef struct pool_layout_sh_s {
    uint64_t off_slots, off_tcaches, off_binstats, off_central, off_centralstats, off_lockstats;
    uint64_t off_watch;
    uint64_t off_pageheap, off_spans, off_pm_class, off_pm_span, off_data;
    uint64_t off_journals, off_owners, off_crash;
} pool_layout_sh_t;

typedef struct pool_header_sh_s {
    uint64_t magic;       /* POOL_MAGIC once initialised */
    uint32_t version;     /* pool_layout_version_() of the creator */
    uint32_t page_shift;  /* POOL_PAGE_SHIFT */
    uintptr_t base;       /* address the arena was mapped at */
    uint64_t size;        /* bytes mapped */
    uint32_t npages;      /* data pages */
    uint32_t backing;     /* pool_backing_t: base pages, THP or hugetlb */
    uint32_t shared;      /* 1: MAP_SHARED, for forked processes to attach; 0: the
                           * creating process's alone, copied on write by a fork */
    pool_layout_sh_t layout;
    uint64_t xfallbacks;     /* arena full: served privately (atomic) */
    uint64_t xforeign_frees; /* detached processes' arena frees (atomic) */
    uint64_t xattach_failures; /* attaches refused: every slot held by a live thread, or
                                * none free below the top and the page-heap lock held
                                * past the wait to raise it */
    uint64_t xreap_due_ns;   /* monotonic time of the next periodic reap */
    uint32_t xslots_top;     /* slots [0, top) have their life lock made and may have
                              * been taken; none above has been read or written, so
                              * their pages of the arena were never touched (atomic) */
    uint8_t xjournal_at[1 + POOL_NCLASSES]; /* by lock index: the journal a class lock
                                             * claimed at its first operation, 0 before
                                             * (the page heap's is journal 0) (atomic) */
} pool_header_sh_t;

/* The process's view of the arena: addresses computed from the header. */
typedef struct pool_arena_s {
    pool_header_sh_t *hdr;           /* NULL when no arena is mapped */
    pool_slot_sh_t *slots;           /* [POOL_MAX_SLOTS] */
    pool_tcache_sh_t *tcaches;       /* [POOL_MAX_SLOTS]: slot i's thread cache */
    pool_binstats_t *binstats;       /* [POOL_MAX_SLOTS][POOL_NCLASSES] */
    pool_central_sh_t *central;      /* [POOL_NCLASSES] */
    pool_centralstats_sh_t *cstats;  /* [POOL_NCLASSES] */
    pool_lockstats_sh_t *lockstats;  /* [1 + POOL_NCLASSES]: page heap, classes */
    pool_lockwatch_sh_t *watch;      /* [1 + POOL_NCLASSES]: page heap, classes */
    pool_pageheap_sh_t *ph;
    pool_span_sh_t *spans;           /* [npages] */
    uint8_t *pm_class;               /* [npages] */
    uint32_t *pm_span;               /* [npages] */
    pool_journal_sh_t *journals;     /* [1 + POOL_NCLASSES]: page heap, classes */
    uint8_t *owners;                 /* per tier t, [npages][64 << t]: object
                                      * tags (pool_owner_of) */
    pool_crash_sh_t *crash;
    uintptr_t data;                  /* first data page */
    uintptr_t data_size;             /* npages << POOL_PAGE_SHIFT */
    uint32_t npages;
} pool_arena_t;

/* Where this process stands. */
typedef enum pool_proc_state_e {
    POOL_PROC_PRIVATE = 0,  /* never attached, or detached by pool_detach() */
    POOL_PROC_ATTACHED = 1,
    POOL_PROC_FORKED = 2,   /* child of an attached process: arena frees ignored */
} pool_proc_state_t;

#endif /* POOL_TYPES_H */

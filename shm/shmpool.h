/* SPDX-License-Identifier: BSD-2-Clause */
/* libshmpool — public API, installed as <shmpool.h> (pkg-config: shmpool;
 * manual: shmpool(3)).
 *
 * A three-tier allocator (thread cache, central cache per size class, page
 * heap) whose pages live in one MAP_SHARED arena that a master creates before
 * it forks.  Processes that attach to the arena allocate from it; every other
 * process (and every process before it attaches) uses a private heap.  free(),
 * realloc() and pool_usable_size() dispatch by address, so a pointer may be
 * released from any process that has the arena mapped.
 *
 * This header never includes config.h: it is installed and used as is.
 */
#ifndef SHMPOOL_H
#define SHMPOOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef __cplusplus
extern "C" {
#endif

#define POOL_API __attribute__((visibility("default")))

/* Default arena reservation: 1 GiB, MAP_NORESERVE, committed as touched. */
#define POOL_HEAP_SIZE_DEFAULT ((size_t)1 << 30)
/* Worker slots in the arena (stats, thread-cache parking, crash recovery). */
#define POOL_MAX_SLOTS 256
/* Largest request served from a size class; larger ones take whole spans. */
#define POOL_MAX_SMALL ((size_t)256 << 10)

/* ------------------------------------------------------------------------ */
/* Arena lifecycle                                                           */
/* ------------------------------------------------------------------------ */

/* Reserve the shared arena of `size` bytes (rounded up to the page size) and
 * initialise its header.  Called once by the master before it forks; the
 * caller stays on its private heap.  Returns 0, EEXIST if an arena already
 * exists in this process, EINVAL for a size below the minimum
 * (pool_min_heap_size()) or above the page map's reach, or the errno of a
 * failed mmap. */
POOL_API int pool_create(size_t size);

/* Smallest arena pool_create() accepts (header, page map, a few spans). */
POOL_API size_t pool_min_heap_size(void);

/* Attach the calling process to the arena it inherited: reap any dead
 * process, take a worker slot, and from now on serve malloc from the
 * arena.  Called first thing after fork.  Returns 0, ENOENT if no arena is
 * mapped (or this is a forked child of an attached process, whose arena is
 * a private copy), EPROTO if the header's base address or layout version
 * does not match (a message naming both is written to stderr), EAGAIN if
 * every slot is held by a live thread, EALREADY if attached. */
POOL_API int pool_attach(void);

/* Stop serving from the arena: the thread caches of the calling thread go
 * back to the central caches and the slot is released.  Later frees of arena
 * pointers still work. */
POOL_API void pool_detach(void);

/* True when the calling process is attached. */
POOL_API bool pool_attached(void);

/* The attached process's slot index, or -1. */
POOL_API int pool_slot(void);

/* "shmpool" */
POOL_API const char *pool_name(void);

/* ------------------------------------------------------------------------ */
/* Allocation (the override maps malloc & co. onto these)                    */
/* ------------------------------------------------------------------------ */

/* malloc's contract: 16-byte aligned, NULL with errno = ENOMEM on failure,
 * a unique pointer for size 0.  An attached process allocates in the arena
 * and falls back to the private heap when the arena is exhausted. */
POOL_API void *pool_malloc(size_t size);
/* free's contract; errno is preserved; NULL is ignored. */
POOL_API void pool_free(void *p);
POOL_API void *pool_calloc(size_t n, size_t size);
/* realloc's contract (glibc's: realloc(p, 0) frees p and returns NULL). */
POOL_API void *pool_realloc(void *p, size_t size);
/* Returns 0, EINVAL (alignment not a power of two multiple of
 * sizeof(void *)) or ENOMEM; errno untouched. */
POOL_API int pool_posix_memalign(void **out, size_t align, size_t size);
/* memalign's contract: any power-of-two alignment, NULL/EINVAL otherwise. */
POOL_API void *pool_memalign(size_t align, size_t size);
POOL_API size_t pool_usable_size(const void *p);

/* True when p lies inside the shared arena. */
POOL_API bool pool_owns(const void *p);

/* ------------------------------------------------------------------------ */
/* Checking and accounting                                                   */
/* ------------------------------------------------------------------------ */

/* Byte accounting over the whole arena, summed across processes.  For a
 * quiescent arena in_use + cached + free == used. */
typedef struct pool_usage_s {
    size_t reserved;     /* arena size */
    size_t used;         /* pages ever carved from the arena, minus the header */
    size_t in_use;       /* bytes of objects and big spans handed to callers */
    size_t cached;       /* free objects in thread and central caches */
    size_t free;         /* free pages in the page heap (returned or not) */
    size_t returned;     /* of `free`, bytes given back to the OS */
    size_t fallbacks;    /* allocations served privately because the arena was full */
    size_t foreign_frees;/* arena frees ignored in a detached process */
    size_t attach_failures; /* attaches refused: every slot held by a live thread */
} pool_usage_t;

/* Fill *u.  Takes each lock briefly, waiting 200 ms at most in all;
 * thread caches of other processes are counted from their slots.  Returns
 * 0; EAGAIN when a live process kept a lock past that (a stuck holder):
 * what that lock guards was read as it was, so *u is approximate. */
POOL_API int pool_usage(pool_usage_t *u);

/* Walk every structure (page map, spans, free lists, bitmaps, counts, central
 * lists, slots and every thread cache's list) under the locks.  Returns 0
 * when consistent; otherwise -1, with the first inconsistency described in
 * msg (NUL-terminated, truncated to cap) and written to stderr.  Other
 * threads' caches change under no lock: call it on a quiescent arena
 * (pool_stats_json's check leaves them out). */
POOL_API int pool_check(char *msg, size_t cap);

/* Write the allocator's section of poold's /stats as one JSON object into
 * buf without allocating (name, arena figures, in debug builds a check of
 * the live arena, and with --enable-pool-stats the per-slot, per-class
 * counters).  Waits for each lock 200 ms at most, like pool_usage().
 * Returns the length it needed, like snprintf; buf is NUL-terminated when
 * cap > 0. */
POOL_API size_t pool_stats_json(char *buf, size_t cap);

/* Flush the calling thread's cache to the central caches (tests, detach). */
POOL_API void pool_thread_flush(void);

/* Give three quarters of each bin of the calling thread's cache back to
 * the central caches, keeping the most recently freed quarter, halve each
 * bin's next refill (each refill grows it by one again), move the cache's spans
 * of a class down the heap when they are little used and free pages lie
 * far below them, give back the OS pages at the top of the spans it keeps
 * that hold nothing in use, and end the decay period of every class that has gone
 * quiet: the empty spans it kept through a whole period go to the page
 * heap (one stays if a span of the class emptied in that period), whose
 * own decay gives them to the OS at the end of its current period, which
 * this call ends too once it has run its length.  A thread that
 * calls it every second or so (poold's workers do, from their one-second
 * timer) drains what a burst left in its cache and its classes within
 * seconds of going quiet, and costs a busy one a refill a second; nothing
 * else drains the cache of a thread that stays in its fast paths.  Does
 * nothing in a thread that is not attached. */
POOL_API void pool_thread_scavenge(void);

/* Give back to the OS the free pages that stayed free through a whole
 * decay period (one second), if one has run twice its length: what the
 * page heap's own operations and pool_thread_scavenge do at its end, for
 * an arena that has gone quiet (after a burst, pages would otherwise stay mapped until the next
 * page-heap operation).  Any
 * process that maps the arena may call it, attached or not; cheap when no
 * period has ended.  poold's master calls it every second.  Returns 0;
 * EAGAIN if a live process kept the page-heap lock for 200 ms (a stuck
 * holder: nothing was done; call again later). */
POOL_API int pool_decay(void);

/* ------------------------------------------------------------------------ */
/* Crashes                                                                   */
/* ------------------------------------------------------------------------ */

/* A process may die at any instruction, also holding a pool lock: the next
 * locker undoes its unfinished operation from the lock's journal and
 * verifies the structure before going on.  What a process that ended (by
 * exit, exec, a kill or a crash) still held -- its thread caches, the
 * objects it allocated, spans it was moving between tiers, its slots -- is
 * given back by whichever process notices first: one that attaches, one
 * that runs short of slots or memory, one whose slow path comes past the
 * periodic due time, or a master that waited for it and calls pool_reap().
 * A death is read from a robust mutex each slot's holder keeps locked for
 * life, never from a pid.
 *
 * Ownership invariant: objects are not shared across processes, or the
 * receiver adopts them.  Every small object records the process that took
 * it from its central cache, every big span the process that allocated it
 * (by the process's attach slot).  When that process dies, pool_reap()
 * frees all of them: an object handed to another process that did not call
 * pool_adopt() on it would then be handed out twice.  Threads of one
 * process share freely.  A process that detaches disowns what it still
 * holds (no reap will take it).  The slot above 254 has no tag: a process
 * attached there cannot be reaped of its live objects. */

/* What pool_reap() gave back and what it could not, in bytes. */
typedef struct pool_reap_report_s {
    pid_t pid;
    pid_t reaper;            /* the process that reaped it: the caller, or whoever
                              * noticed first */
    unsigned slots;          /* slots the process held (one per thread) */
    unsigned recoveries;     /* locks found with a dead owner while reaping */
    size_t cached;           /* its thread caches, back to the central caches */
    size_t live;             /* objects and big spans it had allocated, freed */
    size_t transit;          /* spans it was moving between tiers, finished */
    size_t leaked;           /* cached objects behind a broken link: not found */
} pool_reap_report_t;

/* Give back everything process pid (dead, already waited for) held in the
 * arena, take and release every pool lock so that each repair happens now,
 * and free its slots.  Fills *out (when not NULL): when another process
 * reaped pid first, with that reap's figures and its reaper.  Returns 0;
 * ESRCH if pid held no slot and no recent reap names it; EBUSY if pid is
 * still alive (judged by its slots' life locks, waiting up to 200 ms for
 * one another reaper holds); EAGAIN if some lock stayed held by a live
 * process for 200 ms (a stuck holder: nothing was done, call again later);
 * ENOENT without an arena.  Never aborts on what it finds. */
POOL_API int pool_reap(pid_t pid, pool_reap_report_t *out);

/* Take and release every pool lock, so that a lock whose holder died is
 * repaired now rather than at the next allocation; *recovered (when not
 * NULL) gets how many were.  Returns 0; EAGAIN if some lock stayed held by
 * a live process for 200 ms (a stuck holder: the other locks were still
 * repaired; call again once the holder is gone); ENOENT without an arena.
 * Unlike this call, allocations and pool_detach() wait for a stuck holder
 * as for any mutex: pool_lock_stalled() is how a supervisor finds it. */
POOL_API int pool_repair(unsigned *recovered);

/* The pid of a process that has held a pool lock for at least min_ms
 * milliseconds, or 0.  Read without locks: a watchdog's hint (confirm the
 * process is stuck before acting on it). */
POOL_API pid_t pool_lock_stalled(unsigned min_ms);

/* Make the calling process the owner of p, an object another process
 * allocated and handed over (see the invariant above).  NULL, private
 * pointers and calls from a process that is not attached are ignored. */
POOL_API void pool_adopt(void *p);

#ifdef __cplusplus
}
#endif
#endif /* SHMPOOL_H */

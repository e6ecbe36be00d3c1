/* libshmpool — public API.
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
#ifndef POOL_H
#define POOL_H

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

/* Attach the calling process to the arena it inherited: take a worker slot,
 * and from now on serve malloc from the arena.  Called first thing after
 * fork.  Returns 0, ENOENT if no arena is mapped, EPROTO if the header's
 * base address or layout version does not match (a message naming both is
 * written to stderr), EAGAIN if every slot is taken, EALREADY if attached. */
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
} pool_usage_t;

/* Fill *u.  Takes each lock briefly; thread caches of other processes are
 * counted from their slots. */
POOL_API void pool_usage(pool_usage_t *u);

/* Walk every structure (page map, spans, free lists, bitmaps, counts, central
 * lists, slots) under the locks.  Returns 0 when consistent; otherwise -1,
 * with the first inconsistency described in msg (NUL-terminated, truncated
 * to cap) and written to stderr. */
POOL_API int pool_check(char *msg, size_t cap);

/* Write the allocator's section of poold's /stats as one JSON object into
 * buf without allocating (name, arena figures, and with --enable-pool-stats
 * the per-slot, per-class counters).  Returns the length it needed, like
 * snprintf; buf is NUL-terminated when cap > 0. */
POOL_API size_t pool_stats_json(char *buf, size_t cap);

/* Flush the calling thread's cache to the central caches (tests, detach). */
POOL_API void pool_thread_flush(void);

#ifdef __cplusplus
}
#endif
#endif /* POOL_H */

/* SPDX-License-Identifier: BSD-2-Clause */
/* libshmpool — every call into the operating system.
 *
 * The tiers never call the OS directly: they go through these functions, so
 * that porting the pool means writing one prim/<os>.c.  Functions return 0
 * or an errno value unless said otherwise; none of them allocates.
 */
#ifndef POOL_PRIM_H
#define POOL_PRIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The name the arena's memory goes by: /memfd:shmpool in /proc/PID/maps. */
#define POOL_MEMFD_NAME "shmpool"

/* What the arena's memory is made of (pool_header_sh_t.backing). */
typedef enum pool_backing_e {
    POOL_BACKING_PAGES = 0,   /* the system's base pages */
    POOL_BACKING_THP = 1,     /* transparent huge pages, where the system has them */
    POOL_BACKING_HUGETLB = 2, /* reserved huge pages (hugetlbfs), all of it */
} pool_backing_t;
/* Bytes of one huge page, the unit of a hugetlb arena. */
#define POOL_HUGE_PAGE ((size_t)2 << 20)

/* Map the arena, size bytes at an address that is a multiple of align (a
 * power of two); *out gets the address.  Shared: a memfd named
 * POOL_MEMFD_NAME where the system has them, else anonymous shared memory,
 * for processes forked from this one to attach to.  Private (never with
 * HUGETLB): anonymous memory of this process alone, copied on write by a
 * fork; its first page is a private mapping of such a memfd, so that it
 * goes by the same name in /proc/PID/maps.  Base pages and THP are mapped
 * without commit charge, and alike: THP's huge pages are asked for
 * afterwards, where the caller wants them (pool_prim_advise_huge_).
 * HUGETLB (size a multiple of POOL_HUGE_PAGE) reserves every huge page at
 * the mapping, so that no fault can ever find one missing: ENOMEM when the
 * system has too few free. */
int pool_prim_map_arena_(size_t size, size_t align, pool_backing_t backing, bool shared,
                         void **out);
/* Whether the system gives transparent huge pages to memory that asks:
 * shared memory (/sys/kernel/mm/transparent_hugepage/shmem_enabled) or
 * private (.../enabled). */
bool pool_prim_thp_(bool shared);
/* Ask for transparent huge pages for [p, p+size) of the arena
 * (MADV_HUGEPAGE), which the system gives where pool_prim_thp_ says it
 * does, and where it can: base pages elsewhere. */
int pool_prim_advise_huge_(void *p, size_t size);
/* Unmap [p, p+size). */
int pool_prim_unmap_(void *p, size_t size);
/* Give [p, p+size) of the arena back to the OS; the pages read back as
 * zero.  Shared: MADV_REMOVE, which frees them for every process
 * (MADV_DONTNEED would free nothing there).  Private: MADV_DONTNEED. */
int pool_prim_remove_(void *p, size_t size, bool shared);
/* Which OS pages of [p, p+len) (p page-aligned) have memory behind them
 * (mincore): vec[i] & 1 for the i-th.  A page of a shared arena never
 * written, or given back, has none and reads as zeros, but a read of it
 * through the mapping allocates it; a page swapped out has none either. */
int pool_prim_resident_(const void *p, size_t len, unsigned char *vec);
/* Map size bytes of private anonymous memory, MAP_NORESERVE (zero until
 * written).  *out gets the address. */
int pool_prim_map_private_(size_t size, void **out);
/* Zero [p, p+size) of a private anonymous mapping by giving its pages
 * back (MADV_DONTNEED). */
int pool_prim_zero_(void *p, size_t size);
/* memcpy of len bytes (page-aligned) between two mappings, mapping the
 * pages of both in one call each first: a page-by-page fault on either
 * side costs more than the copy. */
void pool_prim_copy_(void *dst, const void *src, size_t len);
/* Move the mapping [from, from+size) to `to`, replacing whatever was
 * mapped there, in one step (mremap). */
int pool_prim_move_(void *from, void *to, size_t size);
/* A fork gate: the parent opens it before fork, waits after fork until the
 * child has released it (or died); the child releases it. */
int pool_prim_gate_open_(int fds[2]);
void pool_prim_gate_wait_(int fds[2]);
void pool_prim_gate_release_(int fds[2]);
/* write(2) all of buf to fd, retrying on EINTR and short writes. */
void pool_prim_write_(int fd, const char *buf, size_t len);
int pool_prim_getpid_(void);
int pool_prim_gettid_(void);
/* Let another thread run (spinlock back-off). */
void pool_prim_yield_(void);
/* The CPU the calling thread runs on, or -1 when the system does not say. */
int pool_prim_cpu_(void);
/* Monotonic clock in nanoseconds. */
uint64_t pool_prim_now_ns_(void);
/* Monotonic clock, coarse (a few ms) and cheap: lock-holder timestamps. */
uint64_t pool_prim_now_coarse_ns_(void);
/* True while process pid exists (also as a zombie). */
bool pool_prim_alive_(int pid);
/* When process pid started, in clock ticks since boot (/proc/PID/stat):
 * with the pid, it names one process for good.  0 or ESRCH. */
int pool_prim_start_time_(int pid, uint64_t *out);
/* Stop by SIGSTOP, as a hung process would (crash points, ":stop"). */
void pool_prim_stop_self_(void);
/* Die at once by SIGKILL (crash points). */
void pool_prim_kill_self_(void) __attribute__((noreturn));
/* The environment variable name, or NULL (getenv: no allocation). */
const char *pool_prim_getenv_(const char *name);
/* The next definition of symbol `name` after the pool's own (the C
 * library's waitpid ...: a wrapper loaded after the pool is kept), or NULL
 * when the dynamic linker cannot name it.  Cast it to the function's type. */
typedef void (*pool_fn_t)(void);
pool_fn_t pool_prim_next_symbol_(const char *name);
/* The private heap: where a process that is not attached allocates, and
 * what a block outside the arena is freed, resized and measured by.  One
 * allocator, named, never "whatever the dynamic linker finds next": glibc's
 * (its __libc_malloc family and its malloc_usable_size, found by glibc's
 * symbol version), unless the program is linked to an allocator the pool
 * does not take over (override.c takes over jemalloc's entry points, not
 * tcmalloc's or mimalloc's); then that allocator's own malloc family, so
 * that none of its blocks meets glibc.  Resolved by the first call, which may come
 * from inside malloc; none of them allocates through the pool. */
void *pool_prim_private_malloc_(size_t size);
void pool_prim_private_free_(void *p);
void *pool_prim_private_calloc_(size_t n, size_t size);
void *pool_prim_private_realloc_(void *p, size_t size);
void *pool_prim_private_memalign_(size_t align, size_t size);
size_t pool_prim_private_usable_(void *p);
/* NULL when the private heap is glibc's; otherwise the file of the
 * program's own allocator that it is (the pool then stays out of the way:
 * preload.c creates no arena). */
const char *pool_prim_private_foreign_(void);
/* The OS page size (valloc, pvalloc). */
size_t pool_prim_os_page_size_(void);

#endif /* POOL_PRIM_H */

/* SPDX-License-Identifier: BSD-2-Clause */
/* libshmpool — the malloc family, mapped onto the pool.
 *
 * Only these symbols live here, so that the unit tests can link the pool
 * without them.  They are exported with default visibility even though the
 * pool is built -fvisibility=hidden: poold links the archives statically
 * and must still export malloc to libevent and libc.
 *
 * Beside the standard family: glibc's __libc_ names, and every entry point
 * of jemalloc's that takes or gives a block, so that a program linked to
 * jemalloc has one heap under the preload (libshmpool(7) lists what is
 * taken over and what is left to the allocators programs bring).
 */
#include "alloc.h"

#include <errno.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include "prim/prim.h"

#define POOL_EXPORT __attribute__((visibility("default")))

/* glibc no longer declares cfree, but old binaries still call it. */
void cfree(void *p);
/* Declared by no header we include: jemalloc's (<jemalloc/jemalloc.h>). */
void *mallocx(size_t size, int flags);
size_t nallocx(size_t size, int flags);
void *rallocx(void *p, size_t size, int flags);
size_t xallocx(void *p, size_t size, size_t extra, int flags);
size_t sallocx(const void *p, int flags);
void dallocx(void *p, int flags);
void sdallocx(void *p, size_t size, int flags);

POOL_EXPORT void *malloc(size_t size)
{
    return pool_malloc_fast(size);
}

POOL_EXPORT void free(void *p)
{
    pool_free_fast(p);
}

POOL_EXPORT void cfree(void *p)
{
    pool_free_fast(p);
}

POOL_EXPORT void *calloc(size_t n, size_t size)
{
    return pool_calloc(n, size);
}

POOL_EXPORT void *realloc(void *p, size_t size)
{
    return pool_realloc(p, size);
}

POOL_EXPORT void *reallocarray(void *p, size_t n, size_t size)
{
    size_t total;
    if (__builtin_mul_overflow(n, size, &total)) {
        errno = ENOMEM;
        return NULL;
    }
    return pool_realloc(p, total);
}

POOL_EXPORT int posix_memalign(void **out, size_t align, size_t size)
{
    return pool_posix_memalign(out, align, size);
}

POOL_EXPORT void *aligned_alloc(size_t align, size_t size)
{
    return pool_memalign(align, size);
}

POOL_EXPORT void *memalign(size_t align, size_t size)
{
    return pool_memalign(align, size);
}

POOL_EXPORT void *valloc(size_t size)
{
    return pool_memalign(pool_prim_os_page_size_(), size);
}

POOL_EXPORT void *pvalloc(size_t size)
{
    size_t page = pool_prim_os_page_size_();
    size_t rounded = (size + page - 1) & ~(page - 1);
    if (rounded < size) {
        errno = ENOMEM;
        return NULL;
    }
    return pool_memalign(page, rounded == 0 ? page : rounded);
}

POOL_EXPORT size_t malloc_usable_size(void *p)
{
    return pool_usable_size_fast(p);
}

/* ------------------------------------------------------------------------ */
/* glibc's own names, which tcmalloc and mimalloc define too                 */
/* ------------------------------------------------------------------------ */

/* Another name for one of the functions above, with its attributes. */
#define POOL_ALIAS(name) POOL_EXPORT __attribute__((alias(#name), copy(name)))

POOL_ALIAS(malloc) void *__libc_malloc(size_t size);
POOL_ALIAS(free) void __libc_free(void *p);
POOL_ALIAS(cfree) void __libc_cfree(void *p);
POOL_ALIAS(calloc) void *__libc_calloc(size_t n, size_t size);
POOL_ALIAS(realloc) void *__libc_realloc(void *p, size_t size);
POOL_ALIAS(memalign) void *__libc_memalign(size_t align, size_t size);
POOL_ALIAS(valloc) void *__libc_valloc(size_t size);
POOL_ALIAS(pvalloc) void *__libc_pvalloc(size_t size);
POOL_ALIAS(posix_memalign) int __posix_memalign(void **out, size_t align, size_t size);

/* ------------------------------------------------------------------------ */
/* jemalloc: the *allocx family                                              */
/* ------------------------------------------------------------------------ */

/* flags: the low six bits are lg(alignment) (MALLOCX_LG_ALIGN; 0 is
 * malloc's), 0x40 asks for zeroed bytes (MALLOCX_ZERO); the higher bits
 * name jemalloc's own thread caches and arenas, which do not apply here. */
#define ALLOCX_LG_ALIGN_MASK 0x3f
#define ALLOCX_ZERO 0x40

static size_t allocx_align(int flags)
{
    unsigned lg = (unsigned)flags & ALLOCX_LG_ALIGN_MASK;
    return lg == 0 || lg >= sizeof(size_t) * 8 ? 16 : (size_t)1 << lg;
}

/* The usable size a request of size bytes at alignment align gets in the
 * arena: its class's size, or whole pages above the classes.  Before any
 * arena exists the class tables are empty and every block is glibc's,
 * which holds at least size rounded up to 16.  0 when too large. */
static size_t good_size(size_t size, size_t align)
{
    if (size > SIZE_MAX - POOL_PAGE_SIZE - align)
        return 0;
    unsigned cls = align <= 16 ? pool_sizeclass_of(size)
                   : align <= POOL_PAGE_SIZE ? pool_sizeclass_aligned_(size, align) : 0;
    if (cls != 0)
        return pool_classes_[cls].size;
    if (size <= POOL_MAX_SMALL && pool_classes_[1].size == 0)
        return size <= 16 ? 16 : (size + 15) & ~(size_t)15;
    if (size == 0)
        size = 1;
    return (size + POOL_PAGE_SIZE - 1) & ~(size_t)(POOL_PAGE_SIZE - 1);
}

/* A block of at least good_size(size, align) bytes, so that what nallocx
 * promised is there whichever heap serves it. */
static void *alloc_good(size_t size, size_t align, bool zero)
{
    size_t n = good_size(size, align);
    if (n == 0) {
        errno = ENOMEM;
        return NULL;
    }
    void *p = align <= 16 ? pool_malloc_fast(n) : pool_memalign(align, n);
    if (p != NULL && zero)
        memset(p, 0, n);
    return p;
}

POOL_EXPORT void *mallocx(size_t size, int flags)
{
    return alloc_good(size, allocx_align(flags), (flags & ALLOCX_ZERO) != 0);
}

/* tcmalloc defines nallocx too: a program the pool leaves on it (prim.h,
 * pool_prim_private_foreign_) gets its answer, about its blocks. */
POOL_EXPORT size_t nallocx(size_t size, int flags)
{
    typedef size_t (*nallocx_fn_t)(size_t, int);
    static nallocx_fn_t own;
    static bool looked;
    if (pool_unlikely(pool_prim_private_foreign_() != NULL)) {
        if (!pool_atomic_load_acquire(&looked)) {
            own = (nallocx_fn_t)pool_prim_next_symbol_("nallocx");
            pool_atomic_store_release(&looked, true);
        }
        if (own != NULL)
            return own(size, flags);
    }
    return good_size(size, allocx_align(flags));
}

/* MALLOCX_ZERO on a resize zeroes what lies past the old usable size. */
POOL_EXPORT void *rallocx(void *p, size_t size, int flags)
{
    size_t align = allocx_align(flags);
    size_t old = pool_usable_size_fast(p);
    void *q;
    if (align <= 16) {
        size_t n = good_size(size, align);
        if (n == 0) {
            errno = ENOMEM;
            return NULL;
        }
        q = pool_realloc(p, n);
    } else if (((uintptr_t)p & (align - 1)) == 0 && size <= old) {
        q = p;
    } else {
        q = alloc_good(size, align, false);
        if (q != NULL) {
            memcpy(q, p, size < old ? size : old);
            pool_free_fast(p);
        }
    }
    if (q != NULL && (flags & ALLOCX_ZERO) != 0) {
        size_t now = pool_usable_size_fast(q);
        if (now > old)
            memset((char *)q + old, 0, now - old);
    }
    return q;
}

/* No block grows in place here: the size it has is the answer. */
POOL_EXPORT size_t xallocx(void *p, size_t size, size_t extra, int flags)
{
    return pool_usable_size_fast(p);
}

POOL_EXPORT size_t sallocx(const void *p, int flags)
{
    return pool_usable_size_fast(p);
}

POOL_EXPORT void dallocx(void *p, int flags)
{
    pool_free_fast(p);
}

POOL_EXPORT void sdallocx(void *p, size_t size, int flags)
{
    pool_free_fast(p);
}

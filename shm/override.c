/* libshmpool — the malloc family, mapped onto the pool.
 *
 * Only these symbols live here, so that the unit tests can link the pool
 * without them.  They are exported with default visibility even though the
 * pool is built -fvisibility=hidden: poold links the archives statically
 * and must still export malloc to libevent and libc.
 */
#include "pool-internal.h"

#include <errno.h>
#include <malloc.h>
#include <stdlib.h>

#include "prim/prim.h"

#define POOL_EXPORT __attribute__((visibility("default")))

/* glibc no longer declares cfree, but old binaries still call it. */
void cfree(void *p);

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
    return pool_usable_size(p);
}

/* SPDX-License-Identifier: BSD-2-Clause */
/* libshmpool — environment of the preloadable libshmpool.so.
 *
 * Only the shared library links this file, so poold (which links the pool
 * statically and creates its arena itself) ignores these variables:
 *   SHMPOOL_MODE=process    create the arena at load and attach to it
 *   SHMPOOL_MODE=children   create it but stay private; forked children attach
 *   SHMPOOL_HEAP_SIZE=N[K|M|G]  arena size (default 1 GiB)
 * Unset, the library stays private and changes nothing; a bad value is one
 * line on stderr and the library stays private.  So does a program linked
 * to an allocator whose entry points the pool does not take over
 * (tcmalloc's tc_*, mimalloc's mi_*, or one it does not know): its blocks stay with that
 * allocator (prim.h, pool_prim_private_foreign_) and no arena is made.
 */
#include "pool-internal.h"

#include <string.h>

#include "prim/prim.h"

__attribute__((constructor)) static void preload_init(void)
{
    const char *mode = pool_prim_getenv_("SHMPOOL_MODE");
    if (mode == NULL || *mode == '\0')
        return;
    bool process = strcmp(mode, "process") == 0;
    if (!process && strcmp(mode, "children") != 0) {
        pool_error_(0, "SHMPOOL_MODE='%s' is not 'process' or 'children'; staying private", mode);
        return;
    }
    const char *own = pool_prim_private_foreign_();
    if (own != NULL) {
        pool_error_(0, "SHMPOOL_MODE=%s: this program allocates with %s, whose own entry points "
                    "the pool does not take over; it runs on that allocator, without the arena",
                    mode, own);
        return;
    }
    size_t size = POOL_HEAP_SIZE_DEFAULT;
    const char *hs = pool_prim_getenv_("SHMPOOL_HEAP_SIZE");
    if (hs != NULL && !pool_parse_size_(hs, &size, NULL)) {
        pool_error_(0, "SHMPOOL_HEAP_SIZE='%s' is not a size like 512M or 2G; staying private",
                    hs);
        return;
    }
    /* process: nobody else attaches, so the arena need not be shared, and
     * a fork copies it on write instead of in the child's fork handler. */
    int rc = process ? pool_create_private_(size) : pool_create(size);
    if (rc != 0) {
        pool_error_(rc, "cannot create a %lu-byte arena (minimum %lu); staying private",
                    (unsigned long)size, (unsigned long)pool_min_heap_size());
        return;
    }
    if (!process) {
        pool_attach_children_();
        return;
    }
    rc = pool_attach();
    if (rc != 0)
        pool_error_(rc, "cannot attach to the arena; staying private");
}

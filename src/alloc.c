/* poold — the server's only door to the pool.
 *
 * The same objects link with or without libshmpool: the pool's entry points
 * are weak references, null unless --enable-pool linked the pool in, and
 * each wrapper falls back to what glibc malloc needs (nothing).
 */
#include "config.h"

#include <stdio.h>

#include "pool.h"
#include "poold.h"

#pragma weak pool_create
#pragma weak pool_attach
#pragma weak pool_name
#pragma weak pool_stats_json

bool pd_alloc_is_pool(void)
{
    return pool_create != NULL && pool_attach != NULL && pool_name != NULL &&
           pool_stats_json != NULL;
}

const char *pd_alloc_name(void)
{
    return pd_alloc_is_pool() ? pool_name() : "glibc";
}

int pd_alloc_create(size_t heap)
{
    int err;

    if (!pd_alloc_is_pool())
        return PD_OK;
    err = pool_create(heap);
    if (err != 0) {
        pd_log(PD_LOG_ERROR, err, "pool_create(%zu) failed", heap);
        return PD_ERROR;
    }
    return PD_OK;
}

int pd_alloc_attach(void)
{
    int err;

    if (!pd_alloc_is_pool())
        return PD_OK;
    err = pool_attach();
    if (err != 0) {
        pd_log(PD_LOG_ERROR, err, "pool_attach() failed");
        return PD_ERROR;
    }
    return PD_OK;
}

size_t pd_alloc_stats_json(char *buf, size_t cap)
{
    int n;

    if (pd_alloc_is_pool())
        return pool_stats_json(buf, cap);
    n = snprintf(buf, cap, "{\"name\":\"glibc\"}");
    return n < 0 ? 0 : (size_t)n;
}

/* SPDX-License-Identifier: BSD-2-Clause */
/* poold — the four routes.
 *
 * "/" names the allocator, worker and pid; "/plaintext" is the cheapest
 * possible answer (no heap allocation of its own); "/heavy" renders the
 * allocation-heavy workload the allocators are measured on (heavy.c's
 * map, from malloc or from the worker's request region with
 * --request-region; "?n=K" makes its map K times bigger); "/stats"
 * reports every worker's counters, the allocator's, and whether regions
 * are on.  pd_route_dispatch is the entry.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "heavy.h"
#include "poold.h"

#define PD_JSON "application/json"
#define PD_TEXT "text/plain"
#define PD_STR_(x) #x
#define PD_STR(x) PD_STR_(x)   /* a macro's value as a string literal */

static bool pd_path_is(const pd_request_t *req, const char *path)
{
    size_t n = strlen(path);

    return req->path_len == n && memcmp(req->path, path, n) == 0;
}

static bool pd_head_only(const pd_request_t *req)
{
    return req->method == HTTP_HEAD;
}

/* A complete response with a small body.  Returns PD_OK or PD_ERROR. */
static int pd_respond(const pd_request_t *req, const pd_route_ctx_t *ctx,
                      struct evbuffer *out, int status, const char *ctype,
                      const char *body, size_t len)
{
    if (pd_http_write_head(out, status, ctype, len, ctx->keep_alive,
                           req->version_minor == 0, false) != PD_OK)
        return PD_ERROR;
    if (!pd_head_only(req) && evbuffer_add(out, body, len) != 0)
        return PD_ERROR;
    return PD_OK;
}

static int pd_route_root(const pd_request_t *req, const pd_route_ctx_t *ctx,
                         struct evbuffer *out)
{
    char body[160];
    int n = snprintf(body, sizeof(body),
                     "{\"allocator\":\"%s\",\"worker\":%d,\"pid\":%d,\"tid\":%d}",
                     pd_alloc_name(), ctx->worker_index, (int)ctx->pid, (int)ctx->tid);

    return pd_respond(req, ctx, out, 200, PD_JSON, body, (size_t)n);
}

static int pd_route_plaintext(const pd_request_t *req, const pd_route_ctx_t *ctx,
                              struct evbuffer *out)
{
    static const char body[] = "Hello, World!";

    return pd_respond(req, ctx, out, 200, PD_TEXT, body, sizeof(body) - 1);
}

static int pd_route_stats(const pd_request_t *req, const pd_route_ctx_t *ctx,
                          struct evbuffer *out)
{
    struct evbuffer *body = evbuffer_new();
    char small[2048];
    char *alloc = small;
    size_t need;
    int rc = PD_ERROR;

    if (body == NULL)
        return PD_ERROR;
    if (evbuffer_add(body, "{\"workers\":[", 12) != 0)
        goto fail;
    /* A worker's second slot is listed while a worker counts in it: each
     * index once, twice while a graceful restart overlaps two workers. */
    for (int i = 0, listed = 0; i < 2 * pd_stats_count(); i++) {
        pd_wstats_sh_t *s = pd_stats_slot(i);
        int n = pd_stats_count();
        bool live = __atomic_load_n(&s->xpid, __ATOMIC_RELAXED) != 0;
        bool twin = __atomic_load_n(&pd_stats_slot((i + n) % (2 * n))->xpid,
                                    __ATOMIC_RELAXED) != 0;

        if (!live && (i >= n || twin))
            continue;
        if (evbuffer_add_printf(body,
                "%s{\"index\":%d,\"pid\":%d,\"tid\":%d,\"requests\":%llu,"
                "\"connections\":%llu,\"bytes_in\":%llu,\"bytes_out\":%llu}",
                listed++ > 0 ? "," : "", (int)s->index,
                (int)__atomic_load_n(&s->xpid, __ATOMIC_RELAXED),
                (int)__atomic_load_n(&s->xtid, __ATOMIC_RELAXED),
                (unsigned long long)__atomic_load_n(&s->xrequests, __ATOMIC_RELAXED),
                (unsigned long long)__atomic_load_n(&s->xconnections, __ATOMIC_RELAXED),
                (unsigned long long)__atomic_load_n(&s->xbytes_in, __ATOMIC_RELAXED),
                (unsigned long long)__atomic_load_n(&s->xbytes_out, __ATOMIC_RELAXED)) < 0)
            goto fail;
    }
    /* The allocator's section may hold per-class counters: ask its size.
     * The counters keep moving (the buffer below is itself an allocation),
     * so render again until the output fits; headroom makes one retry the
     * usual worst case. */
    need = pd_alloc_stats_json(small, sizeof(small));
    for (size_t cap = sizeof(small); need >= cap;) {
        char *bigger;

        cap = need + need / 8 + 64;
        bigger = realloc(alloc == small ? NULL : alloc, cap);
        if (bigger == NULL)
            goto fail;
        alloc = bigger;
        need = pd_alloc_stats_json(alloc, cap);
    }
    if (evbuffer_add(body, "],\"allocator\":", 14) != 0 ||
        evbuffer_add(body, alloc, need) != 0 ||
        evbuffer_add_printf(body, ",\"request_region\":%s}",
                            ctx->region != NULL ? "true" : "false") < 0)
        goto fail;
    if (pd_http_write_head(out, 200, PD_JSON, evbuffer_get_length(body), ctx->keep_alive,
                           req->version_minor == 0, false) != PD_OK)
        goto fail;
    if (!pd_head_only(req) && evbuffer_add_buffer(out, body) != 0)
        goto fail;
    rc = PD_OK;
fail:
    if (alloc != small)
        free(alloc);
    evbuffer_free(body);
    return rc;
}

/* ======================================================================== */
/* /heavy                                                                    */
/* ======================================================================== */

/* The map (heavy.c) takes its blocks from malloc and free, or with
 * --request-region from the worker's request region, whose frees do
 * nothing: the caller resets the region after the request. */

static void *pd_heavy_malloc_fn(void *arg, size_t n)
{
    (void)arg;
    return malloc(n);
}

static void pd_heavy_free_fn(void *arg, void *p)
{
    (void)arg;
    free(p);
}

static void *pd_heavy_region_fn(void *arg, size_t n)
{
    return pd_region_alloc(arg, n);
}

/* Output through a fixed buffer: the count of allocations must not depend
 * on the size of what is written. */
typedef struct pd_render_s {
    struct evbuffer *out;
    char *buf;
    size_t len;
    int rc;
} pd_render_t;

static void pd_render(pd_render_t *r, const char *s, size_t n)
{
    while (n > 0 && r->rc == PD_OK) {
        size_t k = PD_HEAVY_BUF - r->len;

        if (k == 0) {
            if (evbuffer_add(r->out, r->buf, r->len) != 0)
                r->rc = PD_ERROR;
            r->len = 0;
            continue;
        }
        if (k > n)
            k = n;
        memcpy(r->buf + r->len, s, k);
        r->len += k;
        s += k;
        n -= k;
    }
}

/* One "name: value" line and its end of line. */
static void pd_render_field(pd_render_t *r, const char *k, size_t kn, const char *v, size_t vn,
                            const char *eol)
{
    pd_render(r, k, kn);
    pd_render(r, ": ", 2);
    pd_render(r, v, vn);
    pd_render(r, eol, strlen(eol));
}

int pd_route_heavy_scale(const pd_request_t *req, unsigned *scale)
{
    const char *q = req->path + req->path_len;
    const char *end = req->target + req->target_len;
    unsigned long k = 0;

    *scale = 1;
    /* A /heavy path lies in the target: the origin form's start, or the
     * path of an absolute form; the query follows it. */
    if (q >= end || *q != '?' || q + 1 == end)
        return PD_OK;
    q++;
    if (end - q < 3 || q[0] != 'n' || q[1] != '=')
        return PD_ERROR;
    for (q += 2; q < end; q++) {
        if (*q < '0' || *q > '9')
            return PD_ERROR;
        k = k * 10 + (unsigned long)(*q - '0');
        if (k > PD_HEAVY_MAX_SCALE)
            return PD_ERROR;     /* before it can overflow */
    }
    if (k < 1)
        return PD_ERROR;
    *scale = (unsigned)k;
    return PD_OK;
}

int pd_route_heavy(const pd_request_t *req, const pd_route_ctx_t *ctx, unsigned scale,
                   struct evbuffer *out, unsigned *allocs)
{
    const pd_heavy_alloc_t alloc = ctx->region != NULL ?
        (pd_heavy_alloc_t){pd_heavy_region_fn, NULL, ctx->region} :
        (pd_heavy_alloc_t){pd_heavy_malloc_fn, pd_heavy_free_fn, NULL};
    pd_hmap_t m;
    pd_render_t r = {out, NULL, 0, PD_OK};
    pd_hnode_t *body_lines = NULL;
    uint64_t body_len = 0;
    unsigned i = 0;
    int rc = PD_ERROR;

    if (pd_heavy_build(&m, &alloc, req->headers, req->nheaders, ctx->worker_index,
                       scale) != PD_OK)
        goto fail;
    r.buf = m.buf;
    /* The body echoes the request's fields and, at a scale above 1, the
     * generated lines beyond the head's: the map's entries after the
     * request's, of which the first PD_HEAVY_LINES go in the head. */
    for (pd_hnode_t *n = m.first; n != NULL; n = n->order, i++)
        if (i < req->nheaders || i >= req->nheaders + PD_HEAVY_LINES)
            body_len += n->klen + 2 + n->vlen + 1;
    if (pd_http_write_head(out, 200, PD_TEXT, body_len, ctx->keep_alive,
                           req->version_minor == 0, true) != PD_OK)
        goto fail;
    {
        pd_hnode_t *n = m.first;

        for (i = 0; i < req->nheaders; i++)
            n = n->order;
        for (int k = 0; k < PD_HEAVY_LINES; k++, n = n->order)
            pd_render_field(&r, n->key, n->klen, n->value, n->vlen, "\r\n");
        pd_render(&r, "\r\n", 2);
        body_lines = n;
    }
    if (!pd_head_only(req)) {
        i = 0;
        /* The request's fields are found again through the map so that
         * the lookups are part of the work. */
        for (pd_hnode_t *n = m.first; n != NULL && i < req->nheaders; n = n->order, i++) {
            pd_hnode_t *found = pd_heavy_find(&m, n);

            pd_render_field(&r, found->key, found->klen, n->value, n->vlen, "\n");
        }
        for (pd_hnode_t *n = body_lines; n != NULL; n = n->order)
            pd_render_field(&r, n->key, n->klen, n->value, n->vlen, "\n");
    }
    if (r.rc == PD_OK && r.len > 0 && evbuffer_add(out, r.buf, r.len) != 0)
        r.rc = PD_ERROR;
    if (r.rc == PD_OK)
        rc = PD_OK;
fail:
    pd_heavy_release(&m);
    *allocs = m.allocs;
    return rc;
}

/* ======================================================================== */
/* Dispatch                                                                  */
/* ======================================================================== */

int pd_route_dispatch(const pd_request_t *req, const pd_route_ctx_t *ctx,
                      struct evbuffer *out, int *status)
{
    static const char allow[] = "Allow: GET, HEAD\r\n\r\n";
    static const char not_found[] = "404 Not Found\n";
    static const char not_allowed[] = "405 Method Not Allowed\n";
    static const char bad_scale[] = "400 Bad Request: /heavy takes no query or n=K, "
                                    "K from 1 to " PD_STR(PD_HEAVY_MAX_SCALE) "\n";
    enum { R_ROOT, R_PLAINTEXT, R_HEAVY, R_STATS, R_NONE } route;
    unsigned allocs, scale;
    size_t before;

    if (pd_path_is(req, "/"))
        route = R_ROOT;
    else if (pd_path_is(req, "/plaintext"))
        route = R_PLAINTEXT;
    else if (pd_path_is(req, "/heavy"))
        route = R_HEAVY;
    else if (pd_path_is(req, "/stats"))
        route = R_STATS;
    else
        route = R_NONE;

    *status = 404;
    if (route == R_NONE)
        return pd_respond(req, ctx, out, 404, PD_TEXT, not_found, sizeof(not_found) - 1);
    *status = 405;
    if (req->method != HTTP_GET && req->method != HTTP_HEAD) {
        if (pd_http_write_head(out, 405, PD_TEXT, sizeof(not_allowed) - 1, ctx->keep_alive,
                               req->version_minor == 0, true) != PD_OK ||
            evbuffer_add(out, allow, sizeof(allow) - 1) != 0 ||
            evbuffer_add(out, not_allowed, sizeof(not_allowed) - 1) != 0)
            return PD_ERROR;
        return PD_OK;
    }
    *status = 200;
    switch (route) {
    case R_ROOT:
        return pd_route_root(req, ctx, out);
    case R_PLAINTEXT:
        return pd_route_plaintext(req, ctx, out);
    case R_HEAVY:
        if (pd_route_heavy_scale(req, &scale) != PD_OK) {
            *status = 400;
            return pd_respond(req, ctx, out, 400, PD_TEXT, bad_scale, sizeof(bad_scale) - 1);
        }
        before = evbuffer_get_length(out);
        if (pd_route_heavy(req, ctx, scale, out, &allocs) == PD_OK)
            return PD_OK;
        /* Out of memory before the first byte of the response: there is
         * still room to say so. */
        *status = 500;
        if (evbuffer_get_length(out) == before &&
            pd_http_write_error(out, 500, pd_head_only(req)) == PD_OK)
            return PD_OK;
        return PD_ERROR;
    default:
        return pd_route_stats(req, ctx, out);
    }
}

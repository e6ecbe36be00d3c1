/* SPDX-License-Identifier: BSD-2-Clause */
/* Unit tests of route dispatch and of /heavy's allocation contract. */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "check_poold.h"
#include "heavy.h"
#include "poold.h"

/* Count the process's real heap allocations while `counting` is set: this
 * binary's malloc and calloc wrap glibc's, so the count covers every call
 * /heavy makes, not just the ones it reports.  `live` follows what malloc
 * and calloc gave and free took back, and fail_after >= 0 lets that many
 * more calls succeed before they fail with ENOMEM. */
extern void *__libc_malloc(size_t n);
extern void *__libc_calloc(size_t n, size_t size);
extern void __libc_free(void *p);
static volatile bool counting;
static unsigned counted;
static long live;
static long fail_after = -1;

static bool injected_failure(void)
{
    if (fail_after == 0) {
        errno = ENOMEM;
        return true;
    }
    if (fail_after > 0)
        fail_after--;
    return false;
}

void *malloc(size_t n)
{
    void *p;

    if (counting)
        counted++;
    if (injected_failure())
        return NULL;
    if ((p = __libc_malloc(n)) != NULL)
        live++;
    return p;
}

void *calloc(size_t n, size_t size)
{
    void *p;

    if (counting)
        counted++;
    if (injected_failure())
        return NULL;
    if ((p = __libc_calloc(n, size)) != NULL)
        live++;
    return p;
}

void free(void *p)
{
    if (p != NULL)
        live--;
    __libc_free(p);
}

static const pd_limits_t lim = {65536, 1 << 20};
static const pd_route_ctx_t ctx = {.worker_index = 3, .pid = 4242, .tid = 4243,
                                   .keep_alive = true};
static pd_request_t req;
static http_parser parser;
static char resp[70000];

/* Parse head, dispatch it with *c, and leave the response NUL-terminated
 * in resp. */
static int dispatch_ctx(const char *head, const pd_route_ctx_t *c)
{
    struct evbuffer *out = evbuffer_new();
    int status;
    size_t n;

    ck_assert_int_eq(pd_http_parse_head(&req, &parser, head, strlen(head), &lim), 0);
    if (pd_route_dispatch(&req, c, out, &status) != PD_OK)
        status = PD_ERROR;
    n = evbuffer_remove(out, resp, sizeof(resp) - 1);
    resp[n] = '\0';
    ck_assert_uint_eq(evbuffer_get_length(out), 0);
    evbuffer_free(out);
    return status;
}

static int dispatch(const char *head)
{
    return dispatch_ctx(head, &ctx);
}

static const char *body(void)
{
    const char *b = strstr(resp, "\r\n\r\n");

    ck_assert_ptr_nonnull(b);
    return b + 4;
}

static long content_length(void)
{
    const char *cl = strstr(resp, "\r\nContent-Length: ");

    ck_assert_ptr_nonnull(cl);
    return strtol(cl + 18, NULL, 10);
}

START_TEST(test_root)
{
    char want[128];

    ck_assert_int_eq(dispatch("GET / HTTP/1.1\r\nHost: a\r\n\r\n"), 200);
    snprintf(want, sizeof(want), "{\"allocator\":\"%s\",\"worker\":3,\"pid\":4242,\"tid\":4243}",
             pd_alloc_name());
    ck_assert_str_eq(body(), want);
    ck_assert_int_eq(content_length(), (long)strlen(want));
    ck_assert_ptr_nonnull(strstr(resp, "Content-Type: application/json\r\n"));
}
END_TEST

START_TEST(test_plaintext)
{
    ck_assert_int_eq(dispatch("GET /plaintext?x=1&y HTTP/1.1\r\nHost: a\r\n\r\n"), 200);
    ck_assert_str_eq(body(), "Hello, World!");
    ck_assert_int_eq(content_length(), 13);
    ck_assert_ptr_nonnull(strstr(resp, "Content-Type: text/plain\r\n"));
    ck_assert_ptr_null(strstr(resp, "Connection:"));
}
END_TEST

START_TEST(test_head)
{
    ck_assert_int_eq(dispatch("HEAD /plaintext HTTP/1.1\r\nHost: a\r\n\r\n"), 200);
    ck_assert_str_eq(body(), "");
    ck_assert_int_eq(content_length(), 13);
    ck_assert_int_eq(dispatch("HEAD /heavy HTTP/1.1\r\nHost: a\r\n\r\n"), 200);
    ck_assert_str_eq(body(), "");
    ck_assert_int_gt(content_length(), 0);
}
END_TEST

START_TEST(test_not_found)
{
    ck_assert_int_eq(dispatch("GET /nope HTTP/1.1\r\nHost: a\r\n\r\n"), 404);
    ck_assert_str_eq(body(), "404 Not Found\n");
    ck_assert_int_eq(dispatch("GET /plaintext/ HTTP/1.1\r\nHost: a\r\n\r\n"), 404);
    ck_assert_int_eq(dispatch("POST /nope HTTP/1.1\r\nHost: a\r\n\r\n"), 404);
    ck_assert_int_eq(dispatch("OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n"), 404);
}
END_TEST

START_TEST(test_method_not_allowed)
{
    static const char *const heads[] = {
        "POST / HTTP/1.1\r\nHost: a\r\n\r\n",
        "PUT /plaintext HTTP/1.1\r\nHost: a\r\n\r\n",
        "DELETE /stats HTTP/1.1\r\nHost: a\r\n\r\n",
        "OPTIONS /heavy HTTP/1.1\r\nHost: a\r\n\r\n",
    };

    for (size_t i = 0; i < sizeof(heads) / sizeof(heads[0]); i++) {
        ck_assert_int_eq(dispatch(heads[i]), 405);
        ck_assert_ptr_nonnull(strstr(resp, "\r\nAllow: GET, HEAD\r\n"));
        ck_assert_str_eq(body(), "405 Method Not Allowed\n");
        ck_assert_int_eq(content_length(), (long)strlen(body()));
    }
}
END_TEST

START_TEST(test_keep_alive_headers)
{
    ck_assert_int_eq(dispatch("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"), 200);
    ck_assert_ptr_nonnull(strstr(resp, "\r\nConnection: keep-alive\r\n"));
}
END_TEST

START_TEST(test_stats)
{
    ck_assert_int_eq(pd_stats_create(2), PD_OK);
    pd_stats_begin(0, 111, 111);
    pd_stats_begin(1, 222, 223);
    pd_stat_add(&pd_stats_slot(1)->xrequests, 5);
    pd_stat_add(&pd_stats_slot(1)->xbytes_in, 7);
    ck_assert_int_eq(dispatch("GET /stats HTTP/1.1\r\nHost: a\r\n\r\n"), 200);
    ck_assert_ptr_nonnull(strstr(body(), "{\"workers\":[{\"index\":0,\"pid\":111,\"tid\":111,"
                                         "\"requests\":0,\"connections\":0,\"bytes_in\":0,"
                                         "\"bytes_out\":0},"
                                         "{\"index\":1,\"pid\":222,\"tid\":223,\"requests\":5,"
                                         "\"connections\":0,\"bytes_in\":7,\"bytes_out\":0}],"
                                         "\"allocator\":{"));
    ck_assert_int_eq(content_length(), (long)strlen(body()));
    ck_assert_int_eq(body()[strlen(body()) - 1], '}');
    ck_assert_msg(strstr(body(), "},\"request_region\":false}") ==
                  body() + strlen(body()) - 25, "%s", body());
    pd_stats_end(1);
    ck_assert_int_eq(dispatch("GET /stats HTTP/1.1\r\nHost: a\r\n\r\n"), 200);
    ck_assert_ptr_nonnull(strstr(body(), "{\"index\":1,\"pid\":0,\"tid\":0,"));
    {
        pd_route_ctx_t rctx = ctx;

        rctx.region = pd_region_create(0);
        ck_assert_int_eq(dispatch_ctx("GET /stats HTTP/1.1\r\nHost: a\r\n\r\n", &rctx), 200);
        ck_assert_msg(strstr(body(), "},\"request_region\":true}") ==
                      body() + strlen(body()) - 24, "%s", body());
        pd_region_destroy(rctx.region);
    }
}
END_TEST

/* /heavy's allocation count is the documented formula for any number of
 * request fields; its output is the same every time. */
START_TEST(test_heavy_allocs)
{
    static const unsigned counts[] = {0, 1, 5, 40, PD_MAX_HEADERS - 1};

    for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
        static char head[16384];
        struct evbuffer *a = evbuffer_new(), *b = evbuffer_new();
        unsigned allocs = 0;

        strcpy(head, "GET /heavy HTTP/1.1\r\nHost: a\r\n");
        for (unsigned i = 0; i < counts[k]; i++)
            snprintf(head + strlen(head), sizeof(head) - strlen(head),
                     "X-Field-%u: value number %u of the test\r\n", i, i);
        strcat(head, "\r\n");
        ck_assert_int_eq(pd_http_parse_head(&req, &parser, head, strlen(head), &lim), 0);
        ck_assert_int_eq(pd_route_heavy(&req, &ctx, 1, a, &allocs), PD_OK);
        ck_assert_uint_eq(allocs, PD_HEAVY_ALLOCS(counts[k] + 1));
        ck_assert_uint_eq(allocs, 3 * (counts[k] + 1) + 92);
        ck_assert_int_eq(pd_route_heavy(&req, &ctx, 1, b, &allocs), PD_OK);
        ck_assert_uint_eq(evbuffer_get_length(a), evbuffer_get_length(b));
        ck_assert(memcmp(evbuffer_pullup(a, -1), evbuffer_pullup(b, -1),
                         evbuffer_get_length(a)) == 0);
        evbuffer_free(a);
        evbuffer_free(b);
    }
}
END_TEST

START_TEST(test_heavy_real_allocs)
{
    static const char head[] = "GET /heavy HTTP/1.1\r\nHost: a\r\nA: 1\r\nB: 2\r\n\r\n";
    struct evbuffer *out = evbuffer_new();
    unsigned allocs = 0;
    int rc;

    /* Room in advance, so that libevent's own buffer growth is not counted. */
    ck_assert_int_eq(evbuffer_expand(out, 65536), 0);
    ck_assert_int_eq(pd_http_parse_head(&req, &parser, head, strlen(head), &lim), 0);
    counted = 0;
    counting = true;
    rc = pd_route_heavy(&req, &ctx, 1, out, &allocs);
    counting = false;   /* before any ck_assert: Check allocates to record */
    ck_assert_int_eq(rc, PD_OK);
    ck_assert_uint_eq(counted, PD_HEAVY_ALLOCS(3));
    ck_assert_uint_eq(allocs, counted);
    evbuffer_free(out);
}
END_TEST

START_TEST(test_heavy_output)
{
    char line[16];

    ck_assert_int_eq(dispatch("GET /heavy HTTP/1.1\r\nHost: a\r\nX-Test: hello\r\n\r\n"), 200);
    for (int i = 0; i < PD_HEAVY_LINES; i++) {
        snprintf(line, sizeof(line), "\r\nX-Heavy-%02d: ", i);
        ck_assert_ptr_nonnull(strstr(resp, line));
    }
    ck_assert_str_eq(body(), "Host: a\nX-Test: hello\n");
    ck_assert_int_eq(content_length(), (long)strlen(body()));
}
END_TEST

/* The scale of /heavy?n=K: exactly n=K, K from 1 to the maximum, or no
 * query at all; anything else is refused. */
START_TEST(test_heavy_scale)
{
    static const struct { const char *target; unsigned scale; } ok[] = {
        {"/heavy", 1}, {"/heavy?", 1}, {"/heavy?n=1", 1}, {"/heavy?n=7", 7},
        {"/heavy?n=1000", PD_HEAVY_MAX_SCALE}, {"/heavy?n=0012", 12},
        {"http://a/heavy?n=3", 3},
    };
    static const char *const bad[] = {
        "/heavy?n=0", "/heavy?n=1001", "/heavy?n=99999999999999999999999", "/heavy?n=",
        "/heavy?n", "/heavy?n=-1", "/heavy?n=+1", "/heavy?n=1x", "/heavy?n=2&x=1",
        "/heavy?N=2", "/heavy?m=2", "/heavy?x", "/heavy??n=2", "/heavy?n=2%20",
    };
    char head[256];
    unsigned scale;

    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        snprintf(head, sizeof(head), "GET %s HTTP/1.1\r\nHost: a\r\n\r\n", ok[i].target);
        ck_assert_int_eq(pd_http_parse_head(&req, &parser, head, strlen(head), &lim), 0);
        ck_assert_msg(pd_route_heavy_scale(&req, &scale) == PD_OK, "%s", ok[i].target);
        ck_assert_uint_eq(scale, ok[i].scale);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        snprintf(head, sizeof(head), "GET %s HTTP/1.1\r\nHost: a\r\n\r\n", bad[i]);
        ck_assert_int_eq(pd_http_parse_head(&req, &parser, head, strlen(head), &lim), 0);
        ck_assert_msg(pd_route_heavy_scale(&req, &scale) == PD_ERROR, "%s", bad[i]);
    }
}
END_TEST

/* An out-of-range scale is a 400 that says what n takes, on a connection
 * that stays open; the other routes still ignore their query. */
START_TEST(test_heavy_bad_scale)
{
    static const char want[] = "400 Bad Request: /heavy takes no query or n=K, "
                               "K from 1 to 1000\n";

    ck_assert_int_eq(dispatch("GET /heavy?n=1001 HTTP/1.1\r\nHost: a\r\n\r\n"), 400);
    ck_assert_str_eq(body(), want);
    ck_assert_int_eq(content_length(), (long)strlen(want));
    ck_assert_ptr_null(strstr(resp, "Connection:"));
    ck_assert_int_eq(dispatch("HEAD /heavy?n=0 HTTP/1.1\r\nHost: a\r\n\r\n"), 400);
    ck_assert_str_eq(body(), "");
    ck_assert_int_eq(content_length(), (long)strlen(want));
    ck_assert_int_eq(dispatch("POST /heavy?n=0 HTTP/1.1\r\nHost: a\r\n\r\n"), 405);
    ck_assert_int_eq(dispatch("GET /plaintext?n=0 HTTP/1.1\r\nHost: a\r\n\r\n"), 200);
}
END_TEST

/* A request with n fields "X-Field-i: value number i of the test" (Host
 * first), parsed into req. */
static void heavy_request(unsigned n, bool head)
{
    static char buf[16384];

    snprintf(buf, sizeof(buf), "%s /heavy HTTP/1.1\r\nHost: a\r\n", head ? "HEAD" : "GET");
    for (unsigned i = 0; i < n; i++)
        snprintf(buf + strlen(buf), sizeof(buf) - strlen(buf),
                 "X-Field-%u: value number %u of the test\r\n", i, i);
    strcat(buf, "\r\n");
    ck_assert_int_eq(pd_http_parse_head(&req, &parser, buf, strlen(buf), &lim), 0);
}

/* Copy the head at the start of text, less its Content-Length line, to
 * dst; return the head's length. */
static size_t head_without_length(const char *text, char *dst, size_t cap)
{
    size_t n = (size_t)(strstr(text, "\r\n\r\n") + 4 - text);
    const char *cl = strstr(text, "\r\nContent-Length: ");
    size_t pre = (size_t)(cl - text), skip = strcspn(cl + 2, "\r") + 2;

    ck_assert_uint_lt(n, cap);
    memcpy(dst, text, pre);
    memcpy(dst + pre, cl + skip, n - pre - skip);
    dst[n - skip] = '\0';
    return n;
}

/* At scale K: the documented count, every allocation real and freed, the
 * head of plain /heavy but for Content-Length, and in the body the echoed
 * fields followed by the further 30 * (K - 1) lines; n=1 is plain /heavy
 * byte for byte. */
START_TEST(test_heavy_scaled)
{
    static const unsigned scales[] = {1, 2, 17, PD_HEAVY_MAX_SCALE};
    static char plain_head[8192], head[8192];
    struct evbuffer *plain = evbuffer_new();
    unsigned allocs = 0;

    heavy_request(0, false);
    ck_assert_int_eq(pd_route_heavy(&req, &ctx, 1, plain, &allocs), PD_OK);
    head_without_length((const char *)evbuffer_pullup(plain, -1), plain_head,
                        sizeof(plain_head));
    for (size_t k = 0; k < sizeof(scales) / sizeof(scales[0]); k++) {
        const unsigned scale = scales[k];
        long before = live;
        struct evbuffer *out = evbuffer_new();
        char target[64], last[32];
        const char *text, *b;
        size_t len;
        int rc;

        snprintf(target, sizeof(target), "GET /heavy?n=%u HTTP/1.1\r\nHost: a\r\n\r\n", scale);
        ck_assert_int_eq(pd_http_parse_head(&req, &parser, target, strlen(target), &lim), 0);
        /* Room in advance, so that libevent's own buffer growth is not counted. */
        ck_assert_int_eq(evbuffer_expand(out, 4u << 20), 0);
        counted = 0;
        counting = true;
        rc = pd_route_heavy(&req, &ctx, scale, out, &allocs);
        counting = false;
        ck_assert_int_eq(rc, PD_OK);
        ck_assert_uint_eq(allocs, PD_HEAVY_ALLOCS_SCALED(1, scale));
        ck_assert_uint_eq(allocs, 3 + 2 + 90 * scale);
        ck_assert_uint_eq(counted, allocs);
        len = evbuffer_get_length(out);
        text = (const char *)evbuffer_pullup(out, -1);
        b = text + head_without_length(text, head, sizeof(head));
        ck_assert_str_eq(head, plain_head);
        ck_assert_uint_eq(strtoul(strstr(text, "\r\nContent-Length: ") + 18, NULL, 10),
                          len - (size_t)(b - text));
        ck_assert(strncmp(b, "Host: a\n", 8) == 0);
        if (scale == 1) {
            ck_assert_uint_eq(len, evbuffer_get_length(plain));
            ck_assert(memcmp(text, evbuffer_pullup(plain, -1), len) == 0);
        } else {
            snprintf(last, sizeof(last), "\nX-Heavy-%02u: line=%u;", 30 * scale - 1,
                     30 * scale - 1);
            ck_assert(strncmp(b + 8, "X-Heavy-30: line=30;worker=3;headers=1;", 39) == 0);
            ck_assert_ptr_nonnull(strstr(b, last));
            ck_assert_int_eq(text[len - 1], '\n');
        }
        if (scale == 17) {
            /* From a region: the same count and the same bytes. */
            pd_route_ctx_t rctx = ctx;
            struct evbuffer *got = evbuffer_new();

            rctx.region = pd_region_create(0);
            ck_assert_ptr_nonnull(rctx.region);
            ck_assert_int_eq(pd_route_heavy(&req, &rctx, scale, got, &allocs), PD_OK);
            ck_assert_uint_eq(allocs, PD_HEAVY_ALLOCS_SCALED(1, scale));
            ck_assert_uint_eq(evbuffer_get_length(got), len);
            ck_assert(memcmp(evbuffer_pullup(got, -1), text, len) == 0);
            pd_region_destroy(rctx.region);
            evbuffer_free(got);
        }
        evbuffer_free(out);
        ck_assert_int_eq(live, before);
    }
    evbuffer_free(plain);
}
END_TEST

/* With a region, /heavy makes the same count of allocations and writes
 * the same bytes as with malloc, also when the region is reused; it takes
 * nothing from malloc once the region's block holds a whole request, few
 * blocks when it does not, and none again once the blocks it kept from a
 * request hold the next one. */
START_TEST(test_heavy_region)
{
    static const unsigned counts[] = {0, 1, 5, 40, PD_MAX_HEADERS - 1};
    pd_route_ctx_t rctx = ctx;
    pd_region_t *big = pd_region_create(256 * 1024);

    ck_assert_ptr_nonnull(big);
    for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
        struct evbuffer *want = evbuffer_new(), *got = evbuffer_new();
        pd_region_t *small = pd_region_create(0);
        unsigned allocs = 0, in_big, in_small, in_kept;
        size_t held_small = 0;
        int rc;

        heavy_request(counts[k], false);
        ck_assert_int_eq(pd_route_heavy(&req, &ctx, 1, want, &allocs), PD_OK);
        ck_assert_uint_eq(allocs, PD_HEAVY_ALLOCS(counts[k] + 1));
        ck_assert_ptr_nonnull(small);
        for (int round = 0; round < 4; round++) {
            rctx.region = round < 2 ? big : small;
            ck_assert_int_eq(evbuffer_expand(got, 65536), 0);
            counted = 0;
            counting = true;
            rc = pd_route_heavy(&req, &rctx, 1, got, &allocs);
            counting = false;
            ck_assert_int_eq(rc, PD_OK);
            ck_assert_uint_eq(allocs, PD_HEAVY_ALLOCS(counts[k] + 1));
            if (round < 2) {
                in_big = counted;
                ck_assert_uint_eq(in_big, 0);
            } else if (round == 2) {
                /* 4 KiB blocks: a block per ~16 allocations at most. */
                in_small = counted;
                ck_assert_uint_gt(in_small, 0);
                ck_assert_uint_le(in_small, allocs / 8);
            } else {
                in_kept = counted;
                ck_assert_uint_eq(in_kept, 0);
            }
            ck_assert_uint_eq(evbuffer_get_length(got), evbuffer_get_length(want));
            ck_assert(memcmp(evbuffer_pullup(got, -1), evbuffer_pullup(want, -1),
                             evbuffer_get_length(want)) == 0);
            evbuffer_drain(got, evbuffer_get_length(got));
            pd_region_reset(rctx.region);
            if (round < 2) {
                ck_assert_uint_eq(pd_region_held(big), 256 * 1024);
            } else if (round == 2) {
                held_small = pd_region_held(small);
                ck_assert_uint_gt(held_small, 4096);
                ck_assert_uint_le(held_small, PD_REGION_KEEP_BYTES);
            } else {
                ck_assert_uint_eq(pd_region_held(small), held_small);
            }
        }
        pd_region_destroy(small);
        evbuffer_free(want);
        evbuffer_free(got);
    }
    pd_region_destroy(big);
}
END_TEST

/* Out of memory at each of /heavy's allocations in turn, from malloc or
 * for a region's block: a 500 that closes the connection, nothing leaked,
 * until enough memory lets the request through. */
/* The mallocs a region of PD_REGION_BLOCK_MIN-byte blocks holds between
 * requests: after a reset, only its blocks. */
static long region_blocks(const pd_region_t *r)
{
    return r == NULL ? 0 : (long)(pd_region_held(r) / PD_REGION_BLOCK_MIN);
}

START_TEST(test_heavy_oom)
{
    const bool use_region = _i == 1;
    pd_route_ctx_t rctx = ctx;
    struct evbuffer *out = evbuffer_new();
    unsigned fails = 0;
    long k;
    int status = 0;

    /* 256-byte blocks: the region asks malloc for many blocks and for a
     * chunk of its own for the bucket array, so its failures hit every
     * path of the slow allocation.  The blocks a request got before a
     * failure are kept by the reset, so the region holds more after it:
     * those are not leaks, and what the region holds is subtracted. */
    rctx.region = use_region ? pd_region_create(PD_REGION_BLOCK_MIN) : NULL;
    ck_assert(!use_region || rctx.region != NULL);
    heavy_request(3, false);
    for (k = 0; k < 400; k++) {
        long before, after;
        size_t n;

        ck_assert_int_eq(evbuffer_expand(out, 65536), 0);
        before = live - region_blocks(rctx.region);
        fail_after = k;
        if (pd_route_dispatch(&req, &rctx, out, &status) != PD_OK)
            status = PD_ERROR;
        fail_after = -1;
        if (rctx.region != NULL)
            pd_region_reset(rctx.region);
        after = live - region_blocks(rctx.region);
        ck_assert_int_eq(after, before);
        n = evbuffer_remove(out, resp, sizeof(resp) - 1);
        resp[n] = '\0';
        if (status == 200)
            break;
        ck_assert_int_eq(status, 500);
        ck_assert_msg(strncmp(resp, "HTTP/1.1 500 Internal Server Error\r\n", 36) == 0,
                      "%s", resp);
        ck_assert_ptr_nonnull(strstr(resp, "\r\nConnection: close\r\n"));
        ck_assert_str_eq(body(), "500 Internal Server Error\n");
        fails++;
    }
    ck_assert_int_eq(status, 200);
    if (use_region) {
        ck_assert_uint_gt(fails, 5);
        ck_assert_uint_lt(fails, PD_HEAVY_ALLOCS(4));
    } else {
        ck_assert_uint_eq(fails, PD_HEAVY_ALLOCS(4));
    }
    pd_region_destroy(rctx.region);
    evbuffer_free(out);
}
END_TEST

/* What poolbench replays: pd_heavy_build takes every block from the
 * allocator it is given (bucket array first, render buffer last), and
 * pd_heavy_release gives each back once, render buffer first and bucket
 * array last. */
typedef struct heavy_trace_s {
    void *block[PD_HEAVY_ALLOCS(2)];
    size_t size[PD_HEAVY_ALLOCS(2)];
    unsigned freed[PD_HEAVY_ALLOCS(2)];     /* allocation indices, in order */
    unsigned allocs, frees;
} heavy_trace_t;

static void *heavy_trace_alloc(void *arg, size_t n)
{
    heavy_trace_t *t = arg;

    if (t->allocs == PD_HEAVY_ALLOCS(2))
        return NULL;
    t->size[t->allocs] = n;
    return t->block[t->allocs++] = __libc_malloc(n);
}

static void heavy_trace_free(void *arg, void *p)
{
    heavy_trace_t *t = arg;
    unsigned i = 0;

    /* No ck_assert here: Check allocates to record one. */
    while (i < t->allocs && t->block[i] != p)
        i++;
    if (i == t->allocs || t->frees == PD_HEAVY_ALLOCS(2))
        return;
    t->block[i] = NULL;
    t->freed[t->frees++] = i;
    __libc_free(p);
}

START_TEST(test_heavy_build_release)
{
    static const char n1[] = "Host", v1[] = "a", n2[] = "Accept", v2[] = "*/*";
    const pd_header_t fields[2] = {{n1, v1, 4, 1}, {n2, v2, 6, 3}};
    heavy_trace_t t = {.allocs = 0};
    const pd_heavy_alloc_t a = {heavy_trace_alloc, heavy_trace_free, &t};
    pd_hmap_t m;
    int rc;

    counted = 0;
    counting = true;
    rc = pd_heavy_build(&m, &a, fields, 2, 0, 1);
    pd_heavy_release(&m);
    counting = false;   /* before any ck_assert: Check allocates to record */
    ck_assert_int_eq(rc, PD_OK);
    ck_assert_uint_eq(counted, 0);
    ck_assert_uint_eq(t.allocs, PD_HEAVY_ALLOCS(2));
    ck_assert_uint_eq(m.allocs, t.allocs);
    ck_assert_uint_eq(t.frees, t.allocs);
    ck_assert_uint_eq(t.size[0], PD_HEAVY_BUCKETS * sizeof(pd_hnode_t *));
    ck_assert_uint_eq(t.size[1], sizeof(pd_hnode_t));
    ck_assert_uint_eq(t.size[t.allocs - 1], PD_HEAVY_BUF);
    ck_assert_uint_eq(t.freed[0], t.allocs - 1);
    ck_assert_uint_eq(t.freed[t.frees - 1], 0);
    for (unsigned i = 0; i < t.allocs; i++)
        ck_assert_ptr_null(t.block[i]);
}
END_TEST

Suite *make_routes_suite(void)
{
    Suite *s = suite_create("routes");
    TCase *tc = tcase_create("dispatch");

    tcase_set_timeout(tc, 10);
    tcase_add_test(tc, test_root);
    tcase_add_test(tc, test_plaintext);
    tcase_add_test(tc, test_head);
    tcase_add_test(tc, test_not_found);
    tcase_add_test(tc, test_method_not_allowed);
    tcase_add_test(tc, test_keep_alive_headers);
    tcase_add_test(tc, test_stats);
    tcase_add_test(tc, test_heavy_allocs);
    tcase_add_test(tc, test_heavy_real_allocs);
    tcase_add_test(tc, test_heavy_build_release);
    tcase_add_test(tc, test_heavy_output);
    tcase_add_test(tc, test_heavy_scale);
    tcase_add_test(tc, test_heavy_bad_scale);
    tcase_add_test(tc, test_heavy_scaled);
    tcase_add_test(tc, test_heavy_region);
    tcase_add_loop_test(tc, test_heavy_oom, 0, 2);
    suite_add_tcase(s, tc);
    return s;
}

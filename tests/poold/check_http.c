/* SPDX-License-Identifier: BSD-2-Clause */
/* Unit tests of the framing: finding a head, the RFC 9112 rules poold adds
 * on top of http-parser (each with its status), the chunked decoder, and
 * the response heads. */
#include "config.h"

#include <string.h>
#include <time.h>

#include <event2/buffer.h>

#include "check_poold.h"
#include "poold.h"

static const pd_limits_t lim = {8192, 1 << 20};
static pd_request_t req;
static http_parser parser;

static int parse_lim(const char *head, const pd_limits_t *l)
{
    return pd_http_parse_head(&req, &parser, head, strlen(head), l);
}

static int parse(const char *head)
{
    return parse_lim(head, &lim);
}

/* Scan head[0..len) fed n bytes at a time through one scan state, as a
 * connection would; returns the last result and leaves the status in
 * *status (0 for PD_OK and PD_AGAIN) and the head length in *hlen. */
static int scan_by(const char *head, size_t len, size_t n, size_t max, size_t *hlen,
                   int *status)
{
    const pd_limits_t l = {max, 1 << 20};
    pd_head_scan_t scan;
    int rc = PD_AGAIN;

    memset(&scan, 0, sizeof(scan));
    *status = 0;
    *hlen = 0;
    for (size_t have = n < len ? n : len; rc == PD_AGAIN; have += n) {
        size_t want = have < len ? have : len;

        rc = pd_http_scan_head(head, want < max ? want : max, &l, &scan, hlen, status);
        if (want == len || want >= max)
            break;
    }
    if (rc != PD_ERROR)
        *status = 0;
    return rc;
}

/* Every way of splitting a head gives the answer the whole head gets. */
static int scan_all(const char *head, size_t max, size_t *hlen, int *status)
{
    size_t len = strlen(head);
    int rc = scan_by(head, len, len, max, hlen, status);

    for (size_t n = 1; n < len; n++) {
        size_t h;
        int st;

        ck_assert_int_eq(scan_by(head, len, n, max, &h, &st), rc);
        ck_assert_int_eq(st, *status);
        ck_assert_uint_eq(h, *hlen);
    }
    return rc;
}

START_TEST(test_scan_head)
{
    static char big[1200];
    size_t hlen;
    int status;

    ck_assert_int_eq(scan_all("GET / HTTP/1.1\r\nHost: a\r\n\r\nGET /2", 8192, &hlen, &status),
                     PD_OK);
    ck_assert_uint_eq(hlen, 27);
    ck_assert_int_eq(scan_all("GET /x HTTP/1.1\r\nHost: a\r\n", 8192, &hlen, &status), PD_AGAIN);
    ck_assert_int_eq(scan_all("OPTIONS * HTTP/1.0\r\n", 8192, &hlen, &status), PD_AGAIN);
    ck_assert_int_eq(scan_all("GET http://a/ HTTP/1.1", 8192, &hlen, &status), PD_AGAIN);
    ck_assert_int_eq(scan_all("UNSUBSCRIBE / HTTP/1", 8192, &hlen, &status), PD_AGAIN);

    /* Refused at once: bytes no request starts with. */
    ck_assert_int_eq(scan_all("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 8192, &hlen,
                              &status), PD_ERROR);
    ck_assert_int_eq(status, 400);
    ck_assert_int_eq(scan_by("\x16", 1, 1, 8192, &hlen, &status), PD_ERROR);
    /* An SSH banner is a token: a method longer than any, RFC 9112 3's 501. */
    ck_assert_int_eq(scan_all("SSH-2.0-OpenSSH_9.2p1 Debian\r\n", 8192, &hlen, &status), PD_ERROR);
    ck_assert_int_eq(status, 501);
    ck_assert_int_eq(scan_all("GET \x16", 8192, &hlen, &status), PD_ERROR);
    ck_assert_int_eq(status, 400);
    ck_assert_int_eq(scan_all("GET %2f HTTP/1.1", 8192, &hlen, &status), PD_ERROR);
    ck_assert_int_eq(scan_all("GET /a\x01b", 8192, &hlen, &status), PD_ERROR);
    ck_assert_int_eq(scan_all("GET / HTTP/1.1\n", 8192, &hlen, &status), PD_ERROR);
    ck_assert_int_eq(scan_all("GET / HTXP", 8192, &hlen, &status), PD_ERROR);
    ck_assert_int_eq(scan_all("GET / HTTP/1.1 \r\n", 8192, &hlen, &status), PD_ERROR);
    ck_assert_int_eq(status, 400);
    ck_assert_int_eq(scan_all("GET / HTTP/2.0\r\n", 8192, &hlen, &status), PD_ERROR);
    ck_assert_int_eq(status, 505);
    ck_assert_int_eq(scan_all("UNSUBSCRIBED", 8192, &hlen, &status), PD_ERROR);
    ck_assert_int_eq(status, 501);

    /* Over the limit: 414 while the request line goes on, 431 after it. */
    strcpy(big, "GET /");
    memset(big + 5, 'a', 300);
    ck_assert_int_eq(scan_all(big, 256, &hlen, &status), PD_ERROR);
    ck_assert_int_eq(status, 414);
    strcpy(big + 250, " HTTP/1.1\r\n");
    ck_assert_int_eq(scan_all(big, 256, &hlen, &status), PD_ERROR);
    ck_assert_int_eq(status, 414);   /* the line ends, but past the limit */
    strcpy(big, "GET / HTTP/1.1\r\nX: ");
    memset(big + 19, 'a', 300);
    ck_assert_int_eq(scan_all(big, 256, &hlen, &status), PD_ERROR);
    ck_assert_int_eq(status, 431);
    ck_assert_int_eq(scan_by(big, 255, 255, 256, &hlen, &status), PD_AGAIN);
}
END_TEST

START_TEST(test_parse_good)
{
    ck_assert_int_eq(parse("GET /plaintext?x=1 HTTP/1.1\r\nHost: a\r\nX-Long:  v v  \r\n\r\n"), 0);
    ck_assert_int_eq(req.method, HTTP_GET);
    ck_assert_int_eq(req.version_minor, 1);
    ck_assert_uint_eq(req.path_len, 10);
    ck_assert(memcmp(req.path, "/plaintext", 10) == 0);
    ck_assert_uint_eq(req.target_len, 14);
    ck_assert(req.keep_alive);
    ck_assert(!req.chunked);
    ck_assert_uint_eq(req.content_length, 0);
    ck_assert_uint_eq(req.nheaders, 2);
    ck_assert_uint_eq(req.headers[0].nlen, 4);
    ck_assert(memcmp(req.headers[0].name, "Host", 4) == 0);
    ck_assert_uint_eq(req.headers[1].vlen, 3);     /* OWS trimmed both sides */
    ck_assert(memcmp(req.headers[1].value, "v v", 3) == 0);

    ck_assert_int_eq(parse("HEAD / HTTP/1.0\r\n\r\n"), 0);
    ck_assert_int_eq(req.method, HTTP_HEAD);
    ck_assert_int_eq(req.version_minor, 0);
    ck_assert(!req.keep_alive);

    ck_assert_int_eq(parse("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n"), 0);
    ck_assert(req.keep_alive);
    ck_assert_int_eq(parse("GET / HTTP/1.1\r\nHost: a\r\nConnection: foo, close\r\n\r\n"), 0);
    ck_assert(!req.keep_alive);
    /* The cases http-parser 2.9.4 gets wrong: close after an HTAB, and
     * close beside keep-alive in HTTP/1.0. */
    ck_assert_int_eq(parse("GET / HTTP/1.1\r\nHost: a\r\nConnection: close\t\r\n\r\n"), 0);
    ck_assert(!req.keep_alive);
    ck_assert_int_eq(parse("GET / HTTP/1.1\r\nHost: a\r\nConnection: a,\tclose\r\n\r\n"), 0);
    ck_assert(!req.keep_alive);
    ck_assert_int_eq(parse("GET / HTTP/1.0\r\nConnection: keep-alive, close\r\n\r\n"), 0);
    ck_assert(!req.keep_alive);
    ck_assert_int_eq(parse("GET / HTTP/1.1\r\nHost: a\r\nConnection: closed\r\n\r\n"), 0);
    ck_assert(req.keep_alive);

    ck_assert_int_eq(parse("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 42\r\n"
                           "Expect: 100-continue\r\n\r\n"), 0);
    ck_assert_uint_eq(req.content_length, 42);
    ck_assert(req.expect_continue);
    ck_assert_int_eq(parse("GET / HTTP/1.1\r\nHost: a\r\nContent-Length:  007 \r\n\r\n"), 0);
    ck_assert_uint_eq(req.content_length, 7);
    ck_assert_int_eq(parse("GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n"), 0);
    ck_assert_uint_eq(req.content_length, 0);
    ck_assert_int_eq(parse("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: Chunked\r\n\r\n"), 0);
    ck_assert(req.chunked);
    ck_assert_int_eq(parse("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\t\r\n\r\n"), 0);
    ck_assert(req.chunked);     /* http-parser 2.9.4 would not call this chunked */

    ck_assert_int_eq(parse("GET http://example.test/stats?a HTTP/1.1\r\nHost: a\r\n\r\n"), 0);
    ck_assert_uint_eq(req.path_len, 6);
    ck_assert(memcmp(req.path, "/stats", 6) == 0);
    ck_assert_int_eq(parse("GET http://example.test HTTP/1.1\r\nHost: a\r\n\r\n"), 0);
    ck_assert_int_eq(parse("GET / HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n"), 0);
    ck_assert_int_eq(parse("GET / HTTP/1.1\r\nHost: xn--d1a.example_1.test:80\r\n\r\n"), 0);
    ck_assert_int_eq(parse("GET / HTTP/1.1\r\nHost: 127.0.0.1:\r\n\r\n"), 0);  /* port = *DIGIT */
    ck_assert_int_eq(parse("GET / HTTP/1.1\r\nHost: a%2Db\r\n\r\n"), 0);
    ck_assert_int_eq(parse("GET / HTTP/1.1\r\nHost: [v1.x]\r\n\r\n"), 0);
    ck_assert_int_eq(parse("OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n"), 0);
    ck_assert_uint_eq(req.path_len, 1);
}
END_TEST

/* Each malformed head and the status poold answers it with. */
static const struct {
    const char *head;
    int status;
} bad[] = {
    {"GET / HTXP/1.0\r\n\r\n", 400},
    {"GET / HTXP/1.1\r\nHost: a\r\n\r\n", 400},
    {"GET / HTTP/2.7\r\nHost: a\r\n\r\n", 505},
    {"GET / HTTP/1.2\r\nHost: a\r\n\r\n", 505},
    {"GET / HTTP/0.9\r\nHost: a\r\n\r\n", 505},
    {"GET / HTTP/1.10\r\nHost: a\r\n\r\n", 400},
    {"GET / HTTP/1.1 \r\nHost: a\r\n\r\n", 400},
    {"GET  / HTTP/1.1\r\nHost: a\r\n\r\n", 400},
    {"GET /a b HTTP/1.1\r\nHost: a\r\n\r\n", 400},
    {"GET / HTTP/1.1\r\n\r\n", 400},
    {"GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400},
    {"GET / HTTP/1.0\r\nHost: a\r\nhost: a\r\n\r\n", 400},
    {"GET / HTTP/1.1\r\nHost: a b\r\n\r\n", 400},
    {"GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", 400},
    {"GET / HTTP/1.1\r\nHost: a\"b\r\n\r\n", 400},
    {"GET / HTTP/1.1\r\nHost:\r\n\r\n", 400},
    {"GET / HTTP/1.1\r\nHost:  \r\n\r\n", 400},
    {"GET / HTTP/1.1\r\nHost: :80\r\n\r\n", 400},
    {"GET / HTTP/1.1\r\nHost: a:b\r\n\r\n", 400},
    {"GET / HTTP/1.1\r\nHost: a:80:80\r\n\r\n", 400},
    {"GET / HTTP/1.1\r\nHost: a%zz\r\n\r\n", 400},
    {"GET / HTTP/1.1\r\nHost: a%2\r\n\r\n", 400},
    {"GET / HTTP/1.1\r\nHost: []\r\n\r\n", 400},
    {"GET / HTTP/1.1\r\nHost: [::1\r\n\r\n", 400},
    {"GET / HTTP/1.1\r\nHost: [::1]x\r\n\r\n", 400},
    {"GET / HTTP/1.1\r\nHost: a[b]\r\n\r\n", 400},
    {"GET / HTTP/1.0\r\nHost:\r\n\r\n", 400},
    {"GET * HTTP/1.1\r\nHost: a\r\n\r\n", 400},
    {"HEAD * HTTP/1.1\r\nHost: a\r\n\r\n", 400},
    {"GET / HTTP/1.1\r\nHost: a\r\nX-Foo : bar\r\n\r\n", 400},
    {"GET / HTTP/1.1\r\nHost: a\r\n: bar\r\n\r\n", 400},
    {"GET / HTTP/1.1\r\nHost: a\r\nX-Foo: bar\r\n folded\r\n\r\n", 400},
    {"GET / HTTP/1.1\r\nHost: a\r\nX-Foo: b\x01r\r\n\r\n", 400},
    {"GET / HTTP/1.1\r\nHost: a\nX-Foo: bar\r\n\r\n", 400},
    {"GET / HTTP/1.1\r\nHost: a\r\nX-Foo: b\rar\r\n\r\n", 400},
    {"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", 400},
    {"GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n", 400},
    {"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 12a\r\n\r\n", 400},
    {"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n", 400},
    {"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", 400},
    {"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999999\r\n\r\n", 400},
    {"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n", 400},
    {"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: \r\n\r\n", 400},
    {"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 5\r\n\r\n", 400},
    {"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: +5\r\n\r\n", 400},
    {"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 9999999999999999999\r\n\r\n", 413},
    {"GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\t\r\nContent-Length: 5\r\n\r\n",
     400},
    {"GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\nContent-Length: 5\r\n\r\n", 400},
    {"GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n", 400},
    {"GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, chunked\r\n\r\n", 400},
    {"GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501},
    {"GET / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400},
    {"GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1048577\r\n\r\n", 413},
    {"GET / HTTP/1.1\r\nHost: a\r\nExpect: 200-ok\r\n\r\n", 417},
    {"FOO / HTTP/1.1\r\nHost: a\r\n\r\n", 501},
    {"GET foo HTTP/1.1\r\nHost: a\r\n\r\n", 400},
    {"\x01\x02garbage\r\n\r\n", 400},
    {"GET / HTTP/1.1\r\nHost: a\r\nX: \x7f\r\n\r\n", 400},
};

START_TEST(test_parse_bad)
{
    ck_assert_msg(parse(bad[_i].head) == bad[_i].status, "case %d: got %d, want %d", _i,
                  parse(bad[_i].head), bad[_i].status);
}
END_TEST

START_TEST(test_parse_limits)
{
    char head[12000];
    pd_limits_t small = {256, 10};
    size_t n;

    /* Exactly at the limit passes, one byte over is 431. */
    strcpy(head, "GET / HTTP/1.1\r\nHost: a\r\nX: ");
    n = strlen(head);
    memset(head + n, 'a', 256 - n - 4);
    strcpy(head + 256 - 4, "\r\n\r\n");
    ck_assert_uint_eq(strlen(head), 256);
    ck_assert_int_eq(parse_lim(head, &small), 0);
    memmove(head + 30, head + 29, strlen(head + 29) + 1);
    ck_assert_int_eq(parse_lim(head, &small), 431);
    /* ... but 414 when the request line alone is over it. */
    strcpy(head, "GET /");
    memset(head + 5, 'a', 256);
    strcpy(head + 261, " HTTP/1.1\r\nHost: a\r\n\r\n");
    ck_assert_int_eq(parse_lim(head, &small), 414);

    ck_assert_int_eq(parse_lim("GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\n\r\n", &small), 0);
    ck_assert_int_eq(parse_lim("GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 11\r\n\r\n", &small), 413);

    /* PD_MAX_HEADERS fields pass, one more is 431. */
    strcpy(head, "GET / HTTP/1.1\r\nHost: a\r\n");
    for (int i = 1; i < PD_MAX_HEADERS; i++)
        strcat(head, "X: y\r\n");
    strcat(head, "\r\n");
    ck_assert_int_eq(parse(head), 0);
    ck_assert_uint_eq(req.nheaders, PD_MAX_HEADERS);
    head[strlen(head) - 2] = '\0';
    strcat(head, "X: y\r\n\r\n");
    ck_assert_int_eq(parse(head), 431);
}
END_TEST

/* Feed a whole body in pieces of `step` bytes.  Returns 0 while the body
 * is not complete, 200 once it is, else the status of the error. */
static int chunked(const char *body, size_t step, uint64_t max, size_t *used)
{
    pd_chunked_t ck;
    size_t len = strlen(body), off = 0;
    int rc = PD_AGAIN, status = 0;

    memset(&ck, 0, sizeof(ck));
    while (off < len && rc == PD_AGAIN) {
        size_t n = len - off < step ? len - off : step, took = 0;

        rc = pd_chunked_feed(&ck, body + off, n, max, 1024, &took, &status);
        ck_assert_uint_le(took, n);
        ck_assert_msg(rc != PD_AGAIN || took == n, "more wanted, %zu of %zu taken", took, n);
        off += took;
    }
    *used = off;
    return rc == PD_OK ? 200 : rc == PD_ERROR ? status : 0;
}

START_TEST(test_chunked)
{
    static const char good[] = "5\r\nhello\r\n1a;ext=1\r\nabcdefghijklmnopqrstuvwxyz\r\n"
                               "0\r\nTrailer: x\r\n\r\nGET /next";
    size_t used;

    for (size_t step = 1; step <= sizeof(good); step++) {
        ck_assert_int_eq(chunked(good, step, 1 << 20, &used), 200);
        ck_assert_uint_eq(used, sizeof(good) - 1 - strlen("GET /next"));
    }
    ck_assert_int_eq(chunked("0\r\n\r\n", 1, 0, &used), 200);
    ck_assert_int_eq(chunked("5\r\nhelloXX0\r\n\r\n", 100, 1 << 20, &used), 400);
    ck_assert_int_eq(chunked("5\r\nhello\n0\r\n\r\n", 100, 1 << 20, &used), 400);
    ck_assert_int_eq(chunked("g\r\n", 100, 1 << 20, &used), 400);
    ck_assert_int_eq(chunked("\r\n", 100, 1 << 20, &used), 400);
    ck_assert_int_eq(chunked("5\n", 100, 1 << 20, &used), 400);
    ck_assert_int_eq(chunked("ffffffffffffffffff\r\n", 100, 1 << 20, &used), 400);
    ck_assert_int_eq(chunked("0\r\nbad trailer\r\n\r\n", 100, 1 << 20, &used), 400);
    ck_assert_int_eq(chunked("0\r\nbad : trailer\r\n\r\n", 100, 1 << 20, &used), 400);
    ck_assert_int_eq(chunked("0\r\n\rX", 100, 1 << 20, &used), 400);
    ck_assert_int_eq(chunked("6\r\nhello!\r\n5\r\n", 100, 10, &used), 413);
    ck_assert_int_eq(chunked("5\r\nhello\r\n5\r\nworld\r\n0\r\n\r\n", 3, 10, &used), 200);
}
END_TEST

START_TEST(test_write_head)
{
    struct evbuffer *out = evbuffer_new();
    char buf[1024];
    size_t n;

    pd_http_date_update(784111777);     /* RFC 9110's example date */
    ck_assert_str_eq(pd_http_date(), "Sun, 06 Nov 1994 08:49:37 GMT");

    ck_assert_int_eq(pd_http_write_head(out, 200, "text/plain", 13, true, false, false), PD_OK);
    n = evbuffer_remove(out, buf, sizeof(buf) - 1);
    buf[n] = '\0';
    ck_assert_str_eq(buf, "HTTP/1.1 200 OK\r\nServer: poold\r\n"
                          "Date: Sun, 06 Nov 1994 08:49:37 GMT\r\n"
                          "Content-Type: text/plain\r\nContent-Length: 13\r\n\r\n");

    ck_assert_int_eq(pd_http_write_head(out, 404, NULL, 0, true, true, false), PD_OK);
    n = evbuffer_remove(out, buf, sizeof(buf) - 1);
    buf[n] = '\0';
    ck_assert_ptr_nonnull(strstr(buf, "HTTP/1.1 404 Not Found\r\n"));
    ck_assert_ptr_null(strstr(buf, "Content-Type"));
    ck_assert_ptr_nonnull(strstr(buf, "\r\nConnection: keep-alive\r\n\r\n"));

    ck_assert_int_eq(pd_http_write_head(out, 405, "text/plain", 1, false, false, true), PD_OK);
    n = evbuffer_remove(out, buf, sizeof(buf) - 1);
    buf[n] = '\0';
    ck_assert_ptr_nonnull(strstr(buf, "\r\nConnection: close\r\n"));
    ck_assert_ptr_null(strstr(buf, "\r\n\r\n"));   /* left open for more lines */

    ck_assert_int_eq(pd_http_write_error(out, 431, false), PD_OK);
    n = evbuffer_remove(out, buf, sizeof(buf) - 1);
    buf[n] = '\0';
    ck_assert_ptr_nonnull(strstr(buf, "HTTP/1.1 431 Request Header Fields Too Large\r\n"));
    ck_assert_ptr_nonnull(strstr(buf, "\r\nConnection: close\r\n"));
    ck_assert_ptr_nonnull(strstr(buf, "\r\n\r\n431 Request Header Fields Too Large\n"));

    ck_assert_int_eq(pd_http_write_error(out, 400, true), PD_OK);
    n = evbuffer_remove(out, buf, sizeof(buf) - 1);
    buf[n] = '\0';
    ck_assert_str_eq(strstr(buf, "\r\n\r\n"), "\r\n\r\n");   /* HEAD: no body */
    evbuffer_free(out);
}
END_TEST

START_TEST(test_reasons)
{
    static const struct {
        int status;
        const char *reason;
    } sent[] = {
        {100, "Continue"}, {200, "OK"}, {400, "Bad Request"}, {404, "Not Found"},
        {405, "Method Not Allowed"}, {408, "Request Timeout"}, {413, "Content Too Large"},
        {414, "URI Too Long"}, {417, "Expectation Failed"},
        {431, "Request Header Fields Too Large"}, {500, "Internal Server Error"},
        {501, "Not Implemented"}, {505, "HTTP Version Not Supported"},
    };

    for (size_t i = 0; i < sizeof(sent) / sizeof(sent[0]); i++)
        ck_assert_str_eq(pd_http_reason(sent[i].status), sent[i].reason);
    ck_assert_str_eq(pd_http_reason(299), "<unknown>");
}
END_TEST

Suite *make_http_suite(void)
{
    Suite *s = suite_create("http");
    TCase *tc = tcase_create("framing");

    tcase_set_timeout(tc, 10);
    tcase_add_test(tc, test_scan_head);
    tcase_add_test(tc, test_parse_good);
    tcase_add_loop_test(tc, test_parse_bad, 0, (int)(sizeof(bad) / sizeof(bad[0])));
    tcase_add_test(tc, test_parse_limits);
    tcase_add_test(tc, test_chunked);
    tcase_add_test(tc, test_write_head);
    tcase_add_test(tc, test_reasons);
    suite_add_tcase(s, tc);
    return s;
}

/* SPDX-License-Identifier: BSD-2-Clause */
/* poold — HTTP/1.1 framing: RFC 9112 enforced on top of http-parser.
 *
 * Debian's http-parser 2.9.4 is built non-strict: it takes "HTXP/1.1",
 * "HTTP/2.7", a header name with a space before the colon, a chunk without
 * its CRLF, and it has no notion of poold's limits.  So the connection first
 * finds the complete head itself (pd_http_scan_head, which also refuses at
 * once the bytes that cannot begin a request), pd_http_parse_head
 * checks the request line and every field line byte by byte, hands the head
 * to http-parser, and then applies the semantic rules (Host, framing,
 * expectations).  The parser gives the method, the target, the fields,
 * Content-Length (refusing a malformed, overflowing or repeated one, and
 * one beside Transfer-Encoding), keep-alive and the reason phrases; our own
 * code stays where the parser is wrong, each place naming the case.  One
 * case is left to it: it refuses "Content-Length: 5<HTAB>", trailing OWS
 * RFC 9110 allows, and a 400 is the safe side of that.  The parser is paused
 * at the end of the head: bodies are framed here, by pd_chunked_feed or by
 * counting Content-Length, never by the parser.  Responses are written by
 * response.c.
 */
#include "config.h"

#include <string.h>
#include <strings.h>

#include "poold.h"

/* ======================================================================== */
/* Character classes (RFC 9110 5.6.2)                                        */
/* ======================================================================== */

static bool pd_is_tchar(unsigned char c)
{
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
        return true;
    return c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

/* field-vchar, SP or HTAB */
static bool pd_is_field_char(unsigned char c)
{
    return c == '\t' || (c >= ' ' && c != 0x7f);
}

static bool pd_is_hex(unsigned char c, unsigned *v)
{
    if (c >= '0' && c <= '9')
        *v = c - '0';
    else if (c >= 'a' && c <= 'f')
        *v = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F')
        *v = c - 'A' + 10;
    else
        return false;
    return true;
}

static bool pd_is_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

/* RFC 3986 unreserved or sub-delims: what a reg-name and an IP-literal's
 * inside are made of, besides pct-encoded octets (and ':' in a literal). */
static bool pd_is_host_char(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || pd_is_digit(c) ||
           (c != '\0' && strchr("-._~!$&'()*+,;=", c) != NULL);
}

/* Host = uri-host [ ":" port ] (RFC 9110 7.2), which is what "well formed"
 * means here: a non-empty reg-name (IPv4 is one too) of unreserved,
 * sub-delims and %XX octets, or an IP-literal "[...]" of those and ':'
 * with nothing after the ']' but the port; port = *DIGIT, as RFC 3986
 * writes it (so "a:" passes).  An empty host is refused (RFC 9110 4.2.1:
 * an http URI's host is never empty), and so is anything else: a space, a
 * '/', a second '[' or a ':' inside a reg-name. */
static bool pd_host_is_valid(const char *v, size_t n)
{
    const unsigned char *p = (const unsigned char *)v;
    size_t i = 0;
    unsigned x;

    if (n > 0 && p[0] == '[') {
        for (i = 1; i < n && p[i] != ']'; i++)
            if (!pd_is_host_char(p[i]) && p[i] != ':')
                return false;
        if (i == n || i == 1)
            return false;   /* no ']', or "[]" */
        i++;
    } else {
        for (; i < n && p[i] != ':'; i++) {
            if (p[i] == '%' && i + 2 < n && pd_is_hex(p[i + 1], &x) &&
                pd_is_hex(p[i + 2], &x))
                i += 2;
            else if (!pd_is_host_char(p[i]))
                return false;
        }
        if (i == 0)
            return false;   /* empty, or ":port" alone */
    }
    if (i == n)
        return true;
    if (p[i++] != ':')
        return false;
    for (; i < n; i++)
        if (!pd_is_digit(p[i]))
            return false;
    return true;
}

static bool pd_name_is(const pd_header_t *h, const char *name)
{
    size_t n = strlen(name);

    return h->nlen == n && strncasecmp(h->name, name, n) == 0;
}

/* ======================================================================== */
/* Head                                                                      */
/* ======================================================================== */

/* Length of the longest method http-parser knows ("UNSUBSCRIBE"): a token
 * that grew longer can only end in 501. */
static size_t pd_method_max(void)
{
#define PD_METHOD_LEN(num, name, string) sizeof(#string) - 1,
    static const size_t lens[] = {HTTP_METHOD_MAP(PD_METHOD_LEN)};
#undef PD_METHOD_LEN
    static size_t cached;
    /* Worker threads may race to fill it: they store the same value. */
    size_t max = __atomic_load_n(&cached, __ATOMIC_RELAXED);

    if (max == 0) {
        for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++)
            if (lens[i] > max)
                max = lens[i];
        __atomic_store_n(&cached, max, __ATOMIC_RELAXED);
    }
    return max;
}

/* The request line at the start of buf[0..len), strictly: method SP
 * request-target SP HTTP-version CRLF, the target starting as one of the
 * forms poold routes ('/', '*' or a scheme).  buf may end before the line
 * does.  *line is in and out: on entry the bytes a previous call on the
 * same line checked (0 the first time), so that a line trickling in is not
 * scanned again from its start.  Returns PD_OK with *line the line's length
 * (CRLF included); PD_AGAIN when buf ends inside a line it could still
 * become (then *line is where to go on and *status is 400, for a caller
 * that has no more); PD_ERROR with *status 400, 501 (a method longer than
 * any known) or 505. */
static int pd_check_request_line(const char *buf, size_t len, size_t *line, int *status)
{
    static const char version[] = "HTTP/1.1\r\n";   /* digits at 5 and 7 */
    const unsigned char *start = (const unsigned char *)buf;
    const unsigned char *p = start;
    const unsigned char *end = p + len;
    const unsigned char *t;
    size_t i;

    *status = 400;
    while (p < end && pd_is_tchar(*p))
        p++;
    if ((size_t)(p - start) > pd_method_max()) {
        *status = 501;
        return PD_ERROR;
    }
    if (p == end) {
        *line = 0;
        return PD_AGAIN;
    }
    if (p == start || *p++ != ' ')
        return PD_ERROR;
    t = p;
    if (t < end && *t != '/' && *t != '*' && !((*t | 0x20) >= 'a' && (*t | 0x20) <= 'z'))
        return PD_ERROR;
    if (start + *line > t)
        p = start + *line;
    while (p < end && *p > ' ' && *p < 0x7f)
        p++;
    if (p == end) {
        *line = len;
        return PD_AGAIN;
    }
    if (p == t || *p != ' ')
        return PD_ERROR;
    *line = (size_t)(p - start);    /* the version is short: checked anew */
    p++;
    for (i = 0; i < sizeof(version) - 1 && p + i < end; i++) {
        bool digit = i == 5 || i == 7;

        if (digit ? p[i] < '0' || p[i] > '9' : p[i] != (unsigned char)version[i])
            return PD_ERROR;
    }
    if (i < sizeof(version) - 1)
        return PD_AGAIN;
    if (p[5] != '1' || p[7] > '1') {
        *status = 505;
        return PD_ERROR;
    }
    *line = (size_t)(p + i - start);
    return PD_OK;
}

int pd_http_scan_head(const char *buf, size_t len, const pd_limits_t *lim,
                      pd_head_scan_t *scan, size_t *hlen, int *status)
{
    size_t from = scan->searched > 3 ? scan->searched - 3 : 0;

    if (!scan->line_done) {
        int rc = pd_check_request_line(buf, len, &scan->line_ok, status);

        if (rc == PD_ERROR)
            return PD_ERROR;
        scan->line_done = rc == PD_OK;
    }
    if (len >= 4 && from < len) {
        const char *end = memmem(buf + from, len - from, "\r\n\r\n", 4);

        if (end != NULL) {
            *hlen = (size_t)(end - buf) + 4;
            return PD_OK;
        }
        scan->searched = len;
    }
    if (len >= lim->max_header) {
        *status = scan->line_done ? 431 : 414;
        return PD_ERROR;
    }
    return PD_AGAIN;
}

/* Every field line: name ":" OWS value OWS CRLF, no obs-fold, no bare CR or
 * LF, no control characters.  Returns 0 or the status. */
static int pd_check_fields(const char *buf, size_t len)
{
    const unsigned char *p = (const unsigned char *)buf;
    const unsigned char *end = p + len;
    unsigned lines = 0;

    while (p < end) {
        if (end - p >= 2 && p[0] == '\r' && p[1] == '\n')
            return p + 2 == end ? 0 : 400;
        if (++lines > PD_MAX_HEADERS)
            return 431;
        if (!pd_is_tchar(*p))
            return 400;     /* also obs-fold: a line starting with SP/HTAB */
        while (p < end && pd_is_tchar(*p))
            p++;
        if (p == end || *p++ != ':')
            return 400;     /* "X-Foo : bar" and friends */
        while (p < end && pd_is_field_char(*p))
            p++;
        if (end - p < 2 || p[0] != '\r' || p[1] != '\n')
            return 400;
        p += 2;
    }
    return 400;
}

static int pd_on_url(http_parser *parser, const char *at, size_t len)
{
    pd_request_t *req = parser->data;

    if (req->target != NULL && req->target + req->target_len == at)
        req->target_len += len;
    else {
        req->target = at;
        req->target_len = len;
    }
    return 0;
}

static int pd_on_header_field(http_parser *parser, const char *at, size_t len)
{
    pd_request_t *req = parser->data;
    pd_header_t *h;

    if (!req->in_value && req->nheaders > 0) {
        h = &req->headers[req->nheaders - 1];
        if (h->name + h->nlen == at) {
            h->nlen += (uint32_t)len;
            return 0;
        }
    }
    if (req->nheaders == PD_MAX_HEADERS) {
        req->too_many_headers = true;
        return 1;
    }
    h = &req->headers[req->nheaders++];
    h->name = at;
    h->nlen = (uint32_t)len;
    h->value = at + len;
    h->vlen = 0;
    req->in_value = false;
    return 0;
}

static int pd_on_header_value(http_parser *parser, const char *at, size_t len)
{
    pd_request_t *req = parser->data;
    pd_header_t *h;

    if (req->nheaders == 0)
        return 1;
    h = &req->headers[req->nheaders - 1];
    if (req->in_value && h->value + h->vlen == at) {
        h->vlen += (uint32_t)len;
    } else {
        h->value = at;
        h->vlen = (uint32_t)len;
    }
    req->in_value = true;
    return 0;
}

static int pd_on_headers_complete(http_parser *parser)
{
    /* Stop here: the body is framed by poold, not by the parser. */
    http_parser_pause(parser, 1);
    return 0;
}

static const http_parser_settings pd_parser_settings = {
    .on_url = pd_on_url,
    .on_header_field = pd_on_header_field,
    .on_header_value = pd_on_header_value,
    .on_headers_complete = pd_on_headers_complete,
};

/* Calls fn(token, len, arg) for each comma-separated token of a list value,
 * OWS trimmed, empty elements skipped. */
static void pd_list_each(const char *v, size_t len,
                         void (*fn)(const char *, size_t, void *), void *arg)
{
    const char *end = v + len;

    while (v < end) {
        const char *t, *e;

        while (v < end && (*v == ' ' || *v == '\t' || *v == ','))
            v++;
        t = v;
        while (v < end && *v != ',')
            v++;
        e = v;
        while (e > t && (e[-1] == ' ' || e[-1] == '\t'))
            e--;
        if (e > t)
            fn(t, (size_t)(e - t), arg);
    }
}

typedef struct pd_te_s {
    unsigned codings;       /* transfer codings seen */
    unsigned chunked;       /* of which "chunked" */
    bool last_chunked;
} pd_te_t;

static void pd_te_token(const char *t, size_t n, void *arg)
{
    pd_te_t *te = arg;
    bool chunked = n == 7 && strncasecmp(t, "chunked", 7) == 0;

    te->codings++;
    te->chunked += chunked;
    te->last_chunked = chunked;
}

static void pd_close_token(const char *t, size_t n, void *arg)
{
    if (n == 5 && strncasecmp(t, "close", 5) == 0)
        *(bool *)arg = true;
}

/* Host, framing, connection and expectation rules over the parsed fields;
 * parser has parsed them and stopped at the end of the head. */
static int pd_check_semantics(pd_request_t *req, const http_parser *parser,
                              const pd_limits_t *lim)
{
    unsigned hosts = 0;
    pd_te_t te = {0, 0, false};
    bool close = false;
    bool expect = false, expect_bad = false;

    for (unsigned i = 0; i < req->nheaders; i++) {
        pd_header_t *h = &req->headers[i];

        while (h->vlen > 0 && (h->value[h->vlen - 1] == ' ' || h->value[h->vlen - 1] == '\t'))
            h->vlen--;
        if (pd_name_is(h, "host")) {
            if (!pd_host_is_valid(h->value, h->vlen))
                return 400;
            hosts++;
        } else if (pd_name_is(h, "transfer-encoding")) {
            unsigned before = te.codings;

            pd_list_each(h->value, h->vlen, pd_te_token, &te);
            if (te.codings == before)
                return 400;     /* an empty Transfer-Encoding */
        } else if (pd_name_is(h, "connection")) {
            pd_list_each(h->value, h->vlen, pd_close_token, &close);
        } else if (pd_name_is(h, "expect")) {
            expect = true;
            if (h->vlen != 12 || strncasecmp(h->value, "100-continue", 12) != 0)
                expect_bad = true;
        }
    }

    if (req->version_minor == 1 ? hosts != 1 : hosts > 1)
        return 400;
    if (te.codings > 0) {
        /* RFC 9112 6.1 and 6.3: Transfer-Encoding in HTTP/1.0, or without
         * chunked last, is a framing error (with Content-Length too, which
         * the parser has refused already).  Ours, not the parser's: it
         * misses "chunked" followed by an HTAB. */
        if (req->version_minor == 0 || !te.last_chunked || te.chunked > 1)
            return 400;
        if (te.codings > 1)
            return 501;     /* gzip, deflate...: not implemented */
        req->chunked = true;
    }
    if (expect_bad)
        return 417;
    req->expect_continue = expect && req->version_minor == 1;
    /* Our own "close" on top: http-parser misses it after an HTAB ("close<HTAB>",
     * "a,<HTAB>close") and in HTTP/1.0 lets keep-alive win over it. */
    req->keep_alive = http_should_keep_alive(parser) && !close;
    /* The parser refuses a malformed, overflowing or repeated Content-Length. */
    if (parser->flags & F_CONTENTLENGTH)
        req->content_length = parser->content_length;
    if (!req->chunked && req->content_length > lim->max_body)
        return 413;
    return 0;
}

/* Routing path of the target: origin form up to '?', absolute form's path,
 * '*' for OPTIONS; 400 for any other target. */
static int pd_set_path(pd_request_t *req)
{
    const char *t = req->target;
    size_t n = req->target_len;

    if (t[0] == '/') {
        const char *q = memchr(t, '?', n);

        req->path = t;
        req->path_len = q != NULL ? (size_t)(q - t) : n;
        return 0;
    }
    /* RFC 9112 3.2.4: the asterisk form is OPTIONS's alone. */
    if (n == 1 && t[0] == '*' && req->method == HTTP_OPTIONS) {
        req->path = t;
        req->path_len = 1;
        return 0;
    }
    if ((n > 7 && strncasecmp(t, "http://", 7) == 0) ||
        (n > 8 && strncasecmp(t, "https://", 8) == 0)) {
        struct http_parser_url u;

        http_parser_url_init(&u);
        if (http_parser_parse_url(t, n, 0, &u) != 0)
            return 400;
        if (u.field_set & (1 << UF_PATH)) {
            req->path = t + u.field_data[UF_PATH].off;
            req->path_len = u.field_data[UF_PATH].len;
        } else {
            req->path = "/";
            req->path_len = 1;
        }
        return 0;
    }
    return 400;
}

int pd_http_parse_head(pd_request_t *req, http_parser *parser,
                       const char *buf, size_t len, const pd_limits_t *lim)
{
    size_t line = 0;
    int status;

    memset(req, 0, offsetof(pd_request_t, headers));
    if (pd_check_request_line(buf, len, &line, &status) != PD_OK)
        return status;
    if (len > lim->max_header)
        return line > lim->max_header ? 414 : 431;
    status = pd_check_fields(buf + line, len - line);
    if (status != 0)
        return status;

    http_parser_init(parser, HTTP_REQUEST);
    parser->data = req;
    http_parser_execute(parser, &pd_parser_settings, buf, len);
    switch (HTTP_PARSER_ERRNO(parser)) {
    case HPE_PAUSED:
        break;
    case HPE_INVALID_METHOD:
        return 501;
    case HPE_HEADER_OVERFLOW:
        return 431;
    default:
        return req->too_many_headers ? 431 : 400;
    }
    http_parser_pause(parser, 0);
    if (req->target == NULL)
        return 400;
    req->method = (int)parser->method;
    req->version_minor = parser->http_minor;

    status = pd_check_semantics(req, parser, lim);
    if (status != 0)
        return status;
    return pd_set_path(req);
}

/* ======================================================================== */
/* Chunked bodies                                                            */
/* ======================================================================== */

enum {
    CK_SIZE,        /* first hex digit of a chunk size */
    CK_SIZE_MORE,   /* more digits, an extension, or CR */
    CK_EXT,         /* chunk extension up to CR */
    CK_SIZE_LF,
    CK_DATA,
    CK_DATA_CR,
    CK_DATA_LF,
    CK_TRAILER,     /* start of a trailer line, or CR of the last line */
    CK_TRAILER_NAME,
    CK_TRAILER_LINE,
    CK_TRAILER_LF,
    CK_END_LF
};

int pd_chunked_feed(pd_chunked_t *ck, const char *buf, size_t len, uint64_t max_body,
                    size_t max_trailer, size_t *used, int *status)
{
    const unsigned char *p = (const unsigned char *)buf;
    const unsigned char *end = p + len;
    unsigned v;

    while (p < end) {
        unsigned char c = *p;

        switch (ck->state) {
        case CK_SIZE:
            if (!pd_is_hex(c, &v))
                goto bad;
            ck->left = v;
            ck->digits = 1;
            ck->line = 0;
            ck->state = CK_SIZE_MORE;
            break;
        case CK_SIZE_MORE:
            if (pd_is_hex(c, &v)) {
                if (++ck->digits > 15)
                    goto bad;   /* beyond any body we would take */
                ck->left = ck->left * 16 + v;
            } else if (c == ';' || c == ' ' || c == '\t') {
                ck->state = CK_EXT;
            } else if (c == '\r') {
                ck->state = CK_SIZE_LF;
            } else {
                goto bad;
            }
            break;
        case CK_EXT:
            if (c == '\r')
                ck->state = CK_SIZE_LF;
            else if (!pd_is_field_char(c) || ++ck->line > max_trailer)
                goto bad;
            break;
        case CK_SIZE_LF:
            if (c != '\n')
                goto bad;
            if (ck->left > max_body - ck->total) {
                *status = 413;
                goto fail;
            }
            ck->total += ck->left;
            ck->line = 0;
            ck->state = ck->left == 0 ? CK_TRAILER : CK_DATA;
            break;
        case CK_DATA: {
            size_t n = (size_t)(end - p) < ck->left ? (size_t)(end - p) : (size_t)ck->left;

            ck->left -= n;
            p += n;
            if (ck->left == 0)
                ck->state = CK_DATA_CR;
            continue;
        }
        case CK_DATA_CR:
            if (c != '\r')
                goto bad;   /* the non-strict parser would take any byte */
            ck->state = CK_DATA_LF;
            break;
        case CK_DATA_LF:
            if (c != '\n')
                goto bad;
            ck->state = CK_SIZE;
            break;
        case CK_TRAILER:
            if (c == '\r') {
                ck->state = CK_END_LF;
                break;
            }
            if (!pd_is_tchar(c))
                goto bad;
            ck->state = CK_TRAILER_NAME;
            if (++ck->line > max_trailer)
                goto bad;
            break;
        case CK_TRAILER_NAME:
            if (c == ':')
                ck->state = CK_TRAILER_LINE;
            else if (!pd_is_tchar(c))
                goto bad;
            if (++ck->line > max_trailer)
                goto bad;
            break;
        case CK_TRAILER_LINE:
            if (c == '\r')
                ck->state = CK_TRAILER_LF;
            else if (!pd_is_field_char(c))
                goto bad;
            if (++ck->line > max_trailer)
                goto bad;
            break;
        case CK_TRAILER_LF:
            if (c != '\n')
                goto bad;
            ck->state = CK_TRAILER;
            break;
        case CK_END_LF:
            if (c != '\n')
                goto bad;
            *used = (size_t)(p + 1 - (const unsigned char *)buf);
            return PD_OK;
        }
        p++;
    }
    *used = len;
    return PD_AGAIN;

bad:
    *status = 400;
fail:
    *used = (size_t)(p - (const unsigned char *)buf);
    return PD_ERROR;
}

/* SPDX-License-Identifier: BSD-2-Clause */
/* poold — response heads: the status line and the fields every response
 * carries (Server, the cached Date, Content-Type, Content-Length,
 * Connection).  pd_http_write_head is the entry point, pd_http_write_error
 * a complete error response on top of it; each worker refreshes its Date
 * once a second with pd_http_date_update.  Requests are framed in http.c.
 */
#include "config.h"

#include <string.h>
#include <time.h>

#include <event2/buffer.h>

#include "poold.h"

/* Each thread's own, refreshed by its worker's timer: worker threads never
 * read a value another is rewriting. */
static __thread char pd_date_buf[32] = "Thu, 01 Jan 1970 00:00:00 GMT";

void pd_http_date_update(time_t now)
{
    static const char days[7][4] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
    static const char months[12][4] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                       "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
    struct tm tm;

    /* By hand rather than strftime: the names must not follow a locale. */
    gmtime_r(&now, &tm);
    snprintf(pd_date_buf, sizeof(pd_date_buf), "%s, %02d %s %04d %02d:%02d:%02d GMT",
             days[tm.tm_wday], tm.tm_mday, months[tm.tm_mon], tm.tm_year + 1900,
             tm.tm_hour, tm.tm_min, tm.tm_sec);
}

const char *pd_http_date(void)
{
    return pd_date_buf;
}

const char *pd_http_reason(int status)
{
    if (status == 413)
        return "Content Too Large";     /* RFC 9110's name; the parser has RFC 7231's */
    return http_status_str((enum http_status)status);
}

/* A bounded string builder on the stack: cheaper than snprintf on the
 * /plaintext path, where the head is most of the work. */
typedef struct pd_sb_s {
    char *p;
    char *end;
    bool overflow;
} pd_sb_t;

static void pd_sb_str(pd_sb_t *sb, const char *s, size_t n)
{
    if (sb->overflow || (size_t)(sb->end - sb->p) < n) {
        sb->overflow = true;
        return;
    }
    memcpy(sb->p, s, n);
    sb->p += n;
}

#define PD_SB_LIT(sb, lit) pd_sb_str((sb), (lit), sizeof(lit) - 1)

static void pd_sb_u64(pd_sb_t *sb, uint64_t v)
{
    char tmp[24];
    char *t = tmp + sizeof(tmp);

    do {
        *--t = (char)('0' + v % 10);
        v /= 10;
    } while (v > 0);
    pd_sb_str(sb, t, (size_t)(tmp + sizeof(tmp) - t));
}

int pd_http_write_head(struct evbuffer *out, int status, const char *ctype,
                       uint64_t content_length, bool keep_alive, bool http10,
                       bool more_lines)
{
    char buf[512];
    pd_sb_t sb = {buf, buf + sizeof(buf), false};
    const char *reason = pd_http_reason(status);

    PD_SB_LIT(&sb, "HTTP/1.1 ");
    pd_sb_u64(&sb, (uint64_t)status);
    PD_SB_LIT(&sb, " ");
    pd_sb_str(&sb, reason, strlen(reason));
    PD_SB_LIT(&sb, "\r\nServer: poold\r\nDate: ");
    pd_sb_str(&sb, pd_date_buf, 29);
    if (ctype != NULL) {
        PD_SB_LIT(&sb, "\r\nContent-Type: ");
        pd_sb_str(&sb, ctype, strlen(ctype));
    }
    PD_SB_LIT(&sb, "\r\nContent-Length: ");
    pd_sb_u64(&sb, content_length);
    if (!keep_alive)
        PD_SB_LIT(&sb, "\r\nConnection: close");
    else if (http10)
        PD_SB_LIT(&sb, "\r\nConnection: keep-alive");
    if (more_lines)
        PD_SB_LIT(&sb, "\r\n");
    else
        PD_SB_LIT(&sb, "\r\n\r\n");
    if (sb.overflow)
        return PD_ERROR;
    return evbuffer_add(out, buf, (size_t)(sb.p - buf)) == 0 ? PD_OK : PD_ERROR;
}

int pd_http_write_error(struct evbuffer *out, int status, bool head_only)
{
    char body[64];
    int n = snprintf(body, sizeof(body), "%d %s\n", status, pd_http_reason(status));

    if (pd_http_write_head(out, status, "text/plain", (uint64_t)n, false, false,
                           false) != PD_OK)
        return PD_ERROR;
    if (!head_only && evbuffer_add(out, body, (size_t)n) != 0)
        return PD_ERROR;
    return PD_OK;
}

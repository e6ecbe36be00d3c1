/* SPDX-License-Identifier: BSD-2-Clause */
/* poold — one client connection.
 *
 * A connection reads into its input buffer, answers every complete request
 * found there in order (pipelining), and writes all the responses one read
 * produced with a single writev: the responses accumulate in the output
 * buffer and pd_conn_flush runs once per read.  Memory per connection is
 * bounded: reading stops while the output holds PD_OUT_HIGH bytes the client
 * has not taken, a head may not outgrow --max-header, and bodies are framed
 * and discarded as they arrive, never buffered.
 *
 * States: HEAD (waiting for a complete request head; idle between requests),
 * BODY (discarding a request body, which must keep to its deadline and
 * --body-min-rate however steadily it trickles; its response waits in
 * `pending`), LINGER (response sent, write side shut down, draining what
 * the client still sends so that the kernel does not reset the connection
 * before the client has read the response).  One timer serves all states.
 *
 * Not a bufferevent, although libevent's has watermarks and timeouts.  Two
 * of our timers are deadlines that a trickling client must not push back
 * (the header timeout, the body's), which its timeouts, re-armed by every
 * read, cannot be; and reading stops on the output backlog (PD_OUT_HIGH,
 * resumed below PD_OUT_LOW), where its read watermark watches the input.
 * The rest (the idle and send timeouts, the low watermark) is done here for
 * speed: a bufferevent writes only from its write event, a loop turn later,
 * and asks FIONREAD before each read.  Two minimal libevent servers sending
 * /plaintext's response to each request, one on bufferevent_socket, one
 * doing its I/O as this file does, under wrk -t1 -c50 -d3s (server and
 * client on CPUs of their own, perf stat on the server, medians of three):
 * 5.1 system calls per request instead of 2.5 (an ioctl per read, an
 * epoll_ctl to add and one to remove the write event per response), and
 * 8.8 us of server CPU per request instead of 6.4.
 *
 * With --request-region /heavy allocates from the worker's region, which is
 * reset after every dispatch: requests are answered one at a time, so one
 * region serves them all, and its kept blocks (up to 64 KiB) stay hot in
 * the cache instead of one cold region per connection.
 */
#include "config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/event_struct.h>

#include "poold.h"

#define PD_READ_SIZE 16384
/* Stop reading while this much output waits for a slow reader; resume
 * once it has drained below PD_OUT_LOW. */
#define PD_OUT_HIGH (256 * 1024)
#define PD_OUT_LOW (64 * 1024)
/* How long a closing connection drains the client's leftovers. */
#define PD_LINGER_SEC 1
/* How long a stopping worker keeps an idle connection (counted from when
 * it went idle) for one more request, answered with "Connection: close".
 * A client between two requests sends the next within microseconds; one
 * that has said nothing for a second is closed, as it would be at
 * --idle-timeout, and risks what that risks. */
#define PD_STOP_IDLE_USEC 1000000

enum { C_HEAD, C_BODY, C_LINGER };

struct pd_conn_s {
    pd_worker_t *w;
    pd_conn_t *prev;            /* the worker's list of connections */
    pd_conn_t *next;
    TAILQ_ENTRY(pd_conn_s) idle_link;   /* the worker's idle queue, oldest first */
    bool idle;                  /* in the idle queue */
    struct timeval idle_since;  /* when it went idle (valid while idle) */
    uint64_t idle_round;        /* the worker's accept round it went idle in */
    int fd;
    int state;                  /* C_HEAD, C_BODY or C_LINGER */
    bool in_request;            /* HEAD: the header deadline is running */
    bool closing;               /* no more requests: flush, then linger */
    bool reading;               /* rev is added */
    bool writing;               /* wev is added: the socket is full */
    bool keep_alive;            /* BODY: may the connection stay open after */
    bool head_only;             /* BODY: a HEAD request */
    struct timeval deadline;    /* HEAD: when the header timeout fires;
                                   BODY: --body-timeout after the head */
    pd_head_scan_t scan;        /* HEAD: how far the head has been looked at */
    uint64_t body_left;         /* BODY with Content-Length */
    uint64_t body_in;           /* BODY: bytes of it taken, framing included */
    bool chunked;               /* BODY with Transfer-Encoding: chunked */
    pd_chunked_t ck;
    struct evbuffer *in;
    struct evbuffer *out;
    struct evbuffer *pending;   /* BODY: the response, sent after the body */
    struct event rev;
    struct event wev;
    struct event tev;
    http_parser parser;
};

static void pd_conn_on_read(evutil_socket_t fd, short what, void *arg);
static void pd_conn_on_write(evutil_socket_t fd, short what, void *arg);
static void pd_conn_on_timer(evutil_socket_t fd, short what, void *arg);
static void pd_conn_process(pd_conn_t *c);

/* ======================================================================== */
/* Events and timers                                                         */
/* ======================================================================== */

static void pd_conn_set_reading(pd_conn_t *c, bool on)
{
    if (on && !c->reading)
        event_add(&c->rev, NULL);
    else if (!on && c->reading)
        event_del(&c->rev);
    c->reading = on;
}

static void pd_conn_set_writing(pd_conn_t *c, bool on)
{
    if (on && !c->writing)
        event_add(&c->wev, NULL);
    else if (!on && c->writing)
        event_del(&c->wev);
    c->writing = on;
}

static void pd_conn_arm(pd_conn_t *c, const struct timeval *tv)
{
    event_add(&c->tev, tv);
}

/* ======================================================================== */
/* The idle queue                                                            */
/* ======================================================================== */

/* A connection is idle while it waits for a request with nothing of one
 * read and nothing to write: between keep-alive requests, or silent since
 * accept.  Closing it loses no work, so at --max-conns the longest idle
 * make room for new clients (nginx's reusable connections).  The queue is
 * in the order connections went idle: its head has waited longest. */
static void pd_conn_idle_remove(pd_conn_t *c)
{
    pd_worker_t *w = c->w;

    if (!c->idle)
        return;
    TAILQ_REMOVE(&w->idle, c, idle_link);
    c->idle = false;
    w->nidle--;
}

/* Queue c at the tail if it is idle now, out of the queue if not. */
static void pd_conn_idle_update(pd_conn_t *c)
{
    pd_worker_t *w = c->w;

    pd_conn_idle_remove(c);
    if (c->state != C_HEAD || c->closing || c->writing || evbuffer_get_length(c->in) > 0 ||
        evbuffer_get_length(c->out) > 0)
        return;
    TAILQ_INSERT_TAIL(&w->idle, c, idle_link);
    c->idle = true;
    w->nidle++;
    event_base_gettimeofday_cached(w->base, &c->idle_since);
    c->idle_round = w->accept_round;
    if (w->stopping) {
        static const struct timeval grace = {0, PD_STOP_IDLE_USEC};

        pd_conn_arm(c, &grace);
    }
}

int pd_conn_drain_idle(pd_worker_t *w)
{
    /* As nginx's ngx_drain_connections: an eighth of the idle ones, 1 to
     * 32, so that a stream of new clients does not pay a close each. */
    int n = w->nidle / 8 < 1 ? 1 : w->nidle / 8 > 32 ? 32 : w->nidle / 8;
    int closed = 0;

    /* Not one that went idle since this accept round began, such as one
     * just accepted: its request may be waiting to be read.  Under wrk
     * -c10000 against a cap of 2 x 1024, closing those too made the
     * workers close what they had just accepted, unread (50 reads for
     * 2000 accepts a second). */
    while (closed < n && !TAILQ_EMPTY(&w->idle) &&
           TAILQ_FIRST(&w->idle)->idle_round != w->accept_round) {
        pd_conn_close(TAILQ_FIRST(&w->idle));
        closed++;
    }
    if (closed > 0 && pd_log_enabled(PD_LOG_TRACE))
        pd_log(PD_LOG_TRACE, 0, "at --max-conns: closed %d idle connections", closed);
    return closed;
}

static void pd_conn_start_request(pd_conn_t *c)
{
    struct timeval now;

    event_base_gettimeofday_cached(c->w->base, &now);
    timeradd(&now, &c->w->cfg->header_timeout, &c->deadline);
    c->in_request = true;
    memset(&c->scan, 0, sizeof(c->scan));
}

/* BODY: the deadline, pushed back by a second for every --body-min-rate
 * bytes the body has brought, so that only a body slower than that on
 * average runs into it (0: the deadline stays where it is). */
static void pd_conn_body_deadline(const pd_conn_t *c, struct timeval *at)
{
    uint64_t rate = c->w->cfg->body_min_rate;
    struct timeval credit = {0, 0};

    if (rate > 0) {
        uint64_t sec = c->body_in / rate;

        /* Far beyond any timer, and clear of time_t's end. */
        credit.tv_sec = sec > INT32_MAX ? INT32_MAX : (time_t)sec;
        credit.tv_usec = (suseconds_t)(c->body_in % rate * 1000000 / rate);
    }
    timeradd(&c->deadline, &credit, at);
}

/* Arm the timer for the state the connection is in now. */
static void pd_conn_update_timer(pd_conn_t *c)
{
    const struct timeval *idle = &c->w->cfg->idle_timeout;
    struct timeval now, at, left;

    if (c->state == C_LINGER || c->writing)
        return;     /* armed when lingering / on write progress */
    if (c->state == C_HEAD && !c->in_request) {
        pd_conn_arm(c, idle);
        return;
    }
    if (c->state == C_BODY)
        pd_conn_body_deadline(c, &at);
    else
        at = c->deadline;
    event_base_gettimeofday_cached(c->w->base, &now);
    if (timercmp(&at, &now, >))
        timersub(&at, &now, &left);
    else
        timerclear(&left);
    /* A body may also pause no longer than a client may idle. */
    if (c->state == C_BODY && timercmp(&left, idle, >))
        left = *idle;
    pd_conn_arm(c, &left);
}

/* ======================================================================== */
/* Open and close                                                            */
/* ======================================================================== */

int pd_conn_open(pd_worker_t *w, int fd)
{
    pd_conn_t *c = calloc(1, sizeof(*c));

    if (c == NULL)
        goto fail;
    c->in = evbuffer_new();
    c->out = evbuffer_new();
    if (c->in == NULL || c->out == NULL)
        goto fail;
    c->w = w;
    c->fd = fd;
    c->state = C_HEAD;
    event_assign(&c->rev, w->base, fd, EV_READ | EV_PERSIST, pd_conn_on_read, c);
    event_assign(&c->wev, w->base, fd, EV_WRITE | EV_PERSIST, pd_conn_on_write, c);
    evtimer_assign(&c->tev, w->base, pd_conn_on_timer, c);

    c->next = w->conns;
    if (w->conns != NULL)
        w->conns->prev = c;
    w->conns = c;
    w->nconns++;
    pd_stat_add(&w->stats->xconnections, 1);

    /* The first request's header deadline runs from accept: a client that
     * connects and says nothing is a slow client too. */
    pd_conn_start_request(c);
    pd_conn_set_reading(c, true);
    pd_conn_update_timer(c);
    pd_conn_idle_update(c);
    return PD_OK;

fail:
    pd_log(PD_LOG_WARN, ENOMEM, "cannot take a connection");
    if (c != NULL) {
        if (c->in != NULL)
            evbuffer_free(c->in);
        if (c->out != NULL)
            evbuffer_free(c->out);
        free(c);
    }
    close(fd);
    return PD_ERROR;
}

void pd_conn_close(pd_conn_t *c)
{
    pd_worker_t *w = c->w;

    event_del(&c->rev);
    event_del(&c->wev);
    event_del(&c->tev);
    pd_conn_idle_remove(c);
    close(c->fd);
    evbuffer_free(c->in);
    evbuffer_free(c->out);
    if (c->pending != NULL)
        evbuffer_free(c->pending);
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        w->conns = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    w->nconns--;
    pd_stat_sub(&w->stats->xconnections, 1);
    free(c);
}

/* Everything is sent: stop writing, keep draining the client briefly.
 * Returns PD_ERROR when c was closed. */
static int pd_conn_linger(pd_conn_t *c)
{
    static const struct timeval linger = {PD_LINGER_SEC, 0};

    if (shutdown(c->fd, SHUT_WR) != 0) {
        pd_conn_close(c);
        return PD_ERROR;
    }
    c->state = C_LINGER;
    evbuffer_drain(c->in, evbuffer_get_length(c->in));
    pd_conn_set_reading(c, true);
    pd_conn_arm(c, &linger);
    return PD_OK;
}

/* Write what is queued.  Returns PD_ERROR when c was closed. */
static int pd_conn_flush(pd_conn_t *c)
{
    while (evbuffer_get_length(c->out) > 0) {
        int n = evbuffer_write(c->out, c->fd);

        if (n > 0) {
            pd_stat_add(&c->w->stats->xbytes_out, (uint64_t)n);
            continue;
        }
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
            if (!c->writing) {
                pd_conn_set_writing(c, true);
                /* Send timeout: a client that stops reading is dropped. */
                pd_conn_arm(c, &c->w->cfg->idle_timeout);
            }
            return PD_OK;
        }
        if (pd_log_enabled(PD_LOG_TRACE))
            pd_log(PD_LOG_TRACE, errno, "fd %d: write failed", c->fd);
        pd_conn_close(c);
        return PD_ERROR;
    }
    pd_conn_set_writing(c, false);
    if (c->closing && c->state != C_LINGER)
        return pd_conn_linger(c);
    return PD_OK;
}

/* ======================================================================== */
/* Requests                                                                  */
/* ======================================================================== */

/* Answer with an error status and close the connection. */
static void pd_conn_reject(pd_conn_t *c, int status, bool head_only)
{
    if (c->pending != NULL)
        evbuffer_drain(c->pending, evbuffer_get_length(c->pending));
    pd_stat_add(&c->w->stats->xrequests, 1);
    if (pd_http_write_error(c->out, status, head_only) != PD_OK)
        pd_log(PD_LOG_WARN, ENOMEM, "fd %d: cannot queue a %d response", c->fd, status);
    if (pd_log_enabled(PD_LOG_TRACE))
        pd_log(PD_LOG_TRACE, 0, "fd %d: rejected with %d", c->fd, status);
    c->closing = true;
    c->state = C_HEAD;
    c->in_request = false;
}

/* A request is fully answered: wait for the next one, or close. */
static void pd_conn_request_done(pd_conn_t *c, bool keep_alive)
{
    c->state = C_HEAD;
    if (!keep_alive) {
        c->closing = true;
        c->in_request = false;
    } else if (evbuffer_get_length(c->in) > 0) {
        pd_conn_start_request(c);
    } else {
        c->in_request = false;
    }
}

/* Try to take a request head off the input.  Returns PD_OK when progress
 * was made (the caller loops), PD_AGAIN when more input is needed, PD_ERROR
 * when c is gone. */
static int pd_conn_read_head(pd_conn_t *c)
{
    pd_worker_t *w = c->w;
    pd_request_t *req = &w->req;    /* used only until this head is drained */
    const pd_limits_t lim = {w->cfg->max_header, w->cfg->max_body};
    size_t avail = evbuffer_get_length(c->in);
    size_t want = avail < lim.max_header ? avail : lim.max_header;
    pd_route_ctx_t ctx;
    struct evbuffer *dst;
    struct timeval now;
    const char *buf;
    size_t hlen;
    bool has_body;
    int status;
    int rc;

    buf = (const char *)evbuffer_pullup(c->in, (ev_ssize_t)want);
    if (buf == NULL)
        return PD_AGAIN;
    if (!c->in_request)
        pd_conn_start_request(c);

    /* RFC 9112 2.2: ignore empty lines before a request line (the scan
     * would refuse their CR). */
    if (buf[0] == '\r') {
        if (want < 2)
            return PD_AGAIN;
        if (buf[1] == '\n') {
            evbuffer_drain(c->in, 2);
            return PD_OK;
        }
    }

    rc = pd_http_scan_head(buf, want, &lim, &c->scan, &hlen, &status);
    if (rc == PD_AGAIN)
        return PD_AGAIN;
    if (rc == PD_OK)
        status = pd_http_parse_head(req, &c->parser, buf, hlen, &lim);
    if (status != 0) {
        pd_conn_reject(c, status, want > 5 && memcmp(buf, "HEAD ", 5) == 0);
        return PD_OK;
    }

    pd_stat_add(&w->stats->xrequests, 1);
    ctx.worker_index = w->index;
    ctx.pid = w->pid;
    ctx.tid = w->tid;
    ctx.keep_alive = req->keep_alive && !w->stopping;
    ctx.region = w->region;
    has_body = req->chunked || req->content_length > 0;
    dst = c->out;
    if (has_body) {
        /* The response waits for the body: should the body turn out to be
         * malformed, only the 400 may go out. */
        if (c->pending == NULL && (c->pending = evbuffer_new()) == NULL) {
            pd_conn_close(c);
            return PD_ERROR;
        }
        dst = c->pending;
        if (req->expect_continue &&
            evbuffer_add(c->out, "HTTP/1.1 100 Continue\r\n\r\n", 25) != 0) {
            pd_conn_close(c);
            return PD_ERROR;
        }
    }
    rc = pd_route_dispatch(req, &ctx, dst, &status);
    /* The response is in dst by now: nothing points into the region. */
    if (w->region != NULL)
        pd_region_reset(w->region);
    if (rc != PD_OK) {
        /* A half-written response cannot be taken back out of the buffer. */
        pd_log(PD_LOG_WARN, ENOMEM, "fd %d: cannot build a response", c->fd);
        pd_conn_close(c);
        return PD_ERROR;
    }
    if (status == 500) {
        pd_log(PD_LOG_WARN, ENOMEM, "fd %d: out of memory, answered 500", c->fd);
        ctx.keep_alive = false;     /* the 500 said "Connection: close" */
    }
    if (pd_log_enabled(PD_LOG_TRACE))
        pd_log(PD_LOG_TRACE, 0, "fd %d: %s %.*s", c->fd,
               http_method_str((enum http_method)req->method),
               (int)req->target_len, req->target);
    evbuffer_drain(c->in, hlen);
    memset(&c->scan, 0, sizeof(c->scan));

    if (!has_body) {
        pd_conn_request_done(c, ctx.keep_alive);
        return PD_OK;
    }
    c->state = C_BODY;
    event_base_gettimeofday_cached(w->base, &now);
    timeradd(&now, &w->cfg->body_timeout, &c->deadline);
    c->body_in = 0;
    c->keep_alive = ctx.keep_alive;
    c->head_only = req->method == HTTP_HEAD;
    c->chunked = req->chunked;
    c->body_left = req->content_length;
    memset(&c->ck, 0, sizeof(c->ck));
    return PD_OK;
}

/* Discard body bytes; returns as pd_conn_read_head does. */
static int pd_conn_read_body(pd_conn_t *c)
{
    size_t avail = evbuffer_get_length(c->in);
    int status = 0;
    int rc;

    if (avail == 0)
        return PD_AGAIN;
    if (!c->chunked) {
        size_t n = avail < c->body_left ? avail : (size_t)c->body_left;

        evbuffer_drain(c->in, n);
        c->body_left -= n;
        c->body_in += n;
        if (c->body_left > 0)
            return PD_OK;
    } else {
        struct evbuffer_iovec v;
        size_t used;

        if (evbuffer_peek(c->in, -1, NULL, &v, 1) < 1)
            return PD_AGAIN;
        rc = pd_chunked_feed(&c->ck, v.iov_base, v.iov_len, c->w->cfg->max_body,
                             c->w->cfg->max_header, &used, &status);
        evbuffer_drain(c->in, used);
        c->body_in += used;
        if (rc == PD_ERROR) {
            pd_conn_reject(c, status, c->head_only);
            return PD_OK;
        }
        if (rc == PD_AGAIN)
            return PD_OK;   /* the next piece of the input, if any */
    }
    if (evbuffer_add_buffer(c->out, c->pending) != 0) {
        pd_conn_close(c);
        return PD_ERROR;
    }
    pd_conn_request_done(c, c->keep_alive);
    return PD_OK;
}

/* Answer everything complete in the input, then write once.  When the
 * output backlog stopped the answering and the write then took all of it,
 * go on with the rest of the input: no event would come to resume it. */
static void pd_conn_process(pd_conn_t *c)
{
    for (;;) {
        bool backlog = false;

        while (!c->closing && c->state != C_LINGER) {
            int rc;

            if (evbuffer_get_length(c->out) >= PD_OUT_HIGH) {
                backlog = true;     /* the client is not reading: wait */
                break;
            }
            if (evbuffer_get_length(c->in) == 0)
                break;
            rc = c->state == C_HEAD ? pd_conn_read_head(c) : pd_conn_read_body(c);
            if (rc == PD_ERROR)
                return;
            if (rc == PD_AGAIN)
                break;
        }
        if (c->state != C_LINGER)
            pd_conn_set_reading(c, !c->closing && !backlog);
        pd_conn_update_timer(c);
        if (pd_conn_flush(c) != PD_OK)
            return;
        if (!backlog || c->writing || c->closing || c->state == C_LINGER) {
            pd_conn_idle_update(c);
            return;
        }
    }
}

/* ======================================================================== */
/* Callbacks                                                                 */
/* ======================================================================== */

/* Read once into the input buffer.  evbuffer_read would first ask the
 * kernel how much is pending (an ioctl per read); one contiguous extent of
 * PD_READ_SIZE needs no such question and keeps a head in one piece. */
static ssize_t pd_conn_read(pd_conn_t *c)
{
    struct evbuffer_iovec v;
    ssize_t n;

    if (evbuffer_reserve_space(c->in, PD_READ_SIZE, &v, 1) != 1) {
        errno = ENOMEM;
        return -1;
    }
    n = read(c->fd, v.iov_base, v.iov_len);
    if (n <= 0)
        return n;
    v.iov_len = (size_t)n;
    if (evbuffer_commit_space(c->in, &v, 1) != 0) {
        errno = ENOMEM;
        return -1;
    }
    return n;
}

static void pd_conn_on_read(evutil_socket_t fd, short what, void *arg)
{
    pd_conn_t *c = arg;
    ssize_t n;

    if (c->state == C_LINGER) {
        char sink[4096];
        ssize_t r = read(fd, sink, sizeof(sink));

        if (r > 0)
            pd_stat_add(&c->w->stats->xbytes_in, (uint64_t)r);
        else if (r == 0 || (errno != EAGAIN && errno != EINTR))
            pd_conn_close(c);
        return;
    }
    n = pd_conn_read(c);
    if (n < 0) {
        if (errno == EAGAIN || errno == EINTR)
            return;
        if (pd_log_enabled(PD_LOG_TRACE))
            pd_log(PD_LOG_TRACE, errno, "fd %d: read failed", c->fd);
        pd_conn_close(c);
        return;
    }
    if (n == 0) {
        /* The client is done sending: answer what is complete, then close.
         * Nothing more will come, so a partial request is dropped. */
        c->closing = true;
        pd_conn_set_reading(c, false);
        if (evbuffer_get_length(c->out) == 0) {
            pd_conn_close(c);
            return;
        }
        pd_conn_flush(c);
        return;
    }
    pd_stat_add(&c->w->stats->xbytes_in, (uint64_t)n);
    /* Busy until answered: back in the queue, at its tail, after. */
    pd_conn_idle_remove(c);
    pd_conn_process(c);
}

static void pd_conn_on_write(evutil_socket_t fd, short what, void *arg)
{
    pd_conn_t *c = arg;
    size_t before = evbuffer_get_length(c->out);

    if (pd_conn_flush(c) != PD_OK)
        return;
    if (c->state == C_LINGER)
        return;
    if (c->writing) {
        if (evbuffer_get_length(c->out) < before)
            pd_conn_arm(c, &c->w->cfg->idle_timeout);
        if (evbuffer_get_length(c->out) >= PD_OUT_LOW)
            return;
    }
    /* The backlog has drained: answer what was left unread, read again. */
    if (!c->closing)
        pd_conn_process(c);
    else
        pd_conn_update_timer(c);
}

static void pd_conn_on_timer(evutil_socket_t fd, short what, void *arg)
{
    pd_conn_t *c = arg;

    if (c->writing || c->state == C_LINGER || c->closing) {
        pd_conn_close(c);   /* a client that does not read, or is gone */
        return;
    }
    if (c->state == C_BODY || (c->in_request && evbuffer_get_length(c->in) > 0)) {
        if (pd_log_enabled(PD_LOG_TRACE))
            pd_log(PD_LOG_TRACE, 0, "fd %d: request timed out", c->fd);
        pd_conn_reject(c, 408, false);
        pd_conn_set_reading(c, false);
        pd_conn_flush(c);
        return;
    }
    pd_conn_close(c);       /* idle, or connected and silent */
}

/* Worker shutdown for one connection.  A request in progress, or a
 * response still being written, goes on: the worker answers no request
 * from now on without "Connection: close".  An idle connection is closed
 * once it has been idle PD_STOP_IDLE_USEC; until then its next request is
 * answered, so that a client between two requests loses none (nginx closes
 * idle connections at once, and resets the requests already on their
 * way). */
static void pd_conn_shutdown(pd_conn_t *c)
{
    static const struct timeval grace = {0, PD_STOP_IDLE_USEC};
    struct timeval now, end, left;

    if (!c->idle)
        return;
    event_base_gettimeofday_cached(c->w->base, &now);
    timeradd(&c->idle_since, &grace, &end);
    if (!timercmp(&end, &now, >)) {
        pd_conn_close(c);
        return;
    }
    timersub(&end, &now, &left);
    pd_conn_arm(c, &left);
}

void pd_conn_shutdown_all(pd_worker_t *w)
{
    pd_conn_t *c = w->conns;

    while (c != NULL) {
        pd_conn_t *next = c->next;

        pd_conn_shutdown(c);
        c = next;
    }
}

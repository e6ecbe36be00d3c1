/* SPDX-License-Identifier: BSD-2-Clause */
/* poold — declarations shared by the server's translation units.
 *
 * The server is a master (master.c) that forks worker processes (worker.c);
 * a worker is one libevent loop over its connections (conn.c), which frame
 * requests (http.c) and answer them (routes.c, with the heads of response.c
 * and /heavy's map in heavy.c).  With -w N each of N processes runs one
 * worker; with --threads N one process runs N workers, a thread each, on
 * the same code.  config.c parses the command line, log.c formats every
 * log line, alloc.c is the only door to the pool, srvstats.c holds the
 * per-worker counters shared with every process; region.c is the
 * per-request region allocator (region.h).
 *
 * Every function is named pd_..., static ones too (pd_conn_flush is
 * conn.c's own): a name says it is the server's, its linkage says who may
 * call it.  Server functions return PD_OK, PD_ERROR or PD_AGAIN; those
 * that judge a request return the HTTP status to answer it with (0: none).
 */
#ifndef PD_POOLD_H
#define PD_POOLD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/types.h>

#include <http_parser.h>

#include "region.h"

struct evbuffer;

/* Return codes of server functions. */
#define PD_OK     0
#define PD_ERROR (-1)
#define PD_AGAIN (-2)   /* not done yet: call again with more input */

/* Workers in all, processes or threads: one listening socket and one stats
 * slot each. */
#define PD_MAX_WORKERS 256
/* A request head may hold at most this many header fields (more → 431). */
#define PD_MAX_HEADERS 128

/* ------------------------------------------------------------------------ */
/* config.c                                                                  */
/* ------------------------------------------------------------------------ */

typedef struct pd_config_s {
    int workers;                    /* -w: worker processes, 1..PD_MAX_WORKERS
                                       (1 with --threads) */
    int threads;                    /* --threads: workers per process, each a
                                       thread; 0: one, the process itself */
    int port;                       /* -p: 0 asks the kernel for a port */
    char bind[64];                  /* -b as given (an IPv4 or IPv6 literal) */
    struct sockaddr_storage addr;   /* bind and port, ready for bind(2) */
    socklen_t addrlen;
    bool pin;                       /* false with --no-pin */
    size_t heap_size;               /* --heap-size, bytes */
    size_t max_header;              /* --max-header, bytes */
    uint64_t max_body;              /* --max-body, bytes */
    int max_conns;                  /* --max-conns, per worker */
    struct timeval header_timeout;  /* --header-timeout */
    struct timeval idle_timeout;    /* --idle-timeout */
    struct timeval body_timeout;    /* --body-timeout */
    uint64_t body_min_rate;         /* --body-min-rate, bytes a second */
    struct timeval shutdown_timeout;/* --shutdown-timeout */
    bool request_region;            /* --request-region: /heavy bumps in a
                                       per-request region */
    size_t region_block;            /* --region-block, bytes */
    int verbose;                    /* number of -v */
} pd_config_t;

typedef enum pd_config_result_e {
    PD_CONFIG_RUN,      /* start the server with *cfg */
    PD_CONFIG_HELP,     /* -h: print pd_config_usage() to stdout, exit 0 */
    PD_CONFIG_VERSION,  /* -V: print the version, exit 0 */
    PD_CONFIG_ERROR     /* err holds one line without "poold: " or newline */
} pd_config_result_t;

/* Fill *cfg with the defaults, then apply argv (getopt_long, so optind is
 * reset first and argv may be permuted).  Never prints and never exits: the
 * caller reports.  On PD_CONFIG_ERROR err (NUL-terminated, truncated to cap)
 * says what is wrong, e.g. "invalid value '12x' for -w: expected an integer
 * from 1 to 256". */
pd_config_result_t pd_config_parse(pd_config_t *cfg, int argc, char **argv,
                                   char *err, size_t cap);

/* Workers each worker process runs: --threads, or 1. */
static inline int pd_config_threads(const pd_config_t *cfg)
{
    return cfg->threads > 0 ? cfg->threads : 1;
}

/* Workers in all: processes times threads. */
static inline int pd_config_nworkers(const pd_config_t *cfg)
{
    return cfg->workers * pd_config_threads(cfg);
}

/* Write the usage text (every option with its default) to out. */
void pd_config_usage(FILE *out);

/* Parse a size with an optional K, M or G suffix (powers of 1024) into *out.
 * Digits only (no sign, no blanks); fails on overflow.  Returns PD_OK or
 * PD_ERROR. */
int pd_parse_size(const char *s, uint64_t *out);

/* Parse seconds with an optional fraction ("0.5", at most 6 decimals) into
 * *out.  Returns PD_OK or PD_ERROR; the range is the caller's to check. */
int pd_parse_seconds(const char *s, struct timeval *out);

/* Format cfg's bind address and the given port as "127.0.0.1:8080" or
 * "[::1]:8080" into buf. */
void pd_config_format_addr(const pd_config_t *cfg, int port, char *buf, size_t cap);

/* ------------------------------------------------------------------------ */
/* log.c                                                                     */
/* ------------------------------------------------------------------------ */

typedef enum pd_log_level_e {
    PD_LOG_ERROR,
    PD_LOG_WARN,
    PD_LOG_INFO,
    PD_LOG_DEBUG,   /* shown with -v */
    PD_LOG_TRACE    /* shown with -vv, printed as "debug": per connection */
} pd_log_level_t;

/* Show levels up to INFO plus one more per -v. */
void pd_log_set_verbosity(int verbose);

/* True when a line at this level would be printed (to skip costly
 * formatting). */
bool pd_log_enabled(pd_log_level_t level);

/* Write one line "poold[PID]: LEVEL: message" to stderr with one write(2),
 * so lines of several processes never interleave.  A non-zero err appends
 * ": <strerror(err)>".  Lines longer than 4 KiB are truncated.  errno is
 * preserved. */
void pd_log(pd_log_level_t level, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ------------------------------------------------------------------------ */
/* alloc.c — the only place that knows whether the pool is linked            */
/* ------------------------------------------------------------------------ */

/* "glibc", or the pool's name when it is linked. */
const char *pd_alloc_name(void);

/* True when the pool is linked (the start-up line then names the heap). */
bool pd_alloc_is_pool(void);

/* Master, before fork: reserve the pool's arena of heap bytes.  No-op
 * without the pool.  Returns PD_OK, or PD_ERROR after logging one line. */
int pd_alloc_create(size_t heap);

/* Worker, first thing after fork: serve malloc from the shared arena.  No-op
 * without the pool.  Returns PD_OK, or PD_ERROR after logging one line. */
int pd_alloc_attach(void);

/* The allocator's /stats section as one JSON object, snprintf-style: returns
 * the length needed; buf is NUL-terminated when cap > 0. */
size_t pd_alloc_stats_json(char *buf, size_t cap);

/* Master, after waitpid() collected worker pid: give back what it held in
 * the pool (its caches, its live objects, locks it died holding, repaired
 * at once) and log the report at `level` (WARN when bytes were lost).
 * No-op without the pool.  Returns PD_OK when done (failures that a retry
 * cannot mend are logged and count as done), PD_ERROR when a live process
 * holds a pool lock too long: call again later, never block on it. */
int pd_alloc_reap(pid_t pid, pd_log_level_t level);

/* The pid of a process holding a pool lock for at least ms milliseconds,
 * or 0 (always 0 without the pool).  A hint: read without locks. */
pid_t pd_alloc_stalled(unsigned ms);
/* Give back the pages that stayed free through a decay period, once one
 * has ended: the master's part in the pool's housekeeping, since workers
 * that serve from their caches alone may never end one.  Returns PD_OK, or
 * PD_AGAIN when a live process held the page-heap lock for 200 ms (a
 * stuck holder: nothing was done; call again later, never block on it). */
int pd_alloc_decay(void);
/* Give three quarters of the calling worker's thread cache back, and its
 * quiet classes' kept empty spans: the worker's part, once a second, so
 * that a burst's memory leaves a worker that has gone quiet. */
void pd_alloc_scavenge(void);

/* ------------------------------------------------------------------------ */
/* srvstats.c — per-worker counters in memory shared by all processes        */
/* ------------------------------------------------------------------------ */

/* One worker's counters.  Only that worker writes them; every process may
 * read them, so all access goes through relaxed atomics. */
typedef struct pd_wstats_sh_s {
    int32_t xpid;           /* 0 while the slot has no worker ready to serve */
    int32_t index;
    int32_t xtid;           /* the worker's thread (its pid with -w) */
    uint64_t xrequests;     /* requests answered (any status) */
    uint64_t xconnections;  /* connections open now */
    uint64_t xbytes_in;
    uint64_t xbytes_out;
} __attribute__((aligned(64))) pd_wstats_sh_t;  /* a cache line each: no false sharing */

/* Master, before fork: map 2n zeroed slots MAP_SHARED, two per worker
 * index: worker i counts in slot i or i + n, whichever its predecessor
 * does not (they overlap across a graceful restart).  Returns PD_OK or
 * PD_ERROR (logged).  A second call replaces the first mapping (tests). */
int pd_stats_create(int n);

/* Number of workers n, 0 before pd_stats_create(); there are 2n slots. */
int pd_stats_count(void);

/* Slot i (0 <= i < 2 * pd_stats_count()). */
pd_wstats_sh_t *pd_stats_slot(int i);

/* A worker ready to serve in slot i (its loop set up): record its
 * process's pid and its thread's id, zero its counters.  The master reads
 * the pid at the process's death to tell a failed start from a killed
 * server. */
void pd_stats_begin(int i, pid_t pid, pid_t tid);

/* The master after slot i's worker died: no pid, no open connections. */
void pd_stats_end(int i);

/* Add n to a counter of the caller's own slot. */
static inline void pd_stat_add(uint64_t *field, uint64_t n)
{
    /* Single writer: a load and a store suffice, no locked RMW needed. */
    __atomic_store_n(field, __atomic_load_n(field, __ATOMIC_RELAXED) + n,
                     __ATOMIC_RELAXED);
}

static inline void pd_stat_sub(uint64_t *field, uint64_t n)
{
    __atomic_store_n(field, __atomic_load_n(field, __ATOMIC_RELAXED) - n,
                     __ATOMIC_RELAXED);
}

/* ------------------------------------------------------------------------ */
/* http.c — request framing on top of http-parser                            */
/* ------------------------------------------------------------------------ */

typedef struct pd_header_s {
    const char *name;       /* points into the request head, not terminated */
    const char *value;      /* OWS trimmed */
    uint32_t nlen;
    uint32_t vlen;
} pd_header_t;

/* What a request head said.  Pointers refer to the head's bytes and are
 * valid only while they stay in the input buffer. */
typedef struct pd_request_s {
    int method;                 /* enum http_method */
    int version_minor;          /* 0 or 1: HTTP/1.x */
    const char *target;         /* request-target as sent */
    size_t target_len;
    const char *path;           /* target without query (absolute form resolved) */
    size_t path_len;
    uint64_t content_length;    /* 0 without Content-Length */
    bool chunked;               /* Transfer-Encoding: chunked */
    bool keep_alive;            /* per version and Connection */
    bool expect_continue;       /* HTTP/1.1 and Expect: 100-continue */
    bool too_many_headers;      /* set by the parser callbacks */
    bool in_value;              /* callback state: last piece was a value */
    unsigned nheaders;
    pd_header_t headers[PD_MAX_HEADERS];
} pd_request_t;

/* Limits the framing enforces (from pd_config_t). */
typedef struct pd_limits_s {
    size_t max_header;
    uint64_t max_body;
} pd_limits_t;

/* How far a head that is still arriving has been looked at, so that one
 * trickling in byte by byte is scanned once.  Zero it for each new head. */
typedef struct pd_head_scan_s {
    size_t searched;    /* bytes searched for the empty line */
    size_t line_ok;     /* bytes of the request line checked */
    bool line_done;     /* the request line is complete and valid */
} pd_head_scan_t;

/* Look at the request head at the start of buf[0..len), which may still be
 * arriving; len == lim->max_header means the input holds at least that
 * much.  Returns PD_OK with *hlen the head's length (request line, fields
 * and the empty line, CRLFs included) once it is complete, for
 * pd_http_parse_head; PD_AGAIN while it is not and its bytes could still
 * begin a request; PD_ERROR with *status as soon as they cannot: 400 for
 * bytes no request line starts with (the first byte of a TLS ClientHello
 * decides it), 501 for a method longer than any known, 505, and at
 * lim->max_header bytes 414 while the request line is not over, 431 when
 * it is. */
int pd_http_scan_head(const char *buf, size_t len, const pd_limits_t *lim,
                      pd_head_scan_t *scan, size_t *hlen, int *status);

/* Validate and parse the complete head buf[0..len) into *req with parser
 * (re-initialised here).  Returns 0 when the request may be served, or the
 * status to reject it with: 400 (malformed, RFC 9112 violations), 413 (body
 * over lim->max_body), 414 (request line over lim->max_header), 417
 * (unknown expectation), 431 (head over lim->max_header or too many
 * fields), 501 (unknown method or transfer coding), 505 (HTTP version
 * other than 1.0 and 1.1). */
int pd_http_parse_head(pd_request_t *req, http_parser *parser,
                       const char *buf, size_t len, const pd_limits_t *lim);

/* Strict chunked body decoder: it only frames and discards the data. */
typedef struct pd_chunked_s {
    int state;
    uint64_t left;      /* data bytes left in the current chunk */
    uint64_t total;     /* data bytes so far */
    unsigned digits;    /* hex digits of the current size */
    size_t line;        /* bytes in the current extension or trailer section */
} pd_chunked_t;

/* Feed len bytes; *used receives how many were consumed.  Returns PD_AGAIN
 * when the body goes on (all len consumed), PD_OK when it ended after *used
 * bytes (the rest belongs to the next request), PD_ERROR with *status 400
 * (framing error) or 413 (data over max_body). */
int pd_chunked_feed(pd_chunked_t *ck, const char *p, size_t len, uint64_t max_body,
                    size_t max_trailer, size_t *used, int *status);

/* ------------------------------------------------------------------------ */
/* response.c — response heads                                               */
/* ------------------------------------------------------------------------ */

/* Refresh the calling thread's cached Date value from now; each worker
 * calls it once a second. */
void pd_http_date_update(time_t now);

/* The calling thread's cached "Sun, 06 Nov 1994 08:49:37 GMT" (29
 * characters). */
const char *pd_http_date(void);

/* The reason phrase of a status code, from http-parser ("<unknown>" for
 * codes it does not know). */
const char *pd_http_reason(int status);

/* Append a response head to out: status line, Server, Date, Content-Type
 * (omitted when ctype is NULL), Content-Length, and Connection when it
 * differs from the default of the request's version (keep-alive for
 * HTTP/1.0, close).  With more_lines the empty line is left out: the caller
 * adds its own field lines and then "\r\n".  Returns PD_OK or PD_ERROR (out
 * of memory). */
int pd_http_write_head(struct evbuffer *out, int status, const char *ctype,
                       uint64_t content_length, bool keep_alive, bool http10,
                       bool more_lines);

/* Append a complete error response (text/plain body naming the status; no
 * body for HEAD requests) that closes the connection. */
int pd_http_write_error(struct evbuffer *out, int status, bool head_only);

/* ------------------------------------------------------------------------ */
/* routes.c                                                                  */
/* ------------------------------------------------------------------------ */

typedef struct pd_route_ctx_s {
    int worker_index;
    pid_t pid;
    pid_t tid;          /* the worker's thread; its pid with -w */
    bool keep_alive;    /* the response may keep the connection */
    pd_region_t *region;    /* --request-region: where /heavy allocates (the
                               caller resets it after the request); NULL:
                               malloc and free */
} pd_route_ctx_t;

/* Answer a parsed request: append the whole response to out, and its
 * status to *status.  Unknown path → 404, a method other than GET and
 * HEAD → 405 with Allow.  /heavy out of memory before it wrote anything →
 * 500 with "Connection: close": the caller must then close the connection
 * once it is sent.  Returns PD_OK, or PD_ERROR when out of memory with a
 * response half written. */
int pd_route_dispatch(const pd_request_t *req, const pd_route_ctx_t *ctx,
                      struct evbuffer *out, int *status);

/* Allocations /heavy makes for a request with nheaders header fields:
 * node, key and value per request header, the bucket array, node, key and
 * value per generated response header, and the render buffer.  The count
 * is the same whether they come from malloc or from ctx->region.  With
 * /heavy?n=K the map holds K times the generated lines (the _SCALED count);
 * plain /heavy is K = 1. */
#define PD_HEAVY_LINES 30
#define PD_HEAVY_MAX_SCALE 1000
#define PD_HEAVY_ALLOCS_SCALED(nheaders, k) \
    (3u * (nheaders) + 1u + 3u * PD_HEAVY_LINES * (k) + 1u)
#define PD_HEAVY_ALLOCS(nheaders) PD_HEAVY_ALLOCS_SCALED(nheaders, 1u)

/* The scale K of a /heavy request: 1 when its target has no query (or an
 * empty one), K for exactly "n=K" with K a decimal from 1 to
 * PD_HEAVY_MAX_SCALE.  Returns PD_OK with *scale set, or PD_ERROR for any
 * other query (the caller answers 400). */
int pd_route_heavy_scale(const pd_request_t *req, unsigned *scale);

/* The /heavy handler at scale K (1..PD_HEAVY_MAX_SCALE); *allocs receives
 * the number of allocations it made (tests compare it with
 * PD_HEAVY_ALLOCS_SCALED), from ctx->region when it is set (which it
 * leaves for the caller to reset), else from malloc, all freed before it
 * returns.  Returns PD_OK, or PD_ERROR out of memory; with nothing
 * appended to out when an allocation of its own failed. */
int pd_route_heavy(const pd_request_t *req, const pd_route_ctx_t *ctx, unsigned scale,
                   struct evbuffer *out, unsigned *allocs);

/* ------------------------------------------------------------------------ */
/* worker.c, conn.c, master.c                                                */
/* ------------------------------------------------------------------------ */

typedef struct pd_conn_s pd_conn_t;

/* One worker's state: a worker process's with -w, a worker thread's with
 * --threads (worker.c owns it, on the stack of the thread that runs it;
 * conn.c reads it). */
typedef struct pd_worker_s {
    const pd_config_t *cfg;
    struct event_base *base;
    int index;                  /* 0..pd_config_nworkers() - 1: its stats slot */
    pid_t pid;
    pid_t tid;                  /* the thread running it (pid with -w) */
    int lfd;                    /* listening socket, -1 once stopping */
    int cpu;                    /* to pin the thread to, -1: not pinned */
    int stop_fd;                /* readable once the worker must stop */
    struct event *accept_ev;
    struct event *date_ev;      /* refreshes the Date cache every second */
    struct event *stop_ev;      /* on stop_fd, once */
    struct event *resume_ev;    /* re-enables accept after EMFILE */
    pd_wstats_sh_t *stats;      /* this worker's slot */
    pd_conn_t *conns;           /* all open connections, doubly linked */
    pd_request_t req;           /* the request being dispatched: one at a
                                   time, so one per worker, not per connection */
    pd_region_t *region;        /* --request-region, else NULL: reset after
                                   every dispatch, so one per worker too, and
                                   its blocks stay hot in the cache */
    TAILQ_HEAD(pd_idle_q, pd_conn_s) idle;  /* idle connections, longest idle first */
    int nconns;                 /* open: conn.c counts them, the worker's
                                   loop watches them go while it stops */
    int nidle;                  /* connections in the idle queue */
    uint64_t accept_round;      /* accept callbacks run so far */
    bool stopping;              /* told to stop: finish and exit */
} pd_worker_t;

/* Everything worker process `proc` does in the child the master forked
 * (master is the master's pid): attach to the allocator, ask for SIGTERM
 * should the master die, close the listening sockets of other processes'
 * workers (lfds holds nlfds, one per worker), then run its workers -- the
 * process itself with -w, a thread each with --threads -- until
 * SIGTERM/SIGINT/SIGQUIT and their connections are done, or
 * --shutdown-timeout after the signal.  Worker j is pinned to
 * cpus[j % ncpus] (ncpus 0: not pinned) and counts in stats slot
 * j + half * nlfds (half 0 or 1: see pd_stats_create).  Called with the
 * master's signals blocked, and leaves them blocked: the stop signals are
 * read from a signalfd.  Returns the process exit status: 1 when a worker
 * could not get going or failed. */
int pd_worker_run(const pd_config_t *cfg, int proc, int half, const int *lfds, int nlfds,
                  const int *cpus, int ncpus, pid_t master);

/* Take over an accepted, non-blocking socket.  Returns PD_OK, or PD_ERROR
 * after closing fd. */
int pd_conn_open(pd_worker_t *w, int fd);

/* At --max-conns: close the longest-idle connections (an eighth of the
 * idle ones, 1 to 32) to make room.  Returns how many it closed, 0 when
 * none was idle. */
int pd_conn_drain_idle(pd_worker_t *w);

/* Close a connection now (worker shutdown, errors). */
void pd_conn_close(pd_conn_t *c);

/* Worker shutdown: requests in progress are answered with "Connection:
 * close"; an idle connection is closed once idle for a second, its next
 * request answered (with close) until then. */
void pd_conn_shutdown_all(pd_worker_t *w);

/* Master: bind (or, started by SIGUSR2, take the old master's sockets),
 * fork, supervise; argv is the command line, run again by SIGUSR2.
 * Returns the process exit status. */
int pd_master_run(const pd_config_t *cfg, char *const *argv);

#endif /* PD_POOLD_H */

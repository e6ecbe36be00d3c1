/* SPDX-License-Identifier: BSD-2-Clause */
/* nreq: exactly N HTTP/1.1 requests over C keep-alive connections.
 *
 * The A/B harness (bench/ab) needs a client whose request count is exact,
 * so that a server-side figure (CPU time, instructions, page faults) can be
 * divided by it; wrk runs for a duration instead.  Every response is parsed
 * far enough to check that its status is 200 and to find where it ends
 * (Content-Length); anything else, a refused connection or an early close
 * makes the run fail.  Requests are written like wrk writes them (request
 * line and Host only) and, with -d D, in batches of D pipelined requests
 * sent once the previous batch is fully answered, as wrk's pipelining
 * script does.  Output: one line `requests=N ok=N bad=B seconds=S`.
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

typedef struct nr_conn_s {
    int fd;
    long quota;      /* requests this connection still has to send */
    long pending;    /* sent, not yet answered */
    size_t out_off;  /* bytes of the current batch already written */
    size_t out_len;  /* bytes in the current batch */
    char *in;        /* received bytes not yet parsed */
    size_t in_len;
    size_t in_cap;
} nr_conn_t;

static const char *nr_prog = "nreq";
static char *nr_request;     /* one request, as text */
static size_t nr_request_len;
static char *nr_batch;       /* nr_depth copies of it */
static long nr_depth = 1;
static long nr_ok, nr_bad;

static void nr_die(const char *msg, int err)
{
    if (err)
        fprintf(stderr, "%s: %s: %s\n", nr_prog, msg, strerror(err));
    else
        fprintf(stderr, "%s: %s\n", nr_prog, msg);
    exit(1);
}

static long nr_number(const char *opt, const char *s, long lo, long hi)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end != '\0' || v < lo || v > hi) {
        fprintf(stderr, "%s: invalid value '%s' for %s: expected an integer from %ld to %ld\n",
                nr_prog, s, opt, lo, hi);
        exit(2);
    }
    return v;
}

static double nr_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Consume every complete response at the head of c->in.  Returns false when
 * the stream cannot be a valid answer (no Content-Length, junk). */
static bool nr_parse(nr_conn_t *c)
{
    size_t off = 0;
    while (c->pending > 0) {
        char *head = c->in + off;
        size_t avail = c->in_len - off;
        char *end = memmem(head, avail, "\r\n\r\n", 4);
        if (end == NULL)
            break;
        size_t head_len = (size_t)(end - head) + 4;
        if (avail < 12 || memcmp(head, "HTTP/1.", 7) != 0)
            return false;
        int status = atoi(head + 9);
        long body = -1;
        for (char *line = memchr(head, '\n', head_len); line != NULL && line < end;
             line = memchr(line + 1, '\n', (size_t)(end - line))) {
            if (strncasecmp(line + 1, "Content-Length:", 15) == 0)
                body = strtol(line + 16, NULL, 10);
        }
        if (body < 0)
            return false;
        if (avail < head_len + (size_t)body)
            break;
        off += head_len + (size_t)body;
        c->pending--;
        if (status == 200)
            nr_ok++;
        else
            nr_bad++;
    }
    memmove(c->in, c->in + off, c->in_len - off);
    c->in_len -= off;
    return true;
}

/* Start the next batch once the previous one is answered. */
static void nr_next_batch(nr_conn_t *c)
{
    if (c->pending > 0 || c->quota == 0 || c->out_len > c->out_off)
        return;
    long n = c->quota < nr_depth ? c->quota : nr_depth;
    c->quota -= n;
    c->pending = n;
    c->out_off = 0;
    c->out_len = (size_t)n * nr_request_len;
}

static bool nr_done(const nr_conn_t *c)
{
    return c->fd < 0 || (c->quota == 0 && c->pending == 0);
}

static int nr_connect(const struct sockaddr_in *sa)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        nr_die("socket", errno);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, (const struct sockaddr *)sa, sizeof *sa) < 0 && errno != EINPROGRESS)
        nr_die("connect", errno);
    return fd;
}

static void nr_usage(FILE *f)
{
    fprintf(f, "usage: %s [-c CONNECTIONS] [-d DEPTH] [-t SECONDS] -n REQUESTS ADDR:PORT PATH\n"
               "Exactly REQUESTS HTTP/1.1 requests, every answer checked for 200; prints\n"
               "requests=N ok=N bad=B seconds=S.\n"
               "  -c  keep-alive connections (default 50)\n"
               "  -d  requests pipelined per batch (default 1)\n"
               "  -t  give up after this many seconds (default 120)\n"
               "  -n  requests in all, spread evenly over the connections\n",
            nr_prog);
}

int main(int argc, char **argv)
{
    long conns = 50, total = -1, limit = 120;
    int opt;

    if (argc == 2 && strcmp(argv[1], "--help") == 0) {
        nr_usage(stdout);
        return 0;
    }
    while ((opt = getopt(argc, argv, "c:d:n:t:h")) != -1) {
        switch (opt) {
        case 'c': conns = nr_number("-c", optarg, 1, 100000); break;
        case 'd': nr_depth = nr_number("-d", optarg, 1, 1024); break;
        case 'n': total = nr_number("-n", optarg, 1, LONG_MAX / 2); break;
        case 't': limit = nr_number("-t", optarg, 1, 86400); break;
        case 'h': nr_usage(stdout); return 0;
        default: nr_usage(stderr); return 2;
        }
    }
    if (total < 0 || argc - optind != 2) {
        nr_usage(stderr);
        return 2;
    }
    const char *target = argv[optind], *path = argv[optind + 1];
    const char *colon = strrchr(target, ':');
    struct sockaddr_in sa = { .sin_family = AF_INET };
    char addr[INET_ADDRSTRLEN];
    if (colon == NULL || (size_t)(colon - target) >= sizeof addr || path[0] != '/') {
        fprintf(stderr, "%s: expected IPV4ADDR:PORT and a path starting with '/'\n", nr_prog);
        return 2;
    }
    memcpy(addr, target, (size_t)(colon - target));
    addr[colon - target] = '\0';
    sa.sin_port = htons((uint16_t)nr_number("the port", colon + 1, 1, 65535));
    if (inet_pton(AF_INET, addr, &sa.sin_addr) != 1) {
        fprintf(stderr, "%s: '%s' is not an IPv4 address\n", nr_prog, addr);
        return 2;
    }
    if (conns > total)
        conns = total;

    /* Each connection needs a descriptor; raise the soft limit as far as
     * the hard one allows rather than fail at a thousand connections. */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }

    int len = snprintf(NULL, 0, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", path, target);
    nr_request_len = (size_t)len;
    nr_request = malloc(nr_request_len + 1);
    nr_batch = malloc(nr_request_len * (size_t)nr_depth);
    nr_conn_t *cs = calloc((size_t)conns, sizeof *cs);
    struct pollfd *pfd = calloc((size_t)conns, sizeof *pfd);
    if (nr_request == NULL || nr_batch == NULL || cs == NULL || pfd == NULL)
        nr_die("out of memory", 0);
    snprintf(nr_request, nr_request_len + 1, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", path, target);
    for (long i = 0; i < nr_depth; i++)
        memcpy(nr_batch + (size_t)i * nr_request_len, nr_request, nr_request_len);

    for (long i = 0; i < conns; i++) {
        cs[i].fd = nr_connect(&sa);
        cs[i].quota = total / conns + (i < total % conns ? 1 : 0);
        cs[i].in_cap = 16384;
        cs[i].in = malloc(cs[i].in_cap);
        if (cs[i].in == NULL)
            nr_die("out of memory", 0);
        nr_next_batch(&cs[i]);
    }

    double start = nr_now();
    long failed = 0; /* requests lost with a connection */
    int first_err = 0; /* the first socket error, for the message */
    for (;;) {
        nfds_t n = 0;
        for (long i = 0; i < conns; i++) {
            pfd[i].fd = nr_done(&cs[i]) ? -1 : cs[i].fd;
            pfd[i].events = POLLIN | (cs[i].out_len > cs[i].out_off ? POLLOUT : 0);
            pfd[i].revents = 0;
            if (pfd[i].fd >= 0)
                n++;
        }
        if (n == 0)
            break;
        if (nr_now() - start > (double)limit) {
            fprintf(stderr, "%s: gave up after %ld s with %ld of %ld answered\n", nr_prog, limit,
                    nr_ok + nr_bad, total);
            return 1;
        }
        int r = poll(pfd, (nfds_t)conns, 1000);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            nr_die("poll", errno);
        }
        for (long i = 0; i < conns; i++) {
            nr_conn_t *c = &cs[i];
            if (pfd[i].fd < 0 || pfd[i].revents == 0)
                continue;
            bool broken = false;
            if (pfd[i].revents & POLLOUT) {
                ssize_t w = send(c->fd, nr_batch + c->out_off, c->out_len - c->out_off,
                                 MSG_NOSIGNAL);
                if (w > 0)
                    c->out_off += (size_t)w;
                else if (w < 0 && errno != EAGAIN && errno != EINTR) {
                    broken = true;
                    first_err = first_err ? first_err : errno;
                }
            }
            if (!broken && (pfd[i].revents & (POLLIN | POLLHUP | POLLERR))) {
                if (c->in_cap - c->in_len < 4096) {
                    char *p = realloc(c->in, c->in_cap * 2);
                    if (p == NULL)
                        nr_die("out of memory", 0);
                    c->in = p;
                    c->in_cap *= 2;
                }
                ssize_t got = read(c->fd, c->in + c->in_len, c->in_cap - c->in_len);
                if (got > 0) {
                    c->in_len += (size_t)got;
                    if (!nr_parse(c))
                        broken = true;
                } else if (got == 0) {
                    broken = true;
                } else if (errno != EAGAIN && errno != EINTR) {
                    broken = true;
                    first_err = first_err ? first_err : errno;
                }
            }
            if (broken) {
                failed += c->pending + c->quota;
                close(c->fd);
                c->fd = -1;
                continue;
            }
            nr_next_batch(c);
        }
    }
    double secs = nr_now() - start;
    for (long i = 0; i < conns; i++)
        if (cs[i].fd >= 0)
            close(cs[i].fd);
    printf("requests=%ld ok=%ld bad=%ld failed=%ld seconds=%.3f\n", total, nr_ok, nr_bad, failed,
           secs);
    if (nr_ok == total)
        return 0;
    fprintf(stderr, "%s: %ld of %ld requests not answered with 200: %ld other status, "
                    "%ld lost with their connection%s%s\n",
            nr_prog, total - nr_ok, total, nr_bad, failed, first_err ? ", first error: " : "",
            first_err ? strerror(first_err) : "");
    return 1;
}

/* SPDX-License-Identifier: BSD-2-Clause */
/* poold — the command line.
 *
 * pd_config_parse() turns argv into a pd_config_t and never prints or exits,
 * so that every good and bad case can be unit-tested; main.c reports.  Every
 * number is parsed by hand (digits only): strtol would accept blanks, signs
 * and trailing junk that we want to reject.
 */
#include "config.h"

#include <arpa/inet.h>
#include <getopt.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <string.h>
#include <unistd.h>

#include "poold.h"
#include "region.h"

#define PD_KIB ((uint64_t)1 << 10)
#define PD_MIB ((uint64_t)1 << 20)
#define PD_GIB ((uint64_t)1 << 30)
#define PD_TIB ((uint64_t)1 << 40)

/* Long-only options get values outside the char range. */
enum {
    OPT_NO_PIN = 256,
    OPT_THREADS,
    OPT_HEAP_SIZE,
    OPT_MAX_HEADER,
    OPT_MAX_BODY,
    OPT_MAX_CONNS,
    OPT_HEADER_TIMEOUT,
    OPT_IDLE_TIMEOUT,
    OPT_BODY_TIMEOUT,
    OPT_BODY_MIN_RATE,
    OPT_SHUTDOWN_TIMEOUT,
    OPT_REQUEST_REGION,
    OPT_REGION_BLOCK
};

static const char pd_short_opts[] = ":w:p:b:vhV";

static const struct option pd_long_opts[] = {
    {"workers", required_argument, NULL, 'w'},
    {"threads", required_argument, NULL, OPT_THREADS},
    {"port", required_argument, NULL, 'p'},
    {"bind", required_argument, NULL, 'b'},
    {"no-pin", no_argument, NULL, OPT_NO_PIN},
    {"heap-size", required_argument, NULL, OPT_HEAP_SIZE},
    {"max-header", required_argument, NULL, OPT_MAX_HEADER},
    {"max-body", required_argument, NULL, OPT_MAX_BODY},
    {"max-conns", required_argument, NULL, OPT_MAX_CONNS},
    {"header-timeout", required_argument, NULL, OPT_HEADER_TIMEOUT},
    {"idle-timeout", required_argument, NULL, OPT_IDLE_TIMEOUT},
    {"body-timeout", required_argument, NULL, OPT_BODY_TIMEOUT},
    {"body-min-rate", required_argument, NULL, OPT_BODY_MIN_RATE},
    {"shutdown-timeout", required_argument, NULL, OPT_SHUTDOWN_TIMEOUT},
    {"request-region", no_argument, NULL, OPT_REQUEST_REGION},
    {"region-block", required_argument, NULL, OPT_REGION_BLOCK},
    {"verbose", no_argument, NULL, 'v'},
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, 'V'},
    {NULL, 0, NULL, 0},
};

void pd_config_usage(FILE *out)
{
    fputs("usage: poold [-w N | --threads N] [-p PORT] [-b ADDR] [--no-pin]\n"
          "             [--heap-size SIZE] [--max-header SIZE] [--max-body SIZE]\n"
          "             [--max-conns N] [--header-timeout SEC] [--idle-timeout SEC]\n"
          "             [--body-timeout SEC] [--body-min-rate SIZE]\n"
          "             [--shutdown-timeout SEC] [--request-region]\n"
          "             [--region-block SIZE] [-v] [-h] [-V]\n"
          "\n"
          "  -w, --workers N          worker processes, 1..256 (default: online CPUs)\n"
          "      --threads N          instead one worker process of N worker threads,\n"
          "                           1..256\n"
          "  -p, --port PORT          TCP port, 0 for any free one (default: 8080)\n"
          "  -b, --bind ADDR          IPv4 or IPv6 address (default: 127.0.0.1)\n"
          "      --no-pin             do not pin worker i to CPU i mod CPUs\n"
          "      --heap-size SIZE     shared pool arena, 4M..16384G, pool builds only\n"
          "                           (default: 1G)\n"
          "      --max-header SIZE    request line and headers, else 414/431 (default: 8K)\n"
          "      --max-body SIZE      request body, else 413 (default: 1M)\n"
          "      --max-conns N        open connections per worker (default: 1024)\n"
          "      --header-timeout SEC complete headers within, else 408 (default: 10)\n"
          "      --idle-timeout SEC   close idle keep-alive connections after (default: 15)\n"
          "      --body-timeout SEC   a body's deadline, else 408 (default: 10)\n"
          "      --body-min-rate SIZE  each SIZE bytes move it 1 s later (default: 1K)\n"
          "      --shutdown-timeout SEC  kill workers still busy after (default: 5)\n"
          "      --request-region     /heavy allocates from a per-request region\n"
          "                           reset after each request (default: malloc)\n"
          "      --region-block SIZE  bytes per region block, 256..64M (default: 4K)\n"
          "  -v, --verbose            more log lines (repeatable)\n"
          "  -h, --help               this text\n"
          "  -V, --version            print the version\n"
          "\n"
          "SIZE takes a K, M or G suffix (powers of 1024); SEC may have decimals.\n",
          out);
}

/* Digits only, at least one, no overflow. */
static int pd_parse_u64(const char *s, const char **end, uint64_t *out)
{
    uint64_t v = 0;
    const char *p = s;

    if (*p < '0' || *p > '9')
        return PD_ERROR;
    for (; *p >= '0' && *p <= '9'; p++) {
        unsigned d = (unsigned)(*p - '0');

        if (v > (UINT64_MAX - d) / 10)
            return PD_ERROR;
        v = v * 10 + d;
    }
    *end = p;
    *out = v;
    return PD_OK;
}

int pd_parse_size(const char *s, uint64_t *out)
{
    const char *end;
    uint64_t v, mult = 1;

    if (pd_parse_u64(s, &end, &v) != PD_OK)
        return PD_ERROR;
    switch (*end) {
    case '\0':
        break;
    case 'k': case 'K':
        mult = PD_KIB;
        end++;
        break;
    case 'm': case 'M':
        mult = PD_MIB;
        end++;
        break;
    case 'g': case 'G':
        mult = PD_GIB;
        end++;
        break;
    default:
        return PD_ERROR;
    }
    if (*end != '\0' || v > UINT64_MAX / mult)
        return PD_ERROR;
    *out = v * mult;
    return PD_OK;
}

int pd_parse_seconds(const char *s, struct timeval *out)
{
    const char *end;
    uint64_t sec, usec = 0;
    unsigned digits = 0;

    if (pd_parse_u64(s, &end, &sec) != PD_OK || sec > INT_MAX)
        return PD_ERROR;
    if (*end == '.') {
        for (end++; *end >= '0' && *end <= '9'; end++) {
            if (++digits > 6)
                return PD_ERROR;
            usec = usec * 10 + (uint64_t)(*end - '0');
        }
        if (digits == 0)
            return PD_ERROR;
        for (unsigned i = digits; i < 6; i++)
            usec *= 10;
    }
    if (*end != '\0')
        return PD_ERROR;
    out->tv_sec = (time_t)sec;
    out->tv_usec = (suseconds_t)usec;
    return PD_OK;
}

void pd_config_format_addr(const pd_config_t *cfg, int port, char *buf, size_t cap)
{
    if (cfg->addr.ss_family == AF_INET6)
        snprintf(buf, cap, "[%s]:%d", cfg->bind, port);
    else
        snprintf(buf, cap, "%s:%d", cfg->bind, port);
}

static void pd_config_defaults(pd_config_t *cfg)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);

    memset(cfg, 0, sizeof(*cfg));
    cfg->workers = cpus < 1 ? 1 : cpus > PD_MAX_WORKERS ? PD_MAX_WORKERS : (int)cpus;
    cfg->port = 8080;
    strcpy(cfg->bind, "127.0.0.1");
    cfg->pin = true;
    cfg->heap_size = (size_t)PD_GIB;
    cfg->max_header = 8 * PD_KIB;
    cfg->max_body = PD_MIB;
    cfg->max_conns = 1024;
    cfg->header_timeout.tv_sec = 10;
    cfg->idle_timeout.tv_sec = 15;
    cfg->body_timeout.tv_sec = 10;
    cfg->body_min_rate = PD_KIB;
    cfg->shutdown_timeout.tv_sec = 5;
    cfg->region_block = PD_REGION_BLOCK_DEFAULT;
}

static pd_config_result_t pd_config_fail(char *err, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static pd_config_result_t pd_config_fail(char *err, size_t cap, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(err, cap, fmt, ap);
    va_end(ap);
    return PD_CONFIG_ERROR;
}

/* Length of a long option's name, without any "=value". */
static int pd_opt_len(const char *arg)
{
    size_t n = strcspn(arg, "=");

    return n > 60 ? 60 : (int)n;
}

static int pd_config_int(const char *arg, uint64_t lo, uint64_t hi, int *out)
{
    const char *end;
    uint64_t v;

    if (pd_parse_u64(arg, &end, &v) != PD_OK || *end != '\0' || v < lo || v > hi)
        return PD_ERROR;
    *out = (int)v;
    return PD_OK;
}

static int pd_config_size(const char *arg, uint64_t lo, uint64_t hi, uint64_t *out)
{
    uint64_t v;

    if (pd_parse_size(arg, &v) != PD_OK || v < lo || v > hi)
        return PD_ERROR;
    *out = v;
    return PD_OK;
}

static int pd_config_sec(const char *arg, struct timeval *out)
{
    struct timeval tv;

    if (pd_parse_seconds(arg, &tv) != PD_OK)
        return PD_ERROR;
    if ((tv.tv_sec == 0 && tv.tv_usec == 0) || tv.tv_sec > 3600 ||
        (tv.tv_sec == 3600 && tv.tv_usec > 0))
        return PD_ERROR;
    *out = tv;
    return PD_OK;
}

static int pd_config_addr(pd_config_t *cfg)
{
    struct sockaddr_in *sin = (struct sockaddr_in *)&cfg->addr;
    struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&cfg->addr;

    memset(&cfg->addr, 0, sizeof(cfg->addr));
    if (inet_pton(AF_INET, cfg->bind, &sin->sin_addr) == 1) {
        sin->sin_family = AF_INET;
        sin->sin_port = htons((uint16_t)cfg->port);
        cfg->addrlen = sizeof(*sin);
        return PD_OK;
    }
    if (inet_pton(AF_INET6, cfg->bind, &sin6->sin6_addr) == 1) {
        sin6->sin6_family = AF_INET6;
        sin6->sin6_port = htons((uint16_t)cfg->port);
        cfg->addrlen = sizeof(*sin6);
        return PD_OK;
    }
    return PD_ERROR;
}

pd_config_result_t pd_config_parse(pd_config_t *cfg, int argc, char **argv,
                                   char *err, size_t cap)
{
    bool help = false, version = false;
    bool workers_given = false;

    pd_config_defaults(cfg);
    if (cap > 0)
        err[0] = '\0';
    opterr = 0;     /* getopt's own messages would make a second line */
    optind = 0;     /* 0, not 1: glibc then fully re-initialises */

    for (;;) {
        int longindex = -1;
        int c = getopt_long(argc, argv, pd_short_opts, pd_long_opts, &longindex);
        char name[40];
        const char *expect = NULL;
        uint64_t v = 0;
        int rc = PD_OK;

        if (c == -1)
            break;
        if (longindex >= 0)
            snprintf(name, sizeof(name), "--%s", pd_long_opts[longindex].name);
        else
            snprintf(name, sizeof(name), "-%c", c);

        switch (c) {
        case 'w':
            rc = pd_config_int(optarg, 1, PD_MAX_WORKERS, &cfg->workers);
            expect = "an integer from 1 to 256";
            workers_given = true;
            break;
        case OPT_THREADS:
            rc = pd_config_int(optarg, 1, PD_MAX_WORKERS, &cfg->threads);
            expect = "an integer from 1 to 256";
            break;
        case 'p':
            rc = pd_config_int(optarg, 0, 65535, &cfg->port);
            expect = "an integer from 0 to 65535";
            break;
        case 'b':
            if (strlen(optarg) >= sizeof(cfg->bind)) {
                rc = PD_ERROR;
            } else {
                strcpy(cfg->bind, optarg);
                rc = pd_config_addr(cfg);
            }
            expect = "an IPv4 or IPv6 address";
            break;
        case OPT_NO_PIN:
            cfg->pin = false;
            break;
        case OPT_HEAP_SIZE:
            /* What pool_create() takes: room for its header and page map,
             * and the page map's reach. */
            rc = pd_config_size(optarg, 4 * PD_MIB, 16 * PD_TIB, &v);
            cfg->heap_size = (size_t)v;
            expect = "a size from 4M to 16384G";
            break;
        case OPT_MAX_HEADER:
            rc = pd_config_size(optarg, 256, PD_MIB, &v);
            cfg->max_header = (size_t)v;
            expect = "a size from 256 to 1M";
            break;
        case OPT_MAX_BODY:
            rc = pd_config_size(optarg, 0, 1024 * PD_GIB, &cfg->max_body);
            expect = "a size from 0 to 1024G";
            break;
        case OPT_MAX_CONNS:
            rc = pd_config_int(optarg, 1, 1000000, &cfg->max_conns);
            expect = "an integer from 1 to 1000000";
            break;
        case OPT_HEADER_TIMEOUT:
            rc = pd_config_sec(optarg, &cfg->header_timeout);
            expect = "seconds above 0 and at most 3600";
            break;
        case OPT_IDLE_TIMEOUT:
            rc = pd_config_sec(optarg, &cfg->idle_timeout);
            expect = "seconds above 0 and at most 3600";
            break;
        case OPT_BODY_TIMEOUT:
            rc = pd_config_sec(optarg, &cfg->body_timeout);
            expect = "seconds above 0 and at most 3600";
            break;
        case OPT_BODY_MIN_RATE:
            rc = pd_config_size(optarg, 0, PD_GIB, &cfg->body_min_rate);
            expect = "a size from 0 to 1G";
            break;
        case OPT_SHUTDOWN_TIMEOUT:
            rc = pd_config_sec(optarg, &cfg->shutdown_timeout);
            expect = "seconds above 0 and at most 3600";
            break;
        case OPT_REQUEST_REGION:
            cfg->request_region = true;
            break;
        case OPT_REGION_BLOCK:
            rc = pd_config_size(optarg, PD_REGION_BLOCK_MIN, 64 * PD_MIB, &v);
            cfg->region_block = (size_t)v;
            expect = "a size from 256 to 64M";
            break;
        case 'v':
            cfg->verbose++;
            break;
        case 'h':
            help = true;
            break;
        case 'V':
            version = true;
            break;
        case ':':
            if (strncmp(argv[optind - 1], "--", 2) == 0)
                return pd_config_fail(err, cap, "option '%.*s' needs an argument",
                                      pd_opt_len(argv[optind - 1]), argv[optind - 1]);
            return pd_config_fail(err, cap, "option '-%c' needs an argument", optopt);
        default:
            /* '?': an unknown or ambiguous option, or an argument given to a
             * flag.  optind has moved past a long option but not always past
             * a group of short ones, hence optopt for those. */
            if (optopt > 0 && optopt < OPT_NO_PIN &&
                (optopt == ':' || !strchr(pd_short_opts, optopt)))
                return pd_config_fail(err, cap, "unknown option '-%c'", optopt);
            if (optopt != 0)
                return pd_config_fail(err, cap, "option '%.*s' takes no argument",
                                      pd_opt_len(argv[optind - 1]), argv[optind - 1]);
            return pd_config_fail(err, cap, "unknown option '%.*s'",
                                  pd_opt_len(argv[optind - 1]), argv[optind - 1]);
        }
        if (rc != PD_OK)
            return pd_config_fail(err, cap, "invalid value '%s' for %s: expected %s",
                                  optarg, name, expect);
    }
    if (optind < argc)
        return pd_config_fail(err, cap, "unexpected argument '%s'", argv[optind]);
    if (help)
        return PD_CONFIG_HELP;
    if (version)
        return PD_CONFIG_VERSION;
    /* Threads or processes, not both: the experiment compares the two, and
     * a mix would blend both kinds of contention into one figure. */
    if (cfg->threads > 0) {
        if (workers_given && cfg->workers != 1)
            return pd_config_fail(err, cap, "--threads runs one worker process: it cannot be "
                                  "combined with -w %d", cfg->workers);
        cfg->workers = 1;
    }
    if (pd_config_addr(cfg) != PD_OK)   /* applies the final port */
        return pd_config_fail(err, cap, "invalid address '%s'", cfg->bind);
    return PD_CONFIG_RUN;
}

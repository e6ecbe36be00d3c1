/* poolbench: the allocator alone, without the server around it.
 *
 * Each workload is a loop of malloc+free pairs, compiled once per allocator
 * so that every variant calls its allocator directly: `pool` calls
 * pool_malloc/pool_free in an arena this process created and attached to;
 * `malloc` calls malloc/free, i.e. glibc or whatever LD_PRELOAD put there;
 * `none` is the same loop around an allocator that does nothing, whose cost
 * callgrind.sh subtracts.  Two modes: timed (R runs per allocator, runs of
 * the allocators interleaved, ns per pair as median and min-max) and
 * --pairs N (exactly N pairs and one line, for instruction counting).
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pool.h"

/* An empty asm that takes the pointer: the compiler must assume it is used,
 * so it can neither drop the malloc/free pair nor merge iterations. */
#define PB_ESCAPE(p) __asm__ volatile("" : : "r"(p) : "memory")

enum { PB_POOL, PB_MALLOC, PB_NONE, PB_N_ALLOCATORS };
static const char *const pb_allocator_name[PB_N_ALLOCATORS] = {
    "pool", "malloc", "none"
};

/* ------------------------------------------------------------------------ */
/* Workloads                                                                 */
/* ------------------------------------------------------------------------ */

/* The /heavy request's allocations: a header map of 134 nodes of 96-112 B
 * and four 1 KiB buffers, all allocated, then all freed. */
#define HEAVY_NODES 134
#define HEAVY_BUFFERS 4
#define HEAVY_OBJECTS (HEAVY_NODES + HEAVY_BUFFERS)

static size_t heavy_size[HEAVY_OBJECTS];

static void heavy_init(void)
{
    for (unsigned i = 0; i < HEAVY_NODES; i++)
        heavy_size[i] = 96 + 8 * (i % 3);
    for (unsigned i = HEAVY_NODES; i < HEAVY_OBJECTS; i++)
        heavy_size[i] = 1024;
}

/* The do-nothing allocator: noinline, so the loop around it keeps its calls
 * and costs what it costs around a real allocator. */
static char none_area[2048] __attribute__((aligned(64)));

static __attribute__((noinline)) void *none_malloc(size_t n)
{
    PB_ESCAPE(n);
    return none_area;
}

static __attribute__((noinline)) void none_free(void *p)
{
    PB_ESCAPE(p);
}

/* One copy of every workload per allocator.  A "pair" is one malloc and
 * its free; a heavy round is HEAVY_OBJECTS pairs, and a count that is not
 * a multiple of it ends with a partial round. */
#define PB_DEFINE_WORKLOADS(tag, MALLOC, FREE)                               \
    static void fixed16_##tag(uint64_t pairs)                                \
    {                                                                        \
        for (uint64_t i = 0; i < pairs; i++) {                               \
            void *p = MALLOC(16);                                            \
            PB_ESCAPE(p);                                                    \
            FREE(p);                                                         \
        }                                                                    \
    }                                                                        \
    static void heavy_##tag(uint64_t pairs)                                  \
    {                                                                        \
        void *obj[HEAVY_OBJECTS];                                            \
        while (pairs > 0) {                                                  \
            unsigned n = pairs < HEAVY_OBJECTS ? (unsigned)pairs             \
                                               : HEAVY_OBJECTS;              \
            for (unsigned i = 0; i < n; i++) {                               \
                obj[i] = MALLOC(heavy_size[i]);                              \
                PB_ESCAPE(obj[i]);                                           \
            }                                                                \
            for (unsigned i = 0; i < n; i++)                                 \
                FREE(obj[i]);                                                \
            pairs -= n;                                                      \
        }                                                                    \
    }

PB_DEFINE_WORKLOADS(pool, pool_malloc, pool_free)
PB_DEFINE_WORKLOADS(malloc, malloc, free)
PB_DEFINE_WORKLOADS(none, none_malloc, none_free)

typedef void (*pb_loop_fn)(uint64_t pairs);

typedef struct pb_workload_s {
    const char *name;
    const char *what;                       /* one line for --help */
    pb_loop_fn loop[PB_N_ALLOCATORS];       /* indexed by PB_POOL ... */
    uint64_t timed_pairs;                   /* per timed run */
} pb_workload_t;

static const pb_workload_t pb_workloads[] = {
    { "fixed16", "malloc(16) and free it, again and again",
      { fixed16_pool, fixed16_malloc, fixed16_none }, 5000000 },
    { "heavy", "allocate 134 objects of 96-112 B and 4 of 1 KiB, free all",
      { heavy_pool, heavy_malloc, heavy_none }, 5000000 },
};
#define PB_N_WORKLOADS (sizeof pb_workloads / sizeof pb_workloads[0])

/* ------------------------------------------------------------------------ */
/* Running and timing                                                        */
/* ------------------------------------------------------------------------ */

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Run `pairs` pairs of workload w on allocator a in this process; returns
 * the elapsed nanoseconds. */
static int64_t pb_run(const pb_workload_t *w, int a, uint64_t pairs)
{
    int64_t t0 = now_ns();
    w->loop[a](pairs);
    return now_ns() - t0;
}

typedef struct pb_summary_s {
    double median, min, max;    /* ns per pair */
} pb_summary_t;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static pb_summary_t pb_summarise(double *ns, int runs)
{
    qsort(ns, (size_t)runs, sizeof *ns, cmp_double);
    pb_summary_t s = { ns[runs / 2], ns[0], ns[runs - 1] };
    if (runs % 2 == 0)
        s.median = (ns[runs / 2 - 1] + ns[runs / 2]) / 2;
    return s;
}

/* Create and attach to an arena, once, before the first pool run. */
static int pb_pool_ready(void)
{
    if (pool_attached())
        return 0;
    int rc = pool_create(POOL_HEAP_SIZE_DEFAULT);
    if (rc == 0)
        rc = pool_attach();
    if (rc != 0)
        fprintf(stderr, "poolbench: cannot set up the pool's arena: %s\n",
                strerror(rc));
    return rc;
}

typedef struct pb_options_s {
    const pb_workload_t *workload;  /* NULL: all */
    int allocator;                  /* -1: pool and malloc */
    uint64_t pairs;                 /* 0: timed mode */
    int runs;
    bool csv;
} pb_options_t;

/* Timed mode: every selected allocator R times, run k of each allocator
 * before run k+1 of any, so a burst of noise hits all of them alike. */
static int pb_timed(const pb_options_t *o)
{
    int alloc[2], n_alloc = 0;
    if (o->allocator >= 0) {
        alloc[n_alloc++] = o->allocator;
    } else {
        alloc[n_alloc++] = PB_POOL;
        alloc[n_alloc++] = PB_MALLOC;
    }
    for (int k = 0; k < n_alloc; k++)
        if (alloc[k] == PB_POOL && pb_pool_ready() != 0)
            return 1;

    const char *preload = getenv("LD_PRELOAD");
    if (o->csv)
        printf("workload,allocator,ld_preload,runs,pairs_per_run,"
               "median_ns,min_ns,max_ns,ratio_to_malloc\n");
    else
        printf("poolbench: %d runs per cell, ns per malloc+free pair, median "
               "(min-max); malloc is %s\n", o->runs,
               preload != NULL && *preload ? preload : "glibc");

    double *ns = calloc((size_t)o->runs * n_alloc, sizeof *ns);
    if (ns == NULL) {
        fprintf(stderr, "poolbench: out of memory\n");
        return 1;
    }
    for (size_t wi = 0; wi < PB_N_WORKLOADS; wi++) {
        const pb_workload_t *w = &pb_workloads[wi];
        if (o->workload != NULL && o->workload != w)
            continue;
        for (int k = 0; k < n_alloc; k++)
            pb_run(w, alloc[k], w->timed_pairs / 10);
        for (int r = 0; r < o->runs; r++)
            for (int k = 0; k < n_alloc; k++)
                ns[k * o->runs + r] = (double)pb_run(w, alloc[k], w->timed_pairs) /
                                      (double)w->timed_pairs;

        pb_summary_t s[2];
        for (int k = 0; k < n_alloc; k++)
            s[k] = pb_summarise(ns + k * o->runs, o->runs);
        for (int k = 0; k < n_alloc; k++) {
            bool ratio = n_alloc == 2;
            if (o->csv) {
                printf("%s,%s,%s,%d,%" PRIu64 ",%.2f,%.2f,%.2f,", w->name,
                       pb_allocator_name[alloc[k]], preload ? preload : "",
                       o->runs, w->timed_pairs, s[k].median, s[k].min, s[k].max);
                if (ratio)
                    printf("%.3f", s[k].median / s[1].median);
                printf("\n");
            } else {
                printf("  %-8s %-6s %8.2f ns  (%.2f-%.2f)", w->name,
                       pb_allocator_name[alloc[k]], s[k].median, s[k].min,
                       s[k].max);
                if (ratio && alloc[k] == PB_POOL)
                    printf("  pool/malloc %.3f", s[k].median / s[1].median);
                printf("\n");
            }
        }
    }
    free(ns);
    return 0;
}

/* --pairs mode: exactly o->pairs pairs and one line. */
static int pb_counted(const pb_options_t *o)
{
    int a = o->allocator >= 0 ? o->allocator : PB_MALLOC;
    if (a == PB_POOL && pb_pool_ready() != 0)
        return 1;
    pb_run(o->workload, a, o->pairs);
    printf("poolbench: %s %s %" PRIu64 " pairs\n", o->workload->name,
           pb_allocator_name[a], o->pairs);
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Command line                                                              */
/* ------------------------------------------------------------------------ */

static void usage(FILE *out)
{
    fprintf(out,
            "usage: poolbench [--workload NAME] [--allocator pool|malloc|none]\n"
            "                 [--runs R] [--csv]\n"
            "       poolbench --workload NAME --pairs N [--allocator pool|malloc|none]\n"
            "\n"
            "Timed mode (no --pairs): pool and malloc, or only --allocator, each R\n"
            "times (default 5), ns per malloc+free pair as median (min-max).\n"
            "--pairs N: exactly N pairs of one workload (default allocator: malloc)\n"
            "and one line, for instruction counts under callgrind.\n"
            "'malloc' is glibc unless LD_PRELOAD puts another allocator there;\n"
            "'none' is the loop around a do-nothing allocator.\n"
            "\nworkloads:\n");
    for (size_t i = 0; i < PB_N_WORKLOADS; i++)
        fprintf(out, "  %-8s %s\n", pb_workloads[i].name, pb_workloads[i].what);
}

static bool parse_count(const char *s, uint64_t max, uint64_t *out)
{
    char *end;
    if (*s < '0' || *s > '9')
        return false;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || *end != '\0' || v == 0 || v > max)
        return false;
    *out = v;
    return true;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "workload", required_argument, NULL, 'w' },
        { "pairs", required_argument, NULL, 'n' },
        { "allocator", required_argument, NULL, 'a' },
        { "runs", required_argument, NULL, 'r' },
        { "csv", no_argument, NULL, 'c' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    pb_options_t o = { NULL, -1, 0, 5, false };
    uint64_t v;
    int c;

    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case 'w':
            for (size_t i = 0; i < PB_N_WORKLOADS; i++)
                if (strcmp(optarg, pb_workloads[i].name) == 0)
                    o.workload = &pb_workloads[i];
            if (o.workload == NULL) {
                fprintf(stderr, "poolbench: unknown workload '%s' (see --help)\n",
                        optarg);
                return 2;
            }
            break;
        case 'n':
            if (!parse_count(optarg, UINT64_C(1) << 40, &o.pairs)) {
                fprintf(stderr, "poolbench: --pairs takes a count from 1 to "
                        "2^40, not '%s'\n", optarg);
                return 2;
            }
            break;
        case 'a':
            o.allocator = -1;
            for (int i = 0; i < PB_N_ALLOCATORS; i++)
                if (strcmp(optarg, pb_allocator_name[i]) == 0)
                    o.allocator = i;
            if (o.allocator < 0) {
                fprintf(stderr, "poolbench: --allocator takes pool, malloc or "
                        "none, not '%s'\n", optarg);
                return 2;
            }
            break;
        case 'r':
            if (!parse_count(optarg, 1000, &v)) {
                fprintf(stderr, "poolbench: --runs takes a count from 1 to 1000, "
                        "not '%s'\n", optarg);
                return 2;
            }
            o.runs = (int)v;
            break;
        case 'c':
            o.csv = true;
            break;
        case 'h':
            usage(stdout);
            return 0;
        case ':':
            fprintf(stderr, "poolbench: %s needs an argument\n", argv[optind - 1]);
            return 2;
        default:
            fprintf(stderr, "poolbench: unknown option '%s' (see --help)\n",
                    argv[optind - 1]);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "poolbench: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    heavy_init();
    if (o.pairs > 0) {
        if (o.workload == NULL) {
            fprintf(stderr, "poolbench: --pairs needs --workload\n");
            return 2;
        }
        return pb_counted(&o);
    }
    return pb_timed(&o);
}

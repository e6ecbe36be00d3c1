/* SPDX-License-Identifier: BSD-2-Clause */
/* poolbench: the allocator alone, without the server around it.
 *
 * The workloads (pb-workloads.c) are compiled once per allocator: `pool`
 * calls pool_malloc/pool_free in an arena this process created, `malloc`
 * calls malloc/free (glibc or whatever LD_PRELOAD put there), `region`
 * bumps a pointer in a per-worker region reset at the end of every request,
 * `none` is the same loop around an allocator that does nothing.  This
 * file runs them:
 * timed (N workers as processes sharing the arena, -P, or threads of one
 * process, -T; pinned; a barrier starts every run; R runs, the allocators
 * interleaved run by run; median and min-max), counted (--pairs N: exactly
 * N pairs in this thread, for callgrind), or with --stats in a stats build
 * (the pool's counters per workload, never timed).
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "shmpool.h"
#include "poolbench.h"

static const char *const pb_allocator_name[PB_N_ALLOCATORS] = {
    "pool", "malloc", "region", "none"
};

#define PB_MAX_WORKERS 64

typedef struct pb_options_s {
    const pb_workload_t *workload;  /* NULL: all */
    int alloc[PB_N_ALLOCATORS];     /* the arms, in the order given */
    int nalloc;                     /* 0: pool and malloc (counted: malloc) */
    unsigned request;               /* --request; 0: not given */
    size_t region_block;            /* --region-block; 0: the region's default */
    uint64_t pairs;                 /* 0: timed mode */
    int runs;
    double scale;                   /* of every workload's pairs per run */
    unsigned workers;
    bool processes;                 /* -P; else -T */
    bool csv, markdown, stats;
    bool per_run;                   /* --per-run */
    const char *label;              /* the malloc arm's name in the output */
} pb_options_t;

/* ------------------------------------------------------------------------ */
/* Memory every worker sees                                                  */
/* ------------------------------------------------------------------------ */

/* What the kernel counted for one thread: the pages an allocator hands out
 * fresh (or got back from the OS) show up as minor faults and system time,
 * a wait that blocked (a futex on a contended lock; not a sched_yield) as a
 * voluntary context switch.  No syscall is counted by name: this is what
 * getrusage has, without strace's cost on the timed path. */
typedef struct pb_usage_s {
    long minflt;                    /* minor page faults */
    long nvcsw;                     /* voluntary context switches */
    int64_t cpu_ns;                 /* CPU time, CLOCK_THREAD_CPUTIME_ID: exact */
    int64_t sys_ns;                 /* of it in the kernel: getrusage's share, which
                                       the kernel samples at its timer tick */
} pb_usage_t;

typedef struct pb_result_s {
    int64_t t_begin, t_end;
    int64_t phase_ns[2];
    pb_usage_t use;                 /* of the whole run, not only its timed part */
    pb_mem_t mem;
    int near[2];                    /* pb_ctx_t.near */
} pb_result_t;

typedef struct pb_shared_s {
    pthread_barrier_t start;        /* after set-up, and before every run */
    pthread_barrier_t inner;        /* the workloads' own (frag) */
    _Atomic int failed;             /* a worker could not set up */
    pb_ring_t ring[PB_MAX_WORKERS]; /* pb_ctx_t.rings */
    pb_result_t result[];           /* [run][allocator][worker] */
} pb_shared_t;

/* One set of workers running one workload on up to every allocator. */
typedef struct pb_cell_s {
    const pb_options_t *o;
    const pb_workload_t *w;
    int alloc[PB_N_ALLOCATORS];
    int nalloc;
    unsigned request;               /* allocations per request; 0: none */
    int nruns;                      /* the warm-up run 0, then o->runs */
    uint64_t pairs, warm_pairs;     /* per worker */
    pb_shared_t *sh;
    size_t sh_size;
} pb_cell_t;

static pb_result_t *result_at(const pb_cell_t *cell, int run, int k, unsigned worker)
{
    return &cell->sh->result[((size_t)run * (size_t)cell->nalloc + (size_t)k) *
                             cell->o->workers + worker];
}

static bool cell_uses(const pb_cell_t *cell, int a)
{
    for (int k = 0; k < cell->nalloc; k++)
        if (cell->alloc[k] == a)
            return true;
    return false;
}

static pb_shared_t *shared_map(size_t size)
{
    void *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    return m == MAP_FAILED ? NULL : m;
}

static int barrier_init_shared(pthread_barrier_t *b, unsigned n)
{
    pthread_barrierattr_t at;
    int rc = pthread_barrierattr_init(&at);
    if (rc == 0 && (rc = pthread_barrierattr_setpshared(&at, PTHREAD_PROCESS_SHARED)) == 0)
        rc = pthread_barrier_init(b, &at, n);
    pthread_barrierattr_destroy(&at);
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Workers                                                                   */
/* ------------------------------------------------------------------------ */

/* Worker i on CPU i mod the online CPUs.  Failing to pin is worth one line,
 * not a refusal: a restricted cpuset still gives a measurement. */
static void pin(unsigned i)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET((int)(i % (unsigned)(n > 0 ? n : 1)), &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0 && i == 0)
        fprintf(stderr, "poolbench: cannot pin workers (%s); running unpinned\n",
                strerror(errno));
}

/* This thread's usage so far. */
static pb_usage_t usage_now(void)
{
    struct rusage ru;
    struct timespec cpu;
    if (getrusage(RUSAGE_THREAD, &ru) != 0 ||
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu) != 0)
        return (pb_usage_t){ 0 };
    return (pb_usage_t){ ru.ru_minflt, ru.ru_nvcsw,
                         (int64_t)cpu.tv_sec * 1000000000 + cpu.tv_nsec,
                         (int64_t)ru.ru_stime.tv_sec * 1000000000 +
                             (int64_t)ru.ru_stime.tv_usec * 1000 };
}

static pb_usage_t usage_since(pb_usage_t u0)
{
    pb_usage_t u = usage_now();
    return (pb_usage_t){ u.minflt - u0.minflt, u.nvcsw - u0.nvcsw, u.cpu_ns - u0.cpu_ns,
                         u.sys_ns - u0.sys_ns };
}

/* Everything worker i does: set up, then every run of every allocator,
 * each started by the shared barrier.  Returns 0, or 1 when set-up failed
 * (in this worker or another). */
static int pb_worker(const pb_cell_t *cell, unsigned i)
{
    pb_shared_t *sh = cell->sh;
    const pb_options_t *o = cell->o;
    bool attached = false;
    pd_region_t *region = NULL;
    int rc = 1;

    pin(i);
    void **scratch = mmap(NULL, PB_SCRATCH_SLOTS * sizeof(void *), PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (scratch == MAP_FAILED) {
        fprintf(stderr, "poolbench: worker %u: mmap: %s\n", i, strerror(errno));
        atomic_store(&sh->failed, 1);
        scratch = NULL;
    }
    if (o->processes && cell_uses(cell, PB_POOL)) {
        int e = pool_attach();
        if (e != 0) {
            fprintf(stderr, "poolbench: worker %u cannot attach to the arena: %s\n", i,
                    strerror(e));
            atomic_store(&sh->failed, 1);
        } else {
            attached = true;
        }
    }
    /* Each worker its own region, as each connection has its own in the
     * server; its first block comes from this worker's malloc. */
    if (cell_uses(cell, PB_REGION) && (region = pd_region_create(o->region_block)) == NULL) {
        fprintf(stderr, "poolbench: worker %u cannot create its region: %s\n", i,
                strerror(errno));
        atomic_store(&sh->failed, 1);
    }
    pthread_barrier_wait(&sh->start);
    if (atomic_load(&sh->failed))
        goto out;
    for (int r = 0; r < cell->nruns; r++)
        for (int k = 0; k < cell->nalloc; k++) {
            pb_ctx_t c = {
                .worker = i,
                .pairs = r == 0 ? cell->warm_pairs : cell->pairs,
                .seq = (uint64_t)(r * cell->nalloc + k + 1),
                .request = cell->request,
                .region = region,
                .scratch = scratch,
                .workers = o->workers,
                .rings = sh->ring,
                .barrier = &sh->inner,
                .measure = o->processes || i == 0,
                .near = { -1, -1 },
            };
            pthread_barrier_wait(&sh->start);
            pb_usage_t u0 = usage_now();
            cell->w->loop[cell->alloc[k]](&c);
            pb_result_t *res = result_at(cell, r, k, i);
            res->use = usage_since(u0);
            res->t_begin = c.t_begin;
            res->t_end = c.t_end;
            res->phase_ns[0] = c.phase_ns[0];
            res->phase_ns[1] = c.phase_ns[1];
            res->mem = c.mem;
            res->near[0] = c.near[0];
            res->near[1] = c.near[1];
        }
    rc = 0;
out:
    pd_region_destroy(region);
    if (attached)
        pool_detach();
    if (scratch != NULL)
        munmap(scratch, PB_SCRATCH_SLOTS * sizeof(void *));
    return rc;
}

typedef struct pb_thread_arg_s {
    const pb_cell_t *cell;
    unsigned worker;
    int rc;
} pb_thread_arg_t;

static void *pb_thread(void *arg)
{
    pb_thread_arg_t *t = arg;
    t->rc = pb_worker(t->cell, t->worker);
    return NULL;
}

/* -T: worker 0 is this thread, the others are new threads. */
static int run_threads(const pb_cell_t *cell)
{
    unsigned n = cell->o->workers;
    pthread_t tid[PB_MAX_WORKERS];
    pb_thread_arg_t arg[PB_MAX_WORKERS];
    cpu_set_t saved;
    bool restore = sched_getaffinity(0, sizeof saved, &saved) == 0;
    int rc = 0;

    for (unsigned i = 1; i < n; i++) {
        arg[i] = (pb_thread_arg_t){ cell, i, 0 };
        int e = pthread_create(&tid[i], NULL, pb_thread, &arg[i]);
        if (e != 0) {
            /* The barrier counts n; without every thread nobody can pass. */
            fprintf(stderr, "poolbench: pthread_create: %s\n", strerror(e));
            exit(1);
        }
    }
    rc = pb_worker(cell, 0);
    for (unsigned i = 1; i < n; i++) {
        pthread_join(tid[i], NULL);
        rc |= arg[i].rc;
    }
    if (restore)
        sched_setaffinity(0, sizeof saved, &saved);
    return rc;
}

/* -P: one child per worker.  A child that dies abnormally leaves the
 * others waiting at a barrier, so they are killed (by pid) and the cell
 * fails. */
static int run_processes(const pb_cell_t *cell)
{
    unsigned n = cell->o->workers;
    pid_t pid[PB_MAX_WORKERS];
    unsigned live = 0;
    int rc = 0;

    fflush(NULL);
    for (unsigned i = 0; i < n; i++) {
        pid[i] = fork();
        if (pid[i] == 0)
            _exit(pb_worker(cell, i));
        if (pid[i] < 0) {
            fprintf(stderr, "poolbench: fork: %s\n", strerror(errno));
            for (unsigned j = 0; j < i; j++)
                kill(pid[j], SIGKILL);
            for (unsigned j = 0; j < i; j++)
                waitpid(pid[j], NULL, 0);
            return 1;
        }
        live++;
    }
    while (live > 0) {
        int status;
        pid_t p = waitpid(-1, &status, 0);
        if (p < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        unsigned i = 0;
        while (i < n && pid[i] != p)
            i++;
        if (i == n)
            continue;
        pid[i] = 0;
        live--;
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
            continue;
        if (WIFSIGNALED(status))
            fprintf(stderr, "poolbench: worker %u (pid %d) died of signal %d\n", i, (int)p,
                    WTERMSIG(status));
        else if (WEXITSTATUS(status) != 1)
            fprintf(stderr, "poolbench: worker %u (pid %d) exited with %d\n", i, (int)p,
                    WEXITSTATUS(status));
        rc = 1;
        for (unsigned j = 0; j < n; j++)
            if (pid[j] > 0)
                kill(pid[j], SIGKILL);
    }
    return rc;
}

/* Set up the shared memory for a cell and run its workers. */
static int run_cell(pb_cell_t *cell)
{
    const pb_options_t *o = cell->o;
    size_t nres = (size_t)cell->nruns * (size_t)cell->nalloc * o->workers;
    cell->sh_size = sizeof(pb_shared_t) + nres * sizeof(pb_result_t);
    cell->sh = shared_map(cell->sh_size);
    if (cell->sh == NULL) {
        fprintf(stderr, "poolbench: mmap: %s\n", strerror(errno));
        return 1;
    }
    int e = barrier_init_shared(&cell->sh->start, o->workers);
    if (e == 0)
        e = barrier_init_shared(&cell->sh->inner, o->workers);
    if (e != 0) {
        fprintf(stderr, "poolbench: pthread_barrier_init: %s\n", strerror(e));
        return 1;
    }
    return o->processes ? run_processes(cell) : run_threads(cell);
}

static void cell_free(pb_cell_t *cell)
{
    if (cell->sh != NULL) {
        pthread_barrier_destroy(&cell->sh->start);
        pthread_barrier_destroy(&cell->sh->inner);
        munmap(cell->sh, cell->sh_size);
        cell->sh = NULL;
    }
}

/* ------------------------------------------------------------------------ */
/* Summaries and output                                                      */
/* ------------------------------------------------------------------------ */

typedef struct pb_summary_s {
    double median, min, max;    /* ns per pair: runs' mean over workers */
    double wall_ms;             /* median over runs: first start to last end */
    double faults_per_kpair;    /* median over runs, all workers */
    double cpu_ns, sys_ns;      /* per pair, the runs' mean over workers, median:
                                   CPU time, and of it system time */
    double vcsw_per_kpair;      /* median over runs, all workers */
} pb_summary_t;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median_of(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* phase -1: the whole timed part; 0, 1: batch's malloc and free phases. */
static pb_summary_t summarise(const pb_cell_t *cell, int k, int phase)
{
    int runs = cell->o->runs;
    unsigned n = cell->o->workers;
    double ns[1000], wall[1000], flt[1000], cpu[1000], sys[1000], vcsw[1000];
    pb_summary_t s;

    for (int r = 1; r <= runs; r++) {
        double sum = 0;
        pb_usage_t u = { 0 };
        int64_t first = INT64_MAX, last = INT64_MIN;
        for (unsigned i = 0; i < n; i++) {
            const pb_result_t *res = result_at(cell, r, k, i);
            int64_t t = phase < 0 ? res->t_end - res->t_begin : res->phase_ns[phase];
            sum += (double)t / (double)cell->pairs;
            u.minflt += res->use.minflt;
            u.nvcsw += res->use.nvcsw;
            u.cpu_ns += res->use.cpu_ns;
            u.sys_ns += res->use.sys_ns;
            if (res->t_begin < first)
                first = res->t_begin;
            if (res->t_end > last)
                last = res->t_end;
        }
        double all = (double)cell->pairs * n;
        ns[r - 1] = sum / n;
        wall[r - 1] = (double)(last - first) / 1e6;
        flt[r - 1] = (double)u.minflt * 1000 / all;
        vcsw[r - 1] = (double)u.nvcsw * 1000 / all;
        cpu[r - 1] = (double)u.cpu_ns / all;
        sys[r - 1] = (double)u.sys_ns / all;
    }
    s.median = median_of(ns, runs);
    s.min = ns[0];
    s.max = ns[runs - 1];
    s.wall_ms = median_of(wall, runs);
    s.faults_per_kpair = median_of(flt, runs);
    s.vcsw_per_kpair = median_of(vcsw, runs);
    s.cpu_ns = median_of(cpu, runs);
    s.sys_ns = median_of(sys, runs);
    return s;
}

/* frag's figures from the last run: each process's own under -P, summed
 * (PSS sums to the footprint; RSS and RssShmem count shared pages once per
 * process); the one process's under -T. */
static pb_mem_t memory_of(const pb_cell_t *cell, int k)
{
    pb_mem_t m = { 0, 0, 0, 0, true, true };
    for (unsigned i = 0; i < cell->o->workers; i++) {
        const pb_mem_t *w = &result_at(cell, cell->nruns - 1, k, i)->mem;
        if (!w->valid)
            continue;
        m.rss_kb += w->rss_kb;
        m.pss_kb += w->pss_kb;
        m.pss_shmem_kb += w->pss_shmem_kb;
        m.rss_shmem_kb += w->rss_shmem_kb;
        m.big_ok = m.big_ok && w->big_ok;
    }
    return m;
}

/* thrash's count from the last run, where its addresses are comparable:
 * one process's threads, or the pool's arena (at one address in every
 * process); NULL otherwise. */
static const int *near_of(const pb_cell_t *cell, int k)
{
    const int *near = result_at(cell, cell->nruns - 1, k, 0)->near;
    if (near[0] < 0 || (cell->o->processes && cell->alloc[k] != PB_POOL))
        return NULL;
    return near;
}

static const char *arm_name(const pb_options_t *o, int a)
{
    return a == PB_MALLOC && o->label != NULL ? o->label : pb_allocator_name[a];
}

/* Allocations per request as the output gives them: the cell's cut, or
 * heavy's own 95 (a workload that has a region arm but is not cut is a
 * request in itself); 0 where there are no requests. */
static unsigned per_request(const pb_cell_t *cell)
{
    if (cell->request > 0)
        return cell->request;
    const pb_workload_t *w = cell->w;
    return !w->requests && w->loop[PB_REGION] != NULL ? (unsigned)w->round : 0;
}

/* The workload as the tables name it: "fixed16/r100" when it was cut into
 * requests of 100 allocations, so that the two shapes are never mixed up. */
static const char *shape_name(const pb_cell_t *cell)
{
    static char buf[64];
    if (cell->request == 0)
        return cell->w->name;
    snprintf(buf, sizeof buf, "%s/r%u", cell->w->name, cell->request);
    return buf;
}

static void print_header(const pb_options_t *o)
{
    const char *preload = getenv("LD_PRELOAD");
    if (o->csv) {
        printf("workload,phase,allocator,ld_preload,mode,workers,runs,pairs_per_worker,"
               "request,median_ns,min_ns,max_ns,wall_ms,faults_per_kpair,cpu_ns,sys_ns,"
               "vcsw_per_kpair,ratio_to_malloc,rss_kb,pss_kb,pss_shmem_kb,rss_shmem_kb,"
               "big_10mib,near64,near128,note\n");
    } else if (o->markdown) {
        printf("| workload | phase | allocator | workers | ns/pair | min–max | wall ms | "
               "faults/kpair | CPU ns | sys ns | vcsw/kpair | ÷ malloc | RSS kB | PSS kB | "
               "Shmem kB | 10 MiB | near 64 / 128 B |\n"
               "|---|---|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|---|--:|\n");
    } else {
        printf("poolbench: %s %u, %d runs per cell, ns per malloc+free pair per worker, "
               "median (min-max); malloc is %s\n", o->processes ? "-P" : "-T", o->workers,
               o->runs, preload != NULL && *preload ? preload : "glibc");
        for (int k = 0; k < o->nalloc; k++)
            if (o->alloc[k] == PB_REGION)
                printf("poolbench: region blocks of %zu B from malloc, reset after every "
                       "request; NAME/rN: NAME cut into requests of N allocations for "
                       "every arm\n", o->region_block ? o->region_block
                                                     : (size_t)PD_REGION_BLOCK_DEFAULT);
    }
}

/* One output line for allocator arm k of a cell (s == NULL: skipped,
 * note says why; near: thrash's count, or NULL). */
static void print_row(const pb_cell_t *cell, int a, const char *phase, const pb_summary_t *s,
                      double ratio, const pb_mem_t *m, const int *near, const char *note)
{
    const pb_options_t *o = cell->o;
    const char *preload = getenv("LD_PRELOAD");
    char mode[16];
    snprintf(mode, sizeof mode, "%s%u", o->processes ? "P" : "T", o->workers);

    if (o->csv) {
        printf("%s,%s,%s,%s,%s,%u,%d,%" PRIu64 ",", shape_name(cell), phase, arm_name(o, a),
               a != PB_POOL && a != PB_NONE && preload ? preload : "", mode, o->workers,
               o->runs, cell->pairs);
        if (per_request(cell) > 0)
            printf("%u", per_request(cell));
        printf(",");
        if (s != NULL)
            printf("%.2f,%.2f,%.2f,%.1f,%.2f,%.2f,%.2f,%.3f,", s->median, s->min, s->max,
                   s->wall_ms, s->faults_per_kpair, s->cpu_ns, s->sys_ns, s->vcsw_per_kpair);
        else
            printf(",,,,,,,,");
        if (ratio > 0)
            printf("%.3f", ratio);
        if (m != NULL)
            printf(",%ld,%ld,%ld,%ld,%s", m->rss_kb, m->pss_kb, m->pss_shmem_kb,
                   m->rss_shmem_kb, m->big_ok ? "yes" : "no");
        else
            printf(",,,,,");
        if (near != NULL)
            printf(",%d,%d", near[0], near[1]);
        else
            printf(",,");
        printf(",%s\n", note != NULL ? note : "");
    } else if (o->markdown) {
        printf("| %s | %s | %s | %s %u | ", shape_name(cell), phase, arm_name(o, a),
               o->processes ? "-P" : "-T", o->workers);
        if (s != NULL)
            printf("%.2f | %.2f–%.2f | %.1f | %.2f | %.2f | %.2f | %.3f | ", s->median, s->min,
                   s->max, s->wall_ms, s->faults_per_kpair, s->cpu_ns, s->sys_ns,
                   s->vcsw_per_kpair);
        else
            printf("%s | | | | | | | ", note);
        if (ratio > 0)
            printf("%.3f", ratio);
        if (m != NULL)
            printf(" | %ld | %ld | %ld | %s |", m->rss_kb, m->pss_kb, m->rss_shmem_kb,
                   m->big_ok ? "yes" : "no");
        else
            printf(" | | | | |");
        if (near != NULL)
            printf(" %d / %d |\n", near[0], near[1]);
        else
            printf(" |\n");
    } else {
        printf("  %-14s %-6s %-8s ", shape_name(cell), phase, arm_name(o, a));
        if (s == NULL) {
            printf("skipped: %s\n", note);
            return;
        }
        printf("%8.2f ns (%.2f-%.2f)  wall %.1f ms  %.2f faults/kpair  cpu %.2f ns (sys %.2f)"
               "  %.3f vcsw/kpair", s->median, s->min, s->max, s->wall_ms, s->faults_per_kpair,
               s->cpu_ns, s->sys_ns, s->vcsw_per_kpair);
        if (ratio > 0)
            printf("  /malloc %.3f", ratio);
        if (m != NULL)
            printf("  RSS %ld kB PSS %ld kB Pss_Shmem %ld kB RssShmem %ld kB 10MiB %s",
                   m->rss_kb, m->pss_kb, m->pss_shmem_kb, m->rss_shmem_kb,
                   m->big_ok ? "yes" : "no");
        if (near != NULL)
            printf("  near: %d of worker 0's %d blocks within 64 B of another worker's, "
                   "%d within 128 B", near[0], PB_THRASH_OBJECTS, near[1]);
        printf("\n");
    }
}

static void print_cell(const pb_cell_t *cell)
{
    static const char *const phase_name[] = { "malloc", "free" };
    int nphase = cell->w->phases ? 3 : 1;

    for (int ph = -1; ph < nphase - 1; ph++) {
        pb_summary_t s[PB_N_ALLOCATORS];
        for (int k = 0; k < cell->nalloc; k++)
            s[k] = summarise(cell, k, ph);
        int mk = -1;
        for (int k = 0; k < cell->nalloc; k++)
            if (cell->alloc[k] == PB_MALLOC)
                mk = k;
        for (int k = 0; k < cell->nalloc; k++) {
            double ratio = mk >= 0 && cell->nalloc >= 2 ? s[k].median / s[mk].median : 0;
            pb_mem_t m;
            if (cell->w->memory)
                m = memory_of(cell, k);
            print_row(cell, cell->alloc[k], ph < 0 ? "all" : phase_name[ph], &s[k], ratio,
                      cell->w->memory ? &m : NULL, near_of(cell, k), NULL);
        }
    }
}

/* --per-run: every timed run's ns per pair and minor faults, worker by
 * worker, for effects that a median hides (a heap shared by processes
 * faults its pages into each process once, so its first runs cost more). */
static void print_runs(const pb_cell_t *cell)
{
    unsigned n = cell->o->workers;
    for (int k = 0; k < cell->nalloc; k++)
        for (int r = 1; r <= cell->o->runs; r++) {
            printf("    run %-3d %-8s ns/pair", r, arm_name(cell->o, cell->alloc[k]));
            for (unsigned i = 0; i < n; i++) {
                const pb_result_t *res = result_at(cell, r, k, i);
                printf(" %.2f", (double)(res->t_end - res->t_begin) / (double)cell->pairs);
            }
            printf("  faults");
            for (unsigned i = 0; i < n; i++)
                printf(" %ld", result_at(cell, r, k, i)->use.minflt);
            printf("\n");
        }
}

/* A cell that cannot be measured gets a line per arm that says why; never
 * a number. */
static void print_skip(const pb_cell_t *cell, int a, const char *why)
{
    fprintf(stderr, "poolbench: %s with %s at %s %u skipped: %s\n", shape_name(cell),
            arm_name(cell->o, a), cell->o->processes ? "-P" : "-T", cell->o->workers, why);
    print_row(cell, a, "all", NULL, 0, NULL, NULL, why);
}

/* ------------------------------------------------------------------------ */
/* The pool's arena                                                          */
/* ------------------------------------------------------------------------ */

/* Create the arena once; attach to it only when this process's threads
 * use it (-T).  Under -P the children attach after fork. */
static int pb_pool_ready(bool attach)
{
    static bool created;
    int rc;
    if (!created) {
        rc = pool_create(POOL_HEAP_SIZE_DEFAULT);
        if (rc != 0) {
            fprintf(stderr, "poolbench: cannot create the pool's arena: %s\n", strerror(rc));
            return rc;
        }
        created = true;
    }
    if (attach && !pool_attached() && (rc = pool_attach()) != 0) {
        fprintf(stderr, "poolbench: cannot attach to the pool's arena: %s\n", strerror(rc));
        return rc;
    }
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Timed mode                                                                */
/* ------------------------------------------------------------------------ */

/* A workload's pairs per run times f, in whole rounds (whole requests). */
static uint64_t scaled(const pb_workload_t *w, uint64_t round, double f)
{
    uint64_t n = (uint64_t)((double)w->timed_pairs * f);
    n -= n % round;
    return n < round ? round : n;
}

/* Where the workload can be cut into requests: --request N, or the
 * default when a region runs it (a region frees only at a request's end,
 * and the other arms must then do the same to be compared with it). */
static unsigned request_of(const pb_options_t *o, const pb_workload_t *w, bool region)
{
    if (!w->requests)
        return 0;
    if (o->request > 0)
        return o->request;
    return region ? PB_REQUEST_DEFAULT : 0;
}

/* Run one workload on the allocators in alloc[] together (run k of each
 * before run k+1 of any, so a burst of noise hits them alike) and print. */
static int timed_cell(const pb_options_t *o, const pb_workload_t *w, const int *alloc, int n)
{
    pb_cell_t cell = { .o = o, .w = w, .nruns = o->runs + 1 };
    bool region = false;
    for (int k = 0; k < n; k++)
        region |= alloc[k] == PB_REGION && w->loop[PB_REGION] != NULL;
    cell.request = request_of(o, w, region);
    uint64_t round = cell.request > 0 ? cell.request : w->round;
    cell.pairs = scaled(w, round, o->scale);
    cell.warm_pairs = scaled(w, round, o->scale / 10);

    for (int k = 0; k < n; k++) {
        const char *why = NULL;
        if (w->loop[alloc[k]] == NULL && alloc[k] == PB_REGION)
            why = "a region frees only at a request's end; this workload frees blocks "
                  "one by one";
        else if (w->loop[alloc[k]] == NULL)
            why = "this workload has no such arm";
        else if (w->memory && alloc[k] == PB_NONE)
            why = "the do-nothing allocator holds no memory to measure";
        else if (o->workers < w->min_workers)
            why = "needs at least 2 workers (blocks go from one to another)";
        else if (w->min_workers > 1 && o->processes && alloc[k] != PB_POOL)
            why = "impossible: each process's malloc heap is private and no worker "
                  "can free another's block";
        if (why != NULL) {
            print_skip(&cell, alloc[k], why);
            continue;
        }
        cell.alloc[cell.nalloc++] = alloc[k];
    }
    if (cell.nalloc == 0)
        return 0;
    if (cell_uses(&cell, PB_POOL) && pb_pool_ready(!o->processes) != 0)
        return 1;
    int rc = run_cell(&cell);
    if (rc == 0) {
        print_cell(&cell);
        if (o->per_run)
            print_runs(&cell);
    } else
        fprintf(stderr, "poolbench: %s failed; no figures\n", w->name);
    cell_free(&cell);
    fflush(stdout);
    return rc;
}

static int pb_timed(const pb_options_t *o)
{
    static const int both[] = { PB_POOL, PB_MALLOC };
    const int *alloc = o->nalloc > 0 ? o->alloc : both;
    int n = o->nalloc > 0 ? o->nalloc : 2;
    print_header(o);
    int rc = 0;
    for (size_t wi = 0; wi < pb_n_workloads; wi++) {
        const pb_workload_t *w = &pb_workloads[wi];
        if (o->workload != NULL && o->workload != w)
            continue;
        /* Memory figures are the process's: one allocator at a time, or
         * each would count what the other holds. */
        if (w->memory) {
            for (int k = 0; k < n; k++)
                rc |= timed_cell(o, w, &alloc[k], 1);
        } else {
            rc |= timed_cell(o, w, alloc, n);
        }
    }
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Counted mode                                                              */
/* ------------------------------------------------------------------------ */

/* --pairs: exactly o->pairs pairs in this thread and one line. */
static int pb_counted(const pb_options_t *o)
{
    int a = o->nalloc > 0 ? o->alloc[0] : PB_MALLOC;
    const pb_workload_t *w = o->workload;
    if (!w->counted || w->loop[a] == NULL) {
        fprintf(stderr, "poolbench: --pairs does not run %s%s\n", w->name,
                a == PB_REGION ? " on a region (it frees blocks one by one)"
                               : " (it needs workers, measures memory or is timed only)");
        return 2;
    }
    if (a == PB_POOL && pb_pool_ready(true) != 0)
        return 1;
    void **scratch = mmap(NULL, PB_SCRATCH_SLOTS * sizeof(void *), PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (scratch == MAP_FAILED) {
        fprintf(stderr, "poolbench: mmap: %s\n", strerror(errno));
        return 1;
    }
    pb_ctx_t c = { .pairs = o->pairs, .seq = 1, .scratch = scratch,
                   .request = request_of(o, w, a == PB_REGION) };
    if (a == PB_REGION && (c.region = pd_region_create(o->region_block)) == NULL) {
        fprintf(stderr, "poolbench: cannot create a region: %s\n", strerror(errno));
        munmap(scratch, PB_SCRATCH_SLOTS * sizeof(void *));
        return 1;
    }
    w->loop[a](&c);
    pd_region_destroy(c.region);
    munmap(scratch, PB_SCRATCH_SLOTS * sizeof(void *));
    printf("poolbench: %s %s %" PRIu64 " pairs", w->name, pb_allocator_name[a], o->pairs);
    if (c.request > 0)
        printf(" in requests of %u", c.request);
    printf("\n");
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Stats mode                                                                */
/* ------------------------------------------------------------------------ */

#define PB_MAX_CLASSES 256

typedef struct pb_class_counters_s {
    uint64_t size, allocs, misses, fetches, releases;
    uint64_t acquired, contended, wait_ns, held_ns;
} pb_class_counters_t;

typedef struct pb_counters_s {
    pb_class_counters_t cls[PB_MAX_CLASSES];
    uint64_t ph_allocs, ph_madvise, ph_acquired, ph_contended, ph_wait_ns, ph_held_ns;
} pb_counters_t;

/* The number after key in [from, to), or 0. */
static uint64_t json_u64(const char *from, const char *to, const char *key)
{
    const char *p = strstr(from, key);
    if (p == NULL || p >= to)
        return 0;
    return strtoull(p + strlen(key), NULL, 10);
}

/* Read the pool's counters through pool_stats_json: per class the fields
 * that explain contention, and the page heap's lock. */
static int counters_read(pb_counters_t *c)
{
    static char buf[1 << 20];
    size_t need = pool_stats_json(buf, sizeof buf);
    if (need >= sizeof buf) {
        fprintf(stderr, "poolbench: pool_stats_json needs %zu bytes\n", need);
        return 1;
    }
    memset(c, 0, sizeof *c);
    const char *ph = strstr(buf, "\"pageheap\":{");
    if (ph != NULL) {
        const char *end = strstr(ph, "}}");
        end = end != NULL ? end : buf + need;
        c->ph_allocs = json_u64(ph, end, "\"allocs\":");
        c->ph_madvise = json_u64(ph, end, "\"madvise_remove\":");
        c->ph_acquired = json_u64(ph, end, "\"acquired\":");
        c->ph_contended = json_u64(ph, end, "\"contended\":");
        c->ph_wait_ns = json_u64(ph, end, "\"wait_ns\":");
        c->ph_held_ns = json_u64(ph, end, "\"held_ns\":");
    }
    for (const char *p = strstr(buf, "{\"class\":"); p != NULL;
         p = strstr(p + 1, "{\"class\":")) {
        unsigned long cls = strtoul(p + 9, NULL, 10);
        const char *end = strstr(p, "}}");
        if (cls >= PB_MAX_CLASSES || end == NULL)
            continue;
        pb_class_counters_t *k = &c->cls[cls];
        k->size = json_u64(p, end, "\"size\":");
        k->allocs = json_u64(p, end, "\"allocs\":");
        k->misses = json_u64(p, end, "\"tcache_misses\":");
        k->fetches = json_u64(p, end, "\"central_fetches\":");
        k->releases = json_u64(p, end, "\"central_releases\":");
        k->acquired = json_u64(p, end, "\"acquired\":");
        k->contended = json_u64(p, end, "\"contended\":");
        k->wait_ns = json_u64(p, end, "\"wait_ns\":");
        k->held_ns = json_u64(p, end, "\"held_ns\":");
    }
    return 0;
}

static void print_counters(const pb_cell_t *cell, const pb_counters_t *a,
                           const pb_counters_t *b)
{
    const pb_options_t *o = cell->o;
    printf("\n%s, %s %u, one run of %" PRIu64 " pairs per worker: the pool's counters "
           "(differences)\n", shape_name(cell), o->processes ? "-P" : "-T", o->workers,
           cell->pairs);
    printf("  %5s %6s %10s %8s %9s %9s %10s %10s %9s %9s\n", "class", "size", "allocs",
           "tc-hit%", "fetches", "releases", "lock-acq", "contended", "wait-ms", "held-ms");
    for (unsigned i = 0; i < PB_MAX_CLASSES; i++) {
        const pb_class_counters_t *x = &a->cls[i], *y = &b->cls[i];
        uint64_t allocs = y->allocs - x->allocs, misses = y->misses - x->misses;
        uint64_t acq = y->acquired - x->acquired;
        if (allocs == 0 && acq == 0)
            continue;
        printf("  %5u %6" PRIu64 " %10" PRIu64 " %8.2f %9" PRIu64 " %9" PRIu64 " %10" PRIu64
               " %10" PRIu64 " %9.2f %9.2f\n", i, y->size, allocs,
               allocs ? 100.0 * (double)(allocs - misses) / (double)allocs : 0.0,
               y->fetches - x->fetches, y->releases - x->releases, acq,
               y->contended - x->contended, (double)(y->wait_ns - x->wait_ns) / 1e6,
               (double)(y->held_ns - x->held_ns) / 1e6);
    }
    uint64_t ph_acq = b->ph_acquired - a->ph_acquired, ph_held = b->ph_held_ns - a->ph_held_ns;
    printf("  page heap: %" PRIu64 " span allocations, %" PRIu64 " MADV_REMOVE calls, lock %"
           PRIu64 " acquired, %" PRIu64 " contended, %.2f ms waiting, %.2f ms held (%.0f ns "
           "per acquisition)\n",
           b->ph_allocs - a->ph_allocs, b->ph_madvise - a->ph_madvise, ph_acq,
           b->ph_contended - a->ph_contended, (double)(b->ph_wait_ns - a->ph_wait_ns) / 1e6,
           (double)ph_held / 1e6, ph_acq ? (double)ph_held / (double)ph_acq : 0.0);
}

/* --stats: every selected workload once on the pool, untimed, between two
 * readings of its counters. */
static int pb_stats(const pb_options_t *o)
{
    if (!POOL_CONFIG_STATS) {
        fprintf(stderr, "poolbench: --stats needs a build configured with "
                "--enable-pool-stats\n");
        return 2;
    }
    if (o->nalloc > 1 || (o->nalloc == 1 && o->alloc[0] != PB_POOL)) {
        fprintf(stderr, "poolbench: --stats reads the pool's counters: --allocator pool "
                "only\n");
        return 2;
    }
    if (pb_pool_ready(!o->processes) != 0)
        return 1;
    int rc = 0;
    for (size_t wi = 0; wi < pb_n_workloads; wi++) {
        const pb_workload_t *w = &pb_workloads[wi];
        if (o->workload != NULL && o->workload != w)
            continue;
        if (o->workers < w->min_workers) {
            printf("\n%s: skipped, needs at least 2 workers\n", w->name);
            continue;
        }
        pb_options_t once = *o;
        once.runs = 0;
        pb_cell_t cell = { .o = &once, .w = w, .alloc = { PB_POOL }, .nalloc = 1, .nruns = 1,
                           .request = request_of(o, w, false) };
        cell.pairs = cell.warm_pairs =
            scaled(w, cell.request > 0 ? cell.request : w->round, o->scale);
        static pb_counters_t before, after;
        if (counters_read(&before) != 0)
            return 1;
        int e = run_cell(&cell);
        cell_free(&cell);
        if (e != 0 || counters_read(&after) != 0) {
            rc = 1;
            continue;
        }
        print_counters(&cell, &before, &after);
    }
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Command line                                                              */
/* ------------------------------------------------------------------------ */

static void usage(FILE *out)
{
    fprintf(out,
            "usage: poolbench [--workload NAME] [--allocator ARM[,ARM...]]\n"
            "                 [-P N | -T N] [--runs R] [--scale F] [--label NAME]\n"
            "                 [--request N] [--region-block BYTES]\n"
            "                 [--csv | --markdown | --per-run]\n"
            "       poolbench --workload NAME --pairs N [--allocator ARM] [--request N]\n"
            "                 [--region-block BYTES]\n"
            "       poolbench --stats [--workload NAME] [-P N | -T N] [--scale F] [--request N]\n"
            "\n"
            "ARM is pool, malloc, region or none.\n"
            "Timed mode (no --pairs): pool and malloc, or the --allocator list, each R\n"
            "times (default 5) after a warm-up, in N worker processes sharing the\n"
            "arena (-P N) or N threads (-T N; default -T 1), worker i pinned to CPU\n"
            "i mod the online CPUs; ns per malloc+free pair per worker as median\n"
            "(min-max), the median wall time from the first worker's start to the\n"
            "last one's end, and per pair (the workers' mean) minor faults, CPU time,\n"
            "of it system time (sampled at the kernel's tick: runs of many ms only),\n"
            "and voluntary context switches (waits that blocked, as on a contended\n"
            "lock).  --scale F multiplies every workload's pairs per run.\n"
            "--label NAME names the malloc arm in the output (e.g. jemalloc).\n"
            "--per-run adds each timed run's ns per pair and minor faults, worker by\n"
            "worker.\n"
            "--pairs N: exactly N pairs of one workload in this thread (default\n"
            "allocator: malloc) and one line, for instruction counts under callgrind.\n"
            "--csv prints a row per cell and arm, --markdown a table.\n"
            "--stats (a build configured with --enable-pool-stats, never timed): each\n"
            "workload once on the pool, then per size class its allocations, thread-\n"
            "cache hit rate, central fetches and releases, lock acquisitions, contended\n"
            "ones, time waiting and time held; and the page heap's span allocations,\n"
            "MADV_REMOVE calls and lock time held per acquisition.\n"
            "pingpong and prodcons need 2 workers or more; under -P only the pool can\n"
            "run them (a private heap cannot free another process's block), and any\n"
            "other arm gets a row that says so, never a number.\n"
            "'malloc' is glibc unless LD_PRELOAD puts another allocator there;\n"
            "'region' bumps a pointer in a region per worker (blocks of --region-block\n"
            "bytes, default %d, from malloc), frees nothing, and is reset at the end\n"
            "of every request; 'none' is the loop around a do-nothing allocator.\n"
            "--request N cuts fixed16, fixed64, random256 and random8k into requests\n"
            "of N allocations (1 to %d) for every arm: N allocated, then all freed\n"
            "(the region: reset).  A region needs requests, so with region among the\n"
            "arms these workloads are cut into requests of %d unless --request says\n"
            "otherwise; heavy is one request of 95 allocations either way.  Such rows\n"
            "name the workload NAME/rN.\n"
            "thrash is timed only (its cost is cache lines, which callgrind does not\n"
            "see); each arm's row adds how many of worker 0's %d blocks start within\n"
            "64 B and within 128 B of another worker's block, counted from their\n"
            "addresses after the workers allocated them in turn (under -P for the pool\n"
            "only: a private heap's addresses are its process's own).\n"
            "\nworkloads:\n", PD_REGION_BLOCK_DEFAULT, PB_SCRATCH_SLOTS, PB_REQUEST_DEFAULT,
            PB_THRASH_OBJECTS);
    for (size_t i = 0; i < pb_n_workloads; i++)
        fprintf(out, "  %-10s %s\n", pb_workloads[i].name, pb_workloads[i].what);
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

/* --allocator: a comma-separated list of arms, each at most once. */
static int parse_arms(const char *arg, pb_options_t *o)
{
    char buf[128];
    if (strlen(arg) >= sizeof buf) {
        fprintf(stderr, "poolbench: --allocator takes pool, malloc, region and none, "
                "comma-separated\n");
        return -1;
    }
    strcpy(buf, arg);
    o->nalloc = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t != NULL;
         t = strtok_r(NULL, ",", &save)) {
        int a = -1;
        for (int i = 0; i < PB_N_ALLOCATORS; i++)
            if (strcmp(t, pb_allocator_name[i]) == 0)
                a = i;
        if (a < 0) {
            fprintf(stderr, "poolbench: --allocator takes pool, malloc, region or none, "
                    "not '%s'\n", t);
            return -1;
        }
        for (int k = 0; k < o->nalloc; k++)
            if (o->alloc[k] == a) {
                fprintf(stderr, "poolbench: --allocator names %s twice\n", t);
                return -1;
            }
        o->alloc[o->nalloc++] = a;
    }
    if (o->nalloc == 0) {
        fprintf(stderr, "poolbench: --allocator needs at least one of pool, malloc, "
                "region, none\n");
        return -1;
    }
    return 0;
}

/* A program that preloads libshmpool.so in SHMPOOL_MODE=process gives its
 * forked children a private copy of the arena (libshmpool(7)), so their
 * malloc is no longer the pool. */
static bool preload_pool_copies(void)
{
    const char *pre = getenv("LD_PRELOAD"), *mode = getenv("SHMPOOL_MODE");
    return pre != NULL && strstr(pre, "libshmpool") != NULL && mode != NULL &&
           strcmp(mode, "process") == 0;
}

/* Whether an arm of o takes memory from malloc: malloc itself, and the
 * region, whose blocks come from it. */
static bool uses_malloc(const pb_options_t *o)
{
    if (o->nalloc == 0)
        return true;
    for (int k = 0; k < o->nalloc; k++)
        if (o->alloc[k] == PB_MALLOC || o->alloc[k] == PB_REGION)
            return true;
    return false;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {
        { "workload", required_argument, NULL, 'w' },
        { "pairs", required_argument, NULL, 'n' },
        { "allocator", required_argument, NULL, 'a' },
        { "runs", required_argument, NULL, 'r' },
        { "scale", required_argument, NULL, 's' },
        { "label", required_argument, NULL, 'l' },
        { "request", required_argument, NULL, 'q' },
        { "region-block", required_argument, NULL, 'B' },
        { "csv", no_argument, NULL, 'c' },
        { "markdown", no_argument, NULL, 'm' },
        { "stats", no_argument, NULL, 'S' },
        { "per-run", no_argument, NULL, 'R' },
        { "help", no_argument, NULL, 'h' },
        { NULL, 0, NULL, 0 },
    };
    pb_options_t o = { .runs = 5, .scale = 1.0, .workers = 1 };
    bool counted_workers = false;
    uint64_t v;
    char *end;
    int c;

    opterr = 0;
    while ((c = getopt_long(argc, argv, ":hP:T:", longopts, NULL)) != -1) {
        switch (c) {
        case 'w':
            for (size_t i = 0; i < pb_n_workloads; i++)
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
            if (parse_arms(optarg, &o) != 0)
                return 2;
            break;
        case 'q':
            if (!parse_count(optarg, PB_SCRATCH_SLOTS, &v)) {
                fprintf(stderr, "poolbench: --request takes a count of allocations from 1 "
                        "to %d, not '%s'\n", PB_SCRATCH_SLOTS, optarg);
                return 2;
            }
            o.request = (unsigned)v;
            break;
        case 'B':
            if (!parse_count(optarg, UINT64_C(1) << 30, &v)) {
                fprintf(stderr, "poolbench: --region-block takes a size in bytes from 1 "
                        "to 2^30, not '%s'\n", optarg);
                return 2;
            }
            o.region_block = (size_t)v;
            break;
        case 'r':
            if (!parse_count(optarg, 1000, &v)) {
                fprintf(stderr, "poolbench: --runs takes a count from 1 to 1000, "
                        "not '%s'\n", optarg);
                return 2;
            }
            o.runs = (int)v;
            break;
        case 's':
            errno = 0;
            o.scale = strtod(optarg, &end);
            if (errno != 0 || end == optarg || *end != '\0' || !(o.scale >= 0.0001) ||
                o.scale > 1000) {
                fprintf(stderr, "poolbench: --scale takes a factor from 0.0001 to 1000, "
                        "not '%s'\n", optarg);
                return 2;
            }
            break;
        case 'l':
            if (*optarg == '\0' || strpbrk(optarg, ",|\n") != NULL) {
                fprintf(stderr, "poolbench: --label takes a name without ',' or '|'\n");
                return 2;
            }
            o.label = optarg;
            break;
        case 'P':
        case 'T':
            if (!parse_count(optarg, PB_MAX_WORKERS, &v)) {
                fprintf(stderr, "poolbench: -%c takes a worker count from 1 to %d, "
                        "not '%s'\n", c, PB_MAX_WORKERS, optarg);
                return 2;
            }
            if (counted_workers) {
                fprintf(stderr, "poolbench: give one of -P and -T, once\n");
                return 2;
            }
            counted_workers = true;
            o.workers = (unsigned)v;
            o.processes = c == 'P';
            break;
        case 'c':
            o.csv = true;
            break;
        case 'm':
            o.markdown = true;
            break;
        case 'S':
            o.stats = true;
            break;
        case 'R':
            o.per_run = true;
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
    if (o.csv && o.markdown) {
        fprintf(stderr, "poolbench: --csv and --markdown exclude each other\n");
        return 2;
    }
    if (o.per_run && (o.csv || o.markdown || o.stats || o.pairs > 0)) {
        fprintf(stderr, "poolbench: --per-run adds lines to the timed text output; not "
                "with --csv, --markdown, --stats or --pairs\n");
        return 2;
    }
    if (o.request > 0 && o.workload != NULL && !o.workload->requests) {
        fprintf(stderr, "poolbench: --request cuts fixed16, fixed64, random256 and random8k "
                "into requests, not %s\n", o.workload->name);
        return 2;
    }
    pb_workloads_init();
    if (o.pairs > 0) {
        if (o.workload == NULL) {
            fprintf(stderr, "poolbench: --pairs needs --workload\n");
            return 2;
        }
        if (counted_workers || o.stats) {
            fprintf(stderr, "poolbench: --pairs runs in this thread: no -P, -T or "
                    "--stats\n");
            return 2;
        }
        if (o.nalloc > 1) {
            fprintf(stderr, "poolbench: --pairs counts one allocator\n");
            return 2;
        }
        return pb_counted(&o);
    }
    if (o.processes && preload_pool_copies() && uses_malloc(&o)) {
        fprintf(stderr, "poolbench: under SHMPOOL_MODE=process the -P children copy the "
                "arena and leave the pool; use --allocator pool for -P (a region's "
                "blocks come from malloc too)\n");
        return 2;
    }
    if (o.stats)
        return pb_stats(&o);
    if (POOL_CONFIG_STATS) {
        fprintf(stderr, "poolbench: this build keeps pool statistics (--enable-pool-stats), "
                "which would be timed too; use --stats here, or time a Release build\n");
        return 2;
    }
    return pb_timed(&o);
}

/* SPDX-License-Identifier: BSD-2-Clause */
/* linetrip: how long one cache line takes to go from one CPU to another
 * and back.  On a virtual machine the host decides which of its cores the
 * guest's CPUs run on, and moves them: two that share a cache hand a line
 * over in tens of ns, two on different dies in hundreds.  Every workload
 * that hands memory from one worker to another (pingpong, prodcons) runs
 * as fast as that allows, for every allocator alike, so bench/poolbench/rounds.sh
 * prints it beside every invocation.
 *
 * usage: linetrip [-n ROUNDTRIPS] [CPU CPU]   (default 200000, CPUs 0 and 1)
 * prints: NS ns a round trip between CPU A and CPU B (N times) */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "probe.h"

typedef struct lt_shared_s {
    _Atomic long turn __attribute__((aligned(64))); /* odd: the answerer's, even: the asker's */
    long n;
    int cpu;
    int err;
} lt_shared_t;

static void usage(FILE *f)
{
    fprintf(f, "usage: linetrip [-n ROUNDTRIPS] [CPU CPU]   (default 200000, CPUs 0 and 1)\n"
               "The ns one cache line takes from CPU A to CPU B and back, over ROUNDTRIPS.\n");
}

static void *answer(void *arg)
{
    lt_shared_t *sh = arg;
    sh->err = probe_pin(sh->cpu);
    /* The asker starts once this thread says it is pinned (turn 0) or
     * cannot be (-1), so a failed pin is reported, not waited on. */
    if (sh->err != 0) {
        atomic_store_explicit(&sh->turn, -1, memory_order_release);
        return NULL;
    }
    atomic_store_explicit(&sh->turn, 0, memory_order_release);
    for (long i = 0; i < sh->n; i++) {
        while (atomic_load_explicit(&sh->turn, memory_order_acquire) != 2 * i + 1)
            ;
        atomic_store_explicit(&sh->turn, 2 * i + 2, memory_order_release);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    static lt_shared_t sh;
    long n = 200000, cpu[2] = { 0, 1 };
    int i = 1;
    if (argc > 1 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
        usage(stdout);
        return 0;
    }
    if (i < argc && strcmp(argv[i], "-n") == 0) {
        if (i + 1 >= argc || probe_parse(argv[i + 1], 1, LONG_MAX / 2, &n) != 0) {
            fprintf(stderr, "linetrip: -n takes a count from 1\n");
            return 2;
        }
        i += 2;
    }
    if (probe_cpus("linetrip", "[-n ROUNDTRIPS] [CPU CPU]", argc, argv, i, cpu) != 0)
        return 2;

    int e = probe_pin((int)cpu[0]);
    if (e != 0) {
        fprintf(stderr, "linetrip: cannot run on CPU %ld: %s\n", cpu[0], strerror(e));
        return 1;
    }
    sh.n = n;
    sh.cpu = (int)cpu[1];
    atomic_store(&sh.turn, -2);
    pthread_t t;
    if ((e = pthread_create(&t, NULL, answer, &sh)) != 0) {
        fprintf(stderr, "linetrip: pthread_create: %s\n", strerror(e));
        return 1;
    }
    long v;
    while ((v = atomic_load_explicit(&sh.turn, memory_order_acquire)) == -2)
        sched_yield();
    if (v == -1) {
        pthread_join(t, NULL);
        fprintf(stderr, "linetrip: cannot run on CPU %ld: %s\n", cpu[1], strerror(sh.err));
        return 1;
    }
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long k = 0; k < n; k++) {
        atomic_store_explicit(&sh.turn, 2 * k + 1, memory_order_release);
        while (atomic_load_explicit(&sh.turn, memory_order_acquire) != 2 * k + 2)
            ;
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    pthread_join(t, NULL);
    double ns = ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) / (double)n;
    printf("%.1f ns a round trip between CPU %ld and CPU %ld (%ld times)\n", ns, cpu[0], cpu[1], n);
    return 0;
}

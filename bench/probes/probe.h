/* SPDX-License-Identifier: BSD-2-Clause */
/* probe.h: what the probes in bench/probes/ share -- a monotonic clock, a
 * comparison for qsort, a number from the command line checked against its
 * range, the pair of CPUs a probe runs on and pinning a thread to one.  Static inline, so that
 * each probe stays one program with nothing to link.  Include config.h (or
 * define _GNU_SOURCE) first.
 */
#ifndef POOLD_BENCH_PROBE_H
#define POOLD_BENCH_PROBE_H

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static inline double probe_now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

/* For qsort over doubles, ascending. */
static inline int probe_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* *out = s as a decimal long; 0, or -1 (and *out untouched) when s is not
 * one in [lo, hi]. */
static inline int probe_parse(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

/* The two CPUs a probe pairs, from the rest of its arguments argv[i..argc):
 * none leaves cpu[] as it is.  0, or the exit code 2 after one line on
 * stderr, which names prog and its synopsis, when they are not two
 * different CPU numbers. */
static inline int probe_cpus(const char *prog, const char *synopsis, int argc, char **argv,
                             int i, long cpu[2])
{
    if (argc - i == 2) {
        for (int k = 0; k < 2; k++)
            if (probe_parse(argv[i + k], 0, CPU_SETSIZE - 1, &cpu[k]) != 0) {
                fprintf(stderr, "%s: %s is not a CPU number\n", prog, argv[i + k]);
                return 2;
            }
    } else if (argc != i) {
        fprintf(stderr, "%s: %s: expected %s\n", prog, argv[i], synopsis);
        return 2;
    }
    if (cpu[0] == cpu[1]) {
        fprintf(stderr, "%s: the two CPUs must differ\n", prog);
        return 2;
    }
    return 0;
}

/* Pins the calling thread (not its process) to cpu: 0 or an errno value. */
static inline int probe_pin(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

#endif

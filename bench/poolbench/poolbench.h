/* SPDX-License-Identifier: BSD-2-Clause */
/* poolbench — what the workloads (pb-workloads.c) and the driver
 * (poolbench.c) share: the per-worker context a workload runs in, the ring
 * that carries blocks from one worker to the next, and the workload table.
 */
#ifndef POOLBENCH_H
#define POOLBENCH_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "region.h"

/* The allocators a workload runs on: the pool called directly, the
 * process's malloc, a per-request region (src/region.c, its blocks from
 * that malloc), and nothing (the loop's own cost). */
enum { PB_POOL, PB_MALLOC, PB_REGION, PB_NONE, PB_N_ALLOCATORS };

/* Allocations per request when a region runs a workload that has no
 * request of its own and --request does not say. */
#define PB_REQUEST_DEFAULT 100

/* An empty asm that takes the pointer: the compiler must assume it is used,
 * so it can neither drop a malloc/free pair nor merge iterations. */
#define PB_ESCAPE(p) __asm__ volatile("" : : "r"(p) : "memory")

/* thrash: the blocks each worker keeps and writes. */
#define PB_THRASH_OBJECTS 16

/* pingpong, prodcons: a single-producer single-consumer queue of blocks,
 * in memory every worker maps (MAP_SHARED for processes).  head and tail
 * only grow; each on its own cache line so producer and consumer do not
 * share one. */
#define PB_RING_SLOTS 1024
typedef struct pb_ring_s {
    _Atomic uint64_t head __attribute__((aligned(64)));  /* next slot to take */
    _Atomic uint64_t tail __attribute__((aligned(64)));  /* next slot to fill */
    _Atomic uint64_t done;              /* last run (pb_ctx_t.seq) whose producer
                                           finished: never reset, so no race */
    void *slot[PB_RING_SLOTS] __attribute__((aligned(64)));
} pb_ring_t;

/* frag: what the process holds once the churn is over. */
typedef struct pb_mem_s {
    long rss_kb, pss_kb;        /* smaps_rollup Rss and Pss */
    long pss_shmem_kb;          /* smaps_rollup Pss_Shmem: the arena's share */
    long rss_shmem_kb;          /* /proc/self/status RssShmem */
    bool big_ok;                /* a 10 MiB block could still be had */
    bool valid;                 /* this worker measured */
} pb_mem_t;

/* One worker's view of one run.  The driver fills the inputs; the
 * workload fills the outputs. */
typedef struct pb_ctx_s {
    unsigned worker;            /* 0 .. workers-1: picks the random stream */
    uint64_t pairs;             /* malloc+free pairs this run */
    uint64_t seq;               /* this run's number, from 1, same in every worker */
    unsigned request;           /* allocations per request, then all freed or the
                                   region reset; 0: the workload's own shape */
    pd_region_t *region;        /* the region arm: this worker's own region */
    void **scratch;             /* bookkeeping array, never from an allocator
                                   under test: PB_SCRATCH_SLOTS pointers */
    unsigned workers;           /* how many run together */
    pb_ring_t *rings;           /* one per worker; the workload says which
                                   connects whom: pingpong i to i+1, prodcons 0 to i;
                                   thrash: worker i's blocks in rings[i].slot */
    pthread_barrier_t *barrier; /* every worker: frag's between churn and measuring,
                                   thrash's between its allocations in turn */
    bool measure;               /* frag: this worker reads the process's figures */
    int64_t t_begin, t_end;     /* the timed part, CLOCK_MONOTONIC ns */
    int64_t phase_ns[2];        /* batch: all malloc phases, all free phases */
    pb_mem_t mem;               /* frag, when measure */
    int near[2];                /* thrash, worker 0: how many of its blocks lie
                                   within 64 and within 128 B of another worker's;
                                   -1: not counted (the driver's start value) */
} pb_ctx_t;

/* Also the largest request (--request). */
#define PB_SCRATCH_SLOTS 16384

typedef void (*pb_loop_fn)(pb_ctx_t *c);

typedef struct pb_workload_s {
    const char *name;
    const char *what;                   /* one line for --help */
    pb_loop_fn loop[PB_N_ALLOCATORS];   /* indexed by PB_POOL ...; NULL: no arm */
    uint64_t timed_pairs;               /* per worker per timed run */
    uint64_t round;                     /* pairs in one round (1: none) */
    unsigned min_workers;               /* pingpong and prodcons need a peer */
    bool phases;                        /* batch: malloc and free timed apart */
    bool memory;                        /* frag: reports pb_mem_t */
    bool counted;                       /* --pairs runs it in one thread */
    bool requests;                      /* --request N cuts it into requests of N
                                           allocations (heavy has its own: 95) */
} pb_workload_t;

/* The workloads, in the order --help and the tables list them. */
extern const pb_workload_t pb_workloads[];
extern const size_t pb_n_workloads;

/* CLOCK_MONOTONIC in nanoseconds: comparable across the worker processes. */
int64_t pb_now_ns(void);

/* Prepare tables the workloads read (heavy's sizes); call once before any
 * worker starts. */
void pb_workloads_init(void);

/* Wait for the peers' progress without burning a core they need: spin a
 * little, then yield.  *spins counts calls since the last progress. */
void pb_relax(unsigned *spins);

#endif /* POOLBENCH_H */

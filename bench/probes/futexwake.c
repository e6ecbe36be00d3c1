/* SPDX-License-Identifier: BSD-2-Clause */
/* futexwake: what a lock handoff costs between two processes on a
 * process-shared futex, against two threads on a private one.
 *
 * The pool's locks are process-shared robust mutexes in MAP_SHARED memory
 * (shm/lock.c), so a worker that sleeps on one is woken through a shared
 * futex, which the kernel finds by the page it lies in rather than by the
 * address alone; a threaded server on a private allocator uses private
 * mutexes and private futexes.  On 2 cores the report cannot run workers
 * side by side, so its model for 4, 16 and 64 cores is built from the
 * pieces measured here:
 *   - getppid: what entering the kernel costs at all, which a virtual
 *     machine's mitigations can make the larger part of every futex call;
 *   - FUTEX_WAKE with no waiter: the syscall alone, what an unlock pays
 *     when the lock word says someone may wait;
 *   - wake to run: a ping-pong of FUTEX_WAIT and FUTEX_WAKE between two
 *     CPUs, the round trip halved: one sleeper woken and running again;
 *   - a mutex lock and unlock, alone and with the other CPU taking the same
 *     mutex in a loop (ns an acquisition, and how often the owner changed).
 * Three arms: processes on a shared futex and a process-shared robust
 * mutex (the pool between workers); threads on the same (the pool between
 * threads: the arena is shared memory either way); threads on a private
 * futex and a default private mutex (a threaded server's own allocator).
 * Each run measures every arm in turn; the figures are the median and the
 * quartiles over the runs.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "probe.h"

/* One way of pairing two executors on one lock. */
typedef struct fw_arm_s {
    const char *name;
    bool processes;  /* fork a partner, else start a thread */
    bool private;    /* FUTEX_PRIVATE_FLAG and a default mutex in private memory */
} fw_arm_t;

static const fw_arm_t arms[] = {
    { "processes, shared", true, false },
    { "threads, shared", false, false },
    { "threads, private", false, true },
};
#define NARMS (sizeof arms / sizeof arms[0])

/* The rows of the output, in order. */
typedef enum {
    FW_SYSCALL,
    FW_WAKE,
    FW_PINGPONG,
    FW_UNCONTENDED,
    FW_CONTENDED,
    FW_HANDOFFS,
    FW_NTESTS
} fw_test_t;

static const char *const test_names[FW_NTESTS] = {
    "a syscall (getppid)",
    "FUTEX_WAKE, no waiter",
    "wake to run (ping-pong / 2)",
    "mutex lock+unlock, alone",
    "mutex lock+unlock, contended",
    "  owner changes a 100 acquisitions",
};

/* What the two executors share: MAP_SHARED for the shared arms, so that the
 * futex and the mutex live where the pool's do. */
typedef struct fw_shared_s {
    _Atomic uint32_t word __attribute__((aligned(64))); /* the ping-pong's futex */
    pthread_mutex_t mutex __attribute__((aligned(64)));
    long count;                                       /* under mutex */
    int last;                                         /* under mutex: who held it last */
    long handoffs;                                    /* under mutex */
    _Atomic int ready __attribute__((aligned(64)));   /* 1: partner pinned, -1: it cannot be */
    _Atomic int go;
    _Atomic int done; /* the partner's loop is over (its exit is not timed) */
    fw_test_t test;
    int futex_flags;
    long n;
    int cpu;
    int err;
} fw_shared_t;

static void usage(FILE *f)
{
    fprintf(f, "usage: futexwake [-f] [-n ITERATIONS] [-r RUNS] [CPU CPU]\n"
               "       (default 5000 iterations, 11 runs, CPUs 0 and 1)\n"
               "A lock handoff between two processes on a process-shared futex and robust\n"
               "mutex in MAP_SHARED memory, between two threads on the same, and between two\n"
               "threads on a private futex and mutex, in ns: a getppid syscall for scale;\n"
               "FUTEX_WAKE with no waiter; wake\n"
               "to run, a FUTEX_WAIT/FUTEX_WAKE ping-pong's round trip halved; a mutex\n"
               "lock+unlock alone and with the other CPU looping on it; how often the owner\n"
               "changed then.  Median [first quartile, third quartile] over RUNS.\n"
               "-f runs both sides SCHED_FIFO (needs CAP_SYS_NICE), so that a woken side\n"
               "runs at once instead of queueing behind the machine's other work: the\n"
               "regime of workers on cores of their own.\n");
}

static long futex(_Atomic uint32_t *w, int op, uint32_t val)
{
    return syscall(SYS_futex, w, op, val, NULL, NULL, 0);
}

static void die(const char *what, int err)
{
    fprintf(stderr, "futexwake: %s: %s\n", what, strerror(err));
    exit(1);
}

static void lock(fw_shared_t *sh)
{
    int rc = pthread_mutex_lock(&sh->mutex);
    if (rc != 0)
        die("pthread_mutex_lock", rc);
}

/* A critical section as short as one can be, which records whether the
 * lock came from the other executor. */
static void lock_loop(fw_shared_t *sh, int me)
{
    for (long i = 0; i < sh->n; i++) {
        lock(sh);
        sh->count++;
        if (sh->last != me) {
            sh->handoffs++;
            sh->last = me;
        }
        pthread_mutex_unlock(&sh->mutex);
    }
}

/* The other side of a two-executor test, on the second CPU. */
static void *partner(void *arg)
{
    fw_shared_t *sh = arg;
    sh->err = probe_pin(sh->cpu);
    atomic_store(&sh->ready, sh->err == 0 ? 1 : -1);
    if (sh->err != 0)
        return NULL;
    while (atomic_load_explicit(&sh->go, memory_order_acquire) == 0)
        ;
    if (sh->test == FW_PINGPONG) {
        for (long i = 0; i < sh->n; i++) {
            while (atomic_load(&sh->word) == 0)
                futex(&sh->word, FUTEX_WAIT | sh->futex_flags, 0);
            atomic_store(&sh->word, 0);
            futex(&sh->word, FUTEX_WAKE | sh->futex_flags, 1);
        }
    } else {
        lock_loop(sh, 1);
    }
    atomic_store_explicit(&sh->done, 1, memory_order_release);
    return NULL;
}

/* A partner process or thread; *tid gets the thread when not forked.
 * Returns the child's pid, or 0 for a thread. */
static pid_t start(const fw_arm_t *arm, fw_shared_t *sh, pthread_t *tid)
{
    atomic_store(&sh->ready, 0);
    atomic_store(&sh->go, 0);
    atomic_store(&sh->done, 0);
    if (arm->processes) {
        fflush(NULL);
        pid_t pid = fork();
        if (pid < 0)
            die("fork", errno);
        if (pid == 0) {
            partner(sh);
            _exit(sh->err == 0 ? 0 : 1);
        }
        return pid;
    }
    int rc = pthread_create(tid, NULL, partner, sh);
    if (rc != 0)
        die("pthread_create", rc);
    return 0;
}

/* False when the partner process did not exit 0. */
static bool finish(pid_t pid, pthread_t tid)
{
    int status;
    if (pid == 0)
        return pthread_join(tid, NULL) == 0;
    return waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static void init_mutex(const fw_arm_t *arm, fw_shared_t *sh)
{
    pthread_mutexattr_t at;
    int rc = pthread_mutexattr_init(&at);
    if (rc == 0 && !arm->private &&
        ((rc = pthread_mutexattr_setpshared(&at, PTHREAD_PROCESS_SHARED)) != 0 ||
         (rc = pthread_mutexattr_setrobust(&at, PTHREAD_MUTEX_ROBUST)) != 0))
        die("pthread_mutexattr", rc);
    if (rc != 0 || (rc = pthread_mutex_init(&sh->mutex, &at)) != 0)
        die("pthread_mutex_init", rc);
    pthread_mutexattr_destroy(&at);
}

/* One run of every test on one arm, in ns; the caller runs on cpu[0]. */
static void run_arm(const fw_arm_t *arm, fw_shared_t *sh, long n, int cpu1, double *out)
{
    memset(sh, 0, sizeof *sh);
    sh->futex_flags = arm->private ? FUTEX_PRIVATE_FLAG : 0;
    sh->n = n;
    sh->cpu = cpu1;
    init_mutex(arm, sh);

    double t0 = probe_now_ns();
    for (long i = 0; i < n; i++)
        syscall(SYS_getppid);
    out[FW_SYSCALL] = (probe_now_ns() - t0) / (double)n;

    t0 = probe_now_ns();
    for (long i = 0; i < n; i++)
        futex(&sh->word, FUTEX_WAKE | sh->futex_flags, 1);
    out[FW_WAKE] = (probe_now_ns() - t0) / (double)n;

    t0 = probe_now_ns();
    for (long i = 0; i < n; i++) {
        lock(sh);
        pthread_mutex_unlock(&sh->mutex);
    }
    out[FW_UNCONTENDED] = (probe_now_ns() - t0) / (double)n;

    static const fw_test_t paired[] = { FW_PINGPONG, FW_CONTENDED };
    for (size_t k = 0; k < sizeof paired / sizeof paired[0]; k++) {
        fw_test_t t = paired[k];
        pthread_t tid;
        sh->test = t;
        pid_t pid = start(arm, sh, &tid);
        int ready;
        while ((ready = atomic_load(&sh->ready)) == 0)
            sched_yield();
        if (ready < 0) {
            fprintf(stderr, "futexwake: cannot run on CPU %d: %s\n", cpu1, strerror(sh->err));
            exit(1);
        }
        t0 = probe_now_ns();
        atomic_store_explicit(&sh->go, 1, memory_order_release);
        if (t == FW_PINGPONG) {
            for (long i = 0; i < n; i++) {
                atomic_store(&sh->word, 1);
                futex(&sh->word, FUTEX_WAKE | sh->futex_flags, 1);
                while (atomic_load(&sh->word) == 1)
                    futex(&sh->word, FUTEX_WAIT | sh->futex_flags, 1);
            }
        } else {
            lock_loop(sh, 0);
        }
        while (atomic_load_explicit(&sh->done, memory_order_acquire) == 0)
            sched_yield();
        /* A round trip is two handoffs; the contended loops make 2n acquisitions. */
        out[t] = (probe_now_ns() - t0) / (double)(2 * n);
        if (!finish(pid, tid)) {
            fprintf(stderr, "futexwake: the partner process failed\n");
            exit(1);
        }
        if (t == FW_CONTENDED) {
            out[FW_HANDOFFS] = 100.0 * (double)sh->handoffs / (double)sh->count;
            if (sh->count != 2 * n) {
                fprintf(stderr, "futexwake: the mutex let %ld of %ld increments through\n",
                        sh->count, 2 * n);
                exit(1);
            }
        }
    }
    pthread_mutex_destroy(&sh->mutex);
}

/* The p-quantile of sorted v[0..n), interpolated between neighbours. */
static double quantile(const double *v, int n, double p)
{
    double at = p * (n - 1);
    int i = (int)at;
    return i + 1 < n ? v[i] + (at - i) * (v[i + 1] - v[i]) : v[i];
}

int main(int argc, char **argv)
{
    long n = 5000, runs = 11, cpu[2] = { 0, 1 };
    int i = 1;
    bool fifo = false;
    if (argc > 1 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
        usage(stdout);
        return 0;
    }
    if (argc > 1 && strcmp(argv[1], "-f") == 0) {
        fifo = true;
        i++;
    }
    for (; i + 1 < argc && argv[i][0] == '-'; i += 2) {
        if (strcmp(argv[i], "-n") == 0 && probe_parse(argv[i + 1], 1, LONG_MAX / 2, &n) == 0)
            continue;
        if (strcmp(argv[i], "-r") == 0 && probe_parse(argv[i + 1], 1, 1001, &runs) == 0)
            continue;
        fprintf(stderr, "futexwake: %s %s: -n takes a count from 1, -r one from 1 to 1001\n",
                argv[i], argv[i + 1]);
        return 2;
    }
    if (probe_cpus("futexwake", "[-f] [-n ITERATIONS] [-r RUNS] [CPU CPU]", argc, argv, i,
                   cpu) != 0)
        return 2;
    int e = probe_pin((int)cpu[0]);
    if (e != 0) {
        fprintf(stderr, "futexwake: cannot run on CPU %ld: %s\n", cpu[0], strerror(e));
        return 1;
    }
    /* Threads and children inherit the policy. */
    struct sched_param prio = { .sched_priority = 1 };
    if (fifo && sched_setscheduler(0, SCHED_FIFO, &prio) != 0)
        die("sched_setscheduler(SCHED_FIFO)", errno);

    fw_shared_t *mem[NARMS];
    for (size_t a = 0; a < NARMS; a++) {
        mem[a] = mmap(NULL, sizeof(fw_shared_t), PROT_READ | PROT_WRITE,
                      (arms[a].private ? MAP_PRIVATE : MAP_SHARED) | MAP_ANONYMOUS, -1, 0);
        if (mem[a] == MAP_FAILED)
            die("mmap", errno);
    }
    double *v = calloc((size_t)runs * NARMS * FW_NTESTS, sizeof *v);
    if (v == NULL)
        die("calloc", errno);
#define AT(r, a, t) v[(((size_t)(t) * NARMS + (a)) * (size_t)runs) + (size_t)(r)]
    for (long r = 0; r < runs; r++)
        for (size_t a = 0; a < NARMS; a++) {
            double out[FW_NTESTS];
            run_arm(&arms[a], mem[a], n, (int)cpu[1], out);
            for (int t = 0; t < FW_NTESTS; t++)
                AT(r, a, t) = out[t];
        }

    printf("futexwake: CPUs %ld and %ld%s, %ld iterations, median [quartiles] of %ld runs, ns\n",
           cpu[0], cpu[1], fifo ? ", SCHED_FIFO" : "", n, runs);
    printf("%-36s", "");
    for (size_t a = 0; a < NARMS; a++)
        printf("  %-22s", arms[a].name);
    printf("\n");
    for (int t = 0; t < FW_NTESTS; t++) {
        printf("%-36s", test_names[t]);
        for (size_t a = 0; a < NARMS; a++) {
            double *s = &AT(0, a, t);
            char cell[64];
            qsort(s, (size_t)runs, sizeof *s, probe_cmp_double);
            snprintf(cell, sizeof cell, "%.0f [%.0f %.0f]", quantile(s, (int)runs, 0.5),
                     quantile(s, (int)runs, 0.25), quantile(s, (int)runs, 0.75));
            printf("  %-22s", cell);
        }
        printf("\n");
    }
#undef AT
    free(v);
    return 0;
}

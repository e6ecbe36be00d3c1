/* line-round-trip: the time for a cache line to go from CPU 0 to CPU 1
 * and back, a million times: two hardware threads of one core hand a line
 * over in a few tens of ns, two cores in about a hundred or more.
 * cc -O2 -pthread -o line-round-trip line-round-trip.c */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <time.h>

#define N 1000000L

static _Atomic long flag __attribute__((aligned(64)));

static void pin(int cpu)
{
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    pthread_setaffinity_np(pthread_self(), sizeof s, &s);
}

static void *answer(void *arg)
{
    (void)arg;
    pin(1);
    for (long i = 0; i < N; i++) {
        while (atomic_load_explicit(&flag, memory_order_acquire) != 2 * i + 1)
            ;
        atomic_store_explicit(&flag, 2 * i + 2, memory_order_release);
    }
    return NULL;
}

int main(void)
{
    pthread_t t;
    struct timespec a, b;
    pthread_create(&t, NULL, answer, NULL);
    pin(0);
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (long i = 0; i < N; i++) {
        atomic_store_explicit(&flag, 2 * i + 1, memory_order_release);
        while (atomic_load_explicit(&flag, memory_order_acquire) != 2 * i + 2)
            ;
    }
    clock_gettime(CLOCK_MONOTONIC, &b);
    pthread_join(t, NULL);
    printf("round trip %.1f ns\n", ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) / N);
    return 0;
}

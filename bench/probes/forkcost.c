/* SPDX-License-Identifier: BSD-2-Clause */
/* forkcost: what fork() costs an attached process, per MiB of arena in use.
 *
 * A child of an attached process gets a private copy of what it inherited
 * from the arena (libshmpool(7), "Fork"): the parent waits in fork() until
 * the child has copied the pages of every span in use.  This measures that
 * wait against the same fork of a process whose heap is glibc's (the
 * kernel's copy-on-write, which copies nothing up front), with the same
 * bytes live and touched, and posix_spawn of /bin/true from both (which
 * runs no fork handlers and must stay cheap).  For each size: the median
 * and the range of ROUNDS forks, each child exiting at once; then the
 * slope, in microseconds per MiB in use, from the largest size.
 *
 * Usage: forkcost [MiB ...]   (default: 0 1 16 64 256)
 */
#include "config.h"

#include <errno.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "probe.h"
#include "shmpool.h"

#define ROUNDS 21
#define BLOCK ((size_t)64 << 10) /* 64 KiB: a size class, so many spans */

extern char **environ;

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

typedef struct timing_s {
    double median, min, max;
} timing_t;

static timing_t summarise(double *t)
{
    qsort(t, ROUNDS, sizeof *t, probe_cmp_double);
    return (timing_t){ t[ROUNDS / 2], t[0], t[ROUNDS - 1] };
}

/* fork() until it returns in the parent, the child exiting at once. */
static timing_t time_fork(void)
{
    double t[ROUNDS];
    for (int r = 0; r < ROUNDS; r++) {
        double t0 = now_us();
        pid_t pid = fork();
        if (pid == 0)
            _exit(0);
        t[r] = now_us() - t0;
        if (pid < 0 || waitpid(pid, NULL, 0) != pid) {
            perror("forkcost: fork");
            exit(1);
        }
    }
    return summarise(t);
}

static timing_t time_spawn(void)
{
    double t[ROUNDS];
    char *argv[] = { "/bin/true", NULL };
    for (int r = 0; r < ROUNDS; r++) {
        pid_t pid;
        double t0 = now_us();
        int rc = posix_spawn(&pid, argv[0], NULL, NULL, argv, environ);
        t[r] = now_us() - t0;
        if (rc != 0 || waitpid(pid, NULL, 0) != pid) {
            fprintf(stderr, "forkcost: posix_spawn: %s\n", strerror(rc));
            exit(1);
        }
    }
    return summarise(t);
}

typedef struct result_s {
    timing_t fork, spawn;
} result_t;

/* In a fresh process (so that heaps do not carry over): mib MiB live and
 * touched, from the arena or from glibc, then the timings. */
static result_t measure(unsigned mib, int pool, const int fd[2])
{
    pid_t pid = fork();
    if (pid == 0) {
        size_t n = ((size_t)mib << 20) / BLOCK;
        if (pool) {
            int rc = pool_create(((size_t)mib << 20) * 2 + ((size_t)256 << 20));
            if (rc == 0)
                rc = pool_attach();
            if (rc != 0) {
                fprintf(stderr, "forkcost: arena: %s\n", strerror(rc));
                _exit(1);
            }
        }
        for (size_t i = 0; i < n; i++) {
            char *p = pool ? pool_malloc(BLOCK) : malloc(BLOCK);
            if (p == NULL || (pool && !pool_owns(p)))
                _exit(1);
            memset(p, (int)i, BLOCK);
        }
        result_t r = { time_fork(), time_spawn() };
        if (write(fd[1], &r, sizeof r) != (ssize_t)sizeof r)
            _exit(1);
        _exit(0);
    }
    result_t r;
    int status;
    if (pid < 0 || read(fd[0], &r, sizeof r) != (ssize_t)sizeof r || waitpid(pid, &status, 0) != pid ||
        !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "forkcost: the measuring process failed\n");
        exit(1);
    }
    return r;
}

int main(int argc, char **argv)
{
    static const unsigned defaults[] = { 0, 1, 16, 64, 256 };
    unsigned sizes[16], nsizes = 0;
    if (argc == 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
        printf("usage: forkcost [MiB ...]   (0 to 4096 each, default: 0 1 16 64 256)\n"
               "fork() of a process attached to an arena with MiB in use, against the\n"
               "same fork of a glibc heap, and posix_spawn(/bin/true) from both: median\n"
               "[min-max] of %d in us, then the slope in us per MiB in use.\n", ROUNDS);
        return 0;
    }
    for (int i = 1; i < argc && nsizes < 16; i++) {
        char *end;
        unsigned long v = strtoul(argv[i], &end, 10);
        if (*end != '\0' || v > 4096) {
            fprintf(stderr, "forkcost: '%s' is not a size in MiB (0-4096)\n", argv[i]);
            return 2;
        }
        sizes[nsizes++] = (unsigned)v;
    }
    if (nsizes == 0) {
        memcpy(sizes, defaults, sizeof defaults);
        nsizes = sizeof defaults / sizeof defaults[0];
    }
    int fds[2];
    if (pipe(fds) != 0) {
        perror("forkcost: pipe");
        return 1;
    }
    printf("forkcost: fork() returning in the parent, and posix_spawn(/bin/true), in us:\n"
           "median [min-max] of %d, with MiB live in 64 KiB blocks\n\n", ROUNDS);
    printf("%6s  %-28s %-28s %-24s %-24s\n", "MiB", "fork, glibc heap", "fork, attached",
           "spawn, glibc heap", "spawn, attached");
    result_t last[2] = { 0 };
    unsigned last_mib = 0;
    for (unsigned k = 0; k < nsizes; k++) {
        result_t g = measure(sizes[k], 0, fds);
        result_t p = measure(sizes[k], 1, fds);
        char c[4][40];
        snprintf(c[0], sizeof c[0], "%.0f [%.0f-%.0f]", g.fork.median, g.fork.min, g.fork.max);
        snprintf(c[1], sizeof c[1], "%.0f [%.0f-%.0f]", p.fork.median, p.fork.min, p.fork.max);
        snprintf(c[2], sizeof c[2], "%.0f [%.0f-%.0f]", g.spawn.median, g.spawn.min, g.spawn.max);
        snprintf(c[3], sizeof c[3], "%.0f [%.0f-%.0f]", p.spawn.median, p.spawn.min, p.spawn.max);
        printf("%6u  %-28s %-28s %-24s %-24s\n", sizes[k], c[0], c[1], c[2], c[3]);
        if (sizes[k] >= last_mib) {
            last[0] = g;
            last[1] = p;
            last_mib = sizes[k];
        }
    }
    if (last_mib > 0)
        printf("\nattached fork beyond glibc's at %u MiB: %.1f us per MiB in use\n", last_mib,
               (last[1].fork.median - last[0].fork.median) / last_mib);
    return 0;
}

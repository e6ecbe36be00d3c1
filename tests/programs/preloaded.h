/* SPDX-License-Identifier: BSD-2-Clause */
/* For test programs that are not linked with libshmpool and run under
 * LD_PRELOAD=libshmpool.so (tests/programs/prefork.c, forkcontract.c,
 * giveback.c and sleeps.c; tests/pool/isolation.c, reapretry.c,
 * waitstopped.c, sleepsignal.c, reapempty.c and libdata.c): the two pool
 * calls they ask, found with dlsym so that a program run without the
 * library fails instead of passing on glibc, a child that holds blocks
 * until it is killed, the start of such a child or another, blocks taken
 * and freed for a cache to hold, a sleep and a clock in milliseconds, a
 * listening socket as a prefork master makes one.
 * Header only.
 */
#ifndef TESTS_PRELOADED_H
#define TESTS_PRELOADED_H

#include <dlfcn.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static bool (*pool_owns_p)(const void *);
static bool (*pool_attached_p)(void);

/* Find the pool and check that the calling process, the master, stayed
 * private as children mode keeps it.  False, with one line on stderr
 * naming prog, otherwise. */
static inline bool preloaded_master(const char *prog)
{
    pool_owns_p = (bool (*)(const void *))dlsym(RTLD_DEFAULT, "pool_owns");
    pool_attached_p = (bool (*)(void))dlsym(RTLD_DEFAULT, "pool_attached");
    if (pool_owns_p == NULL || pool_attached_p == NULL) {
        fprintf(stderr, "%s: libshmpool is not loaded (run with "
                "LD_PRELOAD=libshmpool.so SHMPOOL_MODE=children)\n", prog);
        return false;
    }
    if (pool_attached_p()) {
        fprintf(stderr, "%s: the master is attached; SHMPOOL_MODE=children "
                "keeps it private\n", prog);
        return false;
    }
    return true;
}

/* A forked child's life: with a hundred blocks of its own in the arena
 * (it attached at the fork), say so with a byte on ready_fd and wait to
 * be killed.  Exits 1 when it is not attached. */
static inline void preloaded_holder(int ready_fd)
{
    static char *blocks[100];
    for (int i = 0; i < 100; i++)
        if ((blocks[i] = malloc(100)) != NULL)
            memset(blocks[i], i, 100);
    if (!pool_attached_p() || write(ready_fd, "a", 1) != 1)
        _exit(1);
    for (;;)
        pause();
}

/* Make the pipe ready, fork a child that lives as life(ready[1]) says
 * (it must write a byte there once it is ready, and never return) and
 * dies with its parent (a parent that fails, or hangs and is ended, leaves
 * no child), and wait for its byte on ready[0]; the caller's other
 * children may say they are ready on the same pipe.  The child's pid, or
 * -1 when the pipe or the fork failed or the child never said it was
 * ready. */
static inline pid_t preloaded_start(int ready[2], void (*life)(int ready_fd))
{
    if (pipe(ready) != 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        life(ready[1]);
    }
    char c;
    if (pid < 0 || read(ready[0], &c, 1) != 1)
        return -1;
    return pid;
}

/* preloaded_start with a child that lives as preloaded_holder. */
static inline pid_t preloaded_start_holder(int ready[2])
{
    return preloaded_start(ready, preloaded_holder);
}

/* n blocks (at most 512) of size bytes taken, then freed, so that the
 * thread's cache holds something to give back.  False when one could not
 * be had. */
static inline bool preloaded_churn(int n, size_t size)
{
    /* volatile: a compiler that sees the pairs may drop them. */
    void *volatile p[512];
    int got = 0;
    while (got < n && got < 512 && (p[got] = malloc(size)) != NULL)
        got++;
    for (int i = 0; i < got; i++)
        free(p[i]);
    return got == n;
}

static inline void sleep_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

/* The monotonic clock in milliseconds, for a test's deadlines. */
static inline long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A blocking socket listening on the loopback, as a prefork master makes
 * it, its address in *sin; -1 if none could be made. */
static inline int preloaded_listener(struct sockaddr_in *sin)
{
    *sin = (struct sockaddr_in){ .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t len = sizeof *sin;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd >= 0 && (bind(fd, (struct sockaddr *)sin, sizeof *sin) != 0 || listen(fd, 8) != 0 ||
                    getsockname(fd, (struct sockaddr *)sin, &len) != 0)) {
        close(fd);
        return -1;
    }
    return fd;
}

#endif /* TESTS_PRELOADED_H */

/* SPDX-License-Identifier: BSD-2-Clause */
/* A heap bug of one process under LD_PRELOAD=libshmpool.so
 * SHMPOOL_MODE=children, as issue 24 found them, must stop that process
 * and leave the others' blocks alone.  The master (private) forks, per
 * case, a bystander B and a culprit A, both attached to one arena:
 *
 *  B allocates 8,192 blocks of 64 B, fills them with a pattern, frees every
 *    other one, gives its thread cache back as a poold worker does every
 *    second (pool_thread_scavenge, until the cache is empty), and keeps
 *    checking the rest until told to stop; then, A
 *    reaped (the master's waitpid does it), it allocates 24,576 more, past
 *    its own cache into what A's reap gave back, and checks that none is
 *    one of its live blocks and that these are still intact.
 *  A, by case:
 *    double        free(p); free(p)
 *    interior      free(p + 16) on a live 64-byte block
 *    forge-double  free(p); free(p); then writes the address of one of B's
 *                  live blocks into p and allocates twice
 *    forge-uaf     free(p); writes that address into p (a write after
 *                  free) and allocates twice
 *
 * Each case passes when A dies of SIGABRT with one line on stderr naming
 * the address it freed (forge-uaf: naming B's block, the bad link), never
 * got B's block, and B finds every live block intact.
 *
 * Then an overflow: A allocates 20,000 blocks of 64 B while B holds its
 * live ones, and none of A's may lie directly before one of B's in the
 * same span (64-byte blocks come in spans of one 8 KiB page; past a span's
 * end lies another span, anyone's).  Exit 0 and one line on stdout when
 * all pass; otherwise one line per failure on stderr and exit 1.  Built
 * with -fno-builtin: the compiler must keep every call.
 */
#include "config.h"

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../programs/pattern.h"
#include "../programs/preloaded.h"

#define NBLOCKS 8192
#define SIZE 64
#define SEED 0x1501a7e0u
#define OVERFLOW_BLOCKS 20000
#define SPAN_BYTES 8192 /* a span of the 64-byte class */

/* What the master shares with its two children (mapped before fork). */
typedef struct shared_s {
    volatile int ready;         /* B: its live blocks are listed */
    volatile int stop;          /* master: B checks once more and exits */
    volatile uintptr_t freed;   /* A: the address its bug is about */
    volatile uintptr_t got;     /* A: what its last malloc returned */
    volatile size_t adjacent;   /* A: its blocks right before one of B's */
    void *live[NBLOCKS / 2];    /* B's live blocks */
} shared_t;

static shared_t *sh;
/* Through a volatile pointer: the compiler sees no use after free. */
static void *volatile launder;

static void nap(void)
{
    struct timespec ts = { 0, 1000000 };
    nanosleep(&ts, NULL);
}

/* B's live blocks that lost their pattern. */
static size_t bad_blocks(void)
{
    size_t bad = 0;
    for (size_t i = 0; i < NBLOCKS / 2; i++)
        if (!pattern_intact(sh->live[i], SIZE, SEED + i))
            bad++;
    return bad;
}

static void bystander(void)
{
    static char *blocks[NBLOCKS];
    for (size_t i = 0; i < NBLOCKS; i++) {
        if ((blocks[i] = malloc(SIZE)) == NULL)
            _exit(2);
        if (!pool_owns_p(blocks[i]))
            _exit(3);
        pattern_fill(blocks[i], 0, SIZE, SEED + i / 2);
    }
    for (size_t i = 0; i < NBLOCKS; i++) {
        if (i % 2 == 0)
            sh->live[i / 2] = blocks[i];
        else
            free(blocks[i]);
    }
    void (*scavenge)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "pool_thread_scavenge");
    if (scavenge == NULL)
        _exit(3);
    /* Each gives three quarters of every bin back. */
    for (int i = 0; i < 16; i++)
        scavenge();
    sh->ready = 1;
    size_t bad = 0;
    while (!sh->stop && bad == 0) {
        bad = bad_blocks();
        nap();
    }
    if (bad != 0)
        _exit(1);
    for (size_t i = 0; i < 3 * NBLOCKS; i++) {
        char *p = malloc(SIZE);
        if (p == NULL)
            _exit(2);
        for (size_t k = 0; k < NBLOCKS / 2; k++)
            if (p == sh->live[k])
                _exit(4);
        memset(p, 'B', SIZE);
    }
    _exit(bad_blocks() == 0 ? 0 : 1);
}

/* A's bug; returning means it was not stopped. */
static void culprit(const char *how)
{
    char *p = malloc(SIZE);
    void *target = sh->live[NBLOCKS / 4];
    launder = p;
    sh->freed = (uintptr_t)p;
    if (strcmp(how, "double") == 0) {
        free(p);
        free(launder);
        sh->got = (uintptr_t)malloc(SIZE);
        sh->got = (uintptr_t)malloc(SIZE);
    } else if (strcmp(how, "interior") == 0) {
        sh->freed = (uintptr_t)(p + 16);
        free(p + 16);
        sh->got = (uintptr_t)malloc(SIZE);
    } else {
        free(p);
        if (strcmp(how, "forge-double") == 0) {
            free(launder);
        } else {
            sh->freed = (uintptr_t)target;
        }
        memcpy(launder, &target, sizeof target);
        sh->got = (uintptr_t)malloc(SIZE);
        sh->got = (uintptr_t)malloc(SIZE);
    }
    /* What request bytes would do with the block it got. */
    if (sh->got != 0)
        memset((void *)sh->got, 'A', SIZE);
}

static int by_address(const void *l, const void *r)
{
    uintptr_t a = *(const uintptr_t *)l, b = *(const uintptr_t *)r;
    return a < b ? -1 : a > b;
}

/* A's side of the overflow case: how many of its blocks lie directly
 * before one of B's live blocks in the same span, into sh->adjacent. */
static void neighbour(void)
{
    static uintptr_t live[NBLOCKS / 2];
    for (size_t i = 0; i < NBLOCKS / 2; i++)
        live[i] = (uintptr_t)sh->live[i];
    qsort(live, NBLOCKS / 2, sizeof live[0], by_address);
    size_t adjacent = 0;
    for (size_t i = 0; i < OVERFLOW_BLOCKS; i++) {
        uintptr_t p = (uintptr_t)malloc(SIZE), next = p + SIZE;
        if (p == 0)
            _exit(2);
        if (next % SPAN_BYTES != 0 &&
            bsearch(&next, live, NBLOCKS / 2, sizeof live[0], by_address) != NULL)
            adjacent++;
    }
    sh->adjacent = adjacent;
    _exit(0);
}

/* Start B for case `how`; its pid once its live blocks are listed, or -1. */
static pid_t start_bystander(const char *how)
{
    memset(sh, 0, sizeof *sh);
    pid_t b = fork();
    if (b == 0)
        bystander();
    while (!sh->ready) {
        int st;
        if (b < 0 || waitpid(b, &st, WNOHANG) != 0) {
            fprintf(stderr, "isolation: %s: the bystander did not start\n", how);
            return -1;
        }
        nap();
    }
    return b;
}

/* The overflow case; true when it passed. */
static bool run_overflow(void)
{
    pid_t b = start_bystander("overflow");
    if (b < 0)
        return false;
    pid_t a = fork();
    if (a == 0)
        neighbour();
    int sta = 0, stb = 0;
    waitpid(a, &sta, 0);
    sh->stop = 1;
    waitpid(b, &stb, 0);
    bool ok = WIFEXITED(sta) && WEXITSTATUS(sta) == 0 && WIFEXITED(stb) &&
              WEXITSTATUS(stb) == 0;
    if (!ok)
        fprintf(stderr, "isolation: overflow: status %#x (A), %#x (B)\n", sta, stb);
    if (sh->adjacent != 0) {
        fprintf(stderr, "isolation: overflow: %zu of A's %d blocks of %d B lie directly "
                "before a live block of B\n", (size_t)sh->adjacent, OVERFLOW_BLOCKS, SIZE);
        ok = false;
    }
    return ok;
}

/* Run one case; true when it passed. */
static bool run(const char *how)
{
    pid_t b = start_bystander(how);
    if (b < 0)
        return false;
    /* After B's fork: the master reads A's stderr to its end. */
    int err[2];
    if (pipe(err) != 0) {
        perror("isolation: pipe");
        kill(b, SIGKILL);
        return false;
    }
    pid_t a = fork();
    if (a == 0) {
        dup2(err[1], 2);
        culprit(how);
        _exit(0);
    }
    close(err[1]);
    char msg[1024] = "";
    size_t n = 0;
    ssize_t r;
    while (n < sizeof msg - 1 && (r = read(err[0], msg + n, sizeof msg - 1 - n)) > 0)
        n += (size_t)r;
    msg[n] = '\0';
    close(err[0]);
    int sta = 0, stb = 0;
    waitpid(a, &sta, 0);
    sh->stop = 1;
    waitpid(b, &stb, 0);

    bool ok = true;
    char addr[32];
    snprintf(addr, sizeof addr, "%p", (void *)sh->freed);
    if (!WIFSIGNALED(sta) || WTERMSIG(sta) != SIGABRT) {
        fprintf(stderr, "isolation: %s: the culprit was not aborted (status %#x)\n", how, sta);
        ok = false;
    } else if (strstr(msg, addr) == NULL || strchr(msg, '\n') != msg + n - 1) {
        fprintf(stderr, "isolation: %s: the culprit's message does not name %s in one line: "
                "%s\n", how, addr, msg);
        ok = false;
    }
    for (size_t i = 0; i < NBLOCKS / 2; i++) {
        if (sh->got != 0 && sh->got == (uintptr_t)sh->live[i]) {
            fprintf(stderr, "isolation: %s: the culprit was handed the bystander's live "
                    "block %p\n", how, sh->live[i]);
            ok = false;
        }
    }
    if (!WIFEXITED(stb) || WEXITSTATUS(stb) != 0) {
        fprintf(stderr, "isolation: %s: the bystander's blocks were %s (status %#x)\n", how,
                WIFEXITED(stb) && WEXITSTATUS(stb) == 4 ? "handed out again after the reap"
                                                        : "not intact", stb);
        ok = false;
    }
    return ok;
}

int main(void)
{
    if (!preloaded_master("isolation"))
        return 1;
    sh = mmap(NULL, sizeof *sh, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED) {
        perror("isolation: mmap");
        return 1;
    }
    static const char *const cases[] = { "double", "interior", "forge-double", "forge-uaf" };
    unsigned failed = 0;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (!run(cases[i]))
            failed++;
    if (!run_overflow())
        failed++;
    if (failed > 0)
        return 1;
    printf("isolation: 4 cases: the culprit aborted naming the address, the bystander "
           "intact; none of %d blocks directly before another process's live block\n",
           OVERFLOW_BLOCKS);
    return 0;
}

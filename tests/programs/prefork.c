/* SPDX-License-Identifier: BSD-2-Clause */
/* A small prefork program for tests/pool/preload.sh: a master and four children
 * that allocate and free concurrently with per-block patterns.  Run it with
 * LD_PRELOAD=libshmpool.so SHMPOOL_MODE=children: the master must stay on
 * its private heap and every child must allocate in the shared arena.  The
 * program is not linked with the pool; it finds pool_owns and pool_attached
 * with dlsym (tests/programs/preloaded.h), so it fails when the library is not
 * really preloaded.
 *
 * Exit 0 and one summary line on stdout when all is well; otherwise one line
 * per problem on stderr and exit 1.
 */
#include "config.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pattern.h"
#include "preloaded.h"

#define CHILDREN 4
#define MASTER_BLOCKS 64
#define CHILD_SLOTS 256
#define CHILD_MAX_OPS 300000
#define CHILD_RUN_NS 1500000000LL
#define START_WAIT_NS 10000000000LL

typedef struct block_s {
    char *p;
    size_t size;
    uint64_t seed;
} block_t;

static block_t master_blocks[MASTER_BLOCKS];

static size_t pick_size(uint64_t *rng)
{
    uint64_t r = pattern_rng_next(rng);
    switch (r % 10) {
    case 0:
        return 4097 + (r >> 8) % 60000;
    case 1: case 2:
        return 257 + (r >> 8) % 3840;
    default:
        return 1 + (r >> 8) % 256;
    }
}

static bool block_broken(const block_t *b, const char *who)
{
    size_t bad = pattern_find_bad(b->p, b->size, b->seed);
    if (bad == SIZE_MAX)
        return false;
    fprintf(stderr, "prefork: %s: block %p (%zu bytes) overwritten at byte %zu\n",
            who, (void *)b->p, b->size, bad);
    return true;
}

/* A child's life: it must be attached; every block it allocates must be in
 * the arena; the master's blocks it inherited stay intact and can be freed
 * (they are private copies). */
static int child_main(int id, volatile int *go)
{
    char who[32];
    snprintf(who, sizeof who, "child %d", id);
    if (!pool_attached_p()) {
        fprintf(stderr, "prefork: %s is not attached to the arena\n", who);
        return 1;
    }
    int64_t start = pattern_now_ns();
    while (!*go && pattern_now_ns() - start < START_WAIT_NS)
        usleep(100);

    block_t slot[CHILD_SLOTS] = { { 0 } };
    uint64_t rng = pattern_mix((uint64_t)id + 77) | 1, seq = 0;
    int64_t deadline = pattern_now_ns() + CHILD_RUN_NS;
    long in_arena = 0;
    for (long op = 0; op < CHILD_MAX_OPS; op++) {
        if ((op & 255) == 0 && pattern_now_ns() > deadline)
            break;
        block_t *b = &slot[pattern_rng_next(&rng) % CHILD_SLOTS];
        if (b->p != NULL) {
            if (block_broken(b, who))
                return 1;
            if (pattern_rng_next(&rng) % 4 == 0) {
                size_t n = pick_size(&rng);
                char *q = realloc(b->p, n);
                if (q == NULL || !pool_owns_p(q)) {
                    fprintf(stderr, "prefork: %s: realloc gave %p outside the arena\n",
                            who, (void *)q);
                    return 1;
                }
                size_t kept = n < b->size ? n : b->size;
                if (pattern_find_bad(q, kept, b->seed) != SIZE_MAX) {
                    fprintf(stderr, "prefork: %s: realloc lost content\n", who);
                    return 1;
                }
                pattern_fill(q, kept, n, b->seed);
                b->p = q;
                b->size = n;
                continue;
            }
            free(b->p);
            b->p = NULL;
            continue;
        }
        b->size = pick_size(&rng);
        b->seed = (uint64_t)(id + 1) << 40 | seq++;
        b->p = malloc(b->size);
        if (b->p == NULL || (uintptr_t)b->p % 16 != 0 || !pool_owns_p(b->p)) {
            fprintf(stderr, "prefork: %s: malloc(%zu) gave %p, not an aligned "
                    "block in the arena\n", who, b->size, (void *)b->p);
            return 1;
        }
        in_arena++;
        pattern_fill(b->p, 0, b->size, b->seed);
    }
    for (int i = 0; i < CHILD_SLOTS; i++) {
        if (slot[i].p != NULL && block_broken(&slot[i], who))
            return 1;
        free(slot[i].p);
    }
    for (int i = 0; i < MASTER_BLOCKS; i += 2) {
        if (block_broken(&master_blocks[i], who))
            return 1;
        free(master_blocks[i].p);
    }
    return in_arena > 0 ? 0 : 1;
}

int main(void)
{
    if (!preloaded_master("prefork"))
        return 1;
    for (int i = 0; i < MASTER_BLOCKS; i++) {
        block_t *b = &master_blocks[i];
        b->size = 16 + (size_t)i * 517;
        b->seed = (uint64_t)i;
        b->p = malloc(b->size);
        if (b->p == NULL || pool_owns_p(b->p)) {
            fprintf(stderr, "prefork: the master allocated %p in the arena\n",
                    (void *)b->p);
            return 1;
        }
        pattern_fill(b->p, 0, b->size, b->seed);
    }

    volatile int *go = mmap(NULL, sizeof *go, PROT_READ | PROT_WRITE,
                            MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (go == MAP_FAILED) {
        fprintf(stderr, "prefork: mmap: %s\n", strerror(errno));
        return 1;
    }
    pid_t pid[CHILDREN];
    for (int i = 0; i < CHILDREN; i++) {
        pid[i] = fork();
        if (pid[i] < 0) {
            fprintf(stderr, "prefork: fork: %s\n", strerror(errno));
            return 1;
        }
        if (pid[i] == 0)
            _exit(child_main(i, go));
    }
    *go = 1;

    int failed = 0;
    for (int i = 0; i < CHILDREN; i++) {
        int status;
        if (waitpid(pid[i], &status, 0) != pid[i] || !WIFEXITED(status) ||
            WEXITSTATUS(status) != 0) {
            fprintf(stderr, "prefork: child %d failed (status %#x)\n", i, status);
            failed = 1;
        }
    }
    for (int i = 0; i < MASTER_BLOCKS; i++) {
        if (block_broken(&master_blocks[i], "master"))
            failed = 1;
        free(master_blocks[i].p);
    }
    void *after = malloc(1000);
    if (after == NULL || pool_owns_p(after)) {
        fprintf(stderr, "prefork: the master allocates in the arena after fork\n");
        failed = 1;
    }
    free(after);
    if (!failed)
        printf("prefork: %d children allocated in the shared arena, "
               "the master stayed private\n", CHILDREN);
    return failed;
}

/* SPDX-License-Identifier: BSD-2-Clause */
/* The fork contract of libshmpool in children mode, as a program that is
 * not linked with the pool sees it; tests/servers/fork.sh runs it under
 * LD_PRELOAD=libshmpool.so SHMPOOL_MODE=children.  fork() must give a child
 * its parent's heap as a private copy, whichever allocator serves it:
 *
 *  1. The master (private in children mode) allocates blocks and forks a
 *     child, which attaches.  The child overwrites the master's blocks with
 *     its own pattern; the master still reads its own data afterwards.
 *  2. The attached child allocates blocks of several sizes in the arena
 *     (small classes and big spans over 256 KiB), fills them, and forks a
 *     grandchild.  Both check the inherited content, then each overwrites
 *     every block with its own pattern; after a barrier each must read
 *     back only its own.
 *  3. The grandchild frees half of the inherited blocks and allocates new
 *     ones; the child still reads its own pattern in every block, then
 *     allocates new ones too; neither's new blocks disturb the other's.
 *
 * The pool is found with dlsym (tests/programs/preloaded.h), so the program fails
 * when the library is not really preloaded.  Exit 0 and one line on stdout when the contract
 * holds; otherwise one line per problem on stderr and exit 1.
 */
#include "config.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pattern.h"
#include "preloaded.h"

/* Small classes from 16 B to 200 KB, and big spans from 300 KiB to 5 MiB. */
static const size_t sizes[] = { 16, 48, 96, 200, 1000, 4000, 9000, 40000, 200000,
                                300 << 10, 1 << 20, 5 << 20 };
#define NSIZES (sizeof sizes / sizeof sizes[0])
#define PER_SIZE 8
#define NBLOCKS (NSIZES * PER_SIZE)
/* Bad blocks reported one by one before the rest are only counted. */
#define REPORT_MAX 4

/* Pattern seeds: who wrote a block, and the block's index. */
enum { INHERITED = 1, CHILD, GRANDCHILD, GRANDCHILD_NEW, CHILD_NEW, MASTER, CHILD_ON_MASTER };
#define SEED(who, i) ((uint64_t)(who) << 32 | (uint64_t)(i))

typedef struct block_s {
    char *p;
    size_t size;
    uint64_t seed;      /* the pattern this process expects in it */
} block_t;

static const char *names[] = { "", "the inherited", "the child's", "the grandchild's",
                               "the grandchild's new", "the child's new", "the master's",
                               "the child's (on the master's blocks)" };

/* Which writer's pattern the block holds, or 0 for none (torn, zeroed). */
static int writer_of(const block_t *b, size_t i)
{
    for (int who = INHERITED; who <= CHILD_ON_MASTER; who++)
        if (pattern_intact(b->p, b->size, SEED(who, i)))
            return who;
    return 0;
}

/* Check that every block holds the pattern this process expects; report
 * the first few that do not, naming the pattern found instead. */
static int verify(const char *who, const char *when, block_t *blocks, size_t n)
{
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        block_t *b = &blocks[i];
        if (b->p == NULL || pattern_intact(b->p, b->size, b->seed))
            continue;
        if (++bad <= REPORT_MAX) {
            int w = writer_of(b, i);
            fprintf(stderr, "forkcontract: %s, %s: block %zu (%zu bytes at %p) holds %s "
                    "pattern, not its own (first bad byte %zu)\n", who, when, i, b->size,
                    (void *)b->p, w ? names[w] : "no known",
                    pattern_find_bad(b->p, b->size, b->seed));
        }
    }
    if (bad > REPORT_MAX)
        fprintf(stderr, "forkcontract: %s, %s: %d bad blocks in all\n", who, when, bad);
    return bad;
}

static void fill(block_t *blocks, size_t n, int who)
{
    for (size_t i = 0; i < n; i++) {
        if (blocks[i].p == NULL)
            continue;
        blocks[i].seed = SEED(who, i);
        pattern_fill(blocks[i].p, 0, blocks[i].size, blocks[i].seed);
    }
}

/* Allocate every block of the size table (or only the NULL ones); false on
 * a malloc failure, or when a block is not where it should be (in the
 * arena when in_arena, outside it otherwise). */
static bool allocate(const char *who, block_t *blocks, bool in_arena)
{
    for (size_t i = 0; i < NBLOCKS; i++) {
        block_t *b = &blocks[i];
        if (b->p != NULL)
            continue;
        b->size = sizes[i / PER_SIZE];
        b->p = malloc(b->size);
        if (b->p == NULL || pool_owns_p(b->p) != in_arena) {
            fprintf(stderr, "forkcontract: %s: malloc(%zu) gave %p, %s the arena\n", who,
                    b->size, (void *)b->p, in_arena ? "not in" : "in");
            return false;
        }
    }
    return true;
}

/* A barrier of two processes over a pair of pipes.  A peer that died
 * closes its end, and read() then returns 0: no deadlock. */
static bool meet(int out, int in, const char *who)
{
    char c = 0;
    if (write(out, &c, 1) != 1 || read(in, &c, 1) != 1) {
        fprintf(stderr, "forkcontract: %s: the other process is gone\n", who);
        return false;
    }
    return true;
}

/* Both processes after the fork: once both are ready, each overwrites
 * every block with the pattern of `who`; once both have, each checks that
 * only its own is there.  Returns the bad blocks, or -1 when the other
 * process is gone. */
static int overwrite_both(const char *me, int who, block_t *blocks, int out, int in)
{
    if (!meet(out, in, me))
        return -1;
    fill(blocks, NBLOCKS, who);
    if (!meet(out, in, me))
        return -1;
    int bad = verify(me, "after both wrote every block", blocks, NBLOCKS);
    return meet(out, in, me) ? bad : -1;
}

static int grandchild(block_t *blocks, int out, int in)
{
    const char *me = "grandchild";
    int bad = verify(me, "right after fork", blocks, NBLOCKS);
    int more = overwrite_both(me, GRANDCHILD, blocks, out, in);
    if (more < 0)
        return 1;
    bad += more;
    for (size_t i = 0; i < NBLOCKS; i += 2) {
        free(blocks[i].p);
        blocks[i].p = NULL;
    }
    block_t fresh[NBLOCKS] = { { 0 } };
    /* Wherever its heap is now, its new blocks must be usable. */
    for (size_t i = 0; i < NBLOCKS; i++) {
        fresh[i].size = sizes[i / PER_SIZE];
        fresh[i].p = malloc(fresh[i].size);
        if (fresh[i].p == NULL) {
            fprintf(stderr, "forkcontract: grandchild: malloc(%zu) failed\n", fresh[i].size);
            return 1;
        }
    }
    fill(fresh, NBLOCKS, GRANDCHILD_NEW);
    /* The child checks its blocks, then allocates and fills new ones. */
    if (!meet(out, in, me) || !meet(out, in, me))
        return 1;
    bad += verify(me, "its own blocks at the end", blocks, NBLOCKS);
    bad += verify(me, "its new blocks at the end", fresh, NBLOCKS);
    return bad != 0;
}

static int child(block_t *master, size_t nmaster)
{
    const char *me = "child";
    if (!pool_attached_p()) {
        fprintf(stderr, "forkcontract: the master's child is not attached to the arena\n");
        return 1;
    }
    int bad = verify(me, "the master's blocks, inherited", master, nmaster);
    fill(master, nmaster, CHILD_ON_MASTER);

    block_t blocks[NBLOCKS] = { { 0 } };
    if (!allocate(me, blocks, true))
        return 1;
    fill(blocks, NBLOCKS, INHERITED);
    int c2g[2], g2c[2];
    if (pipe(c2g) != 0 || pipe(g2c) != 0) {
        fprintf(stderr, "forkcontract: pipe: %s\n", strerror(errno));
        return 1;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "forkcontract: fork: %s\n", strerror(errno));
        return 1;
    }
    if (pid == 0) {
        close(c2g[1]);
        close(g2c[0]);
        _exit(grandchild(blocks, g2c[1], c2g[0]));
    }
    close(c2g[0]);
    close(g2c[1]);
    int out = c2g[1], in = g2c[0];
    int more = overwrite_both(me, CHILD, blocks, out, in);
    if (more < 0)
        return 1;
    bad += more;
    /* The grandchild now frees half of its copies and allocates anew. */
    if (!meet(out, in, me))
        return 1;
    bad += verify(me, "after the grandchild freed and allocated", blocks, NBLOCKS);
    block_t fresh[NBLOCKS] = { { 0 } };
    if (!allocate(me, fresh, true))
        return 1;
    fill(fresh, NBLOCKS, CHILD_NEW);
    if (!meet(out, in, me))
        return 1;
    bad += verify(me, "its new blocks", fresh, NBLOCKS);
    close(out);
    int status;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "forkcontract: the grandchild failed (status %#x)\n", status);
        bad++;
    }
    bad += verify(me, "at the end", blocks, NBLOCKS);
    for (size_t i = 0; i < NBLOCKS; i++) {
        free(blocks[i].p);
        free(fresh[i].p);
    }
    return bad != 0;
}

int main(void)
{
    if (!preloaded_master("forkcontract"))
        return 1;
    block_t master[NBLOCKS] = { { 0 } };
    if (!allocate("master", master, false))
        return 1;
    fill(master, NBLOCKS, MASTER);
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "forkcontract: fork: %s\n", strerror(errno));
        return 1;
    }
    if (pid == 0)
        _exit(child(master, NBLOCKS));
    int status, bad = 0;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "forkcontract: the child failed (status %#x)\n", status);
        bad++;
    }
    bad += verify("master", "after the child wrote its copies", master, NBLOCKS);
    for (size_t i = 0; i < NBLOCKS; i++)
        free(master[i].p);
    if (bad)
        return 1;
    printf("forkcontract: %zu blocks of %zu sizes (16 B to 5 MiB) stayed private to "
           "master, child and grandchild across two forks\n", NBLOCKS, NSIZES);
    return 0;
}

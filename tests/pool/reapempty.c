/* SPDX-License-Identifier: BSD-2-Clause */
/* A dead child's blocks, freed by its reap, leave the classes: the spans
 * they emptied go to the page heap instead of the classes' budgets of
 * empty spans.  tests/pool/reapempty.sh runs it under
 * LD_PRELOAD=libshmpool.so SHMPOOL_MODE=children.
 *
 * The private master notes the arena's cached bytes (pool_usage), forks a
 * child that attaches, allocates 1 MiB in each of four classes and holds
 * it, kills it and waits for it: the library's wait reaps it.  The cached
 * bytes must then be within SLACK of what they were before the child:
 * the classes may keep what their live users left them, not the dead's.
 * Prints the figures in KiB on one line; exit 0, otherwise one line on
 * stderr and exit 1.
 */
#include "config.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../shm/shmpool.h"
#include "../programs/preloaded.h"

#define CLASS_BYTES ((size_t)1 << 20)
/* Less than one class's budget of empty spans (512 KiB). */
#define SLACK ((size_t)256 << 10)

static int (*usage_p)(pool_usage_t *);

static size_t cached(void)
{
    pool_usage_t u;
    return usage_p(&u) == 0 ? u.cached : SIZE_MAX;
}

/* The child: CLASS_BYTES of blocks of each size, held until it is killed;
 * a byte on ready_fd once they are. */
static void holder(int ready_fd)
{
    static const size_t sizes[] = { 100, 1000, 3000, 20000 };
    for (unsigned k = 0; k < sizeof sizes / sizeof sizes[0]; k++)
        for (size_t got = 0; got < CLASS_BYTES; got += sizes[k]) {
            char *p = malloc(sizes[k]);
            if (p == NULL || !pool_owns_p(p))
                _exit(1);
            p[0] = 1;
        }
    if (write(ready_fd, "h", 1) != 1)
        _exit(1);
    for (;;)
        pause();
}

static int fail(pid_t child, const char *what)
{
    fprintf(stderr, "reapempty: %s\n", what);
    if (child > 0) {
        kill(child, SIGKILL);
        waitpid(child, NULL, 0);
    }
    return 1;
}

int main(void)
{
    if (!preloaded_master("reapempty"))
        return 1;
    usage_p = (int (*)(pool_usage_t *))dlsym(RTLD_DEFAULT, "pool_usage");
    if (usage_p == NULL)
        return fail(0, "libshmpool has no pool_usage");
    size_t before = cached();
    int ready[2];
    pid_t pid = preloaded_start(ready, holder);
    if (pid < 0)
        return fail(0, "the child did not start, attach and allocate");
    size_t held = cached();
    if (kill(pid, SIGKILL) != 0 || waitpid(pid, NULL, 0) != pid)
        return fail(pid, "the child could not be killed and waited for");
    size_t after = cached();
    printf("reapempty: cached before the child %zu KiB, while it held its blocks %zu, "
           "after its reap %zu\n", before >> 10, held >> 10, after >> 10);
    if (after > before + SLACK) {
        char msg[160];
        snprintf(msg, sizeof msg, "%zu KiB cached after the reap (limit %zu KiB)", after >> 10,
                 (before + SLACK) >> 10);
        return fail(0, msg);
    }
    return 0;
}

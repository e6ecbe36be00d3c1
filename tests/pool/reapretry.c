/* SPDX-License-Identifier: BSD-2-Clause */
/* A dead child whose reap meets a stuck lock holder twice is still reaped
 * once the holder lets go; tests/pool/reapretry.sh runs it under
 * LD_PRELOAD=libshmpool.so SHMPOOL_MODE=children in builds with crash
 * points, and asks shmpool-stat whether anything dead is left.
 *
 * The private master forks child A, which attaches, allocates and waits,
 * then child B with SHMPOOL_CRASH=central.fetch:1:stop, which stops
 * (SIGSTOP) inside a class lock at its first allocation.  The master kills
 * A and waits for it: the library's wait reaps A, but cannot take the
 * locks while B holds one, so the reap is left pending.  A wait that finds
 * no child ended tries again and meets B again.  The master then lets B go
 * on and waits for it: the pending reap must be done by then, as a master
 * that has no more children to wait for would otherwise keep A's memory
 * and slot for good.  The pids go to stdout; the master waits for a line
 * on stdin, so that shmpool-stat can read its arena, and exits 0.  Exit 77
 * in builds without crash points; otherwise one line on stderr and exit 1
 * when a step does not happen.
 */
#include "config.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../programs/preloaded.h"

static int fail(const char *what)
{
    fprintf(stderr, "reapretry: %s\n", what);
    return 1;
}

int main(void)
{
    if (!preloaded_master("reapretry"))
        return 1;
    if (POOL_CONFIG_DEBUG == 0) {
        fprintf(stderr, "reapretry: this build has no crash points\n");
        return 77;
    }
    int ready[2];
    pid_t a = preloaded_start_holder(ready);
    if (a < 0)
        return fail("child A did not start, attach and allocate");
    if (setenv("SHMPOOL_CRASH", "central.fetch:1:stop", 1) != 0)
        return fail("setenv failed");
    pid_t b = fork();
    if (b < 0)
        return fail("fork failed");
    if (b == 0) {
        void *p = malloc(64);
        _exit(p != NULL && pool_attached_p() ? 0 : 1);
    }
    unsetenv("SHMPOOL_CRASH");
    int st;
    if (waitpid(b, &st, WUNTRACED) != b || !WIFSTOPPED(st))
        return fail("child B did not stop at its first fetch");
    kill(a, SIGKILL);
    if (waitpid(a, &st, 0) != a || !WIFSIGNALED(st))
        return fail("child A did not die");
    if (waitpid(-1, &st, WNOHANG) != 0)
        return fail("a child ended that should not have");
    kill(b, SIGCONT);
    if (waitpid(b, &st, 0) != b || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return fail("child B did not go on and exit 0");
    printf("%d %d\n", (int)a, (int)b);
    fflush(stdout);
    char line[16];
    return fgets(line, sizeof line, stdin) != NULL ? 0 : fail("no line on stdin");
}

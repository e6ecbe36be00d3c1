/* SPDX-License-Identifier: BSD-2-Clause */
/* A child stopped (SIGSTOP, alive) inside the page-heap lock does not stop
 * its parent's waits; tests/pool/waitstopped.sh runs it under
 * LD_PRELOAD=libshmpool.so SHMPOOL_MODE=children, in every build.
 *
 * The private parent forks child A, which attaches, allocates and waits,
 * and child B, which allocates and frees 1 MiB blocks (page-heap
 * operations, under its lock) without end.  The parent stops B with
 * SIGSTOP until pool_lock_stalled() names B as a lock holder, so that B
 * sleeps holding the page-heap lock.  Then, for 3 s (past the two decay
 * periods after which a wait ends one, taking the lock), it calls
 * waitpid(-1, WNOHANG): each must return 0 (no child ended).  It kills A
 * and waits for it: the wait returns A, its reap left for later.  It kills
 * B and waits for it.  A wait that does not return within 10 s ends the
 * program (SIGALRM): before the waits had deadlines, the library's decay
 * after the wait blocked on the lock for as long as B stayed stopped.
 * Then child S, which attached before B stopped and filled its cache with
 * blocks whose spans leave for the page heap when they come back, sleeps
 * in poll() for 2.5 s: it must be back within 4 s, as the slices the
 * library cuts its sleep into leave the cache for later while a lock
 * holder is stuck (without that, its first slice gave the cache back and
 * waited for B's lock for as long as B stayed stopped).
 * Exit 0; otherwise one line on stderr and exit 1.
 */
#include "config.h"

#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../programs/preloaded.h"

static const char *waiting = "the first wait"; /* the wait in progress, for SIGALRM */

static int fail(const char *what)
{
    fprintf(stderr, "waitstopped: %s\n", what);
    return 1;
}

static void on_alarm(int sig)
{
    char line[160];
    int n = snprintf(line, sizeof line, "waitstopped: %s did not return within 10 s\n", waiting);
    (void)sig;
    if (write(STDERR_FILENO, line, (size_t)n) < 0)
        _exit(1);
    _exit(1);
}

/* A wait bounded by SIGALRM: what names it in the failure line. */
static pid_t bounded_wait(const char *what, pid_t pid, int *st, int options)
{
    waiting = what;
    alarm(10);
    pid_t got = waitpid(pid, st, options);
    alarm(0);
    return got;
}

/* Child S: fills its cache with blocks whose spans leave their class when
 * they all come back, says so on say, then once it hears a byte on hear
 * sleeps in poll() for 2.5 s and says on say whether that took less than
 * 4 s. */
static void sleeper(int say, int hear)
{
    if (!preloaded_churn(16, 150000))
        _exit(1);
    char c;
    if (!pool_attached_p() || write(say, "s", 1) != 1 || read(hear, &c, 1) != 1)
        _exit(1);
    long t = now_ms();
    int rc = poll(NULL, 0, 2500);
    t = now_ms() - t;
    _exit(write(say, rc == 0 && t < 4000 ? "y" : "n", 1) == 1 ? 0 : 1);
}

/* Stop b until it sleeps holding a pool lock; false after many tries. */
static bool stop_in_lock(pid_t b, pid_t (*stalled)(unsigned))
{
    for (int tries = 0; tries < 2000; tries++) {
        int st;
        kill(b, SIGSTOP);
        if (bounded_wait("waitpid(B, WUNTRACED)", b, &st, WUNTRACED) != b || !WIFSTOPPED(st))
            return false;
        /* The watchdog's view is read without a lock, stamped with a
         * coarse clock: a hold begun this tick shows from the next. */
        for (int k = 0; k < 5; k++) {
            sleep_ms(10);
            if (stalled(0) == b)
                return true;
        }
        kill(b, SIGCONT);
        sleep_ms(1);
    }
    return false;
}

int main(void)
{
    if (!preloaded_master("waitstopped"))
        return 1;
    pid_t (*stalled)(unsigned) = (pid_t(*)(unsigned))dlsym(RTLD_DEFAULT, "pool_lock_stalled");
    if (stalled == NULL)
        return fail("libshmpool has no pool_lock_stalled");
    signal(SIGALRM, on_alarm);
    int ready[2], says[2], hears[2];
    pid_t a = preloaded_start_holder(ready);
    if (a < 0)
        return fail("child A did not start, attach and allocate");
    char c;
    if (pipe(says) != 0 || pipe(hears) != 0)
        return fail("pipe failed");
    pid_t s = fork();
    if (s == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        sleeper(says[1], hears[0]);
    }
    if (s < 0 || read(says[0], &c, 1) != 1)
        return fail("child S did not attach and fill its cache");
    pid_t b = fork();
    if (b < 0)
        return fail("fork failed");
    if (b == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* like A, it dies with its parent */
        if (!pool_attached_p() || write(ready[1], "b", 1) != 1)
            _exit(1);
        for (;;) {
            char *p = malloc(1 << 20);
            if (p == NULL)
                _exit(1);
            p[0] = 1;
            free(p);
        }
    }
    if (read(ready[0], &c, 1) != 1)
        return fail("child B did not attach");
    if (!stop_in_lock(b, stalled))
        return fail("child B was never stopped holding a pool lock");

    int st, polls = 0;
    for (long end = now_ms() + 3000; now_ms() < end; polls++) {
        if (bounded_wait("waitpid(-1, WNOHANG) with B stopped in the page-heap lock", -1, &st,
                         WNOHANG) != 0)
            return fail("waitpid(-1, WNOHANG) did not return 0");
        sleep_ms(50);
    }
    struct pollfd said = { .fd = says[0], .events = POLLIN };
    if (write(hears[1], "g", 1) != 1 || poll(&said, 1, 6000) != 1 || read(says[0], &c, 1) != 1)
        return fail("child S's poll(2.5 s) did not return within 6 s with B stopped in a lock");
    if (c != 'y')
        return fail("child S's poll(2.5 s) did not return 0 within 4 s with B stopped in a lock");
    kill(s, SIGKILL);
    if (bounded_wait("waitpid(S)", s, &st, 0) != s)
        return fail("child S was not waited for");
    kill(a, SIGKILL);
    if (bounded_wait("waitpid(A) with B stopped in the page-heap lock", a, &st, 0) != a ||
        !WIFSIGNALED(st))
        return fail("child A was not waited for");
    if (stalled(0) != b)
        return fail("child B no longer holds a pool lock");
    kill(b, SIGKILL);
    if (bounded_wait("waitpid(B)", b, &st, 0) != b || !WIFSIGNALED(st))
        return fail("child B was not waited for");
    printf("waitstopped: %d waits and a 2.5 s poll returned while child %d slept in a pool "
           "lock\n", polls + 1, (int)b);
    return 0;
}

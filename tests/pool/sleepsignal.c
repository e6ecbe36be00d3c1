/* SPDX-License-Identifier: BSD-2-Clause */
/* A signal that comes while a sliced sleep drains between two slices still
 * ends the sleep with EINTR, as it would have ended the C library's call;
 * tests/pool/sleepsignal.sh runs it under LD_PRELOAD=libshmpool.so
 * SHMPOOL_MODE=process SHMPOOL_CRASH=central.release:1:stop (debug builds,
 * whose crash points can stop a process; elsewhere it reports a skip).
 *
 *   sleepsignal poll|epoll|accept
 *
 * The process fills its thread cache with blocks it freed (no release to
 * the class yet), so that its sleep is cut into slices, and sleeps in
 * poll() or epoll_wait() with a 6 s timeout, or accept() on a blocking
 * listening socket with no connection coming.  The first slice ends after
 * a second and drains the cache: the first release stops the process
 * (SIGSTOP) there, between two slices.  A helper child that saw the
 * process say it was about to sleep waits until it is stopped, sends it
 * SIGUSR1, whose handler does not restart calls, and SIGCONT.  The call
 * must return -1 with EINTR within 4 s of the sleep's start.  Before the
 * library blocked signals between slices the handler ran inside the drain
 * and the sleep went on: poll returned 0 after 6 s, accept never returned.
 * One line "sleepsignal: ..." and exit 0, or a line on stderr and exit 1.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../programs/preloaded.h"

#if !POOL_CONFIG_DEBUG
int main(void)
{
    printf("sleepsignal: SKIP: crash points are in debug builds only\n");
    return 77;
}
#else
static volatile sig_atomic_t handled;

static void on_usr1(int sig)
{
    (void)sig;
    handled = 1;
}

static int fail(const char *what)
{
    fprintf(stderr, "sleepsignal: %s (errno %d)\n", what, errno);
    return 1;
}

/* The state letter of pid in /proc/PID/stat, '?' if unreadable. */
static char state_of(pid_t pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return '?';
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return '?';
    buf[n] = '\0';
    const char *rp = strrchr(buf, ')');
    return rp != NULL && rp[1] == ' ' ? rp[2] : '?';
}

/* The helper's life: once the parent said (a byte on go) that it is about
 * to sleep, wait up to 10 s for it to stop, then SIGUSR1 and SIGCONT, and
 * say on done which it saw: 's' stopped and signalled, 'n' never stopped.
 * No allocation: the helper is a copy of an attached process. */
static void helper(pid_t parent, int go, int done)
{
    char c = 'n';
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (read(go, &c, 1) == 1) {
        c = 'n';
        for (long t = now_ms(); now_ms() - t < 10000; sleep_ms(5))
            if (state_of(parent) == 'T') {
                kill(parent, SIGUSR1);
                sleep_ms(50);
                kill(parent, SIGCONT);
                c = 's';
                break;
            }
    }
    _exit(write(done, &c, 1) == 1 ? 0 : 1);
}

int main(int argc, char **argv)
{
    const char *how = argc == 2 ? argv[1] : "";
    if (strcmp(how, "poll") != 0 && strcmp(how, "epoll") != 0 && strcmp(how, "accept") != 0) {
        fprintf(stderr, "usage: sleepsignal poll|epoll|accept\n");
        return 2;
    }
    pool_attached_p = (bool (*)(void))dlsym(RTLD_DEFAULT, "pool_attached");
    if (pool_attached_p == NULL || !pool_attached_p())
        return fail("not attached to an arena (run with SHMPOOL_MODE=process)");
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    if (sigaction(SIGUSR1, &sa, NULL) != 0)
        return fail("sigaction");
    int go[2], done[2], quiet[2], ep = -1, lst = -1;
    if (pipe(go) != 0 || pipe(done) != 0 || pipe(quiet) != 0)
        return fail("pipe");
    struct sockaddr_in sin;
    struct epoll_event ev = { .events = EPOLLIN }, got;
    if (strcmp(how, "epoll") == 0 &&
        ((ep = epoll_create1(0)) < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, quiet[0], &ev) != 0))
        return fail("epoll");
    if (strcmp(how, "accept") == 0 && (lst = preloaded_listener(&sin)) < 0)
        return fail("no listening socket on the loopback");
    pid_t parent = getpid(), pid = fork();
    if (pid < 0)
        return fail("fork");
    if (pid == 0)
        helper(parent, go[0], done[1]);

    /* Blocks of one class freed into the thread cache, fewer than it
     * keeps before it releases any: the first release is the drain's. */
    if (!preloaded_churn(24, 64) || write(go[1], "g", 1) != 1)
        return fail("malloc or write");
    long t = now_ms();
    int rc;
    errno = 0;
    if (strcmp(how, "poll") == 0)
        rc = poll(NULL, 0, 6000);
    else if (strcmp(how, "epoll") == 0)
        rc = epoll_wait(ep, &got, 1, 6000);
    else
        rc = accept(lst, NULL, NULL);
    int e = errno;
    t = now_ms() - t;
    char c = '?';
    if (read(done[0], &c, 1) != 1 || c != 's')
        return fail("the process never stopped in its sleep's drain (SHMPOOL_CRASH "
                    "central.release:1:stop not hit there)");
    waitpid(pid, NULL, 0);
    errno = e;
    if (rc != -1 || e != EINTR || !handled || t >= 4000) {
        fprintf(stderr, "sleepsignal: %s returned %d, errno %d, after %ld ms, handler %s; "
                "want -1, EINTR, within 4000 ms\n", how, rc, e, t, handled ? "ran" : "did not run");
        return 1;
    }
    printf("sleepsignal: %s: a signal that came between two slices ended it with EINTR "
           "after %ld ms\n", how, t);
    return 0;
}
#endif

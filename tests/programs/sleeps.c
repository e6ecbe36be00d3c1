/* SPDX-License-Identifier: BSD-2-Clause */
/* The sleeps the preloaded library cuts into slices (shm/sleephook.c)
 * keep their meaning: tests/pool/sleeps.sh runs this under
 * LD_PRELOAD=libshmpool.so SHMPOOL_MODE=process, so that the process is
 * attached.
 *
 * Before each sleep the process fills its thread cache (a burst of
 * blocks freed), so that the sleep is cut.  Then: poll() with a 2.5 s
 * timeout returns 0 after 2.5 s, and the cache went back meanwhile, as it
 * does again after a handler jumped out of a poll() (siglongjmp), and in
 * a handler's own poll() of 2.5 s in its thread's poll(), which then
 * returns EINTR;
 * epoll_wait() with no timeout returns the event a child sends after
 * 1.5 s; select() with 2.3 s returns 0 after them with its sets cleared
 * and its timeval at 0, and with 5 s returns the child's event with its
 * set kept and the time left in its timeval; ppoll() with no timeout
 * returns -1 with EINTR for a signal whose handler has no SA_RESTART, and
 * pselect() the event.  accept() on a blocking listening socket returns
 * the connection a child makes after 2.5 s, and the cache went back
 * meanwhile; a signal whose handler has SA_RESTART does not end it, one
 * whose handler has not does, with EINTR, and one whose handler closes the
 * socket and puts another at its number (php-fpm's soft quit) makes it
 * fail as the restarted accept would, with EINVAL; a thread cancelled in
 * it leaves no descriptor open; on a non-blocking socket it fails with
 * EAGAIN at once, and on one with a receive timeout of 1.2 s with EAGAIN
 * after it.  One line "sleeps: ..." and exit 0, or a line on
 * stderr naming the first that failed and exit 1.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../shm/shmpool.h"
#include "preloaded.h"

static int (*usage_p)(pool_usage_t *);

static size_t cached(void)
{
    pool_usage_t u;
    return usage_p(&u) == 0 ? u.cached : 0;
}

/* Objects in the thread cache, something for a sleep to give back: small
 * ones, and blocks of a class whose spans hold a few each, which leave the
 * class once the cache gives them back. */
static void fill_cache(void)
{
    void *p[512];
    for (int i = 0; i < 512; i++)
        if ((p[i] = malloc(i < 16 ? 150000 : 64)) == NULL)
            exit(1);
    for (int i = 0; i < 512; i++)
        free(p[i]);
}

static int fail(const char *what)
{
    fprintf(stderr, "sleeps: %s (errno %d)\n", what, errno);
    return 1;
}

/* A child that writes a byte to fd after ms milliseconds, then exits. */
static void send_after(int fd, long ms)
{
    pid_t pid = fork();
    if (pid == 0) {
        sleep_ms(ms);
        _exit(write(fd, "x", 1) == 1 ? 0 : 1);
    }
}

/* A child that connects to sin after ms milliseconds, then exits. */
static void connect_after(const struct sockaddr_in *sin, long ms)
{
    pid_t pid = fork();
    if (pid == 0) {
        sleep_ms(ms);
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        _exit(fd >= 0 && connect(fd, (const struct sockaddr *)sin, sizeof *sin) == 0 ? 0 : 1);
    }
}

static void on_alarm(int sig)
{
    (void)sig;
}

/* The descriptors the process has open. */
static int open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    if (d == NULL)
        return -1;
    while (readdir(d) != NULL)
        n++;
    closedir(d);
    return n;
}

/* accept(fd) timed: its result, errno as it left it, *ms the milliseconds
 * it took. */
static int timed_accept(int fd, long *ms)
{
    long t = now_ms();
    errno = 0;
    int rc = accept(fd, NULL, NULL);
    int e = errno;
    *ms = now_ms() - t;
    errno = e;
    return rc;
}

/* A thread with a full cache that blocks in accept() on *arg. */
static void *accept_in_thread(void *arg)
{
    fill_cache();
    accept(*(int *)arg, NULL, NULL);
    return NULL;
}

/* The listening socket a handler replaces. */
static int listening = -1;

static void on_alarm_replace(int sig)
{
    (void)sig;
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd >= 0) {
        dup2(fd, listening);
        close(fd);
    }
}

static sigjmp_buf jumped;

static void on_alarm_jump(int sig)
{
    (void)sig;
    siglongjmp(jumped, 1);
}

/* What a handler's own poll() returned, and its cache before it. */
static volatile int handler_rc = -2;
static volatile size_t handler_before;

static void on_alarm_sleep(int sig)
{
    (void)sig;
    handler_before = cached();
    handler_rc = poll(NULL, 0, 2500);
}

static bool within(long ms, long lo, long hi)
{
    return ms >= lo && ms < hi;
}

int main(void)
{
    usage_p = (int (*)(pool_usage_t *))dlsym(RTLD_DEFAULT, "pool_usage");
    pool_attached_p = (bool (*)(void))dlsym(RTLD_DEFAULT, "pool_attached");
    if (usage_p == NULL || pool_attached_p == NULL || !pool_attached_p())
        return fail("not attached to an arena (run with SHMPOOL_MODE=process)");
    int fds[2];
    if (pipe(fds) != 0)
        return fail("pipe");
    char c;

    fill_cache();
    size_t before = cached();
    long t = now_ms();
    int rc = poll(NULL, 0, 2500);
    t = now_ms() - t;
    size_t after = cached();
    if (rc != 0 || !within(t, 2500, 3500))
        return fail("poll(2.5 s) did not return 0 after 2.5 s");
    if (after >= before)
        return fail("poll(2.5 s) slept with the thread cache full");

    /* A handler that jumps out of a sleep in its second slice (its
     * signals open only in the wait) leaves the thread's later sleeps cut
     * as before. */
    struct sigaction jump = { .sa_handler = on_alarm_jump }, old_alarm;
    struct itimerval in_second_slice = { .it_value = { 1, 500000 } };
    sigemptyset(&jump.sa_mask);
    if (sigaction(SIGALRM, &jump, &old_alarm) != 0)
        return fail("sigaction(SIGALRM)");
    fill_cache();
    if (sigsetjmp(jumped, 1) == 0) {
        if (setitimer(ITIMER_REAL, &in_second_slice, NULL) != 0)
            return fail("setitimer");
        poll(NULL, 0, -1);
        return fail("poll(no timeout) returned where its handler jumps out");
    }
    fill_cache();
    size_t jumped_before = cached();
    if (poll(NULL, 0, 2500) != 0 || cached() >= jumped_before)
        return fail("poll(2.5 s) after a handler jumped out of a sleep kept the thread cache full");

    /* A handler's own sleep in the first slice of its thread's is cut, and
     * gives the cache back, as the thread holds nothing of the pool in a
     * wait; the thread's sleep ends with EINTR. */
    struct sigaction sleeper = { .sa_handler = on_alarm_sleep };
    struct itimerval in_first_slice = { .it_value = { 0, 400000 } };
    sigemptyset(&sleeper.sa_mask);
    fill_cache();
    if (sigaction(SIGALRM, &sleeper, NULL) != 0 ||
        setitimer(ITIMER_REAL, &in_first_slice, NULL) != 0)
        return fail("sigaction(SIGALRM) or setitimer");
    t = now_ms();
    errno = 0;
    rc = poll(NULL, 0, -1);
    t = now_ms() - t;
    if (rc != -1 || errno != EINTR || handler_rc != 0 || !within(t, 2800, 3900))
        return fail("poll(no timeout) interrupted by a handler that polls 2.5 s did not return "
                    "EINTR after the handler's poll returned 0");
    if (cached() >= handler_before)
        return fail("a handler's poll(2.5 s) in its thread's sleep kept the thread cache full");
    sigaction(SIGALRM, &old_alarm, NULL);

    fill_cache();
    int ep = epoll_create1(0);
    struct epoll_event ev = { .events = EPOLLIN }, got;
    if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, fds[0], &ev) != 0)
        return fail("epoll");
    send_after(fds[1], 1500);
    t = now_ms();
    rc = epoll_wait(ep, &got, 1, -1);
    t = now_ms() - t;
    if (rc != 1 || !(got.events & EPOLLIN) || !within(t, 1400, 2500) || read(fds[0], &c, 1) != 1)
        return fail("epoll_wait(no timeout) did not return the event after 1.5 s");

    fill_cache();
    fd_set r;
    FD_ZERO(&r);
    FD_SET(fds[0], &r);
    struct timeval tv = { 2, 300000 };
    t = now_ms();
    rc = select(fds[0] + 1, &r, NULL, NULL, &tv);
    t = now_ms() - t;
    if (rc != 0 || FD_ISSET(fds[0], &r) || tv.tv_sec != 0 || tv.tv_usec != 0 ||
        !within(t, 2300, 3300))
        return fail("select(2.3 s) did not time out after 2.3 s, sets cleared");

    fill_cache();
    FD_ZERO(&r);
    FD_SET(fds[0], &r);
    tv = (struct timeval){ 5, 0 };
    send_after(fds[1], 1500);
    rc = select(fds[0] + 1, &r, NULL, NULL, &tv);
    long left = tv.tv_sec * 1000 + tv.tv_usec / 1000;
    if (rc != 1 || !FD_ISSET(fds[0], &r) || !within(left, 2500, 3600) || read(fds[0], &c, 1) != 1)
        return fail("select(5 s) did not return the event after 1.5 s with 3.5 s left");

    fill_cache();
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    if (sigaction(SIGALRM, &sa, NULL) != 0)
        return fail("sigaction");
    struct pollfd pfd = { .fd = fds[0], .events = POLLIN };
    alarm(2);
    errno = 0;
    rc = ppoll(&pfd, 1, NULL, NULL);
    if (rc != -1 || errno != EINTR)
        return fail("ppoll(no timeout) did not return EINTR for SIGALRM");

    fill_cache();
    FD_ZERO(&r);
    FD_SET(fds[0], &r);
    send_after(fds[1], 1500);
    rc = pselect(fds[0] + 1, &r, NULL, NULL, NULL, NULL);
    if (rc != 1 || !FD_ISSET(fds[0], &r))
        return fail("pselect(no timeout) did not return the event");

    struct sockaddr_in sin;
    int lst = preloaded_listener(&sin);
    if (lst < 0)
        return fail("no listening socket on the loopback");
    fill_cache();
    size_t accept_before = cached();
    connect_after(&sin, 2500);
    int conn = timed_accept(lst, &t);
    size_t accept_after = cached();
    if (conn < 0 || !within(t, 2400, 3500))
        return fail("accept() did not return the connection made after 2.5 s");
    if (accept_after >= accept_before)
        return fail("accept() slept with the thread cache full");
    close(conn);

    sa.sa_flags = SA_RESTART;
    if (sigaction(SIGALRM, &sa, NULL) != 0)
        return fail("sigaction");
    fill_cache();
    connect_after(&sin, 2500);
    alarm(1);
    conn = accept4(lst, NULL, NULL, SOCK_CLOEXEC);
    if (conn < 0)
        return fail("accept4() ended for a signal whose handler restarts calls");
    close(conn);

    sa.sa_flags = 0;
    if (sigaction(SIGALRM, &sa, NULL) != 0)
        return fail("sigaction");
    fill_cache();
    alarm(2);
    errno = 0;
    if (accept(lst, NULL, NULL) != -1 || errno != EINTR)
        return fail("accept() did not return EINTR for SIGALRM");

    int fl = fcntl(lst, F_GETFL);
    fill_cache();
    listening = dup(lst);
    sa.sa_handler = on_alarm_replace;
    sa.sa_flags = SA_RESTART;
    if (listening < 0 || sigaction(SIGALRM, &sa, NULL) != 0)
        return fail("dup or sigaction");
    alarm(2);
    rc = timed_accept(listening, &t);
    if (rc != -1 || errno != EINVAL || !within(t, 1500, 3000))
        return fail("accept() on a socket a handler replaced did not fail with EINVAL");
    close(listening);

    fill_cache();
    if (fl < 0 || fcntl(lst, F_SETFL, fl | O_NONBLOCK) != 0)
        return fail("fcntl(O_NONBLOCK)");
    rc = timed_accept(lst, &t);
    if (rc != -1 || errno != EAGAIN || t > 500 || fcntl(lst, F_SETFL, fl) != 0)
        return fail("accept() on a non-blocking socket did not fail with EAGAIN at once");

    int fds_before = open_fds();
    pthread_t th;
    void *res = NULL;
    if (pthread_create(&th, NULL, accept_in_thread, &lst) != 0)
        return fail("pthread_create");
    sleep_ms(1500);
    if (pthread_cancel(th) != 0 || pthread_join(th, &res) != 0 || res != PTHREAD_CANCELED)
        return fail("a thread in accept() was not cancelled");
    if (open_fds() != fds_before)
        return fail("a thread cancelled in accept() left a descriptor open");

    tv = (struct timeval){ 1, 200000 };
    if (setsockopt(lst, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0)
        return fail("setsockopt(SO_RCVTIMEO)");
    fill_cache();
    rc = timed_accept(lst, &t);
    if (rc != -1 || errno != EAGAIN || !within(t, 1100, 2100))
        return fail("accept() with a 1.2 s receive timeout did not fail with EAGAIN after it");

    while (wait(NULL) > 0)
        ;
    printf("sleeps: poll, epoll_wait, select, ppoll, pselect, accept as without the library; "
           "cached %zu KiB before the poll, %zu after; %zu before the accept, %zu after\n",
           before >> 10, after >> 10, accept_before >> 10, accept_after >> 10);
    return 0;
}

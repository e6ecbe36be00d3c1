/* SPDX-License-Identifier: BSD-2-Clause */
/* libshmpool — the sleeps of an event loop, in the preloadable library: a
 * thread that goes idle gives back what it holds.
 *
 * An idle worker of a prefork server (nginx's, a PostgreSQL backend)
 * sleeps in epoll_wait(), poll() or select() and makes no allocation, so the housekeeping of its slow paths
 * (alloc.c) never runs, and its cache, the classes' empty spans and the
 * page heap's free pages stay mapped however long it sleeps.  So the
 * library's epoll_wait(), epoll_pwait(), poll(), ppoll(), select() and
 * pselect() call the C library's, but a sleep of an attached thread that
 * may last more than a slice (POOL_SLEEP_SLICE_NS) while the thread has
 * something to give back (pool_sleep_due_) is cut into slices: each slice
 * that ends with nothing to report drains (pool_sleep_drain_: the whole
 * cache back, the quiet classes' and page heap's decay periods ended, with
 * no wait for a decay's lock), and the sleep goes on with a slice more
 * while something is left, at most POOL_SLEEP_SLICES of them, then for
 * what is left of the caller's timeout, from the monotonic clock.  A
 * thread with nothing to give back, a sleep of a slice or less, and a
 * process that is not attached call the C library's once, as they would
 * without the library.
 *
 * What the caller sees is the call it made: a slice that reports an event,
 * an error or a signal (EINTR) returns that, errno as the C library left
 * it; the last call's result otherwise, 0 when the timeout ran out.  A
 * signal must not fall between two slices, where its handler would run
 * and the next slice sleep on, so that a loop whose handler sets a flag
 * for it to see (a worker told to quit) would sleep through it: once the
 * first slice has timed out, the thread blocks its signals, and every
 * later slice is the p-variant of its call, which waits with the caller's
 * mask (the one it passed, or the thread's own) installed for the wait
 * alone; a signal that comes while the thread drains is delivered by the
 * next slice's wait, which returns EINTR.  The first slice is the
 * caller's call as it made it, so that a call that ends within a second,
 * as nearly all do under load, costs what it did: two changes of the
 * mask cost 2.2 us on a virtual machine here, where a poll() costs 1.3,
 * and Apache prefork's every keep-alive wait is a poll() of seconds.  A
 * signal that comes in the instant between the first slice's timeout and
 * the block is the one left to run between slices.
 * select() gets its descriptor sets back before every slice (a timeout
 * clears them) and its timeval set to the time left, as Linux's does; a
 * set past FD_SETSIZE is not cut.  A signal handler that sleeps while its
 * thread waits in a slice is cut as any sleep, the thread holding nothing
 * of the pool in a wait, and a handler may jump out of a wait (siglongjmp);
 * a fault's handler that sleeps in a drain calls the C library's straight
 * away.  One that sleeps for more than a slice after interrupting its
 * thread inside malloc() or free() would drain a cache in the middle of a
 * change: the library cannot tell that sleep from the thread's own, so a
 * program must not sleep that long in a handler (nor may it call malloc
 * there).
 *
 * accept() and accept4() on a blocking listening socket without a receive
 * timeout are a sleep too: an idle Apache prefork child blocks in accept.
 * When the thread has something to give back and no connection is waiting,
 * the library waits for one in slices on an epoll instance of its own that
 * watches the socket with EPOLLEXCLUSIVE, so that a connection still wakes
 * one waiter, as accept does, and not every child; then it calls the C
 * library's.  A signal that ends a slice's wait is the caller's EINTR
 * unless every handler the process has set restarts calls (SA_RESTART),
 * as the kernel would have restarted the accept.
 *
 * Only libshmpool.so links this file, as waithook.c.
 */
#include "pool-internal.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "prim/prim.h"

#define POOL_EXPORT __attribute__((visibility("default")))

/* A slice is a decay period: each one that ends can end one.  Enough
 * slices for a quiet arena to give back a burst: the cache at the first,
 * the classes' empty spans one or two periods on, the page heap's pages one
 * period later, its cushion POOL_DECAY_WINDOW periods after that, a slice
 * or two each (a period ends at the first slice after its length). */
#define POOL_SLEEP_SLICE_NS POOL_DECAY_NS
#define POOL_SLEEP_SLICES (4 + 2 * POOL_DECAY_WINDOW + 4)

typedef int (*epoll_pwait_fn_t)(int, struct epoll_event *, int, int, const sigset_t *);
typedef int (*ppoll_fn_t)(struct pollfd *, nfds_t, const struct timespec *, const sigset_t *);
typedef int (*pselect_fn_t)(int, fd_set *, fd_set *, fd_set *, const struct timespec *,
                            const sigset_t *);
typedef int (*epoll_wait_fn_t)(int, struct epoll_event *, int, int);
typedef int (*poll_fn_t)(struct pollfd *, nfds_t, int);
typedef int (*select_fn_t)(int, fd_set *, fd_set *, fd_set *, struct timeval *);
typedef int (*accept_fn_t)(int, struct sockaddr *, socklen_t *);
typedef int (*accept4_fn_t)(int, struct sockaddr *, socklen_t *, int);

static epoll_wait_fn_t libc_epoll_wait_;
static epoll_pwait_fn_t libc_epoll_pwait_;
static poll_fn_t libc_poll_;
static ppoll_fn_t libc_ppoll_;
static select_fn_t libc_select_;
static pselect_fn_t libc_pselect_;
static accept_fn_t libc_accept_;
static accept4_fn_t libc_accept4_;

/* Looked up when the library is loaded, or at the first sleep if another
 * library's constructor sleeps before that. */
__attribute__((constructor)) static void find_libc_sleeps(void)
{
    if (libc_select_ != NULL)
        return;
    libc_epoll_wait_ = (epoll_wait_fn_t)pool_prim_next_symbol_("epoll_wait");
    libc_epoll_pwait_ = (epoll_pwait_fn_t)pool_prim_next_symbol_("epoll_pwait");
    libc_poll_ = (poll_fn_t)pool_prim_next_symbol_("poll");
    libc_ppoll_ = (ppoll_fn_t)pool_prim_next_symbol_("ppoll");
    libc_select_ = (select_fn_t)pool_prim_next_symbol_("select");
    libc_pselect_ = (pselect_fn_t)pool_prim_next_symbol_("pselect");
    libc_accept_ = (accept_fn_t)pool_prim_next_symbol_("accept");
    libc_accept4_ = (accept4_fn_t)pool_prim_next_symbol_("accept4");
}

/* The thread is giving back in a drain: a sleep that a fault's handler
 * makes there (only faults are delivered in a drain) calls the C
 * library's, for a drain of its own would take the locks the thread holds.
 * Set for the drain alone, not the sleep, so that a handler that jumps out
 * of a slice's wait (siglongjmp) leaves the thread's later sleeps cut. */
static __thread bool draining __attribute__((tls_model("initial-exec")));

/* One of the hooked calls, to be made for a timeout of ns nanoseconds
 * (negative: none): its arguments, and the C library's function that
 * makes it. */
typedef struct sleep_s sleep_t;
struct sleep_s {
    int (*call)(sleep_t *w, int64_t ns);
    int fd;
    void *events; /* struct epoll_event * or struct pollfd * */
    int n;        /* maxevents, nfds */
    const sigset_t *mask;
    fd_set *sets[3];
    fd_set saved[3];
    int listener;         /* accept's socket, which fd (an epoll instance) watches */
    bool known;           /* listener's file below has been read */
    dev_t dev;
    ino_t ino;
};

/* Whether a sleep of ns nanoseconds (negative: no timeout) is cut. */
static bool cut(int64_t ns)
{
    return (ns < 0 || ns > (int64_t)POOL_SLEEP_SLICE_NS) && !draining && pool_sleep_due_();
}

/* The end of the slices, or of a thread cancelled in one: its signal
 * mask as it was before them. */
static void slicing_ended(void *mask)
{
    int saved = errno;
    pthread_sigmask(SIG_SETMASK, mask, NULL);
    errno = saved;
}

/* The drains and the slices after the first of the sleep w for ns
 * nanoseconds begun at start, its signals blocked (above).  Returns what
 * the caller gets. */
static int slices(sleep_t *w, uint64_t start, int64_t ns)
{
    int64_t left = ns;
    for (unsigned k = 1;; k++) {
        draining = true;
        bool more = pool_sleep_drain_();
        draining = false;
        if (ns >= 0) {
            int64_t spent = (int64_t)(pool_prim_now_ns_() - start);
            left = spent < ns ? ns - spent : 0;
        }
        if (!more || k == POOL_SLEEP_SLICES || (left >= 0 && left <= (int64_t)POOL_SLEEP_SLICE_NS))
            break;
        int rc = w->call(w, (int64_t)POOL_SLEEP_SLICE_NS);
        if (rc != 0)
            return rc;
    }
    return w->call(w, left);
}

static int sleep_sliced(sleep_t *w, int64_t ns)
{
    uint64_t start = pool_prim_now_ns_();
    int rc = w->call(w, (int64_t)POOL_SLEEP_SLICE_NS);
    if (rc != 0)
        return rc;
    sigset_t all, mask;
    sigfillset(&all);
    /* A fault in the drain keeps its handler, as it had before: blocked,
     * it would kill the process whatever the handler. */
    static const int faults[] = { SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP, SIGSYS };
    for (size_t i = 0; i < sizeof faults / sizeof faults[0]; i++)
        sigdelset(&all, faults[i]);
    pthread_sigmask(SIG_BLOCK, &all, &mask);
    if (w->mask == NULL)
        w->mask = &mask;
    pthread_cleanup_push(slicing_ended, &mask);
    rc = slices(w, start, ns);
    pthread_cleanup_pop(1);
    return rc;
}

/* A timeout in milliseconds, rounded up, for ns (negative: none). */
static int to_ms(int64_t ns)
{
    return ns < 0 ? -1 : (int)((ns + 999999) / 1000000);
}

static int64_t ms_to_ns(int ms)
{
    return ms < 0 ? -1 : (int64_t)ms * 1000000;
}

/* The longest timeout cut, in seconds: past it, a sleep is as long as no
 * timeout, and its nanoseconds could overflow. */
#define POOL_SLEEP_MAX_S (INT64_C(1) << 32)

/* A timespec's nanoseconds in *ns (NULL: -1, none); false for one the
 * kernel refuses or one too long to count, which the C library's call
 * gets as it is. */
static bool ts_to_ns(const struct timespec *ts, int64_t *ns)
{
    *ns = -1;
    if (ts == NULL)
        return true;
    if (ts->tv_sec < 0 || ts->tv_sec > POOL_SLEEP_MAX_S || ts->tv_nsec < 0 ||
        ts->tv_nsec >= 1000000000)
        return false;
    *ns = (int64_t)ts->tv_sec * 1000000000 + ts->tv_nsec;
    return true;
}

static struct timespec ns_to_ts(int64_t ns)
{
    return (struct timespec){ .tv_sec = ns / 1000000000, .tv_nsec = ns % 1000000000 };
}

static int call_epoll(sleep_t *w, int64_t ns)
{
    return libc_epoll_pwait_(w->fd, w->events, w->n, to_ms(ns), w->mask);
}

POOL_EXPORT int epoll_pwait(int fd, struct epoll_event *ev, int max, int timeout,
                            const sigset_t *mask)
{
    find_libc_sleeps();
    if (!cut(ms_to_ns(timeout)))
        return libc_epoll_pwait_(fd, ev, max, timeout, mask);
    sleep_t w = { .call = call_epoll, .fd = fd, .events = ev, .n = max, .mask = mask };
    return sleep_sliced(&w, ms_to_ns(timeout));
}

/* The C library's epoll_wait() is its epoll_pwait() without a mask. */
POOL_EXPORT int epoll_wait(int fd, struct epoll_event *ev, int max, int timeout)
{
    find_libc_sleeps();
    if (!cut(ms_to_ns(timeout)))
        return libc_epoll_wait_(fd, ev, max, timeout);
    sleep_t w = { .call = call_epoll, .fd = fd, .events = ev, .n = max, .mask = NULL };
    return sleep_sliced(&w, ms_to_ns(timeout));
}

static int call_ppoll(sleep_t *w, int64_t ns)
{
    struct timespec ts = ns_to_ts(ns);
    return libc_ppoll_(w->events, (nfds_t)w->n, ns < 0 ? NULL : &ts, w->mask);
}

POOL_EXPORT int ppoll(struct pollfd *fds, nfds_t n, const struct timespec *timeout,
                      const sigset_t *mask)
{
    find_libc_sleeps();
    int64_t ns;
    if (n > INT32_MAX || !ts_to_ns(timeout, &ns) || !cut(ns))
        return libc_ppoll_(fds, n, timeout, mask);
    sleep_t w = { .call = call_ppoll, .events = fds, .n = (int)n, .mask = mask };
    return sleep_sliced(&w, ns);
}

POOL_EXPORT int poll(struct pollfd *fds, nfds_t n, int timeout)
{
    find_libc_sleeps();
    if (n > INT32_MAX || !cut(ms_to_ns(timeout)))
        return libc_poll_(fds, n, timeout);
    sleep_t w = { .call = call_ppoll, .events = fds, .n = (int)n };
    return sleep_sliced(&w, ms_to_ns(timeout));
}

/* Keep a select's sets for the slices after the first. */
static void save_sets(sleep_t *w, fd_set *r, fd_set *wr, fd_set *e)
{
    w->sets[0] = r;
    w->sets[1] = wr;
    w->sets[2] = e;
    for (unsigned i = 0; i < 3; i++)
        if (w->sets[i] != NULL)
            w->saved[i] = *w->sets[i];
}

static void restore_sets(sleep_t *w)
{
    for (unsigned i = 0; i < 3; i++)
        if (w->sets[i] != NULL)
            *w->sets[i] = w->saved[i];
}

static int call_pselect(sleep_t *w, int64_t ns)
{
    struct timespec ts = ns_to_ts(ns);
    restore_sets(w);
    return libc_pselect_(w->n, w->sets[0], w->sets[1], w->sets[2], ns < 0 ? NULL : &ts, w->mask);
}

POOL_EXPORT int pselect(int n, fd_set *r, fd_set *wr, fd_set *e, const struct timespec *timeout,
                        const sigset_t *mask)
{
    find_libc_sleeps();
    int64_t ns;
    if (n < 0 || n > FD_SETSIZE || !ts_to_ns(timeout, &ns) || !cut(ns))
        return libc_pselect_(n, r, wr, e, timeout, mask);
    sleep_t w = { .call = call_pselect, .n = n, .mask = mask };
    save_sets(&w, r, wr, e);
    return sleep_sliced(&w, ns);
}

/* select() through pselect() without a mask: the same call but for the
 * timeout's unit, which select() then sets to the time left. */
POOL_EXPORT int select(int n, fd_set *r, fd_set *wr, fd_set *e, struct timeval *timeout)
{
    find_libc_sleeps();
    int64_t ns = -1;
    bool valid = timeout == NULL ||
                 (timeout->tv_usec >= 0 && timeout->tv_usec < 1000000 &&
                  ts_to_ns(&(struct timespec){ timeout->tv_sec, timeout->tv_usec * 1000 }, &ns));
    if (n < 0 || n > FD_SETSIZE || !valid || !cut(ns))
        return libc_select_(n, r, wr, e, timeout);
    sleep_t w = { .call = call_pselect, .n = n, .mask = NULL };
    save_sets(&w, r, wr, e);
    uint64_t start = pool_prim_now_ns_();
    int rc = sleep_sliced(&w, ns);
    if (timeout != NULL) {
        int saved = errno;
        int64_t spent = (int64_t)(pool_prim_now_ns_() - start);
        int64_t left = spent < ns ? ns - spent : 0;
        timeout->tv_sec = left / 1000000000;
        timeout->tv_usec = (left % 1000000000) / 1000;
        errno = saved;
    }
    return rc;
}

/* Whether every handler the process has set restarts the calls it
 * interrupts. */
static bool all_handlers_restart(void)
{
    for (int sig = 1; sig < NSIG; sig++) {
        struct sigaction sa;
        if (sigaction(sig, NULL, &sa) != 0)
            continue;
        bool handled = (sa.sa_flags & SA_SIGINFO) ? sa.sa_sigaction != NULL
                                                  : sa.sa_handler != SIG_DFL &&
                                                        sa.sa_handler != SIG_IGN;
        if (handled && !(sa.sa_flags & SA_RESTART))
            return false;
    }
    return true;
}

/* A slice of accept's wait.  A handler that ran since the last slice may
 * have closed the socket or put another file at its number (php-fpm's
 * soft quit does both), while the epoll instance still watches the old
 * one: the wait ends as if a connection came, and the accept fails as the
 * restarted one would. */
static int call_accept(sleep_t *w, int64_t ns)
{
    struct stat st;
    if (fstat(w->listener, &st) != 0 || (w->known && (st.st_dev != w->dev || st.st_ino != w->ino)))
        return 1;
    w->known = true;
    w->dev = st.st_dev;
    w->ino = st.st_ino;
    return call_epoll(w, ns);
}

/* A thread cancelled in a slice's wait (a cancellation point, as accept
 * is) closes the epoll instance. */
static void accept_cancelled(void *ep)
{
    close(*(int *)ep);
}

/* Before an accept on fd: while the thread has something to give back,
 * wait for a connection in slices (above).  Returns false, errno EINTR,
 * for a signal the caller must see; true when the accept is to be made. */
static bool accept_sliced(int fd)
{
    if (draining || !pool_sleep_due_())
        return true;
    int saved = errno;
    struct pollfd p = { .fd = fd, .events = POLLIN };
    int fl;
    struct timeval tv;
    socklen_t tvlen = sizeof tv;
    /* A socket that would not block (an event loop's, asked first), a
     * connection waiting, or a socket with a timeout of its own (which the
     * accept must keep): the accept now. */
    if ((fl = fcntl(fd, F_GETFL)) < 0 || (fl & O_NONBLOCK) || libc_poll_(&p, 1, 0) != 0 ||
        getsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, &tvlen) != 0 || tv.tv_sec != 0 ||
        tv.tv_usec != 0) {
        errno = saved;
        return true;
    }
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = { .events = EPOLLIN | EPOLLEXCLUSIVE };
    if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
        if (ep >= 0)
            close(ep);
        errno = saved;
        return true;
    }
    sleep_t w = { .call = call_accept, .fd = ep, .events = &ev, .n = 1, .listener = fd };
    int rc;
    pthread_cleanup_push(accept_cancelled, &ep);
    rc = sleep_sliced(&w, -1);
    pthread_cleanup_pop(0);
    int why = errno;
    close(ep);
    if (rc < 0 && why == EINTR && !all_handlers_restart()) {
        errno = EINTR;
        return false;
    }
    errno = saved;
    return true;
}

POOL_EXPORT int accept(int fd, struct sockaddr *addr, socklen_t *len)
{
    find_libc_sleeps();
    return accept_sliced(fd) ? libc_accept_(fd, addr, len) : -1;
}

POOL_EXPORT int accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
    find_libc_sleeps();
    return accept_sliced(fd) ? libc_accept4_(fd, addr, len, flags) : -1;
}

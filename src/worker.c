/* SPDX-License-Identifier: BSD-2-Clause */
/* poold — a worker process, and the workers it runs.
 *
 * pd_worker_run is everything a worker process does after fork: attach to
 * the allocator, drop the master's signal handlers, tie its life to the
 * master's, close the listening sockets of other processes' workers, and
 * run its workers.  With -w it is one worker itself; with --threads N it
 * starts N threads, a worker each, and its main thread only waits: for a
 * signal, which it passes on to all of them, and for workers that end.
 *
 * A worker is pd_worker_loop, the same code either way: pin itself to its
 * CPU, build its own libevent base (a base must cross neither fork nor
 * threads), say it is ready in its stats slot, accept on its own listening
 * socket, refresh its Date cache every second, and once its stop
 * descriptor is readable stop accepting, let requests in flight finish
 * for at most --shutdown-timeout, and return.  The deadline is the
 * worker's own, not only the master's: a worker whose master died (it gets
 * SIGTERM then) has no one else to end it.  The stop descriptor is the process's signalfd for a worker
 * process, and for a worker thread a pipe the main thread closes: only
 * how workers start and are told to stop differs between the two modes.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>

#include <event2/event.h>

#include "poold.h"

/* Connections taken per wake-up: enough to drain a burst, few enough that
 * one worker does not starve its own clients while accepting. */
#define PD_ACCEPT_BATCH 16

/* The signal that stopped the process, for the workers' log lines: a
 * worker process reads it from its signalfd itself, a worker thread finds
 * it here, stored by the main thread before it closed the stop pipe; 0
 * when a failed sibling stopped them instead. */
static int pd_stop_signal;

/* Whether the server as a whole has fewer than --max-conns connections
 * per worker open.  The kernel's SO_REUSEPORT hash spreads connections
 * unevenly at the scale of the cap: under wrk -c2000 against -w 2 with no
 * cap in the way, the busier worker held 1138 to 1233 of them in three
 * runs, more than a cap of 1024, while the other had room.  A worker at
 * its own cap therefore takes a connection while the server has room, and
 * closes idle ones (or refuses) only when it has none: measured under
 * wrk -c2000 (two runs each), wrk lost no connection, where a cap per
 * worker closed 224 and 768 of its connections to admit others.  A
 * shared listening socket with EPOLLEXCLUSIVE spread no better (1010 to
 * 1121 at 2000 connections, 51 to 0 at 50) and needs an epoll descriptor
 * per worker beside libevent's, which cannot set the flag. */
static bool pd_worker_server_has_room(const pd_worker_t *w)
{
    int n = pd_stats_count();
    uint64_t open = 0;

    for (int k = 0; k < 2 * n; k++)
        open += __atomic_load_n(&pd_stats_slot(k)->xconnections, __ATOMIC_RELAXED);
    return open < (uint64_t)w->cfg->max_conns * (uint64_t)n;
}

static void pd_worker_on_accept(evutil_socket_t lfd, short what, void *arg)
{
    static const struct timeval pause = {0, 100000};
    pd_worker_t *w = arg;
    int one = 1;

    w->accept_round++;
    for (int i = 0; i < PD_ACCEPT_BATCH && !w->stopping; i++) {
        int fd = accept4((int)lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno == EAGAIN)
                return;     /* the queue is empty */
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                /* Out of descriptors or memory: pausing beats spinning on a
                 * socket that stays readable. */
                pd_log(PD_LOG_WARN, errno, "accept4() failed, pausing accept for 100 ms");
                event_del(w->accept_ev);
                event_add(w->resume_ev, &pause);
                return;
            }
            pd_log(PD_LOG_WARN, errno, "accept4() failed");
            return;
        }
        /* The server's count, whatever this worker's own: a worker under
         * its share would otherwise take the connection that puts the
         * server past its cap while another holds more than its own. */
        if (!pd_worker_server_has_room(w) && pd_conn_drain_idle(w) == 0) {
            /* The server at its cap with no idle connection here to
             * close: close the new one at once, so the client learns now
             * instead of waiting in a queue nobody serves. */
            if (pd_log_enabled(PD_LOG_TRACE))
                pd_log(PD_LOG_TRACE, 0, "connection refused: %d open", w->nconns);
            close(fd);
            continue;
        }
        /* Responses leave in one write each: Nagle would only delay them. */
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        pd_conn_open(w, fd);
    }
}

static void pd_worker_on_resume(evutil_socket_t fd, short what, void *arg)
{
    pd_worker_t *w = arg;

    if (!w->stopping)
        event_add(w->accept_ev, NULL);
}

/* Once a second: the Date cache, and the worker's share of the pool's
 * housekeeping. */
static void pd_worker_on_date(evutil_socket_t fd, short what, void *arg)
{
    pd_http_date_update(time(NULL));
    pd_alloc_scavenge();
}

/* The stop descriptor is readable: a worker process's signalfd, from which
 * it takes the signal, or a worker thread's stop pipe, at end of file for
 * good once the main thread has closed it (so the read takes nothing and
 * every thread sees it).  Either stays readable: the event fires once. */
static void pd_worker_on_stop(evutil_socket_t fd, short what, void *arg)
{
    pd_worker_t *w = arg;
    struct signalfd_siginfo si;
    int sig;

    if (read((int)fd, &si, sizeof(si)) == (ssize_t)sizeof(si))
        __atomic_store_n(&pd_stop_signal, (int)si.ssi_signo, __ATOMIC_RELEASE);
    sig = __atomic_load_n(&pd_stop_signal, __ATOMIC_ACQUIRE);
    w->stopping = true;
    if (sig > 0)
        pd_log(PD_LOG_DEBUG, 0, "worker %d: signal %d, finishing %d connections", w->index,
               sig, w->nconns);
    else
        pd_log(PD_LOG_DEBUG, 0, "worker %d: its process stops, finishing %d connections",
               w->index, w->nconns);
    event_del(w->accept_ev);
    event_del(w->resume_ev);
    close(w->lfd);
    w->lfd = -1;
    event_base_loopexit(w->base, &w->cfg->shutdown_timeout);
    pd_conn_shutdown_all(w);
    /* pd_worker_dispatch takes over: it watches the connections go. */
    event_base_loopbreak(w->base);
}

/* Run w's loop until it is told to stop (pd_worker_on_stop breaks it),
 * then a turn at a time until its last connection is gone or the shutdown
 * timeout ends the loop.  The worker counts its connections itself, after
 * each turn, so that conn.c, which closes them, need not call back up here.
 * Returns PD_OK, or PD_ERROR when libevent failed. */
static int pd_worker_dispatch(pd_worker_t *w)
{
    int rc = event_base_dispatch(w->base);

    while (rc == 0 && w->stopping && w->nconns > 0 && !event_base_got_exit(w->base))
        rc = event_base_loop(w->base, EVLOOP_ONCE);
    return rc < 0 ? PD_ERROR : PD_OK;
}

/* Pin the calling thread -- with -w the whole process -- to w->cpu. */
static void pd_worker_pin(const pd_worker_t *w)
{
    cpu_set_t set;

    if (w->cpu < 0)
        return;
    CPU_ZERO(&set);
    CPU_SET(w->cpu, &set);
    if (sched_setaffinity(0, sizeof(set), &set) != 0)
        pd_log(PD_LOG_WARN, errno, "worker %d: sched_setaffinity(CPU %d) failed", w->index,
               w->cpu);
    else
        pd_log(PD_LOG_DEBUG, 0, "worker %d pinned to CPU %d", w->index, w->cpu);
}

/* Worker `index` in the calling thread, from its set-up to its end: serve
 * on lfd until stop_fd is readable and its connections are done, counting
 * in stats slot `slot`.  The state lives on this thread's stack, as a
 * worker process's does on its only one.  Returns 0 when it stopped as
 * asked, 1 when it could not get going or its loop failed (logged). */
static int pd_worker_loop(const pd_config_t *cfg, int index, int slot, int lfd, int cpu,
                          int stop_fd)
{
    pd_worker_t w;
    struct timeval second = {1, 0};
    int rc = 1;

    memset(&w, 0, sizeof(w));
    w.cfg = cfg;
    w.index = index;
    w.pid = getpid();
    w.tid = gettid();
    w.lfd = lfd;
    w.cpu = cpu;
    w.stop_fd = stop_fd;
    w.stats = pd_stats_slot(slot);
    TAILQ_INIT(&w.idle);
    pd_worker_pin(&w);
    /* The Date cache is the thread's own: each worker's timer refreshes it. */
    pd_http_date_update(time(NULL));

    w.base = event_base_new();
    if (w.base == NULL) {
        pd_log(PD_LOG_ERROR, 0, "worker %d: event_base_new() failed", index);
        goto fail;
    }
    if (cfg->request_region && (w.region = pd_region_create(cfg->region_block)) == NULL) {
        pd_log(PD_LOG_ERROR, ENOMEM, "worker %d: cannot create its request region", index);
        goto fail;
    }
    w.accept_ev = event_new(w.base, lfd, EV_READ | EV_PERSIST, pd_worker_on_accept, &w);
    w.resume_ev = evtimer_new(w.base, pd_worker_on_resume, &w);
    w.date_ev = event_new(w.base, -1, EV_PERSIST, pd_worker_on_date, &w);
    w.stop_ev = event_new(w.base, stop_fd, EV_READ, pd_worker_on_stop, &w);
    if (w.accept_ev == NULL || w.resume_ev == NULL || w.date_ev == NULL || w.stop_ev == NULL ||
        event_add(w.stop_ev, NULL) != 0 || event_add(w.date_ev, &second) != 0 ||
        event_add(w.accept_ev, NULL) != 0) {
        pd_log(PD_LOG_ERROR, 0, "worker %d: cannot set up its events", index);
        goto fail;
    }

    /* Ready: publishing the pid tells the master that this worker got
     * going, so a death from here on is replaced at once instead of
     * counting toward its crash-loop back-off. */
    pd_stats_begin(slot, w.pid, w.tid);
    if (pd_worker_dispatch(&w) != PD_OK) {
        pd_log(PD_LOG_ERROR, 0, "worker %d: event loop failed", index);
        goto fail;
    }
    if (w.nconns > 0)
        pd_log(PD_LOG_WARN, 0, "worker %d: %d connections still busy after the shutdown "
               "timeout: closed", index, w.nconns);
    rc = 0;
fail:
    while (w.conns != NULL)
        pd_conn_close(w.conns);
    if (w.accept_ev != NULL)
        event_free(w.accept_ev);
    if (w.resume_ev != NULL)
        event_free(w.resume_ev);
    if (w.date_ev != NULL)
        event_free(w.date_ev);
    if (w.stop_ev != NULL)
        event_free(w.stop_ev);
    if (w.base != NULL)     /* NULL would mean libevent's global base */
        event_base_free(w.base);
    pd_region_destroy(w.region);
    if (w.lfd >= 0)
        close(w.lfd);
    return rc;
}

/* The CPU worker `index` is pinned to, -1 for none. */
static int pd_worker_cpu(const int *cpus, int ncpus, int index)
{
    return ncpus > 0 ? cpus[index % ncpus] : -1;
}

/* ======================================================================== */
/* --threads: a worker per thread                                            */
/* ======================================================================== */

/* What a worker thread is given, and the status it leaves. */
typedef struct pd_thread_s {
    pthread_t th;
    const pd_config_t *cfg;
    int index;
    int slot;                   /* its stats slot */
    int lfd;
    int cpu;
    int stop_fd;                /* the stop pipe's read end */
    int done_fd;                /* eventfd: 1 added when the worker ends */
    int rc;                     /* pd_worker_loop's; read after the join */
} pd_thread_t;

static void *pd_worker_thread(void *arg)
{
    pd_thread_t *t = arg;
    uint64_t one = 1;

    t->rc = pd_worker_loop(t->cfg, t->index, t->slot, t->lfd, t->cpu, t->stop_fd);
    if (write(t->done_fd, &one, sizeof(one)) != (ssize_t)sizeof(one))
        pd_log(PD_LOG_ERROR, errno, "worker %d: cannot tell its process that it ended",
               t->index);
    return NULL;
}

/* Tell every worker thread to stop, once: close the stop pipe's write end
 * (*wfd, then -1), which leaves its read end at end of file for good. */
static void pd_worker_stop_threads(int *wfd, int sig)
{
    if (*wfd < 0)
        return;
    __atomic_store_n(&pd_stop_signal, sig, __ATOMIC_RELEASE);
    close(*wfd);
    *wfd = -1;
}

/* The main thread of a --threads process: start a thread per worker
 * (first to first + n - 1), then wait in poll() on the process's signalfd
 * and on an eventfd the workers count their ends on.  A signal is passed
 * on to all workers through the stop pipe.  A worker that ends unasked
 * (it could not get going, or its loop failed) stops the others the same
 * way and the process exits 1: a worker thread's failure is its
 * process's, as a crash is -- a thread killed by a signal takes the whole
 * process with it -- and the master restarts the process with all its
 * threads.  Returns the process exit status. */
static int pd_worker_threads(const pd_config_t *cfg, int first, int n, int slot_off,
                             const int *lfds, const int *cpus, int ncpus, int sfd)
{
    pd_thread_t *t = calloc((size_t)n, sizeof(*t));
    int stop[2] = {-1, -1};
    int done = eventfd(0, EFD_CLOEXEC);
    int started = 0, ended = 0, rc = 1;

    if (t == NULL || done < 0 || pipe2(stop, O_CLOEXEC) != 0) {
        pd_log(PD_LOG_ERROR, t == NULL ? ENOMEM : errno,
               "worker process: cannot set up its %d threads", n);
        goto fail;
    }
    rc = 0;
    for (; started < n; started++) {
        pd_thread_t *x = &t[started];
        int err;

        x->cfg = cfg;
        x->index = first + started;
        x->slot = x->index + slot_off;
        x->lfd = lfds[x->index];
        x->cpu = pd_worker_cpu(cpus, ncpus, x->index);
        x->stop_fd = stop[0];
        x->done_fd = done;
        err = pthread_create(&x->th, NULL, pd_worker_thread, x);
        if (err != 0) {
            pd_log(PD_LOG_ERROR, err, "worker %d: pthread_create() failed", x->index);
            pd_worker_stop_threads(&stop[1], 0);
            rc = 1;
            break;
        }
    }
    while (ended < started) {
        struct pollfd p[2] = {{sfd, POLLIN, 0}, {done, POLLIN, 0}};
        struct signalfd_siginfo si;
        uint64_t k;

        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            /* Nothing left to wait with: stop, and let the joins wait. */
            pd_log(PD_LOG_ERROR, errno, "worker process: poll() failed");
            pd_worker_stop_threads(&stop[1], 0);
            rc = 1;
            break;
        }
        if ((p[0].revents & POLLIN) && read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si) &&
            stop[1] >= 0) {
            pd_log(PD_LOG_DEBUG, 0, "worker process: signal %d, stopping %d worker threads",
                   (int)si.ssi_signo, started - ended);
            pd_worker_stop_threads(&stop[1], (int)si.ssi_signo);
        }
        if ((p[1].revents & POLLIN) && read(done, &k, sizeof(k)) == (ssize_t)sizeof(k)) {
            ended += (int)k;
            if (stop[1] >= 0) {
                pd_log(PD_LOG_ERROR, 0, "worker process: a worker thread ended unasked; "
                       "stopping the other %d", started - ended);
                pd_worker_stop_threads(&stop[1], 0);
                rc = 1;
            }
        }
    }
    for (int k = 0; k < started; k++) {
        pthread_join(t[k].th, NULL);
        if (t[k].rc != 0)
            rc = 1;
    }
fail:
    for (int k = 0; k < 2; k++)
        if (stop[k] >= 0)
            close(stop[k]);
    if (done >= 0)
        close(done);
    free(t);
    return rc;
}

/* ======================================================================== */
/* The worker process                                                        */
/* ======================================================================== */

/* What the process does before its workers run, for workers first to
 * first + n - 1; the parts that fail return PD_ERROR (the process then
 * exits 1), the others are logged. */
static int pd_worker_start(int first, int n, const int *lfds, int nlfds, pid_t master)
{
    struct sigaction dfl;

    if (pd_alloc_attach() != PD_OK)
        return PD_ERROR;

    /* The master's flag handlers mean nothing here; the signals stay
     * blocked, to be read from a signalfd. */
    memset(&dfl, 0, sizeof(dfl));
    dfl.sa_handler = SIG_DFL;
    sigaction(SIGTERM, &dfl, NULL);
    sigaction(SIGINT, &dfl, NULL);
    sigaction(SIGQUIT, &dfl, NULL);
    sigaction(SIGHUP, &dfl, NULL);
    sigaction(SIGUSR2, &dfl, NULL);
    sigaction(SIGCHLD, &dfl, NULL);

    /* Do not outlive a master killed with SIGKILL; one already gone before
     * the death signal was asked for would never send it. */
    if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != master)
        return PD_ERROR;

    for (int k = 0; k < nlfds; k++)
        if (k < first || k >= first + n)
            close(lfds[k]);
    return PD_OK;
}

int pd_worker_run(const pd_config_t *cfg, int proc, int half, const int *lfds, int nlfds,
                  const int *cpus, int ncpus, pid_t master)
{
    int n = pd_config_threads(cfg);
    int first = proc * n;
    int slot_off = half * pd_config_nworkers(cfg);
    sigset_t stop;
    int sfd, rc;

    if (pd_worker_start(first, n, lfds, nlfds, master) != PD_OK)
        return 1;
    /* The parser's own limit must never be the one that fires first.  It
     * is the process's: set before any worker runs. */
    http_parser_set_max_header_size((uint32_t)cfg->max_header * 2);

    /* SIGTERM, SIGINT and SIGQUIT stay blocked in every thread, so that
     * they wait for the process as a whole and are read here; each is a
     * graceful stop, as for the master.  SIGHUP and SIGUSR2 mean something
     * to the master only, and stay blocked here. */
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGQUIT);
    sfd = signalfd(-1, &stop, SFD_NONBLOCK | SFD_CLOEXEC);
    if (sfd < 0) {
        pd_log(PD_LOG_ERROR, errno, "worker process %d: signalfd() failed", proc);
        return 1;
    }
    if (cfg->threads == 0)
        rc = pd_worker_loop(cfg, first, first + slot_off, lfds[first],
                            pd_worker_cpu(cpus, ncpus, first), sfd);
    else
        rc = pd_worker_threads(cfg, first, n, slot_off, lfds, cpus, ncpus, sfd);
    close(sfd);
    return rc;
}

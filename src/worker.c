/* poold — a worker process.
 *
 * pd_worker_run is everything a worker process does after fork: attach to
 * the allocator, drop the master's signal handlers, tie its life to the
 * master's, close the other workers' listening sockets, and run its
 * worker, pd_worker_loop: pin itself to its CPU, build its own libevent
 * base (a base must not cross fork), say it is ready in its stats slot,
 * accept on its listening socket, refresh the Date cache every second,
 * and once its stop descriptor -- a signalfd for SIGTERM and SIGINT -- is
 * readable stop accepting, let requests in flight finish, and return.
 */
#include "config.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>

#include <event2/event.h>

#include "poold.h"

/* Connections taken per wake-up: enough to drain a burst, few enough that
 * one worker does not starve its own clients while accepting. */
#define PD_ACCEPT_BATCH 16

void pd_worker_conn_gone(pd_worker_t *w)
{
    if (w->stopping && w->nconns == 0)
        event_base_loopbreak(w->base);
}

static void pd_worker_on_accept(evutil_socket_t lfd, short what, void *arg)
{
    static const struct timeval pause = {0, 100000};
    pd_worker_t *w = arg;
    int one = 1;

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
        if (w->nconns >= w->cfg->max_conns) {
            /* Over --max-conns: close at once, so the client learns now
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

static void pd_worker_on_date(evutil_socket_t fd, short what, void *arg)
{
    pd_http_date_update(time(NULL));
}

/* The stop descriptor, the process's signalfd, is readable.  The signal
 * stays pending until read; the event fires once either way. */
static void pd_worker_on_stop(evutil_socket_t fd, short what, void *arg)
{
    pd_worker_t *w = arg;
    struct signalfd_siginfo si;

    w->stopping = true;
    if (read((int)fd, &si, sizeof(si)) != (ssize_t)sizeof(si))
        si.ssi_signo = 0;
    pd_log(PD_LOG_DEBUG, 0, "worker %d: signal %d, finishing %d connections", w->index,
           (int)si.ssi_signo, w->nconns);
    event_del(w->accept_ev);
    event_del(w->resume_ev);
    close(w->lfd);
    w->lfd = -1;
    pd_conn_shutdown_all(w);
    pd_worker_conn_gone(w);
}

/* Pin the process to w->cpu. */
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

/* Worker `index` from its set-up to its end: serve on lfd until stop_fd is
 * readable and its connections are done.  Returns 0 when it stopped as
 * asked, 1 when it could not get going or its loop failed (logged). */
static int pd_worker_loop(const pd_config_t *cfg, int index, int lfd, int cpu, int stop_fd)
{
    pd_worker_t w;
    struct timeval second = {1, 0};
    int rc = 1;

    memset(&w, 0, sizeof(w));
    w.cfg = cfg;
    w.index = index;
    w.pid = getpid();
    w.lfd = lfd;
    w.cpu = cpu;
    w.stop_fd = stop_fd;
    w.stats = pd_stats_slot(index);
    pd_worker_pin(&w);
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
    pd_stats_begin(index, w.pid);
    if (event_base_dispatch(w.base) < 0) {
        pd_log(PD_LOG_ERROR, 0, "worker %d: event loop failed", index);
        goto fail;
    }
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
/* The worker process                                                        */
/* ======================================================================== */

/* What the process does before its worker runs; the parts that fail
 * return PD_ERROR (the process then exits 1), the others are logged. */
static int pd_worker_start(int index, const int *lfds, int nlfds, pid_t master)
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
    sigaction(SIGCHLD, &dfl, NULL);

    /* Do not outlive a master killed with SIGKILL; one already gone before
     * the death signal was asked for would never send it. */
    if (prctl(PR_SET_PDEATHSIG, SIGTERM) != 0 || getppid() != master)
        return PD_ERROR;

    for (int k = 0; k < nlfds; k++)
        if (k != index)
            close(lfds[k]);
    return PD_OK;
}

int pd_worker_run(const pd_config_t *cfg, int proc, const int *lfds, int nlfds,
                  const int *cpus, int ncpus, pid_t master)
{
    sigset_t stop;
    int sfd, rc;

    if (pd_worker_start(proc, lfds, nlfds, master) != PD_OK)
        return 1;
    /* The parser's own limit must never be the one that fires first. */
    http_parser_set_max_header_size((uint32_t)cfg->max_header * 2);

    /* SIGTERM and SIGINT stay blocked, to be read from the loop: no signal
     * handler, and no libevent signal machinery. */
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    sfd = signalfd(-1, &stop, SFD_NONBLOCK | SFD_CLOEXEC);
    if (sfd < 0) {
        pd_log(PD_LOG_ERROR, errno, "worker process %d: signalfd() failed", proc);
        return 1;
    }
    rc = pd_worker_loop(cfg, proc, lfds[proc], pd_worker_cpu(cpus, ncpus, proc), sfd);
    close(sfd);
    return rc;
}

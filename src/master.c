/* poold — the master process.
 *
 * pd_master_run reserves the allocator's arena and the shared counters,
 * binds a listening socket per worker, forks the worker processes (each
 * told which CPUs its workers pin themselves to; worker.c does the rest of
 * their start-up), prints the start-up line, then supervises processes: a
 * worker process that dies is logged and replaced, at once when it had
 * been serving, with back-off when it keeps dying before it gets going;
 * SIGTERM/SIGINT stop them gracefully and kill the ones still busy after
 * --shutdown-timeout.  With --threads the one process runs all workers as
 * threads, and whatever ends one of them ends it: the master sees, and
 * restarts, only processes.  Signal
 * handlers only set flags; everything happens in the loop, which sleeps in
 * ppoll() with the signals unblocked only there.
 */
#include "config.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "poold.h"

/* Crash-loop back-off, from a slot's first death before its worker was
 * ready: 100 ms, doubling with each further one, at most 5 s. */
#define PD_BACKOFF_MIN_MS 100
#define PD_BACKOFF_MAX_MS 5000
/* A pool lock held this long by a worker that answers nothing means the
 * worker is stuck (stopped, or looping inside the pool): it is killed. */
#define PD_LOCK_STALL_MS 2000
/* The watchdog's look at the pool's locks, and the pool's decay: each on a
 * timer of its own. */
#define PD_WATCHDOG_MS 500
#define PD_DECAY_MS 1000

typedef struct pd_slot_s {
    pid_t pid;              /* 0 while not running */
    int64_t restart_us;     /* when to restart (monotonic); valid while pid == 0 */
    unsigned fails;         /* deaths in a row before becoming ready */
} pd_slot_t;

typedef struct pd_master_s {
    const pd_config_t *cfg;
    pd_slot_t slots[PD_MAX_WORKERS];    /* one per worker process */
    int lfds[PD_MAX_WORKERS];   /* one listening socket per worker */
    int nlfds;
    int cpus[CPU_SETSIZE];      /* the CPUs we may run on, in order */
    int ncpus;
    sigset_t run_mask;          /* the mask to restore in ppoll() */
    bool stopping;
    pid_t unreaped[PD_MAX_WORKERS]; /* dead workers the pool could not reap yet */
    int nunreaped;
    pid_t stalled;              /* worker process seen holding a pool lock too long */
    uint64_t stalled_requests;  /* its request count when first seen */
    int64_t watchdog_us;        /* the watchdog's next look (monotonic) */
    int64_t decay_us;           /* the pool's next decay (monotonic) */
} pd_master_t;

static volatile sig_atomic_t pd_got_chld;
static volatile sig_atomic_t pd_got_stop;

static void pd_master_on_signal(int sig)
{
    if (sig == SIGCHLD)
        pd_got_chld = 1;
    else
        pd_got_stop = sig;
}

/* Microseconds, not milliseconds: a back-off of 100 ms must never end
 * early because the clock was read just before a millisecond's end. */
static int64_t pd_now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int64_t pd_tv_us(const struct timeval *tv)
{
    return (int64_t)tv->tv_sec * 1000000 + tv->tv_usec;
}

/* Sleep in ppoll() for at most us microseconds; the kernel never ends the
 * timeout early, so a deadline that ppoll() waited for has passed. */
static void pd_sleep_us(const pd_master_t *m, int64_t us)
{
    struct timespec ts;

    ts.tv_sec = us / 1000000;
    ts.tv_nsec = (us % 1000000) * 1000;
    ppoll(NULL, 0, &ts, &m->run_mask);
}

/* ======================================================================== */
/* Listening sockets                                                         */
/* ======================================================================== */

/* One SO_REUSEPORT socket per worker, not one shared socket, because the
 * kernel then spreads connections evenly.  Measured on this 2-CPU machine
 * with `poold -w 2` under `wrk -t1 -c50 -d5s /plaintext`, five runs each,
 * open connections per worker (from /stats, mid-run, 51 with the probe):
 *   SO_REUSEPORT: 22/29  26/25  22/29  28/23  23/28
 *   shared:       49/2   28/23  46/5   51/0   27/24
 * and the busier worker's share of requests: 52-62% with SO_REUSEPORT,
 * 62-100% shared.  On a shared socket every worker wakes for a connection
 * and the one that is already running wins a whole burst.  A worker's
 * socket stays open in the master, so connections queued on it while the
 * worker is being replaced wait for its successor instead of being reset. */
static int pd_listen_one(pd_master_t *m, struct sockaddr_storage *addr, socklen_t len)
{
    const pd_config_t *cfg = m->cfg;
    char where[96];
    int one = 1;
    int fd;
    int port = ntohs(addr->ss_family == AF_INET6
                         ? ((struct sockaddr_in6 *)addr)->sin6_port
                         : ((struct sockaddr_in *)addr)->sin_port);

    pd_config_format_addr(cfg, port, where, sizeof(where));
    fd = socket(addr->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        pd_log(PD_LOG_ERROR, errno, "socket() for %s failed", where);
        return -1;
    }
    if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
        setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one)) != 0) {
        pd_log(PD_LOG_ERROR, errno, "setsockopt() on %s failed", where);
        goto fail;
    }
    if (bind(fd, (struct sockaddr *)addr, len) != 0) {
        pd_log(PD_LOG_ERROR, errno, "bind(%s) failed", where);
        goto fail;
    }
    if (listen(fd, 511) != 0) {
        pd_log(PD_LOG_ERROR, errno, "listen(%s) failed", where);
        goto fail;
    }
    return fd;
fail:
    close(fd);
    return -1;
}

/* Returns the bound port, or -1 (logged). */
static int pd_listen_all(pd_master_t *m)
{
    struct sockaddr_storage addr = m->cfg->addr;
    socklen_t len = m->cfg->addrlen;
    int port;

    for (int i = 0; i < pd_config_nworkers(m->cfg); i++) {
        int fd = pd_listen_one(m, &addr, len);

        if (fd < 0)
            return -1;
        m->lfds[m->nlfds++] = fd;
        /* With port 0 the first bind picks the port; the others join it. */
        if (i == 0 && getsockname(fd, (struct sockaddr *)&addr, &len) != 0) {
            pd_log(PD_LOG_ERROR, errno, "getsockname() failed");
            return -1;
        }
    }
    port = ntohs(addr.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&addr)->sin6_port
                                            : ((struct sockaddr_in *)&addr)->sin_port);
    return port;
}

static void pd_listen_close(pd_master_t *m)
{
    for (int i = 0; i < m->nlfds; i++)
        close(m->lfds[i]);
    m->nlfds = 0;
}

/* ======================================================================== */
/* Workers                                                                   */
/* ======================================================================== */

static void pd_cpus_init(pd_master_t *m)
{
    cpu_set_t set;

    m->ncpus = 0;
    /* "CPU i" means the i-th CPU we may run on, so that `taskset -c 2,3
     * poold` pins inside 2,3 instead of escaping to 0,1. */
    if (sched_getaffinity(0, sizeof(set), &set) == 0) {
        for (int c = 0; c < CPU_SETSIZE; c++)
            if (CPU_ISSET(c, &set))
                m->cpus[m->ncpus++] = c;
    }
    if (m->ncpus == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);

        for (int c = 0; c < n && c < CPU_SETSIZE; c++)
            m->cpus[m->ncpus++] = c;
    }
}

/* Fork worker process i.  Returns its pid, or -1 (logged; retried later). */
static pid_t pd_spawn(pd_master_t *m, int i)
{
    pid_t master = getpid();
    pid_t pid = fork();

    if (pid < 0) {
        pd_log(PD_LOG_ERROR, errno, "fork() for worker %d failed", i);
        m->slots[i].restart_us = pd_now_us() + PD_BACKOFF_MAX_MS * 1000;
        return -1;
    }
    if (pid == 0)
        _exit(pd_worker_run(m->cfg, i, m->lfds, m->nlfds, m->cpus, m->cfg->pin ? m->ncpus : 0,
                            master));
    m->slots[i].pid = pid;
    return pid;
}

/* Worker process i's workers have the stats slots first .. first + n - 1. */
static int pd_first_stats(const pd_master_t *m, int i)
{
    return i * pd_config_threads(m->cfg);
}

/* Whether every worker of process i, which has pid, got ready: its pid is
 * in all their stats slots. */
static bool pd_ready(const pd_master_t *m, int i, pid_t pid)
{
    int first = pd_first_stats(m, i);

    /* A worker's release store of the pid happened before the process's
     * death, which happened before waitpid() returned it. */
    for (int k = first; k < first + pd_config_threads(m->cfg); k++)
        if (__atomic_load_n(&pd_stats_slot(k)->xpid, __ATOMIC_ACQUIRE) != pid)
            return false;
    return true;
}

/* Requests the workers of process i have answered. */
static uint64_t pd_served(const pd_master_t *m, int i)
{
    int first = pd_first_stats(m, i);
    uint64_t n = 0;

    for (int k = first; k < first + pd_config_threads(m->cfg); k++)
        n += __atomic_load_n(&pd_stats_slot(k)->xrequests, __ATOMIC_RELAXED);
    return n;
}

/* Worker process i is gone: so are its workers. */
static void pd_stats_end_proc(const pd_master_t *m, int i)
{
    int first = pd_first_stats(m, i);

    for (int k = first; k < first + pd_config_threads(m->cfg); k++)
        pd_stats_end(k);
}

static int pd_slot_of(const pd_master_t *m, pid_t pid)
{
    for (int i = 0; i < m->cfg->workers; i++)
        if (m->slots[i].pid == pid)
            return i;
    return -1;
}

static void pd_describe(int status, char *buf, size_t cap)
{
    if (WIFEXITED(status))
        snprintf(buf, cap, "exited with status %d", WEXITSTATUS(status));
    else if (WIFSIGNALED(status))
        snprintf(buf, cap, "killed by signal %d", WTERMSIG(status));
    else
        snprintf(buf, cap, "ended with wait status %d", status);
}

/* Remember a dead worker whose pool memory could not be reaped yet (a live
 * worker is stuck holding a pool lock; the watchdog will deal with it). */
static void pd_defer_reap(pd_master_t *m, pid_t pid)
{
    if (m->nunreaped == PD_MAX_WORKERS) {
        pd_log(PD_LOG_ERROR, 0, "pool: too many deferred reaps; pid %d's memory is lost",
               (int)m->unreaped[0]);
        memmove(m->unreaped, m->unreaped + 1, sizeof(m->unreaped[0]) * (PD_MAX_WORKERS - 1));
        m->nunreaped--;
    }
    m->unreaped[m->nunreaped++] = pid;
}

/* Retry the deferred reaps. */
static void pd_reap_deferred(pd_master_t *m)
{
    int kept = 0;

    for (int k = 0; k < m->nunreaped; k++)
        if (pd_alloc_reap(m->unreaped[k], PD_LOG_INFO) != PD_OK)
            m->unreaped[kept++] = m->unreaped[k];
    m->nunreaped = kept;
}

/* The crash-loop back-off after a slot's fails-th death in a row before
 * its worker was ready (fails >= 1). */
static int64_t pd_backoff_ms(unsigned fails)
{
    int64_t delay = PD_BACKOFF_MIN_MS;

    for (unsigned k = 1; k < fails && delay < PD_BACKOFF_MAX_MS; k++)
        delay *= 2;
    return delay < PD_BACKOFF_MAX_MS ? delay : PD_BACKOFF_MAX_MS;
}

/* Give back what a dead worker held in the pool, or remember to.  After
 * its replacement started: the replacement reaps the dead when it
 * attaches, as any process using the pool does, and the master reaps
 * whatever that left, whichever is first (pool_reap then reports the
 * other's reap). */
static void pd_reap_pool(pd_master_t *m, pid_t pid, pd_log_level_t level)
{
    if (pd_alloc_reap(pid, level) != PD_OK)
        pd_defer_reap(m, pid);
}

/* Collect dead workers; replace them unless stopping.
 *
 * Whether the dead worker had become ready -- its event loop set up, its
 * pid published in its stats slot -- decides how, not how long it lived.
 * One that was serving was killed (the OOM killer, an operator, the
 * watchdog) or crashed on something it served: workers can evidently
 * start, so its successor starts at once, and the connections queued on
 * its listening socket are served again within milliseconds.  One that
 * died before it was ready cannot get going (it could not attach, ran out
 * of descriptors or memory setting up its loop); starting the next at once
 * would only fork in a tight loop, so these deaths, and only these, count
 * toward the back-off, and a worker that gets going again resets it. */
static void pd_reap(pd_master_t *m)
{
    int status;
    pid_t pid;

    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
        int i = pd_slot_of(m, pid);
        pd_slot_t *s;
        char how[64];
        bool ready;
        int64_t delay;

        if (i < 0)
            continue;
        s = &m->slots[i];
        s->pid = 0;
        ready = pd_ready(m, i, pid);
        pd_stats_end_proc(m, i);
        pd_describe(status, how, sizeof(how));
        if (m->stopping) {
            pd_log(PD_LOG_DEBUG, 0, "worker %d (pid %d) %s", i, (int)pid, how);
            pd_reap_pool(m, pid, PD_LOG_DEBUG);
            continue;
        }
        if (ready) {
            s->fails = 0;
            if (pd_spawn(m, i) > 0) {
                pd_log(PD_LOG_WARN, 0, "worker %d (pid %d) %s; replaced by pid %d",
                       i, (int)pid, how, (int)s->pid);
                pd_reap_pool(m, pid, PD_LOG_INFO);
                continue;
            }
            delay = PD_BACKOFF_MAX_MS;  /* fork() failed (logged): retry later */
        } else {
            delay = pd_backoff_ms(++s->fails);
        }
        pd_log(PD_LOG_WARN, 0, "worker %d (pid %d) %s%s; restarting in %lld ms", i, (int)pid,
               how, ready ? "" : " before it was ready", (long long)delay);
        pd_reap_pool(m, pid, PD_LOG_INFO);
        /* Counted from after the line, so that the lines of two deaths in a
         * row are never closer than the delay the first one names. */
        s->restart_us = pd_now_us() + delay * 1000;
    }
}

/* A worker process that has held a pool lock (the page heap's or a
 * class's) for PD_LOCK_STALL_MS, and answered no request between two
 * looks (with --threads: none of its threads did; the pool names holders
 * by process), is killed; reaping it repairs the lock. */
static void pd_watchdog(pd_master_t *m)
{
    pid_t pid = pd_alloc_stalled(PD_LOCK_STALL_MS);
    int i = pid > 0 ? pd_slot_of(m, pid) : -1;
    uint64_t served;

    if (i < 0) {
        m->stalled = 0;
        return;
    }
    served = pd_served(m, i);
    if (m->stalled != pid || m->stalled_requests != served) {
        m->stalled = pid;
        m->stalled_requests = served;
        return;
    }
    pd_log(PD_LOG_ERROR, 0, "worker %d (pid %d) holds a pool lock for over %d ms and answers "
           "nothing: killed", i, (int)pid, PD_LOCK_STALL_MS);
    kill(pid, SIGKILL);
    m->stalled = 0;
}

/* The watchdog and the pool's decay, each when its timer is due; returns
 * us until the next is.  Every pool call the master makes gives up on a
 * lock that a live process keeps 200 ms (pool_decay() included: the page
 * heap's holder may be the stopped worker), so none of them delays the
 * watchdog's next look by more than that, nor the stop on SIGTERM. */
static int64_t pd_timers(pd_master_t *m)
{
    int64_t now = pd_now_us();

    if (now >= m->watchdog_us) {
        pd_watchdog(m);
        m->watchdog_us = now + PD_WATCHDOG_MS * 1000;
    }
    if (now >= m->decay_us) {
        if (pd_alloc_decay() != PD_OK)
            pd_log(PD_LOG_DEBUG, 0, "pool: a live process holds the page-heap lock; "
                   "decay deferred");
        m->decay_us = now + PD_DECAY_MS * 1000;
    }
    now = pd_now_us();
    return (m->watchdog_us < m->decay_us ? m->watchdog_us : m->decay_us) - now;
}

/* Start the workers whose back-off has passed; returns us until the next. */
static int64_t pd_restart_due(pd_master_t *m)
{
    int64_t now = pd_now_us();
    int64_t next = 1000000;

    for (int i = 0; i < m->cfg->workers; i++) {
        pd_slot_t *s = &m->slots[i];

        if (s->pid != 0)
            continue;
        if (s->restart_us <= now) {
            if (pd_spawn(m, i) > 0)
                pd_log(PD_LOG_WARN, 0, "worker %d restarted as pid %d", i, (int)s->pid);
            continue;
        }
        if (s->restart_us - now < next)
            next = s->restart_us - now;
    }
    return next;
}

static int pd_live(const pd_master_t *m)
{
    int n = 0;

    for (int i = 0; i < m->cfg->workers; i++)
        n += m->slots[i].pid != 0;
    return n;
}

static void pd_signal_all(const pd_master_t *m, int sig)
{
    for (int i = 0; i < m->cfg->workers; i++)
        if (m->slots[i].pid != 0)
            kill(m->slots[i].pid, sig);
}

/* The stopping phase: wait for the workers, kill the late ones. */
static void pd_stop(pd_master_t *m, int sig)
{
    int64_t deadline = pd_now_us() + pd_tv_us(&m->cfg->shutdown_timeout);

    m->stopping = true;
    pd_log(PD_LOG_INFO, 0, "signal %d: stopping %d worker processes", sig, pd_live(m));
    pd_signal_all(m, SIGTERM);
    /* New connections now fail fast instead of queueing for nobody. */
    pd_listen_close(m);

    for (;;) {
        int64_t left;

        if (pd_got_chld) {
            pd_got_chld = 0;
            pd_reap(m);
        }
        if (pd_live(m) == 0)
            return;
        left = deadline - pd_now_us();
        if (left <= 0)
            break;
        pd_sleep_us(m, left);
    }
    for (int i = 0; i < m->cfg->workers; i++) {
        pd_slot_t *s = &m->slots[i];
        int status;

        if (s->pid == 0)
            continue;
        pd_log(PD_LOG_WARN, 0, "worker %d (pid %d) still busy after the shutdown timeout: killed",
               i, (int)s->pid);
        kill(s->pid, SIGKILL);
        while (waitpid(s->pid, &status, 0) < 0 && errno == EINTR)
            ;
        /* On the way out: a reap that must wait is not retried. */
        pd_alloc_reap(s->pid, PD_LOG_DEBUG);
        s->pid = 0;
        pd_stats_end_proc(m, i);
    }
}

static int pd_signals_init(pd_master_t *m)
{
    struct sigaction sa;
    sigset_t block;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &sa, NULL);  /* a peer gone mid-write is an EPIPE */

    sigemptyset(&block);
    sigaddset(&block, SIGCHLD);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGINT);
    if (sigprocmask(SIG_BLOCK, &block, &m->run_mask) != 0) {
        pd_log(PD_LOG_ERROR, errno, "sigprocmask() failed");
        return PD_ERROR;
    }
    sigdelset(&m->run_mask, SIGCHLD);
    sigdelset(&m->run_mask, SIGTERM);
    sigdelset(&m->run_mask, SIGINT);

    sa.sa_handler = pd_master_on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_NOCLDSTOP;
    if (sigaction(SIGCHLD, &sa, NULL) != 0 || sigaction(SIGTERM, &sa, NULL) != 0 ||
        sigaction(SIGINT, &sa, NULL) != 0) {
        pd_log(PD_LOG_ERROR, errno, "sigaction() failed");
        return PD_ERROR;
    }
    return PD_OK;
}

/* A worker needs a descriptor per connection plus a few of its own, and a
 * process has as many workers as threads: raise the soft limit (1024 on
 * Debian) towards the hard one when --max-conns asks for it, rather than
 * meet EMFILE under load. */
static void pd_raise_nofile(const pd_config_t *cfg)
{
    rlim_t want = ((rlim_t)cfg->max_conns + 64) * (rlim_t)pd_config_threads(cfg);
    struct rlimit rl;

    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= want)
        return;
    rl.rlim_cur = rl.rlim_max != RLIM_INFINITY && rl.rlim_max < want ? rl.rlim_max : want;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
        pd_log(PD_LOG_WARN, errno, "setrlimit(RLIMIT_NOFILE, %llu) failed",
               (unsigned long long)rl.rlim_cur);
    else if (rl.rlim_cur < want)
        pd_log(PD_LOG_WARN, 0, "only %llu descriptors per process: fewer than --max-conns %d "
               "for each of its %d workers", (unsigned long long)rl.rlim_cur, cfg->max_conns,
               pd_config_threads(cfg));
}

static void pd_startup_line(const pd_master_t *m, int port)
{
    const pd_config_t *cfg = m->cfg;
    char pids[PD_MAX_WORKERS * 12];
    char where[96];
    char heap[40] = "";
    char threads[24] = "";
    size_t n = 0;

    pids[0] = '\0';
    for (int i = 0; i < cfg->workers; i++)
        n += (size_t)snprintf(pids + n, sizeof(pids) - n, "%s%d", i > 0 ? "," : "",
                              (int)m->slots[i].pid);
    pd_config_format_addr(cfg, port, where, sizeof(where));
    if (pd_alloc_is_pool())
        snprintf(heap, sizeof(heap), " heap=%zu", cfg->heap_size);
    if (cfg->threads > 0)
        snprintf(threads, sizeof(threads), " threads=%d", cfg->threads);
    pd_log(PD_LOG_INFO, 0, "started allocator=%s workers=%d%s pids=%s listen=%s pin=%s%s",
           pd_alloc_name(), cfg->workers, threads, pids, where, cfg->pin ? "on" : "off", heap);
}

int pd_master_run(const pd_config_t *cfg)
{
    static pd_master_t m;
    int port;

    memset(&m, 0, sizeof(m));
    m.cfg = cfg;
    pd_log_set_verbosity(cfg->verbose);
    if (pd_signals_init(&m) != PD_OK)
        return 1;
    pd_raise_nofile(cfg);
    if (pd_alloc_create(cfg->heap_size) != PD_OK)
        return 1;
    if (pd_stats_create(pd_config_nworkers(cfg)) != PD_OK)
        return 1;
    port = pd_listen_all(&m);
    if (port < 0)
        return 1;
    pd_cpus_init(&m);

    for (int i = 0; i < cfg->workers; i++) {
        if (pd_spawn(&m, i) < 0) {
            pd_signal_all(&m, SIGKILL);
            return 1;
        }
    }
    pd_startup_line(&m, port);

    while (!pd_got_stop) {
        int64_t next, timers;

        if (pd_got_chld) {
            pd_got_chld = 0;
            pd_reap(&m);
        }
        pd_reap_deferred(&m);
        timers = pd_timers(&m);
        next = pd_restart_due(&m);
        if (timers < next)
            next = timers;
        if (!pd_got_chld && !pd_got_stop && next > 0)
            pd_sleep_us(&m, next);
    }
    pd_stop(&m, pd_got_stop);
    pd_log(PD_LOG_INFO, 0, "stopped");
    return 0;
}

/* SPDX-License-Identifier: BSD-2-Clause */
/* poold — the master process.
 *
 * pd_master_run reserves the allocator's arena and the shared counters,
 * binds a listening socket per worker, forks the worker processes (each
 * told which CPUs its workers pin themselves to; worker.c does the rest of
 * their start-up), prints the start-up line, then supervises processes: a
 * worker process that dies is logged and replaced, at once when it had
 * been serving, with back-off when it keeps dying before it gets going;
 * SIGTERM/SIGINT/SIGQUIT stop them gracefully and kill the ones still busy
 * after --shutdown-timeout; SIGHUP replaces them gracefully (a new worker
 * per slot, the old one told to stop once the new one is ready); SIGUSR2
 * starts the binary again with the listening sockets inherited, and this
 * master stops gracefully once the new one says it is ready.  With --threads the one process runs all workers as
 * threads, and whatever ends one of them ends it: the master sees, and
 * restarts, only processes.  Signal
 * handlers only set flags; everything happens in the loop, which sleeps in
 * ppoll() with the signals unblocked only there.
 */
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
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
/* Connections a worker's listening socket queues before the kernel drops
 * SYNs (the kernel caps it at net.core.somaxconn, 4096 by default).  A
 * dropped SYN costs its client a second, then three, and the clients
 * dropped together retry together.  Under wrk -c10000 against two workers
 * at --max-conns 1024, nginx's 511 overflowed whenever a worker was held
 * up (3,579 to 11,300 SYNs dropped in 20 s, one queue at 503 of 511),
 * and fresh clients lost 10 % of their connections in one run of three;
 * 4096 dropped none, and a worker that runs accepts thousands a second,
 * so a full queue is under a second's wait. */
#define PD_LISTEN_BACKLOG 4096

/* What a worker process started by SIGUSR2's new master finds in its
 * environment: the listening sockets, and the pipe it says "ready" on. */
#define PD_ENV_LISTEN_FDS "POOLD_LISTEN_FDS"
#define PD_ENV_READY_FD "POOLD_READY_FD"

typedef struct pd_slot_s {
    pid_t pid;              /* 0 while not running */
    int64_t restart_us;     /* when to restart (monotonic); valid while pid == 0 */
    unsigned fails;         /* deaths in a row before becoming ready */
    int half;               /* pid's stats slots: 0 or 1 (pd_stats_create) */
    pid_t old;              /* SIGHUP: the predecessor, serving until pid is
                               ready, then finishing its requests; 0: none */
    int64_t old_kill_us;    /* when old is killed; 0 while it is not told */
} pd_slot_t;

typedef struct pd_master_s {
    const pd_config_t *cfg;
    pd_slot_t slots[PD_MAX_WORKERS];    /* one per worker process */
    int lfds[PD_MAX_WORKERS];   /* one listening socket per worker */
    int nlfds;
    int cpus[CPU_SETSIZE];      /* the CPUs we may run on, in order */
    int ncpus;
    sigset_t run_mask;          /* the mask to restore in ppoll() */
    sigset_t start_mask;        /* the mask poold started with, for a new binary */
    bool stopping;
    char exe[PATH_MAX];         /* this binary, for SIGUSR2 */
    char *const *argv;          /* and its arguments */
    int upgrade_fd;             /* SIGUSR2: the new master's ready pipe, -1: none */
    pid_t upgrade_pid;          /* the new master, 0: none */
    int ready_fd;               /* started by SIGUSR2: the pipe to say ready on, -1 */
    pid_t unreaped[PD_MAX_WORKERS]; /* dead workers the pool could not reap yet */
    int nunreaped;
    pid_t stalled;              /* worker process seen holding a pool lock too long */
    uint64_t stalled_requests;  /* its request count when first seen */
    int64_t watchdog_us;        /* the watchdog's next look (monotonic) */
    int64_t decay_us;           /* the pool's next decay (monotonic) */
} pd_master_t;

static volatile sig_atomic_t pd_got_chld;
static volatile sig_atomic_t pd_got_stop;
static volatile sig_atomic_t pd_got_hup;
static volatile sig_atomic_t pd_got_usr2;

static void pd_master_on_signal(int sig)
{
    if (sig == SIGCHLD)
        pd_got_chld = 1;
    else if (sig == SIGHUP)
        pd_got_hup = 1;
    else if (sig == SIGUSR2)
        pd_got_usr2 = 1;
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

/* Sleep in ppoll() for at most us microseconds, or until a new master
 * started by SIGUSR2 writes to (or closes) its ready pipe; the kernel never
 * ends the timeout early, so a deadline that ppoll() waited for has
 * passed. */
static void pd_sleep_us(const pd_master_t *m, int64_t us)
{
    struct pollfd p = {m->upgrade_fd, POLLIN, 0};  /* ignored while -1 */
    struct timespec ts;

    ts.tv_sec = us / 1000000;
    ts.tv_nsec = (us % 1000000) * 1000;
    ppoll(&p, 1, &ts, &m->run_mask);
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
    if (listen(fd, PD_LISTEN_BACKLOG) != 0) {
        pd_log(PD_LOG_ERROR, errno, "listen(%s) failed", where);
        goto fail;
    }
    return fd;
fail:
    close(fd);
    return -1;
}

/* A descriptor number from an environment variable: [0, INT_MAX). */
static int pd_env_fd(const char *s, char **end)
{
    long v;

    errno = 0;
    v = strtol(s, end, 10);
    if (errno != 0 || *end == s || v < 0 || v >= INT_MAX)
        return -1;
    return (int)v;
}

/* Started by SIGUSR2: take the listening sockets the old master passed in
 * env (descriptor numbers, comma-separated, one per worker) instead of
 * binding, which would only add sockets to the port's SO_REUSEPORT group
 * that none of the old workers accept on.  Returns the port, or -1
 * (logged). */
static int pd_listen_inherit(pd_master_t *m, const char *env)
{
    struct sockaddr_storage addr;
    socklen_t len = sizeof(addr);
    const char *p = env;

    while (*p != '\0') {
        char *end;
        int fd = pd_env_fd(p, &end);
        int listening = 0;
        socklen_t olen = sizeof(listening);

        if (fd < 0 || (*end != ',' && *end != '\0') || m->nlfds == PD_MAX_WORKERS ||
            getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &olen) != 0 || !listening) {
            pd_log(PD_LOG_ERROR, 0, "%s=%s: not a list of listening sockets", PD_ENV_LISTEN_FDS,
                   env);
            return -1;
        }
        fcntl(fd, F_SETFD, FD_CLOEXEC);
        m->lfds[m->nlfds++] = fd;
        p = *end == ',' ? end + 1 : end;
    }
    if (m->nlfds != pd_config_nworkers(m->cfg)) {
        pd_log(PD_LOG_ERROR, 0, "%s names %d sockets for %d workers", PD_ENV_LISTEN_FDS,
               m->nlfds, pd_config_nworkers(m->cfg));
        return -1;
    }
    if (getsockname(m->lfds[0], (struct sockaddr *)&addr, &len) != 0) {
        pd_log(PD_LOG_ERROR, errno, "getsockname() failed");
        return -1;
    }
    return ntohs(addr.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&addr)->sin6_port
                                            : ((struct sockaddr_in *)&addr)->sin_port);
}

/* Returns the bound port, or -1 (logged). */
static int pd_listen_all(pd_master_t *m)
{
    struct sockaddr_storage addr = m->cfg->addr;
    socklen_t len = m->cfg->addrlen;
    const char *env = getenv(PD_ENV_LISTEN_FDS);
    int port;

    if (env != NULL) {
        port = pd_listen_inherit(m, env);
        unsetenv(PD_ENV_LISTEN_FDS);    /* not the workers' business */
        return port;
    }

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
        _exit(pd_worker_run(m->cfg, i, m->slots[i].half, m->lfds, m->nlfds, m->cpus,
                            m->cfg->pin ? m->ncpus : 0, master));
    m->slots[i].pid = pid;
    return pid;
}

/* Worker process i's workers, counting in stats half `half`, have the
 * stats slots first .. first + n - 1. */
static int pd_first_stats(const pd_master_t *m, int i, int half)
{
    return i * pd_config_threads(m->cfg) + half * pd_config_nworkers(m->cfg);
}

/* Whether every worker of process i, which has pid, got ready: its pid is
 * in all their stats slots. */
static bool pd_ready(const pd_master_t *m, int i, pid_t pid)
{
    int first = pd_first_stats(m, i, m->slots[i].half);

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
    int first = pd_first_stats(m, i, m->slots[i].half);
    uint64_t n = 0;

    for (int k = first; k < first + pd_config_threads(m->cfg); k++)
        n += __atomic_load_n(&pd_stats_slot(k)->xrequests, __ATOMIC_RELAXED);
    return n;
}

/* Worker process i, which counted in stats half `half`, is gone: so are
 * its workers. */
static void pd_stats_end_proc(const pd_master_t *m, int i, int half)
{
    int first = pd_first_stats(m, i, half);

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

/* The slot whose predecessor (SIGHUP) pid is, or -1. */
static int pd_old_of(const pd_master_t *m, pid_t pid)
{
    for (int i = 0; i < m->cfg->workers; i++)
        if (m->slots[i].old == pid)
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

        pd_describe(status, how, sizeof(how));
        if (i < 0 && (i = pd_old_of(m, pid)) >= 0) {
            s = &m->slots[i];
            pd_log(s->old_kill_us != 0 ? PD_LOG_DEBUG : PD_LOG_WARN, 0,
                   "worker %d (pid %d, before the restart) %s", i, (int)pid, how);
            s->old = 0;
            s->old_kill_us = 0;
            pd_stats_end_proc(m, i, s->half ^ 1);
            pd_reap_pool(m, pid, PD_LOG_DEBUG);
            continue;
        }
        if (i < 0) {
            if (pid == m->upgrade_pid) {
                pd_log(PD_LOG_WARN, 0, "the new binary (pid %d) %s", (int)pid, how);
                m->upgrade_pid = 0;
            }
            continue;
        }
        s = &m->slots[i];
        s->pid = 0;
        ready = pd_ready(m, i, pid);
        pd_stats_end_proc(m, i, s->half);
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

/* Worker processes alive, predecessors still finishing included. */
static int pd_live(const pd_master_t *m)
{
    int n = 0;

    for (int i = 0; i < m->cfg->workers; i++)
        n += (m->slots[i].pid != 0) + (m->slots[i].old != 0);
    return n;
}

static void pd_signal_all(const pd_master_t *m, int sig)
{
    for (int i = 0; i < m->cfg->workers; i++) {
        if (m->slots[i].pid != 0)
            kill(m->slots[i].pid, sig);
        if (m->slots[i].old != 0)
            kill(m->slots[i].old, sig);
    }
}

/* ======================================================================== */
/* SIGHUP: a graceful restart of the workers                                 */
/* ======================================================================== */

/* Start a successor for every worker process.  It accepts on the same
 * listening socket and counts in the other half of the stats slots; its
 * predecessor serves on until it is ready (pd_retire_due), so that no
 * connection waits for nobody.  A slot whose previous restart is still
 * finishing is left alone: its stats slots are both taken. */
static void pd_restart_all(pd_master_t *m)
{
    int n = 0;

    for (int i = 0; i < m->cfg->workers; i++) {
        pd_slot_t *s = &m->slots[i];

        if (s->old != 0) {
            pd_log(PD_LOG_WARN, 0, "worker %d: pid %d from the last restart is still "
                   "finishing; not restarted again", i, (int)s->old);
            continue;
        }
        if (s->pid == 0)
            continue;   /* waiting out a back-off: it starts anew anyway */
        s->old = s->pid;
        s->old_kill_us = 0;
        s->pid = 0;
        s->fails = 0;
        s->half ^= 1;
        pd_spawn(m, i);
        n++;
    }
    pd_log(PD_LOG_INFO, 0, "signal %d: restarting %d worker processes", SIGHUP, n);
}

/* Tell each predecessor to stop once its successor is ready, and kill the
 * ones still busy --shutdown-timeout later.  A successor that dies before
 * it is ready is restarted with the usual back-off while its predecessor
 * goes on serving.  Returns us until the next look is due. */
static int64_t pd_retire_due(pd_master_t *m)
{
    int64_t now = pd_now_us();
    int64_t next = 1000000;

    for (int i = 0; i < m->cfg->workers; i++) {
        pd_slot_t *s = &m->slots[i];

        if (s->old == 0)
            continue;
        if (s->old_kill_us == 0) {
            if (s->pid == 0 || !pd_ready(m, i, s->pid)) {
                next = next < 10000 ? next : 10000;     /* it is starting: look soon */
                continue;
            }
            kill(s->old, SIGTERM);
            s->old_kill_us = now + pd_tv_us(&m->cfg->shutdown_timeout);
            pd_log(PD_LOG_DEBUG, 0, "worker %d: pid %d ready, pid %d stopping", i, (int)s->pid,
                   (int)s->old);
        } else if (s->old_kill_us <= now) {
            pd_log(PD_LOG_WARN, 0, "worker %d (pid %d, before the restart) still busy after "
                   "the shutdown timeout: killed", i, (int)s->old);
            kill(s->old, SIGKILL);
            s->old_kill_us = INT64_MAX;     /* reaped as it dies */
            continue;
        }
        if (s->old_kill_us - now < next)
            next = s->old_kill_us - now;
    }
    return next;
}

/* ======================================================================== */
/* SIGUSR2: a new binary on the same listening sockets                       */
/* ======================================================================== */

/* In the forked child: exec this binary again with the listening sockets
 * and the ready pipe's write end kept open and named in the environment. */
static void pd_exec_new(const pd_master_t *m, int ready)
{
    char fds[PD_MAX_WORKERS * 12];
    char num[16];
    size_t n = 0;

    fds[0] = '\0';
    for (int i = 0; i < m->nlfds; i++) {
        fcntl(m->lfds[i], F_SETFD, 0);
        n += (size_t)snprintf(fds + n, sizeof(fds) - n, "%s%d", i > 0 ? "," : "", m->lfds[i]);
    }
    fcntl(ready, F_SETFD, 0);
    snprintf(num, sizeof(num), "%d", ready);
    if (setenv(PD_ENV_LISTEN_FDS, fds, 1) != 0 || setenv(PD_ENV_READY_FD, num, 1) != 0) {
        pd_log(PD_LOG_ERROR, errno, "setenv() for the new binary failed");
        _exit(1);
    }
    sigprocmask(SIG_SETMASK, &m->start_mask, NULL);
    execv(m->exe, m->argv);
    pd_log(PD_LOG_ERROR, errno, "execv(%s) failed", m->exe);
    _exit(1);
}

/* Start the new binary, unless one is starting already.  This master goes
 * on serving until the new one writes to the ready pipe (pd_upgrade_check). */
static void pd_upgrade(pd_master_t *m)
{
    int p[2];
    pid_t pid;

    if (m->upgrade_fd >= 0) {
        pd_log(PD_LOG_WARN, 0, "signal %d: the new binary (pid %d) is still starting",
               SIGUSR2, (int)m->upgrade_pid);
        return;
    }
    if (pipe2(p, O_CLOEXEC) != 0) {
        pd_log(PD_LOG_ERROR, errno, "signal %d: pipe2() failed", SIGUSR2);
        return;
    }
    pid = fork();
    if (pid == 0) {
        close(p[0]);
        pd_exec_new(m, p[1]);
    }
    close(p[1]);
    if (pid < 0) {
        pd_log(PD_LOG_ERROR, errno, "signal %d: fork() failed", SIGUSR2);
        close(p[0]);
        return;
    }
    fcntl(p[0], F_SETFL, O_NONBLOCK);
    m->upgrade_fd = p[0];
    m->upgrade_pid = pid;
    pd_log(PD_LOG_INFO, 0, "signal %d: starting %s as pid %d", SIGUSR2, m->exe, (int)pid);
}

/* Has the new binary said it is ready (returns true: time to stop), or
 * closed its pipe unready (it failed: serve on)? */
static bool pd_upgrade_check(pd_master_t *m)
{
    char c;
    ssize_t n;

    if (m->upgrade_fd < 0)
        return false;
    n = read(m->upgrade_fd, &c, 1);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return false;
    close(m->upgrade_fd);
    m->upgrade_fd = -1;
    if (n == 1) {
        pd_log(PD_LOG_INFO, 0, "the new binary (pid %d) is ready", (int)m->upgrade_pid);
        return true;
    }
    pd_log(PD_LOG_WARN, 0, "the new binary (pid %d) did not get ready; serving on",
           (int)m->upgrade_pid);
    return false;
}

/* Started by SIGUSR2: once every worker is ready, tell the old master. */
static void pd_say_ready(pd_master_t *m)
{
    if (m->ready_fd < 0)
        return;
    for (int i = 0; i < m->cfg->workers; i++)
        if (m->slots[i].pid == 0 || !pd_ready(m, i, m->slots[i].pid))
            return;
    if (write(m->ready_fd, "1", 1) != 1)
        pd_log(PD_LOG_WARN, errno, "cannot tell the old master that we are ready");
    close(m->ready_fd);
    m->ready_fd = -1;
}

/* The stopping phase, past its deadline: kill worker process *pid of slot
 * i, which counts in stats half `half`, if it is still there. */
static void pd_kill_late(pd_master_t *m, int i, pid_t *pid, int half)
{
    int status;

    if (*pid == 0)
        return;
    pd_log(PD_LOG_WARN, 0, "worker %d (pid %d) still busy after the shutdown timeout: killed",
           i, (int)*pid);
    kill(*pid, SIGKILL);
    while (waitpid(*pid, &status, 0) < 0 && errno == EINTR)
        ;
    /* On the way out: a reap that must wait is not retried. */
    pd_alloc_reap(*pid, PD_LOG_DEBUG);
    *pid = 0;
    pd_stats_end_proc(m, i, half);
}

/* The stopping phase (sig: the signal, 0 for a new binary that is ready):
 * wait for the workers, kill the late ones. */
static void pd_stop(pd_master_t *m, int sig)
{
    int64_t deadline = pd_now_us() + pd_tv_us(&m->cfg->shutdown_timeout);

    m->stopping = true;
    if (m->upgrade_fd >= 0) {
        close(m->upgrade_fd);   /* a new binary still starting serves on alone */
        m->upgrade_fd = -1;
    }
    if (sig > 0)
        pd_log(PD_LOG_INFO, 0, "signal %d: stopping %d worker processes", sig, pd_live(m));
    else
        pd_log(PD_LOG_INFO, 0, "stopping %d worker processes", pd_live(m));
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

        pd_kill_late(m, i, &s->pid, s->half);
        pd_kill_late(m, i, &s->old, s->half ^ 1);
    }
}

static int pd_signals_init(pd_master_t *m)
{
    static const int sigs[] = {SIGCHLD, SIGTERM, SIGINT, SIGQUIT, SIGHUP, SIGUSR2};
    struct sigaction sa;
    sigset_t block;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &sa, NULL);  /* a peer gone mid-write is an EPIPE */

    sigemptyset(&block);
    for (size_t k = 0; k < sizeof(sigs) / sizeof(sigs[0]); k++)
        sigaddset(&block, sigs[k]);
    if (sigprocmask(SIG_BLOCK, &block, &m->start_mask) != 0) {
        pd_log(PD_LOG_ERROR, errno, "sigprocmask() failed");
        return PD_ERROR;
    }
    m->run_mask = m->start_mask;
    sa.sa_handler = pd_master_on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_NOCLDSTOP;
    for (size_t k = 0; k < sizeof(sigs) / sizeof(sigs[0]); k++) {
        sigdelset(&m->run_mask, sigs[k]);
        if (sigaction(sigs[k], &sa, NULL) != 0) {
            pd_log(PD_LOG_ERROR, errno, "sigaction() failed");
            return PD_ERROR;
        }
    }
    return PD_OK;
}

/* A worker needs a descriptor per connection plus a few of its own, a
 * process has as many workers as threads, and a worker may take the
 * connections its siblings have room for (the cap counts across workers):
 * raise the soft limit (1024 on Debian) towards the hard one when
 * --max-conns asks for it, rather than meet EMFILE under load. */
static void pd_raise_nofile(const pd_config_t *cfg)
{
    rlim_t want = (rlim_t)cfg->max_conns * (rlim_t)pd_config_nworkers(cfg) +
                  64 * (rlim_t)pd_config_threads(cfg);
    struct rlimit rl;

    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur >= want)
        return;
    rl.rlim_cur = rl.rlim_max != RLIM_INFINITY && rl.rlim_max < want ? rl.rlim_max : want;
    if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
        pd_log(PD_LOG_WARN, errno, "setrlimit(RLIMIT_NOFILE, %llu) failed",
               (unsigned long long)rl.rlim_cur);
    else if (rl.rlim_cur < want)
        pd_log(PD_LOG_WARN, 0, "only %llu descriptors per process: fewer than --max-conns %d "
               "for each of the %d workers", (unsigned long long)rl.rlim_cur, cfg->max_conns,
               pd_config_nworkers(cfg));
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

/* What SIGUSR2 needs later: this binary's path, resolved now (the file
 * there may be replaced before the signal: that is the point), and, when
 * SIGUSR2 started this one, the old master's ready pipe. */
static void pd_upgrade_init(pd_master_t *m, char *const *argv)
{
    const char *env = getenv(PD_ENV_READY_FD);
    ssize_t n = readlink("/proc/self/exe", m->exe, sizeof(m->exe) - 1);

    m->exe[n > 0 ? n : 0] = '\0';
    m->argv = argv;
    m->upgrade_fd = -1;
    m->ready_fd = -1;
    if (env != NULL) {
        char *end;
        int fd = pd_env_fd(env, &end);

        if (fd >= 0 && *end == '\0' && fcntl(fd, F_SETFD, FD_CLOEXEC) == 0)
            m->ready_fd = fd;
        else
            pd_log(PD_LOG_WARN, 0, "%s=%s: not a descriptor", PD_ENV_READY_FD, env);
        unsetenv(PD_ENV_READY_FD);
    }
}

int pd_master_run(const pd_config_t *cfg, char *const *argv)
{
    static pd_master_t m;
    int port;

    memset(&m, 0, sizeof(m));
    m.cfg = cfg;
    pd_log_set_verbosity(cfg->verbose);
    pd_upgrade_init(&m, argv);
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
        int64_t next, timers, retire;

        if (pd_got_chld) {
            pd_got_chld = 0;
            pd_reap(&m);
        }
        if (pd_got_hup) {
            pd_got_hup = 0;
            pd_restart_all(&m);
        }
        if (pd_got_usr2) {
            pd_got_usr2 = 0;
            pd_upgrade(&m);
        }
        if (pd_upgrade_check(&m))
            break;
        pd_reap_deferred(&m);
        timers = pd_timers(&m);
        next = pd_restart_due(&m);
        if (timers < next)
            next = timers;
        retire = pd_retire_due(&m);
        if (retire < next)
            next = retire;
        if (m.ready_fd >= 0) {
            pd_say_ready(&m);
            if (m.ready_fd >= 0 && next > 10000)
                next = 10000;   /* the workers are starting: look soon */
        }
        if (!pd_got_chld && !pd_got_stop && !pd_got_hup && !pd_got_usr2 && next > 0)
            pd_sleep_us(&m, next);
    }
    pd_stop(&m, pd_got_stop);
    pd_log(PD_LOG_INFO, 0, "stopped");
    return 0;
}

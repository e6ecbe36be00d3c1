/* SPDX-License-Identifier: BSD-2-Clause */
/* End to end: poold's workers die, and the master copes.  The tests run
 * the real binary ($POOLD, -w 2) on 127.0.0.1 and read its stderr through
 * a logger that stamps every line with the kernel's send time.
 *
 * - Kills at the asked rate: two forked clients load the server on
 *   keep-alive connections while the test kills a random ready worker
 *   (from /stats) with SIGKILL every 200 ms for 20 s.  Each connection
 *   learns its worker from its first response (`/` names the pid), so a
 *   failed request is told apart: on a killed worker's connection, or not.
 *   Afterwards the master is alive, both workers serve, and with the pool
 *   /stats shows a reap per kill, nothing leaked and (debug builds)
 *   pool_check()'s verdict.
 * - The crash-loop back-off: with the master's descriptor limit lowered,
 *   a new worker cannot set up its event loop and dies before it is
 *   ready; its restarts spread out (100, 200, 400 ms ... at least), and a
 *   worker that gets going again resets the back-off.
 * - The watchdog (pool debug builds): a worker stopped inside a pool lock
 *   is killed and the lock recovered.
 * Entry point: make_crash_e2e_suite().
 */
#include "config.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>

#include "check_poold.h"

#define KILL_EVERY_MS 200
#define KILL_FOR_MS 20000
#define TICKS (KILL_FOR_MS / KILL_EVERY_MS)
#define MIN_KILLS (TICKS * 9 / 10)  /* a tick with no ready worker is missed */
#define CLIENTS 2
#define MAX_KILLS TICKS
#define REPLY_TIMEOUT_S 10  /* a loaded 2-core machine can stall a debug build for seconds */
#define LOOP_DEATHS 5       /* deaths before ready watched: back-offs 100 to 1600 ms */
#define BACKOFF_FIRST_MS 100  /* the master's first crash-loop back-off */

/* What the clients and the killer share (MAP_SHARED, outside any heap). */
typedef struct shared_s {
    volatile int stop;              /* clients: finish now */
    volatile int nkilled;
    volatile pid_t killed[MAX_KILLS];
    struct {
        long ok;                    /* requests answered 200 */
        long failed_killed;         /* failed on a killed worker's connection */
        long failed_other;          /* failed on a live worker's connection */
        long failed_unknown;        /* failed before the first answer named the worker */
        char why[160];              /* the first failure outside killed workers */
    } cl[CLIENTS];
} shared_t;

/* ------------------------------------------------------------------------ */
/* The server                                                                */
/* ------------------------------------------------------------------------ */

typedef struct srv_s {
    pid_t pid;
    pid_t logger;           /* files the server's stderr, stamped */
    int port;
    char allocator[32];
    char log[64];
} srv_t;

/* The server's stderr is a SOCK_SEQPACKET socket: each write(2) of a log
 * line is one packet, stamped by the kernel when it is sent.  This process
 * files every line as "@<microseconds> <line>", so the timing of the
 * master's decisions is measured when they were logged, not when the test
 * got round to reading them.  It ends at end of file, when the server and
 * all its workers have closed their stderr.  The stamps are the kernel's
 * CLOCK_REALTIME: slewed like the monotonic clock, stepped only by hand. */
static void logger_run(int sock, const char *path)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0600);
    int one = 1;
    bool line_start = true;

    if (fd < 0 || setsockopt(sock, SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof(one)) != 0)
        _exit(1);
    for (;;) {
        char data[8192], out[8256];
        union {
            char buf[CMSG_SPACE(sizeof(struct timespec))];
            struct cmsghdr align;
        } ctl;
        struct iovec iov = {data, sizeof(data)};
        struct msghdr msg;
        struct timespec ts = {0, 0};
        size_t n = 0;
        ssize_t got;

        memset(&msg, 0, sizeof(msg));
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        msg.msg_control = ctl.buf;
        msg.msg_controllen = sizeof(ctl.buf);
        got = recvmsg(sock, &msg, 0);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c != NULL; c = CMSG_NXTHDR(&msg, c))
            if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS)
                memcpy(&ts, CMSG_DATA(c), sizeof(ts));
        if (line_start)
            n = (size_t)snprintf(out, sizeof(out), "@%lld ",
                                 (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000);
        memcpy(out + n, data, (size_t)got);
        n += (size_t)got;
        line_start = data[got - 1] == '\n';
        /* One write per packet: a reader never sees a stamp without its line. */
        if (write(fd, out, n) != (ssize_t)n)
            _exit(1);
    }
    _exit(0);
}

/* The server's stderr so far, NUL-terminated (static buffer). */
static const char *srv_log(const srv_t *s)
{
    static char buf[1 << 20];
    FILE *f = fopen(s->log, "r");
    size_t n = 0;

    if (f != NULL) {
        n = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
    }
    buf[n] = '\0';
    return buf;
}

/* Start poold -w 2; crash, when not NULL, goes to its SHMPOOL_CRASH;
 * shutdown, when not NULL, is its --shutdown-timeout. */
static void srv_start_with(srv_t *s, const char *crash, const char *shutdown)
{
    const char *bin = getenv("POOLD");
    const char *line;
    int sv[2];
    long end;

    ck_assert_msg(bin != NULL, "POOLD is not set (run through make check)");
    memset(s, 0, sizeof(*s));
    snprintf(s->log, sizeof(s->log), "/tmp/poold-crash-%d.log", (int)getpid());
    unlink(s->log);
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
    s->logger = fork();
    ck_assert_int_ge(s->logger, 0);
    if (s->logger == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        close(sv[1]);
        logger_run(sv[0], s->log);
    }
    s->pid = fork();
    ck_assert_int_ge(s->pid, 0);
    if (s->pid == 0) {
        if (dup2(sv[1], STDERR_FILENO) < 0 || freopen("/dev/null", "w", stdout) == NULL)
            _exit(127);
        if (crash != NULL)
            setenv("SHMPOOL_CRASH", crash, 1);
        /* A failed test must not leave a server behind. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (shutdown != NULL)
            execl(bin, bin, "-w", "2", "-p", "0", "--no-pin", "--shutdown-timeout", shutdown,
                  (char *)NULL);
        else
            execl(bin, bin, "-w", "2", "-p", "0", "--no-pin", (char *)NULL);
        _exit(127);
    }
    close(sv[0]);
    close(sv[1]);
    end = test_now_ms() + 5000;
    while ((line = strstr(srv_log(s), "info: started ")) == NULL) {
        ck_assert_msg(test_now_ms() < end, "no start-up line within 5 s: %s", srv_log(s));
        test_sleep_ms(10);
    }
    ck_assert_int_eq(sscanf(strstr(line, "allocator="), "allocator=%31s", s->allocator), 1);
    ck_assert_int_eq(sscanf(strstr(line, "listen="), "listen=127.0.0.1:%d", &s->port), 1);
}

static void srv_start(srv_t *s, const char *crash)
{
    srv_start_with(s, crash, NULL);
}

/* SIGTERM the server: it must exit 0 within 5 s. */
static void srv_stop(srv_t *s)
{
    int status;

    kill(s->pid, SIGTERM);
    for (long end = test_now_ms() + 5000; waitpid(s->pid, &status, WNOHANG) == 0;) {
        ck_assert_msg(test_now_ms() < end, "poold did not stop within 5 s");
        test_sleep_ms(10);
    }
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "poold status %#x", status);
}

/* Once the server and its workers are gone: the logger files the last
 * lines and ends; then the log goes. */
static void srv_end(srv_t *s)
{
    int status;

    for (long end = test_now_ms() + 5000; waitpid(s->logger, &status, WNOHANG) == 0;) {
        if (test_now_ms() >= end) {
            kill(s->logger, SIGKILL);
            waitpid(s->logger, &status, 0);
            break;
        }
        test_sleep_ms(10);
    }
    unlink(s->log);
}

/* Current worker pids from the master's log (start-up line, then every
 * replacement); 0 for a worker in back-off.  Unlike /stats, this also
 * names workers that are not ready, or stopped. */
static void srv_workers(const srv_t *s, pid_t w[2])
{
    const char *log = srv_log(s), *p;
    int a, b, i, dead, fresh;

    p = strstr(log, "pids=");
    ck_assert_ptr_nonnull(p);
    ck_assert_int_eq(sscanf(p, "pids=%d,%d", &a, &b), 2);
    w[0] = a;
    w[1] = b;
    for (p = log; (p = strchr(p, '\n')) != NULL; p++) {
        if (sscanf(p + 1, "%*[^:]: warn: worker %d (pid %d) %*[^;]; replaced by pid %d",
                   &i, &dead, &fresh) == 3 && i >= 0 && i < 2)
            w[i] = fresh;
        else if (sscanf(p + 1, "%*[^:]: warn: worker %d (pid %d) %*[^;]; restarting in",
                        &i, &dead) == 2 && i >= 0 && i < 2)
            w[i] = 0;
        else if (sscanf(p + 1, "%*[^:]: warn: worker %d restarted as pid %d", &i, &fresh) == 2 &&
                 i >= 0 && i < 2)
            w[i] = fresh;
    }
}

/* One death of a worker, from the master's line about it. */
typedef struct death_s {
    long long at_us;        /* when the master logged it (kernel stamp) */
    pid_t pid;
    bool ready;             /* it had become ready: no "before it was ready" */
    long delay_ms;          /* "restarting in N ms"; -1 for "replaced by pid N" */
} death_t;

/* The deaths of slot i's workers so far, in order; returns how many (at
 * most cap). */
static int srv_deaths(const srv_t *s, int slot, death_t *d, int cap)
{
    const char *line = srv_log(s), *next;
    int n = 0;

    for (; n < cap && (next = strchr(line, '\n')) != NULL; line = next + 1) {
        long long at;
        int i, pid, used = 0;
        char how[96];

        if (sscanf(line, "@%lld poold[%*d]: warn: worker %d (pid %d) %95[^;]; %n", &at, &i,
                   &pid, how, &used) != 4 || used == 0 || i != slot)
            continue;
        if (sscanf(line + used, "restarting in %ld ms", &d[n].delay_ms) != 1) {
            if (strncmp(line + used, "replaced by pid ", 16) != 0)
                continue;
            d[n].delay_ms = -1;
        }
        d[n].at_us = at;
        d[n].pid = pid;
        d[n].ready = strstr(how, " before it was ready") == NULL;
        n++;
    }
    return n;
}

/* Wait up to ms for slot i's want-th death; returns how many there are. */
static int srv_wait_deaths(const srv_t *s, int slot, death_t *d, int want, long ms)
{
    long end = test_now_ms() + ms;
    int n;

    while ((n = srv_deaths(s, slot, d, want)) < want) {
        ck_assert_msg(test_now_ms() < end, "%d of %d deaths of worker %d within %ld ms: %s", n,
                      want, slot, ms, srv_log(s));
        test_sleep_ms(10);
    }
    return n;
}

/* ------------------------------------------------------------------------ */
/* A blocking client                                                         */
/* ------------------------------------------------------------------------ */

static int cl_connect(int port)
{
    struct sockaddr_in sa;
    struct timeval tv = {REPLY_TIMEOUT_S, 0};
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    if (fd < 0)
        return -1;
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* One GET on fd; the body goes to body (NUL-terminated).  Returns the
 * status, or -1 when the connection failed (reset, closed, timed out). */
static int cl_get(int fd, const char *path, char *body, size_t cap)
{
    char req[128], buf[65536];
    size_t have = 0;
    long clen = -1;
    char *end = NULL;
    int n = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: t\r\n\r\n", path);
    int status;

    if (send(fd, req, (size_t)n, MSG_NOSIGNAL) != n)
        return -1;
    for (;;) {
        ssize_t got;

        if (end == NULL && (end = memmem(buf, have, "\r\n\r\n", 4)) != NULL) {
            const char *cl = memmem(buf, (size_t)(end - buf), "Content-Length:", 15);

            if (cl == NULL)
                return -1;
            clen = atol(cl + 15);
            end += 4;
        }
        if (end != NULL && have - (size_t)(end - buf) >= (size_t)clen)
            break;
        if (have == sizeof(buf))
            return -1;
        got = recv(fd, buf + have, sizeof(buf) - have, 0);
        if (got <= 0)
            return -1;
        have += (size_t)got;
    }
    if (sscanf(buf, "HTTP/1.1 %d", &status) != 1)
        return -1;
    n = clen < (long)cap ? (int)clen : (int)cap - 1;
    memcpy(body, end, (size_t)n);
    body[n] = '\0';
    return status;
}

static bool was_killed(const shared_t *sh, pid_t pid)
{
    int n = __atomic_load_n(&sh->nkilled, __ATOMIC_ACQUIRE);

    for (int k = 0; k < n && k < MAX_KILLS; k++)
        if (sh->killed[k] == pid)
            return true;
    return false;
}

/* A client: connections of 50 requests, the first `/` to learn the worker;
 * bounded by the stop flag, a time limit and a request count. */
static void client_run(shared_t *sh, int id, int port)
{
    long deadline = test_now_ms() + KILL_FOR_MS + 20000;
    char body[4096];

    for (long reqs = 0; !sh->stop && test_now_ms() < deadline && reqs < 2000000;) {
        int fd = cl_connect(port);
        pid_t pid = 0;

        if (fd < 0) {
            /* The listening sockets outlive every worker: this is a failure
             * the test reports, and retrying would only spin. */
            sh->cl[id].failed_other++;
            snprintf(sh->cl[id].why, sizeof(sh->cl[id].why), "connect: %s", strerror(errno));
            return;
        }
        for (int k = 0; k < 50 && !sh->stop; k++, reqs++) {
            int st = cl_get(fd, k == 0 ? "/" : (k % 2 ? "/heavy" : "/plaintext"), body,
                            sizeof(body));
            const char *p;

            if (st == 200) {
                sh->cl[id].ok++;
                if (k == 0 && (p = strstr(body, "\"pid\":")) != NULL)
                    pid = atoi(p + 6);
                continue;
            }
            /* No waiting before the verdict: the killer records a victim
             * (a release store) before it sends the signal, and a failure
             * the kill caused comes after the death. */
            if (pid == 0) {
                sh->cl[id].failed_unknown++;
            } else if (was_killed(sh, pid)) {
                sh->cl[id].failed_killed++;
            } else {
                sh->cl[id].failed_other++;
                if (sh->cl[id].why[0] == '\0')
                    snprintf(sh->cl[id].why, sizeof(sh->cl[id].why),
                             "request %d on live worker %d: status %d", k, (int)pid, st);
            }
            break;
        }
        close(fd);
    }
}

/* Fork the CLIENTS clients, which end with the test. */
static void clients_start(shared_t *sh, pid_t *clients, int port)
{
    for (int c = 0; c < CLIENTS; c++) {
        clients[c] = fork();
        ck_assert_int_ge(clients[c], 0);
        if (clients[c] == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL);
            client_run(sh, c, port);
            _exit(0);
        }
    }
}

/* Both workers answer: distinct pids seen on fresh connections. */
static void assert_two_serve(int port)
{
    long end = test_now_ms() + 15000;
    pid_t seen[2] = {0, 0};
    char body[4096];

    while (seen[1] == 0) {
        int fd = cl_connect(port);
        const char *p;

        ck_assert_msg(test_now_ms() < end, "two workers did not serve within 15 s (saw %d)",
                      (int)seen[0]);
        if (fd < 0)
            continue;
        if (cl_get(fd, "/", body, sizeof(body)) == 200 &&
            (p = strstr(body, "\"pid\":")) != NULL) {
            pid_t pid = atoi(p + 6);

            if (seen[0] == 0)
                seen[0] = pid;
            else if (pid != seen[0])
                seen[1] = pid;
        }
        close(fd);
    }
}

/* The pids /stats lists for the two worker slots: a worker is listed once
 * it is ready, until the master reaps it; 0 for a slot without one.
 * Returns false when /stats did not answer. */
static bool stats_workers(int port, pid_t w[2])
{
    static char body[65536];
    int fd = cl_connect(port);
    int st;

    if (fd < 0)
        return false;
    st = cl_get(fd, "/stats", body, sizeof(body));
    close(fd);
    if (st != 200)
        return false;
    for (int i = 0; i < 2; i++) {
        char key[32];
        const char *p;

        snprintf(key, sizeof(key), "{\"index\":%d,\"pid\":", i);
        if ((p = strstr(body, key)) == NULL)
            return false;
        w[i] = atoi(p + strlen(key));
    }
    return true;
}

/* Wait up to 15 s until /stats lists both slots' workers as ready. */
static void wait_ready(int port, pid_t w[2])
{
    long end = test_now_ms() + 15000;

    while (!stats_workers(port, w) || w[0] == 0 || w[1] == 0) {
        ck_assert_msg(test_now_ms() < end, "two workers not ready within 15 s");
        test_sleep_ms(10);
    }
}

/* The check verdict of a /stats body (debug builds), in want. */
static void stats_check(const char *body, char *want, size_t cap)
{
    const char *p = strstr(body, "\"check\":\"");

    snprintf(want, cap, "%s", p != NULL ? p + 9 : "(none)");
    if (strchr(want, '"') != NULL)
        *strchr(want, '"') = '\0';
}

/* /stats of a server gone quiet, in body: a debug build's check gives up
 * ("not run") on a lock a descheduled holder keeps past its deadline, which
 * a loaded machine allows, so the verdict is asked again for up to 10 s. */
static void stats_quiet(int port, char *body, size_t cap)
{
    long end = test_now_ms() + 10000;
    char check[200];

    for (;;) {
        int fd = cl_connect(port);

        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(cl_get(fd, "/stats", body, cap), 200);
        close(fd);
        stats_check(body, check, sizeof(check));
        if (strncmp(check, "not run: ", 9) != 0 || test_now_ms() >= end)
            return;
        test_sleep_ms(100);
    }
}

START_TEST(test_kill_workers_under_load)
{
    shared_t *sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                        -1, 0);
    pid_t clients[CLIENTS];
    srv_t s;
    long ok = 0, failed_killed = 0, failed_unknown = 0, t0;
    int late = 0, no_stats = 0, none_ready = 0;
    int status;
    char body[65536];
    const char *p;

    ck_assert_ptr_ne(sh, MAP_FAILED);
    memset(sh, 0, sizeof(*sh));
    srv_start(&s, NULL);
    clients_start(sh, clients, s.port);
    srand((unsigned)getpid());
    /* A tick on the schedule t0 + k * 200 ms; one that the previous tick
     * overran by a whole period is missed, never made up in a burst. */
    t0 = test_now_ms();
    for (int tick = 1; tick <= TICKS; tick++) {
        long behind = test_now_ms() - (t0 + (long)tick * KILL_EVERY_MS);
        pid_t w[2], ready[2], victim;
        int n = 0;

        if (behind >= KILL_EVERY_MS) {
            late++;
            continue;
        }
        if (behind < 0)
            test_sleep_ms(-behind);
        if (!stats_workers(s.port, w)) {
            no_stats++;
            continue;
        }
        /* Ready workers only: each has attached (so its kill leaves
         * something to reap), and its death is not a failed start. */
        for (int k = 0; k < 2; k++)
            if (w[k] != 0 && !was_killed(sh, w[k]))
                ready[n++] = w[k];
        if (n == 0) {
            none_ready++;
            continue;
        }
        victim = ready[rand() % n];
        /* Recorded before it is sent, so a client can blame its failure. */
        sh->killed[sh->nkilled] = victim;
        __atomic_store_n(&sh->nkilled, sh->nkilled + 1, __ATOMIC_RELEASE);
        ck_assert_msg(kill(victim, SIGKILL) == 0, "kill(%d): %s", (int)victim, strerror(errno));
    }
    ck_assert_msg(waitpid(s.pid, &status, WNOHANG) == 0, "the master died: %s", srv_log(&s));
    fprintf(stderr, "crash e2e: %d kills in %d ticks (missed: %d late, %d without /stats, "
            "%d without a ready worker)\n", sh->nkilled, TICKS, late, no_stats, none_ready);
    ck_assert_msg(sh->nkilled >= MIN_KILLS, "%d kills in %d ticks, at least %d wanted "
                  "(missed: %d late, %d without /stats, %d without a ready worker)",
                  sh->nkilled, TICKS, MIN_KILLS, late, no_stats, none_ready);
    assert_two_serve(s.port);
    sh->stop = 1;
    for (int c = 0; c < CLIENTS; c++) {
        ck_assert_int_eq(waitpid(clients[c], &status, 0), clients[c]);
        ck_assert_msg(sh->cl[c].failed_other == 0, "client %d: %ld failures outside killed "
                      "workers' connections, first: %s", c, sh->cl[c].failed_other,
                      sh->cl[c].why);
        ok += sh->cl[c].ok;
        failed_killed += sh->cl[c].failed_killed;
        failed_unknown += sh->cl[c].failed_unknown;
    }
    /* A connection that failed before its first answer was accepted by a
     * worker killed at that moment: at most one per client and kill. */
    ck_assert_int_le(failed_unknown, (long)CLIENTS * sh->nkilled);
    ck_assert_int_gt(ok, 1000);
    fprintf(stderr, "crash e2e: %ld requests served, %ld failed on killed workers' "
            "connections, %ld before the first answer\n", ok, failed_killed, failed_unknown);

    stats_quiet(s.port, body, sizeof(body));
    if (strcmp(s.allocator, "shmpool") == 0) {
        const char *crash;
        long reaps;

        /* Messages quote the section they judge: Check refuses (and exits
         * 2, hiding the verdict) one as long as the whole /stats. */
        crash = strstr(body, "\"crash\":{");
        ck_assert_msg(crash != NULL, "no crash section in /stats: %.1500s", body);
        p = strstr(crash, "\"reaps\":");
        ck_assert_ptr_nonnull(p);
        reaps = atol(p + 8);
        ck_assert_msg(reaps >= sh->nkilled, "%ld reaps for %d kills", reaps, sh->nkilled);
        ck_assert_msg(strstr(body, "\"leaked_bytes\":0,") != NULL, "leaks: %.1500s", crash);
        if (POOL_CONFIG_DEBUG > 0)
            ck_assert_msg(strstr(body, "\"check\":\"ok\"") != NULL, "pool_check: %.300s",
                          strstr(body, "\"check\":") ? strstr(body, "\"check\":") : "none");
        ck_assert_ptr_nonnull(strstr(srv_log(&s), "info: pool: reaped pid "));
    }
    srv_stop(&s);
    srv_end(&s);
    munmap(sh, sizeof(*sh));
}
END_TEST

/* Lower the master's soft descriptor limit to what its workers already
 * hold (their forks inherit it), or give back the saved one. */
static void nofile_set(const srv_t *s, struct rlimit *saved, bool low)
{
    struct rlimit rl;

    if (!low) {
        ck_assert_int_eq(prlimit(s->pid, RLIMIT_NOFILE, saved, NULL), 0);
        return;
    }
    ck_assert_int_eq(prlimit(s->pid, RLIMIT_NOFILE, NULL, saved), 0);
    rl = *saved;
    rl.rlim_cur = 3;
    ck_assert_int_eq(prlimit(s->pid, RLIMIT_NOFILE, &rl, NULL), 0);
}

/* A worker that cannot set up its event loop -- a real failure: no
 * descriptor for its epoll instance or its signal pipe -- dies before it
 * is ready, and its restarts back off: the master's lines about two such
 * deaths in a row are at least the announced 100, 200, 400, 800 ms apart
 * (lower bounds only: a loaded machine only ever adds to them).  A worker
 * that gets going again resets the back-off; a ready worker killed is
 * replaced at once. */
START_TEST(test_backoff_only_before_ready)
{
    death_t d[LOOP_DEATHS + 8];
    struct rlimit saved;
    pid_t w[2];
    srv_t s;
    int n;

    srv_start(&s, NULL);
    wait_ready(s.port, w);
    nofile_set(&s, &saved, true);
    ck_assert_int_eq(kill(w[0], SIGKILL), 0);
    srv_wait_deaths(&s, 0, d, 1 + LOOP_DEATHS, 20000);
    nofile_set(&s, &saved, false);

    fprintf(stderr, "crash e2e: deaths before ready, ms apart (back-off):");
    for (int k = 2; k <= LOOP_DEATHS; k++)
        fprintf(stderr, " %.1f (%ld)", (double)(d[k].at_us - d[k - 1].at_us) / 1000,
                d[k - 1].delay_ms);
    fprintf(stderr, "\n");
    ck_assert_int_eq(d[0].pid, w[0]);
    ck_assert_msg(d[0].ready && d[0].delay_ms == -1, "a ready worker killed is replaced at once");
    for (int k = 1; k <= LOOP_DEATHS; k++) {
        ck_assert_msg(!d[k].ready, "death %d of pid %d: not before ready", k, (int)d[k].pid);
        ck_assert_int_eq(d[k].delay_ms, BACKOFF_FIRST_MS << (k - 1));
        if (k > 1)
            ck_assert_msg(d[k].at_us - d[k - 1].at_us >= d[k - 1].delay_ms * 1000,
                          "deaths %d and %d of worker 0 %lld us apart, back-off %ld ms", k - 1,
                          k, d[k].at_us - d[k - 1].at_us, d[k - 1].delay_ms);
    }

    /* A worker that gets going resets the back-off: its successors that
     * fail to start wait 100 ms, then 200 ms, again. */
    wait_ready(s.port, w);
    n = srv_deaths(&s, 0, d, (int)(sizeof(d) / sizeof(d[0])));
    ck_assert_int_le(n + 3, (int)(sizeof(d) / sizeof(d[0])));
    nofile_set(&s, &saved, true);
    ck_assert_int_eq(kill(w[0], SIGKILL), 0);
    srv_wait_deaths(&s, 0, d, n + 3, 20000);
    nofile_set(&s, &saved, false);
    ck_assert_int_eq(d[n].pid, w[0]);
    ck_assert_msg(d[n].ready && d[n].delay_ms == -1, "a ready worker killed is replaced at once");
    ck_assert_msg(!d[n + 1].ready && d[n + 1].delay_ms == BACKOFF_FIRST_MS,
                  "after a ready worker the back-off starts over: %ld ms", d[n + 1].delay_ms);
    ck_assert_msg(!d[n + 2].ready && d[n + 2].delay_ms == 2 * BACKOFF_FIRST_MS,
                  "the second death before ready: %ld ms", d[n + 2].delay_ms);
    ck_assert_msg(d[n + 2].at_us - d[n + 1].at_us >= BACKOFF_FIRST_MS * 1000,
                  "deaths %lld us apart, back-off %d ms", d[n + 2].at_us - d[n + 1].at_us,
                  BACKOFF_FIRST_MS);

    wait_ready(s.port, w);
    assert_two_serve(s.port);
    srv_stop(&s);
    srv_end(&s);
}
END_TEST

/* Debug builds with the pool: every worker stops (SIGSTOP) inside a class
 * lock at the 20th bitmap word it fetches from.  The master's watchdog
 * must kill the stopped holder, its reap must repair the lock, and
 * requests must be answered again afterwards. */
START_TEST(test_watchdog_kills_stopped_holder)
{
    shared_t *sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                        -1, 0);
    pid_t client, w[2], victim = 0;
    srv_t s;
    long end;
    int status;

    ck_assert_ptr_ne(sh, MAP_FAILED);
    memset(sh, 0, sizeof(*sh));
    srv_start(&s, "central.fetch:20:stop");
    client = fork();
    ck_assert_int_ge(client, 0);
    if (client == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        client_run(sh, 0, s.port);
        _exit(0);
    }
    end = test_now_ms() + 20000;
    while (strstr(srv_log(&s), "answers nothing: killed") == NULL) {
        ck_assert_msg(test_now_ms() < end, "no watchdog kill within 20 s: %s", srv_log(&s));
        test_sleep_ms(50);
    }
    {
        const char *log = srv_log(&s), *line = strstr(log, " holds a pool lock for over ");
        char want[64];

        while (line > log && line[-1] != '\n')
            line--;
        ck_assert_int_eq(sscanf(line, "%*[^:]: error: worker %*d (pid %d)", &victim), 1);
        /* The lock it held is recovered (by the reap, or by a worker that
         * was waiting for it), and the dead worker is reaped; the reap is
         * deferred while another stopped worker holds a lock. */
        end = test_now_ms() + 10000;
        snprintf(want, sizeof(want), "lock holder %d died during ", (int)victim);
        while (strstr(srv_log(&s), want) == NULL) {
            ck_assert_msg(test_now_ms() < end, "pid %d's lock not recovered: %s", (int)victim,
                          srv_log(&s));
            test_sleep_ms(20);
        }
        snprintf(want, sizeof(want), "pool: reaped pid %d ", (int)victim);
        while (strstr(srv_log(&s), want) == NULL) {
            ck_assert_msg(test_now_ms() < end, "pid %d not reaped: %s", (int)victim, srv_log(&s));
            test_sleep_ms(20);
        }
    }
    /* Served again: a fresh connection is answered (one that meets a
     * worker stopped again is reset when the watchdog kills it). */
    end = test_now_ms() + 20000;
    for (;;) {
        int fd = cl_connect(s.port);
        char body[4096];
        int st = fd >= 0 ? cl_get(fd, "/", body, sizeof(body)) : -1;

        if (fd >= 0)
            close(fd);
        if (st == 200)
            break;
        ck_assert_msg(test_now_ms() < end, "nothing answered after the watchdog kill");
        test_sleep_ms(20);
    }
    sh->stop = 1;
    /* Replacements stop at the same point: kill whatever runs, master
     * first, then every worker the log names until the logger's end of
     * file says that none is left (it may still be filing the last lines). */
    kill(s.pid, SIGKILL);
    waitpid(s.pid, &status, 0);
    end = test_now_ms() + 5000;
    while (waitpid(s.logger, &status, WNOHANG) == 0 && test_now_ms() < end) {
        srv_workers(&s, w);
        for (int i = 0; i < 2; i++)
            if (w[i] > 0)
                kill(w[i], SIGKILL);
        test_sleep_ms(10);
    }
    kill(client, SIGKILL);
    waitpid(client, &status, 0);
    srv_end(&s);
    munmap(sh, sizeof(*sh));
}
END_TEST

/* The pid of the line of the log that contains what, or 0. */
static pid_t log_pid(const srv_t *s, const char *what, const char *pid_key)
{
    const char *line = strstr(srv_log(s), what), *p;

    if (line == NULL)
        return 0;
    while (line > srv_log(s) && line[-1] != '\n')
        line--;
    p = strstr(line, pid_key);
    return p != NULL ? atoi(p + strlen(pid_key)) : 0;
}

/* How many lines of the log contain what. */
static int count_of(const srv_t *s, const char *what)
{
    int n = 0;

    for (const char *p = srv_log(s); (p = strstr(p, what)) != NULL; p++)
        n++;
    return n;
}

/* A keep-alive connection to worker pid (its first answer names it), or
 * -1 after 10 s of tries.  A try that lands on another worker's socket,
 * answered or not within a second (that one may be stopped), is closed. */
static int connect_to(int port, pid_t pid)
{
    char body[4096];
    long end = test_now_ms() + 10000;

    while (test_now_ms() < end) {
        struct timeval probe = {1, 0}, tv = {REPLY_TIMEOUT_S, 0};
        int fd = cl_connect(port);
        const char *p;

        if (fd < 0)
            continue;
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &probe, sizeof(probe));
        if (cl_get(fd, "/", body, sizeof(body)) == 200 && (p = strstr(body, "\"pid\":")) != NULL &&
            atoi(p + 6) == pid) {
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
            return fd;
        }
        close(fd);
    }
    return -1;
}

/* Send GET /heavy?n=1000 on a fresh connection and leave it there: the
 * worker that takes it allocates its 512,000 bytes of buckets from the
 * page heap.  Returns the descriptor, or -1. */
static int poke_page_heap(int port)
{
    static const char req[] = "GET /heavy?n=1000 HTTP/1.1\r\nHost: t\r\n\r\n";
    int fd = cl_connect(port);

    if (fd >= 0 && send(fd, req, sizeof(req) - 1, MSG_NOSIGNAL) != (ssize_t)(sizeof(req) - 1)) {
        close(fd);
        fd = -1;
    }
    return fd;
}

/* On a fresh connection, GET / (a warm worker serves it from its thread
 * cache); when a worker other than other answers, /heavy?n=1000 after it
 * makes it allocate pages.  Returns the descriptor, or -1. */
static int poke_successor(int port, pid_t other)
{
    static const char req[] = "GET /heavy?n=1000 HTTP/1.1\r\nHost: t\r\n\r\n";
    struct timeval probe = {1, 0};
    char body[4096];
    const char *p;
    int fd = cl_connect(port);

    if (fd < 0)
        return -1;
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &probe, sizeof(probe));
    if (cl_get(fd, "/", body, sizeof(body)) == 200 && (p = strstr(body, "\"pid\":")) != NULL &&
        atoi(p + 6) != other && send(fd, req, sizeof(req) - 1, MSG_NOSIGNAL) > 0)
        return fd;
    close(fd);
    return -1;
}

#define POKES 256

/* Debug builds with the pool: the worker at slot 0 stops (SIGSTOP) inside
 * the page-heap lock at its first page allocation, as does each worker
 * that takes the slot after it; requests for /heavy?n=1000, on fresh
 * connections, make every worker that takes one allocate pages, and,
 * once the first is killed, only the workers at slot 0 after it.  The
 * master must go on: its watchdog kills the stopped holder (the master's
 * own calls into the pool give up on the lock rather than wait), the
 * other worker answers /stats on its connection for 3 s once a successor
 * stopped too (its check verdict "ok", or "not run" while a successor
 * sleeps in the lock: never a failure), and SIGTERM stops the server.  On the code before the deadlines, the master hung in
 * pool_decay(): no kill, no /stats. */
START_TEST(test_watchdog_kills_stopped_heap_holder)
{
    const char *stop_line = "crash point journal.page-alloc (hit 1) in pid ";
    pid_t w[2], victim, killed, other;
    int pokes[POKES], npokes = 0, answered = 0, inexact = 0, not_run = 0;
    long end;
    srv_t s;

    srv_start_with(&s, "journal.page-alloc:1:stop@0", "1");
    end = test_now_ms() + 20000;
    while ((victim = log_pid(&s, stop_line, "in pid ")) == 0) {
        ck_assert_msg(test_now_ms() < end && npokes < POKES, "no worker stopped in 20 s: %s",
                      srv_log(&s));
        pokes[npokes++] = poke_page_heap(s.port);
        test_sleep_ms(100);
    }
    {
        char want[128];

        snprintf(want, sizeof(want), "%s%d, holding 1 lock, the last the page heap", stop_line,
                 (int)victim);
        ck_assert_msg(strstr(srv_log(&s), want) != NULL, "not stopped in the page-heap lock: %s",
                      srv_log(&s));
    }
    while ((killed = log_pid(&s, "answers nothing: killed", "(pid ")) == 0) {
        ck_assert_msg(test_now_ms() < end, "no watchdog kill within 20 s: %s", srv_log(&s));
        test_sleep_ms(20);
    }
    ck_assert_int_eq(killed, victim);
    /* The other of the two first workers: the slot-0 worker stopped at
     * its first page allocation, whichever of them it was. */
    ck_assert_int_eq(sscanf(strstr(srv_log(&s), "pids="), "pids=%d,%d", &w[0], &w[1]), 2);
    other = w[0] == victim ? w[1] : w[0];
    ck_assert_msg(w[0] == victim || w[1] == victim, "pid %d is no first worker: %s",
                  (int)victim, srv_log(&s));

    /* The requests go on until a successor at slot 0 stops too; then the
     * other worker answers /stats on its connection for 3 s. */
    {
        int fd = connect_to(s.port, other), stops = count_of(&s, stop_line);
        static char body[65536];

        ck_assert_msg(fd >= 0, "worker %d did not answer within 10 s: %s", (int)other,
                      srv_log(&s));
        for (end = test_now_ms() + 10000; count_of(&s, stop_line) == stops &&
                                          test_now_ms() < end && npokes < POKES;) {
            pokes[npokes++] = poke_successor(s.port, other);
            test_sleep_ms(100);
        }
        for (end = test_now_ms() + 3000; test_now_ms() < end; answered++) {
            char check[200];

            ck_assert_msg(cl_get(fd, "/stats", body, sizeof(body)) == 200,
                          "/stats %d on worker %d not answered: %s", answered, (int)other,
                          srv_log(&s));
            inexact += strstr(body, "\"exact\":false") != NULL;
            stats_check(body, check, sizeof(check));
            not_run += strncmp(check, "not run: ", 9) == 0;
            ck_assert_msg(strcmp(check, "ok") == 0 || strncmp(check, "not run: ", 9) == 0,
                          "/stats check under a stopped holder: %s", check);
            test_sleep_ms(100);
        }
        close(fd);
    }
    for (int k = 0; k < npokes; k++)
        if (pokes[k] >= 0)
            close(pokes[k]);
    fprintf(stderr, "crash e2e: worker %d stopped in the page-heap lock and killed; %d /stats "
            "answered by worker %d afterwards, %d of them inexact, %d checks not run\n",
            (int)victim, answered, (int)other, inexact, not_run);
    srv_stop(&s);
    srv_end(&s);
}
END_TEST

/* Debug builds with the pool: /stats checks the arena while two clients
 * load both workers on keep-alive connections; the check leaves out the
 * other worker's thread cache, which changes as it is read, and so finds
 * nothing wrong in a healthy arena: every verdict is "ok".  Before, the
 * check walked that cache and reported it broken ("slot N class M: ...
 * objects listed, length says ..."). */
START_TEST(test_stats_check_under_load)
{
    shared_t *sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                        -1, 0);
    static char body[65536];
    pid_t clients[CLIENTS];
    int polls = 0, status;
    srv_t s;

    ck_assert_ptr_ne(sh, MAP_FAILED);
    memset(sh, 0, sizeof(*sh));
    srv_start(&s, NULL);
    clients_start(sh, clients, s.port);
    for (long end = test_now_ms() + 6000; test_now_ms() < end; polls++) {
        int fd = cl_connect(s.port);
        char check[200];

        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(cl_get(fd, "/stats", body, sizeof(body)), 200);
        close(fd);
        stats_check(body, check, sizeof(check));
        ck_assert_msg(strcmp(check, "ok") == 0, "/stats %d under load: check says '%s'", polls,
                      check);
        ck_assert_msg(strstr(body, "\"check_caches_left_out\":") != NULL,
                      "/stats %d: the check does not say what it left out", polls);
    }
    sh->stop = 1;
    for (int c = 0; c < CLIENTS; c++) {
        ck_assert_int_eq(waitpid(clients[c], &status, 0), clients[c]);
        ck_assert_msg(sh->cl[c].failed_other == 0, "client %d: %s", c, sh->cl[c].why);
        ck_assert_int_gt(sh->cl[c].ok, 0);
    }
    fprintf(stderr, "crash e2e: %d /stats checks under load (%ld and %ld requests), all ok\n",
            polls, sh->cl[0].ok, sh->cl[1].ok);
    srv_stop(&s);
    srv_end(&s);
    munmap(sh, sizeof(*sh));
}
END_TEST

Suite *make_crash_e2e_suite(void)
{
    Suite *s = suite_create("crash_e2e");
    TCase *tc = tcase_create("kills");

    tcase_add_test(tc, test_kill_workers_under_load);
    tcase_add_test(tc, test_backoff_only_before_ready);
    if (strcmp(PD_ALLOCATOR_BUILD, "shmpool") == 0 && POOL_CONFIG_DEBUG > 0) {
        tcase_add_test(tc, test_watchdog_kills_stopped_holder);
        tcase_add_test(tc, test_watchdog_kills_stopped_heap_holder);
        tcase_add_test(tc, test_stats_check_under_load);
    }
    tcase_set_timeout(tc, 90);
    suite_add_tcase(s, tc);
    return s;
}

/* End to end: poold's workers are killed under load and the server keeps
 * serving.  The test runs the real binary ($POOLD, -w 2) on 127.0.0.1,
 * loads it from two forked clients on keep-alive connections, and kills a
 * random worker with SIGKILL every 200 ms for 20 s.  Each connection learns
 * which worker serves it from its first response (`/` names the pid), so a
 * failed request can be told apart: on a killed worker's connection, or
 * not.  Afterwards the master is alive, both workers serve, and with the
 * pool /stats shows a reap per kill, nothing leaked and (debug builds)
 * pool_check()'s verdict.  Entry point: make_crash_e2e_suite().
 */
#include "config.h"

#include <check.h>
#include <errno.h>
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
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>

#include "check_poold.h"

#define KILL_EVERY_MS 200
#define KILL_FOR_MS 20000
#define CLIENTS 2
#define MAX_KILLS 256
#define REPLY_TIMEOUT_S 10 /* a worker in crash-loop back-off restarts within 5 s */

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
    int port;
    char allocator[32];
    char log[64];
} srv_t;

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

/* Start poold -w 2; crash, when not NULL, goes to its SHMPOOL_CRASH. */
static void srv_start(srv_t *s, const char *crash)
{
    const char *bin = getenv("POOLD");
    const char *line;
    long end;

    ck_assert_msg(bin != NULL, "POOLD is not set (run through make check)");
    memset(s, 0, sizeof(*s));
    snprintf(s->log, sizeof(s->log), "/tmp/poold-crash-%d.log", (int)getpid());
    s->pid = fork();
    ck_assert_int_ge(s->pid, 0);
    if (s->pid == 0) {
        if (freopen(s->log, "w", stderr) == NULL || freopen("/dev/null", "w", stdout) == NULL)
            _exit(127);
        if (crash != NULL)
            setenv("SHMPOOL_CRASH", crash, 1);
        /* A failed test must not leave a server behind. */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        execl(bin, bin, "-w", "2", "-p", "0", "--no-pin", (char *)NULL);
        _exit(127);
    }
    end = test_now_ms() + 5000;
    while ((line = strstr(srv_log(s), "info: started ")) == NULL) {
        ck_assert_msg(test_now_ms() < end, "no start-up line within 5 s: %s", srv_log(s));
        test_sleep_ms(10);
    }
    ck_assert_int_eq(sscanf(strstr(line, "allocator="), "allocator=%31s", s->allocator), 1);
    ck_assert_int_eq(sscanf(strstr(line, "listen="), "listen=127.0.0.1:%d", &s->port), 1);
}

/* Current worker pids from the master's log (start-up line, then every
 * replacement); 0 for a worker in back-off. */
static void srv_workers(const srv_t *s, pid_t w[2])
{
    const char *log = srv_log(s), *p;
    int a, b, i, dead, fresh;

    p = strstr(log, "pids=");
    ck_assert_ptr_nonnull(p);
    ck_assert_int_eq(sscanf(p, "pids=%d,%d", &a, &b), 2);
    w[0] = a;
    w[1] = b;
    for (p = log; (p = strstr(p, "\n")) != NULL; p++) {
        if (sscanf(p + 1, "%*[^:]: warn: worker %d (pid %d) killed by signal 9; replaced by pid %d",
                   &i, &dead, &fresh) == 3 && i >= 0 && i < 2)
            w[i] = fresh;
        else if (sscanf(p + 1, "%*[^:]: warn: worker %d (pid %d) killed by signal 9; restarting",
                        &i, &dead) == 2 && i >= 0 && i < 2)
            w[i] = 0;
        else if (sscanf(p + 1, "%*[^:]: warn: worker %d restarted as pid %d", &i, &fresh) == 2 &&
                 i >= 0 && i < 2)
            w[i] = fresh;
    }
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
    for (int k = 0; k < sh->nkilled && k < MAX_KILLS; k++)
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
            sh->cl[id].failed_other++;
            if (sh->cl[id].why[0] == '\0')
                snprintf(sh->cl[id].why, sizeof(sh->cl[id].why), "connect: %s", strerror(errno));
            test_sleep_ms(10);
            continue;
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
            /* The kill is recorded before it is sent: give it a moment. */
            test_sleep_ms(50);
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

START_TEST(test_kill_workers_under_load)
{
    shared_t *sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                        -1, 0);
    pid_t clients[CLIENTS];
    pid_t seen[2] = {0, 0};
    srv_t s;
    long ok = 0, failed_killed = 0, failed_unknown = 0;
    int status, fd;
    char body[65536];
    const char *p;

    ck_assert_ptr_ne(sh, MAP_FAILED);
    memset(sh, 0, sizeof(*sh));
    srv_start(&s, NULL);
    for (int c = 0; c < CLIENTS; c++) {
        clients[c] = fork();
        ck_assert_int_ge(clients[c], 0);
        if (clients[c] == 0) {
            client_run(sh, c, s.port);
            _exit(0);
        }
    }
    srand((unsigned)getpid());
    for (long t0 = test_now_ms(); test_now_ms() - t0 < KILL_FOR_MS && sh->nkilled < MAX_KILLS;) {
        pid_t w[2];
        int i = rand() % 2;

        test_sleep_ms(KILL_EVERY_MS);
        srv_workers(&s, w);
        /* Only workers seen a tick ago: they have attached (the first
         * thing a worker does), so each kill leaves something to reap. */
        for (int k = 0; k < 2; k++)
            if (w[k] != 0 && w[k] != seen[k]) {
                seen[k] = w[k];
                w[k] = 0;
            }
        if (w[i] == 0)
            i = 1 - i;
        if (w[i] == 0 || was_killed(sh, w[i]))
            continue;
        sh->killed[sh->nkilled] = w[i];
        __atomic_store_n(&sh->nkilled, sh->nkilled + 1, __ATOMIC_RELEASE);
        kill(w[i], SIGKILL);
    }
    ck_assert_msg(waitpid(s.pid, &status, WNOHANG) == 0, "the master died: %s", srv_log(&s));
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
    ck_assert_int_ge(sh->nkilled, KILL_FOR_MS / KILL_EVERY_MS / 10);
    fprintf(stderr, "crash e2e: %d kills, %ld requests served, %ld failed on killed workers' "
            "connections, %ld before the first answer\n", sh->nkilled, ok, failed_killed,
            failed_unknown);

    fd = cl_connect(s.port);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(cl_get(fd, "/stats", body, sizeof(body)), 200);
    close(fd);
    if (strcmp(s.allocator, "shmpool") == 0) {
        long reaps;

        p = strstr(body, "\"crash\":{");
        ck_assert_msg(p != NULL, "no crash section in /stats: %s", body);
        p = strstr(p, "\"reaps\":");
        ck_assert_ptr_nonnull(p);
        reaps = atol(p + 8);
        ck_assert_msg(reaps >= sh->nkilled, "%ld reaps for %d kills", reaps, sh->nkilled);
        ck_assert_msg(strstr(body, "\"leaked_bytes\":0,") != NULL, "leaks: %s", body);
        if (POOL_CONFIG_DEBUG > 0)
            ck_assert_msg(strstr(body, "\"check\":\"ok\"") != NULL, "pool_check: %s", body);
        ck_assert_ptr_nonnull(strstr(srv_log(&s), "info: pool: reaped pid "));
    }
    kill(s.pid, SIGTERM);
    for (long end = test_now_ms() + 5000; waitpid(s.pid, &status, WNOHANG) == 0;) {
        ck_assert_msg(test_now_ms() < end, "poold did not stop within 5 s");
        test_sleep_ms(10);
    }
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "poold status %#x", status);
    unlink(s.log);
    munmap(sh, sizeof(*sh));
}
END_TEST

/* Debug builds with the pool: every worker stops (SIGSTOP) inside a class
 * lock at its 120th object fetched.  The master's watchdog must kill the
 * stopped holder, its reap must repair the lock, and requests must be
 * answered again afterwards. */
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
    srv_start(&s, "central.fetch:120:stop");
    client = fork();
    ck_assert_int_ge(client, 0);
    if (client == 0) {
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
    /* Replacements stop at the same point: kill whatever runs, master first. */
    kill(s.pid, SIGKILL);
    waitpid(s.pid, &status, 0);
    srv_workers(&s, w);
    for (int i = 0; i < 2; i++)
        if (w[i] > 0)
            kill(w[i], SIGKILL);
    kill(client, SIGKILL);
    waitpid(client, &status, 0);
    unlink(s.log);
    munmap(sh, sizeof(*sh));
}
END_TEST

Suite *make_crash_e2e_suite(void)
{
    Suite *s = suite_create("crash_e2e");
    TCase *tc = tcase_create("kills");

    tcase_add_test(tc, test_kill_workers_under_load);
    if (strcmp(PD_ALLOCATOR_BUILD, "shmpool") == 0 && POOL_CONFIG_DEBUG > 0)
        tcase_add_test(tc, test_watchdog_kills_stopped_holder);
    tcase_set_timeout(tc, 90);
    suite_add_tcase(s, tc);
    return s;
}

/* SPDX-License-Identifier: BSD-2-Clause */
/* A preloaded worker gives back what a burst left, without calling the
 * pool: tests/pool/giveback.sh runs it under LD_PRELOAD=libshmpool.so
 * SHMPOOL_MODE=children; built with GIVEBACK_SLEEP as tests/givesleep, for
 * tests/pool/givesleep.sh, and with GIVEBACK_ACCEPT as tests/giveaccept,
 * for tests/pool/giveaccept.sh.
 *
 * The private master forks a worker, which attaches, allocates and frees
 * a burst of small blocks of ten sizes and of 640 KiB blocks (several
 * MiB in all), then goes on as a quiet server would: a small malloc and
 * free every 100 ms and a 512 KiB buffer every 500 ms, for 20 s; or, with
 * GIVEBACK_SLEEP, as an idle event loop: one epoll_wait() with no timeout
 * and nothing to wait for, no allocation at all; or, with GIVEBACK_ACCEPT,
 * as an idle Apache prefork child: accept() on the master's blocking
 * listening socket, no allocation at all, and once the worker has given
 * back, the master connects and the worker must answer on the connection
 * it accepted.  The
 * master reads what the worker maps of the arena (its Rss) before and
 * right after the burst, then every 250 ms until it is back within
 * SLACK of what it was before the burst: it must be within 15 s.  Prints the figures in KiB on one
 * line; exit 0, otherwise one line on stderr and exit 1.
 */
#include "config.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../shm/shmpool.h"
#include "preloaded.h"

#if defined GIVEBACK_SLEEP
#define NAME "givesleep"
#elif defined GIVEBACK_ACCEPT
#define NAME "giveaccept"
#else
#define NAME "giveback"
#endif
#define SMALL_BYTES ((size_t)6 << 20)
#define BIG_BLOCKS 8
#define BIG_SIZE ((size_t)640 << 10)
#define BUFFER_SIZE ((size_t)512 << 10)
#define QUIET_MS 20000
#define DEADLINE_MS 15000
/* What the quiet worker's buffer (which the page heap's cushion keeps
 * mapped, as it is taken again every 500 ms) and the classes' one kept
 * span each may hold, over the baseline: an eighth of the burst. */
#define SLACK ((size_t)1536 << 10)

static int (*usage_p)(pool_usage_t *);

/* What the worker's page tables map of the arena (its memfd's Rss), in
 * bytes: the metadata it touched and the data pages it has not given
 * back.  pool_usage's free pages cannot tell it: a span freed next to
 * pages given back counts as not given back once they merge.  *cached
 * gets the cached bytes of pool_usage. */
static size_t kept(pid_t pid, size_t *cached)
{
    pool_usage_t u;
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/smaps", (int)pid);
    FILE *f = fopen(path, "r");
    if (usage_p(&u) != 0 || f == NULL) {
        if (f != NULL)
            fclose(f);
        return SIZE_MAX;
    }
    *cached = u.cached;
    size_t kib = 0;
    bool arena = false;
    while (fgets(line, sizeof line, f) != NULL) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2)
            arena = strstr(line, "memfd:shmpool") != NULL;
        else if (arena && sscanf(line, "Rss: %zu kB", &kib) == 1)
            break;
    }
    fclose(f);
    return kib << 10;
}

static void burst(void)
{
    static const size_t sizes[] = { 16, 48, 112, 200, 500, 1000, 3000, 8000, 20000, 60000 };
    size_t n = 0, bytes = 0, cap = 1 << 16;
    void **blocks = malloc(cap * sizeof *blocks);
    if (blocks == NULL)
        _exit(1);
    for (unsigned i = 0; bytes < SMALL_BYTES && n < cap; i++) {
        size_t size = sizes[i % (sizeof sizes / sizeof sizes[0])];
        if ((blocks[n] = malloc(size)) == NULL)
            _exit(1);
        memset(blocks[n++], 1, size);
        bytes += size;
    }
    void *big[BIG_BLOCKS];
    for (int i = 0; i < BIG_BLOCKS; i++)
        if ((big[i] = malloc(BIG_SIZE)) == NULL || !pool_owns_p(big[i]))
            _exit(1);
        else
            memset(big[i], 2, BIG_SIZE);
    for (size_t i = 0; i < n; i++)
        free(blocks[i]);
    for (int i = 0; i < BIG_BLOCKS; i++)
        free(big[i]);
    free(blocks);
}

/* The worker: says it is ready on `say`, bursts once it hears a byte on
 * `hear`, says so, then ticks quietly (or sleeps, or accepts on listener). */
static void worker(int say, int hear, int listener)
{
    void *probe = malloc(100);
    if (!pool_attached_p() || !pool_owns_p(probe) || write(say, "r", 1) != 1)
        _exit(1);
    free(probe);
    char c;
    if (read(hear, &c, 1) != 1)
        _exit(1);
    burst();
    if (write(say, "b", 1) != 1)
        _exit(1);
#ifdef GIVEBACK_SLEEP
    struct epoll_event ev;
    int ep = epoll_create1(0);
    if (ep < 0)
        _exit(1);
    epoll_wait(ep, &ev, 1, -1);
    _exit(1);
#elif defined GIVEBACK_ACCEPT
    int conn = accept(listener, NULL, NULL);
    _exit(conn >= 0 && write(conn, "a", 1) == 1 ? 0 : 1);
#endif
    (void)listener;
    for (long t = 0; t * 100 < QUIET_MS; t++) {
        sleep_ms(100);
        char *p = malloc(100);
        p[0] = 1;
        free(p);
        if (t % 5 == 4) {
            char *b = malloc(BUFFER_SIZE);
            memset(b, 3, 4096);
            free(b);
        }
    }
    _exit(0);
}

static int fail(pid_t child, const char *what)
{
    fprintf(stderr, NAME ": %s\n", what);
    if (child > 0) {
        kill(child, SIGKILL);
        waitpid(child, NULL, 0);
    }
    return 1;
}

int main(void)
{
    if (!preloaded_master(NAME))
        return 1;
    usage_p = (int (*)(pool_usage_t *))dlsym(RTLD_DEFAULT, "pool_usage");
    int up[2], down[2];
    if (usage_p == NULL || pipe(up) != 0 || pipe(down) != 0)
        return fail(0, "no pool_usage, or no pipe");
    struct sockaddr_in sin;
    int listener = preloaded_listener(&sin);
    if (listener < 0)
        return fail(0, "no listening socket on the loopback");
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        worker(up[1], down[0], listener);
    }
    char c;
    if (pid < 0 || read(up[0], &c, 1) != 1)
        return fail(pid, "the worker did not attach");
    size_t cached;
    size_t base = kept(pid, &cached);
    if (write(down[1], "g", 1) != 1 || read(up[0], &c, 1) != 1)
        return fail(pid, "the worker did not finish its burst");
    long t0 = now_ms();
    size_t peak = kept(pid, &cached), now = peak;
    printf(NAME ": kept before the burst %zu KiB, after it %zu KiB", base >> 10, peak >> 10);
    long at[] = { 1000, 2000, 5000, 10000, 15000 };
    unsigned next = 0;
    for (long t = 0; t <= DEADLINE_MS; t = now_ms() - t0) {
        now = kept(pid, &cached);
        if (next < sizeof at / sizeof at[0] && t >= at[next])
            printf(", %lds %zu (%zu cached)", at[next++] / 1000, now >> 10, cached >> 10);
        if (now <= base + SLACK && next == sizeof at / sizeof at[0])
            break;
        sleep_ms(250);
    }
    printf("\n");
    if (now > base + SLACK) {
        char msg[160];
        snprintf(msg, sizeof msg, "%zu KiB still kept %d s after the burst (limit %zu KiB)",
                 now >> 10, DEADLINE_MS / 1000, (base + SLACK) >> 10);
        return fail(pid, msg);
    }
#ifdef GIVEBACK_ACCEPT
    /* The accept it sleeps in still takes a connection. */
    int conn = socket(AF_INET, SOCK_STREAM, 0);
    struct timeval tv = { 5, 0 };
    int status;
    if (conn < 0 || setsockopt(conn, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0 ||
        connect(conn, (struct sockaddr *)&sin, sizeof sin) != 0 || read(conn, &c, 1) != 1 ||
        c != 'a' || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 0)
        return fail(pid, "the worker's accept did not take the connection after it gave back");
    close(conn);
    printf(NAME ": the accept took a connection afterwards\n");
    return 0;
#endif
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    return 0;
}

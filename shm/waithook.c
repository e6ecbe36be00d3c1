/* SPDX-License-Identifier: BSD-2-Clause */
/* libshmpool — the wait family, in the preloadable library: a master that
 * waits for a child reaps it.
 *
 * A prefork server's master (nginx's, Apache's, PostgreSQL's postmaster)
 * knows nothing of the pool, but it waits for every child that ends; the
 * pool's own processes may be idle, or busy on thread-cache hits only, for
 * a long time after a reload or a recycling storm, and nobody would notice
 * the dead until the next attach.  So the library's wait(), waitpid(),
 * wait3(), wait4() and waitid() call the C library's, and when that returns
 * a child that exited or was killed, give back what the child held in the
 * arena: as poold's master does with pool_reap(), but for programs that do
 * not know the pool.  Only a process that is not attached does it: only
 * its children attach (an attached process's children get a private
 * copy), and it holds no pool lock it could meet again in the reap.  The
 * reap and the decay wait for the pool's locks POOL_WAIT_MS at most, and
 * not at all for a holder that has kept one that long already: a child
 * stopped holding one (SIGSTOP, a debugger) must not stop its parent's
 * wait(WNOHANG), nor any wait for another child.  The
 * reap allocates nothing and writes with write(2) only; a wait from a
 * SIGCHLD handler that interrupted a wait already reaping does nothing,
 * so the handler never waits for locks its own thread holds.  errno is
 * kept as the C library's call left it.
 *
 * Only libshmpool.so links this file: poold reaps in its master itself.
 */
#include "pool-internal.h"

#include <errno.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "prim/prim.h"

#define POOL_EXPORT __attribute__((visibility("default")))

typedef pid_t (*wait4_fn_t)(pid_t, int *, int, struct rusage *);
typedef int (*waitid_fn_t)(idtype_t, id_t, siginfo_t *, int);

/* The C library's own (the next definitions after ours), looked up when
 * the library is loaded: the dynamic linker is not safe to call from the
 * SIGCHLD handler where the first wait may come. */
static wait4_fn_t libc_wait4_;
static waitid_fn_t libc_waitid_;

__attribute__((constructor)) static void find_libc_waits(void)
{
    libc_wait4_ = (wait4_fn_t)pool_prim_next_symbol_("wait4");
    libc_waitid_ = (waitid_fn_t)pool_prim_next_symbol_("waitid");
}

static __thread bool reaping __attribute__((tls_model("initial-exec")));

/* After a wait: reap the child that ended (pid > 0), if it held a slot (a
 * pid that never attached costs a look at the slots), and any reap left
 * pending; and, the master being the one process sure to come by, end the
 * page heap's decay period if it is over (a decay that could not take its
 * lock waits for the next call).  A reap that could not take the
 * locks in time (a live holder was slow) leaves its slots marked dead, so
 * every later wait, whatever it returns, tries again until none is left:
 * a retry may meet the slow holder again, and a server whose load is over
 * may have no more children to wait for. */
static void reap_ended(pid_t pid)
{
    if (pool_arena_.hdr == NULL || pool_arena_copied_() || pool_attached() || reaping)
        return;
    int saved = errno;
    reaping = true;
    if (pool_reap_left_(&pool_arena_))
        pool_reap_dead_(&pool_arena_);
    if (pid > 0)
        pool_reap(pid, NULL);
    pool_decay();
    reaping = false;
    errno = saved;
}

static pid_t wait_and_reap(pid_t pid, int *status, int options, struct rusage *ru)
{
    wait4_fn_t fn = libc_wait4_;
    if (fn == NULL) {
        errno = ENOSYS;
        return -1;
    }
    int st;
    pid_t got = fn(pid, &st, options, ru);
    reap_ended(got > 0 && (WIFEXITED(st) || WIFSIGNALED(st)) ? got : 0);
    if (got > 0 && status != NULL)
        *status = st;
    return got;
}

POOL_EXPORT pid_t wait4(pid_t pid, int *status, int options, struct rusage *ru)
{
    return wait_and_reap(pid, status, options, ru);
}

POOL_EXPORT pid_t wait3(int *status, int options, struct rusage *ru)
{
    return wait_and_reap(-1, status, options, ru);
}

POOL_EXPORT pid_t waitpid(pid_t pid, int *status, int options)
{
    return wait_and_reap(pid, status, options, NULL);
}

POOL_EXPORT pid_t wait(int *status)
{
    return wait_and_reap(-1, status, 0, NULL);
}

/* With WNOWAIT the child stays a zombie, but it is dead all the same: its
 * life locks were released when it died. */
POOL_EXPORT int waitid(idtype_t idtype, id_t id, siginfo_t *info, int options)
{
    waitid_fn_t fn = libc_waitid_;
    if (fn == NULL) {
        errno = ENOSYS;
        return -1;
    }
    int rc = fn(idtype, id, info, options);
    bool ended = rc == 0 && info != NULL && info->si_pid > 0 &&
                 (info->si_code == CLD_EXITED || info->si_code == CLD_KILLED ||
                  info->si_code == CLD_DUMPED);
    reap_ended(ended ? info->si_pid : 0);
    return rc;
}

/* SPDX-License-Identifier: BSD-2-Clause */
/* The fixtures and process helpers the pool's suites share (check_pool.h),
 * in tests/check_pool and tests/check_crashpoints alike. */
#include "config.h"

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "check_pool.h"
#include "pool-internal.h"
#include "prim/prim.h"

void pool_test_create(void)
{
    int rc = pool_create(POOL_TEST_HEAP);
    ck_assert_msg(rc == 0, "pool_create: %d", rc);
}

void pool_test_create_attach(void)
{
    pool_test_create();
    int rc = pool_attach();
    ck_assert_msg(rc == 0, "pool_attach: %d", rc);
}

void pool_test_destroy(void)
{
    pool_detach();
    pool_destroy_();
}

bool pool_test_any_resident(uintptr_t lo, uintptr_t hi)
{
    uintptr_t page = pool_prim_os_page_size_();
    lo = (lo + page - 1) & ~(page - 1);
    hi &= ~(page - 1);
    ck_assert_uint_lt(lo, hi);
    for (uintptr_t p = lo; p < hi; p += page) {
        unsigned char in;
        ck_assert_int_eq(mincore((void *)p, page, &in), 0);
        if (in & 1)
            return true;
    }
    return false;
}

long pool_test_minor_faults(void)
{
    struct rusage ru;
    ck_assert_int_eq(getrusage(RUSAGE_SELF, &ru), 0);
    return ru.ru_minflt;
}

pid_t pool_test_fork_worker(void)
{
    pool_detach();
    pid_t pid = fork();
    ck_assert_msg(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0 && pool_attach() != 0)
        _exit(2);
    return pid;
}

int pool_test_join_worker(pid_t pid)
{
    int status = pool_test_wait(pid);
    if (!pool_attached()) {
        int rc = pool_attach();
        ck_assert_msg(rc == 0, "pool_attach: %s", strerror(rc));
    }
    return status;
}

void pool_test_assert_consistent(void)
{
    char msg[256];
    int rc = pool_check(msg, sizeof msg);
    ck_assert_msg(rc == 0, "pool_check: %s", msg);
}

pool_usage_t pool_test_assert_bytes_add_up(void)
{
    pool_usage_t u;

    pool_usage(&u);
    ck_assert_msg(u.in_use + u.cached + u.free == u.used,
                  "in use %zu + cached %zu + free %zu != used %zu", u.in_use, u.cached, u.free,
                  u.used);
    return u;
}

void pool_test_assert_settled(size_t in_use)
{
    pool_test_assert_consistent();
    pool_usage_t u = pool_test_assert_bytes_add_up();
    ck_assert_msg(u.in_use == in_use, "%zu bytes in use, expected %zu", u.in_use, in_use);
}

int pool_test_wait(pid_t pid)
{
    int status;
    while (waitpid(pid, &status, 0) < 0)
        ck_assert_int_eq(errno, EINTR);
    return status;
}

void pool_test_assert_exit0(pid_t pid, const char *who)
{
    int status = pool_test_wait(pid);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s ended with status %#x",
                  who, status);
}

void pool_test_assert_killed(pid_t pid, const char *who)
{
    int status = pool_test_wait(pid);
    ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
                  "%s was not killed (status %#x)", who, status);
}


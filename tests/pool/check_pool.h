/* SPDX-License-Identifier: BSD-2-Clause */
/* Suites of tests/check_pool and tests/check_crashpoints (the pool linked
 * without the override) and the fixtures they share. */
#ifndef CHECK_POOL_H
#define CHECK_POOL_H

#include <check.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "shmpool.h"

Suite *make_sizeclass_suite(void);
Suite *make_pagemap_suite(void);
Suite *make_pageheap_suite(void);
Suite *make_central_suite(void);
Suite *make_tcache_suite(void);
Suite *make_journal_suite(void);
Suite *make_lock_suite(void);
Suite *make_libc_suite(void);
Suite *make_stress_suite(void);
Suite *make_fork_suite(void);
Suite *make_lifecycle_suite(void);
/* tests/check_crashpoints: deaths anywhere, and at named crash points
 * (debug builds). */
Suite *make_crash_suite(void);
Suite *make_recovery_suite(void);
Suite *make_crash_points_suite(void);
Suite *make_recovery_points_suite(void);

/* Arena size the fixtures create. */
#define POOL_TEST_HEAP ((size_t)64 << 20)

/* Checked fixtures: every forked test gets its own arena. */
void pool_test_create(void);          /* create, stay private */
void pool_test_create_attach(void);   /* create and attach */
void pool_test_destroy(void);
/* Fail the test with pool_check()'s message unless the arena is consistent. */
void pool_test_assert_consistent(void);
/* Fail unless in_use + cached + free == used; returns the usage read. */
pool_usage_t pool_test_assert_bytes_add_up(void);
/* The arena is consistent, its bytes add up, and exactly in_use bytes are
 * in use: what a test expects once every block is freed (or reaped). */
void pool_test_assert_settled(size_t in_use);

/* Whether any OS page wholly inside [lo, hi) has memory behind it
 * (mincore). */
bool pool_test_any_resident(uintptr_t lo, uintptr_t hi);

/* Minor page faults the calling process has taken so far. */
long pool_test_minor_faults(void);

/* A child that attaches to the arena itself, as a server's worker does:
 * the caller detaches first (a child of an attached process gets a private
 * copy).  Returns 0 in the child, attached (it exits 2 when it cannot
 * attach), and the child's pid in the caller.  pool_test_join_worker
 * waits for one, attaches the caller again if it is not, and returns the
 * child's status. */
pid_t pool_test_fork_worker(void);
int pool_test_join_worker(pid_t pid);

/* Child processes: wait for pid (retrying on EINTR) and return its status;
 * fail the test unless it exited 0, or unless SIGKILL killed it. */
int pool_test_wait(pid_t pid);
void pool_test_assert_exit0(pid_t pid, const char *who);
void pool_test_assert_killed(pid_t pid, const char *who);

#endif /* CHECK_POOL_H */

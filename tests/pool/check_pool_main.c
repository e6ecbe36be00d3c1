/* SPDX-License-Identifier: BSD-2-Clause */
/* tests/check_pool: runs the pool's unit suites.  Linked with
 * shm/libshmpool_core.la only, so Check's own allocations go to glibc and
 * never through the code under test.  Crash safety (check_crash.c,
 * check_recovery.c) runs in tests/check_crashpoints.  With --unit (make check-unit) only the
 * quick suites of single tiers run: no stress, no forks of many processes. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "check_pool.h"

int main(int argc, char **argv)
{
    bool unit_only = argc > 1 && strcmp(argv[1], "--unit") == 0;
    SRunner *sr = srunner_create(make_sizeclass_suite());
    srunner_add_suite(sr, make_pagemap_suite());
    srunner_add_suite(sr, make_pageheap_suite());
    srunner_add_suite(sr, make_central_suite());
    srunner_add_suite(sr, make_tcache_suite());
    srunner_add_suite(sr, make_journal_suite());
    srunner_add_suite(sr, make_lock_suite());
    srunner_add_suite(sr, make_libc_suite());
    if (!unit_only) {
        srunner_add_suite(sr, make_stress_suite());
        srunner_add_suite(sr, make_fork_suite());
        srunner_add_suite(sr, make_lifecycle_suite());
    }
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

/* SPDX-License-Identifier: BSD-2-Clause */
/* tests/check_crashpoints: the pool's crash safety, the one program of
 * check_crash.c and check_recovery.c.  Processes killed anywhere and
 * reaped, and lock holders dead between operations, in every build with
 * the robust mutex; deaths at named crash points only in builds configured
 * with --enable-debug, the only ones that have them.  With spin locks
 * there is no owner to find dead, no recovery, and nothing to run: the
 * program says so and exits 77, which the test harness reports as a skip
 * rather than as a pass of nothing. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>

#include "check_pool.h"

int main(void)
{
    if (POOL_CONFIG_SPINLOCK) {
        printf("check_crashpoints: SKIP: spin locks have no owner to find dead (no recovery)\n");
        return 77;
    }
    SRunner *sr = srunner_create(make_crash_suite());
    srunner_add_suite(sr, make_recovery_suite());
    if (POOL_CONFIG_DEBUG > 0) {
        srunner_add_suite(sr, make_crash_points_suite());
        srunner_add_suite(sr, make_recovery_points_suite());
    } else {
        printf("check_crashpoints: this build has no crash points (configure --enable-debug): "
               "the suites at named crash points do not run\n");
    }
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

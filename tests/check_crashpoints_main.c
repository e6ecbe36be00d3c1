/* tests/check_crashpoints: the pool's suites that make processes die at
 * named crash points.  Crash points exist only in builds configured with
 * --enable-debug, and recovery only with the robust mutex: elsewhere the
 * program says so and exits 77, which the test harness reports as a skip
 * rather than as a pass of nothing. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>

#include "check_pool.h"

int main(void)
{
    if (POOL_CONFIG_DEBUG == 0 || POOL_CONFIG_SPINLOCK) {
        printf("check_crashpoints: SKIP: %s\n",
               POOL_CONFIG_DEBUG == 0 ? "this build has no crash points (configure --enable-debug)"
                                      : "spin locks have no owner to find dead (no recovery)");
        return 77;
    }
    SRunner *sr = srunner_create(make_crash_points_suite());
    srunner_add_suite(sr, make_recovery_points_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

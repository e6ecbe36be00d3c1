/* SPDX-License-Identifier: BSD-2-Clause */
/* Runner for tests/check_poold: every suite in check_poold.h.  With --unit
 * (make check-unit) only the parsers' suites run, no server is started. */
#include "config.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "check_poold.h"

int main(int argc, char **argv)
{
    bool unit_only = argc > 1 && strcmp(argv[1], "--unit") == 0;
    SRunner *sr = srunner_create(make_config_suite());
    int failed;

    srunner_add_suite(sr, make_http_suite());
    srunner_add_suite(sr, make_routes_suite());
    if (!unit_only) {
        srunner_add_suite(sr, make_e2e_suite());
        srunner_add_suite(sr, make_crash_e2e_suite());
    }
    /* A failing end-to-end test quotes the server's log, up to 64 KiB:
     * past Check's default of 4 KiB the test process exits 2 and the
     * verdict, message and all, is lost. */
    check_set_max_msg_size(72 << 10);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

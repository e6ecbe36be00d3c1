/* Runner for tests/check_poold: every suite in check_poold.h. */
#include "config.h"

#include <stdlib.h>

#include "check_poold.h"

int main(void)
{
    SRunner *sr = srunner_create(make_config_suite());
    int failed;

    srunner_add_suite(sr, make_http_suite());
    srunner_add_suite(sr, make_routes_suite());
    srunner_add_suite(sr, make_e2e_suite());
    srunner_add_suite(sr, make_crash_e2e_suite());
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

/* SPDX-License-Identifier: BSD-2-Clause */
/* poold's Check suites and the helpers the end-to-end suites share. */
#ifndef CHECK_POOLD_H
#define CHECK_POOLD_H

#include <check.h>

Suite *make_config_suite(void);
Suite *make_http_suite(void);
Suite *make_routes_suite(void);
Suite *make_e2e_suite(void);
Suite *make_crash_e2e_suite(void);

/* Monotonic milliseconds, and a sleep that survives signals (check_e2e.c). */
long test_now_ms(void);
void test_sleep_ms(long ms);

#endif

/* SPDX-License-Identifier: BSD-2-Clause */
/* The pool's own formatter (shm/libc.c, pool_snprintf_): every conversion
 * it supports, checked against the C library's snprintf where the two
 * agree, and what it does alone (%p of NULL, unknown conversions, a
 * trailing '%'); truncation returns the length the whole output needs and
 * always ends the buffer with a NUL.  Entry point: make_libc_suite().
 */
#include "config.h"

#include <check.h>
#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

#include "check_pool.h"
#include "pool-internal.h"

/* Format with both and compare text and length. */
#define SAME(fmt, ...)                                                        \
    do {                                                                      \
        char ours_[128], libc_[128];                                          \
        size_t n_ = pool_snprintf_(ours_, sizeof ours_, fmt, __VA_ARGS__);    \
        int m_ = snprintf(libc_, sizeof libc_, fmt, __VA_ARGS__);             \
        ck_assert_str_eq(ours_, libc_);                                       \
        ck_assert_uint_eq(n_, (size_t)m_);                                    \
    } while (0)

/* Formats the compiler must not check: the unknown and the malformed. */
static size_t unchecked(char *buf, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    size_t n = pool_vsnprintf_(buf, cap, fmt, ap);
    va_end(ap);
    return n;
}

START_TEST(test_integers)
{
    SAME("%d|%d|%d|%i", 0, 42, -42, INT_MIN);
    SAME("%d %d", INT_MAX, -1);
    SAME("%ld %ld %ld", 0L, LONG_MAX, LONG_MIN);
    SAME("%lld %lld %lli", LLONG_MAX, LLONG_MIN, -7LL);
    SAME("%zd %zd", (ssize_t)-5, (ssize_t)SSIZE_MAX);
    SAME("%u %u %u", 0u, 7u, UINT_MAX);
    SAME("%lu %llu", ULONG_MAX, ULLONG_MAX);
    SAME("%zu %zu", (size_t)0, SIZE_MAX);
    SAME("%x %x %x", 0u, 0xabcdefu, UINT_MAX);
    SAME("%lx %llx %zx", 0x1234abcdUL, 0xfedcba9876543210ULL, (size_t)0xff);
    /* The width of an argument comes from its modifier, not its value. */
    SAME("%u-%d-%lu", UINT_MAX, -1, 1UL << 40);
}
END_TEST

START_TEST(test_strings_and_chars)
{
    SAME("%s", "");
    SAME("[%s] [%s]", "abc", "with spaces");
    SAME("%c%c%c", 'o', 'k', '!');
    SAME("100%% %s", "sure");
    SAME("%p", (void *)0x7f00dead0010);

    char buf[32];
    ck_assert_uint_eq(pool_snprintf_(buf, sizeof buf, "plain text"), 10);
    ck_assert_str_eq(buf, "plain text");
    ck_assert_uint_eq(pool_snprintf_(buf, sizeof buf, "%p", (void *)NULL), 3);
    ck_assert_str_eq(buf, "0x0");
    ck_assert_uint_eq(unchecked(buf, sizeof buf, "<%s>", (const char *)NULL), 8);
    ck_assert_str_eq(buf, "<(null)>");
}
END_TEST

/* What it does not know it prints as written; a lone '%' at the end is
 * dropped, and nothing is read past the format's NUL. */
START_TEST(test_unknown_conversions)
{
    char buf[32];
    ck_assert_uint_eq(unchecked(buf, sizeof buf, "%q%f|%d", 5), 6);
    ck_assert_str_eq(buf, "%q%f|5");
    ck_assert_uint_eq(unchecked(buf, sizeof buf, "end%"), 3);
    ck_assert_str_eq(buf, "end");
}
END_TEST

/* Truncation: the length the whole output needs, at most cap - 1 bytes
 * written and a NUL after them; cap 0 writes nothing at all. */
START_TEST(test_truncation)
{
    char buf[16];
    memset(buf, 'X', sizeof buf);
    ck_assert_uint_eq(pool_snprintf_(buf, 8, "%s=%d", "answer", 4242), 11);
    ck_assert_str_eq(buf, "answer=");
    ck_assert_int_eq(buf[8], 'X');

    for (size_t cap = 1; cap <= 12; cap++) {
        memset(buf, 'X', sizeof buf);
        ck_assert_uint_eq(pool_snprintf_(buf, cap, "%x-%s", 0xbeefu, "tail"), 9);
        ck_assert_uint_eq(strlen(buf), cap - 1 < 9 ? cap - 1 : 9);
        ck_assert(strncmp(buf, "beef-tail", strlen(buf)) == 0);
        ck_assert_int_eq(buf[cap < 10 ? cap : 10], 'X');
    }

    memset(buf, 'X', sizeof buf);
    ck_assert_uint_eq(pool_snprintf_(buf, 0, "%s", "nothing"), 7);
    ck_assert_int_eq(buf[0], 'X');
    ck_assert_uint_eq(pool_snprintf_(buf, 1, "%d", 123), 3);
    ck_assert_str_eq(buf, "");
}
END_TEST

Suite *make_libc_suite(void)
{
    Suite *s = suite_create("libc");
    TCase *tc = tcase_create("format");
    tcase_add_test(tc, test_integers);
    tcase_add_test(tc, test_strings_and_chars);
    tcase_add_test(tc, test_unknown_conversions);
    tcase_add_test(tc, test_truncation);
    suite_add_tcase(s, tc);
    return s;
}

/* SPDX-License-Identifier: BSD-2-Clause */
/* Unit tests of the command line: defaults, every option in short and long
 * form, and every kind of bad argument (which must name the problem in one
 * line). */
#include "config.h"

#include <string.h>
#include <unistd.h>
#include <netinet/in.h>

#include "check_poold.h"
#include "poold.h"

#define ARGV(...) ((char *[]){"poold", __VA_ARGS__, NULL})

static pd_config_t cfg;
static char err[256];

static pd_config_result_t parse(int argc, char **argv)
{
    return pd_config_parse(&cfg, argc, argv, err, sizeof(err));
}

START_TEST(test_defaults)
{
    char *argv[] = {"poold", NULL};
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);

    ck_assert_int_eq(parse(1, argv), PD_CONFIG_RUN);
    ck_assert_int_eq(cfg.workers, cpus > 256 ? 256 : cpus);
    ck_assert_int_eq(cfg.threads, 0);
    ck_assert_int_eq(pd_config_threads(&cfg), 1);
    ck_assert_int_eq(pd_config_nworkers(&cfg), cfg.workers);
    ck_assert_int_eq(cfg.port, 8080);
    ck_assert_str_eq(cfg.bind, "127.0.0.1");
    ck_assert_int_eq(cfg.addr.ss_family, AF_INET);
    ck_assert_int_eq(ntohs(((struct sockaddr_in *)&cfg.addr)->sin_port), 8080);
    ck_assert(cfg.pin);
    ck_assert_uint_eq(cfg.heap_size, (size_t)1 << 30);
    ck_assert_uint_eq(cfg.max_header, 8192);
    ck_assert_uint_eq(cfg.max_body, 1 << 20);
    ck_assert_int_eq(cfg.max_conns, 1024);
    ck_assert_int_eq(cfg.header_timeout.tv_sec, 10);
    ck_assert_int_eq(cfg.idle_timeout.tv_sec, 15);
    ck_assert_int_eq(cfg.idle_timeout.tv_usec, 0);
    ck_assert_int_eq(cfg.body_timeout.tv_sec, 10);
    ck_assert_int_eq(cfg.body_timeout.tv_usec, 0);
    ck_assert_uint_eq(cfg.body_min_rate, 1024);
    ck_assert_int_eq(cfg.shutdown_timeout.tv_sec, 5);
    ck_assert(!cfg.request_region);
    ck_assert_uint_eq(cfg.region_block, 4096);
    ck_assert_int_eq(cfg.verbose, 0);
}
END_TEST

START_TEST(test_short_options)
{
    char **argv = ARGV("-w", "3", "-p", "0", "-b", "::1", "-v", "-v");

    ck_assert_int_eq(parse(9, argv), PD_CONFIG_RUN);
    ck_assert_int_eq(cfg.workers, 3);
    ck_assert_int_eq(cfg.port, 0);
    ck_assert_str_eq(cfg.bind, "::1");
    ck_assert_int_eq(cfg.addr.ss_family, AF_INET6);
    ck_assert_int_eq(cfg.addrlen, sizeof(struct sockaddr_in6));
    ck_assert_int_eq(cfg.verbose, 2);
}
END_TEST

START_TEST(test_long_options)
{
    char **argv = ARGV("--workers=256", "--port", "65535", "--bind=127.0.0.2",
                       "--no-pin", "--heap-size", "64M", "--max-header", "16K",
                       "--max-body=0", "--max-conns", "7", "--header-timeout", "0.5",
                       "--idle-timeout=2", "--shutdown-timeout", "3600", "--verbose",
                       "--body-timeout", "0.25", "--body-min-rate=64K");

    ck_assert_int_eq(parse(22, argv), PD_CONFIG_RUN);
    ck_assert_int_eq(cfg.workers, 256);
    ck_assert_int_eq(cfg.port, 65535);
    ck_assert_str_eq(cfg.bind, "127.0.0.2");
    ck_assert_int_eq(ntohs(((struct sockaddr_in *)&cfg.addr)->sin_port), 65535);
    ck_assert(!cfg.pin);
    ck_assert_uint_eq(cfg.heap_size, 64u << 20);
    ck_assert_uint_eq(cfg.max_header, 16384);
    ck_assert_uint_eq(cfg.max_body, 0);
    ck_assert_int_eq(cfg.max_conns, 7);
    ck_assert_int_eq(cfg.header_timeout.tv_sec, 0);
    ck_assert_int_eq(cfg.header_timeout.tv_usec, 500000);
    ck_assert_int_eq(cfg.idle_timeout.tv_sec, 2);
    ck_assert_int_eq(cfg.shutdown_timeout.tv_sec, 3600);
    ck_assert_int_eq(cfg.verbose, 1);
    ck_assert_int_eq(cfg.body_timeout.tv_sec, 0);
    ck_assert_int_eq(cfg.body_timeout.tv_usec, 250000);
    ck_assert_uint_eq(cfg.body_min_rate, 65536);
    /* A rate of 0 leaves a fixed deadline; 1G is the top. */
    ck_assert_int_eq(parse(3, ARGV("--body-min-rate", "0")), PD_CONFIG_RUN);
    ck_assert_uint_eq(cfg.body_min_rate, 0);
    ck_assert_int_eq(parse(3, ARGV("--body-min-rate", "1G")), PD_CONFIG_RUN);
    ck_assert_uint_eq(cfg.body_min_rate, 1u << 30);
}
END_TEST

START_TEST(test_region_options)
{
    ck_assert_int_eq(parse(2, ARGV("--request-region")), PD_CONFIG_RUN);
    ck_assert(cfg.request_region);
    ck_assert_uint_eq(cfg.region_block, 4096);
    ck_assert_int_eq(parse(3, ARGV("--region-block=16K", "--request-region")), PD_CONFIG_RUN);
    ck_assert(cfg.request_region);
    ck_assert_uint_eq(cfg.region_block, 16384);
    ck_assert_int_eq(parse(3, ARGV("--region-block", "256")), PD_CONFIG_RUN);
    ck_assert(!cfg.request_region);
    ck_assert_uint_eq(cfg.region_block, 256);
    ck_assert_int_eq(parse(3, ARGV("--region-block", "64M")), PD_CONFIG_RUN);
    ck_assert_uint_eq(cfg.region_block, 64u << 20);
    /* Long options may be abbreviated while unambiguous. */
    ck_assert_int_eq(parse(2, ARGV("--request")), PD_CONFIG_RUN);
    ck_assert(cfg.request_region);
}
END_TEST

/* --threads N: one worker process of N threads, whatever -w defaulted to;
 * an explicit -w may only say 1. */
START_TEST(test_thread_options)
{
    ck_assert_int_eq(parse(3, ARGV("--threads", "4")), PD_CONFIG_RUN);
    ck_assert_int_eq(cfg.threads, 4);
    ck_assert_int_eq(cfg.workers, 1);
    ck_assert_int_eq(pd_config_threads(&cfg), 4);
    ck_assert_int_eq(pd_config_nworkers(&cfg), 4);
    ck_assert_int_eq(parse(3, ARGV("--threads=256", "-w1")), PD_CONFIG_RUN);
    ck_assert_int_eq(cfg.threads, 256);
    ck_assert_int_eq(pd_config_nworkers(&cfg), 256);
    ck_assert_int_eq(parse(4, ARGV("-w", "1", "--threads=1")), PD_CONFIG_RUN);
    ck_assert_int_eq(cfg.threads, 1);
    ck_assert_int_eq(pd_config_nworkers(&cfg), 1);
    /* The last -w counts, as for every repeated option. */
    ck_assert_int_eq(parse(6, ARGV("-w", "3", "-w", "1", "--threads=2")), PD_CONFIG_RUN);
    ck_assert_int_eq(pd_config_nworkers(&cfg), 2);
    ck_assert_int_eq(parse(3, ARGV("-w", "4")), PD_CONFIG_RUN);
    ck_assert_int_eq(cfg.threads, 0);
    ck_assert_int_eq(pd_config_nworkers(&cfg), 4);
}
END_TEST

START_TEST(test_help_version)
{
    ck_assert_int_eq(parse(2, ARGV("-h")), PD_CONFIG_HELP);
    ck_assert_int_eq(parse(2, ARGV("--help")), PD_CONFIG_HELP);
    ck_assert_int_eq(parse(2, ARGV("-V")), PD_CONFIG_VERSION);
    ck_assert_int_eq(parse(2, ARGV("--version")), PD_CONFIG_VERSION);
    /* A bad argument wins over -h: the user must learn about it. */
    ck_assert_int_eq(parse(4, ARGV("-h", "-w", "0")), PD_CONFIG_ERROR);
}
END_TEST

START_TEST(test_sizes)
{
    uint64_t v;

    ck_assert_int_eq(pd_parse_size("0", &v), PD_OK);
    ck_assert_uint_eq(v, 0);
    ck_assert_int_eq(pd_parse_size("8K", &v), PD_OK);
    ck_assert_uint_eq(v, 8192);
    ck_assert_int_eq(pd_parse_size("3m", &v), PD_OK);
    ck_assert_uint_eq(v, 3u << 20);
    ck_assert_int_eq(pd_parse_size("2G", &v), PD_OK);
    ck_assert_uint_eq(v, 2ull << 30);
    ck_assert_int_eq(pd_parse_size("18446744073709551615", &v), PD_OK);
    ck_assert_int_eq(pd_parse_size("18446744073709551616", &v), PD_ERROR);
    ck_assert_int_eq(pd_parse_size("17179869184G", &v), PD_ERROR);
    ck_assert_int_eq(pd_parse_size("", &v), PD_ERROR);
    ck_assert_int_eq(pd_parse_size("K", &v), PD_ERROR);
    ck_assert_int_eq(pd_parse_size("1KB", &v), PD_ERROR);
    ck_assert_int_eq(pd_parse_size("-1", &v), PD_ERROR);
    ck_assert_int_eq(pd_parse_size("+1", &v), PD_ERROR);
    ck_assert_int_eq(pd_parse_size(" 1", &v), PD_ERROR);
    ck_assert_int_eq(pd_parse_size("1T", &v), PD_ERROR);
}
END_TEST

START_TEST(test_seconds)
{
    struct timeval tv;

    ck_assert_int_eq(pd_parse_seconds("0.5", &tv), PD_OK);
    ck_assert_int_eq(tv.tv_sec, 0);
    ck_assert_int_eq(tv.tv_usec, 500000);
    ck_assert_int_eq(pd_parse_seconds("12", &tv), PD_OK);
    ck_assert_int_eq(tv.tv_sec, 12);
    ck_assert_int_eq(tv.tv_usec, 0);
    ck_assert_int_eq(pd_parse_seconds("1.000001", &tv), PD_OK);
    ck_assert_int_eq(tv.tv_usec, 1);
    ck_assert_int_eq(pd_parse_seconds("1.0000001", &tv), PD_ERROR);
    ck_assert_int_eq(pd_parse_seconds("1.", &tv), PD_ERROR);
    ck_assert_int_eq(pd_parse_seconds(".5", &tv), PD_ERROR);
    ck_assert_int_eq(pd_parse_seconds("1e3", &tv), PD_ERROR);
    ck_assert_int_eq(pd_parse_seconds("-1", &tv), PD_ERROR);
    ck_assert_int_eq(pd_parse_seconds("", &tv), PD_ERROR);
}
END_TEST

/* Each bad command line, and a word its message must contain. */
static const struct {
    const char *args[3];
    const char *says;
} bad[] = {
    {{"-w", "0"}, "-w"},
    {{"-w", "257"}, "-w"},
    {{"--workers", "12x"}, "--workers"},
    {{"-w", ""}, "-w"},
    {{"-w", "-1"}, "-1"},
    {{"-w", " 2"}, "-w"},
    {{"-w", "99999999999999999999999"}, "-w"},
    {{"-p", "70000"}, "-p"},
    {{"-p", "-1"}, "-p"},
    {{"--port", "80a"}, "--port"},
    {{"-b", "1.2.3"}, "-b"},
    {{"-b", "localhost"}, "-b"},
    {{"--heap-size", "0"}, "--heap-size"},
    {{"--heap-size", "12Q"}, "--heap-size"},
    {{"--heap-size", "18446744073709551616"}, "--heap-size"},
    /* Below pool_create()'s minimum and above the page map's reach (see
     * check_pagemap.c): refused here, not at start. */
    {{"--heap-size", "4095K"}, "4M to 16384G"},
    {{"--heap-size", "1M"}, "--heap-size"},
    {{"--heap-size", "16385G"}, "4M to 16384G"},
    {{"--heap-size", "65536G"}, "--heap-size"},
    {{"--max-header", "100"}, "--max-header"},
    {{"--max-header", "2M"}, "--max-header"},
    {{"--max-body", "-5"}, "--max-body"},
    {{"--max-conns", "0"}, "--max-conns"},
    {{"--max-conns", "1.5"}, "--max-conns"},
    {{"--header-timeout", "0"}, "--header-timeout"},
    {{"--header-timeout", "-1"}, "--header-timeout"},
    {{"--idle-timeout", "3600.5"}, "--idle-timeout"},
    {{"--shutdown-timeout", "abc"}, "--shutdown-timeout"},
    {{"--body-timeout", "0"}, "--body-timeout"},
    {{"--body-timeout", "3601"}, "--body-timeout"},
    {{"--body-timeout"}, "--body-timeout"},
    {{"--body-min-rate", "1025M"}, "--body-min-rate"},
    {{"--body-min-rate", "-1"}, "--body-min-rate"},
    {{"--body-min-rate", "1.5K"}, "--body-min-rate"},
    {{"--body"}, "--body"},
    {{"--bogus"}, "--bogus"},
    {{"--bogus=1"}, "--bogus"},
    {{"-x"}, "-x"},
    {{"-w"}, "-w"},
    {{"--port"}, "--port"},
    {{"--no-pin=1"}, "--no-pin"},
    {{"--request-region=1"}, "--request-region"},
    {{"--region-block", "255"}, "--region-block"},
    {{"--region-block", "65M"}, "--region-block"},
    {{"--region-block", "4k1"}, "--region-block"},
    {{"--region-block"}, "--region-block"},
    {{"--re"}, "--re"},
    {{"-v", "extra"}, "extra"},
    {{"--threads", "0"}, "--threads"},
    {{"--threads", "257"}, "--threads"},
    {{"--threads", "2x"}, "--threads"},
    {{"--threads"}, "--threads"},
    {{"-w2", "--threads=2"}, "-w 2"},
    {{"--threads=4", "-w", "3"}, "-w 3"},
};

START_TEST(test_bad)
{
    char *argv[5] = {"poold", NULL, NULL, NULL, NULL};
    int argc = 1;

    for (int k = 0; k < 3 && bad[_i].args[k] != NULL; k++)
        argv[argc++] = (char *)bad[_i].args[k];
    ck_assert_int_eq(parse(argc, argv), PD_CONFIG_ERROR);
    ck_assert_msg(strlen(err) > 0, "no message");
    ck_assert_msg(strchr(err, '\n') == NULL, "message spans lines: %s", err);
    ck_assert_msg(strstr(err, bad[_i].says) != NULL, "'%s' does not name '%s'", err,
                  bad[_i].says);
}
END_TEST

/* --heap-size takes what the pool can make, both ends included. */
START_TEST(test_heap_size_range)
{
    ck_assert_int_eq(parse(3, ARGV("--heap-size", "4M")), PD_CONFIG_RUN);
    ck_assert_uint_eq(cfg.heap_size, (size_t)4 << 20);
    ck_assert_int_eq(parse(3, ARGV("--heap-size", "16384G")), PD_CONFIG_RUN);
    ck_assert_uint_eq(cfg.heap_size, (size_t)1 << 44);
}
END_TEST

START_TEST(test_format_addr)
{
    char buf[96];

    ck_assert_int_eq(parse(3, ARGV("-b", "::1")), PD_CONFIG_RUN);
    pd_config_format_addr(&cfg, 8081, buf, sizeof(buf));
    ck_assert_str_eq(buf, "[::1]:8081");
    ck_assert_int_eq(parse(1, (char *[]){"poold", NULL}), PD_CONFIG_RUN);
    pd_config_format_addr(&cfg, 80, buf, sizeof(buf));
    ck_assert_str_eq(buf, "127.0.0.1:80");
}
END_TEST

Suite *make_config_suite(void)
{
    Suite *s = suite_create("config");
    TCase *tc = tcase_create("parse");

    tcase_set_timeout(tc, 10);
    tcase_add_test(tc, test_defaults);
    tcase_add_test(tc, test_short_options);
    tcase_add_test(tc, test_long_options);
    tcase_add_test(tc, test_region_options);
    tcase_add_test(tc, test_thread_options);
    tcase_add_test(tc, test_help_version);
    tcase_add_test(tc, test_sizes);
    tcase_add_test(tc, test_seconds);
    tcase_add_loop_test(tc, test_bad, 0, (int)(sizeof(bad) / sizeof(bad[0])));
    tcase_add_test(tc, test_heap_size_range);
    tcase_add_test(tc, test_format_addr);
    suite_add_tcase(s, tc);
    return s;
}

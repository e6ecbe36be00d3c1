# SPDX-License-Identifier: BSD-2-Clause
# The server's Check program: unit suites and end-to-end tests against the
# real binary ($POOLD).  It links libpd only, never the pool, so the same
# tests run unchanged against either build of poold.
check_PROGRAMS += tests/check_poold
TESTS += tests/check_poold
tests_check_poold_SOURCES = \
	tests/poold/check_poold.h tests/poold/check_main.c tests/poold/check_config.c \
	tests/poold/check_http.c tests/poold/check_routes.c tests/poold/check_e2e.c \
	tests/poold/check_crash_e2e.c
tests_check_poold_CFLAGS = $(TEST_CFLAGS)
tests_check_poold_LDADD = src/libpd.la $(CHECK_LIBS)

# The region allocator, alone: src/region.c compiled in without libpd or
# libevent (as the micro-benchmarks use it), under a counting malloc.
check_PROGRAMS += tests/check_region
TESTS += tests/check_region
tests_check_region_SOURCES = tests/poold/check_region.c src/region.h src/region.c
tests_check_region_CFLAGS = $(AM_CFLAGS) $(CHECK_CFLAGS)
tests_check_region_LDADD = $(CHECK_LIBS)
TESTS += tests/poold/region-valgrind.sh
EXTRA_DIST += tests/poold/region-valgrind.sh
